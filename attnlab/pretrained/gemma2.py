"""Gemma 2 (`model_type` "gemma2"): `Gemma2ForCausalLM` and the base `Gemma2Model`.

Gemma's description (`gemma.py`: RMSNorm scaling by 1 + weight, GeGLU, embeddings times
√hidden_size, a tied head) with Gemma 2's differences:

- sandwich norms: a norm after each sublayer too, before its residual
  (`post_attention_layernorm`, `pre_feedforward_layernorm` → MLP → `post_feedforward_layernorm`);
- soft-capped attention scores, `attn_logit_softcapping` · tanh(scores / it) before the softmax
  (`SelfAttention(softcap=…)`, computed explicitly: the fused kernel cannot), and soft-capped
  logits, `final_logit_softcapping` · tanh(logits / it) (Scaling → Tanh → Scaling,
  `final_logit_softcapping.in`, `.tanh`, `.out`);
- scores scaled by `query_pre_attn_scalar`^-1/2 instead of head_dim^-1/2;
- sliding-window and full layers alternating as `layer_types` says (by default the even
  layers slide, over the last `sliding_window` keys);
- the activation is `hidden_activation` ("gelu_pytorch_tanh").
Only the original rotary embedding is built.
"""
from __future__ import annotations

import dataclasses

from . import gemma, llama
from .builder import Names
from .config import Config, keys
from .weights import W, Weight

SANDWICH = [
    W("pre_feedforward_layernorm.weight",    "pre_feedforward_layernorm/weight"),
    W("post_feedforward_layernorm.weight",   "post_feedforward_layernorm/weight"),
]
LAYER_TYPES = ("full_attention", "sliding_attention")


def block_table(cfg: Config) -> list[Weight]:
    bias = llama.biases(llama.ATTENTION) if cfg.flag("attention_bias", False) else []
    return llama.ATTENTION + bias + llama.MLP + llama.NORMS + SANDWICH


def layer_windows(cfg: Config) -> list[int | None]:
    """Each block's window: `sliding_window` for a "sliding_attention" layer of `layer_types`
    (absent: the even layers), None for a full one."""
    blocks = cfg.int("num_hidden_layers")
    window = cfg.int("sliding_window") if cfg.get("sliding_window", None) is not None else None
    types = cfg.get("layer_types", None)
    if types is None:
        types = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(blocks)]
    if not isinstance(types, list) or len(types) != blocks or \
            any(t not in LAYER_TYPES for t in types):
        raise cfg.bad("layer_types", types, f"a list of {blocks} (num_hidden_layers) entries, "
                      "each \"full_attention\" or \"sliding_attention\"")
    return [window if t == "sliding_attention" else None for t in types]


def cap(key: str):
    """A soft cap from the config: a number > 0, or null (none)."""
    def read(cfg: Config) -> float | None:
        value = cfg.get(key, None)
        return None if value is None else cfg.float(key, least=1e-30)
    return read


FAMILY = dataclasses.replace(
    gemma.FAMILY,
    architectures=("Gemma2ForCausalLM", "Gemma2Model"),
    keys=keys(
        read="vocab_size hidden_size intermediate_size num_hidden_layers num_attention_heads "
             "num_key_value_heads head_dim hidden_activation max_position_embeddings "
             "rms_norm_eps attention_bias attention_dropout query_pre_attn_scalar "
             "sliding_window layer_types attn_logit_softcapping final_logit_softcapping "
             "tie_word_embeddings rope_theta rope_scaling",
        fixed={"use_bidirectional_attention": (False,)},
        # transformers 4.x wrote hidden_act beside hidden_activation, which Gemma 2 reads;
        # cache_implementation chooses generate's cache, not what is computed
        ignored="hidden_act cache_implementation"),
    heads={"Gemma2ForCausalLM": "lm", "Gemma2Model": "hidden"},
    block_table=block_table,
    activation=("hidden_activation", "gelu_pytorch_tanh"),
    scale=lambda c, i: c.float("query_pre_attn_scalar", 256, least=1e-30) ** -0.5,
    softcap=cap("attn_logit_softcapping"),
    final_softcap=cap("final_logit_softcapping"),
    block_window=lambda c, i: layer_windows(c)[i],
    sandwich=True,
    names=Names(norm_2="pre_feedforward_layernorm"),
)
