"""Layer types of MATLAB's own forms: `FrameFlatten` (flattenLayer on the flattened frames of an
image sequence), `SequenceFolding`, `SequenceUnfolding`, and `WordEmbedding`
(wordEmbeddingLayer: MATLAB's 1-based word ids, numWords rows).

They are ordinary `Layer` subclasses: they register themselves as layer types when
`attnlab.matlab` is imported, which `al.load` does when a file names one of them. The generic
layers the MATLAB functions also make (`InputNormalization`, `Pool1d`, `Scaling`, `Identity`,
`GroupedConv2d`, `SpatialDropout`) live in `attnlab.layers` and are re-exported here.
"""
from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import cast

import numpy as np
import torch
from torch import nn

from attnlab.core.errors import ArgumentError, DataError, FormatError, SizeError
from ..layers.base import Layer
from ..layers.combine import Concatenation, _Combine
from ..layers.conv import GroupedConv2d
from ..layers.dense import SpatialDropout
from ..layers.embedding import Embedding
from ..layers.normalization import NORMALIZATIONS, InputNormalization
from ..layers.pooling import Pool1d
from ..layers.scaling import Identity, Scaling
from attnlab.core.spec import Spec
from ..stream.steppers.registry import PER_STEP, LayerContext, NotStreamable, register_stepper

__all__ = ["FrameFlatten", "SequenceFolding", "SequenceUnfolding", "WordEmbedding", "NORMALIZATIONS",
           "ELU", "ClippedReLU", "Softplus", "CrossChannelNormalization", "Resize2d",
           "MatlabConcatenation",
           "InputNormalization", "Pool1d", "Scaling", "Identity", "GroupedConv2d",
           "SpatialDropout"]


class FrameFlatten(Layer):
    """MATLAB's flattenLayer after `sequenceInputLayer([h w c])` or `sequenceUnfoldingLayer`:
    the frames of an image sequence are already flattened (B×T×(h·w·c), MATLAB's column-major
    order), so it passes the sequence through [flattenLayer]. `frame` is the input layer's
    [h w c]; None after an unfolding layer."""

    stem = "flatten"
    time_local = True

    def __init__(self, frame: Sequence[int] | None = (1, 1, 1), name: str | None = None):
        super().__init__(name)
        self.frame = None if frame is None else [int(v) for v in frame]

    def infer(self, specs: dict[str, Spec]) -> Spec:
        s = specs["in"]
        if not s.is_sequence:
            source = ("sequenceUnfoldingLayer as B×T×C" if self.frame is None else
                      f"sequenceInputLayer({self.frame}) as B×T×{int(np.prod(self.frame))}")
            raise self.error(SizeError, "in", f"expected the image sequence of {source}, "
                             f"received {s}.")
        return s

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return nn.Identity()


def _frame(layer, frame):
    if frame is None:
        return None
    vals = frame.tolist() if hasattr(frame, "tolist") else frame
    vals = list(vals) if isinstance(vals, (list, tuple)) else [vals]
    if len(vals) == 2:
        vals = vals + [1]
    if len(vals) != 3 or any(isinstance(v, bool) or int(v) != v or v < 1 for v in vals):
        raise ArgumentError(f"layer '{layer.name}': expected frame as [h w c] (or [h w]), "
                            f"integers ≥ 1, received {frame!r}.")
    return [int(v) for v in vals]


class SequenceFolding(Layer):
    """Folds the frames of an image sequence into the batch, so that image layers run on each
    frame [sequenceFoldingLayer]. `in`: B×T×(h·w·c), each frame flattened as MATLAB flattens
    an h×w×c array (column-major: feature h + H·(w + W·c), h fastest, c slowest) — the way
    `sequenceInputLayer([h w c])` data arrives → `out`: N×c×h×w images, one per valid step,
    in batch-then-time order (N = B·T without padding; padded steps are left out, so they take
    no part in batch statistics), and `miniBatchSize`: the sequence itself (B×T×(h·w·c), with
    its padding mask) for `SequenceUnfolding`, which puts the frames back. `frame` is
    (h, w, c) in MATLAB's order."""

    stem = "fold"
    uses_mask = True
    output_ports = ("out", "miniBatchSize")

    def __init__(self, frame: Sequence[int] | None = None, name: str | None = None):
        super().__init__(name)
        self.frame = _frame(self, frame)

    def infer(self, specs: dict[str, Spec]) -> dict[str, Spec]:
        s = specs["in"]
        self.require(s, "in", ("BTC",), "sequenceFoldingLayer folds the image sequence of "
                     "sequenceInputLayer([h w c]).")
        if self.frame is None:
            raise self.error(SizeError, "in", f"expected a sequence of images of a known size, "
                             f"received {s}. Connect it right after sequenceInputLayer([h w c]), "
                             "or give the frame size: SequenceFolding(frame=(h, w, c)).")
        h, w, c = self.frame
        if s.channels is not None and s.channels != h * w * c:
            raise self.error(SizeError, "in", f"expected B×T×{h * w * c} (frames {h}×{w}×{c}, "
                             f"flattened), received {s}. Give frames of {h}×{w}×{c}.")
        return {"out": Spec.image(c, h, w), "miniBatchSize": s}

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        h, w, c = cast(list, self.frame)
        return _Fold(h, w, c)


class _Fold(nn.Module):
    def __init__(self, h: int, w: int, c: int):
        super().__init__()
        self.h, self.w, self.c = h, w, c

    def forward(self, x, masks=(None,)):
        mask = masks[0]
        flat = x.reshape(-1, x.shape[-1]) if mask is None else x[mask]       # N×(h·w·c)
        # column-major h×w×c: c slowest, then w, then h
        images = flat.reshape(-1, self.c, self.w, self.h).transpose(2, 3)  # N×c×h×w
        return images, x


class SequenceUnfolding(Layer):
    """Puts folded frames back into their sequences [sequenceUnfoldingLayer]. `in`: N×C×H×W
    images, one per valid step of the sequences at `miniBatchSize` (the `miniBatchSize` output
    of the `SequenceFolding` that folded them) → `out`: B×T×(C·H·W), each frame flattened in
    MATLAB's column-major order (H fastest, C slowest), so that a flattenLayer after it passes
    the sequence through. The sequence keeps the padding mask of `miniBatchSize`; padded steps
    are zeros."""

    stem = "unfold"
    uses_mask = True
    returns_mask = True
    input_ports = ("in", "miniBatchSize")

    def infer(self, specs: dict[str, Spec]) -> Spec:
        s, seq = specs["in"], specs["miniBatchSize"]
        self.require(s, "in", ("BCSS",), "sequenceUnfoldingLayer unfolds the images of a "
                     "sequenceFoldingLayer.")
        self.require(seq, "miniBatchSize", ("BTC",), "Connect the sequenceFoldingLayer's "
                     "output: connectLayers(lgraph, \"fold/miniBatchSize\", "
                     "\"unfold/miniBatchSize\").")
        dims = [d for d in s.sizes[1:] if d is not None]
        size = int(np.prod(dims)) if len(dims) == len(s.sizes) - 1 else None
        return Spec("BTC", (None, seq.time, size))

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return _Unfold(self.name)


class _Unfold(nn.Module):
    def __init__(self, name):
        super().__init__()
        self.name = name

    def forward(self, images, seq, masks=(None, None)):
        mask = masks[1]
        b, t = seq.shape[0], seq.shape[1]
        flat = images.transpose(2, 3).reshape(images.shape[0], -1)        # N×(C·W·H)
        n = b * t if mask is None else int(mask.sum())
        if flat.shape[0] != n:
            raise DataError(f"layer '{self.name}' port 'in': expected {n} images (one per valid "
                            f"step of the sequences at 'miniBatchSize'), received {flat.shape[0]}. "
                            "Connect the images and the miniBatchSize of the same "
                            "sequenceFoldingLayer.")
        if mask is None:
            return flat.reshape(b, t, -1), None
        out = flat.new_zeros(b, t, flat.shape[1])
        out[mask] = flat
        return out, mask


class WordEmbedding(Embedding):
    """MATLAB's word embedding [wordEmbeddingLayer]: word ids 1…vocab (doc2sequence's) → the
    vectors of a learnable `weight` vocab×dim (MATLAB's Weights dim×vocab transposed: the same
    numbers and count). Id 0, doc2sequence's padding value, gives a zero vector. Other ids (past
    vocab, negative, fractional, NaN) are out of the vocabulary: a DataError naming the id with
    `oov="error"` (MATLAB's OOVMode default), the last vector with `oov="map-to-last"`.

    Shape: `in` B×T×1 or B×T word ids → `out` B×T×dim."""

    stem = "embedding"

    def __init__(self, vocab: int, dim: int, oov: str = "error", name: str | None = None):
        super().__init__(vocab, dim, name)
        if oov not in ("error", "map-to-last"):
            raise self.error(ArgumentError, "oov", f"expected \"error\" or \"map-to-last\", "
                             f"received {oov!r}.")
        self.oov = oov

    def config(self) -> dict:
        return Layer.config(self)                # its own arguments: vocab, dim, oov

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return _WordLookup(self.vocab, self.dim, specs["in"].labels == "BTC", self.oov, self.name)


class _WordLookup(nn.Module):
    """Ids 1…vocab → rows 0…vocab−1 of `weight`; 0 → zeros; others as `oov` says."""

    def __init__(self, vocab: int, dim: int, squeeze: bool, oov: str, layer: str | None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(vocab, dim))
        nn.init.normal_(self.weight)                 # torch.nn.Embedding's initialisation
        self.squeeze, self.oov, self.layer = squeeze, oov, layer

    def forward(self, x):
        if self.squeeze:
            x = x.squeeze(-1)                        # B×T×1 → B×T
        vocab = self.weight.shape[0]
        ids = x.long() if x.is_floating_point() or x.dtype is torch.bool else x
        whole = ids == x                             # fractional and NaN ids are not words
        pad = whole & (ids == 0)                     # B×T: doc2sequence's padding
        oov = ~whole | (ids < 0) | (ids > vocab)
        if self.oov == "error" and ids.device.type == "cpu" and bool(oov.any()):
            raise _oov_error(x, oov, vocab, self.layer)
        rows = torch.where(oov, vocab - 1, (ids - 1).clamp(0, vocab - 1))      # B×T
        y = torch.embedding(self.weight, rows)                                 # B×T×dim
        if self.oov == "error" and ids.device.type != "cpu":
            y = y.masked_fill(oov.unsqueeze(-1), float("nan"))   # no host read off the CPU
        return y.masked_fill(pad.unsqueeze(-1), 0.0)


def _oov_error(x, oov, vocab: int, layer: str | None) -> DataError:
    pos = [int(i) for i in oov.nonzero()[0]]
    at = ", ".join(f"{n} {i + 1}" for n, i in zip(("observation", "step"), pos))
    value = float(x.detach().to("cpu", torch.float64)[tuple(pos)])
    count = int(oov.sum())
    shown = int(value) if value == value and value == round(value) else value
    return DataError(f"layer '{layer}': word id {shown} at {at} is out of the vocabulary of "
                     f"{vocab} words (ids 1…{vocab}, 0 for padding)"
                     + (f" ({count} such ids in all)" if count > 1 else "") +
                     ". Give ids from the same wordEncoding, or OOVMode=\"map-to-last\" to map "
                     "unknown words to the last vector.")


# ====================================================== MATLAB's activations and others ===

class _Activation(Layer):
    """A shape-preserving elementwise layer: any spec in, the same spec out."""

    time_local = True

    def infer(self, specs: dict[str, Spec]) -> Spec:
        return specs["in"]


class ELU(_Activation):
    """Exponential linear unit [eluLayer]: x for x > 0, α(exp(x) − 1) below. No learnables.
    Shape: any spec → the same spec."""

    stem = "elu"

    def __init__(self, alpha: float = 1.0, name: str | None = None):
        super().__init__(name)
        self.alpha = _positive(self, "alpha", alpha)

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return nn.ELU(self.alpha)


class ClippedReLU(_Activation):
    """Clipped ReLU [clippedReluLayer]: min(max(x, 0), ceiling). No learnables. Shape: any
    spec → the same spec."""

    stem = "clippedrelu"

    def __init__(self, ceiling: float, name: str | None = None):
        super().__init__(name)
        self.ceiling = _positive(self, "ceiling", ceiling)

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return nn.Hardtanh(0.0, self.ceiling)


class Softplus(_Activation):
    """Softplus [softplusLayer]: log(1 + exp(x)). No learnables. Shape: any spec → the same."""

    stem = "softplus"

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return nn.Softplus()


def _positive(layer, what, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or \
            not np.isfinite(value) or value <= 0:
        raise layer.error(ArgumentError, None, f"expected {what} to be a positive number, "
                          f"received {value!r}.")
    return float(value)


class CrossChannelNormalization(Layer):
    """Local response normalisation across channels [crossChannelNormalizationLayer]: each
    value divided by (k + α·s / n)^β, s the sum of squares over a window of `window` channels
    around it (as `torch.nn.LocalResponseNorm`, which uses MATLAB's formula). No learnables.
    Shape: B×C×H×W, B×T×C or B×C → the same spec."""

    stem = "crossnorm"
    time_local = True

    def __init__(self, window: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 2.0,
                 name: str | None = None):
        super().__init__(name)
        if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window < 1:
            raise self.error(ArgumentError, None, f"expected windowChannelSize to be a whole "
                             f"number ≥ 1, received {window!r}.")
        self.window = int(window)
        self.alpha, self.beta, self.k = float(alpha), float(beta), _positive(self, "K", k)

    def infer(self, specs: dict[str, Spec]) -> Spec:
        s = specs["in"]
        self.require(s, "in", ("BTC", "BC", "BCSS"))
        return s

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return _ChannelsFirst(nn.LocalResponseNorm(self.window, self.alpha, self.beta, self.k),
                              specs["in"].labels.index("C"))


class _ChannelsFirst(nn.Module):
    """Runs a module that reads channels on dimension 1 on data whose channels are elsewhere."""

    def __init__(self, inner: nn.Module, cdim: int):
        super().__init__()
        self.inner, self.cdim = inner, cdim

    def forward(self, x):
        if self.cdim == 1:
            return self.inner(x)
        h = x.movedim(self.cdim, 1)
        if h.dim() == 2:
            return self.inner(h.unsqueeze(-1)).squeeze(-1).movedim(1, self.cdim)
        return self.inner(h).movedim(1, self.cdim)


class Resize2d(Layer):
    """Resizes images [resize2dLayer]: by `scale` (one per side, or one for both) or to
    `size` (height, width); "nearest" (MATLAB's default, rounding half-pixel positions as
    MATLAB's "round" mode does, in exact integer arithmetic) or "bilinear" (half-pixel, without antialiasing). No
    learnables. Shape: B×C×H×W → B×C×H'×W'."""

    stem = "resize"

    def __init__(self, scale: Sequence[float] | float | None = None,
                 size: Sequence[int] | None = None, method: str = "nearest",
                 name: str | None = None):
        super().__init__(name)
        if (scale is None) == (size is None):
            raise self.error(ArgumentError, None, "expected Scale or OutputSize (one of them).")
        pair = list(scale) if isinstance(scale, (list, tuple)) else [scale, scale]
        self.scale = None if scale is None else [float(cast(float, v)) for v in pair]
        self.size = None if size is None else [int(v) for v in size]
        if method not in ("nearest", "bilinear"):
            raise self.error(ArgumentError, None, f"expected Method \"nearest\" or "
                             f"\"bilinear\", received {method!r}.")
        self.method = method

    def infer(self, specs: dict[str, Spec]) -> Spec:
        s = specs["in"]
        self.require(s, "in", ("BCSS",), "resize2dLayer resizes images.")
        h, w = s.sizes[2], s.sizes[3]
        oh: int | None
        ow: int | None
        if self.size is not None:
            oh, ow = self.size
        else:
            sh, sw = cast(list, self.scale)
            oh = None if h is None else int(np.floor(h * sh))
            ow = None if w is None else int(np.floor(w * sw))
        return Spec("BCSS", (None, s.sizes[1], oh, ow))

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return _Resize(self.size, self.scale, self.method)


class _Resize(nn.Module):
    def __init__(self, size, scale, method):
        super().__init__()
        self.size, self.scale, self.method = size, scale, method

    def forward(self, x):
        size = self.size or [int(np.floor(x.shape[2] * self.scale[0])),
                             int(np.floor(x.shape[3] * self.scale[1]))]
        if self.method == "nearest":     # rows, then columns, as interpolate's "nearest-exact"
            rows = _nearest_exact(x.shape[2], size[0], x.device)
            return x.index_select(2, rows).index_select(3, _nearest_exact(x.shape[3], size[1],
                                                                           x.device))
        return torch.nn.functional.interpolate(x, size=size, mode="bilinear",
                                               align_corners=False)


def _nearest_exact(n_in: int, n_out: int, device: torch.device) -> torch.Tensor:
    """The source index of each of `n_out` positions resized from `n_in`: the half-pixel centre
    (i + 0.5)·n_in/n_out rounded down, in integers, so exact at every size and dtype (torch's
    "nearest-exact" rounds it in floating point, and ONNX opset 17 cannot export it)."""
    i = torch.arange(n_out, device=device)
    return ((2 * i + 1) * n_in).div((2 * n_out), rounding_mode="floor").clamp(max=n_in - 1)


class MatlabConcatenation(Concatenation):
    """MATLAB's concatenationLayer(dim, n): `dim` counts the dimensions of MATLAB's layouts —
    sequences "CBT" (1 channels, 2 batch, 3 time), features "CB" (1 channels, 2 batch),
    images "SSCB" (1 height, 2 width, 3 channels, 4 batch) — and is resolved when the input is
    known: channels or time are joined as `Concatenation` joins them; the batch is refused, as
    MATLAB refuses it, and the height or width of images (which attnlab does not join) too.
    Shape: as `Concatenation` along the resolved dimension."""

    stem = "concat"

    def __init__(self, n: int = 2, matlab_dim: int = 1, name: str | None = None):
        # No `dim` of its own: which dimension `matlab_dim` names depends on the input's layout,
        # so it is resolved at each analysis and never stored (a stored one would make the
        # description depend on the last analysis, and the layer rebuilt from its config differ).
        _Combine.__init__(self, n, name)
        if isinstance(matlab_dim, bool) or not isinstance(matlab_dim, (int, np.integer)) or \
                matlab_dim < 1:
            raise self.error(ArgumentError, None, f"expected dim to be a positive integer, "
                             f"received {matlab_dim!r}.")
        self.matlab_dim = int(matlab_dim)

    def config(self) -> dict:
        return Layer.config(self)                # its own arguments: n, matlab_dim

    def _resolve(self, spec: Spec) -> str:
        layout, names = {"BTC": ("CBT", ("channel", "batch", "time")),
                         "BC": ("CB", ("channel", "batch")),
                         "BCSS": ("SSCB", ("height", "width", "channel", "batch"))}.get(
            spec.labels, (None, ()))
        d = self.matlab_dim
        which = names[d - 1] if d <= len(names) else "singleton"
        if which in ("channel", "time"):
            return which
        shown = ", ".join(f"{i + 1} {n}" for i, n in enumerate(names))
        if which in ("batch", "singleton"):
            raise self.error(FormatError, "in1", f"concatenationLayer({d}, {self.n}): dimension "
                             f"{d} of its {_KIND.get(spec.labels, 'input')} ({spec}; MATLAB's "
                             f"\"{layout}\": {shown}) is "
                             + ("the batch" if which == "batch" else "beyond the data's")
                             + ": observations cannot be concatenated. Concatenate channels "
                             f"with dim {names.index('channel') + 1}"
                             + (" or time with dim 3." if spec.labels == "BTC" else "."))
        raise self.error(FormatError, "in1", f"concatenationLayer({d}, {self.n}): attnlab has "
                         f"no counterpart of concatenating images along their {which} "
                         f"(MATLAB's \"SSCB\": {shown}); it joins channels (dim 3, "
                         "depthConcatenationLayer).")

    def _as_concatenation(self, spec: Spec) -> MatlabConcatenation:
        """This layer with `dim` resolved for `spec`: a copy, so this description stays as
        built (errors still name this layer)."""
        twin = copy.copy(self)
        twin.dim = self._resolve(spec)
        return twin

    def infer(self, specs: dict[str, Spec]) -> Spec:
        return Concatenation.infer(self._as_concatenation(specs["in1"]), specs)

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return Concatenation.build(self._as_concatenation(specs["in1"]), specs)


@register_stepper(MatlabConcatenation)
def _matlab_concatenation(ctx: LayerContext) -> str:
    layer = cast(MatlabConcatenation, ctx.layer)
    if layer._resolve(ctx.in_specs["in1"]) == "time":
        raise NotStreamable(f"concatenates along time (concatenationLayer({layer.matlab_dim}, "
                            f"{layer.n}) of sequences), so its steps come from sequences of "
                            "unknown length", "concatenate channels (dim 1) or give the "
                            "concatenated inputs in static_inputs")
    return PER_STEP


_KIND = {"BTC": "sequence input", "BC": "feature input", "BCSS": "image input"}
