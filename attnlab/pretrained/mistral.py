"""Mistral (`model_type` "mistral"): `MistralForCausalLM`, `MistralForSequenceClassification`
and the base `MistralModel`.

Llama's description (`llama.py`: RMSNorm, rotary positions, grouped key/value heads, SwiGLU)
without biases and with sliding-window attention: with `sliding_window` W a query sees itself
and the W − 1 tokens before it (`SelfAttention(window=W)`; while streaming, the key/value
cache keeps only the last W steps). `sliding_window` null is full causal attention. The
tensors have Llama's names.
"""
from __future__ import annotations

import dataclasses

from . import llama
from .config import Config, keys


def window(cfg: Config) -> int | None:
    cfg.read.add("sliding_window")
    return None if cfg.data.get("sliding_window") is None else cfg.int("sliding_window")


FAMILY = dataclasses.replace(
    llama.FAMILY,
    architectures=("MistralForCausalLM", "MistralForSequenceClassification", "MistralModel"),
    keys=keys(
        read="vocab_size hidden_size intermediate_size num_hidden_layers num_attention_heads "
             "num_key_value_heads head_dim hidden_act max_position_embeddings rms_norm_eps "
             "attention_dropout tie_word_embeddings rope_theta rope_scaling sliding_window"),
    heads={"MistralForCausalLM": "lm",
           "MistralForSequenceClassification": "last-token-classifier",
           "MistralModel": "hidden"},
    block_table=lambda c: llama.ATTENTION + llama.MLP + llama.NORMS,
    attention_bias=False, mlp_bias=False, window=window,
)
