"""GPT-2 (`model_type` "gpt2"): `GPT2LMHeadModel`, `GPT2ForSequenceClassification` and the
base `GPT2Model`.

The graph: token and position embeddings added, `n_layer` pre-norm blocks (LayerNorm →
causal SelfAttention → residual, LayerNorm → Dense → GELU(tanh) → Dense → residual), a final
LayerNorm and, for the LM head, the output projection tied to the token embedding. Layers are
named after the checkpoint's modules (`h.0.attn`, `h.0.mlp.c_fc`, `ln_f`). The classifier
scores each sequence's last token: its last valid step in a padded batch, as transformers
takes the last token before the padding `pad_token_id` marks.

GPT-2 stores its linear maps as Conv1D, in×out: the table transposes them into attnlab's
out×in (and back on saving). Its `c_attn` is one fused in×3C map, split here into the
attention layer's `query`, `key` and `value` (its bias likewise).
"""
from __future__ import annotations

from .builder import Family, Names, divisor
from .config import Config, keys
from .weights import W

# checkpoint tensor (after "h.{i}.")     learnable(s) (after "h.{i}.")
BLOCK = [
    W("ln_1.weight",                    "ln_1/weight"),
    W("ln_1.bias",                      "ln_1/bias"),
    W("attn.c_attn.weight",             "attn/query.weight", "attn/key.weight", "attn/value.weight",
      transpose=True),
    W("attn.c_attn.bias",               "attn/query.bias", "attn/key.bias", "attn/value.bias"),
    W("attn.c_proj.weight",             "attn/output.weight", transpose=True),
    W("attn.c_proj.bias",               "attn/output.bias"),
    W("ln_2.weight",                    "ln_2/weight"),
    W("ln_2.bias",                      "ln_2/bias"),
    W("mlp.c_fc.weight",                "mlp.c_fc/weight", transpose=True),
    W("mlp.c_fc.bias",                  "mlp.c_fc/bias"),
    W("mlp.c_proj.weight",              "mlp.c_proj/weight", transpose=True),
    W("mlp.c_proj.bias",                "mlp.c_proj/bias"),
]



def scale(cfg: Config, i: int) -> str | float:
    """Block i's attention scale: 1/sqrt(head size), none without `scale_attn_weights`, and
    divided by i + 1 with `scale_attn_by_inverse_layer_idx`."""
    scaled = cfg.flag("scale_attn_weights", True)
    by_layer = cfg.flag("scale_attn_by_inverse_layer_idx", False)
    if scaled and not by_layer:
        return "auto"
    c, heads = cfg.int("n_embd"), cfg.int("n_head")
    return ((c // heads) ** -0.5 if scaled else 1.0) / (i + 1 if by_layer else 1)


FAMILY = Family(
    architectures=("GPT2LMHeadModel", "GPT2ForSequenceClassification", "GPT2Model"),
    keys=keys(
        read="vocab_size n_positions n_embd n_layer n_head n_inner activation_function "
             "resid_pdrop embd_pdrop attn_pdrop layer_norm_epsilon scale_attn_weights "
             "scale_attn_by_inverse_layer_idx tie_word_embeddings",
        fixed={"add_cross_attention": (False,)},
        # reorder_and_upcast_attn changes only where rounding happens in half precision;
        # n_ctx is n_positions' old twin; summary_* configure GPT2DoubleHeadsModel's head
        ignored="reorder_and_upcast_attn n_ctx summary_type summary_use_proj "
                "summary_activation summary_proj_to_labels summary_first_dropout "
                "summary_last_dropout"),
    heads={"GPT2LMHeadModel": "lm",
           "GPT2ForSequenceClassification": "last-token-classifier",   # as transformers picks
           "GPT2Model": "hidden"},
    block_table=lambda c: BLOCK,
    blocks=lambda c: c.int("n_layer"),
    width=lambda c: c.int("n_embd"),
    num_heads=lambda c: divisor(c, "n_head", c.int("n_embd"), "n_embd"),
    vocab=lambda c: c.int("vocab_size"),
    inner=lambda c: c.int("n_inner", 4 * c.int("n_embd")),
    norm="layer", eps=lambda c: c.float("layer_norm_epsilon", 1e-5),
    scale=scale,
    attention_dropout=lambda c: c.probability("attn_pdrop", 0.1),
    attention_bias=True,
    ffn="mlp", activation=("activation_function", "gelu_new"), mlp_bias=True,
    residual_dropout=lambda c: c.probability("resid_pdrop", 0.1),
    positions=lambda c: c.int("n_positions"),
    embedding_dropout=lambda c: c.probability("embd_pdrop", 0.1),
    tied=lambda c: c.flag("tie_word_embeddings", True),
    prefix="transformer.", cross_prefix=True,
    # older checkpoints also hold each block's causal-mask buffers, which are not weights
    ignored_tensors=(".attn.bias", ".attn.masked_bias"),
    names=Names(tokens="wte", block="h.{i}", norm_1="ln_1", attention="attn",
                attention_dropout="attn_resid_dropout", norm_2="ln_2", up="mlp.c_fc",
                down="mlp.c_proj", final_norm="ln_f"),
)
