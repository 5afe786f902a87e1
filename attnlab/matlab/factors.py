"""MATLAB's per-layer learn-rate and L2 factors (`WeightLearnRateFactor`, `BiasL2Factor`, …,
`setLearnRateFactor`, `getL2Factor`).

MATLAB trains each learnable with learn rate InitialLearnRate × its factor and L2
regularisation L2Regularization × its factor; a learn-rate factor 0 freezes it. A layer keeps its
factors as an attribute (so `trainNetwork`'s copy of a layer graph keeps them too); when training
starts, `mark_parameters(net)` writes them onto the torch parameters as `learn_rate_factor` /
`l2_factor`, which attnlab's optimizer turns into parameter groups
(`attnlab.training.optim.make_optimizer`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attnlab.core.errors import ArgumentError, close_matches
from ..layers.base import Layer
from .factor_store import get_factor, has_factors, set_factor, split_option  # noqa: F401

if TYPE_CHECKING:
    from ..network import Network

__all__ = ["setLearnRateFactor", "getLearnRateFactor", "setL2Factor", "getL2Factor"]

_ATTRIBUTE = {"lr": "learn_rate_factor", "l2": "l2_factor"}
# learnables MATLAB names on layers that weights.py has no table for (normalisation, embedding)
_FALLBACK = {"Weights": ("weight",), "Bias": ("bias",), "Scale": ("weight",),
             "Offset": ("bias",)}


def _torch_names(layer: Layer, parameter: str, params: dict) -> list[str]:
    from .weights import _table
    table = _table(layer)
    if parameter in table:
        names = list(table[parameter][0])
    elif parameter in ("Weights", "Bias") and table:
        ending = "Weights" if parameter == "Weights" else "Bias"
        names = [t for k, v in table.items() if k.endswith(ending) for t in v[0]]
    elif not table:
        names = [n for n in params
                 if n.rsplit(".", 1)[-1] in _FALLBACK.get(parameter, ())]
    else:
        names = []
    names = [n for n in names if n in params]
    if not names:
        known = sorted(set(table) | ({"Weights", "Bias"} if table else
                                     {k for k, v in _FALLBACK.items()
                                      if any(n.rsplit(".", 1)[-1] in v for n in params)}))
        raise ArgumentError(f"layer '{layer.name}' ({type(layer).__name__}): no learnable "
                            f"'{parameter}' for a learn-rate or L2 factor; its learnables: "
                            f"{', '.join(known) or 'none'}.{close_matches(parameter, known)}")
    return names


def mark_parameters(net) -> None:
    """Writes the layers' factors onto the built network's parameters (attributes
    `learn_rate_factor`, `l2_factor`), which the optimizer reads."""
    mods = net.layer_modules
    for layer in net.layers:
        factors = layer.__dict__.get("_matlab_factors")
        if not factors or layer.name not in mods:
            continue
        params = dict(mods[layer.name].named_parameters())
        for kind, by_parameter in factors.items():
            for parameter, value in by_parameter.items():
                for n in _torch_names(layer, parameter, params):
                    setattr(params[n], _ATTRIBUTE[kind], value)


# ==================================================================== MATLAB functions ===

def _target(fn: str, args: tuple) -> tuple[Any, Layer, str, Any]:
    """(layer or network, the layer, parameterName, rest) from MATLAB's two call forms:
    f(layer, parameterName, …) and f(net, layerName, parameterName, …)."""
    from ..network import Network
    if args and isinstance(args[0], Network):
        if len(args) < 3:
            raise ArgumentError(f"{fn}: expected (net, layerName, parameterName, …), received "
                                f"{len(args)} arguments.")
        from .weights import _layer_of
        return args[0], _layer_of(args[0], args[1]), str(args[2]), args[3:]
    if args and isinstance(args[0], Layer):
        if len(args) < 2:
            raise ArgumentError(f"{fn}: expected (layer, parameterName, …), received "
                                f"{len(args)} arguments.")
        return args[0], args[0], str(args[1]), args[2:]
    raise ArgumentError(f"{fn}: expected a layer or a dlnetwork first, received "
                        f"{type(args[0]).__name__ if args else 'nothing'}.")


def _set(fn, kind, args):
    owner, layer, parameter, rest = _target(fn, args)
    if len(rest) != 1:
        raise ArgumentError(f"{fn}: expected one factor after the parameter name, received "
                            f"{len(rest)} values.")
    set_factor(layer, parameter, kind, rest[0], fn)
    if owner is not layer and owner.initialized:
        mark_parameters(owner)           # a built network: its parameters change now
    return owner


def _get(fn, kind, args):
    owner, layer, parameter, rest = _target(fn, args)
    if rest:
        raise ArgumentError(f"{fn}: expected no values after the parameter name, received "
                            f"{len(rest)}.")
    return get_factor(layer, parameter, kind)


def setLearnRateFactor(*args: Any) -> Layer | Network:
    """`layer = setLearnRateFactor(layer, "Weights", 2)` or `net = setLearnRateFactor(net,
    "fc", "Bias", 0)`: the learnable trains with InitialLearnRate × factor (0 freezes it)."""
    return _set("setLearnRateFactor", "lr", args)


def getLearnRateFactor(*args: Any) -> float:
    """`getLearnRateFactor(layer, "Weights")` or `getLearnRateFactor(net, "fc", "Weights")`."""
    return _get("getLearnRateFactor", "lr", args)


def setL2Factor(*args: Any) -> Layer | Network:
    """`layer = setL2Factor(layer, "Weights", 2)` or `net = setL2Factor(net, "fc", "Bias", 1)`:
    the learnable is regularised with L2Regularization × factor."""
    return _set("setL2Factor", "l2", args)


def getL2Factor(*args: Any) -> float:
    """`getL2Factor(layer, "Weights")` or `getL2Factor(net, "fc", "Weights")`."""
    return _get("getL2Factor", "l2", args)
