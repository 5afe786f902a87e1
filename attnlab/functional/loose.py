"""Attention modules made directly from loose arguments (`SelfAttentionModule(channels,
num_heads, key_channels, …)`), not by a layer: each function takes its module's loose
signature, checks it by the rules a layer's constructor runs (`rules.options`) and returns
(the options, the module's sizes), so that a module trusts its options either way.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from attnlab.core.errors import SizeError
from attnlab.functional import rules
from attnlab.functional.math import _divisor_hint
from attnlab.functional.rules import AttentionOptions

# a module's names for the options a layer calls has_padding_mask_input, has_scores_output
# and has_bias_input
_MODULE_FLAGS = ("mask_input", "need_weights", "bias_input")


def _options(owner: str, sizes: dict, **kw) -> AttentionOptions:
    return rules.options(owner, kv_error=SizeError, flag_names=_MODULE_FLAGS, **kw, **sizes)


def channels_fit(owner: str, opts: AttentionOptions) -> None:
    """The projections' channels split into whole heads (a size rule of a module's own)."""
    heads = opts.num_heads
    for what, c in (("key", opts.key_channels), ("value", opts.value_channels)):
        if c is not None and c % heads:
            raise SizeError(
                f"{owner}: num_heads {heads} does not divide {what} channels {c}. Use a "
                f"num_heads that divides {c}{_divisor_hint(c, heads)}, or {what} "
                f"channels that are a multiple of {heads}.")


def attention(owner: str, num_heads: int, scale="auto", dropout: float = 0.0,
              attention_mask: Optional[str] = None, causal_alignment: str = "top-left",
              need_weights: bool = False, num_kv_heads: Optional[int] = None, *,
              rotary: Any = False, head_size: Optional[int] = None,
              window: Optional[int] = None, alibi: bool = False,
              bias_input: bool = False, softcap: Optional[float] = None):
    """`AttentionModule`'s loose arguments."""
    opts = _options(owner, {}, num_heads=num_heads, scale=scale, dropout=dropout,
                    attention_mask=attention_mask, causal_alignment=causal_alignment,
                    need_weights=need_weights, num_kv_heads=num_kv_heads, rotary=rotary,
                    window=window, alibi=alibi, bias_input=bias_input, softcap=softcap)
    if opts.rotary:
        if head_size is None:
            raise rules._fail(owner, "head_size", "the channels per head (an int) with "
                              "rotary", head_size, "Pass head_size=key channels / num_heads.")
        rules.rotary_dims(owner, opts.rotary, head_size, SizeError)
    return opts, (head_size,)


def multi_head(owner: str, query_channels: int, key_channels_in: int,
               value_channels_in: int, num_heads: int, key_channels: int,
               value_channels: Optional[int] = None,
               output_channels: Optional[int] = None, num_kv_heads: Optional[int] = None,
               scale="auto", dropout: float = 0.0, bias: bool = True,
               attention_mask: Optional[str] = None, causal_alignment: str = "top-left",
               need_weights: bool = False, *, rotary: Any = False,
               window: Optional[int] = None, alibi: bool = False,
               bias_input: bool = False, output_bias: Optional[bool] = None,
               qk_norm: Optional[float] = None, softcap: Optional[float] = None):
    """`MultiHeadAttentionModule`'s loose arguments."""
    sizes = {"key_channels": key_channels, "value_channels": value_channels,
             "output_channels": output_channels, "projection_bias": bias,
             "output_bias": rules.output_bias(owner, output_bias)}
    opts = _options(owner, sizes, num_heads=num_heads, scale=scale, dropout=dropout,
                    attention_mask=attention_mask, causal_alignment=causal_alignment,
                    need_weights=need_weights, num_kv_heads=num_kv_heads, rotary=rotary,
                    window=window, alibi=alibi, bias_input=bias_input, qk_norm=qk_norm,
                    softcap=softcap)
    channels_fit(owner, opts)
    if opts.rotary:
        rules.rotary_dims(owner, opts.rotary, key_channels // opts.num_heads, SizeError)
    return opts, (query_channels, key_channels_in, value_channels_in)


def self_attention(owner: str, channels: int, num_heads: int, key_channels: int,
                   value_channels: Optional[int] = None, output_channels: Optional[int] = None,
                   num_kv_heads: Optional[int] = None, scale="auto", dropout: float = 0.0,
                   bias: bool = True, attention_mask: Optional[str] = None,
                   need_weights: bool = False, **kw):
    """`SelfAttentionModule`'s loose arguments: one input of `channels` for all three."""
    opts, _ = multi_head(owner, channels, channels, channels, num_heads, key_channels,
                         value_channels, output_channels, num_kv_heads, scale, dropout,
                         bias, attention_mask, "top-left", need_weights, **kw)
    return opts, (channels,)


def pool(owner: str, channels: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
    """`AttentionPoolModule`'s loose arguments."""
    opts = _options(owner, {"key_channels": channels, "value_channels": channels,
                            "projection_bias": bias}, num_heads=num_heads, dropout=dropout)
    channels_fit(owner, opts)
    return opts, (channels,)


def given(loose: Callable, owner: str, options: Any, sizes: tuple, kw: dict):
    """(the options, the sizes) of a module's arguments: the options a layer checked, or the
    loose arguments checked now by `loose`."""
    if isinstance(options, AttentionOptions):
        return options, sizes
    return loose(owner, *((options,) if options is not None else ()), *sizes, **kw)
