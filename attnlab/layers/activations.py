"""Activations beyond those of `dense.py`: swish and the tanh-approximated GELU."""
from __future__ import annotations

from torch import nn

from ..spec import Spec
from .dense import GELU, _Elementwise


class Swish(_Elementwise):
    """Swish, x·sigmoid(x), elementwise [swishLayer]. No learnables.

    Shape
    -----
    - `in`: any spec (B×T×C, B×C, B×C×H×W)
    - `out`: the same spec
    """

    stem = "swish"

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return nn.SiLU()


class TanhGELU(GELU):
    """GELU with the tanh approximation, elementwise [geluLayer(Approximation="tanh")].
    No learnables.

    Shape
    -----
    - `in`: any spec (B×T×C, B×C, B×C×H×W)
    - `out`: the same spec
    """

    stem = "gelu"

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return nn.GELU(approximate="tanh")
