"""What `generate(..., capture=[...])` keeps: each generated token's `Stream.captured`."""
from __future__ import annotations

from torch import Tensor

from attnlab.core import checks as check

from . import settings as S


def capture_argument(capture):
    """`capture` as `stream` takes it; None stays None (a stream without taps)."""
    if capture is None or isinstance(capture, str):
        return capture
    try:
        return list(capture)
    except TypeError:
        raise check.fail(S.GEN, "capture", "a list of names or fnmatch patterns (e.g. "
                         "['h.*.attn/scores']) or None", capture,
                         "Give e.g. capture=['*/scores'].") from None


class Captured:
    """Each step's `Stream.captured`, one list per name (one entry per generated token)."""

    def __init__(self, s) -> None:
        self.s = s
        self.kept: dict[str, list[Tensor]] = {}

    def add(self) -> None:
        for name, value in self.s.captured.items():
            self.kept.setdefault(name, []).append(value)

    def result(self, longest: int) -> dict[str, list[Tensor]]:
        return {name: values[:longest] for name, values in self.kept.items()}
