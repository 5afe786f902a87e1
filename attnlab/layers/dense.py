"""Dense layers, activations and dropout."""
from __future__ import annotations

from torch import nn
from torch.nn import functional as F

from ..errors import ArgumentError
from ..spec import Spec
from .base import Layer
from .inputs import _positive


class Dense(Layer):
    """Fully connected [fullyConnectedLayer]: B×T×C → B×T×out, B×C → B×out,
    B×C×H×W → B×out (the image is flattened, as MATLAB does). Learnables `weight` (out×in), `bias`."""

    stem = "fc"

    def __init__(self, out: int, bias: bool = True, name: str | None = None):
        super().__init__(name)
        self.out = _positive(out, "Dense out")
        self.bias = bias

    def infer(self, specs):
        s = specs["in"]
        self.require(s, "in", ("BTC", "BC", "BCSS"))
        if s.is_image:
            return Spec.features(self.out)
        return s.with_channels(self.out)

    def build(self, specs):
        s = specs["in"]
        if s.is_image:
            c, h, w = s.sizes[1:]
            return _FlattenLinear(c * h * w, self.out, bias=self.bias)
        return nn.Linear(s.channels, self.out, bias=self.bias)


class _FlattenLinear(nn.Linear):
    def forward(self, x):
        return F.linear(x.flatten(1), self.weight, self.bias)  # B×C×H×W → B×(CHW) → B×out


class _Elementwise(Layer):
    """Base of shape-preserving layers: any input spec → the same spec."""

    def infer(self, specs):
        return specs["in"]


class ReLU(_Elementwise):
    """max(x, 0): any shape → same shape."""

    def build(self, specs):
        return nn.ReLU()


class LeakyReLU(_Elementwise):
    """Leaky ReLU: any shape → same shape."""

    def __init__(self, negative_slope: float = 0.01, name: str | None = None):
        super().__init__(name)
        self.negative_slope = negative_slope

    def build(self, specs):
        return nn.LeakyReLU(self.negative_slope)


class GELU(_Elementwise):
    """GELU: any shape → same shape."""

    def build(self, specs):
        return nn.GELU()


class Tanh(_Elementwise):
    """tanh: any shape → same shape."""

    def build(self, specs):
        return nn.Tanh()


class Sigmoid(_Elementwise):
    """logistic sigmoid: any shape → same shape."""

    def build(self, specs):
        return nn.Sigmoid()


class Softmax(_Elementwise):
    """Softmax over channels: B×T×C, B×C (last dim), B×C×H×W (dim 1) → same shape."""

    def build(self, specs):
        return nn.Softmax(dim=1 if specs["in"].is_image else -1)


class Dropout(_Elementwise):
    """Zeroes elements with probability p in training only: any shape → same shape."""

    def __init__(self, p: float = 0.5, name: str | None = None):
        super().__init__(name)
        if not 0.0 <= p < 1.0:
            raise ArgumentError(f"Dropout p must be in [0, 1), got {p!r}")
        self.p = p

    def build(self, specs):
        return nn.Dropout(self.p)
