"""MATLAB properties of attnlab objects, read and set by name in scripts (`net.Layers`,
`layer.Name`, `net.OutputNames`, …). Only the names listed here are reachable: a script never
reaches a Python attribute directly."""
from __future__ import annotations

from ..errors import ArgumentError, close_matches
from ..layers.base import Layer
from ..network import Network


def _net_props(net: Network) -> dict:
    from .weights import remember_owner
    return {"Layers": lambda: remember_owner(net, list(net.layers)), "InputNames": lambda: list(net.input_names),
            "OutputNames": lambda: list(net.output_names),
            "Connections": lambda: [(c.source, c.destination) if hasattr(c, "source") else str(c)
                                    for c in net.connections],
            "Initialized": lambda: net.initialized,
            "Learnables": lambda: dict(net.learnables) if net.initialized else {},
            "State": lambda: _state(net)}


def _state(net: Network):
    from .networks import get_state
    return get_state(net)


def get_property(obj, name: str):
    if isinstance(obj, Network):
        props = _net_props(obj)
    elif isinstance(obj, Layer):
        props = {"Name": lambda: obj.name}
        from .weights import layer_weights
        props.update(layer_weights(obj))
    elif hasattr(obj, "loss") and hasattr(obj, "kind"):          # an output layer
        props = {"Name": lambda: obj.name}
    elif type(obj).__name__ == "TrainingInfo":               # [net, info] = trainNetwork(...)
        import numpy as np
        it, val = getattr(obj, "iterations"), getattr(obj, "validation")
        props = {"TrainingLoss": lambda: np.asarray(it.get("loss", []), dtype=float),
                 "BaseLearnRate": lambda: np.asarray(it.get("learning_rate", []), dtype=float),
                 "ValidationLoss": lambda: np.asarray(val.get("loss", []), dtype=float),
                 "OutputNetworkIteration": lambda: getattr(obj, "best_iteration") or
                 len(it.get("loss", [])),
                 "StopReason": lambda: getattr(obj, "stop_reason")}
    elif type(obj).__name__ == "ImageDatastore":            # imds.Labels, imds.Files
        props = {"Labels": lambda: obj.labels, "Files": lambda: obj.files}
    else:
        raise ArgumentError(f"expected a struct, network or layer before '.{name}', received "
                            f"{type(obj).__name__}")
    if isinstance(obj, Layer) and name not in props:
        from .factor_store import get_factor, split_option
        factor = split_option(name)
        if factor is not None:                       # layer.WeightLearnRateFactor
            return get_factor(obj, *factor)
    if name not in props:
        raise ArgumentError(f"{type(obj).__name__} has no property '{name}'; readable: "
                            f"{', '.join(props)}.{close_matches(name, list(props))}")
    return props[name]()


def set_property(obj, name: str, value) -> None:
    if isinstance(obj, Network) and name == "State":         # net.State = state
        from .networks import set_state
        set_state(obj, value)
        return
    if isinstance(obj, Network) and name == "OutputNames":
        from .networks import set_output_names
        set_output_names(obj, value)
        return
    if isinstance(obj, Layer) and name == "Name":
        from ..layers.base import check_name      # printable, one line, not too long
        if not isinstance(value, str):
            raise ArgumentError(f"layer.Name: expected a text, received {type(value).__name__}")
        obj.name = check_name(str(value))
        return
    if isinstance(obj, Layer):
        from .factor_store import set_factor, split_option
        factor = split_option(name)
        if factor is not None:                       # layers(2).BiasLearnRateFactor = 0
            set_factor(obj, factor[0], factor[1], value, option=name)
            return
        from .weights import set_layer_weight
        set_layer_weight(obj, name, value)
        return
    raise ArgumentError(f"cannot set '{name}' of a {type(obj).__name__}; settable: a network's "
                        "OutputNames, a layer's Name, weights (before it joins a network) and "
                        "learn-rate and L2 factors")
