"""Qwen3 (`model_type` "qwen3"): `Qwen3ForCausalLM` and the base `Qwen3Model`.

Qwen2's description (`qwen2.py`: Llama's blocks, sliding-window layers as `layer_types` says)
with QK-norm: each head's query and key RMS-normalised (eps `rms_norm_eps`, a learned gain
per channel: `self_attn.q_norm`, `self_attn.k_norm`) before the rotary embedding
(`SelfAttention(qk_norm=eps)`, whose module does it in its `transform_qk` hook, on every
streamed step too). `attention_bias` puts biases on all four projections; the head size is
`head_dim` (128 unless the config says). Only the original rotary embedding is built.
"""
from __future__ import annotations

import dataclasses

from . import llama, qwen2
from .config import Config, keys
from .weights import W, Weight

QK_NORMS = [
    W("self_attn.q_norm.weight",             "self_attn/q_norm.weight"),
    W("self_attn.k_norm.weight",             "self_attn/k_norm.weight"),
]


def block_table(cfg: Config) -> list[Weight]:
    bias = llama.biases(llama.ATTENTION) if cfg.flag("attention_bias", False) else []
    return llama.ATTENTION + bias + QK_NORMS + llama.MLP + llama.NORMS


FAMILY = dataclasses.replace(
    qwen2.FAMILY,
    architectures=("Qwen3ForCausalLM", "Qwen3Model"),
    keys=keys(
        read="vocab_size hidden_size intermediate_size num_hidden_layers num_attention_heads "
             "num_key_value_heads head_dim hidden_act max_position_embeddings rms_norm_eps "
             "attention_bias attention_dropout tie_word_embeddings rope_theta rope_scaling "
             "use_sliding_window sliding_window max_window_layers layer_types"),
    heads={"Qwen3ForCausalLM": "lm", "Qwen3Model": "hidden"},
    block_table=block_table,
    head_dim=lambda c: c.int("head_dim", 128),
    attention_bias=lambda c: c.flag("attention_bias", False), output_bias=None,
    qk_norm=lambda c: c.float("rms_norm_eps", 1e-6),
    rotary=llama.default_rotary,
)
