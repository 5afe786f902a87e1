"""Divergence: a non-finite loss becomes a TrainingError that names the iteration.

By default the check runs on the host copies of the loss at logging points (no extra sync).
With `check_finite=True`, a forward hook on every layer records whether its output is finite
(on the device), and the loss is checked after every step, before the weights are updated; the
error then names the first layer, in execution order, whose activations went non-finite.
"""
from __future__ import annotations

import math

import torch

from attnlab.core.errors import TrainingError


class NonFinite(Exception):
    """Raised inside a step (check_finite) before the update; the loop adds the iteration."""

    def __init__(self, layer: str | None, loss: float):
        super().__init__(layer, loss)
        self.layer, self.loss = layer, loss


def first_nonfinite(rows: list[dict]) -> dict | None:
    return next((r for r in rows if r["loss"] is None or not math.isfinite(r["loss"])), None)


def diverged(iteration: int, epoch: int, loss, lr: float, layer: str | None = None,
             checked: bool = False) -> TrainingError:
    where = (f" The first non-finite activation is the output of layer '{layer}'." if layer else
             " Pass check_finite=True to find the first layer whose activations go non-finite."
             if not checked else " Every layer's output was finite: the loss itself overflowed.")
    err = TrainingError(
        f"training diverged at iteration {iteration} (epoch {epoch}): the loss is {loss}.{where} "
        f"Lower the learning rate (now {lr:.3g}), set gradient_threshold (e.g. 1.0), or check the "
        "data's scale (normalise inputs and regression targets).")
    err.iteration, err.epoch, err.loss, err.layer = iteration, epoch, loss, layer
    return err


class ActivationWatch:
    """Forward hooks on every layer module recording `isfinite(output).all()` as device flags;
    `first_bad()` reads them (one sync) in execution order."""

    def __init__(self, net) -> None:
        self.flags: list[tuple[str, torch.Tensor]] = []
        self.handles: list[torch.utils.hooks.RemovableHandle] = []
        for name, mod in _layer_modules(net):
            self.handles.append(mod.register_forward_hook(self._hook(name)))

    def _hook(self, name):
        def hook(module, args, output):
            outs = output if isinstance(output, (tuple, list)) else (output,)
            for o in outs:
                if isinstance(o, torch.Tensor) and o.is_floating_point():
                    self.flags.append((name, torch.isfinite(o).all()))
        return hook

    def reset(self):
        self.flags.clear()

    def first_bad(self) -> str | None:
        if not self.flags:
            return None
        ok = torch.stack([f for _, f in self.flags]).tolist()
        return next((name for (name, _), good in zip(self.flags, ok) if not good), None)

    def remove(self):
        for h in self.handles:
            h.remove()


def _layer_modules(net, prefix=""):
    """(qualified layer name, module) for every layer, nested networks opened."""
    from ..graph import Graph
    for name, mod in net.layer_modules.items():
        if isinstance(mod, Graph):
            yield from _layer_modules(mod, f"{prefix}{name}/")
        else:
            yield f"{prefix}{name}", mod
