"""GPT-NeoX (`model_type` "gpt_neox"; EleutherAI's Pythia and GPT-NeoX-20B): `GPTNeoXForCausalLM`,
`GPTNeoXForSequenceClassification` (the scores of each sequence's last token that is not
`pad_token_id`) and the base `GPTNeoXModel`.

Pre-norm blocks with LayerNorm, causal SelfAttention with biases and rotary positions on the
first `rotary_pct` of each head's channels, and a Dense → GELU → Dense feed-forward. With
`use_parallel_residual` (Pythia's default) both sublayers read the block's input,
``x + attn(ln1(x)) + mlp(ln2(x))``; without it they follow one another. The output projection
is `embed_out` (tied to `embed_in` only with `tie_word_embeddings`).

The fused `query_key_value` is laid out per head, [heads, 3, head size] — each head's query,
key and value rows together —, split here into the attention layer's `query`, `key` and `value`
(its bias likewise) and fused back on saving.

Rotary settings: transformers 4.x writes `rotary_pct` and `rotary_emb_base` at the top level,
5.x `partial_rotary_factor` and `rope_theta` in `rope_parameters`; both are read. A scaled
rotary embedding (`rope_scaling`, a `rope_type` other than "default") is refused, naming the key.
"""
from __future__ import annotations

from .builder import Family, Names, divisor
from .config import Config, keys
from .saving import Sayable
from .weights import W, Weight


def heads(cfg: Config) -> int:
    return divisor(cfg, "num_attention_heads", cfg.int("hidden_size"), "hidden_size")


def block_table(cfg: Config) -> list[Weight]:
    bias = cfg.flag("attention_bias", True)
    n = cfg.int("num_attention_heads")        # the table only names: sizes are checked later
    qkv = ("attention/query", "attention/key", "attention/value")
    rows = [
        W("input_layernorm.weight",            "input_layernorm/weight"),
        W("input_layernorm.bias",              "input_layernorm/bias"),
        W("attention.query_key_value.weight",  *(f"{p}.weight" for p in qkv), interleave=n),
        W("attention.dense.weight",            "attention/output.weight"),
        W("post_attention_layernorm.weight",   "post_attention_layernorm/weight"),
        W("post_attention_layernorm.bias",     "post_attention_layernorm/bias"),
        W("mlp.dense_h_to_4h.weight",          "mlp.dense_h_to_4h/weight"),
        W("mlp.dense_h_to_4h.bias",            "mlp.dense_h_to_4h/bias"),
        W("mlp.dense_4h_to_h.weight",          "mlp.dense_4h_to_h/weight"),
        W("mlp.dense_4h_to_h.bias",            "mlp.dense_4h_to_h/bias"),
    ]
    if bias:
        rows += [W("attention.query_key_value.bias", *(f"{p}.bias" for p in qkv), interleave=n),
                 W("attention.dense.bias",           "attention/output.bias")]
    return rows


def rotary(cfg: Config) -> dict:
    """The attention layers' `rotary` settings: the base and the fraction of each head's
    channels that turn, from either layout; a scaled rotary embedding is refused by name."""
    cfg.int("max_position_embeddings", 2048)        # rotary positions have no learned limit
    if "rope_parameters" in cfg.data:
        rope = cfg.rope()
        theta, fraction = rope["rope_theta"], rope.get("partial_rotary_factor", 0.25)
        key = "rope_parameters"
    else:                                   # 4.x: rotary_emb_base and rotary_pct win, as there
        rope = cfg.rope()
        theta = cfg.float("rotary_emb_base", cfg.float("rope_theta", 10000.0))
        fraction = cfg.float("rotary_pct", cfg.float("partial_rotary_factor", 0.25))
        key = "rope_scaling"
    if rope["rope_type"] != "default":
        raise cfg.unsupported(key, cfg.data.get(key), "supported: rope_type \"default\", the "
                              "original rotary embedding")
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or \
            not 0 < fraction <= 1:
        name = "partial_rotary_factor" if key == "rope_parameters" else "rotary_pct"
        raise cfg.bad(name, fraction, "a fraction in (0, 1]")
    size = cfg.int("hidden_size") // heads(cfg)
    # transformers turns int(head size × fraction) channels of each head
    return {"base": float(theta), "fraction": int(size * fraction) / size}


SAYABLE = Sayable(
    blocks=(("num_hidden_layers", r"^layers\.(\d+)\.", None),),
    vocab=("vocab_size", "embed_in"), head=("embed_out", "embed_in"),
    hints=((r"\.mlp\.act$", "", "hidden_act"), (r"norm$", "eps", "layer_norm_eps"),
           (r"\.attention$", "dropout", "attention_dropout"),
           (r"\.attention$", "rotary", "rotary_pct"),
           (r"dropout$", "p", "hidden_dropout"),
           (r"\.mlp\.dense_h_to_4h$", "out", "intermediate_size")))


FAMILY = Family(
    architectures=("GPTNeoXForCausalLM", "GPTNeoXForSequenceClassification", "GPTNeoXModel"),
    keys=keys(
        read="vocab_size hidden_size num_hidden_layers num_attention_heads intermediate_size "
             "hidden_act attention_dropout hidden_dropout max_position_embeddings "
             "layer_norm_eps tie_word_embeddings use_parallel_residual attention_bias "
             "rotary_pct rotary_emb_base rope_theta partial_rotary_factor rope_scaling",
        # the dropout of GPTNeoXForSequenceClassification's head, not built here
        ignored="classifier_dropout"),
    heads={"GPTNeoXForCausalLM": "lm",
           "GPTNeoXForSequenceClassification": "last-token-classifier",
           "GPTNeoXModel": "hidden"},
    block_table=block_table,
    blocks=lambda c: c.int("num_hidden_layers"),
    width=lambda c: c.int("hidden_size"),
    num_heads=heads,
    vocab=lambda c: c.int("vocab_size"),
    inner=lambda c: c.int("intermediate_size"),
    norm="layer", eps=lambda c: c.float("layer_norm_eps", 1e-5),
    layout=lambda c: "parallel" if c.flag("use_parallel_residual", True) else "sequential",
    rotary=rotary,
    attention_bias=lambda c: c.flag("attention_bias", True),
    attention_dropout=lambda c: c.probability("attention_dropout", 0.0),
    ffn="mlp", activation=("hidden_act", "gelu"), mlp_bias=True,
    residual_dropout=lambda c: c.probability("hidden_dropout", 0.0),
    embedding_dropout=lambda c: c.probability("hidden_dropout", 0.0),
    tied=lambda c: c.flag("tie_word_embeddings", False),
    prefix="gpt_neox.",
    # buffers of older files (the causal mask, the rotary frequencies), not weights
    ignored_tensors=(".attention.bias", ".attention.masked_bias", ".rotary_emb.inv_freq"),
    names=Names(tokens="embed_in", embeddings_dropout="emb_dropout", attention="attention",
                attention_dropout="post_attention_dropout", up="mlp.dense_h_to_4h",
                act="mlp.act", down="mlp.dense_4h_to_h", mlp_dropout="post_mlp_dropout",
                final_norm="final_layer_norm", lm_head="embed_out"),
    sayable=SAYABLE,
)
