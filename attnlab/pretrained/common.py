"""Pieces the builder and the T5 family share: activations by their transformers names, table
rows under a prefix, dropout, the residual connection, and the output layers named like a
model's output fields."""
from __future__ import annotations

import dataclasses

from .. import layers as L
from ..layers.base import Layer
from .weights import Weight

# transformers' activation names (ACT2FN) → the attnlab layer that computes the same function
ACTIVATIONS = {
    "gelu": lambda name: L.GELU(name=name),
    "gelu_new": lambda name: L.GELU(approximate="tanh", name=name),
    "gelu_pytorch_tanh": lambda name: L.GELU(approximate="tanh", name=name),
    "gelu_fast": lambda name: L.GELU(approximate="tanh", name=name),
    "gelu_accurate": lambda name: L.GELU(approximate="tanh", name=name),
    "gelu_python": lambda name: L.GELU(name=name),
    "gelu_python_tanh": lambda name: L.GELU(approximate="tanh", name=name),
    "leaky_relu": lambda name: L.LeakyReLU(0.01, name=name),
    "linear": lambda name: L.Identity(name=name),
    "relu": lambda name: L.ReLU(name=name),
    "silu": lambda name: L.SiLU(name=name),
    "swish": lambda name: L.SiLU(name=name),
    "tanh": lambda name: L.Tanh(name=name),
    "sigmoid": lambda name: L.Sigmoid(name=name),
}


def under(rows: list[Weight], tensors: str, layers: str) -> list[Weight]:
    """`rows` with `tensors` put before each tensor name and `layers` before each learnable
    (a block's table, written once, for block i: ``under(BLOCK, f"h.{i}.", f"h.{i}.")``)."""
    return [dataclasses.replace(w, name=tensors + w.name,
                                learnables=tuple(layers + n for n in w.learnables)) for w in rows]


def output(name: str) -> Layer:
    """The layer that names an output of the network like the model's output field
    (`logits`, `last_hidden_state`): it passes its input through."""
    return L.Identity(name=name)


def dropout(net, x: str, p: float, name: str) -> str:
    """Adds `Dropout(p)` after `x` (nothing when p is 0); returns the layer now at the end."""
    if p == 0:
        return x
    net.add(L.Dropout(p, name=name))
    net.connect(x, name)
    return name


def residual(net, skip: str, branch: str, name: str) -> str:
    """Adds `Addition` of `skip` (its `in1`) and `branch` (`in2`): the one way the families
    write a residual connection (or any sum of two layers); returns its name."""
    net.add(L.Addition(2, name=name))
    net.connect(skip, f"{name}/in1").connect(branch, f"{name}/in2")
    return name
