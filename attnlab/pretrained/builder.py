"""A transformer family as a description, and the one builder that turns a
description into a graph and a weight table.

A family states what its config maps to — sizes, the norm, the attention's options, the
feed-forward kind, the embeddings, the heads of its model classes, the layer names — in a
`Family`; each field is a value, or a callable that gets the `Config` and returns the value
(`width=lambda c: c.int("n_embd")`), so that reading a key, its default and its checks stay
with the family while the graph is written once, here. `Family.network` and
`Family.weights` are what the loader and `save_pretrained` call.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from .. import layers as L
from attnlab.core.errors import ArgumentError
from ..network import Network
from .common import ACTIVATIONS, dropout, output, residual, under
from .config import Config, Keys
from .weights import W, Weight

# transformers' hidden_act → GLU's activation
GLU_ACTIVATIONS = {"silu": "silu", "swish": "silu", "gelu": "gelu",
                   "gelu_pytorch_tanh": "gelu-tanh", "gelu_new": "gelu-tanh"}

# what a model class puts after the blocks (and the final norm)
HEADS = ("lm", "classifier", "hidden", "pooled", "masked-lm", "pooled-classifier",
         "token-classifier", "first-classifier", "first-mlp-classifier", "span",
         "last-token-classifier")
BASE = ("hidden", "pooled")                # a base model: its tensors without `prefix`


# the text choices of a description, and those that may be callables of the config
TEXT_CHOICES = {"norm": ("rms", "layer"), "placement": ("pre", "post"),
                "layout": ("sequential", "parallel"), "ffn": ("glu", "mlp", "moe")}
CALLABLE_CHOICES = ("placement", "layout")


def _check_choice(name: str, choice: Any) -> Any:
    allowed = TEXT_CHOICES[name]
    if choice not in allowed:
        raise ArgumentError(f"Family {name}: expected one of {', '.join(allowed)}, "
                            f"received {choice!r}.")
    return choice


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
    token_types: str = "token_type_embeddings"
    patches: str = "embeddings.patch_embeddings"
    class_token: str = "embeddings.cls_token"
    embeddings: str = "embed"                  # the sum of token and position embeddings
    embeddings_norm: str = "embeddings.LayerNorm"
    embeddings_dropout: str = "drop"
    block: str = "layers.{i}"
    norm_1: str = "input_layernorm"
    attention: str = "self_attn"
    attention_dropout: str = "self_attn_dropout"      # not under the attention's module path
    add_1: str = "add_1"
    norm_2: str = "post_attention_layernorm"
    up: str = "mlp.gate_up_proj"               # GLU (gate and up), or the MLP's first Dense
    act: str = "mlp.act"                       # the MLP's activation
    down: str = "mlp.down_proj"
    mlp_dropout: str = "mlp.dropout"
    add_2: str = "add_2"
    final_norm: str = "norm"
    embedding_scale: str = "embed_scale"       # Gemma's √width on the token embeddings
    post_attention_norm: str = "post_attention_layernorm"     # sandwich norms (Gemma 2)
    post_mlp_norm: str = "post_feedforward_layernorm"
    final_softcap: str = "final_logit_softcapping"
    project_in: str = "project_in"             # embeddings narrower than the blocks (OPT)
    project_out: str = "project_out"
    lm_head: str = "lm_head"
    classifier: str = "score"
    head_dropout: str = "dropout"
    pre_classifier: str = "pre_classifier"     # "first-mlp-classifier": its hidden Dense,
    pre_classifier_act: str = "pre_classifier_act"     # its activation
    mlp_classifier: str = "classifier"         # and its scores
    qa: str = "qa_outputs"                     # "span": the start and end scores
    pooler: str = "pooler"
    masked_lm: str = "cls.predictions"
    # the masked-LM head's (transform Dense, its activation, its norm, decoder, the decoder
    # bias's second name in the file or None); None: BERT's, under `masked_lm`
    masked_lm_parts: tuple[str, str, str, str, str | None] | None = None


def masked_lm_names(n: Names) -> tuple[str, str, str, str, str | None]:
    """The masked-LM head's layer names (transform Dense, activation, norm, decoder) and the
    decoder bias's second tensor name (None: the file has the decoder's own only)."""
    if n.masked_lm_parts is not None:
        return n.masked_lm_parts
    t = f"{n.masked_lm}.transform"
    return (f"{t}.dense", f"{t}.act", f"{t}.LayerNorm", f"{n.masked_lm}.decoder",
            f"{n.masked_lm}.bias")


@dataclass(frozen=True)
class Family:
    """A transformer family (GPT-2, Llama, Mistral, Qwen2, BERT, ViT, …): one stack of
    blocks between its embeddings and the heads of its model classes.

    Every field but `architectures`, `keys`, `heads`, `block_table`, `names` and the text
    choices `norm` and `ffn` is a value or a callable of the `Config` (`scale`: of the config
    and the block's index); `placement` and `layout` are text or a callable that returns the
    text (OPT's `do_layer_norm_before`, GPT-NeoX's `use_parallel_residual`). `heads` maps
    each model class to what follows the blocks and the final norm: "lm" (the output projection, `logits`), "classifier"
    (the last token's scores, `logits`), "hidden" (the base model's `last_hidden_state`),
    "pooled" (that and BERT's `pooler_output`: the first token → Dense → Tanh), "masked-lm"
    (BERT's transform and decoder), "pooled-classifier" (the pooler's scores),
    "token-classifier" (each token's scores), "first-classifier" (the first token's scores),
    "first-mlp-classifier" (the first token → Dense → activation → the scores: RoBERTa's and
    DistilBERT's sequence classifiers), "span" (a question-answering head: two scores per
    token, `start_logits` and `end_logits`), "last-token-classifier" (the scores of each
    sequence's last token that is not the config's `pad_token_id`, as transformers picks it).
    `token_positions`: (rows, padding id), positions counted from the ids as RoBERTa's
    (`TokenPositionEmbedding`), in place of `positions`.
    `patches`: the model reads images (ViT): (channels, (H, W), (patch H, patch W)), embedded
    patch by patch after a class token; `embedding_table(cfg)` then gives the embeddings' rows.
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
    inner: Any
    vocab: Any = None
    head_dim: Any = None                   # None: width // num_heads, output channels implied
    num_kv_heads: Any = None
    norm: str = "rms"                      # "rms" or "layer"
    eps: Any = 1e-6
    placement: Any = "pre"                 # norm before each sublayer, or after its residual
    layout: Any = "sequential"             # "parallel": attention and MLP read the same input
    causal: bool = True
    rotary: Any = False
    window: Any = None
    block_window: Any = None               # a callable of (config, block index): its window
    attention_bias: Any = False
    output_bias: Any = None                # the output projection's bias; None: attention_bias
    qk_norm: Any = None                    # QK-norm's eps (Qwen3), or None
    softcap: Any = None                    # the attention scores' soft cap (Gemma 2), or None
    norm_offset: bool = False              # RMSNorm scales by 1 + weight (Gemma)
    embedding_scale: Any = None            # token embeddings times this (Gemma: √width), or None
    sandwich: bool = False                 # a norm after each sublayer too (Gemma 2)
    final_softcap: Any = None              # logits → c · tanh(logits / c) (Gemma 2), or None
    scale: Any = "auto"
    attention_dropout: Any = 0.0
    ffn: str = "glu"                       # "glu" (gated), "mlp" (Dense → act → Dense), "moe"
    experts: Any = None                    # "moe": the number of experts (SwiGLU each)
    experts_per_token: Any = None          # "moe": the experts each token is routed to
    activation: Any = ("hidden_act", "silu")     # config key, its default; or a callable
    mlp_bias: Any = False
    residual_dropout: Any = 0.0
    positions: Any = None                  # learned positions: their number, or None
    position_offset: Any = 0               # rows of the position table before position 0 (OPT)
    embedding_width: Any = None            # None: the width; else project_in/out around blocks
    token_types: Any = None                # token-type embeddings: their number, or None
    patches: Any = None                    # images: (channels, (H, W), (pH, pW)), or None
    embedding_table: Any = None            # the embeddings' rows, where not the layers' names
    embedding_norm: bool = False           # a norm after the embeddings' sum
    embedding_dropout: Any = 0.0
    final_norm: Any = True                 # a norm after the blocks
    classifier_bias: bool = False
    classifier_dropout: Any = 0.0
    pooler_width: Any = None               # None: the model's width
    pooler_activation: tuple[str, str] | None = None      # (config key, default); None: tanh
    token_positions: Any = None            # (rows, padding id): positions from the ids (RoBERTa)
    attention_output_dropout: Any = None   # after the attention's projection; None: residual_
    token_classifier_dropout: Any = None   # "token-classifier"'s; None: classifier_dropout
    pre_classifier_activation: str = "tanh"   # "first-mlp-classifier": an ACTIVATIONS name
    pre_classifier_dropout: Any = 0.0      # "first-mlp-classifier": before its hidden Dense
    qa_dropout: Any = 0.0                  # "span": before the scores
    masked_lm_activation: str | None = None   # an ACTIVATIONS name; None: the blocks'
    tied: Any = False
    prefix: str = ""
    cross_prefix: bool = False
    ignored_tensors: tuple[str, ...] = ()
    names: Names = field(default_factory=Names)
    sayable: Any = None                    # saving.Sayable (or a callable of the model class)

    def __post_init__(self):
        for name, allowed in TEXT_CHOICES.items():
            if not (callable(getattr(self, name)) and name in CALLABLE_CHOICES):
                _check_choice(name, getattr(self, name))
        for arch, head in self.heads.items():
            if head not in HEADS:
                raise ArgumentError(f"Family heads[{arch!r}]: expected one of "
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
        p = "" if head in BASE else self.prefix
        if self.embedding_table is not None:
            table = under(self.embedding_table(cfg), p, "")
        else:
            table = [W(f"{p}{n.tokens}.weight", f"{n.tokens}/weight")]
        if self.embedding_table is None and value(self.positions, cfg) is not None:
            table.append(W(f"{p}{n.positions}.weight", f"{n.positions}/weight"))
        projected = self._projected(cfg)
        if projected:
            table.append(W(f"{p}{n.project_in}.weight", f"{n.project_in}/weight"))
        if value(self.token_types, cfg) is not None:
            table.append(W(f"{p}{n.token_types}.weight", f"{n.token_types}/weight"))
        if value(self.token_positions, cfg) is not None:
            table.append(W(f"{p}{n.positions}.weight", f"{n.positions}/weight"))
        if self.embedding_norm:
            table += self._norm_rows(p, n.embeddings_norm)
        rows = self.block_table(cfg)
        for i in range(value(self.blocks, cfg)):
            block = n.block.format(i=i)
            table += under(rows, f"{p}{block}.", f"{block}.")
        if value(self.final_norm, cfg):
            table += self._norm_rows(p, n.final_norm)
        if projected:
            table.append(W(f"{p}{n.project_out}.weight", f"{n.project_out}/weight"))
        if head in ("pooled", "pooled-classifier"):
            table += self._dense_rows(p, f"{n.pooler}.dense", True)
        return table + self._head_rows(cfg, head)

    def _head_rows(self, cfg: Config, head: str) -> list[Weight]:
        n = self.names
        tied = f"{n.tokens}/weight" if value(self.tied, cfg) else False
        if head == "lm":
            return [W(f"{n.lm_head}.weight", f"{n.lm_head}/weight", tied=tied)]
        if head in ("classifier", "pooled-classifier", "token-classifier", "first-classifier"):
            return self._dense_rows("", n.classifier, self.classifier_bias)
        if head == "masked-lm":
            dense, _, norm, d, bias = masked_lm_names(n)
            rows = self._dense_rows("", dense, True) + self._norm_rows("", norm) + \
                [W(f"{d}.weight", f"{d}/weight", tied=tied)]
            if bias is None:                         # the decoder's own bias only (DistilBERT)
                return rows + [W(f"{d}.bias", f"{d}/bias")]
            return rows + [W(bias, f"{d}/bias"),      # the same tensor twice in the file
                           W(f"{d}.bias", f"{d}/bias", tied=True)]
        if head == "last-token-classifier":
            return self._dense_rows("", n.classifier, self.classifier_bias)
        if head == "first-mlp-classifier":
            return self._dense_rows("", n.pre_classifier, True) + \
                self._dense_rows("", n.mlp_classifier, True)
        if head == "span":
            return self._dense_rows("", n.qa, True)
        return []

    def _projected(self, cfg: Config) -> bool:
        """Whether the embeddings are narrower (or wider) than the blocks: OPT's
        `word_embed_proj_dim`, projected in after the token embedding and out before the head."""
        width = value(self.embedding_width, cfg)
        return width is not None and width != value(self.width, cfg)

    @staticmethod
    def _dense_rows(p: str, name: str, bias: bool) -> list[Weight]:
        rows = [W(f"{p}{name}.weight", f"{name}/weight")]
        return rows + [W(f"{p}{name}.bias", f"{name}/bias")] if bias else rows

    def _norm_rows(self, p: str, name: str) -> list[Weight]:
        rows = [W(f"{p}{name}.weight", f"{name}/weight")]
        return rows + [W(f"{p}{name}.bias", f"{name}/bias")] if self.norm == "layer" else rows

    # -- the graph ----------------------------------------------------------------------------
    def network(self, cfg: Config, architecture: str) -> Network:
        return _Build(self, cfg).network(architecture)


class _Build:
    """One description built for one config: its values read once, then the graph."""

    def __init__(self, d: Family, cfg: Config):
        self.d, self.cfg, self.n = d, cfg, d.names
        self.width, self.heads = value(d.width, cfg), value(d.num_heads, cfg)
        self.vocab, self.eps = value(d.vocab, cfg), value(d.eps, cfg)
        self.inner = value(d.inner, cfg)
        self.resid = value(d.residual_dropout, cfg)
        self.attn_resid = value(d.attention_output_dropout, cfg)
        self.attn_drop = value(d.attention_dropout, cfg)
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
        self.placement = _check_choice("placement", value(d.placement, cfg))
        self.layout = _check_choice("layout", value(d.layout, cfg))
        if callable(d.activation):        # a family's own reading (Gemma's "gelu" is tanh's)
            self.act = d.activation(cfg)
        else:
            key, default = d.activation
            self.act = cfg.choice(key, ACTIVATIONS if d.ffn == "mlp" else GLU_ACTIVATIONS,
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
        x = self.embeddings()
        for i in range(value(self.d.blocks, self.cfg)):
            x = self.block(x, i, self.n.block.format(i=i))
        return self.head(x, self.d.heads[architecture])

    def embeddings(self) -> str:
        n, net = self.n, self.net
        parts = [self.start]
        scale = value(self.d.embedding_scale, self.cfg)
        if scale is not None:                    # Gemma: times √width, in the model's dtype
            self.chain(self.start, [L.Scaling(scale, name=n.embedding_scale)])
            parts = [n.embedding_scale]
        if self.embedding_width != self.width:           # OPT: tokens projected to the width
            self.chain(self.start, [L.Dense(self.width, bias=False, name=n.project_in)])
            parts = [n.project_in]
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
            net.add(self.norm(n.embeddings_norm))
            net.connect(x, n.embeddings_norm)
            x = n.embeddings_norm
        return dropout(net, x, value(self.d.embedding_dropout, self.cfg), n.embeddings_dropout)

    def total(self, parts: list[str]) -> str:
        """The sum of the embeddings `parts`."""
        if len(parts) == 1:
            return parts[0]
        if len(parts) == 2:
            return residual(self.net, parts[0], parts[1], self.n.embeddings)
        self.net.add(L.Addition(len(parts), name=self.n.embeddings))
        for port, part in enumerate(parts):
            self.net.connect(part, f"{self.n.embeddings}/in{port + 1}")
        return self.n.embeddings

    def norm(self, name: str) -> L.Layer:
        if self.d.norm_offset:                   # Gemma's RMSNorm: x̂ · (1 + weight)
            return L.RMSNorm(self.eps, unit_offset=True, name=name)
        return L.RMSNorm(self.eps, name=name) if self.d.norm == "rms" else \
            L.LayerNorm(self.eps, name=name)

    def post(self, name: str) -> list:
        """The norm after a sublayer, before its residual, with sandwich norms (Gemma 2)."""
        return [self.norm(name)] if self.d.sandwich else []

    def block(self, x: str, i: int, h: str) -> str:
        n, net, pre = self.n, self.net, self.placement == "pre"
        attn = self.sublayer(x, [self.attention(i, f"{h}.{n.attention}")] +
                             self.post(f"{h}.{n.post_attention_norm}"), f"{h}.{n.norm_1}",
                             f"{h}.{n.attention_dropout}", pre, self.attn_resid)
        if self.layout == "parallel":         # both sublayers read the block's input
            mlp = self.sublayer(x, self.mlp(h) + self.post(f"{h}.{n.post_mlp_norm}"),
                                f"{h}.{n.norm_2}", f"{h}.{n.mlp_dropout}", pre)
            return residual(net, residual(net, x, attn, f"{h}.{n.add_1}"), mlp, f"{h}.{n.add_2}")
        x = self.after(residual(net, x, attn, f"{h}.{n.add_1}"), f"{h}.{n.norm_1}", pre)
        mlp = self.sublayer(x, self.mlp(h) + self.post(f"{h}.{n.post_mlp_norm}"),
                            f"{h}.{n.norm_2}", f"{h}.{n.mlp_dropout}", pre)
        return self.after(residual(net, x, mlp, f"{h}.{n.add_2}"), f"{h}.{n.norm_2}", pre)

    def sublayer(self, x: str, layers: list, norm: str, drop: str, pre: bool,
                 p: float | None = None) -> str:
        """norm (pre-norm) → `layers` → dropout (`p`; None: the residual dropout), from `x`:
        returns the branch's end."""
        chain = ([self.norm(norm)] if pre else []) + layers
        self.net.add(chain)
        self.net.connect(x, chain[0].name)
        return dropout(self.net, chain[-1].name, self.resid if p is None else p, drop)

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
            rotary=self.rotary, projection_bias=self.attention_bias,
            window=self.window if self.d.block_window is None else self.d.block_window(self.cfg, i),
            output_bias=self.output_bias, qk_norm=self.qk_norm, softcap=self.softcap,
            name=name)

    def mlp(self, h: str) -> list:
        n = self.n
        if self.d.ffn == "moe":              # Mixtral: a mixture of SwiGLU experts, no down Dense
            return [L.MixtureOfExperts(value(self.d.experts, self.cfg), self.inner,
                                       value(self.d.experts_per_token, self.cfg),
                                       activation=self.act, name=f"{h}.{n.up}")]
        if self.d.ffn == "glu":
            return [L.GLU(self.inner, activation=self.act, bias=self.mlp_bias, name=f"{h}.{n.up}"),
                    L.Dense(self.width, bias=self.mlp_bias, name=f"{h}.{n.down}")]
        return [L.Dense(self.inner, bias=self.mlp_bias, name=f"{h}.{n.up}"),
                self.act(f"{h}.{n.act}"),
                L.Dense(self.width, bias=self.mlp_bias, name=f"{h}.{n.down}")]

    def head(self, x: str, head: str) -> Network:
        n, net = self.n, self.net
        if value(self.d.final_norm, self.cfg):
            net.add(self.norm(n.final_norm))
            net.connect(x, n.final_norm)
            x = n.final_norm
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
            self.chain(x, [L.Dense(self.vocab, bias=False, tied_to=tied, name=n.lm_head)] +
                       self.capped() + [output("logits")])
        elif head == "classifier":
            self.chain(x, [L.Index1d("last", name="last_token"), self.classifier(),
                           output("logits")])
        elif head == "masked-lm":
            dense, act, norm, decoder, _ = masked_lm_names(n)
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

    def chain(self, x: str, layers: list) -> None:
        """`layers` in order, the first fed from `x`."""
        self.net.add(layers)
        self.net.connect(x, layers[0].name)
