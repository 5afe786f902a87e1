"""Rotary position embedding of queries and keys, per head, after projection.

For a head vector x (d channels, of which the first r = fraction·d rotate) at position p,
channel pair i (frequency θ_i = base^(−2i/r), i = 0…r/2−1) is turned by the angle p·θ_i:

- the half-split layout (Llama, Mistral, GPT-NeoX; transformers' `rotate_half` /
  `apply_rotary_pos_emb`) pairs channel i with channel i + r/2;
- the interleaved layout (GPT-J's `rotate_every_two`) pairs channels 2i and 2i + 1.

The channels after the first r pass unchanged (GPT-NeoX's `rotary_pct`). The angles are
computed in float32 (float64 for float64 inputs) and the cosines and sines cast to the input's
dtype before they multiply it, as transformers does. Positions are absolute: 0…T−1 in a
full forward pass (or, with the setting ``positions="mask"``, each step's place among its
sequence's real steps, one row of positions per sequence), the stream's positions when
decoding step by step.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Union

import torch
from torch import Tensor

from attnlab.core.errors import DataError

__all__ = ["Rotary", "RotarySettings", "DEFAULTS", "POSITIONS"]


@dataclasses.dataclass(frozen=True)
class RotarySettings:
    """The settings of a rotary embedding that every settings dict holds, typed."""

    base: float = 10000.0          # Llama's
    fraction: float = 1.0          # every channel of a head turns
    interleaved: bool = False      # the half-split layout

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))


# the settings `rotary=True` stands for, their one home: `rules.rotary` fills a dict's missing
# keys from them, and `Rotary`'s keyword defaults are theirs
DEFAULTS = RotarySettings()
# the optional key "positions": where a full pass takes its positions from, each step's index
# (the default, then left out of the settings) or its padding mask ("mask":
# `attnlab.core.sequences.mask_positions`, as transformers' position ids from an attention
# mask: a left-padded sequence then starts at 0 too)
POSITIONS = ("index", "mask")

Positions = Union[int, Tensor]        # the first step's, or one per step (T, or B×T)


# scaled rotary embeddings: the settings' optional key "scaling" (`rules.rotary_scaling`), a
# dict with transformers' `rope_type` and that type's parameters, beside DEFAULTS' keys.
# "longrope" (Phi-3): each frequency divided by its short factor while a sequence is at most
# original_max_position_embeddings long, by its long factor once it is longer (every position
# of it, as transformers' `longrope_frequency_update` switches the whole table), and cos and
# sin times attention_factor
OPTIONAL = ("scaling", "positions")
# "linear": every frequency divided by `factor`. "dynamic": past
# original_max_position_embeddings (transformers' max_position_embeddings) the base grows with
# the sequence's length T, base · (factor·T/original − (factor − 1))^(r/(r−2)); a stream turns
# each new step by the length so far, as transformers' cache does. "llama3" (Llama 3.1): low
# frequencies divided by `factor`, high ones kept, a smooth blend between. "yarn": frequencies
# blended between kept and interpolated by a ramp over the channel pairs (beta_fast, beta_slow
# rotations), cos and sin times attention_factor (default 0.1·ln(factor) + 1).
SCALINGS = ("longrope", "linear", "dynamic", "llama3", "yarn")
# those types' parameters, transformers' names, and their defaults (None: required)
PARAMETERS: dict[str, dict] = {
    "linear": {"factor": None},
    "dynamic": {"factor": None, "original_max_position_embeddings": None},
    "llama3": {"factor": None, "low_freq_factor": None, "high_freq_factor": None,
               "original_max_position_embeddings": None},
    "yarn": {"factor": None, "original_max_position_embeddings": None, "beta_fast": 32.0,
             "beta_slow": 1.0, "truncate": True},
}


class Rotary:
    """The rotary map of one attention module: `rotary(x, pos)` for x B×T×(heads·head_size) and
    `pos` the first step's position (an int), one position per step (a 1-D tensor), or one
    per step of each sequence (a B×T tensor).

    Tables of cosines and sines are kept per device and dtype, grown by doubling, and sliced
    at the positions asked for; while tracing (ONNX export, torch.compile) the angles are
    computed from the positions instead, so that no table length is frozen into the graph."""

    def __init__(self, head_size: int, base: float = DEFAULTS.base,
                 fraction: float = DEFAULTS.fraction, interleaved: bool = DEFAULTS.interleaved,
                 scaling: dict | None = None, name: str | None = None):
        self.scaling = scaling     # None, or the checked settings of a scaled embedding
        self.name = name           # the layer it turns for, named in errors
        self.head_size = int(head_size)
        self.dims = int(round(fraction * head_size))            # rotated channels per head
        self.base, self.interleaved = float(base), bool(interleaved)
        self._tables: dict[tuple, tuple] = {}    # (device, dtype) → cos, sin, their rows
        # "dynamic" scaling: frequencies that follow the sequence's length
        self.dynamic = scaling is not None and scaling["rope_type"] == "dynamic"

    def __repr__(self) -> str:
        scaled = "" if self.scaling is None else f", scaling={self.scaling['rope_type']!r}"
        return (f"Rotary(head_size={self.head_size}, dims={self.dims}, base={self.base}, "
                f"interleaved={self.interleaved}{scaled})")

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "_tables"}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._tables = {}

    def __deepcopy__(self, memo):
        return Rotary(self.head_size, self.base, self.dims / self.head_size, self.interleaved,
                      self.scaling, self.name)

    # -- tables ----------------------------------------------------------------------------
    def inv_freq(self, device, dtype=torch.float32, long: bool = False) -> Tensor:
        """θ_i = 1 / base^(2i/r), as transformers' default rope parameters compute it; with
        longrope scaling 1 / (f_i · base^(2i/r)), f the short factors (the long ones if
        `long`), as transformers' longrope parameters compute it."""
        r = self.dims
        powers = self.base ** (torch.arange(0, r, 2, dtype=dtype, device=device) / r)
        if self.scaling is None:
            return 1.0 / powers
        kind = self.scaling["rope_type"]
        if kind == "linear":
            return 1.0 / powers / self.scaling["factor"]
        if kind == "llama3":
            return _llama3(1.0 / powers, self.scaling)
        if kind == "yarn":
            return _yarn(self.base, r, self.scaling, device, dtype)
        if kind == "dynamic":                  # within the original length (else, below)
            return 1.0 / powers
        factors = self.scaling["long_factor" if long else "short_factor"]
        return 1.0 / (torch.tensor(factors, dtype=dtype, device=device) * powers)

    def dynamic_inv_freq(self, length: Tensor, device, dtype=torch.float32) -> Tensor:
        """"dynamic" scaling's θ_i for a sequence of `length` steps (a 0-d tensor): the base
        grown as transformers grows it past the original length (in tensors of `dtype`, as
        its forward pass computes it), the original frequencies within it."""
        s, r = self.scaling, self.dims
        assert s is not None
        factor, original = s["factor"], s["original_max_position_embeddings"]
        n = torch.clamp(length, min=original).to(dtype)
        base = self.base * ((factor * n / original) - (factor - 1)) ** (r / (r - 2))
        grown = 1.0 / (base ** (torch.arange(0, r, 2, dtype=dtype, device=device) / r))
        return torch.where(length > original, grown, self.inv_freq(device, dtype))

    def angles(self, positions: Tensor, dtype, long: bool = False,
               length: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """cos and sin, T×r (B×T×r) in `dtype`, laid out for this map (duplicated by halves,
        or interleaved), for the `positions` (T, or B×T)."""
        work = torch.float64 if dtype == torch.float64 else torch.float32
        if self.dynamic and length is not None:      # a sequence of `length` steps
            inv = self.dynamic_inv_freq(length, positions.device, work)
        else:
            inv = self.inv_freq(positions.device, work, long)
        freqs = positions.to(work).unsqueeze(-1) * inv
        if self.interleaved:
            emb = torch.stack((freqs, freqs), dim=-1).flatten(-2)           # T×r: θ0 θ0 θ1 θ1 …
        else:
            emb = torch.cat((freqs, freqs), dim=-1)                         # T×r: θ0 … θ0 …
        if self.scaling is not None:                    # longrope's attention factor
            factor = self.scaling["attention_factor"]
            return (emb.cos() * factor).to(dtype), (emb.sin() * factor).to(dtype)
        return emb.cos().to(dtype), emb.sin().to(dtype)

    def _signed(self, cos: Tensor, sin: Tensor) -> tuple[Tensor, Tensor]:
        """cos and the sin that multiplies the swapped pairs, T×1×r (B×T×1×r): −sin where the
        rotation takes the partner's negative (the first half, or the even channels)."""
        r = self.dims
        sign = torch.ones(r, dtype=sin.dtype, device=sin.device)
        if self.interleaved:
            sign[0::2] = -1
        else:
            sign[:r // 2] = -1
        return cos.unsqueeze(-2), (sin * sign).unsqueeze(-2)

    def _table(self, end: int, device, dtype, long: bool = False):
        key = (str(device), dtype, long)
        table = self._tables.get(key)
        if table is None or table[0].shape[0] < end:
            length = max(64, end, 2 * (table[0].shape[0] if table is not None else 0))
            cos, sin = self._signed(*self.angles(torch.arange(length, device=device), dtype,
                                                 long))
            # one-step views made once: a decoding step indexes a list
            table = self._tables[key] = (cos, sin, cos.split(1), sin.split(1))
        return table

    def cos_sin(self, pos: Positions, t: int, device, dtype) -> tuple[Tensor, Tensor]:
        """cos and signed sin (see `_signed`), t×1×r, for the t steps from `pos` (or at the
        positions of a tensor)."""
        if torch.jit.is_tracing() or torch.compiler.is_compiling():
            positions = torch.arange(t, device=device) + pos if isinstance(pos, int) else pos
            if self.scaling is not None and self.scaling["rope_type"] == "longrope":
                return self._traced_scaled(positions, dtype,
                                           self.scaling["original_max_position_embeddings"])
            length = positions.max() + 1 if self.dynamic else None      # a traced length
            return self._signed(*self.angles(positions, dtype, length=length))
        if self.dynamic:
            end = pos + t if isinstance(pos, int) else (int(pos.max()) + 1 if pos.numel() else 0)
            most = self.scaling["original_max_position_embeddings"] if self.scaling else 0
            if end > most:                       # past the original length: no table serves
                positions = torch.arange(pos, end, device=device) if isinstance(pos, int) \
                    else pos
                return self._signed(*self.angles(positions, dtype,
                                                 length=torch.tensor(end, device=device)))
        long = self.long(pos, t)
        if isinstance(pos, int):
            cos, sin, cos_rows, sin_rows = self._table(pos + t, device, dtype, long)
            if t == 1:
                return cos_rows[pos], sin_rows[pos]
            return cos[pos:pos + t], sin[pos:pos + t]
        cos, sin, _, _ = self._table(int(pos.max()) + 1 if pos.numel() else 0, device, dtype,
                                     long)
        if pos.dim() == 2:                                  # B×T: rows of B×T×1×r
            return cos[pos], sin[pos]
        return cos.index_select(0, pos), sin.index_select(0, pos)

    def long(self, pos: Positions, t: int) -> bool:
        """Whether these steps turn by longrope's long factors: the sequence reaches past
        original_max_position_embeddings (False without scaling). Steps that take a sequence
        past it after earlier steps that did not (a stream whose cache holds keys turned by
        the short factors) are refused: every position would have to turn again."""
        if self.scaling is None or self.scaling["rope_type"] != "longrope":
            return False
        if isinstance(pos, int):
            start, end = pos, pos + t
        elif pos.numel():
            # the longest row's steps before these (a padded batch's rows start apart): the
            # whole batch turns by one table, chosen by its longest row, as in transformers
            start = int(pos[..., 0].max()) if pos.dim() == 2 else int(pos.min())
            end = int(pos.max()) + 1
        else:
            return False
        most = self.scaling["original_max_position_embeddings"]
        if 0 < start <= most < end:
            layer = "" if self.name is None else f"layer '{self.name}': "
            raise DataError(
                f"{layer}rotary positions {start}…{end - 1}: longrope turns every position of a "
                f"sequence longer than original_max_position_embeddings ({most}) by its long "
                f"factors, and the {start} steps before these were turned by the short ones "
                "(transformers recomputes them at this point). Give the whole sequence in one "
                f"step (a stream's first step, or a forward pass), or stay within {most} steps.")
        return end > most

    def _traced_scaled(self, positions: Tensor, dtype, most: int) -> tuple[Tensor, Tensor]:
        """cos and signed sin of longrope while tracing: the short or long table chosen in the
        graph by the sequence's length (longer than `most`: the long one), as transformers
        chooses it (`torch.where`)."""
        long = positions.max() + 1 > most
        short_cos, short_sin = self._signed(*self.angles(positions, dtype, False))
        long_cos, long_sin = self._signed(*self.angles(positions, dtype, True))
        return torch.where(long, long_cos, short_cos), torch.where(long, long_sin, short_sin)

    # -- the map ---------------------------------------------------------------------------
    def __call__(self, x: Tensor, pos: Positions) -> Tensor:
        b, t, c = x.shape
        d, r = self.head_size, self.dims
        xh = x.reshape(b, t, c // d, d)                                     # B×T×H×d
        cos, sin = self.cos_sin(pos, t, x.device, x.dtype)          # T×1×r (or B×T×1×r)
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


# -- the scaled frequencies, each as transformers' `modeling_rope_utils` computes it ----------

def _llama3(inv: Tensor, s: dict) -> Tensor:
    """Llama 3.1's: wavelengths beyond original/low_freq_factor slowed by `factor`, those
    below original/high_freq_factor kept, a smooth blend between."""
    factor, low, high, old = s["factor"], s["low_freq_factor"], s["high_freq_factor"], \
        s["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old / low, old / high
    wavelen = 2 * math.pi / inv
    scaled = torch.where(wavelen > low_wavelen, inv / factor, inv)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
    return torch.where(medium, smoothed, scaled)


def _yarn(base: float, r: int, s: dict, device, dtype) -> Tensor:
    """YaRN's: each channel pair's frequency between the original (extrapolated) and the
    interpolated one (÷ factor), by a linear ramp over the pairs between the correction
    dimensions of `beta_fast` and `beta_slow` rotations in the original length."""
    factor, original = s["factor"], s["original_max_position_embeddings"]

    def correction_dim(rotations):
        return (r * math.log(original / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(s["beta_fast"]), correction_dim(s["beta_slow"])
    if s["truncate"]:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, r - 1)
    if low == high:
        high += 0.001                     # as transformers: no division by zero
    pos_freqs = base ** (torch.arange(0, r, 2, device=device).to(dtype) / r)
    extrapolation, interpolation = 1.0 / pos_freqs, 1.0 / (factor * pos_freqs)
    ramp = torch.clamp((torch.arange(r // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    keep = 1 - ramp.to(device=device, dtype=dtype)
    return interpolation * (1 - keep) + extrapolation * keep

