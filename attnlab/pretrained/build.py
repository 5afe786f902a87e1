"""The one builder: a family's description (`builder.Family`) turned into a graph, for one
config. Every family of `attnlab.pretrained` is built here — its embeddings, one stack of
blocks (two for an encoder–decoder: the decoder's blocks attend to the encoder's output too),
the final norm and the head of the model class — so that a block, a residual connection or a
head is written once. `Family.network` calls it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import layers as L
from ..combinators import add_residual
from ..graph.names import format_port
from ..network import Network
from .common import ACTIVATIONS, GLU_ACTIVATIONS, check_choice, dropout, output, value
from .config import Config


@dataclass
class _Sublayer:
    """One sublayer of a block: its layers (the first fed from the block's stream), the
    other inputs they read (port → source), and the names of its norm, dropout and residual
    addition (after the block's prefix); `p`: its dropout, None for the residual dropout."""

    layers: list
    feeds: dict[str, str] = field(default_factory=dict)
    norm: str = ""
    dropout: str = ""
    add: str = ""
    p: float | None = None


class Build:
    """One description built for one config: its values read once, then the graph."""

    def __init__(self, d: Any, cfg: Config):
        self.d, self.cfg, self.n = d, cfg, d.names
        self.width, self.heads = value(d.width, cfg), value(d.num_heads, cfg)
        self.vocab, self.eps = value(d.vocab, cfg), value(d.eps, cfg)
        self.inner = value(d.inner, cfg)
        self.resid = value(d.residual_dropout, cfg)
        self.attn_resid = value(d.attention_output_dropout, cfg)
        self.attn_drop = value(d.attention_dropout, cfg)
        self.inner_drop = value(d.inner_dropout, cfg)
        head_dim = value(d.head_dim, cfg)
        self.key_channels = self.width if head_dim is None else self.heads * head_dim
        self.output_channels = None if head_dim is None else self.width
        self.kv_heads = value(d.num_kv_heads, cfg)
        self.attention_bias, self.mlp_bias = value(d.attention_bias, cfg), value(d.mlp_bias, cfg)
        self.rotary, self.window = value(d.rotary, cfg), value(d.window, cfg)
        # a decoder's positions follow its attention_mask, as transformers' position ids for
        # generation (a left-padded prompt starts at 0); an encoder's are the steps' indices
        self.positions = "mask" if d.causal else "index"
        if self.rotary:
            self.rotary = {**(self.rotary if isinstance(self.rotary, dict) else {}),
                           "positions": self.positions}
        self.output_bias = value(d.output_bias, cfg)
        self.qk_norm, self.softcap = value(d.qk_norm, cfg), value(d.softcap, cfg)
        self.position_bias = value(d.position_bias, cfg)
        self.placement = check_choice("placement", value(d.placement, cfg))
        self.layout = check_choice("layout", value(d.layout, cfg))
        self.ffn = check_choice("ffn", value(d.ffn, cfg))
        if callable(d.activation):        # a family's own reading (Gemma's "gelu" is tanh's)
            self.act = d.activation(cfg)
        else:
            key, default = d.activation
            self.act = cfg.choice(key, ACTIVATIONS if self.ffn == "mlp" else GLU_ACTIVATIONS,
                                  default)
        self.embedding_width = self.width if not d._projected(cfg) else \
            value(d.embedding_width, cfg)
        self.net, self.start = self.inputs()

    def inputs(self) -> tuple[Network, str]:
        """The network with its input and first embedding; the layer the sequence starts at."""
        n, patches = self.n, value(self.d.patches, self.cfg)
        if patches is None:
            return Network([L.TokenInput(name="input_ids"),
                            L.Embedding(self.vocab, self.embedding_width, name=n.tokens)]), n.tokens
        channels, size, patch = patches
        return Network([L.ImageInput((channels, *size), name="pixel_values"),
                        L.PatchEmbedding(patch, self.width, flatten_mode="row-major",
                                         name=n.patches),
                        L.EmbeddingConcatenation(name=n.class_token)]), n.class_token

    def network(self, architecture: str) -> Network:
        decoder = self.d.decoder
        if decoder is not None:       # its tokens embedded by the encoder's embedding, tied
            self.net.add([L.TokenInput(name=decoder.input),
                          L.Embedding(self.vocab, self.width, tied_to=self.n.tokens,
                                      name=decoder.names.tokens)])
        x = self.stack(self.embeddings(), self.n, value(self.d.blocks, self.cfg), self.d.causal)
        if decoder is not None:
            n = decoder.names
            start = dropout(self.net, n.tokens, value(self.d.embedding_dropout, self.cfg),
                            n.embeddings_dropout)
            x = self.stack(start, n, value(decoder.blocks, self.cfg), True, x)
        return self.head(x, self.d.heads[architecture])

    def embeddings(self) -> str:
        n, net = self.n, self.net
        parts = [self.start]
        scale = value(self.d.embedding_scale, self.cfg)
        if scale is not None:                    # Gemma: times √width, in the model's dtype
            parts = [self.chain(self.start, [L.Scaling(scale, name=n.embedding_scale)])]
        if self.embedding_width != self.width:           # OPT: tokens projected to the width
            parts = [self.chain(self.start, [L.Dense(self.width, bias=False, name=n.project_in)])]
        types = value(self.d.token_types, self.cfg)
        if types is not None:
            net.add([L.TokenInput(name="token_type_ids"),
                     L.Embedding(types, self.width, name=n.token_types)])
            parts.append(n.token_types)
        token_positions = value(self.d.token_positions, self.cfg)
        if token_positions is not None:          # RoBERTa: positions counted from the ids
            rows, padding = token_positions
            net.add(L.TokenPositionEmbedding(rows, self.width, padding, name=n.positions))
            net.connect("input_ids", n.positions)
            parts.append(n.positions)
        positions = value(self.d.positions, self.cfg)
        if positions is not None:
            offset = value(self.d.position_offset, self.cfg)
            channels = None if self.width == self.embedding_width else self.width
            net.add(L.PositionEmbedding(positions + offset, channels, offset=offset,
                                        positions=self.positions, name=n.positions))
            net.connect(self.start, n.positions)
            parts.append(n.positions)
        x = self.total(parts)
        if self.d.embedding_norm:
            x = self.chain(x, [self.norm(n.embeddings_norm)])
        return dropout(net, x, value(self.d.embedding_dropout, self.cfg), n.embeddings_dropout)

    def total(self, parts: list[str]) -> str:
        """The sum of the embeddings `parts` (an n-ary Addition: no residual)."""
        if len(parts) == 1:
            return parts[0]
        self.net.add(L.Addition(len(parts), name=self.n.embeddings))
        for port, part in enumerate(parts):
            self.net.connect(part, format_port(self.n.embeddings, f"in{port + 1}"))
        return self.n.embeddings

    def norm(self, name: str) -> L.Layer:
        if self.d.norm_offset:                   # Gemma's RMSNorm: x̂ · (1 + weight)
            return L.RMSNorm(self.eps, unit_offset=True, name=name)
        return L.RMSNorm(self.eps, name=name) if self.d.norm == "rms" else \
            L.LayerNorm(self.eps, name=name)

    def post(self, name: str) -> list:
        """The norm after a sublayer, before its residual, with sandwich norms (Gemma 2)."""
        return [self.norm(name)] if self.d.sandwich else []

    def stack(self, x: str, n: Any, blocks: int, causal: bool, memory: str | None = None) -> str:
        """`blocks` blocks from `x` (attending to `memory` too, in a decoder), the stack's
        position bias before them and its final norm and dropout after them."""
        bias = self.relative_bias(x, n, causal)
        for i in range(blocks):
            x = self.block(x, i, n, causal, bias, memory)
        if value(self.d.final_norm, self.cfg):
            x = self.chain(x, [self.norm(n.final_norm)])
        return dropout(self.net, x, value(self.d.final_dropout, self.cfg), n.final_dropout)

    def relative_bias(self, x: str, n: Any, causal: bool) -> str | None:
        """The stack's learned relative position bias, of `x`'s steps, or None."""
        if self.position_bias is None:
            return None
        buckets, distance = self.position_bias
        self.net.add(L.RelativePositionBias(self.heads, buckets, distance,
                                            bidirectional=not causal, name=n.position_bias))
        for port in ("query", "key"):
            self.net.connect(x, format_port(n.position_bias, port))
        return n.position_bias

    def block(self, x: str, i: int, n: Any, causal: bool, bias: str | None,
              memory: str | None) -> str:
        """One block from `x`: its sublayers, each (norm →) layers → dropout, added to the
        residual stream (post-norm: then normed); in parallel, all read `x`."""
        h = n.block.format(i=i)
        att = f"{h}.{n.attention}"
        subs = [_Sublayer([self.attention(i, att, causal, bias is not None)] +
                          self.post(f"{h}.{n.post_attention_norm}"),
                          {format_port(att, "bias"): bias} if bias is not None else {},
                          n.norm_1, n.attention_dropout, n.add_1, self.attn_resid)]
        if memory is not None:                # the encoder's output: keys and values
            cross = f"{h}.{n.cross_attention}"
            subs.append(_Sublayer([self.cross_attention(i, cross)],
                                  {format_port(cross, p): memory for p in ("key", "value")},
                                  n.cross_norm, n.cross_dropout, n.cross_add, self.attn_resid))
        subs.append(_Sublayer(self.mlp(h, n) + self.post(f"{h}.{n.post_mlp_norm}"), {},
                              n.norm_2, n.mlp_dropout, n.add_2))
        pre = self.placement == "pre"
        if self.layout == "parallel":         # every sublayer reads the block's input
            branches = [self.sublayer(x, sub, h, pre) for sub in subs]
            for branch, sub in zip(branches, subs):
                x = add_residual(self.net, x, branch, f"{h}.{sub.add}")
            return x
        for sub in subs:
            x = add_residual(self.net, x, self.sublayer(x, sub, h, pre), f"{h}.{sub.add}")
            x = x if pre else self.chain(x, [self.norm(f"{h}.{sub.norm}")])
        return x

    def sublayer(self, x: str, sub: _Sublayer, h: str, pre: bool) -> str:
        """norm (pre-norm) → the sublayer's layers → dropout, from `x` (into the first layer's
        first input), its other inputs connected too: returns the branch's end."""
        chain = ([self.norm(f"{h}.{sub.norm}")] if pre else []) + sub.layers
        self.chain(x, chain)
        for port, source in sub.feeds.items():
            self.net.connect(source, port)
        p = self.resid if sub.p is None else sub.p
        return dropout(self.net, chain[-1].name, p, f"{h}.{sub.dropout}")

    def attention(self, i: int, name: str, causal: bool, bias_input: bool) -> L.SelfAttention:
        window = self.window if self.d.block_window is None else self.d.block_window(self.cfg, i)
        return L.SelfAttention(
            self.heads, self.key_channels, output_channels=self.output_channels,
            attention_mask="causal" if causal else None, dropout=self.attn_drop,
            scale=value(self.d.scale, self.cfg, i), num_kv_heads=self.kv_heads,
            rotary=self.rotary, projection_bias=self.attention_bias, window=window,
            has_bias_input=bias_input, output_bias=self.output_bias, qk_norm=self.qk_norm,
            softcap=self.softcap, name=name)

    def cross_attention(self, i: int, name: str) -> L.MultiHeadAttention:
        """A decoder block's attention from its steps to the encoder's output."""
        return L.MultiHeadAttention(
            self.heads, self.key_channels, output_channels=self.output_channels,
            scale=value(self.d.scale, self.cfg, i), dropout=self.attn_drop,
            num_kv_heads=self.kv_heads, projection_bias=self.attention_bias,
            output_bias=self.output_bias, name=name)

    def mlp(self, h: str, n: Any) -> list:
        """The feed-forward: GLU, or Dense → activation; (dropout →) the down projection; or
        a mixture of SwiGLU experts (Mixtral), which has no down Dense of its own."""
        if self.ffn == "moe":
            return [L.MixtureOfExperts(value(self.d.experts, self.cfg), self.inner,
                                       value(self.d.experts_per_token, self.cfg),
                                       activation=self.act, name=f"{h}.{n.up}")]
        layers: list
        if self.ffn == "glu":
            layers = [L.GLU(self.inner, activation=self.act, bias=self.mlp_bias, name=f"{h}.{n.up}")]
        else:
            layers = [L.Dense(self.inner, bias=self.mlp_bias, name=f"{h}.{n.up}"),
                      self.act(f"{h}.{n.act}")]
        if self.inner_drop:
            layers.append(L.Dropout(self.inner_drop, name=f"{h}.{n.inner_dropout}"))
        return layers + [L.Dense(self.width, bias=self.mlp_bias, name=f"{h}.{n.down}")]

    def head(self, x: str, head: str) -> Network:
        n, net = self.n, self.net
        if self.embedding_width != self.width:           # OPT: back to the embeddings' width
            self.chain(x, [L.Dense(self.embedding_width, bias=False, name=n.project_out)])
            x = n.project_out
        pooled = f"{n.pooler}.activation"
        if head in ("pooled", "pooled-classifier"):
            self.chain(x, [L.Index1d("first", name=f"{n.pooler}.first"),
                           L.Dense(value(self.d.pooler_width, self.cfg) or self.width,
                                   name=f"{n.pooler}.dense"), self.pooler_activation(pooled)])
        tied = n.tokens if value(self.d.tied, self.cfg) else None
        if head == "lm":
            scale = value(self.d.head_scale, self.cfg)       # T5: d_model**-0.5 first
            self.chain(x, ([L.Scaling(scale, name=n.head_scale)] if scale is not None else []) +
                       [L.Dense(self.vocab, bias=False, tied_to=tied, name=n.lm_head)] +
                       self.capped() + [output("logits")])
        elif head == "classifier":
            self.chain(x, [L.Index1d("last", name="last_token"), self.classifier(),
                           output("logits")])
        elif head == "masked-lm":
            dense, act, norm, decoder, _ = n.masked_lm_names()
            activation = self.act if self.d.masked_lm_activation is None else \
                ACTIVATIONS[self.d.masked_lm_activation]
            self.chain(x, [L.Dense(self.width, name=dense), activation(act), self.norm(norm),
                           L.Dense(self.vocab, tied_to=tied, name=decoder), output("logits")])
        elif head == "first-classifier":
            self.chain(x, [L.Index1d("first", name="cls"), self.classifier(), output("logits")])
        elif head in ("pooled-classifier", "token-classifier"):
            src = pooled if head == "pooled-classifier" else x
            p = value(self.d.classifier_dropout, self.cfg)
            if head == "token-classifier" and self.d.token_classifier_dropout is not None:
                p = value(self.d.token_classifier_dropout, self.cfg)
            self.chain(dropout(net, src, p, n.head_dropout), [self.classifier(), output("logits")])
        elif head in ("first-mlp-classifier", "span", "last-token-classifier"):
            self.fine_tuning_head(x, head)
        else:
            self.chain(x, [output("last_hidden_state")])
            if head == "pooled":
                self.chain(pooled, [output("pooler_output")])
        return net

    def fine_tuning_head(self, x: str, head: str) -> None:
        """The heads of RoBERTa's and DistilBERT's classifiers, of question answering, and of
        a decoder's sequence classifier, after the blocks' output `x`."""
        n, net, cfg = self.n, self.net, self.cfg
        if head == "last-token-classifier":
            pad = cfg.get("pad_token_id", None)
            pad = None if pad is None else cfg.int("pad_token_id", least=0)
            net.add([L.LastToken(pad, name="last_token"), self.classifier(), output("logits")])
            net.connect(x, "last_token/in").connect("input_ids", "last_token/ids")
        elif head == "first-mlp-classifier":
            net.add(L.Index1d("first", name="first_token"))
            net.connect(x, "first_token")
            src = dropout(net, "first_token", value(self.d.pre_classifier_dropout, cfg),
                          "first_token_dropout")
            act = ACTIVATIONS[self.d.pre_classifier_activation](n.pre_classifier_act)
            self.chain(src, [L.Dense(self.width, name=n.pre_classifier), act])
            src = dropout(net, act.name, value(self.d.classifier_dropout, cfg), n.head_dropout)
            self.chain(src, [L.Dense(cfg.num_labels(), name=n.mlp_classifier), output("logits")])
        else:                                    # "span": start and end scores per token
            labels = cfg.num_labels()
            if labels != 2:
                key = "id2label" if cfg.data.get("id2label") else "num_labels"
                raise cfg.bad(key, cfg.data.get(key), "2 labels for a question-answering "
                              "model (the scores of the answer's start and end)")
            src = dropout(net, x, value(self.d.qa_dropout, cfg), n.head_dropout)
            self.chain(src, [L.Dense(2, name=n.qa)])
            for i, name in enumerate(("start_logits", "end_logits")):
                self.chain(n.qa, [L.SelectChannel(i, name=name)])

    def capped(self) -> list:
        """Gemma 2's final soft cap: logits → c · tanh(logits / c); nothing without one."""
        c = value(self.d.final_softcap, self.cfg)
        if c is None:
            return []
        n = self.n.final_softcap
        return [L.Scaling(1.0 / c, name=f"{n}.in"), L.Tanh(name=f"{n}.tanh"),
                L.Scaling(c, name=f"{n}.out")]

    def pooler_activation(self, name: str) -> L.Layer:
        if self.d.pooler_activation is None:
            return L.Tanh(name=name)
        key, default = self.d.pooler_activation
        return self.cfg.choice(key, ACTIVATIONS, default)(name)

    def classifier(self) -> L.Dense:
        return L.Dense(self.cfg.num_labels(), bias=self.d.classifier_bias, name=self.n.classifier)

    def chain(self, x: str, layers: list) -> str:
        """`layers` in order, the first fed from `x` (into its first input); returns the last
        one's name."""
        self.net.add(layers)
        first = layers[0]
        self.net.connect(x, format_port(first.name, first.input_ports[0], first.input_ports))
        return layers[-1].name
