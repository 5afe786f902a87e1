"""Normalisation layers."""
from __future__ import annotations

from torch import nn

from ..spec import Spec
from . import _checks as check
from .base import Layer


class _Norm(Layer):
    """A normalisation: sequences, features or images in, the same shape out."""

    time_local = True

    def infer(self, specs: dict[str, Spec]) -> Spec:
        s = specs["in"]
        self.require(s, "in", ("BTC", "BC", "BCSS"))
        return s


class LayerNorm(_Norm):
    """Layer normalisation [layerNormalizationLayer].

    Sequences and features are normalised over the channels (`torch.nn.LayerNorm`); images over
    channels and space together with a per-channel scale and shift (`torch.nn.GroupNorm` with one
    group), as MATLAB normalises images. Learnables `weight`, `bias` (C each).

    Parameters
    ----------
    eps : float
        Added to the variance, for stability.

    Shape
    -----
    - `in`: B×T×C, B×C or B×C×H×W
    - `out`: the same spec
    """

    def __init__(self, eps: float = 1e-5, name: str | None = None):
        super().__init__(name)
        self.eps = check.positive(self, "eps", eps)

    def analysis_warnings(self, specs: dict[str, Spec]) -> list[tuple[str, str]]:
        """(port, message) for inputs that fit but make the layer useless: one channel."""
        s = specs["in"]
        if s.is_image or s.channels != 1:
            return []
        return [("in", f"layer '{self.name}' port 'in': LayerNorm expected several channels, "
                       f"received {s}, one channel. It normalises each step over its channels and "
                       f"one channel minus its own mean is 0, so its output is its bias, constant "
                       f"whatever the input. Put it after a layer with several channels (an LSTM, "
                       f"a Dense), use BatchNorm (which normalises over the batch), or remove it.")]

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        s = specs["in"]
        c = check.known(self, "in", s.channels)
        if s.is_image:
            return nn.GroupNorm(1, c, eps=self.eps)
        return nn.LayerNorm(c, eps=self.eps)


class BatchNorm(_Norm):
    """Batch normalisation over the channels [batchNormalizationLayer].

    Statistics of the mini-batch in training (for sequences over batch and time, padded steps
    included), the running averages in evaluation. Learnables `weight`, `bias`; buffers `running_mean`, `running_var`.

    Parameters
    ----------
    eps : float
        Added to the variance, for stability.
    momentum : float
        The weight of each new batch in the running averages, in [0, 1].

    Shape
    -----
    - `in`: B×T×C, B×C or B×C×H×W
    - `out`: the same spec
    """

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
