"""Dense layers, activations and dropout."""
from __future__ import annotations

from torch import nn
from torch.nn import functional as F

from ..spec import Spec
from . import _checks as check
from .base import Layer


class Dense(Layer):
    """Fully connected [fullyConnectedLayer]: per time step on sequences; an image is flattened,
    as MATLAB does. Learnables `weight` (out×in) and `bias`, as `torch.nn.Linear`.

    Parameters
    ----------
    out : int
        Channels out.
    bias : bool
        Whether to learn a bias.

    Shape
    -----
    - `in`: B×T×C, B×C or B×C×H×W
    - `out`: B×T×out, B×out or B×out
    """

    stem = "fc"

    def __init__(self, out: int, bias: bool = True, name: str | None = None):
        super().__init__(name)
        self.out = check.integer(self, "out", out, example=64)
        self.bias = check.flag(self, "bias", bias)

    def infer(self, specs: dict[str, Spec]) -> Spec:
        s = specs["in"]
        self.require(s, "in", ("BTC", "BC", "BCSS"))
        cin = check.product(s.sizes[1:]) if s.is_image else s.channels
        check.learnables_fit(self, "in", "Use a smaller out, or reduce the input first.",
                             weight=(self.out, cin))
        if s.is_image:
            return Spec.features(self.out)
        return s.with_channels(self.out)

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        s = specs["in"]
        if s.is_image:
            return _FlattenLinear(check.known(self, "in", check.product(s.sizes[1:])), self.out,
                                  bias=self.bias)
        return nn.Linear(check.known(self, "in", s.channels), self.out, bias=self.bias)


class _FlattenLinear(nn.Linear):
    def forward(self, x):
        return F.linear(x.flatten(1), self.weight, self.bias)  # B×C×H×W → B×(CHW) → B×out


class _Elementwise(Layer):
    """Base of shape-preserving layers: any input spec → the same spec."""

    def infer(self, specs: dict[str, Spec]) -> Spec:
        return specs["in"]


class ReLU(_Elementwise):
    """max(x, 0): any shape → same shape."""

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return nn.ReLU()


class LeakyReLU(_Elementwise):
    """Leaky ReLU: any shape → same shape."""

    def __init__(self, negative_slope: float = 0.01, name: str | None = None):
        super().__init__(name)
        self.negative_slope = check.real(self, "negative_slope", negative_slope,
                                         fix="Use e.g. negative_slope=0.01.")

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return nn.LeakyReLU(self.negative_slope)


class GELU(_Elementwise):
    """GELU: any shape → same shape."""

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return nn.GELU()


class Tanh(_Elementwise):
    """tanh: any shape → same shape."""

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return nn.Tanh()


class Sigmoid(_Elementwise):
    """logistic sigmoid: any shape → same shape."""

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return nn.Sigmoid()


class Softmax(_Elementwise):
    """Softmax over channels: B×T×C, B×C (last dim), B×C×H×W (dim 1) → same shape."""

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return nn.Softmax(dim=1 if specs["in"].is_image else -1)


class Dropout(_Elementwise):
    """Zeroes elements with probability p in training only: any shape → same shape."""

    def __init__(self, p: float = 0.5, name: str | None = None):
        super().__init__(name)
        self.p = check.probability(self, "p", p)

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return nn.Dropout(self.p)
