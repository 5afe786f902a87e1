"""Rotary position embedding of queries and keys, per head, after projection.

For a head vector x (d channels, of which the first r = fraction·d rotate) at position p,
channel pair i (frequency θ_i = base^(−2i/r), i = 0…r/2−1) is turned by the angle p·θ_i:

- the half-split layout (Llama, Mistral, GPT-NeoX; transformers' `rotate_half` /
  `apply_rotary_pos_emb`) pairs channel i with channel i + r/2;
- the interleaved layout (GPT-J's `rotate_every_two`) pairs channels 2i and 2i + 1.

The channels after the first r pass unchanged (GPT-NeoX's `rotary_pct`). The angles are
computed in float32 (float64 for float64 inputs) and the cosines and sines cast to the input's
dtype before they multiply it, as transformers does. Positions are absolute: 0…T−1 in a
full forward pass, the stream's positions when decoding step by step.
"""
from __future__ import annotations

from typing import Union

import torch
from torch import Tensor

__all__ = ["Rotary", "DEFAULTS"]

# the settings `rotary=True` stands for (`rules.rotary` fills a dict's missing keys
# from them)
DEFAULTS = {"base": 10000.0, "fraction": 1.0, "interleaved": False}

Positions = Union[int, Tensor]


class Rotary:
    """The rotary map of one attention module: `rotary(x, pos)` for x B×T×(heads·head_size) and
    `pos` the first step's position (an int) or one position per step (a 1-D tensor).

    Tables of cosines and sines are kept per device and dtype, grown by doubling, and sliced
    at the positions asked for; while tracing (ONNX export, torch.compile) the angles are
    computed from the positions instead, so that no table length is frozen into the graph."""

    def __init__(self, head_size: int, base: float = 10000.0, fraction: float = 1.0,
                 interleaved: bool = False):
        self.head_size = int(head_size)
        self.dims = int(round(fraction * head_size))            # rotated channels per head
        self.base, self.interleaved = float(base), bool(interleaved)
        self._tables: dict[tuple, tuple] = {}    # (device, dtype) → cos, sin, their rows

    def __repr__(self) -> str:
        return (f"Rotary(head_size={self.head_size}, dims={self.dims}, base={self.base}, "
                f"interleaved={self.interleaved})")

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "_tables"}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._tables = {}

    def __deepcopy__(self, memo):
        return Rotary(self.head_size, self.base, self.dims / self.head_size, self.interleaved)

    # -- tables ----------------------------------------------------------------------------
    def inv_freq(self, device, dtype=torch.float32) -> Tensor:
        """θ_i = 1 / base^(2i/r), as transformers' default rope parameters compute it."""
        r = self.dims
        return 1.0 / (self.base ** (torch.arange(0, r, 2, dtype=dtype, device=device) / r))

    def angles(self, positions: Tensor, dtype) -> tuple[Tensor, Tensor]:
        """cos and sin, T×r in `dtype`, laid out for this map (duplicated by halves, or
        interleaved), for the 1-D `positions`."""
        work = torch.float64 if dtype == torch.float64 else torch.float32
        freqs = positions.to(work).unsqueeze(-1) * self.inv_freq(positions.device, work)  # T×r/2
        if self.interleaved:
            emb = torch.stack((freqs, freqs), dim=-1).flatten(-2)           # T×r: θ0 θ0 θ1 θ1 …
        else:
            emb = torch.cat((freqs, freqs), dim=-1)                         # T×r: θ0 … θ0 …
        return emb.cos().to(dtype), emb.sin().to(dtype)

    def _signed(self, cos: Tensor, sin: Tensor) -> tuple[Tensor, Tensor]:
        """cos and the sin that multiplies the swapped pairs, T×1×r: −sin where the rotation
        takes the partner's negative (the first half, or the even channels)."""
        r = self.dims
        sign = torch.ones(r, dtype=sin.dtype, device=sin.device)
        if self.interleaved:
            sign[0::2] = -1
        else:
            sign[:r // 2] = -1
        return cos.unsqueeze(1), (sin * sign).unsqueeze(1)

    def _table(self, end: int, device, dtype):
        key = (str(device), dtype)
        table = self._tables.get(key)
        if table is None or table[0].shape[0] < end:
            length = max(64, end, 2 * (table[0].shape[0] if table is not None else 0))
            cos, sin = self._signed(*self.angles(torch.arange(length, device=device), dtype))
            # one-step views made once: a decoding step indexes a list
            table = self._tables[key] = (cos, sin, cos.split(1), sin.split(1))
        return table

    def cos_sin(self, pos: Positions, t: int, device, dtype) -> tuple[Tensor, Tensor]:
        """cos and signed sin (see `_signed`), t×1×r, for the t steps from `pos` (or at the
        positions of a tensor)."""
        if torch.jit.is_tracing() or torch.compiler.is_compiling():
            positions = torch.arange(t, device=device) + pos if isinstance(pos, int) else pos
            return self._signed(*self.angles(positions, dtype))
        if isinstance(pos, int):
            cos, sin, cos_rows, sin_rows = self._table(pos + t, device, dtype)
            if t == 1:
                return cos_rows[pos], sin_rows[pos]
            return cos[pos:pos + t], sin[pos:pos + t]
        cos, sin, _, _ = self._table(int(pos.max()) + 1 if pos.numel() else 0, device, dtype)
        return cos.index_select(0, pos), sin.index_select(0, pos)

    # -- the map ---------------------------------------------------------------------------
    def __call__(self, x: Tensor, pos: Positions) -> Tensor:
        b, t, c = x.shape
        d, r = self.head_size, self.dims
        xh = x.reshape(b, t, c // d, d)                                     # B×T×H×d
        cos, sin = self.cos_sin(pos, t, x.device, x.dtype)                  # T×1×r
        rot = xh[..., :r] if r < d else xh
        # each channel's partner: the other half (roll), or the other of its pair (flip)
        if self.interleaved:
            partner = rot.unflatten(-1, (r // 2, 2)).flip(-1).flatten(-2)
        else:
            partner = rot.roll(r // 2, dims=-1)
        out = rot * cos + partner * sin                                     # B×T×H×r
        if r < d:
            out = torch.cat((out, xh[..., r:]), dim=-1)                     # B×T×H×d
        return out.reshape(b, t, c)                                         # B×T×(H·d)
