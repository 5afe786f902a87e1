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
from dataclasses import dataclass
from numbers import Integral
from typing import Optional, Union

from torch import Tensor

from attnlab.functional.bias import WIDEST_WINDOW
from attnlab.core.errors import ArgumentError, AttnlabError, SizeError
from attnlab.core import checks as check
from attnlab.functional.rotary import DEFAULTS as ROTARY_DEFAULTS   # the rotary settings' one home
from attnlab.functional.rotary import OPTIONAL as ROTARY_OPTIONAL, SCALINGS as ROTARY_SCALINGS
from attnlab.functional.rotary import PARAMETERS as ROTARY_PARAMETERS
from attnlab.functional.rotary import POSITIONS as ROTARY_POSITIONS

__all__ = ["AttentionOptions", "options", "ALIGNMENTS", "num_heads", "num_kv_heads", "scale", "attention_mask",
           "scale_value", "causal_alignment", "dropout", "flag", "divisors_near", "divisor_hint",
           "rotary", "rotary_dims", "window", "ROTARY_DEFAULTS", "output_bias",
           "qk_norm", "softcap"]

ALIGNMENTS = ("top-left", "bottom-right")
# the smallest rotary base, 2^-64: the frequencies 1 / base^(2i/r) (float32, as transformers
# computes them) reach 1/base, and times any int64 position (< 2^63) they stay below float32's
# largest number (2^128); a smaller base turns later positions by infinite angles (NaN)
SMALLEST_BASE = 2.0 ** -64


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


def _float_range(owner, arg: str, value, expected: str, fix: str) -> None:
    """An int beyond any float (10**400) is refused here, as the infinite number it would
    become: the float checks that follow would overflow on it."""
    if isinstance(value, Integral) and not isinstance(value, bool):
        try:
            float(value)
        except OverflowError:
            raise _fail(owner, arg, expected, value, f"It is beyond the largest float "
                        f"(about 1.8e308), so it computes as infinity. {fix}") from None


def scale(owner, value):
    """"auto" or any finite number."""
    _float_range(owner, "scale", value, "\"auto\" (1/sqrt(channels per head)) or a finite "
                 "number", "Use scale=\"auto\" or e.g. scale=0.125.")
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
    _float_range(owner, "dropout", value, "a probability in [0, 1)", "Use e.g. dropout=0.1.")
    return check.probability(owner, "dropout", value)


def flag(owner, arg: str, value) -> bool:
    return check.flag(owner, arg, value)


def rotary(owner, value):
    """False (no rotary embedding; None reads as False) or the settings as a dict with every
    key: True takes `ROTARY_DEFAULTS` (`rotary.DEFAULTS`); a dict may give `base` (a number > 0), `fraction` (in
    (0, 1]), `interleaved` (True or False) and `positions` ("index", the default, left out: a
    full pass turns step t by position t; "mask": by its place among its sequence's real
    steps, as transformers' position ids from an attention mask)."""
    if value is None or value is False:
        return False
    if value is True:
        return ROTARY_DEFAULTS.as_dict()
    keys = "'base', 'fraction', 'interleaved', 'positions'"
    if not isinstance(value, dict):
        raise _fail(owner, "rotary", f"False, True or a dict with keys {keys}", value,
                    'Use rotary=True, or e.g. rotary={"base": 10000.0, '
                    '"fraction": 0.25, "interleaved": False}.')
    unknown = sorted(map(str, set(value) - set(ROTARY_DEFAULTS.keys()) - set(ROTARY_OPTIONAL)))
    if unknown:
        raise _fail(owner, "rotary", f"a dict with keys {keys}", value,
                    f"Remove the key{'s' if len(unknown) > 1 else ''} "
                    f"{', '.join(map(repr, unknown))}.")
    out = {**ROTARY_DEFAULTS.as_dict(), **value}           # the missing keys filled
    base = out["base"]
    what = f"a finite number > 0 (at least 2^-64 ≈ {SMALLEST_BASE:.3g})"
    fix = "Use e.g. 10000.0 (Llama's)."
    _float_range(owner, "rotary['base']", base, what, fix)
    if isinstance(base, (int, float)) and 0 < base < SMALLEST_BASE:
        fix += " A smaller base turns later positions by infinite angles."
    out["base"] = check.real(owner, "rotary['base']", base, SMALLEST_BASE, None, what=what,
                             fix=fix)
    fix = "Use 1.0 to rotate every channel of a head, or e.g. 0.25."
    _float_range(owner, "rotary['fraction']", out["fraction"], "a fraction in (0, 1]", fix)
    out["fraction"] = check.real(owner, "rotary['fraction']", out["fraction"], 0, 1,
                                 low_open=True, what="a fraction in (0, 1]", fix=fix)
    out["interleaved"] = check.flag(owner, "rotary['interleaved']", out["interleaved"])
    if out.get("scaling") is None:            # None: no scaling, as if the key were absent
        out.pop("scaling", None)
    else:
        out["scaling"] = rotary_scaling(owner, out["scaling"])
    positions = check.choice(owner, "rotary['positions']", out.pop("positions", "index"),
                             ROTARY_POSITIONS)
    if positions != "index":                  # the default is left out, as if never given
        out["positions"] = positions
    return out


_LONGROPE = ("rope_type", "short_factor", "long_factor", "original_max_position_embeddings",
             "attention_factor")


def rotary_scaling(owner, value) -> dict:
    """A scaled rotary embedding (the rotary settings' optional "scaling"), in canonical form:
    a dict with "rope_type" (one of `ROTARY_SCALINGS`) and that type's parameters, as
    transformers' `rope_parameters` names them. "longrope": "short_factor" and "long_factor"
    (numbers > 0, one per rotated channel pair: `rotary_dims` checks their number),
    "original_max_position_embeddings" (an int ≥ 1: the longest sequence that turns by the
    short factors) and "attention_factor" (a number > 0 on cos and sin; default 1)."""
    arg = "rotary['scaling']"
    example = ('Use e.g. {"rope_type": "longrope", "short_factor": [1.0, …], "long_factor": '
               '[4.0, …], "original_max_position_embeddings": 4096}, or leave scaling out.')
    if not isinstance(value, dict) or value.get("rope_type") not in ROTARY_SCALINGS:
        types = " or ".join(map(repr, ROTARY_SCALINGS))
        raise _fail(owner, arg, f"a dict with 'rope_type' {types} and its parameters", value,
                    example)
    if value["rope_type"] != "longrope":
        return _scaled_rotary(owner, arg, value)
    unknown = sorted(map(str, set(value) - set(_LONGROPE)))
    if unknown:
        raise _fail(owner, arg, f"longrope's keys {', '.join(map(repr, _LONGROPE))}", value,
                    f"Remove {', '.join(map(repr, unknown))}.")
    out: dict = {"rope_type": "longrope"}
    for key in ("short_factor", "long_factor"):
        factors = value.get(key)
        if not isinstance(factors, (list, tuple)) or not factors or not all(
                isinstance(f, (int, float)) and not isinstance(f, bool) and math.isfinite(f)
                and f > 0 for f in factors):
            raise _fail(owner, f"{arg}['{key}']", "a list of numbers > 0, one per rotated "
                        "channel pair", factors, example)
        out[key] = [float(f) for f in factors]
    key = "original_max_position_embeddings"
    out[key] = check.integer(owner, f"{arg}['{key}']", value.get(key), example=4096)
    out["attention_factor"] = check.real(
        owner, f"{arg}['attention_factor']", value.get("attention_factor", 1.0), 0, None,
        low_open=True, what="a finite number > 0", fix="Use e.g. 1.19 (Phi-3's), or 1.0.")
    return out


def _scaled_rotary(owner, arg: str, value: dict) -> dict:
    """The settings of a "linear", "dynamic", "llama3" or "yarn" scaled embedding: that type's
    parameters (`ROTARY_PARAMETERS`: "factor" a number > 0, "original_max_position_embeddings"
    an int ≥ 1, …) with their defaults, and "attention_factor" (a number > 0 on cos and sin;
    1, or YaRN's 0.1·ln(factor) + 1)."""
    kind = value["rope_type"]
    known = ROTARY_PARAMETERS[kind]
    unknown = sorted(map(str, set(value) - set(known) - {"rope_type", "attention_factor"}))
    missing = [k for k, v in known.items() if v is None and value.get(k) is None]
    if unknown or missing:
        fix = f"Remove {', '.join(map(repr, unknown))}." if unknown else \
            f"Give {', '.join(map(repr, missing))}."
        raise _fail(owner, arg, f"a {kind!r} scaling with the keys 'rope_type', "
                    f"{', '.join(map(repr, known))}, 'attention_factor'", value, fix)
    out = {"rope_type": kind, **known, **value}
    for key in ("factor", "low_freq_factor", "high_freq_factor", "beta_fast", "beta_slow"):
        if key in known:
            out[key] = check.real(owner, f"{arg}['{key}']", out[key], 0, None, low_open=True,
                                  what="a finite number > 0", fix="Use e.g. 2.0.")
    key = "original_max_position_embeddings"
    if key in known:
        out[key] = check.integer(owner, f"{arg}['{key}']", out[key], example=4096)
    if kind == "llama3" and out["high_freq_factor"] <= out["low_freq_factor"]:
        raise _fail(owner, f"{arg}['high_freq_factor']", "a number greater than "
                    f"low_freq_factor {out['low_freq_factor']:g}", out["high_freq_factor"],
                    "Use e.g. low_freq_factor 1.0 and high_freq_factor 4.0 (Llama 3.1's).")
    if kind == "yarn":
        out["truncate"] = check.flag(owner, f"{arg}['truncate']", out["truncate"])
    gain = 0.1 * math.log(out["factor"]) + 1.0 if kind == "yarn" and out["factor"] > 1 else 1.0
    out["attention_factor"] = check.real(
        owner, f"{arg}['attention_factor']", value.get("attention_factor", gain), 0, None,
        low_open=True, what="a finite number > 0", fix="Use e.g. 1.0.")
    return out


def _check_factors(owner, settings, dims: int, cls: type[AttnlabError]) -> None:
    """A scaled embedding's factors: one per pair of the `dims` rotated channels."""
    scaling = settings.get("scaling")
    if scaling is not None and scaling["rope_type"] == "dynamic" and dims <= 2:
        raise _fail(owner, "rotary", "more than 2 rotated channels per head with \"dynamic\" "
                    "scaling (its base grows by a power r / (r − 2))", settings,
                    "Use a wider head or fraction, or another scaling.", cls)
    if scaling is None or scaling["rope_type"] != "longrope":
        return
    for key in ("short_factor", "long_factor"):
        if len(scaling[key]) != dims // 2:
            raise _fail(owner, "rotary", f"{dims // 2} {key}s, one per pair of the {dims} "
                        f"channels of a head that rotate", scaling[key],
                        "Give one factor per rotated channel pair (head size × fraction / 2).",
                        cls)


def rotary_dims(owner, settings, head_size: int, cls: type[AttnlabError] = SizeError,
                heads: int | None = None) -> int:
    """The channels of a head that rotate: fraction × head size, which must be a positive even
    whole number (channels turn in pairs). `heads`: the layer's num_heads, for the fix."""
    r = settings["fraction"] * head_size
    if abs(r - round(r)) < 1e-9 and round(r) > 0 and round(r) % 2 == 0:
        _check_factors(owner, settings, int(round(r)), cls)
        return int(round(r))
    evens = [f for f in (1.0, 0.5, 0.25) if (f * head_size) % 2 == 0 and f * head_size > 0]
    if head_size % 2:
        example = f", e.g. key channels {heads * (head_size + 1)}" if heads else ""
        fix = f"Use an even head size (key channels / num_heads){example}"
    else:
        fix = "Use a fraction that gives an even number of channels"
    fix += f", or fraction {' or '.join(map(str, evens))}." if evens else "."
    raise _fail(owner, "rotary", f"fraction × head size to be an even number of channels "
                f"(rotary turns channel pairs): head size {head_size} × fraction "
                f"{settings['fraction']} = {r:g}", settings, fix, cls)


def window(owner, value) -> int | None:
    """None (no window) or the number of keys a query sees, a positive int, however large:
    one of `WIDEST_WINDOW` (2^53) steps or more sees every key of any sequence, so it reads
    as None."""
    w = check.integer(owner, "window", value, none_ok=True, example=4096)
    return None if w is None or w >= WIDEST_WINDOW else w


def output_bias(owner, value) -> bool | None:
    """None (the output projection has a bias when the others do: `projection_bias`) or
    whether it has one apart from the query, key and value projections (Qwen2's have biases,
    its output projection none)."""
    return None if value is None else check.flag(owner, "output_bias", value)


def qk_norm(owner, value) -> float | None:
    """None (no QK-norm) or the eps of the RMSNorm of each head's query and key, before the
    rotary embedding (Qwen3): a number > 0."""
    return None if value is None else check.positive(owner, "qk_norm", value, example="1e-6")


def softcap(owner, value) -> float | None:
    """None or the soft cap c of the attention scores, c · tanh(scores / c) before the
    softmax (Gemma 2's `attn_logit_softcapping`): a number > 0."""
    return None if value is None else check.positive(owner, "softcap", value, example="50.0")


@dataclass(frozen=True)
class AttentionOptions:
    """The options of one attention layer as one object, each in its canonical form: made by
    `options` (which checks every rule above), once, where the layer is constructed, and
    handed whole to the module the layer builds, which trusts them.

    The projection sizes (`key_channels`, `value_channels`, `output_channels`,
    `projection_bias`) are those of the layers with learned projections; the channels that
    arrive at the inputs are the module's own arguments, known when it is built."""

    num_heads: int
    scale: Union[str, float] = "auto"
    attention_mask: Optional[str] = None
    causal_alignment: str = "top-left"
    dropout: float = 0.0
    mask_input: bool = False              # the layer's has_padding_mask_input (a `mask` port)
    need_weights: bool = False            # the layer's has_scores_output
    num_kv_heads: Optional[int] = None    # None: one key/value head per query head
    rotary: Union[bool, dict] = False     # False, or the settings dict with every key
    window: Optional[int] = None
    alibi: bool = False
    bias_input: bool = False              # the layer's has_bias_input
    key_channels: Optional[int] = None
    value_channels: Optional[int] = None
    output_channels: Optional[int] = None
    projection_bias: bool = True
    output_bias: Optional[bool] = None    # None: as projection_bias
    qk_norm: Optional[float] = None       # the eps of the per-head RMSNorm of q and k, or None
    softcap: Optional[float] = None       # scores → softcap · tanh(scores / softcap), or None

    @property
    def output_has_bias(self) -> bool:
        """Whether the output projection has a bias (`output_bias`, else `projection_bias`)."""
        return self.projection_bias if self.output_bias is None else self.output_bias

    @property
    def kv_heads(self) -> int:
        """The number of key/value heads (num_heads without grouped-query attention)."""
        return self.num_kv_heads or self.num_heads


# the rules under other names: `options` takes arguments of the same names as them
_heads_rule, _kv_rule, _scale_rule, _mask_rule, _alignment_rule, _dropout_rule, _rotary_rule, \
    _window_rule = num_heads, num_kv_heads, scale, attention_mask, causal_alignment, dropout, \
    rotary, window
_qk_norm_rule, _softcap_rule = qk_norm, softcap


def options(owner, num_heads, scale="auto", attention_mask=None, causal_alignment="top-left",
            dropout=0.0, mask_input=False, need_weights=False, num_kv_heads=None, rotary=False,
            window=None, alibi=False, bias_input=False, qk_norm=None, softcap=None,
            kv_error: type[AttnlabError] = ArgumentError,
            flag_names: tuple[str, str, str] = ("has_padding_mask_input", "has_scores_output",
                                                "has_bias_input"),
            **sizes) -> AttentionOptions:
    """Every argument rule of attention, applied once, in the order of the layers' arguments:
    the `AttentionOptions` of `owner`. `flag_names`: the names of mask_input, need_weights and
    bias_input in messages (a layer's `has_…` ones, or a module's own); `kv_error`: the class
    of a num_kv_heads that does not divide num_heads; `sizes`: the projection sizes, checked
    by the caller (a layer's constructor, a module's)."""
    heads = _heads_rule(owner, num_heads)
    return AttentionOptions(
        num_heads=heads, scale=_scale_rule(owner, scale),
        attention_mask=_mask_rule(owner, attention_mask),
        causal_alignment=_alignment_rule(owner, causal_alignment),
        dropout=_dropout_rule(owner, dropout),
        mask_input=flag(owner, flag_names[0], mask_input),
        need_weights=flag(owner, flag_names[1], need_weights),
        num_kv_heads=_kv_rule(owner, num_kv_heads, heads, kv_error),
        rotary=_rotary_rule(owner, rotary), window=_window_rule(owner, window),
        alibi=flag(owner, "alibi", alibi), bias_input=flag(owner, flag_names[2], bias_input),
        qk_norm=_qk_norm_rule(owner, qk_norm), softcap=_softcap_rule(owner, softcap), **sizes)
