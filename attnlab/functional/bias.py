"""Position terms of attention scores: sliding-window masks, ALiBi's linear distance bias and
T5's bucketed relative positions.

All of them read the *relative position* of a key to a query, `rel = key position − query
position` (Tq×Tk, an int64 tensor), so that the full forward (positions from the start of the
sequences), a stream (positions from the start of the stream, a cache holding a suffix of
them) and a compiled stream (positions as tensors) compute the same numbers:

- `window_mask(rel, window, causal)`: with causal attention a query sees itself and the
  `window − 1` keys before it (`−window < rel ≤ 0`, Mistral's sliding window); without, the keys
  less than `window` away on either side (`|rel| < window`).
- `alibi_slopes(num_heads)`: BLOOM's per-head slopes for any head count; `alibi_bias(rel,
  slopes)` = `−slope_h · |rel|`, H×Tq×Tk (for the keys a causal query sees this is BLOOM's
  `slope_h · key position` up to a constant per query, which the softmax ignores).
- `relative_position_bucket(rel, bidirectional, num_buckets, max_distance)`: T5's buckets.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = ["relative_positions", "window_mask", "alibi_slopes", "alibi_slopes_tensor",
           "alibi_bias", "relative_position_bucket", "WIDEST_WINDOW"]

# No sequence reaches 2^53 steps (that is petabytes for one byte per step), so a window this
# wide sees every key of any sequence: it is no window at all. Wider ones (any int is
# accepted) are read as none (`rules.window`), which keeps them out of int64
# arithmetic, where they would overflow, and out of saved files, whose JSON numbers are
# exact up to 2^53.
WIDEST_WINDOW = 2 ** 53


def relative_positions(q_pos: Tensor, k_pos: Tensor) -> Tensor:
    """`k_pos[j] − q_pos[i]`, Tq×Tk, from 1-D position tensors."""
    return k_pos.unsqueeze(0) - q_pos.unsqueeze(1)


def aligned_relative_positions(Tq: int, Tk: int, offset: int, device) -> Tensor:
    """Relative positions when query i sits at position i + offset and key j at j."""
    q_pos = torch.arange(Tq, device=device) + offset
    return relative_positions(q_pos, torch.arange(Tk, device=device))


def window_mask(rel: Tensor, window: int, causal: bool) -> Tensor:
    """True = attend: causal `−window < rel` (with `rel ≤ 0` from the causal rule), else
    `|rel| < window`. A window of `WIDEST_WINDOW` or more is the same as that one (no sequence
    is longer), compared exactly in int64."""
    window = min(window, WIDEST_WINDOW)
    if causal:
        return rel > -window
    return rel.abs() < window


def alibi_slopes(num_heads: int) -> list[float]:
    """BLOOM's slopes (`build_alibi_tensor` in transformers' BLOOM): the geometric sequence
    2^(−8/n·k), k = 1…n, for the largest power of two n ≤ num_heads, then every other slope of
    the sequence for 2n for the remaining heads; float32 values as BLOOM computes them."""
    closest = 2 ** math.floor(math.log2(num_heads))
    base = torch.tensor(2 ** (-(2 ** -(math.log2(closest) - 3))), dtype=torch.float32)
    slopes = torch.pow(base, torch.arange(1, 1 + closest, dtype=torch.int32))
    if closest != num_heads:
        extra_base = torch.tensor(2 ** (-(2 ** -(math.log2(2 * closest) - 3))),
                                  dtype=torch.float32)
        remaining = min(closest, num_heads - closest)
        extra = torch.pow(extra_base, torch.arange(1, 1 + 2 * remaining, 2, dtype=torch.int32))
        slopes = torch.cat([slopes, extra])
    return slopes.tolist()


_SLOPES: dict[tuple[int, str], Tensor] = {}


def alibi_slopes_tensor(num_heads: int, device) -> Tensor:
    """`alibi_slopes` as a float32 tensor on `device`, made once per head count and device."""
    key = (num_heads, str(device))
    t = _SLOPES.get(key)
    if t is None:
        t = _SLOPES[key] = torch.tensor(alibi_slopes(num_heads), dtype=torch.float32,
                                        device=device)
    return t


def alibi_bias(rel: Tensor, slopes: Tensor) -> Tensor:
    """`−slope_h · |rel|`: H×Tq×Tk float32 (slopes H, rel Tq×Tk)."""
    return slopes.view(-1, 1, 1) * -rel.abs().to(slopes.dtype).unsqueeze(0)


def relative_position_bucket(rel: Tensor, bidirectional: bool = True, num_buckets: int = 32,
                             max_distance: int = 128) -> Tensor:
    """T5's bucket of each relative position (transformers' `T5Attention.
    _relative_position_bucket`): half the buckets exact for small distances, the other half
    logarithmic up to `max_distance`; bidirectional gives keys after the query their own half
    of the buckets, otherwise keys after the query share bucket 0."""
    buckets = torch.zeros_like(rel)
    if bidirectional:
        num_buckets //= 2
        buckets = buckets + (rel > 0).to(torch.long) * num_buckets
        distance = rel.abs()
    else:
        distance = -torch.min(rel, torch.zeros_like(rel))
    max_exact = num_buckets // 2
    is_small = distance < max_exact
    try:
        span = math.log(max_distance / max_exact)        # T5's own expression, bit for bit
    except OverflowError:                                # an int beyond any float: exact logs
        span = math.log(max_distance) - math.log(max_exact)
    large = max_exact + (torch.log(distance.float() / max_exact) / span
                         * (num_buckets - max_exact)).to(torch.long)
    large = torch.min(large, torch.full_like(large, num_buckets - 1))
    return buckets + torch.where(is_small, distance, large)
