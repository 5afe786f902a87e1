"""Attention math and the torch modules that the attention layers build.

`attention` is the one place where attnlab computes multi-head attention:

    out_h = softmax(Q_h K_hᵀ · scale + mask) V_h,   head h = channels h*dk:(h+1)*dk

with boolean masks where **True = attend**. When weights are not requested it hands the work
to `torch.nn.functional.scaled_dot_product_attention` (flash kernels on CPU and GPU: memory
linear in T); otherwise it computes the same thing explicitly and returns the weights too.
A query whose every key is masked gets output 0 and weights 0, never NaN, on both paths and
in the gradients, and without synchronising with the device.

`naive_attention` is an independent, deliberately plain reference used by the tests.
"""
from __future__ import annotations

import inspect
import math
from typing import Any, Callable, Optional, Tuple, Union, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import attention_rules as rules
from ._calls import checked_as
from .errors import FormatError, SizeError

__all__ = [
    "attention",
    "naive_attention",
    "AttentionModule",
    "MultiHeadAttentionModule",
    "SelfAttentionModule",
    "AttentionPoolModule",
]

_ALIGNMENTS = rules.ALIGNMENTS
# scaled_dot_product_attention learned `enable_gqa` in torch 2.5; older versions repeat heads
_SDPA_GQA = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 5)
MaskArg = Union[None, str, Tensor]
_FN = "attention:"   # the prefix of al.attention's argument errors


# --------------------------------------------------------------------------------------------
# validation (shape compares only: it runs on every call, so it must stay cheap)
# --------------------------------------------------------------------------------------------

_divisor_hint = rules.divisor_hint


def _size(t: Tensor) -> str:
    return "×".join(str(s) for s in t.shape) if t.dim() else "a scalar"


def _check_mask_tensor(name: str, mask: Tensor, ref: Tensor, expected: list, wanted: str) -> None:
    if not isinstance(mask, Tensor):
        raise FormatError(
            f"attention: {name} must be a boolean tensor (True = attend), received "
            f"{type(mask).__name__}. Pass a torch.bool tensor of size {wanted}.")
    if mask.dtype != torch.bool:
        raise FormatError(
            f"attention: {name} must be boolean with True = attend, received dtype {mask.dtype}. "
            + ("Convert it: mask == 0 for a PyTorch-style additive float mask (0 = attend, "
               "-inf = ignore), or mask > 0 for a Keras-style 1.0 = attend mask."
               if mask.is_floating_point() else
               "Convert it, e.g. mask > 0 for a Keras-style 1 = attend mask, or ~mask for a "
               "PyTorch key_padding_mask (True = ignore)."))
    if mask.device != ref.device:
        raise FormatError(
            f"attention: {name} is on {mask.device} but the queries are on {ref.device}. "
            f"Move it with mask.to(q.device).")
    if list(mask.shape) not in expected:
        raise SizeError(
            f"attention: {name} must be {wanted}, received {_size(mask)}. "
            f"Give one entry per (query,) key as described; True = attend.")


def _validate(q, k, v, num_heads, num_kv_heads, scale, key_padding_mask, attention_mask,
              causal_alignment, dropout, need_weights=False, training=False):
    """Check every argument; return (B, Tq, Tk, dk, dv, num_kv_heads, scale as float)."""
    for name, t in (("query", q), ("key", k), ("value", v)):
        if not isinstance(t, Tensor):
            raise FormatError(
                f"attention: {name} must be a torch.Tensor of size B×T×C, received "
                f"{type(t).__name__}. Convert it with torch.as_tensor(...).")
        if t.dim() != 3:
            raise FormatError(
                f"attention: {name} must be B×T×C (3 dimensions), received {t.dim()} "
                f"dimensions of size {_size(t)}. "
                + ("Add a batch dimension with x.unsqueeze(0)." if t.dim() == 2 else
                   "Reshape it to batch × time × channels."))
        if not t.is_floating_point():
            raise FormatError(
                f"attention: {name} must be a floating-point tensor, received dtype {t.dtype}. "
                f"Convert it with x.float().")
    if not (q.dtype == k.dtype == v.dtype):
        raise FormatError(
            f"attention: query, key and value must share one dtype, received {q.dtype}, "
            f"{k.dtype} and {v.dtype}. Convert them to one dtype, e.g. .float().")
    if not (q.device == k.device == v.device):
        raise FormatError(
            f"attention: query, key and value must be on one device, received {q.device}, "
            f"{k.device} and {v.device}. Move them with .to(device).")
    B, Tq, Ck = q.shape
    Bk, Tk, Ckk = k.shape
    Bv, Tv, Cv = v.shape
    if not (B == Bk == Bv):
        raise SizeError(
            f"attention: query, key and value must have the same batch size B, received "
            f"{B}, {Bk} and {Bv}. Give all three the same number of observations.")
    if Tk != Tv:
        raise SizeError(
            f"attention: key has {Tk} time steps (Tk) but value has {Tv}; they must match. "
            f"Compute keys and values from the same sequence.")

    num_heads = rules.num_heads(_FN, num_heads)
    kv_heads = rules.num_kv_heads(_FN, num_kv_heads, num_heads, SizeError) or num_heads
    if Ck % num_heads:
        raise SizeError(
            f"attention: num_heads {num_heads} does not divide key channels {Ck} (Ck). "
            f"Use a num_heads that divides {Ck}{_divisor_hint(Ck, num_heads)}.")
    dk = Ck // num_heads
    if Ckk != kv_heads * dk:
        if kv_heads == num_heads:
            raise SizeError(
                f"attention: query has {Ck} channels but key has {Ckk} (Ck); they must match. "
                f"Project both to the same size, e.g. with a Dense({Ck}) on the keys.")
        raise SizeError(
            f"attention: with num_kv_heads {kv_heads} the key must have {kv_heads}×{dk} = "
            f"{kv_heads * dk} channels (num_kv_heads × query channels / num_heads), received "
            f"{Ckk}. Project the keys to {kv_heads * dk} channels.")
    if Cv % kv_heads:
        common = math.gcd(Cv, Ck) if kv_heads == num_heads else Cv
        raise SizeError(
            f"attention: {'num_heads' if kv_heads == num_heads else 'num_kv_heads'} "
            f"{kv_heads} does not divide value channels {Cv} (Cv). Use value channels "
            f"divisible by {kv_heads}, or a head count that divides both"
            f"{_divisor_hint(common, kv_heads)}.")
    dv = Cv // kv_heads

    scale = rules.scale(_FN, scale)
    scale_f = rules.scale_value(scale, dk)
    # any finite number: negative, or 0 (uniform over the allowed keys)
    rules.causal_alignment(_FN, causal_alignment)
    rules.dropout(_FN, dropout)
    rules.flag(_FN, "need_weights", need_weights)
    rules.flag(_FN, "training", training)
    if key_padding_mask is not None:
        _check_mask_tensor("key_padding_mask", key_padding_mask, q, [[B, Tk]],
                           f"B×Tk = {B}×{Tk}")
    rules.attention_mask(_FN, attention_mask, tensors_ok=True)
    if isinstance(attention_mask, Tensor):
        _check_mask_tensor("attention_mask", attention_mask, q, [[Tq, Tk], [B, Tq, Tk]],
                           f"Tq×Tk = {Tq}×{Tk} or B×Tq×Tk = {B}×{Tq}×{Tk}")
    return B, Tq, Tk, dk, dv, kv_heads, scale_f


# --------------------------------------------------------------------------------------------
# masks
# --------------------------------------------------------------------------------------------

def _causal(Tq: int, Tk: int, alignment: str, device) -> Tensor:
    # bottom-right shifts the diagonal so that the last query lines up with the last key
    offset = Tk - Tq if alignment == "bottom-right" else 0
    i = torch.arange(Tq, device=device).unsqueeze(1)
    j = torch.arange(Tk, device=device)
    return j <= i + offset  # Tq×Tk


def _combined_mask(Tq, Tk, key_padding_mask, attention_mask, causal_alignment, device,
                   allow_is_causal):
    """The AND of all masks, broadcastable to B×H×Tq×Tk, and whether it may mask a full row.

    Returns (mask or None, is_causal, may_empty_rows). The mask keeps the smallest broadcast
    shape (e.g. B×1×1×Tk for key padding alone) so that nothing O(B·Tq·Tk) is built when it
    is not needed.
    """
    if isinstance(attention_mask, str):  # "causal"
        offset = Tk - Tq if causal_alignment == "bottom-right" else 0
        if key_padding_mask is None and offset == 0:
            if allow_is_causal:
                # the fused kernel skips the masked half instead of reading a mask
                return None, True, False
            return _causal(Tq, Tk, causal_alignment, device)[None, None], False, False
        mask = _causal(Tq, Tk, causal_alignment, device)[None, None]  # 1×1×Tq×Tk
        # a causal row is empty only when bottom-right alignment pushes it past the first key
        may_empty = offset < 0
    elif attention_mask is not None:
        mask = attention_mask.unsqueeze(-3)  # (B×)1×Tq×Tk
        if mask.dim() == 3:
            mask = mask.unsqueeze(0)  # 1×1×Tq×Tk
        may_empty = True
    else:
        mask, may_empty = None, False
    if key_padding_mask is not None:
        kpm = key_padding_mask[:, None, None, :]  # B×1×1×Tk
        mask = kpm if mask is None else mask & kpm
        may_empty = True
    return mask, False, may_empty


# --------------------------------------------------------------------------------------------
# attention
# --------------------------------------------------------------------------------------------

@checked_as("al.attention")   # an unknown keyword (is_causal=…) is a SignatureError naming it
def attention(q: Tensor, k: Tensor, v: Tensor, num_heads: int, scale: Union[str, float] = "auto",
              key_padding_mask: Optional[Tensor] = None, attention_mask: MaskArg = None,
              causal_alignment: str = "top-left", dropout: float = 0.0,
              need_weights: bool = False, training: bool = False,
              num_kv_heads: Optional[int] = None) -> Union[Tensor, Tuple[Tensor, Tensor]]:
    """Multi-head scaled dot-product attention, `B×Tq×Ck, B×Tk×Ck, B×Tk×Cv → B×Tq×Cv`.

    Channels split into `num_heads` contiguous blocks (head h uses channels h*dk:(h+1)*dk,
    dk = Ck/num_heads); per head `A = softmax(Q_h K_hᵀ · scale)` over the keys, `out_h = A V_h`;
    the heads are concatenated. Masks are boolean, **True = attend**, and combine by AND. A query
    with no visible key gets output 0 (and weights 0); gradients stay finite.

    Parameters
    ----------
    q, k, v : Tensor
        Queries B×Tq×Ck, keys B×Tk×Ck, values B×Tk×Cv.
    num_heads : int
        The number of heads; it divides Ck and Cv.
    scale : "auto" or float
        The factor on Q Kᵀ; "auto" is 1/sqrt(dk). Any finite number: a negative one favours the
        least similar keys, 0 gives uniform attention over the allowed keys.
    key_padding_mask : Tensor, optional
        B×Tk, False marks padding.
    attention_mask : "causal" or Tensor, optional
        "causal": query i sees keys j ≤ i; or a boolean Tq×Tk or B×Tq×Tk tensor.
    causal_alignment : "top-left" or "bottom-right"
        With "bottom-right" the causal rule is j ≤ i + Tk − Tq, so the last query sees the last
        key (decoding with a cache).
    dropout : float
        Dropout on A, applied only when `training` is True.
    need_weights : bool
        Also return the weights A, B×heads×Tq×Tk (the softmax probabilities, before dropout).
    training : bool
        Whether dropout applies.
    num_kv_heads : int, optional
        Grouped-query attention: k is B×Tk×(num_kv_heads·dk) and v B×Tk×(num_kv_heads·dv); kv head
        g serves query heads g·r … g·r + r − 1, r = num_heads/num_kv_heads (as torch's
        `enable_gqa`); the output is B×Tq×(num_heads·dv).

    Returns
    -------
    Tensor or (Tensor, Tensor)
        The output B×Tq×Cv, and with `need_weights` the weights.
    """
    B, Tq, Tk, dk, dv, kv_heads, scale_f = _validate(
        q, k, v, num_heads, num_kv_heads, scale, key_padding_mask, attention_mask,
        causal_alignment, dropout, need_weights, training)
    p = float(dropout) if training else 0.0
    H = num_heads
    fused = not need_weights and Tk > 0  # softmax over zero keys is the explicit path's job
    # torch's is_causal kernels mask before they scale (-inf · 0 is NaN on the CPU), so scale 0
    # takes the causal rule as an explicit mask; a negative scale reaches the kernel as
    # |scale| on -Q (the same scores, exactly), for kernels that assume a positive one
    mask, is_causal, may_empty = _combined_mask(
        Tq, Tk, key_padding_mask, attention_mask, causal_alignment, q.device,
        allow_is_causal=fused and scale_f != 0)
    if may_empty:
        # A row without any visible key would be softmax(all -inf) = NaN. Open such rows to
        # every key (finite math, no host sync) and zero their output afterwards.
        row_any = mask.any(-1, keepdim=True)  # (B|1)×1×(Tq|1)×1
        mask = mask | ~row_any

    qh = q.reshape(B, Tq, H, dk).transpose(1, 2)         # B×H×Tq×dk
    kh = k.reshape(B, Tk, kv_heads, dk).transpose(1, 2)  # B×Hkv×Tk×dk
    vh = v.reshape(B, Tk, kv_heads, dv).transpose(1, 2)  # B×Hkv×Tk×dv

    gqa = kv_heads != H
    if gqa and not (fused and _SDPA_GQA):
        kh = kh.repeat_interleave(H // kv_heads, dim=1)  # B×H×Tk×dk
        vh = vh.repeat_interleave(H // kv_heads, dim=1)  # B×H×Tk×dv
        gqa = False
    if fused:
        extra = {"enable_gqa": True} if gqa else {}
        y = F.scaled_dot_product_attention(
            -qh if scale_f < 0 else qh, kh, vh, attn_mask=mask, dropout_p=p,
            is_causal=is_causal, scale=abs(scale_f), **extra)  # B×H×Tq×dv
        weights = None
    else:
        scores = torch.matmul(qh, kh.transpose(-2, -1)) * scale_f  # B×H×Tq×Tk
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        if scores.dtype in (torch.float16, torch.bfloat16):
            # a low-precision softmax loses the small weights; accumulate in float32
            weights = torch.softmax(scores.float(), dim=-1).to(scores.dtype)
        else:
            weights = torch.softmax(scores, dim=-1)
        if may_empty:
            weights = weights.masked_fill(~row_any, 0.0)
        y = torch.matmul(F.dropout(weights, p) if p > 0 else weights, vh)  # B×H×Tq×dv

    out = y.transpose(1, 2).reshape(B, Tq, H * dv)  # B×Tq×Cv
    if may_empty and fused:
        out = out.masked_fill(~row_any[:, 0], 0.0)  # (B|1)×(Tq|1)×1 broadcast over channels
    # need_weights took the explicit path, so the weights exist
    return (out, cast(Tensor, weights)) if need_weights else out


# the modules call the function itself: no wrapper frame on the hot path
_attention: Callable[..., Any] = inspect.unwrap(attention)


def naive_attention(q: Tensor, k: Tensor, v: Tensor, num_heads: int, scale="auto",
                    key_padding_mask: Optional[Tensor] = None, attention_mask: MaskArg = None,
                    causal_alignment: str = "top-left", need_weights: bool = False,
                    num_kv_heads: Optional[int] = None):
    """The textbook formula, written independently of `attention`, as the tests' reference.

    Same contract as `attention` (without dropout). It builds the full B×Tq×Tk mask and
    B×H×Tq×Tk scores, so its memory is quadratic in T; call it in float64 for a reference.
    """
    B, Tq, Tk, dk, dv, kv_heads, scale_f = _validate(
        q, k, v, num_heads, num_kv_heads, scale, key_padding_mask, attention_mask,
        causal_alignment, 0.0, need_weights)
    H, r = num_heads, num_heads // kv_heads
    allowed = torch.ones(B, Tq, Tk, dtype=torch.bool, device=q.device)
    if isinstance(attention_mask, str):
        shift = Tk - Tq if causal_alignment == "bottom-right" else 0
        query_pos = torch.arange(Tq, device=q.device).view(1, Tq, 1)
        key_pos = torch.arange(Tk, device=q.device).view(1, 1, Tk)
        allowed = allowed & (key_pos <= query_pos + shift)
    elif attention_mask is not None:
        allowed = allowed & attention_mask.expand(B, Tq, Tk)
    if key_padding_mask is not None:
        allowed = allowed & key_padding_mask.view(B, 1, Tk)
    allowed = allowed.unsqueeze(1)  # B×1×Tq×Tk

    Q = q.view(B, Tq, H, dk)
    K = k.view(B, Tk, kv_heads, 1, dk).expand(B, Tk, kv_heads, r, dk).reshape(B, Tk, H, dk)
    V = v.view(B, Tk, kv_heads, 1, dv).expand(B, Tk, kv_heads, r, dv).reshape(B, Tk, H, dv)
    s = torch.einsum("bqhd,bkhd->bhqk", Q, K) * scale_f  # B×H×Tq×Tk
    # softmax by hand: the max is a constant shift, so it is taken without gradient
    m = s.masked_fill(~allowed, float("-inf")).amax(-1, keepdim=True).detach()
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(torch.where(allowed, s - m, torch.full_like(s, float("-inf"))))
    denom = e.sum(-1, keepdim=True)
    w = e / torch.where(denom > 0, denom, torch.ones_like(denom))  # empty rows: 0 / 1 = 0
    out = torch.einsum("bhqk,bkhd->bqhd", w, V).reshape(B, Tq, H * dv)
    return (out, w) if need_weights else out


# --------------------------------------------------------------------------------------------
# modules
# --------------------------------------------------------------------------------------------

def _check_module_heads(cls: str, num_heads, num_kv_heads, key_channels, value_channels):
    num_heads = rules.num_heads(cls, num_heads)
    kv = rules.num_kv_heads(cls, num_kv_heads, num_heads, SizeError) or num_heads
    for what, c in (("key", key_channels), ("value", value_channels)):
        if c % num_heads:
            raise SizeError(
                f"{cls}: num_heads {num_heads} does not divide {what} channels {c}. Use a "
                f"num_heads that divides {c}{_divisor_hint(c, num_heads)}, or {what} "
                f"channels that are a multiple of {num_heads}.")
    return kv


def _init_linear(lin: nn.Linear) -> None:
    # Glorot weights and zero biases: MATLAB's and Keras' defaults for attention projections
    nn.init.xavier_uniform_(lin.weight)
    if lin.bias is not None:
        nn.init.zeros_(lin.bias)


_UNSET: Any = object()   # "the module's own setting" for a keyword left out


def _key_mask(key_padding_mask, port_mask, mask_port):
    """The key padding mask (B×Tk, True = attend): the explicit one AND the key sequence's
    padding (`masks=`) AND the optional `mask` port (B×Tk or B×Tk×C, nonzero = attend)."""
    key_mask = key_padding_mask
    if port_mask is not None:
        key_mask = port_mask if key_mask is None else key_mask & port_mask
    if mask_port:
        m = mask_port[0]
        m = (m[..., 0] if m.dim() == 3 else m) != 0                          # B×Tk×C → B×Tk
        key_mask = m if key_mask is None else key_mask & m
    return key_mask


class AttentionModule(nn.Module):
    """Attention without learnables, as the `Attention` layer builds it:
    `B×Tq×Ck, B×Tk×Ck, B×Tk×Cv (, mask B×Tk) → B×Tq×Cv` (plus `B×H×Tq×Tk` weights when
    `need_weights`).

    The stages every attention module shares, which streaming reuses one by one:
    `project_q(x)`, `project_kv(key, value)`, `transform_qk(q, k, q_pos, k_pos)` (identity here:
    the place for a position-dependent map of queries and keys such as a rotary embedding) and
    `attend(q, k, v, …)` (the attention and the output map). `forward(query, key, value,
    *mask_port, masks=…)` follows the plan's calling convention: ports positional, the input
    sequences' padding masks by keyword; `key_padding_mask`, `attention_mask`,
    `causal_alignment` and `need_weights` override the module's settings for one call.
    """

    def __init__(self, num_heads: int, scale="auto", dropout: float = 0.0,
                 attention_mask: Optional[str] = None, causal_alignment: str = "top-left",
                 need_weights: bool = False, num_kv_heads: Optional[int] = None):
        super().__init__()
        name = type(self).__name__
        self.num_heads = rules.num_heads(name, num_heads)
        self.num_kv_heads = rules.num_kv_heads(name, num_kv_heads, self.num_heads, SizeError) \
            or self.num_heads
        self.scale = rules.scale(name, scale)
        self.dropout = rules.dropout(name, dropout)
        self.attention_mask = rules.attention_mask(name, attention_mask)
        self.causal_alignment = rules.causal_alignment(name, causal_alignment)
        self.scores = rules.flag(name, "need_weights", need_weights)   # weights by default

    def _gqa(self) -> Optional[int]:
        return None if self.num_kv_heads == self.num_heads else self.num_kv_heads

    def project_q(self, x: Tensor) -> Tensor:
        return x

    def project_kv(self, key: Tensor, value: Tensor) -> Tuple[Tensor, Tensor]:
        return key, value

    def transform_qk(self, q: Tensor, k: Tensor, q_pos: Union[int, Tensor],
                     k_pos: Union[int, Tensor]) -> Tuple[Tensor, Tensor]:
        """Queries B×Tq×Ck and keys B×Tk×Ckv after projection, before attention. `q_pos` and
        `k_pos` are the absolute positions of their steps: an int (the first step's position,
        the others follow one by one) or a 1-D tensor with one position per step. Identity
        here; override it for position-dependent maps (a rotary embedding). The full forward
        passes 0, 0; a stream passes the steps' positions in the stream."""
        return q, k

    def output_map(self, y: Tensor) -> Tensor:
        return y

    def attend(self, q: Tensor, k: Tensor, v: Tensor, key_padding_mask: Optional[Tensor] = None,
               attention_mask: MaskArg = None, causal_alignment: str = "top-left",
               need_weights: bool = False):
        """Attention of projected (and transformed) q, k, v, then the output map."""
        r = _attention(q, k, v, self.num_heads, self.scale, key_padding_mask, attention_mask,
                       causal_alignment, self.dropout, need_weights, self.training, self._gqa())
        if need_weights:
            return self.output_map(r[0]), r[1]
        return self.output_map(r)

    def _settings(self, attention_mask, causal_alignment, need_weights):
        return (self.attention_mask if attention_mask is _UNSET else attention_mask,
                self.causal_alignment if causal_alignment is None else causal_alignment,
                self.scores if need_weights is None else need_weights)

    def forward(self, query: Tensor, key: Tensor, value: Tensor, *mask_port: Tensor,
                masks=None, key_padding_mask: Optional[Tensor] = None,
                attention_mask: MaskArg = _UNSET, causal_alignment: Optional[str] = None,
                need_weights: Optional[bool] = None):
        kpm = _key_mask(key_padding_mask, masks[1] if masks else None, mask_port)
        am, align, nw = self._settings(attention_mask, causal_alignment, need_weights)
        k, v = self.project_kv(key, value)
        q, k = self.transform_qk(self.project_q(query), k, 0, 0)
        return self.attend(q, k, v, kpm, am, align, nw)


class MultiHeadAttentionModule(AttentionModule):
    """Multi-head (cross-)attention with learned projections.

    `B×Tq×Cq, B×Tk×Ck_in, B×Tk×Cv_in → B×Tq×Cout` (plus `B×H×Tq×Tk` weights on request).

    Learnables: four `nn.Linear` named `query` (Cq→key_channels), `key` (Ck_in→key_channels,
    or num_kv_heads·dk with grouped-query attention), `value` (Cv_in→value_channels, or
    num_kv_heads·dv) and `output` (value_channels→Cout); weights are out×in, so they copy
    to and from `torch.nn.MultiheadAttention` and MATLAB's QueryWeights… directly
    (docs/attention.md). `value_channels` defaults to `key_channels`, Cout to Cq.
    The stages and the calling convention are those of `AttentionModule`.
    """

    def __init__(self, query_channels: int, key_channels_in: int, value_channels_in: int,
                 num_heads: int, key_channels: int, value_channels: Optional[int] = None,
                 output_channels: Optional[int] = None, num_kv_heads: Optional[int] = None,
                 scale="auto", dropout: float = 0.0, bias: bool = True,
                 attention_mask: Optional[str] = None, causal_alignment: str = "top-left",
                 need_weights: bool = False):
        value_channels = key_channels if value_channels is None else value_channels
        output_channels = query_channels if output_channels is None else output_channels
        kv = _check_module_heads(type(self).__name__, num_heads, num_kv_heads, key_channels,
                                 value_channels)
        super().__init__(num_heads, scale, dropout, attention_mask, causal_alignment,
                         need_weights, kv)
        kv_key = key_channels // num_heads * kv
        kv_value = value_channels // num_heads * kv
        self.query = nn.Linear(query_channels, key_channels, bias=bias)
        self.key = nn.Linear(key_channels_in, kv_key, bias=bias)
        self.value = nn.Linear(value_channels_in, kv_value, bias=bias)
        self.output = nn.Linear(value_channels, output_channels, bias=bias)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for lin in (self.query, self.key, self.value, self.output):
            _init_linear(lin)

    def project_q(self, x: Tensor) -> Tensor:
        return self.query(x)

    def project_kv(self, key: Tensor, value: Tensor) -> Tuple[Tensor, Tensor]:
        return self.key(key), self.value(value)

    def output_map(self, y: Tensor) -> Tensor:
        return self.output(y)


class SelfAttentionModule(MultiHeadAttentionModule):
    """Multi-head self-attention: `B×T×C → B×T×Cout` (plus `B×H×T×T` weights on request).

    The learnables are those of `MultiHeadAttentionModule` with query = key = value input:
    four `nn.Linear` named `query`, `key`, `value`, `output`. The three input projections run
    as one matmul against their concatenated weights (`project_qkv`; the parameters stay
    separate). `forward(x, *mask_port, masks=…)`: the plan's calling convention.
    """

    def __init__(self, channels: int, num_heads: int, key_channels: int,
                 value_channels: Optional[int] = None, output_channels: Optional[int] = None,
                 num_kv_heads: Optional[int] = None, scale="auto", dropout: float = 0.0,
                 bias: bool = True, attention_mask: Optional[str] = None,
                 need_weights: bool = False):
        super().__init__(channels, channels, channels, num_heads, key_channels, value_channels,
                         output_channels, num_kv_heads, scale, dropout, bias, attention_mask,
                         "top-left", need_weights)

    def fused_qkv(self) -> Tuple[Tensor, Optional[Tensor]]:
        """The q, k, v weights (and biases) concatenated: one matmul projects all three."""
        w = torch.cat((self.query.weight, self.key.weight, self.value.weight))
        b = None if self.query.bias is None else torch.cat(
            (self.query.bias, self.key.bias, self.value.bias))
        return w, b

    def qkv(self, x: Tensor, fused: Optional[Tuple[Tensor, Optional[Tensor]]] = None) -> Tensor:
        """q, k, v of x side by side, B×T×(Ck + Ck_kv + Cv_kv), in one matmul; `fused`: weights
        from `fused_qkv` made beforehand (a stream makes them once)."""
        w, b = self.fused_qkv() if fused is None else fused
        return F.linear(x, w, b)

    def project_qkv(self, x: Tensor, fused: Optional[Tuple[Tensor, Optional[Tensor]]] = None):
        """q, k, v of x in one pass: views of `qkv(x, fused)`, no copies."""
        qkv = self.qkv(x, fused)
        return qkv.split((self.query.out_features, self.key.out_features,
                          self.value.out_features), dim=-1)

    # one input instead of three: a narrower signature than the parent's, by design
    def forward(self, x: Tensor, *mask_port: Tensor, masks=None,  # type: ignore[override]
                key_padding_mask: Optional[Tensor] = None, attention_mask: MaskArg = _UNSET,
                need_weights: Optional[bool] = None):
        if not isinstance(x, Tensor) or x.dim() != 3:
            raise FormatError(
                f"{type(self).__name__}: input must be B×T×C (3 dimensions), received "
                f"{_size(x) if isinstance(x, Tensor) else type(x).__name__}. "
                f"Add a batch dimension with x.unsqueeze(0) or reshape it to B×T×C.")
        if x.shape[-1] != self.query.in_features:
            raise SizeError(
                f"{type(self).__name__}: input has {x.shape[-1]} channels, expected "
                f"{self.query.in_features}. Give it {self.query.in_features} channels or "
                f"build the module for {x.shape[-1]}.")
        kpm = _key_mask(key_padding_mask, masks[0] if masks else None, mask_port)
        am, _, nw = self._settings(attention_mask, None, need_weights)
        q, k, v = self.project_qkv(x)
        q, k = self.transform_qk(q, k, 0, 0)
        return self.attend(q, k, v, kpm, am, "top-left", nw)


class AttentionPoolModule(nn.Module):
    """Attention pooling over time: `B×T×C (+ key_padding_mask B×T) → B×C`.

    A learned query (`query_vector`, 1×1×C) attends over the sequence with `num_heads` heads.
    Learnables: `query_vector`, and `nn.Linear`s `key`, `value`, `output` (C→C each). There is
    no `query` projection: a linear map of a learned constant is just another learned
    constant. `query_vector` starts at zero, so the layer starts as masked mean pooling
    (then `output`). A sequence with every step padded pools to 0 before `output`.
    """

    def __init__(self, channels: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        _check_module_heads(type(self).__name__, num_heads, None, channels, channels)
        self.num_heads, self.dropout = num_heads, dropout
        self.query_vector = nn.Parameter(torch.zeros(1, 1, channels))
        self.key = nn.Linear(channels, channels, bias=bias)
        self.value = nn.Linear(channels, channels, bias=bias)
        self.output = nn.Linear(channels, channels, bias=bias)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.zeros_(self.query_vector)
        for lin in (self.key, self.value, self.output):
            _init_linear(lin)

    def forward(self, x: Tensor, *, masks=None, key_padding_mask: Optional[Tensor] = None,
                need_weights: bool = False):
        """`masks=(mask,)`: the input's padding (the plan's calling convention), ANDed with
        `key_padding_mask`."""
        key_padding_mask = _key_mask(key_padding_mask, masks[0] if masks else None, ())
        if not isinstance(x, Tensor) or x.dim() != 3:
            raise FormatError(
                f"{type(self).__name__}: input must be B×T×C (3 dimensions), received "
                f"{_size(x) if isinstance(x, Tensor) else type(x).__name__}. "
                f"Add a batch dimension with x.unsqueeze(0).")
        q = self.query_vector.expand(x.shape[0], 1, -1)  # B×1×C
        r = _attention(q, self.key(x), self.value(x), self.num_heads, "auto", key_padding_mask,
                      None, "top-left", self.dropout, need_weights, self.training)
        y = r[0] if isinstance(r, tuple) else r
        out = self.output(y.squeeze(1))  # B×C
        return (out, r[1]) if need_weights else out
