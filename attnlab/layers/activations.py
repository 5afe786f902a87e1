"""Activations beyond those of `dense.py`: SiLU (swish) and the tanh-approximated GELU."""
from __future__ import annotations

from torch import nn

from attnlab.core.spec import Spec
from .dense import GELU, _Elementwise


class SiLU(_Elementwise):
    """Sigmoid linear unit x·sigmoid(x), elementwise, as `torch.nn.SiLU` (Llama's and
    Mistral's "silu"). No learnables.

    Shape
    -----
    - `in`: any spec (B×T×C, B×C, B×C×H×W)
    - `out`: the same spec

    Examples
    --------
    >>> import torch
    >>> from attnlab import layers as L
    >>> L.SiLU()(torch.tensor([[0.0, 1.0]]))
    tensor([[0.0000, 0.7311]])
    """

    stem = "silu"

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return nn.SiLU()


class Swish(_Elementwise):
    """Swish, x·sigmoid(x), elementwise [swishLayer]: the same function as `SiLU`, under
    MATLAB's name. No learnables.

    Shape
    -----
    - `in`: any spec (B×T×C, B×C, B×C×H×W)
    - `out`: the same spec
    """

    stem = "swish"

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return nn.SiLU()


class TanhGELU(GELU):
    """GELU with the tanh approximation, elementwise [geluLayer(Approximation="tanh")]: the
    same as ``GELU(approximate="tanh")``. No learnables.

    Shape
    -----
    - `in`: any spec (B×T×C, B×C, B×C×H×W)
    - `out`: the same spec
    """

    stem = "gelu"

    def __init__(self, name: str | None = None):
        super().__init__("tanh", name)
