"""MATLAB properties of attnlab objects, read and set by name in scripts (`net.Layers`,
`layer.Name`, `options.MaxEpochs`, `net.Learnables`, …). Only the names listed here are
reachable: a script never reaches a Python attribute directly.

MATLAB's layers and training options are values: setting a property makes a changed copy
(`b = a; b.Name = "x"` leaves `a` as it was), which the interpreter stores back. Only the
properties MATLAB lets a script set are settable (a layer's Name, its weights, initializers
and factors, and a few hyperparameters such as a dropout Probability); the others are
read-only, in MATLAB's words."""
from __future__ import annotations

from typing import Any

import numpy as np

from attnlab.core.errors import ArgumentError, close_matches
from ..layers.base import Layer
from ..network import Network


def _net_props(net: Network) -> dict:
    from .weights import remember_owner
    return {"Layers": lambda: remember_owner(net, list(net.layers)),
            "InputNames": lambda: _cellstr(net.input_names),
            "OutputNames": lambda: _cellstr(net.output_names),
            "Connections": lambda: _connections(net),
            "Initialized": lambda: net.initialized,
            "Learnables": lambda: learnables_table(net),
            "State": lambda: _state(net)}


def _cellstr(names):
    from .values import Cell
    return Cell(str(n) for n in names)


def _connections(net):
    from .objects import StringArray, Table
    pairs = [(str(c.source), str(c.destination)) if hasattr(c, "source") else (str(c), "")
             for c in net.connections]
    return Table({"Source": StringArray(p[0] for p in pairs),
                  "Destination": StringArray(p[1] for p in pairs)})


def learnables_table(net: Network):
    """`net.Learnables`: MATLAB's table of the learnable parameters, one row each — `Layer`
    and `Parameter` (MATLAB's names: Weights, Bias, InputWeights, …) as string arrays, `Value`
    a cell array of the values in MATLAB's shapes. Empty before the network is initialized."""
    from .objects import StringArray, Table
    from .values import Cell
    from .weights import _get, _table
    layers, params, values = StringArray(), StringArray(), Cell()
    if net.initialized:
        modules = net.layer_modules
        for layer in net.layers:
            if layer.name not in modules:
                continue
            table = _table(layer)
            names = _matlab_order(layer, list(table))
            if names:
                for k in names:
                    layers.append(layer.name)
                    params.append(k)
                    values.append(_get(net, layer, k))
                continue
            for k, p in modules[layer.name].named_parameters():
                layers.append(layer.name)
                params.append(k)
                values.append(p.detach().cpu().numpy().copy())
    from .values import String
    return Table({"Layer": StringArray(String(x) for x in layers),
                  "Parameter": StringArray(String(x) for x in params), "Value": values})


def _matlab_order(layer, names):
    """MATLAB lists a layer's learnables weights first, then biases; Offset before Scale."""
    if set(names) == {"Scale", "Offset"}:
        return ["Offset", "Scale"]
    return [n for n in names if not n.endswith("Bias")] + [n for n in names if n.endswith("Bias")]


def _state(net: Network):
    from .networks import get_state
    return get_state(net)


# ================================================================== layer properties ===

def _size(value):
    return np.array(value, dtype=float) if isinstance(value, (tuple, list)) else value


def _layer_props(layer) -> dict[str, Any]:
    """A layer's MATLAB hyperparameters by name → getter (read-only unless in _SETTABLE)."""
    kind = type(layer).__name__
    a = layer.__dict__.get
    props: dict[str, Any] = {}
    table = {
        "Dense": {"OutputSize": "out"},
        "LSTM": {"NumHiddenUnits": "hidden", "OutputMode": "output_mode",
                 "HasStateInputs": "has_state_inputs", "HasStateOutputs": "has_state_outputs"},
        "Conv2d": {"NumFilters": "filters", "FilterSize": "kernel", "Stride": "stride",
                   "DilationFactor": "dilation"},
        "Conv1d": {"NumFilters": "filters", "FilterSize": "kernel", "Stride": "stride",
                   "DilationFactor": "dilation"},
        "Dropout": {"Probability": "p"}, "SpatialDropout": {"Probability": "p"},
        "LayerNorm": {"Epsilon": "eps"}, "BatchNorm": {"Epsilon": "eps", "MeanDecay": "momentum",
                                                       "VarianceDecay": "momentum"},
        "LeakyReLU": {"Scale": "negative_slope"},
        "SelfAttention": {"NumHeads": "num_heads", "NumKeyChannels": "key_channels",
                          "DropoutProbability": "dropout"},
        "Attention": {"NumHeads": "num_heads", "DropoutProbability": "dropout"},
        "Embedding": {"OutputSize": "dim"}, "PositionEmbedding": {"OutputSize": "channels",
                                                                  "MaxPosition": "max_length"},
        "SinusoidalPositionEncoding": {"OutputSize": "dim"},
        "Addition": {"NumInputs": "n"}, "Multiplication": {"NumInputs": "n"},
        "Concatenation": {"NumInputs": "n"}, "MatlabConcatenation": {"NumInputs": "n",
                                                                      "Dim": "matlab_dim"},
        "MaxPool2d": {"PoolSize": "pool_size", "Stride": "stride"},
        "AvgPool2d": {"PoolSize": "pool_size", "Stride": "stride"},
        "SequenceInput": {"InputSize": "channels"}, "FeatureInput": {"InputSize": "channels"},
    }
    table["GRU"] = table["LSTM"]
    for matlab, attr in table.get(kind, {}).items():
        props[matlab] = (lambda attr=attr: _size(a(attr)))
    if kind in ("SelfAttention",):
        props["NumValueChannels"] = lambda: a("value_channels") or a("key_channels")
        props["OutputSize"] = lambda: a("output_channels") or "auto"
    if kind == "Embedding":
        props["MaxIndex"] = lambda: a("vocab") - 1
    if kind == "ImageInput":
        c, h, w = a("size")
        props["InputSize"] = lambda: np.array([h, w, c], dtype=float)
    if kind == "Index1d":
        index = a("index")
        props["Index"] = lambda: index if isinstance(index, str) else index + 1
    for attr, matlab in (("alpha", "Alpha"), ("ceiling", "Ceiling"), ("groups", "NumGroups"),
                         ("eps", "Epsilon")):
        if attr in layer.__dict__ and matlab not in props:
            props[matlab] = (lambda attr=attr: a(attr))
    return props


# MATLAB properties a script may set on a layer (not in a built network): name → attribute
_SETTABLE = {("Dropout", "Probability"): "p", ("SpatialDropout", "Probability"): "p",
             ("LayerNorm", "Epsilon"): "eps", ("BatchNorm", "Epsilon"): "eps",
             ("BatchNorm", "MeanDecay"): "momentum", ("LeakyReLU", "Scale"): "negative_slope",
             ("GroupNorm", "Epsilon"): "eps", ("ELU", "Alpha"): "alpha",
             ("ClippedReLU", "Ceiling"): "ceiling"}


def _class(obj) -> str:
    """MATLAB's class name of a layer for messages: lstmLayer → LSTMLayer."""
    from .terms import TYPES, _MAP
    kind = type(obj).__name__
    fn = obj.__dict__.get("_matlab_type") or TYPES.get(kind) or _MAP.get(kind) or kind
    name = fn[0].upper() + fn[1:] if fn.endswith("Layer") else kind
    for short, word in (("Bilstm", "BiLSTM"), ("Lstm", "LSTM"), ("Gru", "GRU"),
                        ("Gelu", "GELU"), ("Relu", "ReLU"), ("Elu", "ELU")):
        if short in name:
            return name.replace(short, word, 1)
    return name


def get_property(obj, name: str):
    from .objects import Containers, MapObject, StructArray, Table
    if isinstance(obj, Table):
        return obj.variable(name)
    if isinstance(obj, Containers):
        return obj.member(name)
    if isinstance(obj, MapObject):
        props = {"Count": lambda: len(obj.items), "KeyType": lambda: obj.key_type,
                 "ValueType": lambda: obj.value_type, "keys": obj.keys, "values": obj.values}
    elif isinstance(obj, StructArray):
        return _field_of_all(obj, name)
    elif isinstance(obj, Network):
        props = _net_props(obj)
    elif isinstance(obj, Layer):
        props = {"Name": lambda: obj.name or "", "NumInputs": lambda: len(obj.input_ports),
                 "NumOutputs": lambda: len(obj.output_ports),
                 "InputNames": lambda: _cellstr(obj.input_ports),
                 "OutputNames": lambda: _cellstr(obj.output_ports)}
        props.update(_layer_props(obj))
        from .weights import layer_weights
        props.update(layer_weights(obj))
    elif hasattr(obj, "loss") and hasattr(obj, "kind"):          # an output layer
        props = {"Name": lambda: obj.name}
        if getattr(obj, "classes", None) is not None:
            from .data import categorical
            props["Classes"] = lambda: categorical(list(obj.classes), list(obj.classes))
    elif type(obj).__name__ == "TrainingOptions":
        from .training_options import get_option
        return get_option(obj, name)
    elif type(obj).__name__ == "TrainingInfo":               # [net, info] = trainNetwork(...)
        it, val = getattr(obj, "iterations"), getattr(obj, "validation")
        props = {"TrainingLoss": lambda: np.asarray(it.get("loss", []), dtype=float),
                 "BaseLearnRate": lambda: np.asarray(it.get("learning_rate", []), dtype=float),
                 "ValidationLoss": lambda: np.asarray(val.get("loss", []), dtype=float),
                 "OutputNetworkIteration": lambda: getattr(obj, "best_iteration") or
                 len(it.get("loss", [])),
                 "StopReason": lambda: getattr(obj, "stop_reason")}
    elif type(obj).__name__ == "ImageDatastore":            # imds.Labels, imds.Files
        props = {"Labels": lambda: obj.labels, "Files": lambda: obj.files}
    elif isinstance(obj, dict) and len(obj) == 0:
        raise ArgumentError(f"unknown field '{name}'; the struct has no fields")
    else:
        raise ArgumentError(f"expected a struct, network or layer before '.{name}', received "
                            f"{type(obj).__name__}")
    if isinstance(obj, Layer) and name not in props:
        from .factor_store import get_factor, split_option
        factor = split_option(name)
        if factor is not None:                       # layer.WeightLearnRateFactor
            return get_factor(obj, *factor)
    if name not in props:
        what = _class(obj) if isinstance(obj, Layer) else type(obj).__name__
        raise ArgumentError(f"{what} has no property '{name}'; readable: "
                            f"{', '.join(props)}.{close_matches(name, list(props))}")
    return props[name]()


def _field_of_all(array, name):
    """`s.a` of a struct array: the values of every element (numbers as a row vector, text as
    a string array, else a cell array), as `[s.a]` and `{s.a}` collect them."""
    from .objects import StringArray
    from .values import Cell
    if any(name not in s for s in array):
        fields = array.fields()
        raise ArgumentError(f"unknown field '{name}'; the struct array has "
                            f"{', '.join(fields) or 'no fields'}.{close_matches(name, fields)}")
    values = [s[name] for s in array]
    if len(values) == 1:
        return values[0]
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return np.array(values, dtype=float)
    if all(isinstance(v, str) for v in values):
        return StringArray(values)
    return Cell(values)


def set_property(obj, name: str, value):
    """`obj.Name = value`: the object with the property set — a changed copy of a layer or
    training options (values in MATLAB), the network itself for the few network properties
    MATLAB lets a script set."""
    if isinstance(obj, Network) and name == "State":         # net.State = state
        from .networks import set_state
        set_state(obj, value)
        return obj
    if isinstance(obj, Network) and name == "OutputNames":
        from .networks import set_output_names
        set_output_names(obj, value)
        return obj
    if isinstance(obj, Network):
        readable = _net_props(obj)
        if name in readable:
            raise ArgumentError(f"Unable to set the '{name}' property of class 'dlnetwork' "
                                "because it is read-only." + (
                                    " To change a layer, use net = replaceLayer(net, name, "
                                    "layer), or setLayerWeights for its weights."
                                    if name in ("Layers", "Learnables") else ""))
        raise ArgumentError(f"dlnetwork has no property '{name}'; settable: OutputNames, "
                            f"State.{close_matches(name, list(readable))}")
    if type(obj).__name__ == "TrainingOptions":
        from .training_options import set_option
        return set_option(obj, name, value)
    if isinstance(obj, Layer):
        return _set_layer(obj, name, value)
    from .objects import MapObject
    if isinstance(obj, MapObject):
        raise ArgumentError(f"Unable to set the '{name}' property of class 'containers.Map' "
                            "because it is read-only.")
    raise ArgumentError(f"cannot set '{name}' of a {type(obj).__name__}; settable: a "
                        "network's OutputNames and State, a layer's Name, weights, "
                        "initializers, factors and hyperparameters MATLAB lets you set, and "
                        "every training option")


def _set_layer(layer, name: str, value):
    from .factor_store import set_factor, split_option
    from .weights import _built_owner, _init_targets, _table, copy_layer, set_layer_weight
    if name == "Name":
        from ..layers.base import check_name      # printable, one line, not too long
        if not isinstance(value, str):
            raise ArgumentError(f"layer.Name: expected a text, received {type(value).__name__}")
        new = copy_layer(layer)
        new.name = check_name(str(value)) if str(value) else None
        return new
    factor = split_option(name)
    if name in _table(layer) or name in _init_targets(layer) or factor is not None:
        if _built_owner(layer) is not None:
            set_layer_weight(layer, name, value)      # refused: the network's layers
        new = copy_layer(layer)
        if factor is not None:                       # layers(2).BiasLearnRateFactor = 0
            set_factor(new, factor[0], factor[1], value, option=name)
        else:
            set_layer_weight(new, name, value)
        return new
    attr = _SETTABLE.get((type(layer).__name__, name))
    if attr is not None:
        new = copy_layer(layer)
        _check_hyper(layer, name, value)
        setattr(new, attr, float(value))
        return new
    readable = {"Name": None, **_layer_props(layer), **{k: None for k in _table(layer)}}
    if name in readable or name in ("NumInputs", "NumOutputs", "InputNames", "OutputNames"):
        raise ArgumentError(f"Unable to set the '{name}' property of class '{_class(layer)}' "
                            "because it is read-only. Create the layer with it instead.")
    raise ArgumentError(f"{_class(layer)} has no property '{name}'; properties: "
                        f"{', '.join(readable)}.{close_matches(name, list(readable))}")


def _check_hyper(layer, name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
        raise ArgumentError(f"{_class(layer)}.{name}: expected a number, received "
                            f"{type(value).__name__}.")
    v = float(value)
    if name == "Probability" and not 0 <= v < 1:
        raise ArgumentError(f"{_class(layer)}.{name}: expected a number in [0, 1), received {v}.")
    if name in ("Epsilon",) and not v > 0:
        raise ArgumentError(f"{_class(layer)}.{name}: expected a positive number, received {v}.")
    if name in ("MeanDecay",) and not 0 <= v <= 1:
        raise ArgumentError(f"{_class(layer)}.{name}: expected a number in [0, 1], received {v}.")
