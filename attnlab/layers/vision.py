"""Layers of vision transformers: the patch embedding of an image, an image's positions as a
sequence (`ImageToSequence`), and the class token.

attnlab keeps the patches of an image as a sequence B×T×C, which is what `SelfAttention`,
`PositionEmbedding` and `Index1d` read.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from attnlab.core.errors import SizeError
from attnlab.core.spec import Spec
from attnlab.core import checks as check
from .base import Layer

_FLATTEN = ("column-major", "row-major")


class PatchEmbedding(Layer):
    """Image → the sequence of its patches [patchEmbeddingLayer]: a convolution with
    kernel and stride `patch_size` (learnables Weights P(1)×P(2)×C×D and Bias D, as MATLAB),
    then the (H/P(1))·(W/P(2)) patch positions as time steps.

    Parameters
    ----------
    patch_size : int or (int, int)
        The patch height and width; they must divide the image's.
    output_size : int
        D, the channels of each step.
    flatten_mode : str
        The order of the patch positions: "column-major" (down each column first, MATLAB's
        default) or "row-major" (along each row first).

    Shape
    -----
    - `in`: B×C×H×W
    - `out`: B×T×D, T = (H/P(1))·(W/P(2))
    """

    stem = "embedding"

    def __init__(self, patch_size: int | Sequence[int] = (16, 16), output_size: int = 768,
                 flatten_mode: str = "column-major", name: str | None = None):
        super().__init__(name)
        self.patch_size = check.int_pair(self, "patch_size", patch_size, example=16)
        self.output_size = check.integer(self, "output_size", output_size, example=768)
        self.flatten_mode = check.choice(self, "flatten_mode", flatten_mode, _FLATTEN)

    def infer(self, specs: dict[str, Spec]) -> Spec:
        s = specs["in"]
        self.require(s, "in", ("BCSS",), "patchEmbeddingLayer takes images (imageInputLayer).")
        _, h, w = s.sizes[1:]
        ph, pw = self.patch_size
        if (h is not None and h % ph) or (w is not None and w % pw):
            raise self.error(SizeError, "in", f"expected height and width divisible by the patch "
                             f"size {ph}×{pw}, received {s}. Use a patch size that divides both, "
                             "or resize the images.")
        t = None if h is None or w is None else (h // ph) * (w // pw)
        return Spec.sequence(self.output_size, t)

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return _PatchEmbedding(specs["in"].channels, self.output_size, self.patch_size,
                               self.flatten_mode == "column-major")


class _PatchEmbedding(nn.Conv2d):
    def __init__(self, channels, out, patch, column_major):
        super().__init__(channels, out, patch, stride=patch)
        self.column_major = column_major

    def forward(self, x):
        y = super().forward(x)                           # B×D×h×w
        if self.column_major:
            y = y.transpose(2, 3)                        # positions down each column first
        return y.flatten(2).transpose(1, 2)              # B×(h·w)×D


class ImageToSequence(Layer):
    """The positions of an image as a sequence, row by row, each step one p×p patch
    (p = `patch_size`) with its C·p² values. No learnables: follow it with `Dense` to project the
    patches (a vision transformer's patch embedding).

    Parameters
    ----------
    patch_size : int
        The patch side p; it must divide the height and the width. 1 keeps one pixel per step.

    Shape
    -----
    - `in`: B×C×H×W
    - `out`: B×(H·W/p²)×(C·p²)

    Examples
    --------
    >>> import torch, attnlab as al
    >>> from attnlab import layers as L
    >>> net = al.Network([L.ImageInput((3, 8, 8)), L.ImageToSequence(patch_size=4)])
    >>> net(torch.randn(2, 3, 8, 8)).shape
    torch.Size([2, 4, 48])
    """

    stem = "img2seq"

    def __init__(self, patch_size: int = 1, name: str | None = None):
        super().__init__(name)
        self.patch_size = check.integer(self, "patch_size", patch_size, example=4)

    def infer(self, specs: dict[str, Spec]) -> Spec:
        s = specs["in"]
        self.require(s, "in", ("BCSS",), "ImageToSequence turns an image into a sequence.")
        c, h, w = s.sizes[1:]
        p = self.patch_size
        if (h is not None and h % p) or (w is not None and w % p):
            raise self.error(SizeError, "in", f"expected height and width divisible by patch_size "
                             f"{p}, received {s}. Use a patch_size that divides both, or resize.")
        t = None if h is None or w is None else (h // p) * (w // p)
        return Spec.sequence(None if c is None else c * p * p, t)

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return _ImageToSequence(self.patch_size)


class _ImageToSequence(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, x):
        b, c, h, w = x.shape
        p = self.p
        if p == 1:
            return x.flatten(2).transpose(1, 2)                              # B×(HW)×C
        x = x.reshape(b, c, h // p, p, w // p, p)                            # B×C×h×p×w×p
        x = x.permute(0, 2, 4, 1, 3, 5)                                      # B×h×w×C×p×p
        return x.reshape(b, (h // p) * (w // p), c * p * p)                  # B×(hw)×(C·p²)


class EmbeddingConcatenation(Layer):
    """Prepends one learned vector (MATLAB's Weights, C×1: the class token) to
    every sequence [embeddingConcatenationLayer]. The mask gains the new first step.

    Shape
    -----
    - `in`: B×T×C
    - `out`: B×(T+1)×C
    """

    stem = "embed_concat"
    uses_mask = True
    returns_mask = True

    def infer(self, specs: dict[str, Spec]) -> Spec:
        s = specs["in"]
        self.require(s, "in", ("BTC",), "embeddingConcatenationLayer prepends a step to a "
                     "sequence (e.g. the patches from patchEmbeddingLayer).")
        return Spec.sequence(s.channels, None if s.time is None else s.time + 1)

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return _Prepend(specs["in"].channels)


class _Prepend(nn.Module):
    def __init__(self, channels):
        super().__init__()
        # MATLAB's default WeightsInitializer for this layer is "narrow-normal"
        self.weight = nn.Parameter(torch.randn(channels) * 0.01)

    def forward(self, x, masks=(None,)):
        token = self.weight.to(x.dtype).expand(x.shape[0], 1, -1)
        y = torch.cat([token, x], dim=1)
        mask = masks[0]
        if mask is None:
            return y, None
        return y, torch.cat([mask.new_ones(mask.shape[0], 1), mask], dim=1)
