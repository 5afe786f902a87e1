"""Convolutions over images (B×C×H×W) and over time (B×T×C)."""
from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from attnlab.core.errors import ArgumentError, SizeError
from attnlab.core.spec import Spec
from attnlab.core import checks as check
from .base import Layer


def _same_pad(size: int, k: int, s: int, d: int) -> tuple[int, int]:
    """(before, after) padding so that the output has ceil(size / s) steps, as MATLAB's 'same'."""
    if s == 1:              # independent of the length, so an ONNX export keeps T dynamic
        total = (k - 1) * d
    else:
        total = max((math.ceil(size / s) - 1) * s + (k - 1) * d + 1 - size, 0)
    return total // 2, total - total // 2


def _out_size(size, k, s, d, padding):
    if size is None:
        return None
    if padding == "same":
        return math.ceil(size / s)
    before, after = padding
    return (size + before + after - d * (k - 1) - 1) // s + 1


class Conv2d(Layer):
    """2-D convolution over images [convolution2dLayer]. Learnables `weight`
    (filters×C×kh×kw) and `bias`, as in `torch.nn.Conv2d`.

    Parameters
    ----------
    kernel : int or (int, int)
        The kernel's height and width.
    filters : int
        Channels out.
    stride : int or (int, int)
        The step between applications.
    padding : "same", "valid", int or (int, int)
        "same" gives H' = ceil(H/stride) (as MATLAB's 'same', also with stride > 1); "valid" pads
        nothing; an int or pair pads that many rows/columns on each side.
    dilation : int or (int, int)
        The spacing of the kernel's taps.
    bias : bool
        Whether to learn a bias.

    Shape
    -----
    - `in`: B×C×H×W
    - `out`: B×filters×H'×W'

    Examples
    --------
    >>> import torch, attnlab as al
    >>> from attnlab import layers as L
    >>> net = al.Network([L.ImageInput((1, 28, 28)), L.Conv2d(3, 8, stride=2)])
    >>> net(torch.randn(2, 1, 28, 28)).shape
    torch.Size([2, 8, 14, 14])
    """

    stem = "conv"

    def __init__(self, kernel: int | tuple[int, int], filters: int,
                 stride: int | tuple[int, int] = 1, padding: str | int | tuple[int, int] = "same",
                 dilation: int | tuple[int, int] = 1, bias: bool = True, name: str | None = None):
        super().__init__(name)
        self.kernel = check.int_pair(self, "kernel", kernel, example=3)
        self.filters = check.integer(self, "filters", filters, example=16)
        self.stride = check.int_pair(self, "stride", stride, example=2)
        self.dilation = check.int_pair(self, "dilation", dilation, example=1)
        pad: str | tuple[int, int]
        if isinstance(padding, str):
            pad = check.choice(self, "padding", padding, ("same", "valid"),
                               extra="an int ≥ 0 or a pair of them")
        else:
            try:
                pad = check.int_pair(self, "padding", padding, least=0)
            except ArgumentError:
                raise check.fail(self, "padding", "'same', 'valid', an int ≥ 0 or a pair of them",
                                 padding, "Use e.g. padding='same' or padding=1.") from None
        self.padding = pad
        self.bias = check.flag(self, "bias", bias)

    def _pads(self):
        if self.padding == "same":
            return ("same", "same")
        if self.padding == "valid":
            return ((0, 0), (0, 0))
        return tuple((p, p) for p in self.padding)

    def infer(self, specs: dict[str, Spec]) -> Spec:
        s = specs["in"]
        self.require(s, "in", ("BCSS",), "Conv2d works on images; use Conv1d for sequences.")
        check.learnables_fit(self, "in", "Use a smaller kernel or fewer filters.",
                             weight=(self.filters, s.channels, *self.kernel))
        return Spec.image(self.filters, *self._out_hw(s))

    def _out_hw(self, s: Spec, what: str = "kernel",
                fix: str = "Use padding='same' or a smaller kernel.") -> list[int | None]:
        """The output's height and width; an image too small for the kernel is a SizeError."""
        hw = []
        for size, k, st, d, p in zip(s.sizes[2:], self.kernel, self.stride, self.dilation,
                                     self._pads()):
            o = _out_size(size, k, st, d, p)
            if o is not None and o < 1:
                raise self.error(SizeError, "in", f"expected an image of at least {k}×{k} for "
                                 f"{what} {self.kernel}, received {s}. {fix}")
            hw.append(o)
        return hw

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        cin = check.known(self, "in", specs["in"].channels)
        if self.padding == "same" and self.stride == (1, 1):
            return nn.Conv2d(cin, self.filters, self.kernel, 1, "same", self.dilation, bias=self.bias)
        if self.padding == "same":
            return _SameStridedConv2d(cin, self.filters, self.kernel, self.stride, 0,
                                      self.dilation, bias=self.bias)
        pad = (0, 0) if self.padding == "valid" else self.padding
        return nn.Conv2d(cin, self.filters, self.kernel, self.stride, pad, self.dilation,
                         bias=self.bias)

    def config(self) -> dict:
        c = super().config()
        for k in ("kernel", "stride", "dilation"):
            c[k] = list(c[k])
        if not isinstance(c["padding"], str):
            c["padding"] = list(c["padding"])
        return c


class _SameStridedConv2d(nn.Conv2d):
    """'same' padding with stride > 1 (which torch's Conv2d does not offer): pads per call."""

    def forward(self, x):
        (ph0, ph1) = _same_pad(x.shape[2], self.kernel_size[0], self.stride[0], self.dilation[0])
        (pw0, pw1) = _same_pad(x.shape[3], self.kernel_size[1], self.stride[1], self.dilation[1])
        return super().forward(F.pad(x, (pw0, pw1, ph0, ph1)))


class Conv1d(Layer):
    """1-D convolution over time [convolution1dLayer]. Learnables `weight`
    (filters×C×kernel) and `bias`, as in `torch.nn.Conv1d`.

    Padded steps of shorter sequences are zeroed before the convolution, so they never leak into
    valid steps, and the padding mask follows the new length.

    Parameters
    ----------
    kernel : int
        The kernel's length in time steps.
    filters : int
        Channels out.
    stride : int
        The step between applications.
    padding : "same", "causal", "valid" or int
        "same": T' = ceil(T/stride); "causal": padding on the left only, so step t sees steps ≤ t;
        "valid": none; an int pads that many steps at each end.
    dilation : int
        The spacing of the kernel's taps.
    bias : bool
        Whether to learn a bias.

    Shape
    -----
    - `in`: B×T×C
    - `out`: B×T'×filters

    Examples
    --------
    >>> import torch, attnlab as al
    >>> from attnlab import layers as L
    >>> net = al.Network([L.SequenceInput(4), L.Conv1d(3, 16, padding="causal")])
    >>> net(torch.randn(2, 9, 4)).shape
    torch.Size([2, 9, 16])
    """

    stem = "conv1d"
    uses_mask = True
    returns_mask = True

    def __init__(self, kernel: int, filters: int, stride: int = 1, padding: str | int = "same",
                 dilation: int = 1, bias: bool = True, name: str | None = None):
        super().__init__(name)
        self.kernel = check.integer(self, "kernel", kernel, example=3)
        self.filters = check.integer(self, "filters", filters, example=16)
        self.stride = check.integer(self, "stride", stride, example=1)
        self.dilation = check.integer(self, "dilation", dilation, example=1)
        if isinstance(padding, str):
            padding = check.choice(self, "padding", padding, ("same", "causal", "valid"),
                                   extra="an int ≥ 0")
        else:
            try:
                padding = check.integer(self, "padding", padding, least=0)
            except ArgumentError:
                raise check.fail(self, "padding", "'same', 'causal', 'valid' or an int ≥ 0", padding,
                                 "Use e.g. padding='same' or padding=1.") from None
        self.padding = padding
        self.bias = check.flag(self, "bias", bias)

    def infer(self, specs: dict[str, Spec]) -> Spec:
        s = specs["in"]
        self.require(s, "in", ("BTC",), "Conv1d works on sequences B×T×C; use Conv2d for images.")
        check.learnables_fit(self, "in", "Use a smaller kernel or fewer filters.",
                             weight=(self.filters, s.channels, self.kernel))
        t = None if s.time is None else self._length(s.time)
        if t is not None and t < 1:
            reach = (self.kernel - 1) * self.dilation + 1
            raise self.error(SizeError, "in", f"expected a sequence of at least {reach} steps for "
                             f"kernel {self.kernel} (dilation {self.dilation}) with padding "
                             f"{self.padding!r}, received {s}. Use padding='same' or 'causal', or a "
                             "smaller kernel.")
        return Spec("BTC", (None, t, self.filters))

    def _pads(self, t):
        reach = (self.kernel - 1) * self.dilation
        if self.padding == "same":
            return _same_pad(t, self.kernel, self.stride, self.dilation)
        if self.padding == "causal":
            return reach, 0
        if self.padding == "valid":
            return 0, 0
        return self.padding, self.padding

    def _length(self, t):
        before, after = self._pads(t)
        return (t + before + after - (self.kernel - 1) * self.dilation - 1) // self.stride + 1

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return _Conv1dModule(self, check.known(self, "in", specs["in"].channels))


class _Conv1dModule(nn.Conv1d):
    def __init__(self, layer: Conv1d, cin: int):
        super().__init__(cin, layer.filters, layer.kernel, layer.stride, 0, layer.dilation,
                         bias=layer.bias)
        self._layer = (layer,)  # a tuple keeps the description out of the module tree

    def forward(self, x, masks=(None,)):
        layer, mask = self._layer[0], masks[0]
        if mask is not None:
            x = x * mask.unsqueeze(-1).to(x.dtype)
        t = x.shape[1]
        before, after = layer._pads(t)
        y = super().forward(F.pad(x.transpose(1, 2), (before, after)))  # B×C×T → B×F×T'
        y = y.transpose(1, 2)                                            # B×T'×F
        if mask is None:
            return y, None
        if y.shape[1] == t:
            return y, mask
        # a step is valid when its receptive field starts inside the sequence
        lengths = mask.sum(1)
        starts = torch.arange(y.shape[1], device=y.device) * layer.stride - before
        return y, starts.unsqueeze(0) < lengths.unsqueeze(1)


class GroupedConv2d(Conv2d):
    """Grouped 2-D convolution [groupedConvolution2dLayer]: the C input channels split
    into `groups` groups, each convolved with `filters_per_group` filters of its own.

    Parameters
    ----------
    kernel : int or (int, int)
        The filter size.
    filters_per_group : int
        The filters of each group, ≥ 1.
    groups : int, optional
        The number of groups, dividing C; None: one per channel (MATLAB's "channel-wise").
    stride, padding, dilation
        As `Conv2d`.

    Shape
    -----
    - `in`: B×C×H×W
    - `out`: B×(groups·filters_per_group)×H'×W', H' and W' as `Conv2d`
    """

    stem = "groupedconv"

    def __init__(self, kernel: Any, filters_per_group: int, groups: int | None = None,
                 stride: Any = 1, padding: Any = "valid", dilation: Any = 1,
                 name: str | None = None):
        owner = f"GroupedConv2d '{name}'" if name else "GroupedConv2d"
        groups = check.integer(owner, "groups", groups, none_ok=True)
        check.integer(owner, "filters_per_group", filters_per_group)
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
