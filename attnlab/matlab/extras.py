"""Layer functions MATLAB does not have, that attnlab adds in MATLAB's style (they work in scripts
read by `run_file` and in Python alike)."""
from __future__ import annotations

from typing import Any

from .. import layers as L
from ._options import _int, _parse

__all__ = ["imageToSequenceLayer"]


def imageToSequenceLayer(*args: Any, **kwargs: Any) -> L.ImageToSequence:
    """`imageToSequenceLayer(PatchSize=p)` → `L.ImageToSequence(p)`: an image B×C×H×W becomes a
    sequence of its (H/p)·(W/p) patches, B×T×C' — what attention over an image needs (flattenLayer
    merges the positions into channels instead). An attnlab addition: MATLAB has no such layer."""
    fn = "imageToSequenceLayer"
    pos, o = _parse(fn, args, kwargs, {"Name": None, "PatchSize": 1}, positional=1)
    patch = pos[0] if pos else o["PatchSize"]
    return L.ImageToSequence(_int(fn, "PatchSize", patch), name=o["Name"])
