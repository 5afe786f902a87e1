"""Pooling, flattening and indexing: the layers that reduce space or time."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from attnlab.core.errors import ArgumentError, DataError, FormatError, SizeError
from attnlab.core.spec import Spec
from attnlab.core import checks as check
from .base import Layer
from .conv import _out_size


def lengths_of(mask):
    return mask.sum(1)


class _Pool2d(Layer):
    stem = "pool"

    def __init__(self, pool_size: int | tuple[int, int], stride: int | tuple[int, int] | None = None,
                 padding: int | tuple[int, int] = 0, name: str | None = None):
        super().__init__(name)
        self.pool_size = check.int_pair(self, "pool_size", pool_size, example=2)
        self.stride = self.pool_size if stride is None else \
            check.int_pair(self, "stride", stride, example=2)
        self.padding = check.int_pair(self, "padding", padding, least=0, example=0)
        for k, p in zip(self.pool_size, self.padding):
            if p > k // 2:      # torch refuses it at run time; say so when the layer is made
                raise check.fail(self, "padding", f"at most half the pool size {self.pool_size} "
                                 f"(here ≤ {k // 2})", padding,
                                 "Use a smaller padding or a larger pool_size.")

    def infer(self, specs: dict[str, Spec]) -> Spec:
        s = specs["in"]
        self.require(s, "in", ("BCSS",), "2-D pooling works on images.")
        hw = [_out_size(n, k, st, 1, (p, p)) for n, k, st, p in
              zip(s.sizes[2:], self.pool_size, self.stride, self.padding)]
        if any(o is not None and o < 1 for o in hw):
            raise self.error(SizeError, "in", f"expected an image of at least "
                             f"{self.pool_size[0]}×{self.pool_size[1]}, received {s}. "
                             "Use a smaller pool_size or fewer pooling layers.")
        return Spec.image(s.channels, *hw)

    def config(self) -> dict:
        return {k: list(getattr(self, k)) for k in ("pool_size", "stride", "padding")}


class MaxPool2d(_Pool2d):
    """Maximum over windows of an image [maxPooling2dLayer]. No learnables.

    Parameters
    ----------
    pool_size : int or (int, int)
        The window's height and width.
    stride : int or (int, int), optional
        The step between windows; defaults to `pool_size` (windows that do not overlap).
    padding : int or (int, int)
        Rows/columns added on each side, at most half the window.

    Shape
    -----
    - `in`: B×C×H×W
    - `out`: B×C×H'×W', H' = ⌊(H + 2·padding − pool_size) / stride⌋ + 1
    """

    stem = "maxpool"

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return nn.MaxPool2d(self.pool_size, self.stride, self.padding)


class AvgPool2d(_Pool2d):
    """Mean over windows of an image [averagePooling2dLayer]. No learnables.

    Parameters
    ----------
    pool_size : int or (int, int)
        The window's height and width.
    stride : int or (int, int), optional
        The step between windows; defaults to `pool_size` (windows that do not overlap).
    padding : int or (int, int)
        Rows/columns added on each side, at most half the window.

    Shape
    -----
    - `in`: B×C×H×W
    - `out`: B×C×H'×W', H' = ⌊(H + 2·padding − pool_size) / stride⌋ + 1
    """

    stem = "avgpool"

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return nn.AvgPool2d(self.pool_size, self.stride, self.padding)


class GlobalAvgPool1d(Layer):
    """Mean over time of each sequence's valid steps [globalAveragePooling1dLayer].
    A sequence with no valid step gives zeros.

    Shape
    -----
    - `in`: B×T×C
    - `out`: B×C
    """

    stem = "gap"
    uses_mask = True

    def infer(self, specs: dict[str, Spec]) -> Spec:
        s = specs["in"]
        self.require(s, "in", ("BTC",), "GlobalAvgPool1d reduces the time axis of a sequence; "
                     "use GlobalAvgPool2d for images.")
        return Spec.features(s.channels)

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return _MaskedMean()


class _MaskedMean(nn.Module):
    def forward(self, x, masks=(None,)):
        mask = masks[0]
        if mask is None:
            return x.mean(1)
        m = mask.unsqueeze(-1).to(x.dtype)                       # B×T×1
        return (x * m).sum(1) / m.sum(1).clamp(min=1)             # B×C; empty sequences give 0


class GlobalMaxPool1d(Layer):
    """Maximum over time of each sequence's valid steps [globalMaxPooling1dLayer].
    A sequence with no valid step gives zeros.

    Shape
    -----
    - `in`: B×T×C
    - `out`: B×C
    """

    stem = "gmp"
    uses_mask = True

    infer = GlobalAvgPool1d.infer

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return _MaskedMax()


class _MaskedMax(nn.Module):
    def forward(self, x, masks=(None,)):
        mask = masks[0]
        if mask is None:
            return x.amax(1)
        m = mask.unsqueeze(-1)                                    # B×T×1
        y = x.masked_fill(~m, float("-inf")).amax(1)              # B×C
        return torch.where(m.any(1), y, torch.zeros_like(y))      # empty sequences give 0


class GlobalAvgPool2d(Layer):
    """Mean over the height and width of an image [globalAveragePooling2dLayer].

    Shape
    -----
    - `in`: B×C×H×W
    - `out`: B×C
    """

    stem = "gap"

    def infer(self, specs: dict[str, Spec]) -> Spec:
        s = specs["in"]
        self.require(s, "in", ("BCSS",), "GlobalAvgPool2d reduces the spatial axes of an image; "
                     "use GlobalAvgPool1d for sequences.")
        return Spec.features(s.channels)

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return _SpatialMean()


class _SpatialMean(nn.Module):
    def forward(self, x):
        return x.mean((2, 3))  # B×C×H×W → B×C


class GlobalMaxPool2d(GlobalAvgPool2d):
    """Maximum over the height and width of an image [globalMaxPooling2dLayer].

    Shape
    -----
    - `in`: B×C×H×W
    - `out`: B×C
    """

    stem = "gmp"

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return _SpatialMax()


class _SpatialMax(nn.Module):
    def forward(self, x):
        return x.amax((2, 3))  # B×C×H×W → B×C


class Flatten(Layer):
    """Flattens an image into a feature vector [flattenLayer]; features pass unchanged.

    Unlike MATLAB's, it refuses sequences: reduce the time axis with `GlobalAvgPool1d`,
    `Index1d` or `AttentionPool1d` instead.

    Shape
    -----
    - `in`: B×C×H×W or B×C
    - `out`: B×(C·H·W) or B×C
    """

    def infer(self, specs: dict[str, Spec]) -> Spec:
        s = specs["in"]
        if s.is_sequence:
            raise self.error(FormatError, "in", f"expected B×C×S×S or B×C, received {s} (sequence). "
                             "Flatten does not merge time into channels; reduce the time axis with "
                             "GlobalAvgPool1d, Index1d('last') or AttentionPool1d instead.")
        self.require(s, "in", ("BCSS", "BC"))
        if s.is_image:
            return Spec.features(check.product(s.sizes[1:]))
        return s

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return nn.Flatten(1)


class Index1d(Layer):
    """One time step of each sequence [indexing1dLayer].

    Parameters
    ----------
    index : "first", "last" or int
        "last" takes each sequence's own last valid step when the lengths differ; an int is 0-based,
        a negative one counts from the end of the padded batch.

    Shape
    -----
    - `in`: B×T×C
    - `out`: B×C

    Examples
    --------
    >>> import torch, attnlab as al
    >>> from attnlab import layers as L
    >>> net = al.Network([L.SequenceInput(2), L.Index1d("last")])
    >>> seqs = [torch.ones(3, 2), 2 * torch.ones(5, 2)]        # lengths 3 and 5
    >>> net(al.pad_sequences(seqs)).tolist()
    [[1.0, 1.0], [2.0, 2.0]]
    """

    stem = "index1d"
    uses_mask = True
    keeps_ids = True            # the values pass unchanged: token ids stay ids

    def __init__(self, index: str | int = "last", name: str | None = None):
        super().__init__(name)
        if isinstance(index, str):
            index = check.choice(self, "index", index, ("first", "last"),
                                 extra="an int (0-based; negative counts from the end)")
        else:
            try:
                index = check.integer(self, "index", index, least=-(2 ** 62))
            except ArgumentError:
                raise check.fail(self, "index", "'first', 'last' or an int (0-based; negative "
                                 "counts from the end)", index, "Use e.g. index='last'.") from None
        self.index = index

    def infer(self, specs: dict[str, Spec]) -> Spec:
        s = specs["in"]
        self.require(s, "in", ("BTC",), "Index1d picks a time step of a sequence.")
        if isinstance(self.index, int) and s.time is not None and not -s.time <= self.index < s.time:
            raise self.error(SizeError, "in", f"expected a sequence with a step {self.index} "
                             f"(0-based), received {s}: it has steps 0…{s.time - 1}. Use an index "
                             f"in -{s.time}…{s.time - 1}, or index='last'.")
        return Spec.features(s.channels)

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return _Index1d(0 if self.index == "first" else self.index, self.name)


class _Index1d(nn.Module):
    def __init__(self, index, name=None):
        super().__init__()
        self.index = index
        self.name = name

    def forward(self, x, masks=(None,)):
        mask = masks[0]
        if self.index != "last":
            t = x.shape[1]          # a Python int: no device sync
            if not -t <= self.index < t:
                raise DataError(f"layer '{self.name}': expected sequences with a step "
                                f"{self.index} (0-based), received {t} steps. Use an index in "
                                f"-{t}…{t - 1}, index='last', or longer sequences.")
            return x[:, self.index]                               # B×C
        if mask is None:
            return x[:, -1]
        last = (lengths_of(mask) - 1).clamp(min=0)                # B
        return x[torch.arange(x.shape[0], device=x.device), last]  # B×C


def _pad_pair(layer, padding):
    what = "\"same\", an int ≥ 0 or (before, after)"
    if isinstance(padding, str):
        if padding.lower() != "same":
            raise check.fail(layer, "padding", what, padding, 'Use e.g. padding="same".')
        return "same"
    vals = padding.tolist() if hasattr(padding, "tolist") else padding
    vals = vals if isinstance(vals, (list, tuple)) else [vals]
    if len(vals) == 1:
        vals = [vals[0], vals[0]]
    if len(vals) != 2 or any(not check._is_int(v) or v < 0 for v in vals):
        raise check.fail(layer, "padding", what, padding)
    return [int(v) for v in vals]


class Pool1d(Layer):
    """Max or average pooling over time [maxPooling1dLayer, averagePooling1dLayer]. Padded
    steps of shorter sequences never win a max nor leak into valid steps; the mask follows the
    new length.

    Parameters
    ----------
    mode : str
        "max" or "average".
    pool_size : int
        The number of steps pooled, ≥ 1.
    stride : int
        The step between pools, ≥ 1 (default 1, as MATLAB).
    padding : int, sequence of int or str
        Steps added before and after: p (both), (before, after), or "same", which keeps
        ⌈T/stride⌉ steps (default 0). Padded steps never win a max and average as zeros.

    Shape
    -----
    - `in`: B×T×C
    - `out`: B×T'×C, T' = (T + before + after − pool_size) // stride + 1
    """

    stem = "pool1d"
    uses_mask = True
    returns_mask = True

    def __init__(self, mode: str, pool_size: int, stride: int = 1,
                 padding: int | str | Sequence[int] | np.ndarray = 0,
                 name: str | None = None):
        super().__init__(name)
        self.mode = check.choice(self, "mode", mode, ("max", "average"))
        self.pool_size = check.integer(self, "pool_size", pool_size)
        self.stride = check.integer(self, "stride", stride)
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


class LastToken(Layer):
    """Each sequence's last token that is not padding, picked by its id as transformers'
    `*ForSequenceClassification` models pick the token they score.

    The step taken is the last one whose id (port `ids`) is not `pad_id` and that the
    padding mask does not mark as padding — so left padding, right padding and a padding id
    at the end of a sequence all lead to the last real token; where no step qualifies, the
    first. With `pad_id` None (a model without a padding token) it is each sequence's last
    valid step, as `Index1d("last")`.

    Parameters
    ----------
    pad_id : int or None
        The padding token's id (a config's `pad_token_id`).

    Shape
    -----
    - `in`: B×T×C (the values to pick from)
    - `ids`: B×T token ids from a `TokenInput` (or B×T×1 from a `SequenceInput(1)`)
    - `out`: B×C

    Examples
    --------
    >>> import torch, attnlab as al
    >>> from attnlab import layers as L
    >>> net = al.Network([L.TokenInput(name="ids"), L.Embedding(10, 1, name="embed"),
    ...                   L.LastToken(pad_id=0, name="last")])
    >>> net.connect("ids", "last/ids")
    Network(...)
    >>> with torch.no_grad():
    ...     _ = net.learnables["embed/weight"].copy_(torch.arange(10.).view(10, 1))
    >>> net(torch.tensor([[3, 4, 0, 0], [0, 5, 6, 7]])).flatten().tolist()
    [4.0, 7.0]
    """

    stem = "lasttoken"
    uses_mask = True
    input_ports = ("in", "ids")
    # the analysis refuses computed values at `ids`: they come from an input layer
    reads_ids = ("ids",)

    def __init__(self, pad_id: int | None = None, name: str | None = None):
        super().__init__(name)
        self.pad_id = check.integer(self, "pad_id", pad_id, least=0, none_ok=True, example=0)

    def infer(self, specs: dict[str, Spec]) -> Spec:
        s, ids = specs["in"], specs["ids"]
        self.require(s, "in", ("BTC",), "LastToken picks a time step of a sequence.")
        self.require(ids, "ids", ("BT", "BTC"), "Connect the token ids the sequence came from, "
                     "e.g. net.connect(\"input_ids\", \"<layer>/ids\").")
        if ids.labels == "BTC":
            self.require_channels(ids, "ids", 1, "Token ids come as one channel: SequenceInput(1).")
        if s.time is not None and ids.time is not None and s.time != ids.time:
            raise self.error(SizeError, "ids", f"expected the {s.time} steps of 'in', received "
                             f"{ids}. Connect the token ids of the same sequence.")
        return Spec.features(s.channels)

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return _LastToken(self.pad_id)


class _LastToken(nn.Module):
    def __init__(self, pad_id):
        super().__init__()
        self.pad_id = pad_id

    def forward(self, x, ids, masks=(None, None)):
        mask = masks[0] if masks[0] is not None else masks[1]
        if ids.dim() == 3:
            ids = ids.squeeze(-1)                                     # B×T×1 → B×T
        b, t = x.shape[0], x.shape[1]
        if self.pad_id is None:
            last = (lengths_of(mask) - 1).clamp(min=0) if mask is not None else \
                torch.full((b,), t - 1, dtype=torch.long, device=x.device)
        else:
            # transformers: argmax of index × (id != pad), the rightmost real token (ties, as
            # when there is none, go to the first step)
            real = ids != self.pad_id
            if mask is not None:
                real = real & mask
            steps = torch.arange(t, device=x.device, dtype=torch.int32)
            last = (steps * real.to(torch.int32)).argmax(-1)
        return x[torch.arange(b, device=x.device), last]                     # B×C


class SelectChannel(Layer):
    """One channel of each step, the channel axis dropped: B×T×C → B×T. Two of them split a
    question-answering head's two scores per token into `start_logits` and `end_logits`, as
    transformers' `logits.split(1, dim=-1)` and `squeeze(-1)` do.

    Parameters
    ----------
    index : int
        The channel, 0-based (negative counts from the last).

    Shape
    -----
    - `in`: B×T×C
    - `out`: B×T

    Examples
    --------
    >>> import torch, attnlab as al
    >>> from attnlab import layers as L
    >>> net = al.Network([L.SequenceInput(2), L.SelectChannel(1)])
    >>> net(torch.tensor([[[1., 2.], [3., 4.], [5., 6.]]])).tolist()
    [[2.0, 4.0, 6.0]]
    """

    stem = "selectchannel"
    time_local = True

    def __init__(self, index: int, name: str | None = None):
        super().__init__(name)
        self.index = check.integer(self, "index", index, least=-(2 ** 62), example=0)

    def infer(self, specs: dict[str, Spec]) -> Spec:
        s = specs["in"]
        self.require(s, "in", ("BTC",), "SelectChannel picks a channel of each step.")
        c = s.channels
        if c is not None and not -c <= self.index < c:
            raise self.error(SizeError, "in", f"expected a channel {self.index} (0-based), "
                             f"received {s}: it has channels 0…{c - 1}. Use an index in "
                             f"-{c}…{c - 1}.")
        return Spec("BT", (None, s.time))

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return _SelectChannel(self.index)


class _SelectChannel(nn.Module):
    def __init__(self, index):
        super().__init__()
        self.index = index

    def forward(self, x):
        return x[..., self.index]                                       # B×T
