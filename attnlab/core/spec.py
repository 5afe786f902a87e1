"""Activation specs: sizes with labelled dimensions.

Labels: B batch, T time, C channel, S spatial (PyTorch layout, batch first):
`B×T×C` sequences, `B×C×S×S` images, `B×C` features. Batch and time are symbolic (None) unless
a layer fixes them.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Optional, Sequence

Size = Optional[int]

# attention scores are B×heads×Tq×Tk: labels H, Q, K
_SHOW = {"Q": "Tq", "K": "Tk"}
_NAMES = {"BHQK": "attention scores", "BTC": "sequence", "BCSS": "image", "BC": "features", "BT": "token sequence"}


@dataclass(frozen=True)
class Spec:
    """The size of an activation, each dimension labelled.

    `labels` is a string of dimension labels (``"BTC"``, ``"BCSS"``, ``"BC"``); `sizes` holds one
    size per label, None where it is symbolic (the batch, a free time length). ``str(spec)`` is
    the form messages use, e.g. ``B×T×256``.

    Examples
    --------
    >>> str(Spec.sequence(256))
    'B×T×256'
    >>> Spec.image(3, 32, 32).channels
    3
    """
    labels: str
    sizes: tuple[Size, ...]
    # True when a layer computed the values (a Dense output, a norm's), so they are no longer
    # whole numbers as the data gave them: not token ids. The analysis sets it on every
    # activation (inputs False; layers with `keeps_ids` pass it on); it takes no part in
    # comparing specs.
    computed: bool = field(default=False, compare=False)

    def __post_init__(self):
        if len(self.labels) != len(self.sizes):
            raise ValueError(f"spec labels {self.labels!r} and sizes {self.sizes} differ in length")

    # -- constructors ---------------------------------------------------------------------
    @staticmethod
    def sequence(channels: Size, time: Size = None) -> "Spec":
        """A sequence B×T×C (`time` None: any length)."""
        return Spec("BTC", (None, time, channels))

    @staticmethod
    def image(channels: Size, height: Size, width: Size) -> "Spec":
        """An image B×C×H×W."""
        return Spec("BCSS", (None, channels, height, width))

    @staticmethod
    def features(channels: Size) -> "Spec":
        """A feature vector B×C."""
        return Spec("BC", (None, channels))

    # -- queries --------------------------------------------------------------------------
    @property
    def kind(self) -> str:
        """What the activation is in words (``"sequence"``, ``"image"``, ``"features"``, …)."""
        return _NAMES.get(self.labels, self.labels)

    @property
    def channels(self) -> Size:
        """The size of the channel dimension C (None when absent or unknown)."""
        return self.sizes[self.labels.index("C")] if "C" in self.labels else None

    @property
    def is_sequence(self) -> bool:
        """True when the spec has a time dimension T."""
        return "T" in self.labels

    @property
    def is_image(self) -> bool:
        """True when the spec has spatial dimensions (an image)."""
        return "S" in self.labels

    @property
    def time(self) -> Size:
        """The time length T (None when symbolic or absent)."""
        return self.sizes[self.labels.index("T")] if "T" in self.labels else None

    def with_channels(self, channels: Size) -> "Spec":
        """The same spec with another channel size."""
        i = self.labels.index("C")
        return Spec(self.labels, self.sizes[:i] + (channels,) + self.sizes[i + 1:])

    def with_computed(self, computed: bool) -> "Spec":
        """The same spec with `computed` set (itself when it already has that value)."""
        return self if self.computed == computed else replace(self, computed=computed)

    def matches(self, other: "Spec") -> bool:
        """Same labels and no known size that differs (symbolic sizes match anything)."""
        return self.labels == other.labels and all(
            a is None or b is None or a == b for a, b in zip(self.sizes, other.sizes))

    def concrete(self, batch: int = 2, time: int = 5) -> tuple[int, ...]:
        """A concrete shape for trial runs: symbolic sizes replaced by `batch`/`time`."""
        fill = {"B": batch, "T": time, "S": 8, "C": 4}
        return tuple(s if s is not None else fill[l] for l, s in zip(self.labels, self.sizes))

    def __str__(self) -> str:
        return "×".join(_SHOW.get(l, l) if s is None else str(s)
                        for l, s in zip(self.labels, self.sizes))

    def __repr__(self) -> str:
        return f"Spec({self})"

    # -- persistence ----------------------------------------------------------------------
    def to_json(self) -> dict:
        """The spec as a JSON-ready dict (used by `Network.save`)."""
        return {"labels": self.labels, "sizes": list(self.sizes)}

    @staticmethod
    def from_json(d: dict) -> "Spec":
        """The spec from `to_json`'s dict."""
        return Spec(d["labels"], tuple(d["sizes"]))


def spec_of_tensor_shape(shape: Sequence[int]) -> Spec:
    """The spec a network without input layers assumes for data of this shape."""
    n = len(shape)
    if n == 2:
        return Spec("BC", (None, shape[1]))
    if n == 3:
        return Spec("BTC", (None, None, shape[2]))
    if n == 4:
        return Spec("BCSS", (None, shape[1], shape[2], shape[3]))
    raise ValueError(f"cannot infer a spec for data with {n} dimensions")
