"""Gemma (`model_type` "gemma"): `GemmaForCausalLM` and the base `GemmaModel`.

Llama's blocks (`llama.py`: pre-norm, rotary positions, grouped key/value heads, a gated
feed-forward) with Gemma's differences: RMSNorm scales by 1 + weight, in float32
(`RMSNorm(unit_offset=True)`); the feed-forward is GeGLU with the tanh GELU (transformers
reads `hidden_act` "gelu" as "gelu_pytorch_tanh"); the token embeddings are multiplied by
√hidden_size in the model's dtype (a `Scaling` layer, `embed_scale`); the output projection is
tied to the embedding unless `tie_word_embeddings` is false; the head size `head_dim` may differ
from hidden_size / num_attention_heads. Only the original rotary embedding is built.
"""
from __future__ import annotations

import dataclasses

from . import llama
from .common import GLU_ACTIVATIONS
from .config import Config, keys

# transformers' Gemma reads "gelu" as the tanh approximation
ACTIVATIONS = {**GLU_ACTIVATIONS, "gelu": "gelu-tanh"}


def activation(cfg: Config) -> str:
    """The GLU's activation: `hidden_act` ("gelu" is the tanh GELU); a 4.x config's
    `hidden_activation`, where it says another function, is refused by name."""
    act = cfg.choice("hidden_act", ACTIVATIONS, "gelu_pytorch_tanh")
    other = cfg.get("hidden_activation", None)
    if other is not None and ACTIVATIONS.get(other) != act:
        raise cfg.unsupported("hidden_activation", other, f"supported: null or the function of "
                              f"hidden_act ({cfg.data.get('hidden_act')!r})")
    return act


FAMILY = dataclasses.replace(
    llama.FAMILY,
    architectures=("GemmaForCausalLM", "GemmaModel"),
    keys=keys(
        read="vocab_size hidden_size intermediate_size num_hidden_layers num_attention_heads "
             "num_key_value_heads head_dim hidden_act hidden_activation max_position_embeddings "
             "rms_norm_eps attention_bias attention_dropout tie_word_embeddings rope_theta "
             "rope_scaling",
        fixed={"use_bidirectional_attention": (False,)}),
    heads={"GemmaForCausalLM": "lm", "GemmaModel": "hidden"},
    block_table=lambda c: llama.ATTENTION + (llama.biases(llama.ATTENTION) if c.flag(
        "attention_bias", False) else []) + llama.MLP + llama.NORMS,
    head_dim=lambda c: c.int("head_dim", 256),
    activation=activation, mlp_bias=False,
    norm_offset=True,
    embedding_scale=lambda c: c.int("hidden_size") ** 0.5,
    tied=lambda c: c.flag("tie_word_embeddings", True),
    rotary=llama.default_rotary,
)
