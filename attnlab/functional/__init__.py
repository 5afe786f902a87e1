"""Attention math and the torch modules that the attention layers build: the public names.

`attention` computes multi-head attention (exact semantics in its docstring and on the
attention page of the documentation), `naive_attention` is the plain reference the tests use,
and the modules (`AttentionModule`, `MultiHeadAttentionModule`, `SelfAttentionModule`,
`AttentionPoolModule`) compute through it. A module made by a layer takes the layer's
`AttentionOptions` (checked once, when the layer was made). The math lives in
`attnlab.functional.math`, the modules in `attnlab.functional.modules`, the rules and the
options in `attnlab.functional.rules`.
"""
from __future__ import annotations

from attnlab.functional.math import _SDPA_GQA, MaskArg, attention, naive_attention  # noqa: F401
from attnlab.functional.rules import AttentionOptions
from attnlab.functional.modules import (AttentionModule, AttentionPoolModule, MultiHeadAttentionModule,
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
