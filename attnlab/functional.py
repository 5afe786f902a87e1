"""Attention math and the torch modules that the attention layers build.

`attention` is the one place where attnlab computes multi-head attention:

    out_h = softmax(Q_h K_hᵀ · scale + bias + mask) V_h,   head h = channels h*dk:(h+1)*dk

with boolean masks where **True = attend** and optional additive score terms (a float `bias`,
ALiBi's distance bias, a sliding `window`). When weights are not requested it hands the work
to `torch.nn.functional.scaled_dot_product_attention` (flash kernels on CPU and GPU: memory
linear in T); otherwise it computes the same thing explicitly and returns the weights too.
A query whose every key is masked gets output 0 and weights 0, never NaN, on both paths and
in the gradients, and without synchronising with the device.

`naive_attention` is an independent, deliberately plain reference used by the tests. The
modules (`AttentionModule`, `MultiHeadAttentionModule`, `SelfAttentionModule`,
`AttentionPoolModule`) compute through `attention`. (The math lives in
`attnlab.attention_math`, the modules in `attnlab.attention_modules`.)
"""
from __future__ import annotations

from .attention_math import _SDPA_GQA, MaskArg, attention, naive_attention  # noqa: F401
from .attention_modules import (AttentionModule, AttentionPoolModule, MultiHeadAttentionModule,
                                SelfAttentionModule)

__all__ = [
    "attention",
    "naive_attention",
    "AttentionModule",
    "MultiHeadAttentionModule",
    "SelfAttentionModule",
    "AttentionPoolModule",
]
