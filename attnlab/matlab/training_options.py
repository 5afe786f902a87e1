"""MATLAB's training options: `trainingOptions`, which makes an `al.TrainingOptions` with
MATLAB's names, defaults and values, and what `options.X` reads and `options.X = v` sets on
them. Training with them is training.py."""
from __future__ import annotations

import os
import warnings
from typing import TYPE_CHECKING, Any

from attnlab.core.errors import ArgumentError
from ._options import MatlabNote, _flag, _inf_none, _int, _parse, _word
from .confinement import _RUN, _inside
from .layouts import parse_formats

if TYPE_CHECKING:
    from ..training import TrainingOptions

__all__ = ['trainingOptions']


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


def _replace(options, **changes):
    """`options.replace(...)`, keeping what trainingOptions recorded beside the fields."""
    new = options.replace(**changes)
    for key, value in options.__dict__.items():
        if key.startswith("_matlab_"):
            new.__dict__[key] = value
    return new
