"""Phi-3 (`model_type` "phi3"; Microsoft's Phi-3, Phi-3.5 and Phi-4-mini): `Phi3ForCausalLM` and
the base `Phi3Model`.

Llama's blocks (RMSNorm, causal SelfAttention with rotary positions and grouped key/value
heads, SwiGLU) with two fused projections in the file, split on loading and fused again on
saving: `qkv_proj`, the query, key and value rows one after the other (num_heads, then
num_key_value_heads, then num_key_value_heads heads), and `gate_up_proj`, the gate's rows then
the up projection's. `sliding_window` restricts attention as Mistral's does; `resid_pdrop` is
the dropout on each sublayer's output.

Rotary positions: `rope_theta` and `partial_rotary_factor` (the fraction of each head that
turns), and the scaling of the long-context models, `rope_type` "longrope" (also spelt "su"
or "yarn" in Phi-3 configs, as transformers reads them): every frequency divided by its
`short_factor` while a sequence is at most `original_max_position_embeddings` long and by its
`long_factor` once it is longer, cos and sin times `attention_factor` (by default
sqrt(1 + ln(factor) / ln(original_max_position_embeddings)), factor =
max_position_embeddings / original_max_position_embeddings). A stream (or `al.generate`)
that crosses original_max_position_embeddings step by step is refused at that step:
transformers recomputes the whole cache there with the long factors.
"""
from __future__ import annotations

import math

from . import llama
from .builder import Family, Names
from .config import Config, keys
from .mistral import window
from .saving import Sayable
from .weights import W, Weight

LONGROPE = ("longrope", "su", "yarn")        # Phi3Config reads "su" and "yarn" as longrope


def block_table(cfg: Config) -> list[Weight]:
    return [
        W("self_attn.qkv_proj.weight",       "self_attn/query.weight", "self_attn/key.weight",
          "self_attn/value.weight"),
        W("self_attn.o_proj.weight",         "self_attn/output.weight"),
        W("mlp.gate_up_proj.weight",         "mlp.gate_up_proj/gate.weight",
          "mlp.gate_up_proj/up.weight"),
        W("mlp.down_proj.weight",            "mlp.down_proj/weight"),
        W("input_layernorm.weight",          "input_layernorm/weight"),
        W("post_attention_layernorm.weight", "post_attention_layernorm/weight"),
    ]


def head_dim(cfg: Config) -> int:
    return cfg.int("head_dim", cfg.int("hidden_size") // cfg.int("num_attention_heads"))


def rotary(cfg: Config) -> dict:
    """The attention layers' `rotary` settings: base, fraction and, for longrope, the scaling;
    any other rope_type is refused, naming the key."""
    rope = cfg.rope()
    key = "rope_parameters" if "rope_parameters" in cfg.data else "rope_scaling"
    fraction = rope.get("partial_rotary_factor", cfg.get("partial_rotary_factor", 1.0))
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or \
            not 0 < fraction <= 1:
        raise cfg.bad("partial_rotary_factor", fraction, "a fraction in (0, 1]")
    size = head_dim(cfg)
    dims = int(size * fraction)              # transformers turns int(head size × fraction)
    out: dict = {"base": float(rope["rope_theta"]), "fraction": dims / size}
    longest = cfg.int("max_position_embeddings", 4096)
    original = cfg.int("original_max_position_embeddings", 4096)
    if rope["rope_type"] == "default":
        return out
    if rope["rope_type"] not in LONGROPE:
        raise cfg.unsupported(key, cfg.data.get(key), "supported: rope_type \"default\" and "
                              "\"longrope\" (\"su\", \"yarn\"), as Phi3Config reads them")
    out["scaling"] = longrope(cfg, rope, key, dims, longest, original)
    return out


def longrope(cfg: Config, rope: dict, key: str, dims: int, longest: int, original: int) -> dict:
    """The rotary settings' "scaling" for longrope, checked against the rotated channels."""
    for name in ("short_factor", "long_factor"):
        factors = rope.get(name)
        if not isinstance(factors, list) or len(factors) != dims // 2 or not all(
                isinstance(f, (int, float)) and not isinstance(f, bool) and math.isfinite(f)
                and f > 0 for f in factors):
            raise cfg.bad(key, cfg.data.get(key), f"a longrope {name} of {dims // 2} numbers "
                          f"> 0, one per pair of the {dims} channels of a head that rotate")
    original = rope.get("original_max_position_embeddings", original)
    if isinstance(original, bool) or not isinstance(original, int) or original < 1:
        raise cfg.bad(key, cfg.data.get(key), "an original_max_position_embeddings ≥ 1")
    factor = rope.get("factor")
    factor = longest / original if factor is None else factor
    attention = rope.get("attention_factor")
    if attention is None:                    # the paper's, as transformers computes it
        attention = 1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(original))
    if isinstance(attention, bool) or not isinstance(attention, (int, float)) or \
            not math.isfinite(attention) or attention <= 0:
        raise cfg.bad(key, cfg.data.get(key), "an attention_factor > 0")
    return {"rope_type": "longrope", "short_factor": [float(f) for f in rope["short_factor"]],
            "long_factor": [float(f) for f in rope["long_factor"]],
            "original_max_position_embeddings": original, "attention_factor": float(attention)}


SAYABLE = Sayable(
    blocks=(("num_hidden_layers", r"^layers\.(\d+)\.", None),),
    vocab=("vocab_size", "embed_tokens"), head=("lm_head", "embed_tokens"),
    hints=((r"\.mlp\.gate_up_proj$", "activation", "hidden_act"), (r"norm$", "eps", "rms_norm_eps"),
           (r"\.self_attn$", "dropout", "attention_dropout"),
           (r"\.self_attn$", "rotary", "rope_parameters"),
           (r"\.self_attn$", "window", "sliding_window"), (r"dropout$", "p", "resid_pdrop"),
           (r"\.mlp\.gate_up_proj$", "units", "intermediate_size")))


FAMILY = Family(
    architectures=("Phi3ForCausalLM", "Phi3Model"),
    keys=keys(
        read="vocab_size hidden_size intermediate_size num_hidden_layers num_attention_heads "
             "num_key_value_heads head_dim hidden_act max_position_embeddings "
             "original_max_position_embeddings rms_norm_eps resid_pdrop attention_dropout "
             "tie_word_embeddings rope_theta rope_scaling partial_rotary_factor sliding_window",
        fixed={"attention_bias": (False,)},
        # embd_pdrop: no Phi-3 model of transformers 5 applies it
        ignored="embd_pdrop"),
    heads={"Phi3ForCausalLM": "lm", "Phi3Model": "hidden"},
    block_table=block_table,
    blocks=lambda c: c.int("num_hidden_layers"),
    width=lambda c: c.int("hidden_size"),
    num_heads=lambda c: c.int("num_attention_heads"),
    num_kv_heads=llama.kv_heads,
    head_dim=head_dim,
    vocab=lambda c: c.int("vocab_size"),
    inner=lambda c: c.int("intermediate_size"),
    eps=lambda c: c.float("rms_norm_eps", 1e-5),
    attention_dropout=lambda c: c.probability("attention_dropout", 0.0),
    residual_dropout=lambda c: c.probability("resid_pdrop", 0.0),
    rotary=rotary,
    window=window,
    tied=lambda c: c.flag("tie_word_embeddings", False),
    prefix="model.",
    ignored_tensors=(".rotary_emb.inv_freq",),
    names=Names(up="mlp.gate_up_proj", down="mlp.down_proj",
                attention_dropout="resid_attn_dropout", mlp_dropout="resid_mlp_dropout"),
    sayable=SAYABLE,
)
