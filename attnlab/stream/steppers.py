"""Per-layer step logic for streaming, dispatched on the layer type (a registry of steppers).

A stream runs each layer that depends on a streamed input on the next t steps only. Most layers
are *per-step* (Dense, activations, LayerNorm, Embedding, Addition, …): their module simply runs
on the t new steps, and the program calls it directly. Layers that look along time keep state
between calls in a `Stepper`:

- LSTM/GRU: the recurrent state (h, c), started from static state inputs when given;
- causal self-attention (and causal attention whose query/key/value are all streamed): a
  key/value cache, preallocated and doubled when full;
- cross-attention with static keys/values: the projected keys/values, computed once;
- causal Conv1d: the last (kernel − 1)·dilation input steps as left context;
- position layers: the position of the first new step.

A factory registered for a layer type gets a `LayerContext` and returns `PER_STEP`, a
`Stepper`, a `Route` (for layers that only pass items on), or raises `NotStreamable` with the
reason and the fix. Factories are looked up along the layer class's MRO, so `register_stepper`
also covers subclasses.

Steppers read the layer module's own parameters (e.g. `torch.nn.LSTM.forward(module, x, state)`),
so a stream needs no second model. Fused weights (self-attention's concatenated q/k/v
projection) are read when the stream is created and again at `reset()`.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .. import functional as AF
from ..layers import (GELU, LSTM, Attention, AttentionPool1d, BatchNorm, Concatenation, Conv1d,
                      Dense, Dropout, Embedding, GlobalAvgPool1d, GlobalMaxPool1d, GRU, Index1d,
                      LayerNorm, LeakyReLU, Module, Multiplication, MultiHeadAttention,
                      PositionEmbedding, ReLU, SelfAttention, Sigmoid, SinusoidalPositionEncoding,
                      Softmax, Tanh, Addition)
from ..layers.base import Layer
from ..layers.embedding import _Embedding
from ..spec import Spec

PER_STEP = "per-step"   # a factory's answer: call the layer's module on the new steps


class Route:
    """A factory's answer for layers that only pass items through (combinator ports, `Pick`):
    output j is input port `sources[j]`, static or streamed as it is; no code runs."""

    def __init__(self, sources: list[str]):
        self.sources = list(sources)


class NotStreamable(Exception):
    """A layer cannot run step by step on the streamed time axis: why, and how to fix it."""

    def __init__(self, reason: str, fix: str):
        super().__init__(reason)
        self.reason, self.fix = reason, fix


@dataclass
class LayerContext:
    """What a stepper factory knows about the layer it is asked to stream."""

    name: str
    layer: Layer
    module: nn.Module
    in_specs: dict[str, Spec]
    out_specs: dict[str, Spec]
    static: dict[str, tuple[Tensor, Tensor | None]]   # port → (value, padding mask) given whole
    streamed: tuple[str, ...]                         # ports fed by the stream, in port order
    capacity: int = 64                                # initial key/value cache length


class Stepper:
    """State and step of one streamed layer.

    `step(*xs)` gets the streamed inputs in port order (sequences B×t×C for the t new steps),
    preceded by `pos` (the absolute position of the first new step) when `needs_pos`, and
    returns the layer's outputs for those steps: one tensor, or a tuple in output-port order.
    `reset()` forgets every step seen (static state is kept).

    With static shapes (a compiled stream: no Python int may enter the traced step, and every
    buffer keeps its size from step to step), the stream calls `prepare(end, batch, device,
    dtype)` before each step, outside the traced code (grow buffers to hold steps up to `end`;
    dtype: the step's activation type, the autocast type under mixed precision), then
    `static_step(*xs)`, preceded by `positions` (the new steps' positions, a 1-D int64 tensor
    on the device) when `needs_pos` or `static_needs_pos`."""

    needs_pos = False
    static_needs_pos = False

    def reset(self) -> None:
        pass

    def step(self, *xs):
        raise NotImplementedError

    def prepare(self, end: int, batch: int, device: torch.device, dtype: torch.dtype) -> None:
        pass

    def static_step(self, *args):
        return self.step(*args)


_REGISTRY: dict[type, Callable[[LayerContext], object]] = {}


def bound_forward(module: nn.Module):
    """`module.forward` when no hook would run, else the module itself: calling `forward`
    skips `nn.Module.__call__`'s hook bookkeeping (~2 µs a call, ~20 calls a step)."""
    has_global = getattr(nn.modules.module, "_has_any_global_hook", None)
    if has_global is None or has_global() or module._forward_hooks or \
            module._forward_pre_hooks or module._backward_hooks or module._backward_pre_hooks:
        return module
    return module.forward


def linear_of(module: nn.Module):
    """An nn.Linear as `x → F.linear(x, weight, bias)` on its own Parameter objects (read live:
    in-place updates show), without nn.Module's call and attribute lookups; other modules (or
    one with hooks) as `bound_forward`."""
    fwd = bound_forward(module)
    if type(module) is not nn.Linear or fwd is module:
        return fwd
    w, b = module.weight, module.bias

    def linear(x):
        return F.linear(x, w, b)
    return linear


def embedding_of(module: nn.Module):
    """attnlab's Embedding module as a step function: integer ids on the CPU go straight to the
    lookup (its bounds check still refuses bad ids, then the module names them); anything else
    (float ids, other devices, hooks) runs the module's forward."""
    fwd = bound_forward(module)
    if type(module) is not _Embedding or fwd is module:
        return fwd
    w, squeeze = module.weight, module.squeeze
    ints = (torch.int64, torch.int32)

    def lookup(x):
        if x.dtype in ints and x.device.type == "cpu":
            try:
                return torch.embedding(w, x.squeeze(-1) if squeeze else x)   # B×t×dim
            except IndexError:
                pass                                 # the module's forward names the bad id
        return fwd(x)
    return lookup


def register_stepper(*layer_types: type):
    """Decorator: `factory(ctx: LayerContext) -> PER_STEP | Stepper` streams these layer types
    (and their subclasses); it raises `NotStreamable(reason, fix)` when it cannot."""
    def deco(factory):
        for t in layer_types:
            _REGISTRY[t] = factory
        return factory
    return deco


def stepper_for(ctx: LayerContext):
    """PER_STEP, a Route or a Stepper for the layer; NotStreamable when none fits."""
    _register_combinators()
    for cls in type(ctx.layer).__mro__:
        factory = _REGISTRY.get(cls)
        if factory is not None:
            return factory(ctx)
    raise NotStreamable(f"{ctx.layer.type_name} has no step-wise form",
                        "feed it from static inputs only (pass the inputs it depends on in "
                        "static_inputs), or register one with attnlab.stream.register_stepper")


# ------------------------------------------------------------------------ per-step layers ---

@register_stepper(Dense, ReLU, LeakyReLU, GELU, Tanh, Sigmoid, Softmax, Dropout, LayerNorm,
                  Embedding, Addition, Multiplication)
def _per_step(ctx):
    # each output step depends on the same input step only: run on the new steps as they come
    return PER_STEP


def _route(ctx):
    layer = ctx.layer
    if hasattr(layer, "indices"):                                   # Pick
        return Route([layer.input_ports[i] for i in layer.indices])
    return Route(["in"])                                            # Port


def _register_combinators():
    """Routes for the combinators' Port and Pick, once attnlab.combinators is loaded (a network
    cannot hold them before; importing it here would register their layer types as a side
    effect of streaming)."""
    mod = sys.modules.get("attnlab.combinators")
    if mod is not None and mod.Port not in _REGISTRY:
        register_stepper(mod.Port, mod.Pick)(_route)


@register_stepper(BatchNorm)
def _batch_norm(ctx):
    if ctx.module.training:
        raise NotStreamable("in training mode it normalises with statistics over the whole batch "
                            "and time axis", "call net.eval() before stream() (running "
                            "statistics then make it per-step)")
    return PER_STEP


@register_stepper(Concatenation)
def _concatenation(ctx):
    if ctx.layer.dim == "time":
        raise NotStreamable("concatenates along time (dim='time'), so its steps come from "
                            "sequences of unknown length", "concatenate channels (dim='channel') "
                            "or give the concatenated inputs in static_inputs")
    return PER_STEP


@register_stepper(GlobalAvgPool1d, GlobalMaxPool1d, AttentionPool1d, Index1d)
def _reduces_time(ctx):
    raise NotStreamable("reduces the streamed time axis to one vector, which changes with every "
                        "new step", "reduce only static sequences (pass the inputs it depends on "
                        "in static_inputs), or keep the time axis, e.g. output_mode='sequence' "
                        "and a per-step Dense")


@register_stepper(Module)
def _module(ctx):
    if ctx.static:
        raise NotStreamable("a wrapped torch module mixing streamed and static inputs cannot be "
                            "checked step by step", "give all of its inputs in static_inputs or "
                            "none of them")
    if not all(ctx.out_specs[p].is_sequence for p in ctx.layer.output_ports):
        raise NotStreamable("its wrapped module reduces the streamed time axis",
                            "keep the time axis in the wrapped module")
    if not _is_time_local(ctx.module, [ctx.in_specs[p] for p in ctx.layer.input_ports]):
        raise NotStreamable(f"its wrapped {type(ctx.module).__name__} mixes time steps (its "
                            "output at a step depends on other steps, or it is random)",
                            "write a layer with a step-wise form (register_stepper), give its "
                            "inputs in static_inputs, or call net.eval() if it uses dropout")
    return PER_STEP


def _is_time_local(module: nn.Module, specs: list[Spec], steps: int = 4) -> bool:
    """True when the module maps each time step on its own: running it on the whole sequence
    equals running it on each step separately (checked once, on random data)."""
    ref = next(iter(module.parameters()), None)
    device, dtype = (None, None) if ref is None else (ref.device, ref.dtype)
    xs = [torch.randn(s.concrete(2, steps), device=device, dtype=dtype) for s in specs]
    try:
        with torch.no_grad():
            full = _as_tuple(module(*xs))
            parts = [_as_tuple(module(*[x[:, i:i + 1] for x in xs])) for i in range(steps)]
            for j, y in enumerate(full):
                if y.dim() < 2 or y.shape[1] != steps:
                    return False
                step_wise = torch.cat([p[j] for p in parts], 1)
                if step_wise.shape != y.shape or \
                        not torch.allclose(step_wise, y, atol=1e-5, rtol=1e-4):
                    return False
    except Exception:   # noqa: BLE001 — a module that fails on single steps is not per-step
        return False
    return True


def _as_tuple(y):
    return tuple(y) if isinstance(y, (tuple, list)) else (y,)


# ------------------------------------------------------------------------------ recurrent ---

class RecurrentStepper(Stepper):
    """LSTM/GRU: carries the state between calls. `step(x)`: B×t×C → B×t×H (or B×H for
    output_mode='last': the state after the newest step), then the state outputs (B×H each)."""

    def __init__(self, module, forward, init, last: bool, state_outputs: bool):
        self.module, self.forward, self.init = module, forward, init
        self.last, self.state_outputs = last, state_outputs
        self.state = init

    def reset(self):
        self.state = self.init

    def step(self, x):
        y, state = self.forward(self.module, x, self.state)       # y: B×t×H; state 1×B×H each
        self.state = state
        out = y[:, -1] if self.last else y
        if not self.state_outputs:
            return out
        states = state if isinstance(state, tuple) else (state,)
        return (out,) + tuple(s[0] for s in states)                 # 1×B×H → B×H


@register_stepper(LSTM, GRU)
def _recurrent(ctx):
    layer, mod = ctx.layer, ctx.module
    if layer.bidirectional:
        raise NotStreamable("it is bidirectional: its backward direction reads later steps first",
                            "set bidirectional=False, or give its input in static_inputs")
    if "in" not in ctx.streamed:
        raise NotStreamable("its initial state comes from the streamed input but its sequence "
                            "does not", "give the state inputs from static inputs")
    if len(ctx.streamed) > 1:
        raise NotStreamable("its initial state depends on the streamed input",
                            "compute the initial state from static inputs only")
    init = None
    if layer.has_state_inputs:
        # B×H → 1×B×H, as torch wants initial states (one direction, one layer)
        init = tuple(ctx.static[p][0].unsqueeze(0).contiguous() for p in layer.state_names)
        init = init if isinstance(layer, LSTM) else init[0]
    forward = nn.LSTM.forward if isinstance(layer, LSTM) else nn.GRU.forward
    return RecurrentStepper(mod, forward, init, layer.output_mode == "last",
                            layer.has_state_outputs)


# ---------------------------------------------------------------------------- convolution ---

class CausalConv1dStepper(Stepper):
    """Causal Conv1d: keeps the last `reach` = (kernel − 1)·dilation input steps as the left
    context of the next call (zeros before the first step, as causal padding). B×t×C → B×t×F."""

    def __init__(self, module: nn.Conv1d, reach: int):
        self.module, self.reach = module, reach
        self.context = None

    def reset(self):
        self.context = None

    def step(self, x):
        if self.reach:
            ctx = self.context
            if ctx is None:
                ctx = x.new_zeros(x.shape[0], self.reach, x.shape[2])
            x = torch.cat((ctx, x), 1)                              # B×(reach+t)×C
            self.context = x[:, x.shape[1] - self.reach:]          # the next call's left context
        y = nn.Conv1d.forward(self.module, x.transpose(1, 2))       # B×F×t (module has no padding)
        return y.transpose(1, 2)                                    # B×t×F

    def prepare(self, end, batch, device, dtype):
        c = self.context
        if self.reach and (c is None or c.shape[0] != batch or c.device != device):
            self.context = torch.zeros(batch, self.reach, self.module.in_channels,
                                       device=device, dtype=dtype)

    def static_step(self, x):
        """As `step`, with the context always a tensor (prepare made zeros) and copied out
        contiguous, so that its strides do not depend on how many steps came last."""
        if self.reach:
            assert self.context is not None
            x = torch.cat((self.context.to(x.dtype), x), 1)         # B×(reach+t)×C
            self.context = x[:, x.shape[1] - self.reach:].contiguous()
        y = nn.Conv1d.forward(self.module, x.transpose(1, 2))       # B×F×t
        return y.transpose(1, 2)                                    # B×t×F


@register_stepper(Conv1d)
def _conv1d(ctx):
    layer = ctx.layer
    if layer.padding != "causal":
        raise NotStreamable(f"its padding={layer.padding!r} reads later steps (or changes the "
                            "length)", "use padding='causal'")
    if layer.stride != 1:
        raise NotStreamable(f"its stride {layer.stride} skips steps",
                            "use stride=1 for a streamed convolution")
    return CausalConv1dStepper(ctx.module, (layer.kernel - 1) * layer.dilation)


# ------------------------------------------------------------------------------ positions ---

class PositionEmbeddingStepper(Stepper):
    """Learned positions: rows pos…pos+t−1 of the module's own weight (read live), as the
    module gives them with its `offset` at the stream's position."""

    needs_pos = True

    def __init__(self, module):
        self.module = module

    def step(self, pos, x):
        m = self.module
        b, t = x.shape[0], x.shape[1]
        if pos + t > m.weight.shape[0]:
            self._past_the_end(pos, x)
        return m.weight[pos:pos + t].expand(b, t, -1)                 # B×t×channels

    def prepare(self, end, batch, device, dtype):
        if end > self.module.weight.shape[0]:
            self._past_the_end(end - 1, torch.zeros(batch, 1, 1, device=device))

    def _past_the_end(self, start, x):
        """Raises the module's own error for steps of x from `start` on (it names the layer)."""
        m = self.module
        m.offset = start
        try:
            m(x)
        finally:
            m.offset = 0

    def static_step(self, positions, x):
        w = self.module.weight
        return w.index_select(0, positions).expand(x.shape[0], -1, -1)     # B×t×channels


class SinusoidalStepper(Stepper):
    """Sinusoidal positions: a table of the module's own encodings (the stream's capacity × dim,
    doubled when outgrown), kept expanded to the batch (a view, no copy), sliced at the stream's
    position: one view per step instead of recomputing."""

    needs_pos = True

    def __init__(self, module, capacity: int = 64):
        self.module = module
        self.capacity = max(1, int(capacity))
        self.table = None               # B×length×dim, stride 0 along B
        self.rows: tuple[Tensor, ...] = ()   # its B×1×dim views, one per position (t = 1)

    def step(self, pos, x):
        end = pos + x.shape[1]
        table = self._fit(end, x.shape[0], x.dtype, x.device)
        if end == pos + 1:
            return self.rows[pos]                                     # B×1×dim
        return table[:, pos:end]                                      # B×t×dim

    def prepare(self, end, batch, device, dtype):
        # in float32, as the module computes it: static_step casts to the step's type
        self._fit(end, batch, torch.float32, device)

    def static_step(self, positions, x):
        return self.table.index_select(1, positions).to(x.dtype)       # B×t×dim

    def _fit(self, end, batch, dtype, device) -> Tensor:
        """The table, remade (longer: doubled, at least the capacity) unless it already serves
        steps up to `end` of that batch, type and device."""
        table = self.table
        if table is None or end > table.shape[1] or table.shape[0] != batch or \
                table.dtype != dtype or table.device != device:
            grown = 2 * end if table is not None and end > table.shape[1] else end
            table = self.table = self._encode(max(grown, self.capacity), dtype, device).expand(
                batch, -1, -1)
            self.rows = table.split(1, 1)
        return table

    def _encode(self, length, dtype, device):
        with torch.no_grad():
            m, saved = self.module, self.module.offset
            m.offset = 0
            try:
                return m(torch.zeros(1, length, 1, dtype=dtype, device=device))   # 1×length×dim
            finally:
                m.offset = saved


@register_stepper(PositionEmbedding)
def _position_embedding(ctx):
    return PositionEmbeddingStepper(ctx.module)


@register_stepper(SinusoidalPositionEncoding)
def _sinusoidal(ctx):
    return SinusoidalStepper(ctx.module, ctx.capacity)


# ------------------------------------------------------------------------------ attention ---

class KVCache:
    """Keys and values of every step so far, in preallocated head-major buffers
    B×heads×capacity×dk and B×heads×capacity×dv (the layout the attention kernel reads fastest,
    as a hand-written cache keeps them), whose capacity doubles when full: appending t steps
    copies those t steps only (a doubling copies the n cached ones, O(1) amortised per step).

    `heads` is the number of key/value heads (fewer than the query's with grouped-query
    attention); `k`/`v` are None until the first append, `n` the steps held, `capacity` the
    steps the buffers hold."""

    def __init__(self, capacity: int = 64, heads: int = 1):
        self.capacity0 = max(1, int(capacity))
        self.heads = int(heads)
        self.k: Tensor | None = None
        self.v: Tensor | None = None
        # views made once per buffer (in chunks, as decoding reaches them), so that a decoding
        # step indexes a list instead of slicing tensors (each slice is a ~1 µs call, a step
        # makes 4 per layer): slot n, B×heads×d, takes step n's key; prefix n,
        # B×heads×(n+1)×d, is what query n attends to
        self.k_slots: list[Tensor] = []
        self.v_slots: list[Tensor] = []
        self.k_prefix: list[Tensor] = []
        self.v_prefix: list[Tensor] = []
        # steps below `ready` have their views, in buffers checked to fit the keys arriving
        # since the last reset (a one-step decode then compares one int)
        self.ready = 0
        self.n = 0

    @property
    def capacity(self) -> int:
        return 0 if self.k is None else self.k.shape[2]

    def reset(self) -> None:
        self.n = self.ready = 0

    def make_ready(self, k: Tensor, v: Tensor, end: int) -> None:
        """Buffers that take keys like k, v up to step `end`, with the views of at least those
        steps: made in chunks that double (64, 128, …), not all at once when the buffers grow."""
        if not self.fits(k, end):
            self.grow(k, v, end)
        kc, vc = self.k, self.v
        assert kc is not None and vc is not None       # for mypy: grow made them
        made = len(self.k_prefix)
        if end > made:
            upto = min(kc.shape[2], max(end, 2 * made, 64))
            self.k_slots += kc[:, :, made:upto].unbind(2)
            self.v_slots += vc[:, :, made:upto].unbind(2)
            self.k_prefix += _prefixes(kc, made, upto)
            self.v_prefix += _prefixes(vc, made, upto)
        self.ready = len(self.k_prefix)

    def fits(self, k: Tensor, end: int) -> bool:
        """True when the buffers take steps up to `end` of keys like k (batch, dtype, device)."""
        return self.holds(end, k.shape[0], k.dtype, k.device)

    def holds(self, end: int, batch: int, dtype: torch.dtype, device: torch.device) -> bool:
        """True when the buffers take steps up to `end` of a batch of that type and device."""
        c = self.k
        return c is not None and end <= c.shape[2] and c.shape[0] == batch and \
            c.dtype == dtype and c.device == device

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """k B×t×(heads·dk), v B×t×(heads·dv) → every key and value so far, views
        B×heads×n×dk and B×heads×n×dv."""
        b, t, h = k.shape[0], k.shape[1], self.heads
        n, end = self.n, self.n + t
        if not self.fits(k, end):
            self.grow(k, v, end)
        kc, vc = self.k, self.v
        assert kc is not None and vc is not None       # for mypy: grow made them
        kc[:, :, n:end] = k.view(b, t, h, -1).transpose(1, 2)
        vc[:, :, n:end] = v.view(b, t, h, -1).transpose(1, 2)
        self.n = end
        return kc[:, :, :end], vc[:, :, :end]

    def grow(self, k: Tensor, v: Tensor, end: int, zeros: bool = False) -> None:
        """New buffers for keys/values like k, v holding at least `end` steps, filled with
        zeros when `zeros` (else uninitialised); the cached steps are kept when the batch is
        the same (else the cache starts again)."""
        old_k, old_v, n = self.k, self.v, self.n
        keep = old_k is not None and old_v is not None and old_k.shape[0] == k.shape[0] and n > 0
        cap = max(self.capacity0, end, 2 * (old_k.shape[2] if keep and old_k is not None else 0))
        b, h = k.shape[0], self.heads
        self.k = (k.new_zeros if zeros else k.new_empty)(b, h, cap, k.shape[-1] // h)
        self.v = (v.new_zeros if zeros else v.new_empty)(b, h, cap, v.shape[-1] // h)
        if keep and old_k is not None and old_v is not None:
            self.k[:, :, :n] = old_k[:, :, :n]
            self.v[:, :, :n] = old_v[:, :, :n]
        else:
            self.n = 0
        self.k_slots, self.v_slots, self.k_prefix, self.v_prefix = [], [], [], []
        self.ready = 0


def _prefixes(buf: Tensor, start: int, stop: int) -> list[Tensor]:
    """buf[:, :, :i + 1] for i in start…stop−1, B×H×(i+1)×d each, made with as_strided (half
    the cost of slicing)."""
    b, h, _, d = buf.shape
    stride, offset = buf.stride(), buf.storage_offset()
    return [buf.as_strided((b, h, i + 1, d), stride, offset) for i in range(start, stop)]


_compiling = torch.compiler.is_compiling


def _scale(scale, dk: int) -> float:
    return 1.0 / math.sqrt(dk) if isinstance(scale, str) else float(scale)


class CachedAttentionStepper(Stepper):
    """Causal attention whose queries, keys and values are all streamed: each call projects the
    new steps, appends their keys/values to a `KVCache`, and lets the new queries attend to
    every cached step up to their own (bottom-right causal alignment).

    `project(*xs) → (q B×t×Ck, k B×t×Ckv, v B×t×Cv)`; `out` maps B×t×Cv → B×t×Cout.
    One new step (decoding) takes a fast path written like a hand-made cache: the new key and
    value copied into their slot of the head-major buffers, scaled_dot_product_attention on
    views of them, no mask (the newest query sees every cached key) and no argument checks.
    Several new steps (a prefill) go through `attnlab.functional.attention`."""

    def __init__(self, module, project, out, num_heads, num_kv_heads, key_channels,
                 value_channels, scale, capacity, refresh=None) -> None:
        # key_channels: the query's (num_heads·dk); value_channels: the cached values'
        # (num_kv_heads·dv, fewer than the output's num_heads·dv with grouped-query attention)
        self.module, self.project, self.out = module, project, out
        self.h, self.hkv = num_heads, num_kv_heads
        self.dk = key_channels // num_heads
        self.dv = value_channels // num_kv_heads
        self.scale_arg = scale
        self.scale = _scale(scale, self.dk)
        self.gqa = num_kv_heads != num_heads
        self.sdpa_kw = {"enable_gqa": True} if self.gqa else {}
        self.fast = not self.gqa or AF._SDPA_GQA
        self.cache = KVCache(capacity, num_kv_heads)
        self.refresh = refresh
        # set by self-attention: its fused q/k/v weights {"w", "b"}; with equal head counts and
        # sizes one step's q, k, v are then views of one B×3×H×d tensor (no split, no views)
        self.fused: dict | None = None
        self.same_heads = not self.gqa and key_channels == value_channels
        self.key_positions: Tensor | None = None       # static shapes: 0…capacity−1

    def reset(self):
        self.cache.reset()
        if self.refresh is not None:
            self.refresh()

    def step(self, *xs):
        m = self.module
        decoding = xs[0].shape[1] == 1 and self.fast and not (m.training and m.dropout)
        f = self.fused
        if decoding and f is not None and self.same_heads and not _compiling():
            return self._step_fused(xs[0], f)
        q, k, v = self.project(*xs)
        if decoding:
            return self._step_one(q, k, v)
        return self._step_many(q, k, v)

    def _step_fused(self, x, f):
        """One step of self-attention with equal q/k/v heads: as `_step_one`, in fewer calls
        (q, k and v as views of one B×3×H×d tensor: no split, no reshaping views)."""
        c, b = self.cache, x.shape[0]
        n = c.n
        qkv = F.linear(x, f["w"], f["b"])                                   # B×1×3·H·d
        q, k, v = qkv.view(b, 3, self.h, self.dk).unbind(1)                 # B×H×d views
        if n >= c.ready:
            kv = qkv.view(b, 3, -1)[:, 1:]                                  # B×2×H·d: k, v
            c.make_ready(kv, kv, n + 1)
        c.k_slots[n].copy_(k)
        c.v_slots[n].copy_(v)
        c.n = n + 1
        y = F.scaled_dot_product_attention(q.unsqueeze(2), c.k_prefix[n], c.v_prefix[n],
                                           scale=self.scale)                # B×H×1×d
        return self.out(y.view(b, 1, self.h * self.dv))                     # B×1×H·d: a view

    def _step_one(self, q, k, v):
        """One new step: its key and value copied into their slot of the head-major buffers,
        SDPA on views of them, no mask (the newest query sees every cached key)."""
        c, b = self.cache, q.shape[0]
        n = c.n
        traced = _compiling()
        if traced:
            if not c.fits(k, n + 1):
                c.grow(k, v, n + 1)
        elif n >= c.ready:
            c.make_ready(k, v, n + 1)
        k, v = k.view(b, self.hkv, self.dk), v.view(b, self.hkv, self.dv)
        if traced:           # plain indexing (inductor fails on the slot views)
            c.k[:, :, n], c.v[:, :, n] = k, v
            keys, values = c.k[:, :, :n + 1], c.v[:, :, :n + 1]
        else:
            c.k_slots[n].copy_(k)                                           # B×Hkv×dk slot
            c.v_slots[n].copy_(v)
            keys, values = c.k_prefix[n], c.v_prefix[n]                     # B×Hkv×(n+1)×d
        c.n = n + 1
        y = F.scaled_dot_product_attention(q.view(b, self.h, 1, self.dk), keys, values,
                                           scale=self.scale, **self.sdpa_kw)   # B×H×1×dv
        return self.out(y.view(b, 1, self.h * self.dv))                     # B×1×H·dv: a view

    static_needs_pos = True

    def prepare(self, end, batch, device, dtype):
        """Zeroed buffers (a masked-out slot must hold a finite value) of the activation type,
        holding steps up to `end`, and the key positions 0…capacity−1 the mask compares with."""
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
        attending over all of them with a mask (key position ≤ query position): the same
        shapes at every step, so one traced graph serves the whole decode."""
        m, c = self.module, self.cache
        q, k, v = self.project(*xs)                                          # B×t×C each
        b, t = q.shape[0], q.shape[1]
        kc, vc = c.k, c.v
        assert kc is not None and vc is not None                  # prepare made them
        kc.index_copy_(2, positions, k.view(b, t, self.hkv, self.dk).transpose(1, 2).to(kc.dtype))
        vc.index_copy_(2, positions, v.view(b, t, self.hkv, self.dv).transpose(1, 2).to(vc.dtype))
        assert self.key_positions is not None
        mask = self.key_positions <= positions.unsqueeze(1)                  # t×capacity
        keys, values = kc, vc
        if self.gqa and not AF._SDPA_GQA:
            keys = kc.repeat_interleave(self.h // self.hkv, 1)
            values = vc.repeat_interleave(self.h // self.hkv, 1)
        y = F.scaled_dot_product_attention(
            q.view(b, t, self.h, self.dk).transpose(1, 2).to(kc.dtype), keys, values,
            attn_mask=mask, dropout_p=m.dropout if m.training else 0.0, scale=self.scale,
            **(self.sdpa_kw if AF._SDPA_GQA else {}))                        # B×H×t×dv
        return self.out(y.transpose(1, 2).reshape(b, t, self.h * self.dv))   # B×t×H·dv

    def _step_many(self, q, k, v):
        """Several new steps (a prefill), or dropout in training: through
        attnlab.functional.attention, bottom-right causal over the cache."""
        m, c, b = self.module, self.cache, q.shape[0]
        keys, values = c.append(k, v)                        # B×Hkv×n×dk, B×Hkv×n×dv
        end = keys.shape[2]
        keys = keys.transpose(1, 2).reshape(b, end, self.hkv * self.dk)    # B×n×Ckv
        values = values.transpose(1, 2).reshape(b, end, self.hkv * self.dv)
        p = m.dropout if m.training else 0.0
        y = AF.attention(q, keys, values, self.h, self.scale_arg, attention_mask="causal",
                         causal_alignment="bottom-right", dropout=p, training=m.training,
                         num_kv_heads=self.hkv if self.gqa else None)       # B×t×Cv
        return self.out(y)


class CrossAttentionStepper(Stepper):
    """Attention of streamed queries over static keys/values, projected once at stream
    creation. The static key padding (and mask port) is kept; with attention_mask='causal'
    (top-left) the query at absolute position p sees keys 0…p. `step(xq)` (or `step(pos, xq)`
    when causal): B×t×Cq → B×t×Cout (and scores B×heads×t×Tk when the layer outputs them)."""

    def __init__(self, module, project_q, out, keys, values, key_mask, num_heads, num_kv_heads,
                 scale, causal, need_weights):
        self.module, self.project_q, self.out = module, project_q, out
        self.keys, self.values, self.key_mask = keys, values, key_mask
        self.h, self.hkv, self.scale = num_heads, num_kv_heads, scale
        self.needs_pos = causal
        self.key_pos = torch.arange(keys.shape[1], device=keys.device) if causal else None
        self.need_weights = need_weights

    def step(self, *args):
        if self.needs_pos:
            pos, xq = args
            t = xq.shape[1]
            query_pos = torch.arange(pos, pos + t, device=xq.device).unsqueeze(1)   # t×1
            mask = self.key_pos <= query_pos                                        # t×Tk
        else:
            (xq,), mask = args, None
        m = self.module
        r = AF.attention(self.project_q(xq), self.keys, self.values, self.h, self.scale,
                         key_padding_mask=self.key_mask, attention_mask=mask,
                         dropout=m.dropout, need_weights=self.need_weights, training=m.training,
                         num_kv_heads=None if self.hkv == self.h else self.hkv)
        if self.need_weights:
            return self.out(r[0]), r[1]
        return self.out(r)


def _identity(x):
    return x


def _qkv(ctx):
    """(num_heads, num_kv_heads, query channels, projected value channels, scale, q/k/v
    projections, output map) of an attention layer's module; `Attention` has no learned maps."""
    m = ctx.module
    if isinstance(ctx.layer, Attention):
        ck = ctx.in_specs["query"].channels
        cv = ctx.in_specs["value"].channels
        return m.num_heads, m.num_heads, ck, cv, m.scale, (_identity,) * 3, _identity
    return (m.num_heads, m.num_kv_heads, m.query.out_features, m.value.out_features, m.scale,
            tuple(linear_of(p) for p in (m.query, m.key, m.value)), linear_of(m.output))


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
    ck, ckv, cv = m.query.out_features, m.key.out_features, m.value.out_features
    sizes = [ck, ckv, cv]
    fused = {}

    def refresh():
        # one matmul for q, k and v against their concatenated weights (as the module does),
        # concatenated once here rather than at every step
        with torch.no_grad():
            fused["w"] = torch.cat((m.query.weight, m.key.weight, m.value.weight))
            fused["b"] = None if m.query.bias is None else torch.cat(
                (m.query.bias, m.key.bias, m.value.bias))

    def project(x):
        qkv = F.linear(x, fused["w"], fused["b"])                   # B×t×(Ck + Ckv + Cv)
        return qkv.split_with_sizes(sizes, -1)                      # views, no copies

    refresh()
    stepper = CachedAttentionStepper(m, project, linear_of(m.output), m.num_heads,
                                     m.num_kv_heads, ck, cv, m.scale, ctx.capacity, refresh)
    stepper.fused = fused if ck == ckv == cv else None
    return stepper


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
    heads, kv_heads, ck, cv, scale, (pq, pk, pv), out = _qkv(ctx)
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
            return pq(xq), pk(xk), pv(xv)

        return CachedAttentionStepper(m, project, out, heads, kv_heads, ck, cv, scale,
                                      ctx.capacity)
    # cross-attention: keys and values given whole, projected once
    if layer.attention_mask == "causal" and layer.causal_alignment == "bottom-right":
        raise NotStreamable("bottom-right causal alignment lines queries up with keys from the "
                            "end, which depends on the final query length",
                            "use causal_alignment='top-left' (or no attention mask)")
    with torch.no_grad():
        keys = pk(ctx.static["key"][0])                             # B×Tk×Ckv
        values = pv(ctx.static["value"][0])                         # B×Tk×Cv
    return CrossAttentionStepper(m, pq, out, keys, values, _static_key_mask(ctx), heads,
                                 kv_heads, scale, layer.attention_mask == "causal",
                                 layer.has_scores_output)
