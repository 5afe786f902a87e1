"""Attention layers. The math and the modules they build live in `attnlab.functional`; what
the layers share (their options, checked once, and the checks of their ports) in
`attention_base`.

A layer keeps its options as one `AttentionOptions` (`layer.options`) besides its attributes;
`build` hands them whole to its class's `module_class`, which trusts them. A layer kind that
computes differently (QK-norm, another position map of queries and keys) is a subclass that
names another `module_class`."""
from __future__ import annotations

from torch import nn

from attnlab.core.errors import SizeError
from attnlab.functional.modules import (AttentionModule, AttentionPoolModule, MultiHeadAttentionModule,
                                        QKNormSelfAttentionModule, SelfAttentionModule)
from attnlab.core.spec import Spec
from attnlab.functional import rules
from attnlab.core import checks as check
from .attention_base import (_Heads, _Projected, bias_port, bias_ports, check_heads,
                             projection_sizes, projections_fit, sequence_only, set_options)


class Attention(_Heads):
    """Scaled dot-product attention without learnables [attentionLayer].

    Per head ``softmax(Q_h K_hᵀ · scale) V_h``, channels split into `num_heads` contiguous
    blocks (exact semantics: the attention page of the documentation). Padded keys, from the key
    sequence's padding mask or the `mask` port, are ignored.

    Parameters
    ----------
    num_heads : int
        The number of heads; it must divide Ck and Cv.
    scale : "auto" or float
        The factor on Q Kᵀ; "auto" is 1/√dk, dk = Ck/num_heads. Any finite number (negative
        favours the least similar keys; 0 attends uniformly over the allowed keys).
    attention_mask : None or "causal"
        "causal": query i sees keys j ≤ i. (A boolean mask of your own goes to
        `al.attention`; padding to the `mask` port.)
    causal_alignment : "top-left" or "bottom-right"
        Where the causal diagonal starts when Tq ≠ Tk.
    dropout : float
        Dropout on the attention weights, in training only.
    has_padding_mask_input : bool
        Adds the `mask` input port.
    has_scores_output : bool
        Adds the `scores` output port (the attention weights).
    num_kv_heads : int, optional
        Grouped-query attention: keys and values carry `num_kv_heads` heads (a divisor of
        `num_heads`), so Ck_kv = num_kv_heads·Ck/num_heads and the output has
        Cv·num_heads/num_kv_heads channels.
    rotary : bool or dict
        Rotary position embedding of queries and keys per head: True for Llama's half-split
        layout with base 10000, or a dict with `base`, `fraction` (the share of each head that
        rotates, GPT-NeoX's `rotary_pct`) and `interleaved` (GPT-J's layout).
    window : int, optional
        Sliding window: with `attention_mask="causal"` a query sees itself and the
        `window − 1` keys before it (Mistral's `sliding_window`); without, the keys less than
        `window` steps away. Any positive int: one of 2^53 or more is wider than any
        sequence and reads as None (no window).
    alibi : bool
        ALiBi: −slope_h · abs(i − j) added to the scores of head h, BLOOM's slopes.
    has_bias_input : bool
        Adds the `bias` input port: a float tensor broadcastable to B×heads×Tq×Tk added to the
        scores before the softmax (`RelativePositionBias`, or a network input).

    Shape
    -----
    - `query`: B×Tq×Ck
    - `key`: B×Tk×Ck_kv
    - `value`: B×Tk×Cv
    - `mask`: B×Tk (optional; True or nonzero = attend)
    - `bias`: B×heads×Tq×Tk, any of them 1 (optional)
    - `out`: B×Tq×Cv (×num_heads/num_kv_heads)
    - `scores`: B×heads×Tq×Tk (optional)

    Examples
    --------
    Keys from an encoder, queries from a decoder (MATLAB's cross-attention):

    >>> import torch, attnlab as al
    >>> from attnlab import layers as L
    >>> net = al.Network([L.SequenceInput(16, name="q"), L.Attention(num_heads=4, name="att")])
    >>> net.add(L.SequenceInput(16, name="kv")).connect("kv", "att/key").connect("kv", "att/value")
    ...     # doctest: +ELLIPSIS
    Network(...)
    >>> net({"q": torch.randn(2, 5, 16), "kv": torch.randn(2, 7, 16)}).shape
    torch.Size([2, 5, 16])
    """

    uses_mask = True

    def __init__(self, num_heads: int = 1, scale: str | float = "auto", attention_mask: str | None = None,
                 causal_alignment: str = "top-left", dropout: float = 0.0,
                 has_padding_mask_input: bool = False, has_scores_output: bool = False,
                 num_kv_heads: int | None = None, rotary: bool | dict = False,
                 window: int | None = None, alibi: bool = False, has_bias_input: bool = False,
                 name: str | None = None):
        super().__init__(name)
        set_options(self, num_heads=num_heads, scale=scale, attention_mask=attention_mask,
                    causal_alignment=causal_alignment, dropout=dropout,
                    has_padding_mask_input=has_padding_mask_input,
                    has_scores_output=has_scores_output, num_kv_heads=num_kv_heads,
                    rotary=rotary, window=window, alibi=alibi, has_bias_input=has_bias_input)

    @property
    def input_ports(self) -> tuple[str, ...]:
        return ("query", "key", "value") + (("mask",) if self.has_padding_mask_input else ()) \
            + (("bias",) if self.has_bias_input else ())

    @property
    def output_ports(self) -> tuple[str, ...]:
        return ("out",) + (("scores",) if self.has_scores_output else ())

    def infer(self, specs: dict[str, Spec]) -> dict[str, Spec]:
        q, k, v = specs["query"], specs["key"], specs["value"]
        fix = "Attention attends over a time axis: give it sequences B×T×C."
        for port, s in (("query", q), ("key", k), ("value", v)):
            self.require(s, port, ("BTC",), fix)
        heads, kv = self.num_heads, self.num_kv_heads or self.num_heads
        check_heads(self, "query", q.channels, heads, "query/key")
        want = None if q.channels is None else q.channels // heads * kv
        if None not in (want, k.channels) and want != k.channels:
            fix = (f"Keys need the query's channels: project the key with Dense({want}), or use "
                   "MultiHeadAttention, which projects both." if kv == heads else
                   f"With num_kv_heads {kv} the keys have num_kv_heads × query channels / "
                   f"num_heads = {want} channels: project them with Dense({want}).")
            raise self.error(SizeError, "key", f"expected {k.with_channels(want)}, received {k}. "
                             + fix)
        if None not in (k.time, v.time) and k.time != v.time:
            raise self.error(SizeError, "value", f"expected {k.time} time steps (as 'key'), "
                             f"received {v}. Keys and values come from the same sequence.")
        check_heads(self, "value", v.channels, kv, "value")
        if self.rotary and q.channels is not None:
            rules.rotary_dims(self, self.rotary, q.channels // heads, heads=heads)
        if self.has_padding_mask_input:
            self.require(specs["mask"], "mask", ("BTC", "BT"),
                         "The padding mask has one entry per key step: B×Tk or B×Tk×C.")
        bias_port(self, specs, q.time, k.time)
        cv = None if v.channels is None else v.channels // kv * heads
        out = {"out": Spec.sequence(cv, q.time)}
        if self.has_scores_output:
            out["scores"] = Spec("BHQK", (None, self.num_heads, q.time, k.time))
        return out

    module_class = AttentionModule

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        # the channels per head: the rotary embedding's size (infer checked that they fit)
        cq = specs["query"].channels
        head_size = None if cq is None else cq // self.num_heads
        return self.module_class(self.options, head_size, layer_name=self.name)


class SelfAttention(_Projected):
    """Multi-head self-attention with learned projections [selfAttentionLayer].

    Learnables `query`, `key`, `value`, `output`: each a `weight` (out×in) and a `bias` (none
    with `projection_bias=False`), laid out as `torch.nn.Linear`. Padded steps are ignored as
    keys.

    Parameters
    ----------
    num_heads : int
        The number of heads; it must divide `key_channels` and `value_channels`.
    key_channels : int
        Channels of the query and key projections (all heads together).
    value_channels : int, optional
        Channels of the value projection; defaults to `key_channels`.
    output_channels : int, optional
        Channels out; defaults to the input's C.
    scale, attention_mask, dropout, has_padding_mask_input, has_scores_output
        As for `Attention` (`attention_mask="causal"` for a decoder).
    num_kv_heads : int, optional
        Grouped-query attention: fewer key/value heads than query heads (1: multi-query).
    rotary, window, alibi, has_bias_input
        As for `Attention` (Llama: `rotary=True`; Mistral adds `window`; BLOOM `alibi=True`;
        T5 `has_bias_input=True` fed by `RelativePositionBias`, with `scale=1.0`).
    projection_bias : bool
        False: the four projections have no `bias` (Llama, Mistral, T5).
    output_bias : bool, optional
        Whether the output projection has a `bias`, apart from the other three (Qwen2: biases
        on the query, key and value projections, none on the output); None: as
        `projection_bias`.
    qk_norm : float, optional
        QK-norm: each head's query and key RMS-normalised (with this eps, times a learned gain
        per channel: `q_norm.weight`, `k_norm.weight`) before the rotary embedding (Qwen3).
    softcap : float, optional
        Soft-capped scores: softcap · tanh(scores / softcap) before the softmax (Gemma 2's
        `attn_logit_softcapping`), computed explicitly (the fused kernel cannot cap).

    Shape
    -----
    - `in`: B×T×C
    - `mask`: B×T (optional)
    - `bias`: B×heads×T×T, any of them 1 (optional)
    - `out`: B×T×output_channels
    - `scores`: B×heads×T×T (optional)

    Examples
    --------
    >>> import torch, attnlab as al
    >>> from attnlab import layers as L
    >>> net = al.Network([L.SequenceInput(8),
    ...                   L.SelfAttention(2, 16, attention_mask="causal", name="sa")])
    >>> net(torch.randn(3, 6, 8)).shape
    torch.Size([3, 6, 8])
    >>> list(net.learnables)[:2]
    ['sa/query.weight', 'sa/query.bias']
    """

    stem = "selfattention"
    uses_mask = True

    def __init__(self, num_heads: int, key_channels: int, value_channels: int | None = None,
                 output_channels: int | None = None, scale: str | float = "auto", attention_mask: str | None = None,
                 dropout: float = 0.0, has_padding_mask_input: bool = False,
                 has_scores_output: bool = False, num_kv_heads: int | None = None,
                 rotary: bool | dict = False, window: int | None = None, alibi: bool = False,
                 has_bias_input: bool = False, projection_bias: bool = True,
                 name: str | None = None, *, output_bias: bool | None = None,
                 qk_norm: float | None = None, softcap: float | None = None):
        super().__init__(name)
        set_options(self, num_heads=num_heads, scale=scale, attention_mask=attention_mask,
                    causal_alignment="top-left", dropout=dropout,
                    has_padding_mask_input=has_padding_mask_input,
                    has_scores_output=has_scores_output, num_kv_heads=num_kv_heads,
                    rotary=rotary, window=window, alibi=alibi, has_bias_input=has_bias_input,
                    qk_norm=qk_norm, softcap=softcap)
        projection_sizes(self, key_channels, value_channels, output_channels, projection_bias,
                         output_bias)

    @property
    def input_ports(self) -> tuple[str, ...]:
        return ("in",) + bias_ports(self)

    @property
    def output_ports(self) -> tuple[str, ...]:
        return ("out",) + (("scores",) if self.has_scores_output else ())

    def infer(self, specs: dict[str, Spec]) -> dict[str, Spec]:
        s = specs["in"]
        sequence_only(self, s, "in")
        projections_fit(self, "in", s.channels, s.channels)
        check_heads(self, "in", self.key_channels, self.num_heads, "key")
        check_heads(self, "in", self.value_channels or self.key_channels, self.num_heads, "value")
        if self.has_padding_mask_input:
            self.require(specs["mask"], "mask", ("BTC", "BT"))
        bias_port(self, specs, s.time, s.time)
        out = {"out": Spec.sequence(self.output_channels or s.channels, s.time)}
        if self.has_scores_output:
            out["scores"] = Spec("BHQK", (None, self.num_heads, s.time, s.time))
        return out

    module_class = SelfAttentionModule

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        # the layer's name: the module's run-time size errors name the layer and its port
        cls = self.module_class
        if self.qk_norm is not None:        # QK-norm: the built-in module that normalises
            if cls is not SelfAttentionModule:
                raise check.fail(self, "qk_norm", f"None with module_class {cls.__name__}",
                                 self.qk_norm, "Normalise in that module's transform_qk.")
            cls = QKNormSelfAttentionModule
        return cls(self.options, check.known(self, "in", specs["in"].channels),
                                 layer_name=self.name)


class MultiHeadAttention(_Projected):
    """Multi-head attention with learned projections and separate inputs: cross-attention
    (Trax `AttentionQKV`, Keras/PyTorch `MultiHeadAttention`).

    Learnables `query`, `key`, `value`, `output` (`weight` out×in, `bias` unless
    `projection_bias=False`). Keys and values may have another width and length than the query.

    Parameters
    ----------
    num_heads, key_channels, value_channels, num_kv_heads, projection_bias, output_bias
        As for `SelfAttention`.
    rotary, window, alibi, has_bias_input
        As for `Attention`; in cross-attention the query's positions count from the start of
        the query sequence, the keys' from the start of the key sequence.
    output_channels : int, optional
        Channels out; defaults to the query's Cq.
    scale, attention_mask, causal_alignment, dropout, has_padding_mask_input, has_scores_output
        As for `Attention`.

    Shape
    -----
    - `query`: B×Tq×Cq
    - `key`: B×Tk×Ck
    - `value`: B×Tk×Cv
    - `mask`: B×Tk (optional)
    - `bias`: B×heads×Tq×Tk, any of them 1 (optional)
    - `out`: B×Tq×output_channels
    - `scores`: B×heads×Tq×Tk (optional)
    """

    stem = "mha"
    uses_mask = True

    def __init__(self, num_heads: int, key_channels: int, value_channels: int | None = None,
                 output_channels: int | None = None, scale: str | float = "auto", attention_mask: str | None = None,
                 causal_alignment: str = "top-left", dropout: float = 0.0,
                 has_padding_mask_input: bool = False, has_scores_output: bool = False,
                 num_kv_heads: int | None = None, rotary: bool | dict = False,
                 window: int | None = None, alibi: bool = False, has_bias_input: bool = False,
                 projection_bias: bool = True, name: str | None = None, *,
                 output_bias: bool | None = None):
        super().__init__(name)
        set_options(self, num_heads=num_heads, scale=scale, attention_mask=attention_mask,
                    causal_alignment=causal_alignment, dropout=dropout,
                    has_padding_mask_input=has_padding_mask_input,
                    has_scores_output=has_scores_output, num_kv_heads=num_kv_heads,
                    rotary=rotary, window=window, alibi=alibi, has_bias_input=has_bias_input)
        projection_sizes(self, key_channels, value_channels, output_channels, projection_bias,
                         output_bias)

    input_ports = Attention.input_ports
    output_ports = Attention.output_ports

    def infer(self, specs: dict[str, Spec]) -> dict[str, Spec]:
        q, k, v = specs["query"], specs["key"], specs["value"]
        for port, s in (("query", q), ("key", k), ("value", v)):
            sequence_only(self, s, port)
        projections_fit(self, "query", q.channels, max(k.channels or 0, v.channels or 0) or None)
        if None not in (k.time, v.time) and k.time != v.time:
            raise self.error(SizeError, "value", f"expected {k.time} time steps (as 'key'), "
                             f"received {v}. Keys and values come from the same sequence.")
        check_heads(self, "query", self.key_channels, self.num_heads, "key")
        check_heads(self, "value", self.value_channels or self.key_channels, self.num_heads, "value")
        if self.has_padding_mask_input:
            self.require(specs["mask"], "mask", ("BTC", "BT"))
        bias_port(self, specs, q.time, k.time)
        out = {"out": Spec.sequence(self.output_channels or q.channels, q.time)}
        if self.has_scores_output:
            out["scores"] = Spec("BHQK", (None, self.num_heads, q.time, k.time))
        return out

    module_class = MultiHeadAttentionModule

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        cq, ck, cv = (check.known(self, p, specs[p].channels) for p in ("query", "key", "value"))
        return self.module_class(self.options, cq, ck, cv, layer_name=self.name)


class AttentionPool1d(_Heads):
    """Attention pooling over time: a learned query attends over the sequence.

    Padded steps are ignored. Learnables `query_vector` (1×1×C), `key`, `value`, `output`.

    Parameters
    ----------
    num_heads : int
        The number of heads; it must divide C.
    dropout : float
        Dropout on the attention weights, in training only.

    Shape
    -----
    - `in`: B×T×C
    - `out`: B×C
    """

    stem = "attnpool"
    uses_mask = True

    def __init__(self, num_heads: int = 1, dropout: float = 0.0, name: str | None = None):
        super().__init__(name)
        set_options(self, num_heads=num_heads, scale="auto", attention_mask=None,
                    causal_alignment="top-left", dropout=dropout, has_padding_mask_input=False,
                    has_scores_output=False, num_kv_heads=None)

    def config(self) -> dict:
        return {"num_heads": self.num_heads, "dropout": self.dropout}

    def infer(self, specs: dict[str, Spec]) -> Spec:
        s = specs["in"]
        sequence_only(self, s, "in")
        check_heads(self, "in", s.channels, self.num_heads, "input")
        return Spec.features(s.channels)

    module_class = AttentionPoolModule

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return self.module_class(self.options, check.known(self, "in", specs["in"].channels))
