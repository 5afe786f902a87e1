"""Attention layers (DESIGN §3). The math lives in `attnlab.functional`."""
from __future__ import annotations

from torch import nn

from ..errors import ArgumentError, SizeError
from ..spec import Spec
from .base import Layer


def _check_heads(layer, port, channels, num_heads, what):
    if channels is not None and channels % num_heads:
        divisors = [d for d in range(1, min(channels, 64) + 1) if channels % d == 0][-4:]
        raise layer.error(SizeError, port, f"num_heads {num_heads} does not divide the {what} "
                          f"channels {channels}. Use a num_heads that divides {channels} (e.g. "
                          f"{', '.join(map(str, divisors))}) or change the {what} channels.")


class Attention(Layer):
    """Scaled dot-product attention without learnables [attentionLayer].

    query B×Tq×Ck, key B×Tk×Ck, value B×Tk×Cv (+ `mask` B×Tk, True/nonzero = attend) →
    out B×Tq×Cv (+ `scores` B×heads×Tq×Tk). Channels split into `num_heads` contiguous blocks;
    padded keys (from the key sequence's padding mask or the `mask` port) are ignored."""

    uses_mask = True

    def __init__(self, num_heads: int = 1, scale="auto", attention_mask=None, dropout: float = 0.0,
                 has_padding_mask_input: bool = False, has_scores_output: bool = False,
                 name: str | None = None):
        super().__init__(name)
        if not isinstance(num_heads, int) or num_heads < 1:
            raise ArgumentError(f"Attention num_heads must be a positive int, got {num_heads!r}")
        if attention_mask not in (None, "causal"):
            raise ArgumentError("Attention attention_mask must be None or 'causal' (pass custom masks "
                             f"to attnlab.attention), got {attention_mask!r}")
        if not 0.0 <= dropout < 1.0:
            raise ArgumentError(f"Attention dropout must be in [0, 1), got {dropout!r}")
        self.num_heads = num_heads
        self.scale = scale
        self.attention_mask = attention_mask
        self.dropout = dropout
        self.has_padding_mask_input = bool(has_padding_mask_input)
        self.has_scores_output = bool(has_scores_output)

    @property
    def input_ports(self):
        return ("query", "key", "value") + (("mask",) if self.has_padding_mask_input else ())

    @property
    def output_ports(self):
        return ("out",) + (("scores",) if self.has_scores_output else ())

    def infer(self, specs):
        q, k, v = specs["query"], specs["key"], specs["value"]
        fix = "Attention attends over a time axis: give it sequences B×T×C."
        for port, s in (("query", q), ("key", k), ("value", v)):
            self.require(s, port, ("BTC",), fix)
        if None not in (q.channels, k.channels) and q.channels != k.channels:
            raise self.error(SizeError, "key", f"expected {k.with_channels(q.channels)}, received {k}. "
                             f"Keys need the query's channels: project the key with Dense({q.channels}), "
                             "or use MultiHeadAttention, which projects both.")
        if None not in (k.time, v.time) and k.time != v.time:
            raise self.error(SizeError, "value", f"expected {k.time} time steps (as 'key'), "
                             f"received {v}. Keys and values come from the same sequence.")
        _check_heads(self, "query", q.channels, self.num_heads, "query/key")
        _check_heads(self, "value", v.channels, self.num_heads, "value")
        if self.has_padding_mask_input:
            self.require(specs["mask"], "mask", ("BTC", "BT"),
                         "The padding mask has one entry per key step: B×Tk or B×Tk×C.")
        out = {"out": Spec.sequence(v.channels, q.time)}
        if self.has_scores_output:
            out["scores"] = Spec("BHQK", (None, self.num_heads, q.time, k.time))
        return out

    def build(self, specs):
        return _AttentionModule(self)


class _AttentionModule(nn.Module):
    def __init__(self, layer: Attention):
        super().__init__()
        self.num_heads = layer.num_heads
        self.scale = layer.scale
        self.causal = layer.attention_mask
        self.dropout = layer.dropout
        self.mask_port = layer.has_padding_mask_input
        self.scores = layer.has_scores_output

    def forward(self, q, k, v, *mask_port, masks=(None, None, None)):
        from ..functional import attention
        key_mask = masks[1]
        if self.mask_port:
            m = mask_port[0]
            m = (m[..., 0] if m.dim() == 3 else m) != 0                      # B×Tk×C → B×Tk
            key_mask = m if key_mask is None else key_mask & m
        return attention(q, k, v, self.num_heads, scale=self.scale, key_padding_mask=key_mask,
                         attention_mask=self.causal, dropout=self.dropout,
                         need_weights=self.scores, training=self.training)
