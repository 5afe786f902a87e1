"""Ready transformer blocks: `transformer_encoder` and `transformer_decoder`.

Each returns an `al.Network` without input layers, usable as a layer (as the combinators are):
its inputs are `Port` layers named `in` (and `memory` for the decoder), its output a `Port`
named `out`. The layers inside carry `torch.nn.TransformerEncoderLayer`'s and
`TransformerDecoderLayer`'s names, so the weights copy across by name:

============================  ===============================================================
torch                         attnlab (inside the block)
============================  ===============================================================
``self_attn.in_proj_weight``  ``self_attn/query.weight``, ``key.weight``, ``value.weight``
                              (the three thirds, in this order; the biases likewise)
``self_attn.out_proj``        ``self_attn/output.weight``, ``output.bias``
``multihead_attn.*``          ``multihead_attn/query|key|value|output.*`` (decoder)
``linear1``, ``linear2``      ``linear1/weight``, ``linear2/weight`` (and biases)
``norm1``, ``norm2``, …       ``norm1/weight``, ``norm1/bias``, …
============================  ===============================================================

With the same weights and ``norm_first=(norm == "pre")`` the block equals torch's layer
(``batch_first=True``), padded batches included: the padding mask of `in` plays
``src_key_padding_mask`` / ``tgt_key_padding_mask``, that of `memory`
``memory_key_padding_mask``. The decoder's self-attention is causal by default (torch's
``tgt_mask`` a causal mask), so the decoder streams step by step with `memory` given whole
in ``static_inputs``.

Example — a GPT-style language model of two causal blocks with rotary positions, which
trains with `al.train` and decodes with `al.generate`::

    net = al.Network([L.TokenInput(name="ids"), L.Embedding(100, 64),
                      al.blocks.transformer_encoder(64, 4, 256, norm="pre", causal=True,
                                                    rotary=True),
                      al.blocks.transformer_encoder(64, 4, 256, norm="pre", causal=True,
                                                    rotary=True),
                      L.LayerNorm(), L.Dense(100)])
    al.generate(net, start=prompt_ids, max_length=20)
"""
from __future__ import annotations

from typing import Any

from . import layers as L
from .combinators import Port, add_residual
from attnlab.core.errors import ArgumentError
from .layers.base import Layer
from .network import Network

__all__ = ["transformer_encoder", "transformer_decoder"]

_ACTIVATIONS = {"relu": ("ReLU", {}), "gelu": ("GELU", {}),
                "gelu-tanh": ("GELU", {"approximate": "tanh"}), "silu": ("SiLU", {})}


def transformer_encoder(d_model: int, num_heads: int, ffn: int, norm: str = "post",
                        dropout: float = 0.1, activation: str = "relu", eps: float = 1e-5,
                        bias: bool = True, causal: bool = False, name: str | None = None,
                        **attention: Any) -> Network:
    r"""One transformer encoder layer: self-attention, then a feed-forward network, each with a
    residual connection and a `LayerNorm` (`torch.nn.TransformerEncoderLayer`).

    Parameters
    ----------
    d_model : int
        The channels in and out.
    num_heads : int
        The attention heads; they must divide `d_model`.
    ffn : int
        The channels of the feed-forward network's hidden layer (torch's ``dim_feedforward``).
    norm : "post" or "pre"
        "post": ``norm(x + sublayer(x))`` (torch's default); "pre": ``x + sublayer(norm(x))``
        (torch's ``norm_first=True``, GPT-2's layout).
    dropout : float
        Dropout after each sublayer, inside the feed-forward network and on the attention
        weights, in training only (torch's default 0.1). With 0 the block has no Dropout layers.
    activation : str
        The feed-forward activation: "relu" (torch's default), "gelu", "gelu-tanh", "silu".
    eps : float
        The epsilon of the `LayerNorm` layers.
    bias : bool
        Biases in the attention projections, the two `Dense` and the `LayerNorm` layers.
    causal : bool
        Causal self-attention (a decoder-only, GPT-style stack; torch's ``is_causal=True``).
    name : str, optional
        The block's name when added to a network (default "encoder", "encoder_1", …).
    \*\*attention
        Further options of the attention layer (e.g. ``num_kv_heads``).

    Returns
    -------
    Network
        Input `in` (B×T×d_model), output `out` (B×T×d_model). Layers ``self_attn``,
        ``linear1``, ``linear2``, ``norm1``, ``norm2`` (torch's names), the activation, the
        additions and dropouts.
    """
    o = _Options("transformer_encoder", d_model, num_heads, ffn, norm, dropout, activation,
                 eps, bias, attention)
    causal = _flag("transformer_encoder", "causal", causal)
    net = _network(name, "encoder", "transformer_encoder")
    net.add(Port(name="in"))
    x = "in"
    sa = o.attention(L.SelfAttention, "self_attn", "causal" if causal else None)
    x = o.sublayer(net, x, "1", [sa], lambda a: net.connect(a, "self_attn"))
    x = o.sublayer(net, x, "2", o.feed_forward(), lambda a: net.connect(a, "linear1"))
    net.add(Port(name="out"))
    net.connect(x, "out")
    return net


def transformer_decoder(d_model: int, num_heads: int, ffn: int, norm: str = "post",
                        dropout: float = 0.1, activation: str = "relu", eps: float = 1e-5,
                        bias: bool = True, causal: bool = True, name: str | None = None,
                        **attention: Any) -> Network:
    """One transformer decoder layer: causal self-attention, cross-attention to an encoder's
    output (`memory`), a feed-forward network, each with a residual connection and a
    `LayerNorm` (`torch.nn.TransformerDecoderLayer` called with a causal ``tgt_mask``).

    Parameters
    ----------
    d_model, num_heads, ffn, norm, dropout, activation, eps, bias, name, **attention
        As for `transformer_encoder` (default name "decoder").
    causal : bool
        Causal self-attention (True, the default: a target position sees itself and the
        positions before it, torch's ``tgt_mask`` a causal mask); False for torch's layer
        called without ``tgt_mask`` (then the decoder does not stream).

    Returns
    -------
    Network
        Inputs `in` (B×Tq×d_model, the target sequence) and `memory` (B×Tk×C, the encoder's
        output), output `out` (B×Tq×d_model). Layers ``self_attn``, ``multihead_attn``,
        ``linear1``, ``linear2``, ``norm1``, ``norm2``, ``norm3`` (torch's names), the
        activation, the additions and dropouts. It streams: `memory` goes whole into
        ``static_inputs``, `in` step by step.
    """
    o = _Options("transformer_decoder", d_model, num_heads, ffn, norm, dropout, activation,
                 eps, bias, attention)
    causal = _flag("transformer_decoder", "causal", causal)
    net = _network(name, "decoder", "transformer_decoder")
    net.add(Port(name="in"))
    net.add(Port(name="memory"))
    sa = o.attention(L.SelfAttention, "self_attn", "causal" if causal else None)
    x = o.sublayer(net, "in", "1", [sa], lambda a: net.connect(a, "self_attn"))
    ca = o.attention(L.MultiHeadAttention, "multihead_attn", None)

    def cross(a):
        net.connect(a, "multihead_attn/query")
        net.connect("memory", "multihead_attn/key")
        net.connect("memory", "multihead_attn/value")
    x = o.sublayer(net, x, "2", [ca], cross)
    x = o.sublayer(net, x, "3", o.feed_forward(), lambda a: net.connect(a, "linear1"))
    net.add(Port(name="out"))
    net.connect(x, "out")
    return net


# -- the pieces ---------------------------------------------------------------------------

class _Options:
    """The checked arguments of a block, and the layers they make."""

    def __init__(self, fn, d_model, num_heads, ffn, norm, dropout, activation, eps, bias,
                 attention):
        self.fn = fn
        self.d_model = _positive_int(fn, "d_model", d_model, 512)
        self.num_heads = _positive_int(fn, "num_heads", num_heads, 8)
        self.ffn = _positive_int(fn, "ffn", ffn, 2048)
        if self.d_model % self.num_heads:
            fits = [h for h in range(1, self.d_model + 1) if self.d_model % h == 0]
            near = sorted(fits, key=lambda h: abs(h - self.num_heads))[:2]
            raise ArgumentError(f"{fn}: argument 'num_heads': expected a divisor of d_model "
                                f"{self.d_model}, received {self.num_heads}. Use num_heads "
                                f"{' or '.join(map(str, sorted(near)))}, or another d_model.")
        if norm not in ("pre", "post"):
            raise ArgumentError(f"{fn}: argument 'norm': expected \"pre\" or \"post\", received "
                                f"{norm!r}. \"post\" is torch's default (norm_first=False), "
                                "\"pre\" its norm_first=True.")
        self.pre = norm == "pre"
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) \
                or not 0 <= dropout < 1:
            raise ArgumentError(f"{fn}: argument 'dropout': expected a number in [0, 1), "
                                f"received {dropout!r}. E.g. dropout=0.1 (torch's default).")
        self.dropout = float(dropout)
        if activation not in _ACTIVATIONS:
            raise ArgumentError(f"{fn}: argument 'activation': expected one of "
                                f"{', '.join(map(repr, _ACTIVATIONS))}, received "
                                f"{activation!r}.")
        kind, kw = _ACTIVATIONS[activation]
        self.activation = (getattr(L, kind), kw)
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps > 0:
            raise ArgumentError(f"{fn}: argument 'eps': expected a positive number, received "
                                f"{eps!r}. E.g. eps=1e-5 (torch's default).")
        self.eps = float(eps)
        self.bias = _flag(fn, "bias", bias)
        taken = {"num_heads", "key_channels", "attention_mask", "dropout", "name"}
        for key in attention:
            if key in taken or key == "projection_bias":
                raise ArgumentError(f"{fn}: argument '{key}': the block sets it itself. Leave "
                                    f"it out (use num_heads/d_model/dropout/bias/causal).")
        self.extra = attention

    def attention(self, cls, name, mask):
        kw: dict[str, Any] = dict(self.extra)
        if not self.bias:
            kw["projection_bias"] = False
        try:
            return cls(self.num_heads, self.d_model, attention_mask=mask, dropout=self.dropout,
                       name=name, **kw)
        except TypeError as e:
            raise ArgumentError(f"{self.fn}: {e}. Give only options that {cls.__name__} "
                                "takes.") from None

    def norm(self, name):
        return L.LayerNorm(eps=self.eps, bias=self.bias, name=name)

    def drop(self, name) -> list[Layer]:
        return [L.Dropout(self.dropout, name=name)] if self.dropout else []

    def feed_forward(self) -> list[Layer]:
        cls, kw = self.activation
        return ([L.Dense(self.ffn, bias=self.bias, name="linear1"),
                 cls(name="activation", **kw)] + self.drop("dropout")
                + [L.Dense(self.d_model, bias=self.bias, name="linear2")])

    def sublayer(self, net, x, i, body, feed) -> str:
        """Adds `x + body(x)` (post: then norm; pre: body after a norm); returns the output."""
        norm = self.norm(f"norm{i}")
        body = body + self.drop(f"dropout{i}")
        if self.pre:
            net.add(norm)
            net.connect(x, norm.name)
            _chain(net, body, lambda: feed(norm.name))
        else:
            _chain(net, body, lambda: feed(x))
        add = add_residual(net, x, body[-1].name, f"add{i}")
        if self.pre:
            return add
        net.add(norm)
        net.connect(add, norm.name)
        return norm.name


def _chain(net, layers, feed_first):
    net.add(layers[0])
    feed_first()
    for a, b in zip(layers, layers[1:]):
        net.add(b)
        net.connect(a.name, b.name)


def _network(name, stem, fn) -> Network:
    if name is not None and not isinstance(name, str):
        raise ArgumentError(f"{fn}: argument 'name': expected a string, received {name!r}.")
    net = Network(name=name)
    net.stem = stem  # type: ignore[misc]
    net.metadata["block"] = fn
    return net


def _positive_int(fn, arg, value, example) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ArgumentError(f"{fn}: argument '{arg}': expected a positive integer, received "
                            f"{value!r}. E.g. {arg}={example}.")
    return value


def _flag(fn, arg, value) -> bool:
    if not isinstance(value, bool):
        raise ArgumentError(f"{fn}: argument '{arg}': expected True or False, received "
                            f"{value!r}.")
    return value
