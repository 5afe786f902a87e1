"""Mistral (`model_type` "mistral"): `MistralForCausalLM` and the base `MistralModel`.

Llama's graph (`llama.py`: RMSNorm, rotary positions, grouped key/value heads, SwiGLU, no
biases) with sliding-window attention: with `sliding_window` W a query sees itself and the
W − 1 tokens before it (`SelfAttention(window=W)`; while streaming, the key/value cache keeps
only the last W steps). `sliding_window` null is full causal attention. The tensors have
Llama's names.
"""
from __future__ import annotations

from ..network import Network
from . import llama
from .config import Config, keys
from .weights import Weight

ARCHITECTURES = ("MistralForCausalLM", "MistralModel")

KEYS = keys(
    read="vocab_size hidden_size intermediate_size num_hidden_layers num_attention_heads "
         "num_key_value_heads head_dim hidden_act max_position_embeddings rms_norm_eps "
         "attention_dropout tie_word_embeddings rope_theta rope_scaling sliding_window",
)

IGNORED_TENSORS = llama.IGNORED_TENSORS


def weights(cfg: Config, architecture: str) -> list[Weight]:
    return llama.weights(cfg, architecture, biases=False)


def network(cfg: Config, architecture: str) -> Network:
    window = cfg.data.get("sliding_window")
    cfg.read.add("sliding_window")
    return llama.network(cfg, architecture,
                         None if window is None else cfg.int("sliding_window"), biases=False)
