"""Attention layers. The math and the modules they build live in `attnlab.functional`.

A layer checks its arguments once, when it is made (`rules.options`), and keeps them
as one `AttentionOptions` (`layer.options`) besides its attributes; `build` hands them whole to
its class's `module_class`, which trusts them. A layer kind that computes differently (QK-norm,
another position map of queries and keys) is a subclass that names another `module_class`."""
from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from torch import nn

from attnlab.core.errors import FormatError, SizeError
from attnlab.functional.modules import (AttentionModule, AttentionPoolModule, MultiHeadAttentionModule,
                                        QKNormSelfAttentionModule, SelfAttentionModule)
from attnlab.core.spec import Spec
from attnlab.functional import rules
from attnlab.core import checks as check
from .base import Layer


def _check_heads(layer, port, channels, num_heads, what):
    if channels is not None and channels % num_heads:
        raise layer.error(SizeError, port, f"num_heads {num_heads} does not divide the {what} "
                          f"channels {channels}. Use a num_heads that divides {channels}"
                          f"{rules.divisor_hint(channels, num_heads)}, or change the {what} "
                          "channels.")


# the attributes of the options, under the layers' argument names → AttentionOptions fields
_OPTION_ATTRS = {"num_heads": "num_heads", "scale": "scale", "attention_mask": "attention_mask",
                 "causal_alignment": "causal_alignment", "dropout": "dropout",
                 "has_padding_mask_input": "mask_input", "has_scores_output": "need_weights",
                 "num_kv_heads": "num_kv_heads", "rotary": "rotary", "window": "window",
                 "alibi": "alibi", "has_bias_input": "bias_input", "qk_norm": "qk_norm",
                 "softcap": "softcap"}
_SIZE_ATTRS = ("key_channels", "value_channels", "output_channels", "projection_bias",
               "output_bias")


class _Heads(Layer):
    # the module class that `build` makes from the options: a subclass may name another
    module_class: ClassVar[type[nn.Module]]
    _options: rules.AttentionOptions
    # the options `_set_options` sets, declared for the type checker
    num_heads: int
    scale: str | float
    attention_mask: str | None
    causal_alignment: str
    dropout: float
    has_padding_mask_input: bool
    has_scores_output: bool
    num_kv_heads: int | None
    rotary: bool | dict
    window: int | None
    alibi: bool
    has_bias_input: bool
    qk_norm: float | None
    softcap: float | None

    @property
    def options(self) -> rules.AttentionOptions:
        """The layer's options as one object, checked when the layer was made (an attribute
        changed since then is checked here, when the options are next asked for)."""
        if not self._agrees():
            self._check_options()
        return self._options

    def _agrees(self) -> bool:
        o = self._options
        return all(getattr(self, a) == getattr(o, f) for a, f in _OPTION_ATTRS.items())

    def _check_options(self) -> None:
        _set_options(self, **{a: getattr(self, a) for a in _OPTION_ATTRS})


class _Projected(_Heads):
    # the sizes `_projection_sizes` sets
    key_channels: int
    value_channels: int | None
    output_channels: int | None
    projection_bias: bool
    output_bias: bool | None

    def _agrees(self) -> bool:
        return super()._agrees() and \
            all(getattr(self, a) == getattr(self._options, a) for a in _SIZE_ATTRS)

    def _check_options(self) -> None:
        super()._check_options()
        _projection_sizes(self, self.key_channels, self.value_channels, self.output_channels,
                          self.projection_bias, self.output_bias)


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
        _set_options(self, num_heads=num_heads, scale=scale, attention_mask=attention_mask,
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
        _check_heads(self, "query", q.channels, heads, "query/key")
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
        _check_heads(self, "value", v.channels, kv, "value")
        if self.rotary and q.channels is not None:
            rules.rotary_dims(self, self.rotary, q.channels // heads, heads=heads)
        if self.has_padding_mask_input:
            self.require(specs["mask"], "mask", ("BTC", "BT"),
                         "The padding mask has one entry per key step: B×Tk or B×Tk×C.")
        _bias_port(self, specs, q.time, k.time)
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


# -- shared pieces of the learned attention layers ------------------------------------------

def _set_options(layer, **given: Any) -> None:
    """Checks the options by the rules (`rules.options`, their one place) and keeps
    them on `layer` as one object (`_options`) and, under the constructor's names, as
    attributes in their canonical forms (what config(), repr and saving read)."""
    opts = rules.options(layer, **{_OPTION_ATTRS[k]: v for k, v in given.items()})
    for attr, field in _OPTION_ATTRS.items():
        setattr(layer, attr, getattr(opts, field))
    layer._options = opts


def _bias_port(layer, specs, tq, tk):
    """The `bias` port: a float B×H×Tq×Tk tensor whose sizes may be 1 (broadcast)."""
    if not layer.has_bias_input:
        return
    s = specs["bias"]
    fix = (f"The bias is added to the scores: give it B×{layer.num_heads}×Tq×Tk (sizes of 1 "
           "broadcast), e.g. from RelativePositionBias or "
           f"ImageInput(({layer.num_heads}, Tq, Tk)).")
    if len(s.sizes) != 4:
        raise layer.error(SizeError, "bias", f"expected B×{layer.num_heads}×Tq×Tk, received {s}. "
                          + fix)
    for what, got, full in (("heads", s.sizes[1], layer.num_heads), ("Tq", s.sizes[2], tq),
                            ("Tk", s.sizes[3], tk)):
        if None not in (got, full) and got not in (1, full):
            raise layer.error(SizeError, "bias", f"expected {full} (or 1) along {what}, "
                              f"received {s}. " + fix)


def _bias_ports(layer) -> tuple[str, ...]:
    return (("mask",) if layer.has_padding_mask_input else ()) + \
        (("bias",) if layer.has_bias_input else ())


def _projection_sizes(layer, key_channels, value_channels, output_channels, projection_bias=True,
                      output_bias=None):
    layer.projection_bias = rules.flag(layer, "projection_bias", projection_bias)
    layer.output_bias = rules.output_bias(layer, output_bias)
    layer.key_channels = check.integer(layer, "key_channels", key_channels, example=64)
    layer.value_channels = check.integer(layer, "value_channels", value_channels, none_ok=True)
    layer.output_channels = check.integer(layer, "output_channels", output_channels, none_ok=True)
    heads = layer.num_heads
    for arg in ("key_channels", "value_channels"):
        channels = getattr(layer, arg)
        if channels is not None and channels % heads:
            fits = rules.divisors_near(channels, heads)
            raise check.fail(layer, "num_heads", f"a divisor of '{arg}' ({channels}): each head "
                             f"gets {arg} / num_heads channels", heads,
                             f"Use num_heads one of {' or '.join(map(str, fits))}, or make {arg} "
                             f"a multiple of {heads}.")
    if layer.rotary:
        rules.rotary_dims(layer, layer.rotary, layer.key_channels // heads, heads=heads)
    layer._options = dataclasses.replace(layer._options, **{a: getattr(layer, a)
                                                            for a in _SIZE_ATTRS})


def _projections_fit(layer, port, query_channels, kv_channels):
    value = layer.value_channels or layer.key_channels
    check.learnables_fit(layer, port, "Use smaller key_channels, value_channels or output_channels.",
                         **{"query weight": (layer.key_channels, query_channels),
                            "key weight": (layer.key_channels, kv_channels),
                            "value weight": (value, kv_channels),
                            "output weight": (layer.output_channels or query_channels, value)})


def _sequence_only(layer, spec, port):
    """Self-attention needs a time (or space) axis: explain what to do when there is none."""
    if spec.is_image:
        raise layer.error(FormatError, port, f"expected B×T×C, received {spec} (image). Attention "
                          "relates positions of a sequence: insert ImageToSequence before "
                          f"'{layer.name}' to turn the H×W positions into a sequence of H·W steps.")
    if spec.labels == "BC":
        raise layer.error(FormatError, port, f"expected B×T×C, received {spec} (features): there "
                          "is no time or space axis left to attend over (a Flatten merges the image "
                          "positions into channels). Use ImageToSequence instead of Flatten for "
                          "images, or give attention a sequence.")
    layer.require(spec, port, ("BTC",))


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
        _set_options(self, num_heads=num_heads, scale=scale, attention_mask=attention_mask,
                     causal_alignment="top-left", dropout=dropout,
                     has_padding_mask_input=has_padding_mask_input,
                     has_scores_output=has_scores_output, num_kv_heads=num_kv_heads,
                     rotary=rotary, window=window, alibi=alibi, has_bias_input=has_bias_input,
                     qk_norm=qk_norm, softcap=softcap)
        _projection_sizes(self, key_channels, value_channels, output_channels, projection_bias,
                          output_bias)

    @property
    def input_ports(self) -> tuple[str, ...]:
        return ("in",) + _bias_ports(self)

    @property
    def output_ports(self) -> tuple[str, ...]:
        return ("out",) + (("scores",) if self.has_scores_output else ())

    def infer(self, specs: dict[str, Spec]) -> dict[str, Spec]:
        s = specs["in"]
        _sequence_only(self, s, "in")
        _projections_fit(self, "in", s.channels, s.channels)
        _check_heads(self, "in", self.key_channels, self.num_heads, "key")
        _check_heads(self, "in", self.value_channels or self.key_channels, self.num_heads, "value")
        if self.has_padding_mask_input:
            self.require(specs["mask"], "mask", ("BTC", "BT"))
        _bias_port(self, specs, s.time, s.time)
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
        _set_options(self, num_heads=num_heads, scale=scale, attention_mask=attention_mask,
                     causal_alignment=causal_alignment, dropout=dropout,
                     has_padding_mask_input=has_padding_mask_input,
                     has_scores_output=has_scores_output, num_kv_heads=num_kv_heads,
                     rotary=rotary, window=window, alibi=alibi, has_bias_input=has_bias_input)
        _projection_sizes(self, key_channels, value_channels, output_channels, projection_bias,
                          output_bias)

    input_ports = Attention.input_ports
    output_ports = Attention.output_ports

    def infer(self, specs: dict[str, Spec]) -> dict[str, Spec]:
        q, k, v = specs["query"], specs["key"], specs["value"]
        for port, s in (("query", q), ("key", k), ("value", v)):
            _sequence_only(self, s, port)
        _projections_fit(self, "query", q.channels, max(k.channels or 0, v.channels or 0) or None)
        if None not in (k.time, v.time) and k.time != v.time:
            raise self.error(SizeError, "value", f"expected {k.time} time steps (as 'key'), "
                             f"received {v}. Keys and values come from the same sequence.")
        _check_heads(self, "query", self.key_channels, self.num_heads, "key")
        _check_heads(self, "value", self.value_channels or self.key_channels, self.num_heads, "value")
        if self.has_padding_mask_input:
            self.require(specs["mask"], "mask", ("BTC", "BT"))
        _bias_port(self, specs, q.time, k.time)
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
        _set_options(self, num_heads=num_heads, scale="auto", attention_mask=None,
                     causal_alignment="top-left", dropout=dropout, has_padding_mask_input=False,
                     has_scores_output=False, num_kv_heads=None)

    def config(self) -> dict:
        return {"num_heads": self.num_heads, "dropout": self.dropout}

    def infer(self, specs: dict[str, Spec]) -> Spec:
        s = specs["in"]
        _sequence_only(self, s, "in")
        _check_heads(self, "in", s.channels, self.num_heads, "input")
        return Spec.features(s.channels)

    module_class = AttentionPoolModule

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return self.module_class(self.options, check.known(self, "in", specs["in"].channels))


class ImageToSequence(Layer):
    """The positions of an image as a sequence, row by row, each step one p×p patch
    (p = `patch_size`) with its C·p² values. No learnables: follow it with `Dense` to project the
    patches (a vision transformer's patch embedding).

    Parameters
    ----------
    patch_size : int
        The patch side p; it must divide the height and the width. 1 keeps one pixel per step.

    Shape
    -----
    - `in`: B×C×H×W
    - `out`: B×(H·W/p²)×(C·p²)

    Examples
    --------
    >>> import torch, attnlab as al
    >>> from attnlab import layers as L
    >>> net = al.Network([L.ImageInput((3, 8, 8)), L.ImageToSequence(patch_size=4)])
    >>> net(torch.randn(2, 3, 8, 8)).shape
    torch.Size([2, 4, 48])
    """

    stem = "img2seq"

    def __init__(self, patch_size: int = 1, name: str | None = None):
        super().__init__(name)
        self.patch_size = check.integer(self, "patch_size", patch_size, example=4)

    def infer(self, specs: dict[str, Spec]) -> Spec:
        s = specs["in"]
        self.require(s, "in", ("BCSS",), "ImageToSequence turns an image into a sequence.")
        c, h, w = s.sizes[1:]
        p = self.patch_size
        if (h is not None and h % p) or (w is not None and w % p):
            raise self.error(SizeError, "in", f"expected height and width divisible by patch_size "
                             f"{p}, received {s}. Use a patch_size that divides both, or resize.")
        t = None if h is None or w is None else (h // p) * (w // p)
        return Spec.sequence(None if c is None else c * p * p, t)

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return _ImageToSequence(self.patch_size)


# -- modules -------------------------------------------------------------------------------

class _ImageToSequence(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, x):
        b, c, h, w = x.shape
        p = self.p
        if p == 1:
            return x.flatten(2).transpose(1, 2)                              # B×(HW)×C
        x = x.reshape(b, c, h // p, p, w // p, p)                            # B×C×h×p×w×p
        x = x.permute(0, 2, 4, 1, 3, 5)                                      # B×h×w×C×p×p
        return x.reshape(b, (h // p) * (w // p), c * p * p)                  # B×(hw)×(C·p²)
