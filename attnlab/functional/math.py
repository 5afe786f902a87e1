"""Attention math (public as `attnlab.functional`, with the modules of
`attnlab.functional.modules`).

`attention` is the one place where attnlab computes multi-head attention:

    out_h = softmax(Q_h K_hᵀ · scale + bias + mask) V_h,   head h = channels h*dk:(h+1)*dk

with boolean masks where **True = attend** and optional additive score terms (a float `bias`,
ALiBi's distance bias, a sliding `window`). When weights are not requested it hands the work
to `torch.nn.functional.scaled_dot_product_attention` (flash kernels on CPU and GPU: memory
linear in T); otherwise it computes the same thing explicitly and returns the weights too.
A query whose every key is masked gets output 0 and weights 0, never NaN, on both paths and
in the gradients, and without synchronising with the device.

`naive_attention` is an independent, deliberately plain reference used by the tests.
"""
from __future__ import annotations

import math
from typing import Callable, Optional, Tuple, Union, cast

import torch
import torch.nn.functional as F
from torch import Tensor

from attnlab.functional import rules
from attnlab.core.calls import checked_as
from attnlab.functional.bias import (WIDEST_WINDOW, aligned_relative_positions, alibi_bias,
                                     alibi_slopes_tensor, window_mask)
from attnlab.core.errors import AttnlabError, FormatError, SizeError, where

__all__ = ["attention", "naive_attention"]

_ALIGNMENTS = rules.ALIGNMENTS
# scaled_dot_product_attention learned `enable_gqa` in torch 2.5; older versions repeat heads
_SDPA_GQA = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 5)
MaskArg = Union[None, str, Tensor]
_FN = "attention:"   # the prefix of al.attention's argument errors
# where a tensor argument came from: `at(argument) → (layer name, port or None)`, given by
# the modules of named layers; None for al.attention itself
Locate = Optional[Callable[[str], Tuple[Optional[str], Optional[str]]]]


# --------------------------------------------------------------------------------------------
# validation (shape compares only: it runs on every call, so it must stay cheap)
# --------------------------------------------------------------------------------------------

_divisor_hint = rules.divisor_hint


def _size(t: Tensor) -> str:
    return "×".join(str(s) for s in t.shape) if t.dim() else "a scalar"


def _fail(cls: type[AttnlabError], at: Locate, arg: str, text: str, expected: str,
          received: str, fix: str) -> AttnlabError:
    """The error of a tensor argument `arg` that does not fit: al.attention's own words
    (`attention: ` + `text`), or, when `at` places the argument at a layer's port, that
    layer's: `layer 'NAME' port 'PORT': expected …, received …. fix` (`.layer`, `.port`)."""
    if at is None:
        return cls(f"attention: {text}")
    layer, port = at(arg)
    if layer is None:
        return cls(f"attention: {text}")
    what = "" if port is not None else f"{arg}: "
    err = cls(f"{where(layer, port)}{what}expected {expected}, received {received}. {fix}")
    err.layer, err.port = layer, port
    return err


def _check_mask_tensor(name: str, mask: Tensor, ref: Tensor, expected: list, wanted: str,
                       at: Locate = None) -> None:
    if not isinstance(mask, Tensor):
        raise _fail(FormatError, at, name, f"{name} must be a boolean tensor (True = attend), "
                    f"received {type(mask).__name__}. Pass a torch.bool tensor of size {wanted}.",
                    f"a boolean tensor of size {wanted}", type(mask).__name__,
                    "Pass a torch.bool tensor (True = attend).")
    if mask.dtype != torch.bool:
        fix = ("Convert it: mask == 0 for a PyTorch-style additive float mask (0 = attend, "
               "-inf = ignore), or mask > 0 for a Keras-style 1.0 = attend mask."
               if mask.is_floating_point() else
               "Convert it, e.g. mask > 0 for a Keras-style 1 = attend mask, or ~mask for a "
               "PyTorch key_padding_mask (True = ignore).")
        raise _fail(FormatError, at, name, f"{name} must be boolean with True = attend, "
                    f"received dtype {mask.dtype}. {fix}", "a boolean tensor (True = attend)",
                    f"dtype {mask.dtype}", fix)
    if mask.device != ref.device:
        raise _fail(FormatError, at, name, f"{name} is on {mask.device} but the queries are on "
                    f"{ref.device}. Move it with mask.to(q.device).",
                    f"a tensor on {ref.device} (the queries' device)", f"one on {mask.device}",
                    "Move it with mask.to(q.device).")
    if list(mask.shape) not in expected:
        raise _fail(SizeError, at, name, f"{name} must be {wanted}, received {_size(mask)}. "
                    f"Give one entry per (query,) key as described; True = attend.",
                    wanted, _size(mask), "Give one entry per (query,) key step; True = attend.")


def _check_bias(bias: Tensor, ref: Tensor, B: int, H: int, Tq: int, Tk: int,
                at: Locate = None) -> None:
    wanted = f"B×H×Tq×Tk = {B}×{H}×{Tq}×{Tk}"
    if not isinstance(bias, Tensor) or not bias.is_floating_point():
        got = str(bias.dtype) if isinstance(bias, Tensor) else type(bias).__name__
        fix = "Give a float tensor; a boolean mask goes to attention_mask instead."
        raise _fail(FormatError, at, "bias", f"bias must be a floating-point tensor "
                    f"broadcastable to {wanted} (added to the scores before the softmax), "
                    f"received {got}. {fix}",
                    f"a floating-point tensor broadcastable to {wanted}", got, fix)
    if bias.device != ref.device:
        raise _fail(FormatError, at, "bias", f"bias is on {bias.device} but the queries are on "
                    f"{ref.device}. Move it with bias.to(q.device).",
                    f"a tensor on {ref.device} (the queries' device)", f"one on {bias.device}",
                    "Move it with bias.to(q.device).")
    shape = list(bias.shape)
    full = [B, H, Tq, Tk]
    if len(shape) > 4 or any(s not in (1, f) for s, f in zip(shape[::-1], full[::-1])):
        fix = f"Give it sizes 1 or B, 1 or H, Tq and Tk, e.g. 1×{H}×{Tq}×{Tk}."
        raise _fail(SizeError, at, "bias", f"bias must be broadcastable to {wanted}, received "
                    f"{_size(bias)}. {fix}", f"a tensor broadcastable to {wanted}",
                    _size(bias), fix + " The bias is added to the scores before the softmax.")


def _check_arguments(num_heads, num_kv_heads, scale, attention_mask, causal_alignment, dropout,
                     need_weights, training, window, alibi):
    """al.attention's argument rules (`rules`); return (num_heads, the number of
    key/value heads, scale). A module's options were checked when it was made: it skips this."""
    num_heads = rules.num_heads(_FN, num_heads)
    kv_heads = rules.num_kv_heads(_FN, num_kv_heads, num_heads, SizeError) or num_heads
    # any finite number: negative, or 0 (uniform over the allowed keys)
    scale = rules.scale(_FN, scale)
    rules.causal_alignment(_FN, causal_alignment)
    rules.dropout(_FN, dropout)
    rules.flag(_FN, "need_weights", need_weights)
    rules.flag(_FN, "training", training)
    rules.attention_mask(_FN, attention_mask, tensors_ok=True)
    if window is not None:
        rules.window(_FN, window)
    rules.flag(_FN, "alibi", alibi)
    return num_heads, kv_heads, scale


def _check_inputs(q, k, v, at: Locate = None) -> None:
    """The three tensors: types, dimensions, dtypes, devices, batch sizes, key/value lengths."""
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
    B, Bk, Bv = q.shape[0], k.shape[0], v.shape[0]
    Tk, Tv = k.shape[1], v.shape[1]
    if not (B == Bk == Bv):
        arg, got = ("key", Bk) if Bk != B else ("value", Bv)
        raise _fail(SizeError, at, arg, f"query, key and value must have the same batch size "
                    f"B, received {B}, {Bk} and {Bv}. Give all three the same number of "
                    f"observations.", f"{B} observations (the query's batch size)",
                    f"{got}", "Give every input of the layer the same number of observations.")
    if Tk != Tv:
        raise _fail(SizeError, at, "value", f"key has {Tk} time steps (Tk) but value has {Tv}; "
                    f"they must match. Compute keys and values from the same sequence.",
                    f"{Tk} time steps (as the key)", f"{Tv}",
                    "Keys and values come from the same sequence: give them the same length.")


def _check_sizes(q, k, v, num_heads: int, kv_heads: int, key_padding_mask, attention_mask,
                 bias=None, at: Locate = None):
    """The sizes of a call against the (checked) head counts: channels into heads, masks and
    the bias. Runtime data checks, on every call: shape compares only. Return (B, Tq, Tk, dk,
    dv). `at`: where each tensor argument came from, for errors in a layer's words (`_fail`)."""
    B, Tq, Ck = q.shape
    Tk, Ckk = k.shape[1], k.shape[2]
    Cv = v.shape[2]
    if Ck % num_heads:
        fix = f"Use a num_heads that divides {Ck}{_divisor_hint(Ck, num_heads)}."
        raise _fail(SizeError, at, "query", f"num_heads {num_heads} does not divide key "
                    f"channels {Ck} (Ck). {fix}", f"channels that num_heads {num_heads} "
                    "divides", f"{Ck}", fix)
    dk = Ck // num_heads
    if Ckk != kv_heads * dk:
        if kv_heads == num_heads:
            raise _fail(SizeError, at, "key", f"query has {Ck} channels but key has {Ckk} (Ck); "
                        f"they must match. Project both to the same size, e.g. with a "
                        f"Dense({Ck}) on the keys.", f"keys of {Ck} channels (as the queries)",
                        f"{Ckk}", "Project queries and keys to the same number of channels.")
        raise _fail(SizeError, at, "key", f"with num_kv_heads {kv_heads} the key must have "
                    f"{kv_heads}×{dk} = {kv_heads * dk} channels (num_kv_heads × query channels "
                    f"/ num_heads), received {Ckk}. Project the keys to {kv_heads * dk} channels.",
                    f"keys of {kv_heads * dk} channels (num_kv_heads × query channels / "
                    f"num_heads)", f"{Ckk}", f"Project the keys to {kv_heads * dk} channels.")
    if Cv % kv_heads:
        common = math.gcd(Cv, Ck) if kv_heads == num_heads else Cv
        heads = 'num_heads' if kv_heads == num_heads else 'num_kv_heads'
        fix = (f"Use value channels divisible by {kv_heads}, or a head count that divides both"
               f"{_divisor_hint(common, kv_heads)}.")
        raise _fail(SizeError, at, "value", f"{heads} {kv_heads} does not divide value channels "
                    f"{Cv} (Cv). {fix}", f"values whose channels {heads} {kv_heads} divides",
                    f"{Cv}", fix)
    dv = Cv // kv_heads
    if key_padding_mask is not None:
        _check_mask_tensor("key_padding_mask", key_padding_mask, q, [[B, Tk]],
                           f"B×Tk = {B}×{Tk}", at)
    if isinstance(attention_mask, Tensor):
        _check_mask_tensor("attention_mask", attention_mask, q, [[Tq, Tk], [B, Tq, Tk]],
                           f"Tq×Tk = {Tq}×{Tk} or B×Tq×Tk = {B}×{Tq}×{Tk}", at)
    if bias is not None:
        _check_bias(bias, q, B, num_heads, Tq, Tk, at)
    return B, Tq, Tk, dk, dv


def _validate(q, k, v, num_heads, num_kv_heads, scale, key_padding_mask, attention_mask,
              causal_alignment, dropout, need_weights=False, training=False, bias=None,
              window=None, alibi=False):
    """al.attention's checks, every argument and tensor: return (B, Tq, Tk, dk, dv,
    num_kv_heads, scale as float)."""
    _check_inputs(q, k, v)
    num_heads, kv_heads, scale = _check_arguments(num_heads, num_kv_heads, scale,
                                                  attention_mask, causal_alignment, dropout,
                                                  need_weights, training, window, alibi)
    B, Tq, Tk, dk, dv = _check_sizes(q, k, v, num_heads, kv_heads, key_padding_mask,
                                     attention_mask, bias)
    return B, Tq, Tk, dk, dv, kv_heads, rules.scale_value(scale, dk)


# --------------------------------------------------------------------------------------------
# masks
# --------------------------------------------------------------------------------------------

def _causal(Tq: int, Tk: int, alignment: str, device) -> Tensor:
    # bottom-right shifts the diagonal so that the last query lines up with the last key
    offset = Tk - Tq if alignment == "bottom-right" else 0
    i = torch.arange(Tq, device=device).unsqueeze(1)
    j = torch.arange(Tk, device=device)
    return j <= i + offset  # Tq×Tk


def _position_mask(Tq, Tk, causal, offset, window, device):
    """The mask that reads positions (query i at position i + offset, key j at j): causal AND
    window, 1×1×Tq×Tk or None, and whether a row may be empty."""
    rel = aligned_relative_positions(Tq, Tk, offset, device)            # Tq×Tk
    mask = rel <= 0 if causal else None
    if window is not None:
        w = window_mask(rel, window, causal)
        mask = w if mask is None else mask & w
    # a query may see no key when it sits before the first key or, windowed, past the last
    may_empty = mask is not None and (offset < 0 or (window is not None and offset + Tq > Tk))
    return (None if mask is None else mask[None, None]), may_empty


def _combined_mask(Tq, Tk, key_padding_mask, attention_mask, causal_alignment, device,
                   allow_is_causal, window=None, offset=None):
    """The AND of all masks, broadcastable to B×H×Tq×Tk, and whether it may mask a full row.

    Returns (mask or None, is_causal, may_empty_rows). The mask keeps the smallest broadcast
    shape (e.g. B×1×1×Tk for key padding alone) so that nothing O(B·Tq·Tk) is built when it
    is not needed. `offset`: query i sits at key position i + offset (overrides the
    alignment); `window`: the sliding window on top of the causal rule.
    """
    if window is not None or offset is not None:
        if offset is None:
            offset = Tk - Tq if causal_alignment == "bottom-right" else 0
        mask, may_empty = _position_mask(Tq, Tk, isinstance(attention_mask, str), offset,
                                         window, device)
        if isinstance(attention_mask, Tensor):
            user = attention_mask.unsqueeze(-3)
            user = user.unsqueeze(0) if user.dim() == 3 else user
            mask = user if mask is None else mask & user
            may_empty = True
    elif isinstance(attention_mask, str):  # "causal"
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
              num_kv_heads: Optional[int] = None, bias: Optional[Tensor] = None,
              window: Optional[int] = None,
              alibi: bool = False,
              softcap: Optional[float] = None) -> Union[Tensor, Tuple[Tensor, Tensor]]:
    """Multi-head scaled dot-product attention, `B×Tq×Ck, B×Tk×Ck, B×Tk×Cv → B×Tq×Cv`.

    Channels split into `num_heads` contiguous blocks (head h uses channels h*dk:(h+1)*dk,
    dk = Ck/num_heads); per head `A = softmax(Q_h K_hᵀ · scale + bias)` over the keys,
    `out_h = A V_h`;
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
    bias : Tensor, optional
        A float tensor broadcastable to B×heads×Tq×Tk added to the scaled scores before the
        softmax (T5's relative position bias, any additive mask).
    window : int, optional
        Sliding window: with attention_mask="causal" query i sees keys i − window + 1 … i
        (Mistral's `sliding_window`); without, the keys less than `window` steps away on either
        side. Positions follow `causal_alignment`.
    alibi : bool
        ALiBi: adds −slope_h · abs(i − j) to the scores of head h, BLOOM's slopes for any head
        count (for a causal query, BLOOM's bias up to a constant per query).
    softcap : float, optional
        Soft-capped scores: each scaled score s becomes softcap · tanh(s / softcap) before the
        bias, the masks and the softmax (Gemma 2's `attn_logit_softcapping`); computed
        explicitly, as the fused kernel cannot.

    Returns
    -------
    Tensor or (Tensor, Tensor)
        The output B×Tq×Cv, and with `need_weights` the weights.
    """
    softcap = rules.softcap(_FN, softcap)
    B, Tq, Tk, dk, dv, kv_heads, scale_f = _validate(
        q, k, v, num_heads, num_kv_heads, scale, key_padding_mask, attention_mask,
        causal_alignment, dropout, need_weights, training, bias, window, alibi)
    return _attend(q, k, v, num_heads, scale_f, key_padding_mask, attention_mask,
                   causal_alignment, dropout, need_weights, training, kv_heads, bias, window,
                   alibi, None, (B, Tq, Tk, dk, dv), softcap)


def _attend(q, k, v, num_heads, scale_f, key_padding_mask, attention_mask, causal_alignment,
            dropout, need_weights, training, kv_heads, bias=None, window=None, alibi=False,
            offset=None, sizes=None, softcap=None, probe=None):
    """`attention` on checked arguments (`sizes`: B, Tq, Tk, dk, dv). `softcap`: scores capped
    as softcap · tanh(scores / softcap), on the explicit path. `offset`: query i sits
    at key position i + offset, for the causal rule, the window and ALiBi (a stream's query
    positions against its cache); None follows `causal_alignment`. `probe`: a module's
    `Probe` (functional/probe.py), handed the weights (`scores`, which take the explicit
    path) and the heads' outputs (`heads`, B×Tq×H×dv); None costs nothing."""
    B, Tq, Tk, dk, dv = sizes
    p = float(dropout) if training else 0.0
    H = num_heads
    if window is not None and window >= WIDEST_WINDOW:
        window = None                     # wider than any sequence: no window (exactly)
    # softmax over zero keys is the explicit path's job, and capped scores (SDPA cannot)
    fused = not need_weights and Tk > 0 and softcap is None
    # the weights exist on the explicit path alone: a probe asking for them takes it
    probe_scores = probe is not None and probe.wants("scores")
    if probe_scores:
        fused = False
    # torch's is_causal kernels mask before they scale (-inf · 0 is NaN on the CPU), so scale 0
    # takes the causal rule as an explicit mask; a negative scale reaches the kernel as
    # |scale| on -Q (the same scores, exactly), for kernels that assume a positive one
    extra = bias is not None or alibi
    mask, is_causal, may_empty = _combined_mask(
        Tq, Tk, key_padding_mask, attention_mask, causal_alignment, q.device,
        allow_is_causal=fused and scale_f != 0 and not extra, window=window, offset=offset)
    add = bias
    if alibi:
        off = offset if offset is not None else \
            (Tk - Tq if causal_alignment == "bottom-right" else 0)
        ali = alibi_bias(aligned_relative_positions(Tq, Tk, off, q.device),
                         alibi_slopes_tensor(num_heads, q.device))[None]    # 1×H×Tq×Tk
        add = ali if add is None else add + ali
    if add is not None:
        add = add.to(q.dtype)   # the kernel takes a float mask of the query's type
    if may_empty:
        # A row without any visible key would be softmax(all -inf) = NaN. Open such rows to
        # every key (finite math, no host sync) and zero their output afterwards.
        row_any = mask.any(-1, keepdim=True)  # (B|1)×1×(Tq|1)×1
        mask = mask | ~row_any

    qh = q.reshape(B, Tq, H, dk).transpose(1, 2)         # B×H×Tq×dk
    kh = k.reshape(B, Tk, kv_heads, dk).transpose(1, 2)  # B×Hkv×Tk×dk
    vh = v.reshape(B, Tk, kv_heads, dv).transpose(1, 2)  # B×Hkv×Tk×dv

    gqa = kv_heads != H
    # torch's ONNX form of enable_gqa mishandles a mask over queries and keys: repeat there
    if gqa and not (fused and _SDPA_GQA) or gqa and torch.onnx.is_in_onnx_export():
        kh = kh.repeat_interleave(H // kv_heads, dim=1)  # B×H×Tk×dk
        vh = vh.repeat_interleave(H // kv_heads, dim=1)  # B×H×Tk×dv
        gqa = False
    if fused:
        gqa_kw = {"enable_gqa": True} if gqa else {}
        attn_mask = mask
        if add is not None:     # the additive terms, -inf where the masks say no
            attn_mask = add if mask is None else torch.where(mask, add, float("-inf"))
        y = F.scaled_dot_product_attention(
            -qh if scale_f < 0 else qh, kh, vh, attn_mask=attn_mask, dropout_p=p,
            is_causal=is_causal, scale=abs(scale_f), **gqa_kw)  # B×H×Tq×dv
        weights = None
    else:
        scores = torch.matmul(qh, kh.transpose(-2, -1)) * scale_f  # B×H×Tq×Tk
        if softcap is not None:              # Gemma 2: capped before the terms and masks
            scores = torch.tanh(scores / softcap) * softcap
        if add is not None:
            scores = scores + add
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        if scores.dtype in (torch.float16, torch.bfloat16):
            # a low-precision softmax loses the small weights; accumulate in float32
            weights = torch.softmax(scores.float(), dim=-1).to(scores.dtype)
        else:
            weights = torch.softmax(scores, dim=-1)
        if may_empty:
            weights = weights.masked_fill(~row_any, 0.0)
        if probe_scores:               # kept and replaced as used: before dropout, before v
            weights = probe("scores", weights)
        y = torch.matmul(F.dropout(weights, p) if p > 0 else weights, vh)  # B×H×Tq×dv

    out = y.transpose(1, 2).reshape(B, Tq, H * dv)  # B×Tq×Cv
    if may_empty and fused:
        out = out.masked_fill(~row_any[:, 0], 0.0)  # (B|1)×(Tq|1)×1 broadcast over channels
    if probe is not None and probe.wants("heads"):   # each head's output, B×Tq×H×dv
        out = probe("heads", out.reshape(B, Tq, H, dv)).reshape(B, Tq, H * dv)
    # need_weights took the explicit path, so the weights exist
    return (out, cast(Tensor, weights)) if need_weights else out


def _module_attention(q, k, v, num_heads: int, scale, key_padding_mask, attention_mask,
                      causal_alignment: str, dropout: float, need_weights: bool, training: bool,
                      kv_heads: int, bias=None, window=None, alibi=False, offset=None,
                      at: Locate = None, softcap=None, probe=None):
    """`attention` as the modules call it: their options (heads, scale, dropout, window, …)
    were checked when they were made, so only the tensors of the call are checked here (`at`
    as `_check_sizes`); `offset` and `probe` as `_attend`."""
    _check_inputs(q, k, v, at)
    B, Tq, Tk, dk, dv = _check_sizes(q, k, v, num_heads, kv_heads, key_padding_mask,
                                     attention_mask, bias, at)
    return _attend(q, k, v, num_heads, rules.scale_value(scale, dk), key_padding_mask,
                   attention_mask, causal_alignment, dropout, need_weights, training, kv_heads,
                   bias, window, alibi, offset, (B, Tq, Tk, dk, dv), softcap, probe)


def naive_attention(q: Tensor, k: Tensor, v: Tensor, num_heads: int, scale="auto",
                    key_padding_mask: Optional[Tensor] = None, attention_mask: MaskArg = None,
                    causal_alignment: str = "top-left", need_weights: bool = False,
                    num_kv_heads: Optional[int] = None, bias: Optional[Tensor] = None,
                    window: Optional[int] = None, alibi: bool = False,
                    softcap: Optional[float] = None):
    """The textbook formula, written independently of `attention`, as the tests' reference.

    Same contract as `attention` (without dropout). It builds the full B×Tq×Tk mask and
    B×H×Tq×Tk scores, so its memory is quadratic in T; call it in float64 for a reference.
    """
    B, Tq, Tk, dk, dv, kv_heads, scale_f = _validate(
        q, k, v, num_heads, num_kv_heads, scale, key_padding_mask, attention_mask,
        causal_alignment, 0.0, need_weights, False, bias, window, alibi)
    H, r = num_heads, num_heads // kv_heads
    allowed = torch.ones(B, Tq, Tk, dtype=torch.bool, device=q.device)
    shift = Tk - Tq if causal_alignment == "bottom-right" else 0
    query_pos = torch.arange(Tq, device=q.device).view(1, Tq, 1) + shift
    key_pos = torch.arange(Tk, device=q.device).view(1, 1, Tk)
    distance = query_pos - key_pos                                       # 1×Tq×Tk: i − j
    if isinstance(attention_mask, str):
        allowed = allowed & (distance >= 0)
        if window is not None:
            allowed = allowed & (distance < window)
    elif window is not None:
        allowed = allowed & (distance.abs() < window)
    if isinstance(attention_mask, Tensor):
        allowed = allowed & attention_mask.expand(B, Tq, Tk)
    if key_padding_mask is not None:
        allowed = allowed & key_padding_mask.view(B, 1, Tk)
    allowed = allowed.unsqueeze(1)  # B×1×Tq×Tk

    Q = q.view(B, Tq, H, dk)
    K = k.view(B, Tk, kv_heads, 1, dk).expand(B, Tk, kv_heads, r, dk).reshape(B, Tk, H, dk)
    V = v.view(B, Tk, kv_heads, 1, dv).expand(B, Tk, kv_heads, r, dv).reshape(B, Tk, H, dv)
    s = torch.einsum("bqhd,bkhd->bhqk", Q, K) * scale_f  # B×H×Tq×Tk
    if softcap is not None:
        s = softcap * torch.tanh(s / rules.softcap(_FN, softcap))
    if alibi:
        # the ALiBi paper's slopes: 2^(-8h/n) for n a power of two, else those of the nearest
        # power below and every other one of twice that
        n = 2 ** int(math.log2(H))
        slopes = [2 ** (-8 * (h + 1) / n) for h in range(n)]
        slopes += [2 ** (-8 * (h + 1) / (2 * n)) for h in range(0, 2 * (H - n), 2)]
        m = torch.tensor(slopes, dtype=s.dtype, device=s.device).view(1, H, 1, 1)
        s = s - m * distance.abs().to(s.dtype).unsqueeze(1)
    if bias is not None:
        s = s + bias.to(s.dtype)
    # softmax by hand: the max is a constant shift, so it is taken without gradient
    m = s.masked_fill(~allowed, float("-inf")).amax(-1, keepdim=True).detach()
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(torch.where(allowed, s - m, torch.full_like(s, float("-inf"))))
    denom = e.sum(-1, keepdim=True)
    w = e / torch.where(denom > 0, denom, torch.ones_like(denom))  # empty rows: 0 / 1 = 0
    out = torch.einsum("bhqk,bkhd->bqhd", w, V).reshape(B, Tq, H * dv)
    return (out, w) if need_weights else out
