"""Attention math and the torch modules that the attention layers build: the public names.

`attention` computes multi-head attention (exact semantics in its docstring and on the
attention page of the documentation), `naive_attention` is the plain reference the tests use,
and the modules (`AttentionModule`, `MultiHeadAttentionModule`, `SelfAttentionModule`,
`AttentionPoolModule`) compute through it. A module made by a layer takes the layer's
`AttentionOptions` (checked once, when the layer was made). The math lives in
`attnlab.attention_math`, the modules in `attnlab.attention_modules`, the rules and the
options in `attnlab.attention_rules`.
"""
from __future__ import annotations

from .attention_math import _SDPA_GQA, MaskArg, attention, naive_attention  # noqa: F401
from .attention_rules import AttentionOptions
from .attention_modules import (AttentionModule, AttentionPoolModule, MultiHeadAttentionModule,
                                SelfAttentionModule)

__all__ = [
    "attention",
    "naive_attention",
    "AttentionModule",
    "MultiHeadAttentionModule",
    "SelfAttentionModule",
    "AttentionPoolModule",
    "AttentionOptions",
]
