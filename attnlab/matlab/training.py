"""Training: `trainnet`, the legacy `trainNetwork` and `classify` (the options are
training_options.py).

Inside a script (`run_file`, `run_code`) training is confined: it writes checkpoints and the
training-progress picture only inside the script's output folder (confinement.py), relative
paths are read from that folder, and `ExecutionEnvironment="parallel"`/`"multi-gpu"` trains in
the running process instead of launching workers."""
from __future__ import annotations

import copy
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

from attnlab.core.errors import ArgumentError, DataError, NetworkError
from ..graph.names import parse_port
from ..network import Network
from ..training.losses import Loss
from ._options import MatlabNote, _parse, _word
from .confinement import _RUN, _inside
from .losses import WeightedCrossEntropy  # noqa: F401  (re-exported for callers)
from .networks import _check_net, dlnetwork, layerGraph, output_layers
from .layouts import arrange
from .training_options import _FULL_BATCH, _replace, _reset_normalization
from .values import Categorical, Cell

__all__ = ['trainnet', 'trainNetwork', 'classify']


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
