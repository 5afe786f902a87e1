"""Llama (`model_type` "llama"): `LlamaForCausalLM`, `LlamaForSequenceClassification` (the
scores of each sequence's last token that is not `pad_token_id`) and the base `LlamaModel`.

Pre-norm blocks (RMSNorm → causal SelfAttention with rotary positions and grouped key/value
heads → residual; RMSNorm → GLU (SwiGLU: ``silu(gate(x)) * up(x)``) → Dense (the down
projection) → residual), a final RMSNorm and, for the LM head, the output projection (tied to
the token embedding when `tie_word_embeddings`); `bias` and `mlp_bias` add biases.
Layers are named after the checkpoint's modules (`layers.0.self_attn`,
`layers.0.mlp.down_proj`, `norm`; the GLU, which holds `gate_proj` and `up_proj`, is
`layers.0.mlp.gate_up_proj`); the tensors of `LlamaForCausalLM` sit under ``model.``.

Rotary positions: `rope_theta` at the top level (transformers 4.x) or in `rope_parameters`
(5.x), with the scaling of `rope_scaling` / `rope_parameters` (`rope_type` linear, dynamic,
llama3 or yarn, as transformers computes them; another type is refused, naming the key).
Mistral (`mistral.py`) and Qwen2 (`qwen2.py`) are this description with other fields.
"""
from __future__ import annotations

import math

from .builder import Family, divisor
from .config import Config, keys
from .saving import SAYABLE
from .weights import W, Weight

# checkpoint tensor (after "layers.{i}.")   learnable(s) (after "layers.{i}.")
ATTENTION = [
    W("self_attn.q_proj.weight",             "self_attn/query.weight"),
    W("self_attn.k_proj.weight",             "self_attn/key.weight"),
    W("self_attn.v_proj.weight",             "self_attn/value.weight"),
    W("self_attn.o_proj.weight",             "self_attn/output.weight"),
]
MLP = [
    W("mlp.gate_proj.weight",                "mlp.gate_up_proj/gate.weight"),
    W("mlp.up_proj.weight",                  "mlp.gate_up_proj/up.weight"),
    W("mlp.down_proj.weight",                "mlp.down_proj/weight"),
]
NORMS = [
    W("input_layernorm.weight",              "input_layernorm/weight"),
    W("post_attention_layernorm.weight",     "post_attention_layernorm/weight"),
]


def biases(rows: list[Weight]) -> list[Weight]:
    """The bias rows of `rows` (weights): "….weight" → "….bias"."""
    return [W(w.name.removesuffix("weight") + "bias",
              *(n.removesuffix("weight") + "bias" for n in w.learnables)) for w in rows]


SCALED = ("linear", "dynamic", "llama3", "yarn")


def rotary(cfg: Config) -> dict:
    """The attention layers' `rotary` settings from the config (either layout), scaled as its
    `rope_type` says (`SCALED`: transformers' linear, dynamic, llama3 and yarn rope types);
    another type is refused, naming the key that asks for it."""
    rope = cfg.rope()
    positions = cfg.int("max_position_embeddings", 2048)    # no learned limit: the scaling's
    kind = rope["rope_type"]
    if kind == "default":
        return {"base": float(rope["rope_theta"])}
    key = "rope_parameters" if "rope_parameters" in cfg.data else "rope_scaling"
    if kind not in SCALED or rope.get("partial_rotary_factor", 1.0) != 1.0:
        raise cfg.unsupported(key, cfg.data.get(key), "supported: rope_type \"default\" (the "
                              "original rotary embedding with rope_theta), "
                              f"{', '.join(map(repr, SCALED))}, each over whole heads")
    return {"base": float(rope["rope_theta"]), "scaling": scaling(cfg, key, rope, positions)}


def default_rotary(cfg: Config) -> dict:
    """`rotary` of a family built with the original rotary embedding only: a scaled one is
    refused, naming the key that asks for it."""
    rope = cfg.rope()
    if rope["rope_type"] != "default":
        key = "rope_parameters" if "rope_parameters" in cfg.data else "rope_scaling"
        raise cfg.unsupported(key, cfg.data.get(key), "supported: rope_type \"default\", the "
                              f"original rotary embedding with rope_theta ({cfg.model_type})")
    cfg.int("max_position_embeddings", 2048)        # rotary positions have no learned limit
    return {"base": float(rope["rope_theta"])}


def scaling(cfg: Config, key: str, rope: dict, positions: int) -> dict:
    """The `rotary['scaling']` settings of a scaled rope type, read as transformers' rope
    utilities read them (its defaults; the trained length `original_max_position_embeddings`,
    else `max_position_embeddings`); a value out of range is refused naming `key`."""
    kind = rope["rope_type"]

    def number(name, default=None):
        v = rope.get(name, default)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
            raise cfg.bad(key, cfg.data.get(key), f"a positive number as \"{name}\" of "
                          f"rope_type \"{kind}\"")
        return float(v)

    original = cfg.data.get("original_max_position_embeddings") or \
        rope.get("original_max_position_embeddings") or positions
    if isinstance(original, bool) or not isinstance(original, int) or original < 1:
        raise cfg.bad(key, cfg.data.get(key), "an integer ≥ 1 as original_max_position_embeddings")
    cfg.read.add("original_max_position_embeddings")
    if kind == "linear":
        return {"rope_type": kind, "factor": number("factor")}
    if kind == "dynamic":                           # grows past max_position_embeddings
        return {"rope_type": kind, "factor": number("factor"),
                "original_max_position_embeddings": positions}
    if kind == "llama3":
        low, high = number("low_freq_factor"), number("high_freq_factor")
        if high <= low:
            raise cfg.bad(key, cfg.data.get(key), "high_freq_factor greater than low_freq_factor")
        return {"rope_type": kind, "factor": number("factor"), "low_freq_factor": low,
                "high_freq_factor": high, "original_max_position_embeddings": original}
    factor = number("factor") if rope.get("factor") is not None else positions / original
    attention = rope.get("attention_factor")
    if attention is None and rope.get("mscale") and rope.get("mscale_all_dim"):
        attention = _mscale(factor, number("mscale")) / _mscale(factor, number("mscale_all_dim"))
    out = {"rope_type": kind, "factor": factor, "original_max_position_embeddings": original,
           "beta_fast": number("beta_fast") if rope.get("beta_fast") else 32.0,
           "beta_slow": number("beta_slow") if rope.get("beta_slow") else 1.0,
           "truncate": rope.get("truncate", True)}
    return out if attention is None else {**out, "attention_factor": float(attention)}


def _mscale(factor: float, mscale: float) -> float:
    """YaRN's 0.1 · mscale · ln(factor) + 1 (1 for factor ≤ 1), as transformers computes it."""
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def kv_heads(cfg: Config) -> int:
    heads = cfg.int("num_attention_heads")
    return divisor(cfg, "num_key_value_heads", heads, "num_attention_heads", heads)


def block_table(cfg: Config) -> list[Weight]:
    attention_bias, mlp_bias = cfg.flag("attention_bias", False), cfg.flag("mlp_bias", False)
    return ATTENTION + (biases(ATTENTION) if attention_bias else []) + MLP + \
        (biases(MLP) if mlp_bias else []) + NORMS


FAMILY = Family(
    architectures=("LlamaForCausalLM", "LlamaForSequenceClassification", "LlamaModel"),
    keys=keys(
        read="vocab_size hidden_size intermediate_size num_hidden_layers num_attention_heads "
             "num_key_value_heads head_dim hidden_act max_position_embeddings rms_norm_eps "
             "attention_bias attention_dropout mlp_bias tie_word_embeddings rope_theta "
             "rope_scaling",
        # pretraining_tp > 1 splits the same products into slices: the same function
        ignored="pretraining_tp"),
    heads={"LlamaForCausalLM": "lm", "LlamaForSequenceClassification": "last-token-classifier",
           "LlamaModel": "hidden"},
    block_table=block_table,
    blocks=lambda c: c.int("num_hidden_layers"),
    width=lambda c: c.int("hidden_size"),
    num_heads=lambda c: c.int("num_attention_heads"),
    num_kv_heads=kv_heads,
    head_dim=lambda c: c.int("head_dim", c.int("hidden_size") // c.int("num_attention_heads")),
    vocab=lambda c: c.int("vocab_size"),
    inner=lambda c: c.int("intermediate_size"),
    eps=lambda c: c.float("rms_norm_eps", 1e-6),
    attention_dropout=lambda c: c.probability("attention_dropout", 0.0),
    rotary=rotary,
    attention_bias=lambda c: c.flag("attention_bias", False),
    mlp_bias=lambda c: c.flag("mlp_bias", False),
    tied=lambda c: c.flag("tie_word_embeddings", False),
    prefix="model.",
    ignored_tensors=(".rotary_emb.inv_freq",),
    sayable=SAYABLE["llama"],
)
