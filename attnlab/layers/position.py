"""Position information for attention, which is otherwise blind to order. Both layers output
only the position signal (as MATLAB's): add it to the sequence with `Addition`."""
from __future__ import annotations

import math

import torch
from torch import nn

from ..errors import DataError, SizeError
from ..spec import Spec
from . import _checks as check
from .base import Layer


class PositionEmbedding(Layer):
    """Learned position embedding [positionEmbeddingLayer].

    Outputs the embedding of positions 0…T−1 only (add it to the input with `Addition`).
    Learnable `weight` (max_length×channels).

    Parameters
    ----------
    max_length : int
        The longest sequence it embeds.
    channels : int or None
        Channels of the embedding; None: the input's channels.

    Shape
    -----
    - `in`: B×T×C with T ≤ max_length
    - `out`: B×T×channels (channels defaults to C)
    """

    stem = "posembed"

    def __init__(self, max_length: int, channels: int | None = None, name: str | None = None):
        super().__init__(name)
        self.max_length = check.integer(self, "max_length", max_length, example=512)
        self.channels = check.integer(self, "channels", channels, none_ok=True)

    def infer(self, specs: dict[str, Spec]) -> Spec:
        s = specs["in"]
        self.require(s, "in", ("BTC",), "PositionEmbedding gives each time step its position.")
        check.learnables_fit(self, "in", "Use a smaller max_length or channels.",
                             weight=(self.max_length, self.channels or s.channels))
        if s.time is not None and s.time > self.max_length:
            raise self.error(SizeError, "in", f"expected at most {self.max_length} time steps, "
                             f"received {s}. Raise max_length.")
        return Spec.sequence(self.channels or s.channels, s.time)

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return _PositionEmbedding(self.max_length, self.channels or specs["in"].channels, self.name)


class _PositionEmbedding(nn.Module):
    def __init__(self, max_length, channels, name):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(max_length, channels) * 0.02)
        self.name = name
        self.offset = 0          # first position of the next call: a stream moves it on

    def forward(self, x):
        b, t, _ = x.shape
        start = self.offset
        if start + t > self.weight.shape[0]:
            raise DataError(f"layer '{self.name}': positions {start}…{start + t - 1} reach past "
                            f"max_length {self.weight.shape[0]}. Raise max_length or shorten "
                            "the sequences.")
        return self.weight[start:start + t].unsqueeze(0).expand(b, t, -1)   # B×T×channels


class SinusoidalPositionEncoding(Layer):
    """Fixed sinusoidal position encoding [sinusoidalPositionEncodingLayer].

    PE[t, 2i] = sin(t / 10000^(2i/dim)), PE[t, 2i+1] = cos(t / 10000^(2i/dim)), t = 0…T−1.
    No learnables; only the input's length is read.

    Parameters
    ----------
    dim : int
        Channels of the encoding.

    Shape
    -----
    - `in`: B×T×C
    - `out`: B×T×dim
    """

    stem = "posenc"

    def __init__(self, dim: int, name: str | None = None):
        super().__init__(name)
        self.dim = check.integer(self, "dim", dim, example=64)

    def infer(self, specs: dict[str, Spec]) -> Spec:
        s = specs["in"]
        self.require(s, "in", ("BTC",), "SinusoidalPositionEncoding encodes time steps.")
        return Spec.sequence(self.dim, s.time)

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return _Sinusoidal(self.dim)


class _Sinusoidal(nn.Module):
    def __init__(self, dim):
        super().__init__()
        half = torch.arange(0, dim, 2, dtype=torch.float64)
        self.register_buffer("freq", torch.exp(-math.log(10000.0) * half / dim).float(),
                             persistent=False)
        self.dim = dim
        self.offset = 0

    def forward(self, x):
        b, t, _ = x.shape
        pos = torch.arange(self.offset, self.offset + t, device=x.device, dtype=self.freq.dtype)
        angles = pos.unsqueeze(1) * self.freq                                # T×ceil(dim/2)
        pe = torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(1)    # T×(2·ceil(dim/2))
        return pe[:, :self.dim].to(x.dtype).unsqueeze(0).expand(b, t, -1)    # B×T×dim
