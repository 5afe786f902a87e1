"""Layer types MATLAB has and attnlab's core does not: input normalisation, 1-D pooling with
MATLAB's stride and padding, scaling and identity layers.

They are ordinary `Layer` subclasses: they register themselves as layer types when
`attnlab.matlab` is imported, so `net.save`/`al.load` carry them (import `attnlab.matlab` before
loading a network that holds them). Their statistics and constants are buffers.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np

import torch
from torch import nn
from torch.nn import functional as F

from ..errors import ArgumentError, DataError, SizeError
from ..spec import Spec
from ..layers import Conv2d
from ..layers.base import Layer
from ..layers.conv import _SameStridedConv2d
from ._types import Values

NORMALIZATIONS = ("none", "zerocenter", "zscore", "rescale-symmetric", "rescale-zero-one")


def _floats(layer, what, value):
    if value is None:
        return None
    vals = value.tolist() if hasattr(value, "tolist") else value
    vals = vals if isinstance(vals, (list, tuple)) else [vals]
    flat = []
    for v in vals:
        flat.extend(v if isinstance(v, (list, tuple)) else [v])
    try:
        return [float(v) for v in flat]
    except (TypeError, ValueError):
        raise ArgumentError(f"layer '{layer.name}': expected {what} to be numbers (a scalar or "
                            f"one per channel), received {value!r}.") from None


class InputNormalization(Layer):
    """What MATLAB's input layers do with `Normalization`: per channel, "zerocenter" x − μ,
    "zscore" (x − μ)/σ, "rescale-symmetric" 2(x − min)/(max − min) − 1, "rescale-zero-one"
    (x − min)/(max − min). The statistics are buffers, computed from the training data when
    training starts (`fit`) unless given (`mean`, `std`, `min`, `max`: a scalar or one per
    channel). Placed right after its input layer."""

    stem = "normalization"
    time_local = True

    def __init__(self, method: str = "zscore", mean: Values | None = None,
                 std: Values | None = None, min: Values | None = None, max: Values | None = None,
                 name: str | None = None):
        super().__init__(name)
        if not isinstance(method, str) or method.lower() not in NORMALIZATIONS[1:]:
            raise ArgumentError(f"layer '{name}': expected Normalization among "
                                f"{', '.join(NORMALIZATIONS)}, received {method!r}.")
        self.method = method.lower()
        self.mean, self.std = _floats(self, "Mean", mean), _floats(self, "StandardDeviation", std)
        self.min, self.max = _floats(self, "Min", min), _floats(self, "Max", max)

    def infer(self, specs: dict[str, Spec]) -> Spec:
        s = specs["in"]
        for what, v in (("Mean", self.mean), ("StandardDeviation", self.std), ("Min", self.min),
                        ("Max", self.max)):
            if v is not None and len(v) not in (1, s.channels or len(v)):
                raise self.error(SizeError, "in", f"expected {what} with 1 or {s.channels} values "
                                 f"(one per channel), received {len(v)}.")
        return s

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        s = specs["in"]
        # built after inference from an input layer, whose channels are known
        return _Normalize(self, cast(int, s.channels), s.labels.index("C") if "C" in s.labels else -1,
                          len(s.labels))


class _Normalize(nn.Module):
    mean: torch.Tensor                     # buffers (registered below by name)
    std: torch.Tensor
    min: torch.Tensor
    max: torch.Tensor
    fitted: torch.Tensor

    def __init__(self, layer: InputNormalization, channels: int, cdim: int, ndim: int):
        super().__init__()
        self.method, self.cdim, self.ndim = layer.method, cdim % ndim, ndim
        given = {"mean": (layer.mean, 0.0), "std": (layer.std, 1.0), "min": (layer.min, 0.0),
                 "max": (layer.max, 1.0)}
        for key, (vals, default) in given.items():
            t = torch.full((channels,), default) if vals is None else \
                torch.tensor(vals, dtype=torch.float32).expand(channels).clone()
            self.register_buffer(key, t)
        # 1 once the statistics are known (given, or computed from training data)
        needed = {"zerocenter": [layer.mean], "zscore": [layer.mean, layer.std]}.get(
            layer.method, [layer.min, layer.max])
        self.register_buffer("fitted", torch.tensor(float(all(v is not None for v in needed))))

    def _shape(self, t):
        shape = [1] * self.ndim
        shape[self.cdim] = -1
        return t.view(shape)

    def forward(self, x):
        if self.method == "zerocenter":
            return x - self._shape(self.mean)
        if self.method == "zscore":
            return (x - self._shape(self.mean)) / self._shape(self.std)
        span = self._shape(self.max - self.min)
        y = (x - self._shape(self.min)) / span
        return 2 * y - 1 if self.method == "rescale-symmetric" else y

    @torch.no_grad()
    def fit(self, x: torch.Tensor) -> None:
        """Statistics per channel from all observations (and time steps, pixels) of `x`, whose
        channel axis is the last one (a U×C matrix of valid units)."""
        x = x.to(self.mean.device, self.mean.dtype)
        if self.method in ("zerocenter", "zscore"):
            self.mean.copy_(x.mean(0))
            self.std.copy_(x.std(0, unbiased=False).clamp_min(torch.finfo(x.dtype).eps))
        else:
            lo, hi = x.amin(0), x.amax(0)
            self.min.copy_(lo)
            self.max.copy_(torch.where(hi > lo, hi, lo + 1))   # a constant channel maps to 0
        self.fitted.fill_(1.0)


def _pad_pair(layer, padding):
    if isinstance(padding, str):
        if padding.lower() != "same":
            raise ArgumentError(f"layer '{layer.name}': expected Padding \"same\", a number or "
                                f"[before after], received {padding!r}.")
        return "same"
    vals = padding.tolist() if hasattr(padding, "tolist") else padding
    vals = vals if isinstance(vals, (list, tuple)) else [vals]
    if len(vals) == 1:
        vals = [vals[0], vals[0]]
    if len(vals) != 2 or any(int(v) != v or v < 0 for v in vals):
        raise ArgumentError(f"layer '{layer.name}': expected Padding as p or [before after] "
                            f"(integers ≥ 0), received {padding!r}.")
    return [int(v) for v in vals]


class Pool1d(Layer):
    """Max or average pooling over time [maxPooling1dLayer, averagePooling1dLayer]: B×T×C →
    B×T'×C, with MATLAB's defaults (stride 1, no padding) and "same" padding. Padded steps of
    shorter sequences never win a max nor leak into valid steps; the mask follows the new
    length."""

    stem = "pool1d"
    uses_mask = True
    returns_mask = True

    def __init__(self, mode: str, pool_size: int, stride: int = 1,
                 padding: int | str | Sequence[int] | np.ndarray = 0,
                 name: str | None = None):
        super().__init__(name)
        if mode not in ("max", "average"):
            raise ArgumentError(f"layer '{name}': expected mode 'max' or 'average', received {mode!r}.")
        self.mode = mode
        for what, v in (("poolSize", pool_size), ("Stride", stride)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ArgumentError(f"layer '{name}': expected {what} to be an integer ≥ 1, "
                                    f"received {v!r}.")
        self.pool_size, self.stride = pool_size, stride
        self.padding = _pad_pair(self, padding)

    def _pads(self, t):
        if self.padding == "same":
            total = max((-(-t // self.stride) - 1) * self.stride + self.pool_size - t, 0)
            return total // 2, total - total // 2
        return tuple(self.padding)

    def _length(self, t):
        before, after = self._pads(t)
        return (t + before + after - self.pool_size) // self.stride + 1

    def infer(self, specs: dict[str, Spec]) -> Spec:
        s = specs["in"]
        self.require(s, "in", ("BTC",), "1-D pooling works on sequences; use maxPooling2dLayer "
                     "for images.")
        t = None if s.time is None else self._length(s.time)
        if t is not None and t < 1:
            raise self.error(SizeError, "in", f"expected a sequence of at least {self.pool_size} "
                             f"steps, received {s}. Use Padding=\"same\" or a smaller pool size.")
        return Spec("BTC", (None, t, s.channels))

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return _Pool1d(self)


class _Pool1d(nn.Module):
    def __init__(self, layer: Pool1d):
        super().__init__()
        self._layer = (layer,)  # a tuple keeps the description out of the module tree

    def forward(self, x, masks=(None,)):
        layer, mask = self._layer[0], masks[0]
        fill = float("-inf") if layer.mode == "max" else 0.0
        if mask is not None:
            x = x.masked_fill(~mask.unsqueeze(-1), fill)
        t = x.shape[1]
        before, after = layer._pads(t)
        y = F.pad(x.transpose(1, 2), (before, after), value=fill)         # B×C×T
        pool = F.max_pool1d if layer.mode == "max" else F.avg_pool1d
        y = pool(y, layer.pool_size, layer.stride).transpose(1, 2)        # B×T'×C
        if mask is None:
            return y, None
        lengths = mask.sum(1)
        starts = torch.arange(y.shape[1], device=y.device) * layer.stride - before
        valid = starts.unsqueeze(0) < lengths.unsqueeze(1)
        return y.masked_fill(~valid.unsqueeze(-1), 0.0), valid


class Scaling(Layer):
    """`Y = scale .* X + bias` with fixed (not learned) scale and bias: scalars or one per
    channel [scalingLayer]."""

    stem = "scaling"
    time_local = True

    def __init__(self, scale: Values = 1.0, bias: Values = 0.0, name: str | None = None):
        super().__init__(name)
        self.scale = _floats(self, "Scale", scale)
        self.bias = _floats(self, "Bias", bias)

    def infer(self, specs: dict[str, Spec]) -> Spec:
        s = specs["in"]
        for what, v in (("Scale", self.scale), ("Bias", self.bias)):
            if len(v) != 1 and s.channels is not None and len(v) != s.channels:
                raise self.error(SizeError, "in", f"expected {what} with 1 or {s.channels} values "
                                 f"(one per channel), received {len(v)}.")
        return s

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        s = specs["in"]
        return _Scale(self.scale, self.bias, s.labels.index("C") if "C" in s.labels else -1,
                      len(s.labels))


class _Scale(nn.Module):
    def __init__(self, scale, bias, cdim, ndim):
        super().__init__()
        shape = [1] * ndim
        shape[cdim % ndim] = -1
        self.register_buffer("scale", torch.tensor(scale).view(shape))
        self.register_buffer("bias", torch.tensor(bias).view(shape))

    def forward(self, x):
        return x * self.scale + self.bias


class Identity(Layer):
    """Passes its input through unchanged [identityLayer]."""

    stem = "identity"
    time_local = True
    keeps_ids = True            # token ids stay ids

    def infer(self, specs: dict[str, Spec]) -> Spec:
        return specs["in"]

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return nn.Identity()


class GroupedConv2d(Conv2d):
    """Grouped 2-D convolution [groupedConvolution2dLayer]: the C input channels split into
    `groups` groups (None: one per channel, MATLAB's "channel-wise"), each convolved with
    `filters_per_group` filters of its own; B×C×H×W → B×(groups·filters_per_group)×H'×W'.
    Padding, stride and dilation as `Conv2d`."""

    stem = "groupedconv"

    def __init__(self, kernel: Any, filters_per_group: int, groups: int | None = None,
                 stride: Any = 1, padding: Any = "valid", dilation: Any = 1,
                 name: str | None = None):
        if groups is not None and (isinstance(groups, bool) or not isinstance(groups, int)
                                   or groups < 1):
            raise ArgumentError(f"layer '{name}': expected numGroups to be an integer ≥ 1 or "
                                f"\"channel-wise\", received {groups!r}.")
        super().__init__(kernel, filters_per_group, stride, padding, dilation, name=name)
        self.filters_per_group, self.groups = self.filters, groups

    def config(self) -> dict:
        c = super().config()
        c.pop("filters", None)
        c.pop("bias", None)
        return c

    def _groups(self, channels):
        return channels if self.groups is None else self.groups

    def infer(self, specs: dict[str, Spec]) -> Spec:
        s = specs["in"]
        self.require(s, "in", ("BCSS",), "groupedConvolution2dLayer works on images.")
        c = s.channels
        g = self._groups(c)
        if c is not None and c % g:
            raise self.error(SizeError, "in", f"expected a number of channels divisible by "
                             f"numGroups {g}, received {s}. Use numGroups that divides {c}, "
                             "or \"channel-wise\".")
        hw = self._out_hw(s, "filter size", "Use Padding=\"same\" or a smaller filter.")
        return Spec.image(None if c is None else g * self.filters_per_group, *hw)

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        cin = int(specs["in"].channels or 0)     # known once the network builds its modules
        g = self._groups(cin)
        out = g * self.filters_per_group
        if self.padding == "same" and self.stride == (1, 1):
            return nn.Conv2d(cin, out, self.kernel, 1, "same", self.dilation, groups=g)
        if self.padding == "same":
            return _SameStridedConv2d(cin, out, self.kernel, self.stride, 0, self.dilation,
                                      groups=g)
        pad = (0, 0) if self.padding == "valid" else self.padding
        return nn.Conv2d(cin, out, self.kernel, self.stride, pad, self.dilation, groups=g)


class SpatialDropout(Layer):
    """Zeroes whole channels with probability `p` during training — each channel of each
    observation over all its time steps or pixels — and scales the others by 1/(1 − p); the
    identity in evaluation [spatialDropoutLayer]. B×T×C, B×C×H×W (and B×C) in, the same out."""

    stem = "spatialdrop"

    def __init__(self, p: float = 0.5, name: str | None = None):
        super().__init__(name)
        from ..layers import _checks as check
        self.p = check.probability(self, "p", p)

    def infer(self, specs: dict[str, Spec]) -> Spec:
        return specs["in"]

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        s = specs["in"]
        return _SpatialDropout(self.p, s.labels.index("C") if "C" in s.labels else
                               len(s.labels) - 1)


class _SpatialDropout(nn.Module):
    def __init__(self, p: float, cdim: int):
        super().__init__()
        self.p, self.cdim = p, cdim

    def forward(self, x):
        if not self.training or self.p == 0:
            return x
        shape = [1] * x.dim()
        shape[0], shape[self.cdim] = x.shape[0], x.shape[self.cdim]
        keep = (torch.rand(shape, device=x.device) >= self.p).to(x.dtype)
        return x * keep / (1.0 - self.p)


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
