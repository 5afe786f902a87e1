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

from .. import layers as L
from ..network import Network
from .common import activation, add, dropout, output, under
from .config import Config, keys
from .weights import W, Weight

ARCHITECTURES = ("GPT2LMHeadModel", "GPT2ForSequenceClassification", "GPT2Model")

KEYS = keys(
    read="vocab_size n_positions n_embd n_layer n_head n_inner activation_function resid_pdrop "
         "embd_pdrop attn_pdrop layer_norm_epsilon scale_attn_weights "
         "scale_attn_by_inverse_layer_idx tie_word_embeddings",
    fixed={"add_cross_attention": (False,)},
    # reorder_and_upcast_attn changes only where rounding happens in half precision; n_ctx is
    # n_positions' old twin; summary_* configure GPT2DoubleHeadsModel's head, not built here
    ignored="reorder_and_upcast_attn n_ctx summary_type summary_use_proj summary_activation "
            "summary_proj_to_labels summary_first_dropout summary_last_dropout",
)

# older checkpoints also hold each block's causal-mask buffers, which are not weights
# where the base model's tensors sit in a head model's file
PREFIX = "transformer."

IGNORED_TENSORS = (".attn.bias", ".attn.masked_bias")

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


def _prefix(architecture: str) -> str:
    return "" if architecture == "GPT2Model" else PREFIX


def weights(cfg: Config, architecture: str) -> list[Weight]:
    p = _prefix(architecture)
    table = [W(p + "wte.weight", "wte/weight"), W(p + "wpe.weight", "wpe/weight")]
    for i in range(cfg.int("n_layer")):
        table += under(BLOCK, f"{p}h.{i}.", f"h.{i}.")
    table += [W(p + "ln_f.weight", "ln_f/weight"), W(p + "ln_f.bias", "ln_f/bias")]
    if architecture == "GPT2LMHeadModel":
        tied = cfg.flag("tie_word_embeddings", True)
        table.append(W("lm_head.weight", "lm_head/weight", tied="wte/weight" if tied else False))
    elif architecture == "GPT2ForSequenceClassification":
        table.append(W("score.weight", "score/weight"))
    return table


def network(cfg: Config, architecture: str) -> Network:
    c, heads = cfg.int("n_embd"), cfg.int("n_head")
    vocab, eps = cfg.int("vocab_size"), cfg.float("layer_norm_epsilon", 1e-5)
    inner = cfg.int("n_inner", 4 * c)
    resid = cfg.probability("resid_pdrop", 0.1)
    attn_drop = cfg.probability("attn_pdrop", 0.1)
    scaled = cfg.flag("scale_attn_weights", True)
    by_layer = cfg.flag("scale_attn_by_inverse_layer_idx", False)
    if c % heads:
        raise cfg.bad("n_head", heads, f"a divisor of n_embd ({c})")

    net = Network([L.TokenInput(name="input_ids"), L.Embedding(vocab, c, name="wte")])
    net.add(L.PositionEmbedding(cfg.int("n_positions"), name="wpe"))
    net.connect("wte", "wpe")
    net.add(L.Addition(2, name="embed"))
    net.connect("wte", "embed/in1").connect("wpe", "embed/in2")
    x = dropout(net, "embed", cfg.probability("embd_pdrop", 0.1), "drop")
    for i in range(cfg.int("n_layer")):
        h = f"h.{i}"
        scale: str | float = "auto" if scaled and not by_layer else \
            ((c // heads) ** -0.5 if scaled else 1.0) / (i + 1 if by_layer else 1)
        net.add([L.LayerNorm(eps, name=f"{h}.ln_1"),
                 L.SelfAttention(heads, c, attention_mask="causal", dropout=attn_drop,
                                 scale=scale, name=f"{h}.attn")])
        net.connect(x, f"{h}.ln_1")
        x = add(net, x, dropout(net, f"{h}.attn", resid, f"{h}.attn.resid_dropout"), f"{h}.add_1")
        net.add([L.LayerNorm(eps, name=f"{h}.ln_2"), L.Dense(inner, name=f"{h}.mlp.c_fc"),
                 activation(cfg, "activation_function", f"{h}.mlp.act", "gelu_new"),
                 L.Dense(c, name=f"{h}.mlp.c_proj")])
        net.connect(x, f"{h}.ln_2")
        x = add(net, x, dropout(net, f"{h}.mlp.c_proj", resid, f"{h}.mlp.dropout"), f"{h}.add_2")
    net.add(L.LayerNorm(eps, name="ln_f"))
    net.connect(x, "ln_f")
    if architecture == "GPT2LMHeadModel":
        tied = "wte" if cfg.flag("tie_word_embeddings", True) else None
        net.add([L.Dense(vocab, bias=False, tied_to=tied, name="lm_head"), output("logits")])
        net.connect("ln_f", "lm_head")
    elif architecture == "GPT2ForSequenceClassification":
        net.add([L.Index1d("last", name="last_token"),
                 L.Dense(cfg.num_labels(), bias=False, name="score"), output("logits")])
        net.connect("ln_f", "last_token")
    else:
        net.add(output("last_hidden_state"))
        net.connect("ln_f", "last_hidden_state")
    return net

