"""A decoder-only transformer family as a description, and the one builder that turns a
description into a graph and a weight table.

A family states what its config maps to — sizes, the norm, the attention's options, the
feed-forward kind, the embeddings, the heads of its model classes, the layer names — in a
`Decoder`; each field is a value, or a callable that gets the `Config` and returns the value
(`width=lambda c: c.int("n_embd")`), so that reading a key, its default and its checks stay
with the family while the graph is written once, here. `Decoder.network` and
`Decoder.weights` are what the loader and `save_pretrained` call.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from .. import layers as L
from ..errors import ArgumentError
from ..network import Network
from .common import ACTIVATIONS, dropout, output, residual, under
from .config import Config, Keys
from .weights import W, Weight

# transformers' hidden_act → GLU's activation
GLU_ACTIVATIONS = {"silu": "silu", "swish": "silu", "gelu": "gelu",
                   "gelu_pytorch_tanh": "gelu-tanh", "gelu_new": "gelu-tanh"}

HEADS = ("lm", "classifier", "hidden")     # what a model class puts after the final norm


def value(v: Any, cfg: Config, *more: Any) -> Any:
    """A description's field for `cfg`: the value, or what the callable returns for it."""
    return v(cfg, *more) if callable(v) else v


def divisor(cfg: Config, key: str, of: int, of_key: str, default: Any = None) -> int:
    """The config's `key` (`default` when absent, if given), refused (naming it) unless it
    divides `of` (the value of `of_key`)."""
    n = cfg.int(key) if default is None else cfg.int(key, default)
    if of % n:
        raise cfg.bad(key, n, f"a divisor of {of_key} ({of})")
    return n


@dataclass(frozen=True)
class Names:
    """The graph's layer names, after the checkpoint's modules; `block` holds "{i}"."""

    tokens: str = "embed_tokens"
    positions: str = "wpe"
    embeddings: str = "embed"                  # the sum of token and position embeddings
    embeddings_dropout: str = "drop"
    block: str = "layers.{i}"
    norm_1: str = "input_layernorm"
    attention: str = "self_attn"
    attention_dropout: str = "self_attn.dropout"
    add_1: str = "add_1"
    norm_2: str = "post_attention_layernorm"
    up: str = "mlp"                            # GLU, or the MLP's first Dense
    act: str = "mlp.act"                       # the MLP's activation
    down: str = "mlp.down_proj"
    mlp_dropout: str = "mlp.dropout"
    add_2: str = "add_2"
    final_norm: str = "norm"
    lm_head: str = "lm_head"
    classifier: str = "score"


@dataclass(frozen=True)
class Decoder:
    """A decoder-only transformer family (GPT-2, Llama, Mistral, Qwen2, …).

    Every field but `architectures`, `keys`, `heads`, `block_table`, `names` and the text
    choices (`norm`, `placement`, `ffn`, `layout`) is a value or a callable of the `Config`
    (`scale`: of the config and the block's index). `heads` maps each model class to what
    follows the final norm: "lm" (the output projection, `logits`), "classifier" (the last
    token's scores, `logits`), "hidden" (the base model's `last_hidden_state`).
    `block_table(cfg)` is a block's rows of the weight table, its tensor names after the
    block's prefix ("layers.0."); the embeddings', final norm's and heads' rows follow the
    layer names. `prefix` is where the base model's tensors sit in a head model's file
    ("model."); `cross_prefix` lets a base model's file load into a head model (and back)."""

    architectures: tuple[str, ...]
    keys: Keys
    heads: Mapping[str, str]
    block_table: Callable[[Config], list[Weight]]
    blocks: Any
    width: Any
    num_heads: Any
    vocab: Any
    inner: Any
    head_dim: Any = None                   # None: width // num_heads, output channels implied
    num_kv_heads: Any = None
    norm: str = "rms"                      # "rms" or "layer"
    eps: Any = 1e-6
    placement: str = "pre"                 # norm before each sublayer, or after its residual
    layout: str = "sequential"             # "parallel": attention and MLP read the same input
    causal: bool = True
    rotary: Any = False
    window: Any = None
    attention_bias: Any = False
    scale: Any = "auto"
    attention_dropout: Any = 0.0
    ffn: str = "glu"                       # "glu" (gated) or "mlp" (Dense → act → Dense)
    activation: tuple[str, str] = ("hidden_act", "silu")     # config key, its default
    mlp_bias: Any = False
    residual_dropout: Any = 0.0
    positions: Any = None                  # learned positions: their number, or None
    embedding_dropout: Any = 0.0
    tied: Any = False
    prefix: str = ""
    cross_prefix: bool = False
    ignored_tensors: tuple[str, ...] = ()
    names: Names = field(default_factory=Names)
    sayable: Any = None                    # saving.Sayable: what config.json can say of edits

    def __post_init__(self):
        for name, allowed in (("norm", ("rms", "layer")), ("placement", ("pre", "post")),
                              ("layout", ("sequential", "parallel")), ("ffn", ("glu", "mlp"))):
            if getattr(self, name) not in allowed:
                raise ArgumentError(f"Decoder {name}: expected one of {', '.join(allowed)}, "
                                    f"received {getattr(self, name)!r}.")
        for arch, head in self.heads.items():
            if head not in HEADS:
                raise ArgumentError(f"Decoder heads[{arch!r}]: expected one of "
                                    f"{', '.join(HEADS)}, received {head!r}.")

    # the loader's names for the description's parts
    @property
    def ARCHITECTURES(self) -> tuple[str, ...]:
        return self.architectures

    @property
    def KEYS(self) -> Keys:
        return self.keys

    @property
    def IGNORED_TENSORS(self) -> tuple[str, ...]:
        return self.ignored_tensors

    @property
    def PREFIX(self) -> str:
        return self.prefix if self.cross_prefix else ""

    # -- the weight table ---------------------------------------------------------------------
    def weights(self, cfg: Config, architecture: str) -> list[Weight]:
        n, head = self.names, self.heads[architecture]
        p = "" if head == "hidden" else self.prefix
        table = [W(f"{p}{n.tokens}.weight", f"{n.tokens}/weight")]
        if value(self.positions, cfg) is not None:
            table.append(W(f"{p}{n.positions}.weight", f"{n.positions}/weight"))
        rows = self.block_table(cfg)
        for i in range(value(self.blocks, cfg)):
            block = n.block.format(i=i)
            table += under(rows, f"{p}{block}.", f"{block}.")
        table += self._norm_rows(p, n.final_norm)
        if head == "lm":
            tied = value(self.tied, cfg)
            table.append(W(f"{n.lm_head}.weight", f"{n.lm_head}/weight",
                           tied=f"{n.tokens}/weight" if tied else False))
        elif head == "classifier":
            table.append(W(f"{n.classifier}.weight", f"{n.classifier}/weight"))
        return table

    def _norm_rows(self, p: str, name: str) -> list[Weight]:
        rows = [W(f"{p}{name}.weight", f"{name}/weight")]
        return rows + [W(f"{p}{name}.bias", f"{name}/bias")] if self.norm == "layer" else rows

    # -- the graph ----------------------------------------------------------------------------
    def network(self, cfg: Config, architecture: str) -> Network:
        return _Build(self, cfg).network(architecture)


class _Build:
    """One description built for one config: its values read once, then the graph."""

    def __init__(self, d: Decoder, cfg: Config):
        self.d, self.cfg, self.n = d, cfg, d.names
        self.width, self.heads = value(d.width, cfg), value(d.num_heads, cfg)
        self.vocab, self.eps = value(d.vocab, cfg), value(d.eps, cfg)
        self.inner = value(d.inner, cfg)
        self.resid = value(d.residual_dropout, cfg)
        self.attn_drop = value(d.attention_dropout, cfg)
        head_dim = value(d.head_dim, cfg)
        self.key_channels = self.width if head_dim is None else self.heads * head_dim
        self.output_channels = None if head_dim is None else self.width
        self.kv_heads = value(d.num_kv_heads, cfg)
        self.attention_bias, self.mlp_bias = value(d.attention_bias, cfg), value(d.mlp_bias, cfg)
        self.rotary, self.window = value(d.rotary, cfg), value(d.window, cfg)
        key, default = d.activation
        self.act = cfg.choice(key, GLU_ACTIVATIONS if d.ffn == "glu" else ACTIVATIONS, default)
        self.net = Network([L.TokenInput(name="input_ids"),
                            L.Embedding(self.vocab, self.width, name=d.names.tokens)])

    def network(self, architecture: str) -> Network:
        x = self.embeddings()
        for i in range(value(self.d.blocks, self.cfg)):
            x = self.block(x, i, self.n.block.format(i=i))
        return self.head(x, self.d.heads[architecture])

    def embeddings(self) -> str:
        n, net = self.n, self.net
        x = n.tokens
        positions = value(self.d.positions, self.cfg)
        if positions is not None:
            net.add(L.PositionEmbedding(positions, name=n.positions))
            net.connect(n.tokens, n.positions)
            x = residual(net, n.tokens, n.positions, n.embeddings)
        return dropout(net, x, value(self.d.embedding_dropout, self.cfg), n.embeddings_dropout)

    def norm(self, name: str) -> L.Layer:
        return L.RMSNorm(self.eps, name=name) if self.d.norm == "rms" else \
            L.LayerNorm(self.eps, name=name)

    def block(self, x: str, i: int, h: str) -> str:
        n, net, pre = self.n, self.net, self.d.placement == "pre"
        attn = self.sublayer(x, [self.attention(i, f"{h}.{n.attention}")], f"{h}.{n.norm_1}",
                             f"{h}.{n.attention_dropout}", pre)
        if self.d.layout == "parallel":       # both sublayers read the block's input
            mlp = self.sublayer(x, self.mlp(h), f"{h}.{n.norm_2}", f"{h}.{n.mlp_dropout}", pre)
            return residual(net, residual(net, x, attn, f"{h}.{n.add_1}"), mlp, f"{h}.{n.add_2}")
        x = self.after(residual(net, x, attn, f"{h}.{n.add_1}"), f"{h}.{n.norm_1}", pre)
        mlp = self.sublayer(x, self.mlp(h), f"{h}.{n.norm_2}", f"{h}.{n.mlp_dropout}", pre)
        return self.after(residual(net, x, mlp, f"{h}.{n.add_2}"), f"{h}.{n.norm_2}", pre)

    def sublayer(self, x: str, layers: list, norm: str, drop: str, pre: bool) -> str:
        """norm (pre-norm) → `layers` → dropout, from `x`: returns the branch's end."""
        chain = ([self.norm(norm)] if pre else []) + layers
        self.net.add(chain)
        self.net.connect(x, chain[0].name)
        return dropout(self.net, chain[-1].name, self.resid, drop)

    def after(self, x: str, norm: str, pre: bool) -> str:
        """The norm after a residual (post-norm); nothing with pre-norm."""
        if pre:
            return x
        self.net.add(self.norm(norm))
        self.net.connect(x, norm)
        return norm

    def attention(self, i: int, name: str) -> L.SelfAttention:
        return L.SelfAttention(
            self.heads, self.key_channels, output_channels=self.output_channels,
            attention_mask="causal" if self.d.causal else None, dropout=self.attn_drop,
            scale=value(self.d.scale, self.cfg, i), num_kv_heads=self.kv_heads,
            rotary=self.rotary, window=self.window, projection_bias=self.attention_bias,
            name=name)

    def mlp(self, h: str) -> list:
        n = self.n
        if self.d.ffn == "glu":
            return [L.GLU(self.inner, activation=self.act, bias=self.mlp_bias, name=f"{h}.{n.up}"),
                    L.Dense(self.width, bias=self.mlp_bias, name=f"{h}.{n.down}")]
        return [L.Dense(self.inner, bias=self.mlp_bias, name=f"{h}.{n.up}"),
                self.act(f"{h}.{n.act}"),
                L.Dense(self.width, bias=self.mlp_bias, name=f"{h}.{n.down}")]

    def head(self, x: str, head: str) -> Network:
        n, net = self.n, self.net
        net.add(self.norm(n.final_norm))
        net.connect(x, n.final_norm)
        if head == "lm":
            tied = n.tokens if value(self.d.tied, self.cfg) else None
            last: list = [L.Dense(self.vocab, bias=False, tied_to=tied, name=n.lm_head),
                          output("logits")]
        elif head == "classifier":
            last = [L.Index1d("last", name="last_token"),
                    L.Dense(self.cfg.num_labels(), bias=False, name=n.classifier),
                    output("logits")]
        else:
            last = [output("last_hidden_state")]
        net.add(last)
        net.connect(n.final_norm, last[0].name)
        return net
