"""The stepper registry: what a factory gets (`LayerContext`) and may answer (`PER_STEP`, a
`Stepper`, a `Route`, or `NotStreamable`), `register_stepper`, and `stepper_for`, which picks the
factory of a layer or, for a layer whose class declares `time_local = True`, `PER_STEP`.

A layer that maps each time step on its own declares so on its class (`time_local = True`, see
`attnlab.layers.Layer`) and needs no factory: the stream calls its module on the new steps. A
factory registered for a layer type (or a base of it) comes first: it may refuse some arguments
or modes (BatchNorm in training) or keep state between calls (a `Stepper`).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ...layers.base import Layer
from ...layers.embedding import _Embedding
from attnlab.core.spec import Spec

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
    on the device) when `needs_pos` or `static_needs_pos`.

    A step that fails changes nothing: before each step the stream takes every stepper's
    `snapshot()`, and when the step raises (a layer refuses it, a bad input, an interrupt) it
    calls `restore(snapshot, pos)` on every stepper. The default snapshot is the stepper's
    attributes (references, no copies), which serves a stepper that replaces its state at each
    step (`self.state = new`); one that writes into its tensors in place overrides both. A
    stepper whose state follows the stream position alone, or that has none, sets
    `needs_snapshot = False`: it is not asked for a snapshot (a decoding step stays as cheap
    as before) and gets `restore(None, pos)`."""

    needs_pos = False
    static_needs_pos = False
    needs_snapshot = True

    def reset(self) -> None:
        pass

    def snapshot(self) -> object:
        """What `restore` needs to undo the coming step: references to the state, taken before
        each step, so never a copy of a tensor (the default: the stepper's attributes)."""
        return self.__dict__.copy()

    def restore(self, snapshot: object, pos: int) -> None:
        """Back to the state before a step that failed: `snapshot` is what `snapshot()` gave
        before it (None when `needs_snapshot` is False), `pos` the stream position then."""
        if isinstance(snapshot, dict):
            state = self.__dict__
            state.clear()
            state.update(snapshot)

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
    """PER_STEP, a Route or a Stepper for the layer; NotStreamable when none fits.

    The factory registered for the layer's class or the nearest base (along the MRO) decides;
    without one, a layer whose class declares `time_local = True` runs per step."""
    _register_combinators()
    for cls in type(ctx.layer).__mro__:
        factory = _REGISTRY.get(cls)
        if factory is not None:
            return factory(ctx)
    if getattr(ctx.layer, "time_local", False) is True:
        return PER_STEP
    raise NotStreamable(f"{ctx.layer.type_name} has no step-wise form",
                        "feed it from static inputs only (pass the inputs it depends on in "
                        "static_inputs), or register one with attnlab.stream.register_stepper")


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

