"""Normalisation layers."""
from __future__ import annotations

from typing import cast

import torch
from torch import nn

from attnlab.core.errors import SizeError
from attnlab.core.spec import Spec
from attnlab.core import checks as check
from .base import Layer
from .scaling import Values, _floats


class _Norm(Layer):
    """A normalisation: sequences, features or images in, the same shape out."""

    time_local = True

    def infer(self, specs: dict[str, Spec]) -> Spec:
        s = specs["in"]
        self.require(s, "in", ("BTC", "BC", "BCSS"))
        return s


class LayerNorm(_Norm):
    """Layer normalisation [layerNormalizationLayer].

    Sequences and features are normalised over the channels (`torch.nn.LayerNorm`); images over
    channels and space together with a per-channel scale and shift (`torch.nn.GroupNorm` with one
    group), as MATLAB normalises images. Learnables `weight` and `bias` (C each; no `bias` with
    ``bias=False``).

    Parameters
    ----------
    eps : float
        Added to the variance, for stability (1e-5, torch's default; GPT-2 and BERT's
        checkpoints say 1e-5 and 1e-12 in their configs).
    bias : bool
        Whether to learn the shift (`bias`); False as in `torch.nn.LayerNorm(bias=False)`.

    Shape
    -----
    - `in`: B×T×C, B×C or B×C×H×W
    - `out`: the same spec
    """

    def __init__(self, eps: float = 1e-5, bias: bool = True, name: str | None = None):
        super().__init__(name)
        self.eps = check.positive(self, "eps", eps)
        self.bias = check.flag(self, "bias", bias)

    def analysis_warnings(self, specs: dict[str, Spec]) -> list[tuple[str, str]]:
        """(port, message) for inputs that fit but make the layer useless: one channel."""
        s = specs["in"]
        if s.is_image or s.channels != 1:
            return []
        return [("in", f"layer '{self.name}' port 'in': LayerNorm expected several channels, "
                       f"received {s}, one channel. It normalises each step over its channels and "
                       f"one channel minus its own mean is 0, so its output is its bias, constant "
                       f"whatever the input. Put it after a layer with several channels (an LSTM, "
                       f"a Dense), use BatchNorm (which normalises over the batch), or remove it.")]

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        s = specs["in"]
        c = check.known(self, "in", s.channels)
        if s.is_image:
            norm = nn.GroupNorm(1, c, eps=self.eps)
            if not self.bias:
                norm.register_parameter("bias", None)      # F.group_norm takes bias=None
            return norm
        return nn.LayerNorm(c, eps=self.eps, bias=self.bias)


class RMSNorm(Layer):
    """Root-mean-square layer normalisation (Llama's, Mistral's and T5's layer norm):
    x / sqrt(mean(x²) + eps) · weight over the channels, without subtracting the mean and
    without a shift, as `torch.nn.RMSNorm`.

    Computed in float32 whatever the input's dtype and cast back before the scale, as Llama's
    and T5's reference code do, so a bfloat16 network normalises as its checkpoint did.
    Learnable `weight` (C), initialised to ones.

    Parameters
    ----------
    eps : float
        Added to the mean square, for stability (Llama's `rms_norm_eps`, T5's
        `layer_norm_epsilon`).
    unit_offset : bool
        Scale by 1 + weight (Gemma's RMSNorm, in float32 before the cast back), the weight
        initialised to zeros; False: by the weight, initialised to ones.

    Shape
    -----
    - `in`: B×T×C or B×C
    - `out`: the same spec

    Examples
    --------
    >>> import torch
    >>> from attnlab import layers as L
    >>> L.RMSNorm()(torch.tensor([[3.0, 4.0]]))
    tensor([[0.8485, 1.1314]], grad_fn=<MulBackward0>)
    """

    time_local = True

    def __init__(self, eps: float = 1e-6, name: str | None = None, *, unit_offset: bool = False):
        super().__init__(name)
        self.eps = check.positive(self, "eps", eps, example="1e-6")
        self.unit_offset = check.flag(self, "unit_offset", unit_offset)

    def infer(self, specs: dict[str, Spec]) -> Spec:
        s = specs["in"]
        self.require(s, "in", ("BTC", "BC"), "RMSNorm normalises each step over its channels.")
        return s

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return _RMSNorm(check.known(self, "in", specs["in"].channels), self.eps, self.unit_offset)


class _RMSNorm(nn.Module):
    def __init__(self, channels: int, eps: float, unit_offset: bool = False):
        super().__init__()
        self.unit_offset = unit_offset
        self.weight = nn.Parameter(torch.zeros(channels) if unit_offset else torch.ones(channels))
        self.eps = eps

    def forward(self, x):
        # written out, not F.rms_norm: the ONNX exporter has no aten::rms_norm at opset 17
        h = x.float()                                                  # B×T×C in float32
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        if self.unit_offset:        # Gemma: (x̂ · (1 + w)) in float32, then cast
            return (h * (1.0 + self.weight.float())).to(x.dtype)
        return self.weight * h.to(x.dtype)                             # B×T×C

    def extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, eps={self.eps}"


class BatchNorm(_Norm):
    """Batch normalisation over the channels [batchNormalizationLayer].

    Statistics of the mini-batch in training (for sequences over batch and time, padded steps
    included), the running averages in evaluation. Learnables `weight`, `bias`; buffers `running_mean`, `running_var`.

    Parameters
    ----------
    eps : float
        Added to the variance, for stability.
    momentum : float
        The weight of each new batch in the running averages, in [0, 1].

    Shape
    -----
    - `in`: B×T×C, B×C or B×C×H×W
    - `out`: the same spec
    """

    def __init__(self, eps: float = 1e-5, momentum: float = 0.1, name: str | None = None):
        super().__init__(name)
        self.eps = check.positive(self, "eps", eps)
        self.momentum = check.real(self, "momentum", momentum, 0, 1, what="a number in [0, 1]",
                                   fix="Use e.g. momentum=0.1 (the weight of each new batch).")

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        s = specs["in"]
        c = check.known(self, "in", s.channels)
        if s.is_image:
            return nn.BatchNorm2d(c, self.eps, self.momentum)
        if s.is_sequence:
            return _SequenceBatchNorm(c, self.eps, self.momentum)
        return nn.BatchNorm1d(c, self.eps, self.momentum)


class _SequenceBatchNorm(nn.BatchNorm1d):
    def forward(self, x):
        return super().forward(x.transpose(1, 2)).transpose(1, 2)  # B×T×C → B×C×T → B×T×C


NORMALIZATIONS = ("none", "zerocenter", "zscore", "rescale-symmetric", "rescale-zero-one")


class InputNormalization(Layer):
    """Normalises its input per channel, as MATLAB's input layers do with `Normalization`
    [imageInputLayer(..., Normalization=...)]: "zerocenter" x − μ, "zscore" (x − μ)/σ,
    "rescale-symmetric" 2(x − min)/(max − min) − 1, "rescale-zero-one" (x − min)/(max − min).
    The statistics are buffers, computed from the training data when training starts unless
    given. Placed right after an input layer.

    Parameters
    ----------
    method : str
        "zerocenter", "zscore", "rescale-symmetric" or "rescale-zero-one".
    mean, std, min, max : float or sequence of float, optional
        The statistics: a scalar or one per channel; computed from the training data when
        not given.

    Shape
    -----
    - `in`: any spec with a channel axis (B×T×C, B×C, B×C×H×W)
    - `out`: the same spec
    """

    stem = "normalization"
    time_local = True

    def __init__(self, method: str = "zscore", mean: Values | None = None,
                 std: Values | None = None, min: Values | None = None, max: Values | None = None,
                 name: str | None = None):
        super().__init__(name)
        if not isinstance(method, str) or method.lower() not in NORMALIZATIONS[1:]:
            check.choice(self, "method", method, NORMALIZATIONS[1:])
        self.method = method.lower()
        self.mean, self.std = _floats(self, "mean", mean), _floats(self, "std", std)
        self.min, self.max = _floats(self, "min", min), _floats(self, "max", max)

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


class GroupNorm(Layer):
    """Group normalisation [groupNormalizationLayer, instanceNormalizationLayer].

    Each observation's channels are split into `groups` contiguous groups; each group is
    normalised to zero mean and unit variance over its channels and every time step or pixel
    (``positions=True``), or over its channels at each step or pixel alone
    (``positions=False``); then scaled and shifted per channel. Padded time steps of a
    sequence take no part in the statistics. `groups` 1 is MATLAB's "all-channels" (the layer
    normalisation of everything but the batch), C its "channel-wise" (instance
    normalisation). Learnables `weight` (ones) and `bias` (zeros), C each.

    Parameters
    ----------
    groups : int or "all-channels" or "channel-wise"
        The number of groups (it must divide the channels), or one of MATLAB's words.
    eps : float
        Added to the variance, for stability (MATLAB's Epsilon, 1e-5).
    positions : bool
        Whether the statistics span the time steps or pixels too (True, group and instance
        normalisation) or each step or pixel has its own (False).

    Shape
    -----
    - `in`: B×T×C, B×C or B×C×H×W
    - `out`: the same spec

    Examples
    --------
    >>> import torch
    >>> from attnlab import layers as L
    >>> y = L.GroupNorm(2)(torch.randn(3, 4, 5, 5))
    >>> bool(abs(y[0, :2].mean()) < 1e-5), tuple(y.shape)
    (True, (3, 4, 5, 5))
    """

    stem = "groupnorm"
    uses_mask = True

    def __init__(self, groups: int | str = 1, eps: float = 1e-5, positions: bool = True,
                 name: str | None = None):
        super().__init__(name)
        if isinstance(groups, str):
            self.groups: int | str = check.choice(self, "groups", groups,
                                                  ("all-channels", "channel-wise"))
        else:
            self.groups = check.integer(self, "groups", groups, example=2)
        self.eps = check.positive(self, "eps", eps)
        self.positions = check.flag(self, "positions", positions)

    @property  # per instance: statistics over time look along it
    def time_local(self) -> bool:  # type: ignore[override]
        return not self.positions

    def _groups(self, channels: int) -> int:
        return 1 if self.groups == "all-channels" else channels \
            if self.groups == "channel-wise" else int(self.groups)

    def infer(self, specs: dict[str, Spec]) -> Spec:
        s = specs["in"]
        self.require(s, "in", ("BTC", "BC", "BCSS"))
        if s.channels is not None:
            g = self._groups(s.channels)
            if s.channels % g:
                raise self.error(SizeError, "in", f"expected channels divisible by the {g} "
                                 f"groups, received {s} ({s.channels} channels). Give a number "
                                 f"of groups that divides {s.channels}.")
        return s

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        s = specs["in"]
        c = check.known(self, "in", s.channels)
        return _GroupNorm(c, self._groups(c), self.eps, self.positions, s.labels.index("C"))


class _GroupNorm(nn.Module):
    def __init__(self, channels: int, groups: int, eps: float, positions: bool, cdim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(channels))
        self.bias = nn.Parameter(torch.zeros(channels))
        self.groups, self.eps, self.positions, self.cdim = groups, eps, positions, cdim

    def forward(self, x, masks=(None,)):
        mask = masks[0] if masks else None
        # Shapes by unflatten/flatten and indexing, never Python ints read off a shape: an ONNX
        # export would freeze those, and the batch and the length must stay dynamic.
        last = x.dim() - 1               # not -1: the exporter writes a negative perm as is
        h = x.movedim(self.cdim, last)                             # B×…×C, channels last
        g = h.unflatten(-1, (self.groups, -1))                     # B×…×G×C/G
        if self.positions:
            dims = tuple(range(1, g.dim() - 2)) + (g.dim() - 1,)   # positions and channels
            if mask is not None:                                   # B×T: padding left out
                w = mask.to(g.dtype)[..., None, None]
                count = w.sum(dims, keepdim=True) * (self.weight.shape[0] // self.groups)
                mean = (g * w).sum(dims, keepdim=True) / count.clamp(min=1)
                var = (((g - mean) ** 2) * w).sum(dims, keepdim=True) / count.clamp(min=1)
            else:
                mean = g.mean(dims, keepdim=True)
                var = g.var(dims, keepdim=True, unbiased=False)
        else:
            mean = g.mean(-1, keepdim=True)
            var = g.var(-1, keepdim=True, unbiased=False)
        y = ((g - mean) / torch.sqrt(var + self.eps)).flatten(-2)
        y = y * self.weight + self.bias
        return y.movedim(last, self.cdim)

    def extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, groups={self.groups}, eps={self.eps}"
