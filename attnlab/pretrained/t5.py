"""T5 (`model_type` "t5"): `T5ForConditionalGeneration`, the encoder–decoder, as a description
(`builder.Family` with a `builder.Decoder`).

The graph, layers named after the checkpoint's modules:

- `shared`: the token embedding both stacks read (the decoder's `decoder.embed_tokens` shares
  its weight);
- the encoder, `num_layers` pre-norm blocks: T5's layer norm (an RMSNorm: no mean subtracted,
  no bias) → SelfAttention (no projection biases, scale 1.0, the bucketed relative position
  bias added to the scores) → residual; norm → feed-forward → residual; a final norm;
- the decoder, `num_decoder_layers` blocks: norm → causal SelfAttention with the
  unidirectional relative bias → residual; norm → cross-attention (MultiHeadAttention over
  the encoder's output, no position bias) → residual; norm → feed-forward → residual; a final
  norm, then `lm_head` (scaled by d_model**-0.5 first when the config asks for it, as T5's
  tied head does).

The relative position bias is learned by the first block's attention only (the tensor
`…block.0.layer.0.SelfAttention.relative_attention_bias`; the `RelativePositionBias` layer
`…block.0.layer.0.relative_attention_bias`, beside the attention layer, whose module cannot
hold it) and feeds the `bias` port of every self-attention of its stack. The feed-forward is
`feed_forward_proj`: "relu" (Dense `wi` → ReLU → Dense `wo`) or "gated-gelu" (GLU `wi` with
GELU(tanh), its `gate` `wi_0` and `up` `wi_1`, → Dense `wo`), and the other activations
transformers accepts there that attnlab computes. Dropout (`dropout_rate`) follows the
embeddings, each sublayer, the feed-forward's activation and each stack's final norm.

Inputs `input_ids` (the encoder's) and `decoder_input_ids`, output `logits`. Streaming and
`al.generate` take the encoder input whole: ``al.generate(net, static_inputs={"input_ids":
ids}, start=decoder_start_token_id, …)``.
"""
from __future__ import annotations

from pathlib import Path

import torch

from .builder import Decoder, Family, Names
from .checkpoint import Checkpoint
from .common import ACTIVATIONS
from .config import CONFIG_FILE, CheckpointError, Config, keys
from .weights import W, Weight

# feed_forward_proj's activation → (the activation layer's transformers name, GLU's name)
FEED_FORWARD = {"relu": ("relu", "relu"), "gelu": ("gelu", "gelu"),
                "gelu_new": ("gelu_new", "gelu-tanh"), "silu": ("silu", "silu")}

# checkpoint tensor (after "….block.{i}.layer.{j}.")   learnable (after the same), for one
# attention sublayer named NAME (SelfAttention or EncDecAttention)
ATTENTION = [
    W("NAME.q.weight",                     "NAME/query.weight"),
    W("NAME.k.weight",                     "NAME/key.weight"),
    W("NAME.v.weight",                     "NAME/value.weight"),
    W("NAME.o.weight",                     "NAME/output.weight"),
    W("layer_norm.weight",                 "layer_norm/weight"),
]
GATED = [
    W("DenseReluDense.wi_0.weight",        "DenseReluDense.wi/gate.weight"),
    W("DenseReluDense.wi_1.weight",        "DenseReluDense.wi/up.weight"),
]
UNGATED = [
    W("DenseReluDense.wi.weight",          "DenseReluDense.wi/weight"),
]
FEED_FORWARD_END = [
    W("DenseReluDense.wo.weight",          "DenseReluDense.wo/weight"),
    W("layer_norm.weight",                 "layer_norm/weight"),
]
EMBEDDINGS = [
    W("shared.weight",                     "shared/weight"),
    W("encoder.embed_tokens.weight",       "shared/weight", tied=True),
    W("decoder.embed_tokens.weight",       "shared/weight", tied=True),
]


def _sublayer(rows: list[Weight], j: int, attention: str = "") -> list[Weight]:
    """`rows` of sublayer j ("layer.{j}."), NAME standing for `attention`."""
    return [W(f"layer.{j}.{w.name.replace('NAME', attention)}",
              *(f"layer.{j}.{n.replace('NAME', attention)}" for n in w.learnables))
            for w in rows]


def _feed_forward(cfg: Config) -> tuple[bool, str]:
    """(gated, activation name as transformers spells it) from `feed_forward_proj`."""
    proj = cfg.get("feed_forward_proj", "relu")
    parts = proj.split("-") if isinstance(proj, str) else []
    gated = len(parts) == 2 and parts[0] == "gated"
    act = parts[-1] if parts and len(parts) <= 2 and (gated or len(parts) == 1) else None
    if gated and act == "gelu":
        act = "gelu_new"                  # transformers' "gated-gelu" is the tanh GELU
    if act not in FEED_FORWARD:
        raise cfg.unsupported("feed_forward_proj", proj, "supported: \"relu\", \"gelu\", "
                              "\"silu\", \"gated-gelu\" (GELU tanh), \"gated-relu\", "
                              "\"gated-silu\"")
    return gated, act


def _activation(cfg: Config):
    """The feed-forward's activation: GLU's name (gated), or the MLP's activation layer."""
    gated, act = _feed_forward(cfg)
    return FEED_FORWARD[act][1] if gated else ACTIVATIONS[FEED_FORWARD[act][0]]


def _block_table(cfg: Config, cross: bool) -> list[Weight]:
    """A block's rows: self-attention (layer.0), cross-attention (layer.1, the decoder's),
    the feed-forward."""
    ff = 2 if cross else 1
    rows = _sublayer(ATTENTION, 0, "SelfAttention")
    if cross:
        rows += _sublayer(ATTENTION, 1, "EncDecAttention")
    gated = _feed_forward(cfg)[0]
    return rows + _sublayer(GATED if gated else UNGATED, ff) + _sublayer(FEED_FORWARD_END, ff)


def _head_scale(cfg: Config) -> float | None:
    """d_model**-0.5 where the decoder's output is scaled before `lm_head`: 5.x writes
    `scale_decoder_outputs`; 4.x scales when the head is tied (`tie_word_embeddings`)."""
    if "scale_decoder_outputs" in cfg.data:
        scaled = cfg.flag("scale_decoder_outputs", True)
    else:
        scaled = cfg.flag("tie_word_embeddings", True)
    return cfg.int("d_model") ** -0.5 if scaled else None


def _own_head(cfg: Config) -> bool:
    """Whether `lm_head` has its own weight: a 4.x config with `tie_word_embeddings` false, or
    a file holding an `lm_head.weight` that differs from `shared.weight` (transformers then
    keeps them apart)."""
    if not cfg.flag("tie_word_embeddings", True):
        return True
    folder = Path(cfg.where).parent
    if Path(cfg.where).name != CONFIG_FILE or not folder.is_dir():
        return False
    try:
        with Checkpoint(folder) as ckpt:
            if "lm_head.weight" not in ckpt.header or "shared.weight" not in ckpt.header:
                return False
            if ckpt.header["lm_head.weight"][0] != ckpt.header["shared.weight"][0]:
                return True               # the loader names both shapes
            return not torch.equal(ckpt.tensor("lm_head.weight"), ckpt.tensor("shared.weight"))
    except CheckpointError:
        return False                      # the loader reports the folder's problem itself


def _names(stack: str, cross: bool) -> Names:
    """One stack's layer names: `{stack}.block.{i}.layer.{j}.…`, sublayer j = 0 the
    self-attention, 1 the cross-attention (the decoder's), then the feed-forward. The
    relative position bias is a layer beside the first block's attention (whose module cannot
    hold it), its tensor inside that attention's module."""
    ff = f"layer.{2 if cross else 1}"
    bias = f"{stack}.block.0.layer.0"
    return Names(
        tokens="decoder.embed_tokens" if cross else "shared",
        embeddings_dropout=f"{stack}.dropout",
        position_bias=f"{bias}.relative_attention_bias",
        position_bias_tensor=f"{bias}.SelfAttention.relative_attention_bias",
        block=f"{stack}.block.{{i}}", norm_1="layer.0.layer_norm",
        attention="layer.0.SelfAttention", attention_dropout="layer.0.dropout",
        add_1="layer.0.add", cross_norm="layer.1.layer_norm",
        cross_attention="layer.1.EncDecAttention", cross_dropout="layer.1.dropout",
        cross_add="layer.1.add", norm_2=f"{ff}.layer_norm", up=f"{ff}.DenseReluDense.wi",
        act=f"{ff}.DenseReluDense.act", inner_dropout=f"{ff}.DenseReluDense.dropout",
        down=f"{ff}.DenseReluDense.wo", mlp_dropout=f"{ff}.dropout", add_2=f"{ff}.add",
        final_norm=f"{stack}.final_layer_norm", final_dropout=f"{stack}.final_dropout",
        head_scale="scale_decoder_outputs")


def _dropout(cfg: Config) -> float:
    return cfg.probability("dropout_rate", 0.1)


FAMILY = Family(
    architectures=("T5ForConditionalGeneration",),
    keys=keys(
        read="vocab_size d_model d_kv d_ff num_layers num_decoder_layers num_heads "
             "relative_attention_num_buckets relative_attention_max_distance dropout_rate "
             "layer_norm_epsilon feed_forward_proj tie_word_embeddings scale_decoder_outputs",
        fixed={"is_encoder_decoder": (True,), "is_decoder": (False,)},
        # dense_act_fn and is_gated_act are what feed_forward_proj says, written out;
        # classifier_dropout is for the classification heads, n_positions and output_past are
        # bookkeeping of older configs (relative positions have no learned length)
        ignored="dense_act_fn is_gated_act classifier_dropout n_positions output_past"),
    heads={"T5ForConditionalGeneration": "lm"},
    block_table=lambda c: _block_table(c, cross=False),
    blocks=lambda c: c.int("num_layers"),
    decoder=Decoder(blocks=lambda c: c.int("num_decoder_layers", c.int("num_layers")),
                    block_table=lambda c: _block_table(c, cross=True),
                    names=_names("decoder", cross=True)),
    width=lambda c: c.int("d_model"),
    num_heads=lambda c: c.int("num_heads"),
    head_dim=lambda c: c.int("d_kv"),
    vocab=lambda c: c.int("vocab_size"),
    inner=lambda c: c.int("d_ff"),
    eps=lambda c: c.float("layer_norm_epsilon", 1e-6),
    causal=False, scale=1.0,
    attention_dropout=_dropout,
    position_bias=lambda c: (c.int("relative_attention_num_buckets", 32),
                             c.int("relative_attention_max_distance", 128)),
    ffn=lambda c: "glu" if _feed_forward(c)[0] else "mlp",
    activation=_activation,
    inner_dropout=_dropout, residual_dropout=_dropout, embedding_dropout=_dropout,
    final_dropout=_dropout,
    embedding_table=lambda c: EMBEDDINGS,
    head_scale=_head_scale,
    tied=lambda c: not _own_head(c),
    names=_names("encoder", cross=False),
)
