"""Where a layer keeps MATLAB's learn-rate and L2 factors, and how option names read
(`WeightLearnRateFactor` → ("Weights", "lr")). No imports from the rest of attnlab.matlab:
weights.py, properties.py and factors.py all read it."""
from __future__ import annotations

import math

from attnlab.core.errors import ArgumentError
from ..layers.base import Layer

_KINDS = {"learnratefactor": "lr", "l2factor": "l2"}


def split_option(name: str) -> tuple[str, str] | None:
    """'WeightLearnRateFactor' → ("Weights", "lr"), 'BiasL2Factor' → ("Bias", "l2"); None for
    other names."""
    low = name.lower()
    for suffix, kind in _KINDS.items():
        if low.endswith(suffix) and len(name) > len(suffix):
            prefix = name[:-len(suffix)]
            return ("Weights" if prefix.lower() in ("weight", "weights") else prefix), kind
    return None


def _factor(fn: str, what: str, value) -> float:
    if hasattr(value, "item") and getattr(value, "size", 1) == 1:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value < 0:
        raise ArgumentError(f"{fn}: expected {what} to be a number ≥ 0 (0 freezes the "
                            f"learnable), received {value!r}.")
    return float(value)


def set_factor(layer: Layer, parameter: str, kind: str, value, fn: str = "",
               option: str | None = None) -> None:
    """Keeps a factor with the layer (`kind` "lr" or "l2"); `option` is the name the caller
    wrote (for messages)."""
    what = option or f"{parameter}{'LearnRateFactor' if kind == 'lr' else 'L2Factor'}"
    v = _factor(fn or what, what, value)
    factors = layer.__dict__.setdefault("_matlab_factors", {"lr": {}, "l2": {}})
    factors[kind][parameter] = v


def get_factor(layer: Layer, parameter: str, kind: str) -> float:
    """The factor set, else attnlab's default: learn rate 1; L2 1 for weights and 0 for biases,
    scales and offsets (attnlab decays only learnables of two or more dimensions; MATLAB's
    ScaleL2Factor/OffsetL2Factor default to 1)."""
    given = layer.__dict__.get("_matlab_factors", {}).get(kind, {})
    if parameter in given:
        return given[parameter]
    return 0.0 if kind == "l2" and parameter.endswith(("Bias", "Scale", "Offset")) else 1.0


def has_factors(net) -> bool:
    return any(any(v != 1.0 for d in layer.__dict__.get("_matlab_factors", {}).values()
                   for v in d.values()) for layer in net.layers)
