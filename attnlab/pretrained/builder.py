"""A transformer family as a description (`Family`, with a `Decoder` for an encoder–decoder),
its weight table, and the entry to the one builder that turns a description into a graph
(`build.Build`).

A family states what its config maps to — sizes, the norm, the attention's options, the
feed-forward kind, the embeddings, the position bias, a decoder stack, the heads of its model
classes, the layer names — in a `Family`; each field is a value, or a callable that gets the
`Config` and returns the value (`width=lambda c: c.int("n_embd")`), so that reading a key,
its default and its checks stay with the family while the graph is written once, in
`build.py`. `Family.network` and `Family.weights` are what the loader and `save_pretrained`
call.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from attnlab.core.errors import ArgumentError
from ..network import Network
from .build import Build
from .common import CALLABLE_CHOICES, TEXT_CHOICES, check_choice, under, value
from .config import Config, Keys
from .weights import W, Weight

# what a model class puts after the blocks (and the final norm)
HEADS = ("lm", "classifier", "hidden", "pooled", "masked-lm", "pooled-classifier",
         "token-classifier", "first-classifier", "first-mlp-classifier", "span",
         "last-token-classifier")
BASE = ("hidden", "pooled")                # a base model: its tensors without `prefix`


def divisor(cfg: Config, key: str, of: int, of_key: str, default: Any = None) -> int:
    """The config's `key` (`default` when absent, if given), refused (naming it) unless it
    divides `of` (the value of `of_key`)."""
    n = cfg.int(key) if default is None else cfg.int(key, default)
    if of % n:
        raise cfg.bad(key, n, f"a divisor of {of_key} ({of})")
    return n


@dataclass(frozen=True)
class Names:
    """The graph's layer names, after the checkpoint's modules; `block` holds "{i}", and the
    names of a block's layers follow it ("layers.0." + `attention`). Each stack of an
    encoder–decoder family has its own (`Decoder.names`); the head's are the family's."""

    tokens: str = "embed_tokens"
    positions: str = "wpe"
    token_types: str = "token_type_embeddings"
    patches: str = "embeddings.patch_embeddings"
    class_token: str = "embeddings.cls_token"
    embeddings: str = "embed"                  # the sum of token and position embeddings
    embeddings_norm: str = "embeddings.LayerNorm"
    embeddings_dropout: str = "drop"
    position_bias: str = "relative_attention_bias"     # the stack's RelativePositionBias
    position_bias_tensor: str | None = None    # its tensor's name (before ".weight"); None: as
    block: str = "layers.{i}"                  # the layer's
    norm_1: str = "input_layernorm"
    attention: str = "self_attn"
    attention_dropout: str = "self_attn_dropout"      # not under the attention's module path
    add_1: str = "add_1"
    cross_norm: str = "cross_attn_layernorm"   # a decoder's cross-attention sublayer
    cross_attention: str = "cross_attn"
    cross_dropout: str = "cross_attn_dropout"
    cross_add: str = "add_cross"
    norm_2: str = "post_attention_layernorm"
    up: str = "mlp.gate_up_proj"               # GLU (gate and up), or the MLP's first Dense
    act: str = "mlp.act"                       # the MLP's activation
    inner_dropout: str = "mlp.inner_dropout"   # before `down`
    down: str = "mlp.down_proj"
    mlp_dropout: str = "mlp.dropout"
    add_2: str = "add_2"
    final_norm: str = "norm"
    final_dropout: str = "final_dropout"
    head_scale: str = "scale_outputs"          # the Scaling before the output projection
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

    def masked_lm_names(self) -> tuple[str, str, str, str, str | None]:
        """The masked-LM head's layer names (transform Dense, activation, norm, decoder) and
        the decoder bias's second tensor name (None: the file has the decoder's own only)."""
        if self.masked_lm_parts is not None:
            return self.masked_lm_parts
        t = f"{self.masked_lm}.transform"
        return (f"{t}.dense", f"{t}.act", f"{t}.LayerNorm", f"{self.masked_lm}.decoder",
                f"{self.masked_lm}.bias")


@dataclass(frozen=True)
class Decoder:
    """The second stack of an encoder–decoder family (T5): `blocks` causal blocks (a value or
    a callable of the `Config`), each attending to its own steps, then to the encoder's output
    (a cross-attention sublayer between the self-attention and the feed-forward). It reads
    the token input `input`, embedded by a layer tied to the encoder's token embedding, and
    feeds the family's heads. Sizes, norm, attention options, feed-forward and position bias
    are the family's; `block_table(cfg)` is a decoder block's rows as the family's
    `block_table` is an encoder block's, `names` the stack's layer names."""

    blocks: Any
    block_table: Callable[[Config], list[Weight]]
    names: Names
    input: str = "decoder_input_ids"


@dataclass(frozen=True)
class Family:
    """A transformer family (GPT-2, Llama, Mistral, Qwen2, BERT, ViT, T5, …): one stack of
    blocks between its embeddings and the heads of its model classes (two stacks with a
    `decoder`).

    Every field but `architectures`, `keys`, `heads`, `block_table`, `decoder`, `names` and
    the text choice `norm` is a value or a callable of the `Config` (`scale`: of the config
    and the block's index); `placement`, `layout` and `ffn` are text or a callable that
    returns the text (OPT's `do_layer_norm_before`, GPT-NeoX's `use_parallel_residual`, T5's
    `feed_forward_proj`). `heads` maps each model class to what follows the blocks and the
    final norm: "lm" (the output projection, `logits`), "classifier"
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
    `position_bias`: (buckets, max distance) of a learned relative position bias (T5's): one
    `RelativePositionBias` per stack, bidirectional unless the stack is causal, feeds the
    `bias` port of every self-attention of its stack. `activation` is (config key, default),
    or a callable that returns the activation as the feed-forward takes it (GLU's name, such
    as "gelu-tanh", or the MLP's activation: a function of the layer's name, as
    `common.ACTIVATIONS` holds). `head_scale`: a factor the output projection's input is
    multiplied by (T5's d_model**-0.5), or None.
    `block_table(cfg)` is a block's rows of the weight table, its tensor names after the
    block's prefix ("layers.0."); the embeddings', position bias', final norm's and heads'
    rows follow the layer names. `prefix` is where the base model's tensors sit in a head model's file
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
    causal: bool = True                    # of the (first) stack; a decoder's always is
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
    position_bias: Any = None              # (buckets, max distance), or None
    ffn: Any = "glu"                       # "glu" (gated), "mlp" (Dense → act → Dense), "moe"
    experts: Any = None                    # "moe": the number of experts (SwiGLU each)
    experts_per_token: Any = None          # "moe": the experts each token is routed to
    activation: Any = ("hidden_act", "silu")     # config key, its default; or a callable
    mlp_bias: Any = False
    inner_dropout: Any = 0.0               # in the feed-forward, before its down projection
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
    final_dropout: Any = 0.0               # after each stack's final norm
    decoder: Decoder | None = None         # an encoder–decoder's second stack
    head_scale: Any = None                 # a factor before the output projection, or None
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
                check_choice(name, getattr(self, name))
        for arch, head in self.heads.items():
            if head not in HEADS:
                raise ArgumentError(f"Family heads[{arch!r}]: expected one of "
                                    f"{', '.join(HEADS)}, received {head!r}.")
        if self.decoder is not None and self.layout != "sequential":
            raise ArgumentError(f"Family layout: expected \"sequential\" with a decoder (its "
                                f"cross-attention reads the self-attention's residual), "
                                f"received {self.layout!r}.")

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
        table += self._stack_rows(cfg, p, n, self.block_table, self.blocks)
        if self.decoder is not None:
            d = self.decoder
            table += self._stack_rows(cfg, p, d.names, d.block_table, d.blocks)
        if projected:
            table.append(W(f"{p}{n.project_out}.weight", f"{n.project_out}/weight"))
        if head in ("pooled", "pooled-classifier"):
            table += self._dense_rows(p, f"{n.pooler}.dense", True)
        return table + self._head_rows(cfg, head)

    def _stack_rows(self, cfg: Config, p: str, n: Names, block_table: Callable,
                    blocks: Any) -> list[Weight]:
        """A stack's rows: its blocks', its position bias', its final norm's."""
        rows, table = block_table(cfg), []
        for i in range(value(blocks, cfg)):
            block = n.block.format(i=i)
            table += under(rows, f"{p}{block}.", f"{block}.")
        if value(self.position_bias, cfg) is not None:
            tensor = n.position_bias_tensor or n.position_bias
            table.append(W(f"{p}{tensor}.weight", f"{n.position_bias}/weight"))
        if value(self.final_norm, cfg):
            table += self._norm_rows(p, n.final_norm)
        return table

    def _head_rows(self, cfg: Config, head: str) -> list[Weight]:
        n = self.names
        tied = f"{n.tokens}/weight" if value(self.tied, cfg) else False
        if head == "lm":
            return [W(f"{n.lm_head}.weight", f"{n.lm_head}/weight", tied=tied)]
        if head in ("classifier", "pooled-classifier", "token-classifier", "first-classifier"):
            return self._dense_rows("", n.classifier, self.classifier_bias)
        if head == "masked-lm":
            dense, _, norm, d, bias = n.masked_lm_names()
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
        return Build(self, cfg).network(architecture)
