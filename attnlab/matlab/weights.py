"""Weights by MATLAB name (QueryWeights, InputWeights, Weights, Bias, …): filled in later."""
from __future__ import annotations

from ..errors import ArgumentError


def layer_weights(layer) -> dict:
    return {}


def set_layer_weight(layer, name, value):
    raise ArgumentError(f"layer '{layer.name}': no settable property '{name}'")
