"""Mixtral (`model_type` "mixtral"; Mistral AI's Mixtral 8x7B, 8x22B): `MixtralForCausalLM` and
the base `MixtralModel`.

Mistral's blocks (RMSNorm, causal SelfAttention with rotary positions, grouped key/value heads
and the optional sliding window) whose feed-forward is a sparse mixture of experts,
`L.MixtureOfExperts(num_local_experts, intermediate_size, top_k=num_experts_per_tok)`: a router
(`block_sparse_moe.gate`) picks each token's experts, whose SwiGLU outputs are summed with the
router's renormalised probabilities. The file holds each expert's projections apart, as
Mistral AI and transformers write them (`block_sparse_moe.experts.{e}.w1` the gate, `w3` the up
projection, `w2` the down projection), loaded into the layer's learnables of the same expert.

`router_jitter_noise` other than 0 (noise on the router's input in training) is refused by
name; `output_router_logits` and `router_aux_loss_coef` are the training loss's and change
no output.
"""
from __future__ import annotations

from . import llama
from .builder import Family, Names
from .config import Config, keys
from .mistral import window
from .saving import Sayable
from .weights import W, Weight

ATTENTION = [
    W("self_attn.q_proj.weight",             "self_attn/query.weight"),
    W("self_attn.k_proj.weight",             "self_attn/key.weight"),
    W("self_attn.v_proj.weight",             "self_attn/value.weight"),
    W("self_attn.o_proj.weight",             "self_attn/output.weight"),
    W("input_layernorm.weight",              "input_layernorm/weight"),
    W("post_attention_layernorm.weight",     "post_attention_layernorm/weight"),
    W("block_sparse_moe.gate.weight",        "block_sparse_moe/router.weight"),
]
# an expert's tensors (after "block_sparse_moe.experts.{e}.") and learnables (after
# "block_sparse_moe/experts.{e}.")
EXPERT = [("w1.weight", "gate.weight"), ("w3.weight", "up.weight"), ("w2.weight", "down.weight")]


def block_table(cfg: Config) -> list[Weight]:
    return ATTENTION + [W(f"block_sparse_moe.experts.{e}.{tensor}",
                          f"block_sparse_moe/experts.{e}.{learnable}")
                        for e in range(cfg.int("num_local_experts", 8))
                        for tensor, learnable in EXPERT]


def experts_per_token(cfg: Config) -> int:
    k, n = cfg.int("num_experts_per_tok", 2), cfg.int("num_local_experts", 8)
    if k > n:
        raise cfg.bad("num_experts_per_tok", k, f"at most num_local_experts ({n})")
    return k


SAYABLE = Sayable(
    blocks=(("num_hidden_layers", r"^layers\.(\d+)\.", None),),
    vocab=("vocab_size", "embed_tokens"), head=("lm_head", "embed_tokens"),
    hints=((r"\.block_sparse_moe$", "activation", "hidden_act"),
           (r"\.block_sparse_moe$", "units", "intermediate_size"),
           (r"\.block_sparse_moe$", "num_experts", "num_local_experts"),
           (r"\.block_sparse_moe$", "top_k", "num_experts_per_tok"),
           (r"norm$", "eps", "rms_norm_eps"), (r"\.self_attn$", "dropout", "attention_dropout"),
           (r"\.self_attn$", "rotary", "rope_theta"), (r"\.self_attn$", "window", "sliding_window")))


FAMILY = Family(
    architectures=("MixtralForCausalLM", "MixtralModel"),
    keys=keys(
        read="vocab_size hidden_size intermediate_size num_hidden_layers num_attention_heads "
             "num_key_value_heads head_dim hidden_act max_position_embeddings rms_norm_eps "
             "attention_dropout tie_word_embeddings rope_theta rope_scaling sliding_window "
             "num_local_experts num_experts_per_tok",
        fixed={"router_jitter_noise": (0.0, 0)},
        ignored="output_router_logits router_aux_loss_coef"),
    heads={"MixtralForCausalLM": "lm", "MixtralModel": "hidden"},
    block_table=block_table,
    blocks=lambda c: c.int("num_hidden_layers"),
    width=lambda c: c.int("hidden_size"),
    num_heads=lambda c: c.int("num_attention_heads"),
    num_kv_heads=llama.kv_heads,
    head_dim=lambda c: c.int("head_dim", c.int("hidden_size") // c.int("num_attention_heads")),
    vocab=lambda c: c.int("vocab_size"),
    inner=lambda c: c.int("intermediate_size"),
    eps=lambda c: c.float("rms_norm_eps", 1e-5),
    attention_dropout=lambda c: c.probability("attention_dropout", 0.0),
    rotary=llama.rotary,
    window=window,
    ffn="moe",
    experts=lambda c: c.int("num_local_experts", 8),
    experts_per_token=experts_per_token,
    tied=lambda c: c.flag("tie_word_embeddings", False),
    prefix="model.",
    ignored_tensors=(".rotary_emb.inv_freq",),
    names=Names(tokens="embed_tokens", block="layers.{i}", norm_1="input_layernorm",
                attention="self_attn", norm_2="post_attention_layernorm",
                up="block_sparse_moe", final_norm="norm"),
    sayable=SAYABLE,
)
