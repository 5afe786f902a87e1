"""The argument rules of attention, written once.

The attention layers (`Attention`, `SelfAttention`, `MultiHeadAttention`, `AttentionPool1d`),
the modules they build and `al.attention` all check their options here, so that one rule has
one wording wherever it is broken:

    SelfAttention 'sa' argument 'num_kv_heads': expected a divisor of num_heads 4 or None,
    received 3. ...
    attention: argument 'dropout': expected a probability in [0, 1), received 1.5. ...

`owner` is the layer being made (its type and name are read) or a plain prefix string
("attention:" for the function, a module's class name). Each rule returns the value in its
canonical form. The checks compare Python values only: cheap enough for every call.
"""
from __future__ import annotations

import math

from torch import Tensor

from .errors import ArgumentError, AttnlabError
from .layers import _checks as check

__all__ = ["ALIGNMENTS", "num_heads", "num_kv_heads", "scale", "attention_mask",
           "scale_value", "causal_alignment", "dropout", "flag", "divisors_near", "divisor_hint"]

ALIGNMENTS = ("top-left", "bottom-right")


def _fail(owner, arg: str, expected: str, value, fix: str,
          cls: type[AttnlabError] = ArgumentError) -> AttnlabError:
    err = check.fail(owner, arg, expected, value, fix)
    if cls is ArgumentError:
        return err
    out = cls(str(err))
    out.argument, out.value = arg, value
    return out


def divisors_near(channels: int, heads: int, count: int = 2) -> list[int]:
    """The divisors of `channels` nearest above `heads` (else the largest ones), O(√C)."""
    small = [d for d in range(1, math.isqrt(channels) + 1) if channels % d == 0]
    divisors = sorted(set(small + [channels // d for d in small]))
    above = [d for d in divisors if d > heads][:count]
    return above if above else divisors[-count:]


def divisor_hint(channels: int, heads: int) -> str:
    """', e.g. 4 or 8': the head counts near `heads` that divide `channels`."""
    picks = divisors_near(channels, heads)
    return ", e.g. " + " or ".join(map(str, picks)) if picks else ""


def num_heads(owner, value) -> int:
    """A positive int."""
    return check.integer(owner, "num_heads", value, example=8)


def num_kv_heads(owner, value, heads: int, cls: type[AttnlabError] = ArgumentError) -> int | None:
    """None (one key/value head per query head) or a positive int dividing `heads`; a count
    that does not divide raises `cls` (a SizeError where channels are already fixed)."""
    kv = check.integer(owner, "num_kv_heads", value, none_ok=True)
    if kv is not None and heads % kv:
        raise _fail(owner, "num_kv_heads", f"a divisor of num_heads {heads} or None", value,
                    f"num_kv_heads {kv} does not divide num_heads {heads}: each key/value head "
                    f"serves num_heads / num_kv_heads query heads. Use a num_kv_heads that "
                    f"divides {heads}{divisor_hint(heads, 0)}, or None for one per query head.",
                    cls)
    return kv


def scale(owner, value):
    """"auto" or any finite number."""
    return check.scale(owner, value)


def scale_value(scale, dk: int) -> float:
    """The factor on Q Kᵀ of a checked `scale`: "auto" is 1/sqrt(dk) (1 with no channels)."""
    if scale == "auto":
        return 1.0 / math.sqrt(dk) if dk else 1.0
    return float(scale)


def attention_mask(owner, value, tensors_ok: bool = False):
    """None or "causal" (and, where `tensors_ok`, a boolean tensor, checked by the caller)."""
    if tensors_ok and isinstance(value, Tensor):
        return value
    return check.choice(owner, "attention_mask", value, (None, "causal"),
                        extra="a boolean Tq×Tk or B×Tq×Tk tensor" if tensors_ok else "")


def causal_alignment(owner, value) -> str:
    return check.choice(owner, "causal_alignment", value, ALIGNMENTS)


def dropout(owner, value) -> float:
    return check.probability(owner, "dropout", value)


def flag(owner, arg: str, value) -> bool:
    return check.flag(owner, arg, value)
