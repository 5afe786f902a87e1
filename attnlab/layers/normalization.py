"""Normalisation layers."""
from __future__ import annotations

from torch import nn

from ..spec import Spec
from . import _checks as check
from .base import Layer


class _Norm(Layer):
    """A normalisation: sequences, features or images in, the same shape out."""

    def infer(self, specs: dict[str, Spec]) -> Spec:
        s = specs["in"]
        self.require(s, "in", ("BTC", "BC", "BCSS"))
        return s


class LayerNorm(_Norm):
    """Layer normalisation [layerNormalizationLayer]. B×T×C, B×C: over channels (`nn.LayerNorm`);
    B×C×H×W: over channels and space with a per-channel scale (`nn.GroupNorm` with one group, as
    MATLAB normalises images). Same shape out. Learnables `weight`, `bias`."""

    def __init__(self, eps: float = 1e-5, name: str | None = None):
        super().__init__(name)
        self.eps = check.positive(self, "eps", eps)

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        s = specs["in"]
        c = check.known(self, "in", s.channels)
        if s.is_image:
            return nn.GroupNorm(1, c, eps=self.eps)
        return nn.LayerNorm(c, eps=self.eps)


class BatchNorm(_Norm):
    """Batch normalisation [batchNormalizationLayer] over channels: B×C×H×W, B×C, B×T×C → same
    shape. Learnables `weight`, `bias`; running statistics as buffers."""

    def __init__(self, eps: float = 1e-5, momentum: float = 0.1, name: str | None = None):
        super().__init__(name)
        self.eps = check.positive(self, "eps", eps)
        self.momentum = check.real(self, "momentum", momentum, 0, 1, what="a number in [0, 1]",
                                   fix="Use e.g. momentum=0.1 (the weight of each new batch).")

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        s = specs["in"]
        c = check.known(self, "in", s.channels)
        if s.is_image:
            return nn.BatchNorm2d(c, self.eps, self.momentum)
        if s.is_sequence:
            return _SequenceBatchNorm(c, self.eps, self.momentum)
        return nn.BatchNorm1d(c, self.eps, self.momentum)


class _SequenceBatchNorm(nn.BatchNorm1d):
    def forward(self, x):
        return super().forward(x.transpose(1, 2)).transpose(1, 2)  # B×T×C → B×C×T → B×T×C
