"""Attention layers: causal self-attention (and attention whose query, key and value are all
streamed) with a key/value cache; cross-attention over static keys/values projected once.

Positions follow the stream: rotary embeddings turn each new step by its position in the
stream, a sliding window keeps only the keys a later query can see, ALiBi and a `bias` input
(from `RelativePositionBias`'s stepper, or a static tensor read at the new queries' rows and
the cached keys' columns) add their terms for the new queries against the cached keys."""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from attnlab.functional import math as AF
from attnlab.functional.math import _fail, _size
from attnlab.functional.bias import alibi_bias, alibi_slopes_tensor, relative_positions, window_mask
from attnlab.functional.modules import AttentionModule, global_module_hooks, plain_linear
from attnlab.functional.rules import scale_value
from attnlab.core.errors import SizeError
from ...layers import Attention, MultiHeadAttention, RelativePositionBias, SelfAttention
from .cache import KVCache
from .registry import NotStreamable, Stepper, linear_of, register_stepper

_compiling = torch.compiler.is_compiling
# the registries of forward hooks that run on every module (mutated in place: held once)
_GLOBAL_FORWARD_HOOKS = tuple(getattr(torch.nn.modules.module, n) for n in (
    "_global_forward_pre_hooks", "_global_forward_hooks", "_global_forward_hooks_always_called",
    "_global_forward_hooks_with_kwargs") if hasattr(torch.nn.modules.module, n))


class CachedAttentionStepper(Stepper):
    """Causal attention whose queries, keys and values are all streamed: each call projects the
    new steps, appends their keys/values to a `KVCache`, and lets the new queries attend to
    every cached step up to their own (bottom-right causal alignment).

    `project(*xs) → (q B×t×Ck, k B×t×Ckv, v B×t×Cv)`; `out` maps B×t×Cv → B×t×Cout.
    One new step (decoding) takes a fast path written like a hand-made cache: the new key and
    value copied into their slot of the head-major buffers, scaled_dot_product_attention on
    views of them, no mask (the newest query sees every cached key) and no argument checks.
    Several new steps (a prefill) go through the module's `attend`. The module's
    `transform_qk` hook sees every new step's queries and keys with their positions in the
    stream, on every path (the one-matmul decoding step included).

    `bind() → (project, out, fused)` reads the module's projections: `project(*xs) → (q B×t×Ck,
    k B×t×Ckv, v B×t×Cv)`, `out` maps B×t×Cv → B×t×Cout, `fused` is self-attention's
    concatenated q/k/v weights {"w", "b"} (or None). It runs at creation, at `reset()`, and
    whenever the projections named `watched` are no longer what it read (`_Watch`: replaced,
    wrapped or hooked since), so a stream honours them as the forward pass does."""

    def __init__(self, module, bind: Callable, num_heads, num_kv_heads, key_channels,
                 value_channels, scale, capacity, bias=None, watched=()) -> None:
        # key_channels: the query's (num_heads·dk); value_channels: the cached values'
        # (num_kv_heads·dv, fewer than the output's num_heads·dv with grouped-query attention)
        self.module = module
        self.h, self.hkv = num_heads, num_kv_heads
        self.dk = key_channels // num_heads
        self.dv = value_channels // num_kv_heads
        self.scale = scale_value(scale, self.dk)
        self.gqa = num_kv_heads != num_heads
        self.sdpa_kw = {"enable_gqa": True} if self.gqa else {}
        self.fast = not self.gqa or AF._SDPA_GQA
        self.window = getattr(module, "window", None)
        self.cache = KVCache(capacity, num_kv_heads, self.window)
        # the bias port: "streamed" (the last streamed input, columns for every key since the
        # stream began), a static tensor (rows: query positions, columns: key positions), None
        self.bias = bias
        # ALiBi or a bias: every step goes through `attend`, with its additive terms
        self.additive = bias is not None or getattr(module, "alibi", False)
        # capped scores (Gemma 2): SDPA cannot cap them, so every step goes through `attend`
        self.softcap = getattr(module, "softcap", None)
        self.additive = self.additive or self.softcap is not None
        # self-attention's fused q/k/v weights {"w", "b"} (from `bind`); with equal head counts
        # and sizes one step's q, k, v are then views of one B×3×H×d tensor (no split, no views)
        self.fused: dict | None = None
        self.same_heads = not self.gqa and key_channels == value_channels
        self.key_positions: Tensor | None = None       # static shapes: 0…capacity−1
        # a module whose transform_qk is not the identity: every path calls it
        self.hooked = _hooked(module)
        self._bind, self._watched = bind, tuple(watched)
        self.rebind()

    def rebind(self) -> None:
        """Reads the module's projections again (`bind`), and watches what it read."""
        self.watch = _Watch(self.module, self._watched)
        self.project, self.out, self.fused = self._bind()

    def reset(self):
        self.cache.reset()
        self.rebind()

    needs_snapshot = False          # a failed step is undone by the position alone
    # left padding (B int64: the padded steps before each row's first real one), set by
    # `generate` for prompts of different lengths: padded keys are masked out, and with
    # positions="mask" each row's rotary positions start at its first real step
    padding: Tensor | None = None

    def restore(self, snapshot, pos):
        self.cache.rewind(pos)

    def step(self, *xs):
        if not self.watch.holds():             # a projection replaced, wrapped or hooked
            self.rebind()
        m = self.module
        xs, bias = self._split_bias(xs)
        decoding = xs[0].shape[1] == 1 and self.fast and not (m.training and m.dropout) \
            and not self.additive
        f = self.fused
        pos = self.cache.pos                                # the new steps' first position
        if decoding and f is not None and self.same_heads and not _compiling() and \
                self.padding is None:
            return self._step_fused(xs[0], f, pos)
        q, k, v = self._projected(xs, pos)
        if decoding:
            return self._step_one(q, k, v)
        return self._step_many(q, k, v, bias, pos)

    def probed_step(self, *xs):
        """A step whatever its length through the module's `attend` (as a prefill's), so a
        probe set on the module sees the new queries against every cached key: a stream
        that captures or patches the layer's inside calls this instead of `step`, which
        stays as it is."""
        if not self.watch.holds():
            self.rebind()
        xs, bias = self._split_bias(xs)
        pos = self.cache.pos
        return self._step_many(*self._projected(xs, pos), bias, pos)

    def _split_bias(self, xs):
        """(the inputs, the additive bias): a streamed bias is the last input."""
        if isinstance(self.bias, str):
            return xs[:-1], xs[-1]
        return xs, self.bias

    def _projected(self, xs, pos):
        """q, k, v of the new steps, starting at position `pos`, with the module's map of
        queries and keys (rotary) applied."""
        q, k, v = self.project(*xs)
        if self.hooked:
            m = self.module
            at = pos if self.padding is None or not getattr(m, "mask_positions", False) \
                else _padded_positions(pos, q.shape[1], self.padding)
            q, k = m.transform_qk(q, k, at, at)
        return q, k, v

    def _step_fused(self, x, f, pos):
        """One step of self-attention with equal q/k/v heads: as `_step_one`, in fewer calls
        (q, k and v as views of one B×3×H×d tensor: no split, no reshaping views). A module's
        `transform_qk` hook gets the step's q and k (B×1×H·d views) at position `pos`."""
        c, b, h, d = self.cache, x.shape[0], self.h, self.dk
        if self.window is not None:
            c.compact(1)                                   # a window drops unseen steps
        n = c.n
        m = self.module
        qkv = m.qkv(x, (f["w"], f["b"]))                                    # B×1×3·H·d
        if self.hooked:
            q, k = m.transform_qk(qkv[..., :h * d], qkv[..., h * d:2 * h * d], pos, pos)
            v = qkv[..., 2 * h * d:]
            if n >= c.ready:
                c.make_ready(k, v, n + 1)
            q, k, v = q.reshape(b, h, d), k.reshape(b, h, d), v.reshape(b, h, d)  # B×H×d
        else:
            q, k, v = qkv.view(b, 3, h, d).unbind(1)                        # B×H×d views
            if n >= c.ready:
                kv = qkv.view(b, 3, -1)[:, 1:]                              # B×2×H·d: k, v
                c.make_ready(kv, kv, n + 1)
        i = n - c.base                                     # step n's views in the chunk
        c.k_slots[i].copy_(k)
        c.v_slots[i].copy_(v)
        c.n = n + 1
        keys, values = c.k_prefix[i], c.v_prefix[i]                         # B×H×(n+1)×d
        if self.window is not None and n + 1 > self.window:  # the last `window` steps
            keys, values = keys[:, :, n + 1 - self.window:], values[:, :, n + 1 - self.window:]
        y = F.scaled_dot_product_attention(q.unsqueeze(2), keys, values,
                                           scale=self.scale)                # B×H×1×d
        return self.out(y.view(b, 1, self.h * self.dv))                     # B×1×H·d: a view

    def _step_one(self, q, k, v):
        """One new step: its key and value copied into their slot of the head-major buffers,
        SDPA on views of them, no mask (the newest query sees every cached key)."""
        c, b = self.cache, q.shape[0]
        c.compact(1)                                       # a window drops unseen steps
        n = c.n
        traced = _compiling()
        if traced:
            if not c.fits(k, n + 1):
                c.grow(k, v, n + 1)
        elif n >= c.ready:
            c.make_ready(k, v, n + 1)
        k, v = k.view(b, self.hkv, self.dk), v.view(b, self.hkv, self.dv)
        # a window: the newest query sees the last `window` steps only
        lo = 0 if self.window is None else max(0, n + 1 - self.window)
        if traced:           # plain indexing (inductor fails on the slot views)
            c.k[:, :, n], c.v[:, :, n] = k, v
            keys, values = c.k[:, :, lo:n + 1], c.v[:, :, lo:n + 1]
        else:
            i = n - c.base                                 # step n's views in the chunk
            c.k_slots[i].copy_(k)                                           # B×Hkv×dk slot
            c.v_slots[i].copy_(v)
            keys, values = c.k_prefix[i], c.v_prefix[i]                     # B×Hkv×(n+1)×d
            if lo:
                keys, values = keys[:, :, lo:], values[:, :, lo:]
        c.n = n + 1
        real = None                     # left padding: the row's padded keys masked out
        if self.padding is not None:
            at = torch.arange(c.start + lo, c.start + n + 1, device=q.device)
            real = (at >= self.padding[:, None]).view(b, 1, 1, -1)
        y = F.scaled_dot_product_attention(q.view(b, self.h, 1, self.dk), keys, values,
                                           attn_mask=real, scale=self.scale,
                                           **self.sdpa_kw)                  # B×H×1×dv
        return self.out(y.view(b, 1, self.h * self.dv))                     # B×1×H·dv: a view

    static_needs_pos = True

    def prepare(self, end, batch, device, dtype):
        """Zeroed buffers (a masked-out slot must hold a finite value) of the activation type,
        holding steps up to `end`, and the key positions 0…capacity−1 the mask compares with.
        The projections are checked here, outside the traced step."""
        if not self.watch.holds():
            self.rebind()
        if isinstance(self.bias, Tensor):
            _check_reach(self.module, self.bias, end, end)
        c = self.cache
        if not c.holds(end, batch, dtype, device):
            # empty B×0×C stand-ins for the keys and values: grow reads their sizes and types
            like_k = torch.empty(batch, 0, self.hkv * self.dk, device=device, dtype=dtype)
            like_v = torch.empty(batch, 0, self.hkv * self.dv, device=device, dtype=dtype)
            c.grow(like_k, like_v, end, zeros=True)
            self.key_positions = torch.arange(c.capacity, device=device)
        c.n = end

    def static_step(self, positions, *xs):
        """The t new steps written at `positions` of the full-capacity buffers, the queries
        attending over all of them with a mask (key position ≤ query position, and within the
        window): the same shapes at every step, so one traced graph serves the whole decode.
        (A window masks here; the buffers hold every step.)"""
        m, c = self.module, self.cache
        bias = None
        if self.bias is not None:
            if isinstance(self.bias, str):
                xs, bias = xs[:-1], xs[-1]
            else:
                bias = _rows(self.bias, positions)
        q, k, v = self.project(*xs)                                          # B×t×C each
        if self.hooked:
            q, k = m.transform_qk(q, k, positions, positions)
        b, t = q.shape[0], q.shape[1]
        kc, vc = c.k, c.v
        assert kc is not None and vc is not None                  # prepare made them
        kc.index_copy_(2, positions, k.view(b, t, self.hkv, self.dk).transpose(1, 2).to(kc.dtype))
        vc.index_copy_(2, positions, v.view(b, t, self.hkv, self.dv).transpose(1, 2).to(vc.dtype))
        assert self.key_positions is not None
        rel = relative_positions(positions, self.key_positions)              # t×capacity
        mask = rel <= 0
        if self.window is not None:
            mask = mask & window_mask(rel, self.window, True)
        if self.softcap is not None:         # explicit scores: the fused kernel cannot cap them
            terms = _additive(m, rel, bias, torch.ones_like(mask), kc.dtype, kc.shape[2])
            n = kc.shape[2]
            return m.attend(q.to(kc.dtype), kc.transpose(1, 2).reshape(b, n, -1),
                            vc.transpose(1, 2).reshape(b, n, -1), None, mask, "top-left",
                            bias=None if terms.dtype == torch.bool else terms)
        attn_mask = _additive(m, rel, bias, mask, kc.dtype, kc.shape[2])
        keys, values = kc, vc
        if self.gqa and not AF._SDPA_GQA:
            keys = kc.repeat_interleave(self.h // self.hkv, 1)
            values = vc.repeat_interleave(self.h // self.hkv, 1)
        y = F.scaled_dot_product_attention(
            q.view(b, t, self.h, self.dk).transpose(1, 2).to(kc.dtype), keys, values,
            attn_mask=attn_mask, dropout_p=m.dropout if m.training else 0.0, scale=self.scale,
            **(self.sdpa_kw if AF._SDPA_GQA else {}))                        # B×H×t×dv
        return self.out(y.transpose(1, 2).reshape(b, t, self.h * self.dv))   # B×t×H·dv

    def _step_many(self, q, k, v, bias=None, pos=0):
        """Several new steps (a prefill), dropout in training, or additive terms: through the
        module's `attend` (attention and output map), bottom-right causal over the cache (it
        holds the steps start…pos+t−1, so bottom-right alignment is the stream's positions)."""
        m, c, b, t = self.module, self.cache, q.shape[0], q.shape[1]
        static = not isinstance(self.bias, str)
        if bias is not None:                                # before the cache takes the steps
            _check_reach(m, bias, pos + t if static else 0, pos + t, static)
        keys, values = c.append(k, v)                        # B×Hkv×n×dk, B×Hkv×n×dv
        end = keys.shape[2]
        keys = keys.transpose(1, 2).reshape(b, end, self.hkv * self.dk)    # B×n×Ckv
        values = values.transpose(1, 2).reshape(b, end, self.hkv * self.dv)
        if bias is not None:
            if static:                                      # the new queries' rows
                bias = _rows(bias, pos, t)
            if bias.shape[-1] > 1:                          # the cached keys' columns
                bias = bias[..., c.start:c.start + end]
        real = None if self.padding is None else \
            torch.arange(c.start, c.start + end, device=q.device) >= self.padding[:, None]
        return m.attend(q, keys, values, real, "causal", "bottom-right",
                        bias=bias)                                          # B×t×Cout


def _padded_positions(pos: int, t: int, padding: Tensor) -> Tensor:
    """B×t: each row's place among its real steps (0 at padding), as `mask_positions`."""
    at = torch.arange(pos, pos + t, device=padding.device)[None, :] - padding[:, None]
    return at.clamp(min=0)


class CrossAttentionStepper(Stepper):
    """Attention of streamed queries over static keys/values, projected once at stream
    creation. The static key padding (and mask port) is kept; with attention_mask='causal'
    (top-left) the query at absolute position p sees keys 0…p. `step(xq)` (or `step(pos, xq)`
    when causal): B×t×Cq → B×t×Cout (and scores B×heads×t×Tk when the layer outputs them)."""

    needs_snapshot = False          # no state: keys/values static, positions the stream's

    def __init__(self, module, keys, values, key_mask, causal, need_weights, bias=None):
        self.module = module
        self.keys, self.values, self.key_mask = keys, values, key_mask
        self.causal = causal
        self.hooked = _hooked(module)
        self.bias = bias             # "streamed", a static tensor (rows read at pos) or None
        # the queries' positions: for the causal rule, windows, ALiBi, rows of a static bias
        # and a transform_qk hook
        self.offset = causal or getattr(module, "positional", False)
        self.needs_pos = self.offset or self.hooked or isinstance(bias, Tensor)
        self.need_weights = need_weights

    def prepare(self, end, batch, device, dtype):
        if isinstance(self.bias, Tensor):       # a static bias's rows, outside the traced step
            _check_reach(self.module, self.bias, end, 0)

    def step(self, *args):
        if self.needs_pos:
            pos, *xs = args
        else:
            pos, xs = 0, list(args)
        bias = None
        if isinstance(self.bias, str):
            xs, bias = xs[:-1], xs[-1]
        (xq,) = xs
        if isinstance(self.bias, Tensor):
            if isinstance(pos, int):              # a compiled stream checks in `prepare`
                _check_reach(self.module, self.bias, pos + xq.shape[1], 0)
            bias = _rows(self.bias, pos, xq.shape[1])
        m = self.module
        q, keys = m.project_q(xq), self.keys
        if self.hooked:
            q, keys = m.transform_qk(q, keys, pos, 0)
        return m.attend(q, keys, self.values, self.key_mask, "causal" if self.causal else None,
                        "top-left", self.need_weights, bias=bias,
                        offset=pos if self.offset else None)


class _Watch:
    """What a stepper read of its attention module's projections (`names`: "query", "key",
    "value", "output"), and `holds()`: whether it still stands, checked at every step in
    Python alone (about a microsecond, no device sync). It fails when a child module of the
    attention module is replaced (peft's `get_peft_model` and `merge_and_unload`, an
    assignment) and, while the projections read were bare `nn.Linear`s read by their weights
    (`plain_linear`), when one of them gets a hook or a submodule (`torch.nn.utils.
    parametrize` adds one), or a hook on every module is registered. (A `forward` set on a
    projection's instance is seen at creation and at `reset()`.)"""

    def __init__(self, module, names: tuple[str, ...]):
        mods = module._modules
        self.children = mods.values()
        self.bound = tuple(self.children)
        read = tuple(mods[n] for n in names)
        plain = all(plain_linear(m) for m in read) and not global_module_hooks()
        # bare projections must stay bare (forward hooks only: a stream computes without
        # gradients; a bare Linear has no submodules); the ones called as modules run their
        # hooks anyway. Dicts mutated in place, held here and tested with one C-level any().
        self.dicts = tuple(d for m in read for d in (
            m._forward_hooks, m._forward_pre_hooks, m._modules)) + _GLOBAL_FORWARD_HOOKS \
            if plain else ()

    def holds(self) -> bool:
        return tuple(self.children) == self.bound and not any(self.dicts)


def _hooked(module) -> bool:
    """Whether the module's transform_qk does something: overridden, or a rotary embedding."""
    hook = getattr(type(module), "transform_qk", None)
    return hook is not None and (hook is not AttentionModule.transform_qk or
                                 getattr(module, "rotary", None) is not None)


def _check_reach(m, bias: Tensor, rows: int, cols: int, static: bool = True) -> None:
    """A bias that a stream reads at query rows below `rows` and key columns below `cols`
    must reach them (or have size 1 there, which broadcasts): slicing would silently cut a
    smaller one, and the static-shape step would pad its missing keys with zeros."""
    if bias.dim() == 4 and bias.shape[2] in (1, max(bias.shape[2], rows)) and \
            bias.shape[3] in (1, max(bias.shape[3], cols)):
        return
    got = _size(bias)
    need = [f"{n} ≥ {k}" for n, k in (("Tq", rows), ("Tk", cols)) if k]
    expected = (f"B×{m.num_heads}×Tq×Tk with {' and '.join(need)} (this step reaches position "
                f"{max(rows, cols) - 1}; a size of 1 broadcasts)")
    fix = ("A bias given whole covers every position the stream reaches: give it "
           "B×heads×T×T for the longest stream, or reset() the stream." if static else
           "A streamed bias has a column for every key since the stream began, as "
           "RelativePositionBias gives it.")
    raise _fail(SizeError, m._at(), "bias", f"the bias must be {expected}, received {got}. "
                f"{fix}", expected, got, fix)


def _rows(bias: Tensor, pos, t: int | None = None) -> Tensor:
    """A static bias (…×Tq×Tk) at the query rows pos…pos+t−1 (or the rows of a positions
    tensor); a bias of one row serves every query."""
    if bias.shape[-2] == 1:
        return bias
    if isinstance(pos, Tensor):
        return bias.index_select(-2, pos)
    return bias[..., pos:pos + t, :]


def _additive(m, rel, bias, mask, dtype, capacity):
    """The static-shape step's attention mask: the boolean `mask`, or, with ALiBi or a bias,
    their sum as a float mask that is −inf where `mask` is False."""
    add = None
    if getattr(m, "alibi", False):
        add = alibi_bias(rel, alibi_slopes_tensor(m.num_heads, rel.device))[None]  # 1×H×t×cap
    if bias is not None:
        width = bias.shape[-1]
        if width not in (1, capacity):                    # columns for the keys 0…capacity−1
            bias = bias[..., :capacity] if width > capacity else \
                F.pad(bias, (0, capacity - width))
        add = bias if add is None else add + bias
    if add is None:
        return mask
    return torch.where(mask, add.to(dtype), float("-inf"))


def _qkv(ctx):
    """(num_heads, num_kv_heads, query channels, projected value channels, scale) of an
    attention layer's module; `Attention` has no learned maps."""
    m = ctx.module
    if isinstance(ctx.layer, Attention):
        ck = ctx.in_specs["query"].channels
        cv = ctx.in_specs["value"].channels
        return m.num_heads, m.num_kv_heads, ck, cv, m.scale
    return m.num_heads, m.num_kv_heads, m.qkv_channels[0], m.qkv_channels[2], m.scale


def _output_of(ctx):
    """The output map as a step calls it, and the projections to watch for it."""
    m = ctx.module
    if isinstance(ctx.layer, Attention):
        return m.output_map, ()
    return linear_of(m.output), ("output",)


def _static_key_mask(ctx):
    """The key padding mask, B×Tk (True = attend): the key sequence's padding AND the `mask`
    port (as the layer's forward combines them)."""
    mask = ctx.static["key"][1]
    if "mask" in ctx.static:
        m = ctx.static["mask"][0]
        m = (m[..., 0] if m.dim() == 3 else m) != 0                  # B×Tk×C → B×Tk
        mask = m if mask is None else mask & m
    return mask


@register_stepper(SelfAttention)
def _self_attention(ctx):
    layer, m = ctx.layer, ctx.module
    if layer.attention_mask != "causal":
        raise NotStreamable("it attends over the whole streamed sequence, later steps included "
                            "(attention_mask=None)", "set attention_mask='causal' so that each "
                            "step sees only itself and earlier steps, or give its input in "
                            "static_inputs")
    _no_scores_or_mask(layer)
    ck, ckv, cv = m.qkv_channels

    def bind():
        # one matmul for q, k and v against their concatenated weights (as the module does),
        # concatenated once here rather than at every step; projections that are not bare
        # nn.Linear (a LoRA wrapper, hooks) are called as modules, as the forward pass does
        with torch.no_grad():
            f = m.fused_qkv()
        out = linear_of(m.output)
        if f is None:
            return (lambda x: (m.query(x), m.key(x), m.value(x))), out, None

        def project(x):
            return m.project_qkv(x, f)                              # views, no copies
        return project, out, {"w": f[0], "b": f[1]} if ck == ckv == cv else None

    return CachedAttentionStepper(m, bind, m.num_heads, m.num_kv_heads, ck, cv, m.scale,
                                  ctx.capacity, _bias_of(ctx),
                                  ("query", "key", "value", "output"))


def _bias_of(ctx):
    """The bias port as a stepper takes it: "streamed", the static tensor, or None."""
    if not getattr(ctx.layer, "has_bias_input", False):
        return None
    if "bias" in ctx.streamed:
        return "streamed"
    return ctx.static["bias"][0]


def _no_scores_or_mask(layer):
    if layer.has_scores_output:
        raise NotStreamable("its scores output (B×heads×T×T) grows along both time axes",
                            "set has_scores_output=False to stream it")
    if layer.has_padding_mask_input:
        raise NotStreamable("its padding-mask input marks streamed key steps",
                            "set has_padding_mask_input=False (streamed steps are all valid)")


@register_stepper(MultiHeadAttention, Attention)
def _multi_head_attention(ctx):
    layer, m = ctx.layer, ctx.module
    heads, kv_heads, ck, cv, scale = _qkv(ctx)
    streamed = set(ctx.streamed)
    if "query" not in streamed:
        raise NotStreamable("its keys/values are streamed but its query is not, so every output "
                            "step would change with each new step", "stream the query too, or "
                            "give the key and value inputs in static_inputs")
    if streamed & {"key", "value"} and not {"key", "value"} <= streamed:
        raise NotStreamable("one of key and value is streamed and the other is static",
                            "feed key and value from the same side (both streamed or both "
                            "static)")
    if "mask" in streamed:
        raise NotStreamable("its padding-mask input depends on the streamed input",
                            "give the mask from static inputs")
    if "key" in streamed:                               # attention over the streamed axis itself
        if layer.attention_mask != "causal":
            raise NotStreamable("it attends over the whole streamed sequence, later steps "
                                "included (attention_mask=None)", "set attention_mask='causal' "
                                "so that each step sees only itself and earlier steps")
        _no_scores_or_mask(layer)

        def project(xq, xk, xv):
            return (m.project_q(xq), *m.project_kv(xk, xv))      # the modules, called

        def bind():
            out, _ = _output_of(ctx)
            return project, out, None

        return CachedAttentionStepper(m, bind, heads, kv_heads, ck, cv, scale, ctx.capacity,
                                      _bias_of(ctx), _output_of(ctx)[1])
    # cross-attention: keys and values given whole, projected once
    if layer.attention_mask == "causal" and layer.causal_alignment == "bottom-right":
        raise NotStreamable("bottom-right causal alignment lines queries up with keys from the "
                            "end, which depends on the final query length",
                            "use causal_alignment='top-left' (or no attention mask)")
    with torch.no_grad():
        keys, values = m.project_kv(ctx.static["key"][0], ctx.static["value"][0])  # B×Tk×C
    return CrossAttentionStepper(m, keys, values, _static_key_mask(ctx),
                                 layer.attention_mask == "causal", layer.has_scores_output,
                                 _bias_of(ctx))


class RelativePositionBiasStepper(Stepper):
    """T5's relative position bias for the new query steps pos…pos+t−1 against every key so
    far (0…pos+t−1, the cache of the attention it feeds) or against a static key sequence:
    B×H×t×Tk, what the full pass gives at those rows."""

    needs_pos = True
    needs_snapshot = False          # a width grown by a failed step serves the next ones

    def __init__(self, module, key_length=None, capacity=64):
        self.module = module
        self.key_length = key_length              # static keys: their length; else streamed
        self.capacity0 = max(1, int(capacity))
        self.width = 0                            # static shapes: key columns, as the cache's

    def step(self, pos, *xs):
        b, t, dev = xs[0].shape[0], xs[0].shape[1], self.module.weight.device
        keys = self.key_length if self.key_length is not None else pos + t
        out = self.module.bias(torch.arange(pos, pos + t, device=dev),
                               torch.arange(keys, device=dev))                   # 1×H×t×Tk
        return out.expand(b, -1, -1, -1)

    def prepare(self, end, batch, device, dtype):
        # the key columns of the static-shape cache: its capacity, grown as the cache grows
        if end > self.width:
            self.width = max(self.capacity0, end, 2 * self.width)

    def static_step(self, positions, *xs):
        dev = self.module.weight.device
        keys = self.key_length if self.key_length is not None else self.width
        out = self.module.bias(positions, torch.arange(keys, device=dev))
        return out.expand(xs[0].shape[0], -1, -1, -1)


@register_stepper(RelativePositionBias)
def _relative_position_bias(ctx):
    if "query" not in ctx.streamed:
        raise NotStreamable("its keys are streamed but its queries are not, so every bias row "
                            "would change with each new step", "stream the query too, or give "
                            "the key input in static_inputs")
    key_length = None if "key" in ctx.streamed else ctx.static["key"][0].shape[1]
    return RelativePositionBiasStepper(ctx.module, key_length, ctx.capacity)
