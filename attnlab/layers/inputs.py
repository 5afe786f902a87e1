"""Input layers: where data enters a network. Their module is the identity."""
from __future__ import annotations

from torch import nn

from ..errors import ArgumentError
from ..spec import Spec
from .base import Layer


class _Input(Layer):
    input_ports = ()
    is_input = True

    def build(self, specs):
        return nn.Identity()

    def infer(self, specs):
        return self.spec


class SequenceInput(_Input):
    """Sequences of `channels` features: data B×T×C (a list of T_i×C tensors for varying lengths).
    `length` fixes T when every sequence has the same known length (else T is symbolic)."""

    stem = "input"

    def __init__(self, channels: int, length: int | None = None, name: str | None = None):
        super().__init__(name)
        self.channels = _positive(channels, "SequenceInput channels")
        self.length = None if length is None else _positive(length, "SequenceInput length")

    @property
    def spec(self):
        return Spec.sequence(self.channels, self.length)


class ImageInput(_Input):
    """Images of size (C, H, W): data B×C×H×W (PyTorch layout)."""

    stem = "input"

    def __init__(self, size, name: str | None = None):
        super().__init__(name)
        size = tuple(size)
        if len(size) != 3:
            raise ArgumentError(f"ImageInput size must be (channels, height, width), got {size!r}; "
                             "for a 28×28 grey image use ImageInput((1, 28, 28))")
        self.size = tuple(_positive(s, "ImageInput size") for s in size)

    @property
    def spec(self):
        return Spec.image(*self.size)

    def config(self):
        return {"size": list(self.size)}


class FeatureInput(_Input):
    """Feature vectors: data B×C."""

    stem = "input"

    def __init__(self, channels: int, name: str | None = None):
        super().__init__(name)
        self.channels = _positive(channels, "FeatureInput channels")

    @property
    def spec(self):
        return Spec.features(self.channels)


def _positive(v, what):
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise ArgumentError(f"{what} must be a positive int, got {v!r}")
    return v
