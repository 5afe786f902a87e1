"""Input layers: where data enters a network. Their module is the identity."""
from __future__ import annotations

from torch import nn

from ..spec import Spec
from . import _checks as check
from .base import Layer


class _Input(Layer):
    input_ports = ()
    is_input = True

    @property
    def spec(self) -> Spec:
        """The spec of the data this input accepts."""
        raise NotImplementedError

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return nn.Identity()

    def infer(self, specs: dict[str, Spec]) -> Spec:
        return self.spec


class SequenceInput(_Input):
    """Sequences of `channels` features: data B×T×C (a list of T_i×C tensors for varying lengths).
    `length` fixes T when every sequence has the same known length (else T is symbolic)."""

    stem = "input"

    def __init__(self, channels: int, length: int | None = None, name: str | None = None):
        super().__init__(name)
        self.channels = check.integer(self, "channels", channels, example=1)
        self.length = check.integer(self, "length", length, none_ok=True)

    @property
    def spec(self) -> Spec:
        """The spec of the data this input accepts."""
        return Spec.sequence(self.channels, self.length)


class ImageInput(_Input):
    """Images of size (C, H, W): data B×C×H×W (PyTorch layout)."""

    stem = "input"

    def __init__(self, size: tuple[int, int, int] | list[int], name: str | None = None):
        super().__init__(name)
        fix = "For a 28×28 grey image use ImageInput((1, 28, 28)); for RGB, (3, H, W)."
        if not isinstance(size, (tuple, list)) or len(size) != 3:
            raise check.fail(self, "size", "(channels, height, width): 3 positive ints", size, fix)
        self.size = tuple(check.integer(self, f"size[{i}] ({what})", s, example=28 if i else 1)
                          for i, (s, what) in enumerate(zip(size, ("channels", "height", "width"))))

    @property
    def spec(self) -> Spec:
        """The spec of the data this input accepts."""
        return Spec.image(*self.size)

    def config(self) -> dict:
        return {"size": list(self.size)}


class FeatureInput(_Input):
    """Feature vectors: data B×C."""

    stem = "input"

    def __init__(self, channels: int, name: str | None = None):
        super().__init__(name)
        self.channels = check.integer(self, "channels", channels, example=4)

    @property
    def spec(self) -> Spec:
        """The spec of the data this input accepts."""
        return Spec.features(self.channels)

