"""Pieces of the description (`builder.py`) and of the graph it builds (`build.py`) that the
families use too: a field's value for a config, the text choices, activations by their
transformers names, table rows under a prefix, dropout, and the output layers named like a
model's output fields. (A residual connection is `attnlab.combinators.add_residual`, the
package's one way to write it.)"""
from __future__ import annotations

import dataclasses

from typing import Any

from .. import layers as L
from attnlab.core.errors import ArgumentError
from ..layers.base import Layer
from .config import Config
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

# transformers' hidden_act → GLU's activation
GLU_ACTIVATIONS = {"silu": "silu", "swish": "silu", "gelu": "gelu",
                   "gelu_pytorch_tanh": "gelu-tanh", "gelu_new": "gelu-tanh"}

# the text choices of a description, and those that may be callables of the config
TEXT_CHOICES = {"norm": ("rms", "layer"), "placement": ("pre", "post"),
                "layout": ("sequential", "parallel"), "ffn": ("glu", "mlp", "moe")}
CALLABLE_CHOICES = ("placement", "layout", "ffn")


def check_choice(name: str, choice: Any) -> Any:
    """`choice` of the text choice `name`, refused (naming what is allowed) otherwise."""
    allowed = TEXT_CHOICES[name]
    if choice not in allowed:
        raise ArgumentError(f"Family {name}: expected one of {', '.join(allowed)}, "
                            f"received {choice!r}.")
    return choice


def value(v: Any, cfg: Config, *more: Any) -> Any:
    """A description's field for `cfg`: the value, or what the callable returns for it."""
    return v(cfg, *more) if callable(v) else v


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
