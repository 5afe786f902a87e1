"""Qwen2 (`model_type` "qwen2"): `Qwen2ForCausalLM`, `Qwen2ForSequenceClassification` (the
scores of each sequence's last token that is not `pad_token_id`) and the base `Qwen2Model`.

Llama's description (`llama.py`: RMSNorm, rotary positions, grouped key/value heads, SwiGLU)
with biases on the query, key and value projections and none on the output projection
(`SelfAttention(output_bias=False)`). Sliding-window attention is per layer, as the config's
`layer_types` says (transformers 5.x writes it; older configs say `use_sliding_window` and
`max_window_layers`: the layers from that index on slide): a "sliding_attention" layer sees
the last `sliding_window` keys, when `use_sliding_window` is on. The tensors have Llama's names.
"""
from __future__ import annotations

import dataclasses

from . import llama
from .config import Config, keys

LAYER_TYPES = ("full_attention", "sliding_attention")


def layer_windows(cfg: Config) -> list[int | None]:
    """Each block's sliding window (None: full causal attention), as transformers' Qwen2 and
    Qwen3 configs say it: `layer_types`, else the layers from `max_window_layers` on slide;
    `sliding_window` counts only with `use_sliding_window`."""
    blocks = cfg.int("num_hidden_layers")
    sliding = cfg.flag("use_sliding_window", False)
    window = cfg.int("sliding_window") if sliding and cfg.get("sliding_window", None) is not None \
        else None
    types = cfg.get("layer_types", None)
    if types is None:
        first = cfg.int("max_window_layers", 28, least=0)
        types = ["sliding_attention" if window is not None and i >= first else "full_attention"
                 for i in range(blocks)]
    if not isinstance(types, list) or len(types) != blocks or \
            any(t not in LAYER_TYPES for t in types):
        raise cfg.bad("layer_types", types, f"a list of {blocks} (num_hidden_layers) entries, "
                      "each \"full_attention\" or \"sliding_attention\"")
    return [window if t == "sliding_attention" else None for t in types]


def block_window(cfg: Config, i: int) -> int | None:
    return layer_windows(cfg)[i]


FAMILY = dataclasses.replace(
    llama.FAMILY,
    architectures=("Qwen2ForCausalLM", "Qwen2ForSequenceClassification", "Qwen2Model"),
    keys=keys(
        read="vocab_size hidden_size intermediate_size num_hidden_layers num_attention_heads "
             "num_key_value_heads head_dim hidden_act max_position_embeddings rms_norm_eps "
             "attention_dropout tie_word_embeddings rope_theta rope_scaling use_sliding_window "
             "sliding_window max_window_layers layer_types"),
    heads={"Qwen2ForCausalLM": "lm", "Qwen2ForSequenceClassification": "last-token-classifier",
           "Qwen2Model": "hidden"},
    block_table=lambda c: llama.ATTENTION + llama.biases(llama.ATTENTION[:3]) + llama.MLP +
    llama.NORMS,
    attention_bias=True, output_bias=False, mlp_bias=False, block_window=block_window,
)
