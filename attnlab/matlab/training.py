"""Training: `trainingOptions`, `trainnet`, the legacy `trainNetwork` and `classify`."""
from __future__ import annotations

import warnings
from typing import Any

from ..errors import ArgumentError, NetworkError
from ..network import Network
from ._options import MatlabNote, _flag, _inf_none, _int, _parse, _word
from .layers import _layer_array
from .networks import _check_net

__all__ = ['trainingOptions', 'trainnet', 'trainNetwork', 'classify']


# ========================================================================== training ===

_SOLVERS = ("sgdm", "adam", "rmsprop", "adamw")

# MATLAB trainingOptions name → attnlab TrainingOptions field (DESIGN §2 and attnlab.training)
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
# MATLAB options accepted at the value that matches what attnlab does
_TRAINING_NOOP = {
    "SequenceLength": ("longest",), "SequencePaddingValue": (0,), "SequencePaddingDirection": ("right",),
    "ResetInputNormalization": (True, False), "BatchNormalizationStatistics": ("auto", "population", "moving"),
    "OutputNetwork": ("auto", "last-iteration"), "InputDataFormats": ("auto",),
    "TargetDataFormats": ("auto",), "DispatchInBackground": (False,),
    "PreprocessingEnvironment": ("serial",), "Acceleration": ("auto",),
}
# MATLAB's defaults, where they differ from attnlab's
_MATLAB_TRAINING_DEFAULTS = {"shuffle": "once", "l2": 1e-4}


def trainingOptions(solverName, *args, **kwargs):
    """`trainingOptions("adam", MaxEpochs=5, ...)` → `al.TrainingOptions(solver="adam",
    max_epochs=5, ...)`, with MATLAB's defaults (Shuffle "once", L2Regularization 1e-4,
    MaxEpochs 30, MiniBatchSize 128, learning rate 0.01 for sgdm, else 0.001).
    Inf (ValidationPatience, GradientThreshold) means no limit; Plots "none" means none."""
    fn = "trainingOptions"
    from ..training import TrainingOptions
    solver = _word(fn, "solverName", solverName, _SOLVERS)
    options = {k: None for k in _TRAINING}
    options.update({k: None for k in _TRAINING_NOOP})
    _, o = _parse(fn, args, kwargs, options)
    fields = {f for f in getattr(TrainingOptions, "__dataclass_fields__", {})}
    values: dict[str, Any] = {"solver": solver}
    values.update({k: v for k, v in _MATLAB_TRAINING_DEFAULTS.items() if k in fields})
    for matlab, value in o.items():
        if value is None:
            continue
        if matlab in _TRAINING_NOOP:
            _training_noop(fn, matlab, value)
            continue
        field = _TRAINING[matlab]
        if fields and field not in fields:
            raise ArgumentError(f"{fn}: expected an option attnlab's TrainingOptions supports, "
                                f"received {matlab} (attnlab's '{field}' is not there). Leave it out.")
        values[field] = _training_value(fn, matlab, value)
    try:
        return TrainingOptions(**values)
    except ArgumentError as e:
        raise ArgumentError(f"{fn}: {e}") from None


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
        word = _word(fn, matlab, value, ("auto", "cpu", "gpu"))
        return {"auto": None, "cpu": "cpu", "gpu": "cuda"}[word]
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


def _training_noop(fn, matlab, value):
    allowed = _TRAINING_NOOP[matlab]
    v = value.lower() if isinstance(value, str) else value
    if v not in allowed:
        raise ArgumentError(
            f"{fn}: expected {matlab} to be {' or '.join(repr(a) for a in allowed)}, received "
            f"{value!r}: that is what attnlab does (mini-batches are padded at the end to their "
            "longest sequence, with a mask).")


_LOSSES = {"crossentropy": "crossentropy", "index-crossentropy": "crossentropy",
           "binary-crossentropy": "binary-crossentropy", "mse": "mse",
           "mean-squared-error": "mse", "l2loss": "mse", "l1loss": "mae", "mae": "mae",
           "mean-absolute-error": "mae", "huber": "huber"}


def _loss(fn, lossFcn):
    if callable(lossFcn):
        return lossFcn
    return _LOSSES[_word(fn, "lossFcn", lossFcn, tuple(_LOSSES))]


def trainnet(*args):
    """`net = trainnet(X, T, net, lossFcn, options)` or `trainnet(data, net, lossFcn, options)`
    (a torch Dataset/DataLoader) → `al.train(net, X, T, loss=..., options=...)`. Trains `net`
    in place and returns it; MATLAB's `info` output is `net.training_info`.
    lossFcn: "crossentropy", "index-crossentropy", "binary-crossentropy", "mse"
    ("mean-squared-error", "l2loss"), "l1loss"/"mae", "huber", or a callable."""
    fn = "trainnet"
    if len(args) == 5:
        X, T, net, lossFcn, options = args
        data = (X, T)
    elif len(args) == 4:
        X, net, lossFcn, options = args
        data = (X,)
    else:
        raise ArgumentError(f"{fn}: expected (X, T, net, lossFcn, options) or (data, net, lossFcn, "
                            f"options), received {len(args)} arguments.")
    _check_net(net, fn)
    from ..training import TrainingOptions, train
    if not isinstance(options, TrainingOptions):
        raise ArgumentError(f"{fn}: expected options from trainingOptions(...), received "
                            f"{type(options).__name__}.")
    info = train(net, *data, loss=_loss(fn, lossFcn), options=options)
    net.training_info = info
    return net


def trainNetwork(*args):
    """Legacy `net = trainNetwork(X, Y, layers, options)` or `trainNetwork(data, layers,
    options)`: builds the network from the layer array (its classificationLayer or
    regressionLayer gives the loss), trains it and returns it."""
    fn = "trainNetwork"
    if len(args) == 4:
        X, Y, layers, options = args
        data = (X, Y)
    elif len(args) == 3:
        X, layers, options = args
        data = (X,)
    else:
        raise ArgumentError(f"{fn}: expected (X, Y, layers, options) or (data, layers, options), "
                            f"received {len(args)} arguments.")
    if isinstance(layers, Network):
        raise ArgumentError(f"{fn}: expected a layer array ending in classificationLayer or "
                            "regressionLayer, received a network. Use trainnet(X, T, net, loss, "
                            "options) with a network.")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MatlabNote)       # the output layer is used right here
        keep, dropped = _layer_array(layers, fn)
    if len(dropped) != 1:
        raise NetworkError(f"{fn}: expected one output layer (classificationLayer or "
                           f"regressionLayer) in the layer array, received {len(dropped)}. Add "
                           "one, or use trainnet(X, T, net, lossFcn, options).")
    net = Network()
    net.add(keep)
    return trainnet(*data, net, dropped[0].loss, options)


def classify(net: Network, *X, **kwargs):
    """Legacy `YPred = classify(net, X)` → `al.classify(net, X)`: class labels."""
    _check_net(net, "classify")
    _parse("classify", (), kwargs, {"MiniBatchSize": 128})
    from ..training import classify as _classify
    return _classify(net, *X)

