"""Training: `trainingOptions`, `trainnet`, the legacy `trainNetwork` and `classify`.

Inside a script (`run_file`, `run_code`) training is confined: it writes checkpoints and the
training-progress picture only inside the script's output folder (`script_outputs`), relative
paths are read from that folder, and `ExecutionEnvironment="parallel"`/`"multi-gpu"` trains in
the running process instead of launching workers."""
from __future__ import annotations

import contextlib
import copy
import os
import warnings
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from attnlab.core.errors import ArgumentError, DataError, NetworkError
from ..graph import parse_port
from ..network import Network
from ..training.losses import Loss
from ._options import MatlabNote, _flag, _inf_none, _int, _parse, _word
from .losses import WeightedCrossEntropy  # noqa: F401  (re-exported for callers)
from .networks import _check_net, dlnetwork, layerGraph, output_layers
from .layouts import arrange, parse_formats
from .values import Categorical, Cell

if TYPE_CHECKING:
    from ..training import TrainingOptions

__all__ = ['trainingOptions', 'trainnet', 'trainNetwork', 'classify']


# ===================================================================== script outputs ===

@dataclass(frozen=True)
class ScriptRun:
    """Where a running script may write: `folder` (resolved: no symlink, no `..`), the reader
    entry point that ran it (`who`, for messages), its `out` (what `disp` prints with) and
    whether it is only analysed (then an outside path is a note, not an error)."""
    folder: Path
    who: str
    out: Callable[..., object]
    analyze: bool = False


_RUN: ContextVar[ScriptRun | None] = ContextVar("attnlab_matlab_script_run", default=None)


@contextlib.contextmanager
def script_outputs(folder: str | os.PathLike[str], who: str = "run_file",
                   out: Callable[..., object] = print, analyze: bool = False) -> Iterator[ScriptRun]:
    """While the block runs, MATLAB training (`trainnet`, `trainNetwork`) writes only inside
    `folder`: `CheckpointPath` and relative paths are read from it, anything resolving outside
    it (through `..` or a symlink) is refused naming the option, the path and the folder, the
    training-progress picture of `Plots="training-progress"` goes into it, and
    `ExecutionEnvironment="parallel"`/`"multi-gpu"` trains in this process (a note says so)
    instead of launching processes. `run_file` and `run_code` run scripts inside it."""
    if isinstance(folder, bytes):
        folder = os.fsdecode(folder)
    if not isinstance(folder, (str, os.PathLike)) or not str(folder):
        raise ArgumentError(f"{who} out_dir: expected a folder (str or pathlib.Path), received "
                            f"{type(folder).__name__} {repr(folder)[:60]}.")
    root = Path(folder).resolve()
    if root.exists() and not root.is_dir():
        raise ArgumentError(f"{who} out_dir: '{folder}' is a file, not a folder. Give the folder "
                            "the script may write into, e.g. out_dir='results'.")
    token = _RUN.set(ScriptRun(root, who, out, analyze))
    try:
        yield _RUN.get()  # type: ignore[misc]
    finally:
        _RUN.reset(token)


def _inside(run: ScriptRun, fn: str, option: str, value, base: Path | None = None) -> Path:
    """`value` (relative to `base`, default the script's folder) resolved, once it is known to
    lie inside the folder the script may write to."""
    p = Path(os.fsdecode(value) if isinstance(value, bytes) else str(value))
    full = (p if p.is_absolute() else (base or run.folder) / p).resolve()
    if full == run.folder or run.folder in full.parents:
        return full
    where = f" (it resolves to '{full}')" if str(full) != str(value) else ""
    message = (f"{fn}: {option} '{value}' is outside the folder this script may write to, "
               f"'{run.folder}'{where}: {run.who} writes only inside it. Give a path inside "
               f"it, e.g. {option}=\"checkpoints\", or choose the folder with "
               f"{run.who}(..., out_dir=FOLDER).")
    if run.analyze:
        warnings.warn(message.replace(f"{run.who} writes only inside it",
                                      f"{run.who} would refuse it"), MatlabNote, stacklevel=3)
        return full
    raise ArgumentError(message)


# ========================================================================== training ===

_SOLVERS = ("sgdm", "adam", "rmsprop", "adamw", "lbfgs", "lm")
# MATLAB's full-batch solvers: trainingOptions accepts them (and their options); attnlab has
# no counterpart, so training with them is refused, naming the solver
_FULL_BATCH = {"lbfgs": "L-BFGS", "lm": "Levenberg–Marquardt"}

# MATLAB trainingOptions name → attnlab TrainingOptions field (see attnlab.training)
_TRAINING = {
    "InitialLearnRate": "learning_rate", "MaxEpochs": "max_epochs", "MiniBatchSize": "batch_size",
    "Shuffle": "shuffle", "ValidationData": "validation_data",
    "ValidationFrequency": "validation_frequency", "ValidationPatience": "validation_patience",
    "Metrics": "metrics", "Plots": "plots", "Verbose": "verbose",
    "VerboseFrequency": "verbose_frequency", "CheckpointPath": "checkpoint_dir",
    "CheckpointFrequency": "checkpoint_frequency",
    "CheckpointFrequencyUnit": "checkpoint_frequency_unit",
    "GradientThreshold": "gradient_threshold", "GradientThresholdMethod": "gradient_threshold_method",
    "L2Regularization": "l2", "Momentum": "momentum", "GradientDecayFactor": "gradient_decay",
    "SquaredGradientDecayFactor": "squared_gradient_decay", "Epsilon": "epsilon",
    "LearnRateSchedule": "learning_rate_schedule", "LearnRateDropPeriod": "learning_rate_drop_period",
    "LearnRateDropFactor": "learning_rate_drop_factor", "ExecutionEnvironment": "device",
    "OutputFcn": "output_fn",
}
# MATLAB options read elsewhere (trainnet, the data layouts) or accepted at the values that
# match what attnlab does; any other value of an option here is accepted with a note
_TRAINING_NOOP = {
    "SequenceLength": ("longest",), "SequencePaddingValue": (0,),
    "SequencePaddingDirection": ("right", "left"), "ResetInputNormalization": (True, False),
    "BatchNormalizationStatistics": ("auto", "moving"), "InputDataFormats": ("auto",),
    "TargetDataFormats": ("auto",), "DispatchInBackground": (False,),
    "PreprocessingEnvironment": ("serial",), "Acceleration": ("auto", "none"),
    "WorkerLoad": (), "ObjectiveMetricName": ("loss",),
    "CategoricalInputEncoding": ("auto",), "CategoricalTargetEncoding": ("auto",),
}
# the options of MATLAB's full-batch solvers (lbfgs, lm): accepted, kept, not used
_FULL_BATCH_OPTIONS = ("MaxIterations", "GradientTolerance", "StepTolerance", "LineSearchMethod",
                       "MaxNumLineSearchIterations", "HistorySize", "InitialInverseHessianFactor",
                       "InitialDampingFactor", "MaxDampingFactor", "DampingIncreaseFactor",
                       "DampingDecreaseFactor")
# MATLAB's defaults, where they differ from attnlab's
_MATLAB_TRAINING_DEFAULTS = {"shuffle": "once", "l2": 1e-4}
# MATLAB's metric names attnlab computes (the others are accepted with a note)
_METRICS = ("accuracy", "rmse", "mae")


def trainingOptions(solverName: str, *args: Any, **kwargs: Any) -> TrainingOptions:
    """`trainingOptions("adam", MaxEpochs=5, ...)` → `al.TrainingOptions(solver="adam",
    max_epochs=5, ...)`, with MATLAB's defaults (Shuffle "once", L2Regularization 1e-4,
    MaxEpochs 30, MiniBatchSize 128, learning rate 0.01 for sgdm, else 0.001).
    Inf (ValidationPatience, GradientThreshold) means no limit; Plots "none" means none.

    Every option MATLAB's trainingOptions takes is accepted. SequenceLength is
    `sequence_length`: "longest" is attnlab's padding, "shortest" cuts each mini-batch to its
    shortest sequence, a number N splits each mini-batch into pieces of N steps trained in
    consecutive iterations with the LSTM/GRU state carried between them (see
    attnlab.training.pieces). Options attnlab does
    not honour (WorkerLoad, DispatchInBackground=true, a SequencePaddingValue other than 0,
    BatchNormalizationStatistics="population", metrics it does not compute, …) are kept with
    one note naming them. The solvers "lbfgs" and "lm" are accepted here and refused when
    training starts (attnlab has no full-batch solver)."""
    fn = "trainingOptions"
    from ..training import TrainingOptions
    solver = _word(fn, "solverName", solverName, _SOLVERS)
    options: dict[str, Any] = {k: None for k in _TRAINING}
    options.update({k: None for k in _TRAINING_NOOP})
    options.update({k: None for k in _FULL_BATCH_OPTIONS})
    options["OutputNetwork"] = "auto"
    _, o = _parse(fn, args, kwargs, options)
    given = {k: v for k, v in o.items() if v is not None and not (k == "OutputNetwork" and
                                                                   v == "auto")}
    output_network = _word(fn, "OutputNetwork", o.pop("OutputNetwork"), _OUTPUT_NETWORKS)
    reset = o.get("ResetInputNormalization")
    fields = {f for f in getattr(TrainingOptions, "__dataclass_fields__", {})}
    # seed None: training draws from the global generator, which rng(seed) seeds, as in MATLAB
    values: dict[str, Any] = {"solver": "sgdm" if solver in _FULL_BATCH else solver, "seed": None}
    values.update({k: v for k, v in _MATLAB_TRAINING_DEFAULTS.items() if k in fields})
    unused: list[str] = []
    for matlab, value in o.items():
        if value is None:
            continue
        if matlab in ("InputDataFormats", "TargetDataFormats"):
            continue                                # read below: trainnet permutes the data
        if matlab in _FULL_BATCH_OPTIONS:
            if solver not in _FULL_BATCH:
                unused.append(f"{matlab} (an option of the \"lbfgs\" and \"lm\" solvers)")
            continue
        if matlab in _TRAINING_NOOP:
            note = _training_noop(fn, matlab, value)
            if note:
                unused.append(note)
            continue
        if matlab == "Metrics":
            value, dropped = _metrics(value)
            unused += dropped
            if not value:
                continue
        field = _TRAINING[matlab]
        if fields and field not in fields:
            raise ArgumentError(f"{fn}: expected an option attnlab's TrainingOptions supports, "
                                f"received {matlab} (attnlab's '{field}' is not there). Leave it out.")
        values[field] = _training_value(fn, matlab, value)
    values["sequence_length"] = _sequence_length(fn, o.get("SequenceLength"))
    best = output_network in ("best-validation-loss", "best-validation") or (
        output_network == "auto" and values.get("validation_data") is not None)
    if best and values.get("validation_data") is None:
        raise ArgumentError(f"{fn}: expected ValidationData with OutputNetwork="
                            f"\"{output_network}\", received none: the best network is chosen by "
                            "its validation loss. Give ValidationData={XVal, YVal}.")
    if best and values.get("validation_patience") is None:
        # attnlab keeps the weights of the best validation loss when a patience is set: a
        # patience that never runs out keeps them without stopping early
        values["validation_patience"] = 2 ** 62
    if not best and values.get("validation_patience") is not None:
        warnings.warn(f"{fn}: OutputNetwork=\"{output_network}\" with ValidationPatience: when "
                      "training stops early attnlab returns the weights of the best validation "
                      "loss (MATLAB's \"best-validation\").", MatlabNote, stacklevel=2)
    if values.get("checkpoint_dir") == "":
        values["checkpoint_dir"] = None                  # MATLAB's default: no checkpoints
    run = _RUN.get()
    path_given = isinstance(values.get("checkpoint_dir"), (str, os.PathLike))
    if run is not None and not run.analyze:
        if path_given:
            values["checkpoint_dir"] = str(_inside(run, fn, "CheckpointPath",
                                                   values["checkpoint_dir"]))
    elif run is not None and path_given:
        _inside(run, fn, "CheckpointPath", values["checkpoint_dir"])        # a note
    try:
        opts = TrainingOptions(**values)
    except ArgumentError as e:
        raise ArgumentError(f"{fn}: {e}") from None
    if solver in _FULL_BATCH:
        unused.insert(0, f"the \"{solver}\" solver ({_FULL_BATCH[solver]}: trainnet and "
                         "trainNetwork refuse to train with it)")
    if unused:
        warnings.warn(f"{fn}: accepted, but attnlab does not honour "
                      + "; ".join(unused) + ".", MatlabNote, stacklevel=2)
    # what the script gave, by MATLAB name (options.X reads it; options.X = v remakes them)
    opts.__dict__["_matlab_given"] = given
    opts.__dict__["_matlab_solver"] = solver
    # MATLAB's ResetInputNormalization, read by trainnet (not a TrainingOptions field)
    opts.__dict__["_matlab_reset_normalization"] = \
        True if reset is None else _flag(fn, "ResetInputNormalization", reset)
    # the data's layouts, read by trainnet/trainNetwork (layouts.py); None is "auto"
    for option, key in (("InputDataFormats", "_matlab_input_formats"),
                        ("TargetDataFormats", "_matlab_target_formats")):
        opts.__dict__[key] = None if o.get(option) is None else \
            parse_formats(fn, option, o[option])
    env = o.get("ExecutionEnvironment")
    # read by trainnet/trainNetwork, which run data-parallel through attnlab's launcher
    opts.__dict__["_matlab_parallel"] = (str(env).lower() if isinstance(env, str) and
                                         str(env).lower() in ("multi-gpu", "parallel") else None)
    return opts


def _metrics(value):
    """(the metrics attnlab computes, notes for the others MATLAB has)."""
    vals = [value] if isinstance(value, str) or callable(value) else list(value)
    kept, dropped = [], []
    for v in vals:
        if callable(v) or isinstance(v, str) and v.lower() in _METRICS:
            kept.append(v)
        else:
            dropped.append(f"Metrics {v!r} (attnlab computes {', '.join(_METRICS)})"
                           if isinstance(v, str) else f"a metric object ({type(v).__name__})")
    return kept, dropped


def _sequence_length(fn, value):
    """SequenceLength: "longest" (None: attnlab's own padding), "shortest", or a whole number."""
    if value is None:
        return None
    if isinstance(value, str):
        word = _word(fn, "SequenceLength", value, ("longest", "shortest"))
        return None if word == "longest" else word
    return _int(fn, "SequenceLength", value)


# MATLAB property names of the options, and how their values read back
_READ_BACK = {"MaxEpochs": 30, "MiniBatchSize": 128, "Shuffle": "once", "Verbose": True,
              "VerboseFrequency": 50, "ValidationFrequency": 50, "Plots": "none",
              "L2Regularization": 1e-4, "GradientThresholdMethod": "l2norm",
              "SequenceLength": "longest", "SequencePaddingValue": 0,
              "SequencePaddingDirection": "right", "ExecutionEnvironment": "auto",
              "CheckpointPath": "", "CheckpointFrequency": 1, "CheckpointFrequencyUnit": "epoch",
              "LearnRateSchedule": "none", "LearnRateDropPeriod": 10, "LearnRateDropFactor": 0.1,
              "OutputNetwork": "auto", "ResetInputNormalization": True,
              "BatchNormalizationStatistics": "auto", "InputDataFormats": "auto",
              "TargetDataFormats": "auto", "ObjectiveMetricName": "loss", "Acceleration": "auto",
              "Momentum": 0.9, "GradientDecayFactor": 0.9, "Epsilon": 1e-8,
              "DispatchInBackground": False, "PreprocessingEnvironment": "serial"}


def _names_of(opts) -> list[str]:
    solver = opts.__dict__.get("_matlab_solver", opts.solver)
    names = list(_TRAINING) + list(_TRAINING_NOOP) + ["OutputNetwork"]
    if solver in _FULL_BATCH:
        names += list(_FULL_BATCH_OPTIONS)
    return names


def get_option(opts, name: str):
    """`options.MaxEpochs`: the value given, else MATLAB's default (the learn rate and decay
    factors as the solver uses them)."""
    names = _names_of(opts)
    if name == "SolverName":
        return opts.__dict__.get("_matlab_solver", opts.solver)
    if name not in names:
        from attnlab.core.errors import close_matches
        raise ArgumentError(f"Unrecognized property '{name}' of the training options."
                            f"{close_matches(name, names)}")
    given = opts.__dict__.get("_matlab_given", {})
    if name in given:
        return given[name]
    if name == "InitialLearnRate":
        return opts.lr
    if name in ("ValidationPatience", "GradientThreshold"):
        v = getattr(opts, _TRAINING[name])
        return float("inf") if v is None or v >= 2 ** 62 else v
    if name == "SquaredGradientDecayFactor":
        solver = opts.__dict__.get("_matlab_solver", opts.solver)
        return opts.squared_gradient_decay or (0.9 if solver == "rmsprop" else 0.999)
    field = _TRAINING.get(name)
    if field is not None and name not in _READ_BACK:
        v = getattr(opts, field)
        return [] if v is None else v
    return _READ_BACK.get(name, [])


def set_option(opts, name: str, value):
    """`options.InitialLearnRate = 1e-2`: new options with that option set, checked as
    trainingOptions checks it (MATLAB's options are values: copies keep theirs)."""
    names = _names_of(opts)
    if name == "SolverName":
        raise ArgumentError("Unable to set the 'SolverName' property of the training options "
                            "because it is read-only: make new options with "
                            "trainingOptions(solverName, ...).")
    if name not in names:
        from attnlab.core.errors import close_matches
        raise ArgumentError(f"Unrecognized property '{name}' of the training options."
                            f"{close_matches(name, names)}")
    given = opts.__dict__.get("_matlab_given")
    if given is not None:
        solver = opts.__dict__.get("_matlab_solver", opts.solver)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MatlabNote)   # notes were given when first made
            new = trainingOptions(solver, **{**given, name: value})
        return new
    field = _TRAINING.get(name)
    if field is None:
        raise ArgumentError(f"options.{name}: these options were made in Python; set "
                            f"{name} with trainingOptions(solverName, {name}=...).")
    return _replace(opts, **{field: _training_value("trainingOptions", name, value)})


_OUTPUT_NETWORKS = ("auto", "last-iteration", "best-validation-loss", "best-validation")


def _reset_normalization(options) -> bool:
    return options.__dict__.get("_matlab_reset_normalization", True)


def _training_value(fn, matlab, value):
    if matlab in ("ValidationPatience", "GradientThreshold"):
        value = _inf_none(value)
        return value if value is None or matlab == "GradientThreshold" else _int(fn, matlab, value)
    if matlab in ("MaxEpochs", "MiniBatchSize", "ValidationFrequency", "VerboseFrequency",
                  "CheckpointFrequency", "LearnRateDropPeriod"):
        return _int(fn, matlab, value)
    if matlab == "Verbose":
        return _flag(fn, matlab, value)
    if matlab == "Plots":
        word = _word(fn, matlab, value, ("none", "training-progress"))
        return None if word == "none" else word
    if matlab == "LearnRateSchedule" and isinstance(value, str):
        word = value.lower()
        return None if word == "none" else word
    if matlab == "ExecutionEnvironment":
        word = _word(fn, matlab, value, ("auto", "cpu", "gpu", "multi-gpu", "parallel"))
        return {"auto": None, "cpu": "cpu", "gpu": "cuda", "multi-gpu": "cuda",
                "parallel": None}[word]
    if matlab == "ValidationData" and type(value).__name__ in ("ImageDatastore",
                                                               "CombinedDatastore"):
        from .data import as_training_data
        return tuple(as_training_data(value, None, fn))    # ValidationData=imdsValidation
    if matlab == "ValidationData" and isinstance(value, list) and len(value) == 2:
        return tuple(value)                               # MATLAB's {X, Y}
    if matlab == "Metrics":
        vals = [value] if isinstance(value, str) else list(value)
        return [v.lower() if isinstance(v, str) else v for v in vals]
    if matlab in ("Shuffle", "CheckpointFrequencyUnit", "GradientThresholdMethod") and isinstance(value, str):
        return value.lower()
    if matlab in ("InitialLearnRate", "L2Regularization", "Momentum", "GradientDecayFactor",
                  "SquaredGradientDecayFactor", "Epsilon", "LearnRateDropFactor"):
        return float(value)
    return value


def _training_noop(fn, matlab, value) -> str | None:
    """None when the value is what attnlab does; else the note naming it (MATLAB accepts it,
    attnlab does not honour it). SequenceLength is checked here and set as sequence_length."""
    if matlab == "SequenceLength":
        _sequence_length(fn, value)
        return None
    allowed = _TRAINING_NOOP[matlab]
    v = value.lower() if isinstance(value, str) else value
    if isinstance(v, bool) or v in allowed:
        if isinstance(v, bool) and allowed and v not in allowed:
            return f"{matlab}={str(v).lower()}"
        return None
    shown = f"\"{value}\"" if isinstance(value, str) else repr(value)
    why = {"SequencePaddingValue": " (attnlab masks the padding, so layers never see it)",
           "BatchNormalizationStatistics": " (attnlab keeps moving averages)",
           "ObjectiveMetricName": " (the best network is chosen by validation loss)",
           "WorkerLoad": " (attnlab splits the mini-batch evenly)"}.get(matlab, "")
    return f"{matlab}={shown}{why}"


_LOSSES = {"crossentropy": "crossentropy", "index-crossentropy": "crossentropy",
           "binary-crossentropy": "binary-crossentropy", "mse": "mse",
           "mean-squared-error": "mse", "l2loss": "mse", "l1loss": "mae", "mae": "mae",
           "mean-absolute-error": "mae", "huber": "huber"}


def _loss(fn, lossFcn):
    if callable(lossFcn):
        return lossFcn
    return _LOSSES[_word(fn, "lossFcn", lossFcn, tuple(_LOSSES))]


def _labels(net, Y, classes=None):
    """MATLAB targets → what al.train takes: a categorical becomes its labels, its categories
    (or the output layer's Classes) fix the class order in net.metadata["class_labels"]."""
    if isinstance(Y, Categorical):
        order = list(classes) if classes is not None else Y.categories
        if (Y.codes() < 0).any():
            raise DataError("trainNetwork: expected every response to be a category, received "
                            "<undefined> values. Remove those observations.")
        net.metadata["class_labels"] = [str(c) for c in order]
        return np.array([str(v) for v in Y.values], dtype=object)
    if classes is not None:
        net.metadata["class_labels"] = list(classes)
    return Y


def _fit_normalization(net, X, options, fn):
    """Computes the statistics of every InputNormalization layer from the training data (all
    observations, time steps and pixels, per channel), as MATLAB does when training starts."""
    from .mlayers import InputNormalization
    norms = [l for l in net.layers if isinstance(l, InputNormalization)]
    if not norms:
        return
    if not net.initialized:
        net.initialize()
    reset = _reset_normalization(options)
    inputs = net.input_names
    for layer in norms:
        module = net.layer_modules[layer.name]
        if not reset and bool(module.fitted):
            continue
        src = next(parse_port(str(c.source))[0] for c in net.connections
                   if parse_port(str(c.destination))[0] == layer.name)
        data = X.get(src) if isinstance(X, dict) else X if len(inputs) == 1 else None
        if data is None:
            raise DataError(f"{fn}: expected the training data of input '{src}' to compute its "
                            f"Normalization \"{layer.method}\", received none. Give X as a "
                            "dict by input name.")
        module.fit(_units(data, net, src, fn))


def _units(data, net, src, fn):
    """Training data of one input → a U×C matrix of its values (channels last)."""
    spec = net.analyze().out_specs[src]["out"]
    if isinstance(data, (list, tuple)) and not isinstance(data, str):
        parts = [torch.as_tensor(np.asarray(x), dtype=torch.float32) for x in data]
        return torch.cat([p.reshape(-1, p.shape[-1]) for p in parts], 0)
    if isinstance(data, torch.utils.data.Dataset) or not hasattr(data, "shape") and \
            not isinstance(data, np.ndarray):
        raise DataError(f"{fn}: expected in-memory training data (an array or a cell array of "
                        f"sequences) to compute input '{src}''s normalization, received "
                        f"{type(data).__name__}. Give the data as arrays, or the statistics "
                        "(Mean=…, StandardDeviation=…, Min=…, Max=…) with "
                        "ResetInputNormalization=false.")
    x = torch.as_tensor(np.asarray(data) if not torch.is_tensor(data) else data).float()
    cdim = spec.labels.index("C")
    return x.movedim(cdim, -1).reshape(-1, x.shape[cdim])


def trainnet(*args: Any) -> Network:
    """`net = trainnet(X, T, net, lossFcn, options)` or `trainnet(data, net, lossFcn, options)`
    (a torch Dataset/DataLoader, or an arrayDatastore/combine) → `al.train(net, X, T, loss=...,
    options=...)`. `net` may be a dlnetwork or a layer array (made into a dlnetwork). Trains the
    network in place and returns it; MATLAB's `info` output is `net.training_info` (and the second
    output of `[net, info] = trainnet(...)` in scripts).
    lossFcn: "crossentropy", "index-crossentropy", "binary-crossentropy", "mse"
    ("mean-squared-error", "l2loss"), "l1loss"/"mae", "huber", or a callable."""
    fn = "trainnet"
    if len(args) == 5:
        X, T, net, lossFcn, options = args
    elif len(args) == 4:
        X, net, lossFcn, options = args
        T = None
    else:
        raise ArgumentError(f"{fn}: expected (X, T, net, lossFcn, options) or (data, net, lossFcn, "
                            f"options), received {len(args)} arguments.")
    if isinstance(net, (list, tuple)) or not isinstance(net, Network) and hasattr(net, "infer"):
        refused = output_layer_error(fn, net)
        if refused is not None:
            raise NetworkError(refused)
        net = dlnetwork(net)
    return _train(fn, X, T, net, _loss(fn, lossFcn) if not isinstance(lossFcn, (Loss, dict))
                  else lossFcn, options)


def output_layer_error(fn, layers) -> str | None:
    """MATLAB's refusal of a layer array with an output layer given to trainnet (its loss is
    trainnet's argument), or None."""
    from .layers import OutputLayer
    flat = layers if isinstance(layers, (list, tuple)) else [layers]
    found = next((x for x in flat if isinstance(x, OutputLayer)), None)
    if found is None:
        return None
    return (f"{fn}: layer '{found.name or found.kind}' ({found.kind}) is an output layer, and "
            f"trainnet takes a network without output layers (MATLAB refuses it too). Remove "
            f"{found.kind} from the layers and give its loss to trainnet: trainnet(X, T, net, "
            f"\"{found.loss}\", options); or train the layer array with trainNetwork(X, Y, "
            "layers, options)")


def _train(fn, X, T, net, loss, options, classes=None):
    _check_net(net, fn)
    from ..training import TrainingOptions, train
    if not isinstance(options, TrainingOptions):
        raise ArgumentError(f"{fn}: expected options from trainingOptions(...), received "
                            f"{type(options).__name__}.")
    # a GPU that is not there: the core's device error names ExecutionEnvironment
    from .data import as_training_data
    X, T = as_training_data(X, T, fn)
    solver = options.__dict__.get("_matlab_solver")
    if solver in _FULL_BATCH:
        raise ArgumentError(f"{fn}: trainingOptions(\"{solver}\") asks for the "
                            f"{_FULL_BATCH[solver]} solver, which attnlab's training does not "
                            "have (it trains with \"sgdm\", \"adam\", \"rmsprop\" or "
                            "\"adamw\"). Make the options with one of those, e.g. "
                            "trainingOptions(\"adam\", ...).")
    X, T = arrange(fn, net, X, T, options)        # MATLAB data formats → attnlab's layouts
    if T is not None:
        T = _labels(net, T, classes)
    vd = options.validation_data
    if isinstance(vd, tuple) and len(vd) == 2 and isinstance(vd[1], Categorical):
        options = _replace(options, validation_data=(
            vd[0], np.array([str(v) for v in vd[1].values], dtype=object)))
    options = _confined(fn, options)
    _fit_normalization(net, X, options, fn)
    from .factors import has_factors, mark_parameters
    from .weights import apply_presets, has_presets
    if not net.initialized and (has_presets(net) or has_factors(net)) and hasattr(X, "shape"):
        net.initialize(X[:1])              # presets need the built modules before step one
    apply_presets(net)
    if has_factors(net):
        if not net.initialized:
            raise ArgumentError(f"{fn}: learn-rate and L2 factors need the network's sizes "
                                "before training: give it an input layer, or initialize(net, X).")
        mark_parameters(net)               # the optimizer's parameter groups read them
    data = (X,) if T is None else (X, T)
    _launch_parallel(fn, options)
    info = train(net, *data, loss=loss, options=options)
    net.training_info = info
    return net


def _replace(options, **changes):
    """`options.replace(...)`, keeping what trainingOptions recorded beside the fields."""
    new = options.replace(**changes)
    for key, value in options.__dict__.items():
        if key.startswith("_matlab_"):
            new.__dict__[key] = value
    return new


def _confined(fn, options):
    """Inside a script: the options' files checked to lie in the script's folder (options
    made in Python and given in the workspace included: their relative paths are where
    training writes them, the current folder), and the training-progress picture placed there."""
    run = _RUN.get()
    if run is None:
        return options
    here = Path.cwd()
    changes: dict[str, Any] = {}
    for field, option in (("checkpoint_dir", "CheckpointPath"), ("log_dir", "log_dir"),
                          ("plots_file", "plots_file")):
        value = getattr(options, field, None)
        if value is not None:
            changes[field] = str(_inside(run, fn, option, value, base=here))
    if options.plots == "training-progress" and options.plots_file is None:
        folder = Path(changes.get("log_dir") or changes.get("checkpoint_dir") or run.folder)
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ArgumentError(f"{fn}: cannot create the folder '{folder}' for the "
                                f"training-progress picture ({e.strerror or e}). Give "
                                f"{run.who} an out_dir you can write to.") from None
        changes["plots_file"] = str(folder / "training-progress.png")
    return _replace(options, **changes) if changes else options


def _launch_parallel(fn, options) -> None:
    """ExecutionEnvironment "multi-gpu" (one process per GPU) or "parallel" (per GPU, else per
    CPU core, gloo): the program is run again under torchrun by attnlab's launcher, and each
    worker trains its share under DDP when it reaches this call; the launching process exits
    with the workers' status once they are done. One GPU: trains here. Inside a script
    (`run_file`, `run_code`) nothing is launched: training runs in this process, with a note."""
    word = options.__dict__.get("_matlab_parallel")
    if word is None:
        return
    from ..training.distributed import in_launch, launch
    if in_launch():
        return
    if torch.cuda.device_count() == 0 and word == "multi-gpu":
        from attnlab.core.errors import TrainingError
        raise TrainingError(f"{fn}: ExecutionEnvironment=\"multi-gpu\" needs CUDA GPUs; torch "
                            "sees none on this machine. Use \"parallel\" (CPU processes), "
                            "\"cpu\" or \"auto\".")
    run = _RUN.get()
    if run is not None:
        note = (f"{fn}: ExecutionEnvironment=\"{word}\" trains in this process: {run.who} "
                "never starts processes. To train data-parallel, call it from a Python script "
                "started with al.launch(N) at its top (or under python -m "
                "torch.distributed.run --nproc-per-node=N).")
        warnings.warn(note, MatlabNote, stacklevel=3)
        run.out(f"note: {note}")
        return
    nproc: int | str = "gpu" if torch.cuda.device_count() > 0 else \
        max(1, min(os.cpu_count() or 1, 8))
    launch(nproc)


def trainNetwork(*args: Any) -> Network:
    """Legacy `net = trainNetwork(X, Y, layers, options)` or `trainNetwork(data, layers,
    options)`: `layers` is a layer array or a layerGraph ending in classificationLayer (loss
    "crossentropy", weighted by its ClassWeights, classes in its Classes order) or
    regressionLayer ("mse"). Trains a copy (the layer graph stays as it is) and returns it."""
    fn = "trainNetwork"
    if len(args) == 4:
        X, Y, layers, options = args
    elif len(args) == 3:
        X, layers, options = args
        Y = None
    else:
        raise ArgumentError(f"{fn}: expected (X, Y, layers, options) or (data, layers, options), "
                            f"received {len(args)} arguments.")
    if isinstance(layers, Network):
        outputs = output_layers(layers)
        net = copy.deepcopy(layers)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MatlabNote)       # the output layer is used right here
            net = layerGraph(layers)
        outputs = output_layers(net)
    if not outputs:
        raise NetworkError(f"{fn}: expected an output layer (classificationLayer or "
                           "regressionLayer) at the end of the layers, received none. Add one, "
                           "e.g. [layers; softmaxLayer; classificationLayer], or use "
                           "trainnet(X, T, net, lossFcn, options).")
    loss, classes = _output_losses(net, outputs, fn)
    return _train(fn, X, Y, net, loss, options, classes)


def _output_losses(net, outputs, fn):
    """(the loss, or a dict by network output; the Classes of a single classificationLayer)."""
    if len(outputs) == 1:
        o = outputs[0]
        return o.make_loss(), o.classes
    by_output = {}
    for o in outputs:
        src = o.source.name if hasattr(o.source, "name") else o.source
        match = [n for n in net.output_names if parse_port(n)[0] == src]
        if not match:
            raise NetworkError(f"{fn}: output layer '{o.name}' ({o.kind}) is fed by "
                               f"'{src}', which is not a network output. Connect it to a layer "
                               f"whose output is unconnected: connectLayers(lgraph, "
                               f"\"{net.output_names[0] if net.output_names else 'fc'}\", "
                               f"\"{o.name}\").")
        by_output[match[0]] = o.make_loss()
    return by_output, None


def classify(net: Network, *X: Any, **kwargs: Any) -> Categorical | Cell:
    """Legacy `YPred = classify(net, X)` → `al.classify(net, X)` as a categorical array, as in
    MATLAB: its categories are the classes in training order (`net.metadata["class_labels"]`,
    else the labels predicted), so `mean(YPred == YTest)` is the accuracy. Sequence-to-sequence
    predictions (one label per time step) are a cell array with one categorical per
    observation."""
    _check_net(net, "classify")
    from ._options import split_pairs
    from .networks import _SEQUENCE_OPTIONS, _sequence_options
    options = {"MiniBatchSize": 128, "ExecutionEnvironment": "auto", "Acceleration": "auto",
               **_SEQUENCE_OPTIONS}
    X, pairs = split_pairs(X, options)      # classify(net, X, 'SequenceLength', 'longest')
    X = tuple(x.images if type(x).__name__ == "ImageDatastore" else x for x in X)
    from .layouts import auto_predictors
    X = auto_predictors(net, X)                 # MATLAB's C×T sequences, as training reads them
    _sequence_options("classify", _parse("classify", pairs, kwargs, options)[1])
    one = len(X) == 1 and getattr(X[0], "ndim", 0) == 2 and \
        type(net.layers[0]).__name__ == "SequenceInput"
    if one:                                     # classify(net, XTest{1}): one sequence
        X = ([X[0]],)
    from ..training import classify as _classify
    labels = _classify(net, *X)
    classes = _class_names(net)
    if isinstance(labels, list):
        out = Cell(_as_categorical(np.asarray(v), classes) for v in labels)
    else:
        labels = np.asarray(labels)
        if labels.ndim <= 1:
            return _as_categorical(labels, classes)
        out = Cell(_as_categorical(row, classes) for row in labels)
    return out[0] if one else out


def _class_names(net) -> list[str] | None:
    names = net.metadata.get("class_labels")
    if isinstance(names, dict):                      # by output: classify reads the first
        names = names.get(net.output_names[0]) if net.output_names else None
    return None if names is None else [_label(v) for v in names]


def _label(v) -> str:
    v = v.item() if isinstance(v, np.generic) else v
    return str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)


def _as_categorical(labels: np.ndarray, classes: list[str] | None) -> Categorical:
    values = [_label(v) for v in labels.reshape(-1).tolist()]
    if classes is None:
        try:
            found = sorted(set(labels.reshape(-1).tolist()))
        except TypeError:
            found = sorted(set(labels.reshape(-1).tolist()), key=str)
        classes = [_label(v) for v in found]
    return Categorical(values, classes)
