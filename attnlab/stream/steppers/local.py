"""Layers whose step-wise form depends on their arguments, mode or contents: BatchNorm (per
step in evaluation only), Concatenation (along channels, not time), layers that reduce the time
axis (never), and wrapped torch modules (checked numerically). Layers that are always
time-local need no factory here: they declare `time_local = True` on their class.
"""
from __future__ import annotations

import torch
from torch import nn

from ...layers import (AttentionPool1d, BatchNorm, Concatenation, GlobalAvgPool1d,
                       GlobalMaxPool1d, Index1d, Module)
from attnlab.core.spec import Spec
from .registry import PER_STEP, NotStreamable, register_stepper


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
