"""One training step and one pass over validation data.

The step is the hot path: a forward, the loss as sums divided by host-known unit counts, a
backward, clipping, the optimizer step. The loss and metric values stay on the device as one
small record; nothing here reads a tensor on the host.
"""
from __future__ import annotations

import numpy as np
import torch

from attnlab.core.errors import DataError
from ..layers.recurrent import carried
from .data import Batch
from .finite import NonFinite
from .sampler import EpochOrder, shard


def check_shapes(head, out: torch.Tensor, y: torch.Tensor) -> None:
    """Outputs and targets must line up (host metadata only: no sync)."""
    want = tuple(out.shape)
    if head.kind == "class":
        cd = head.loss.channel_dim % out.dim()
        want = want[:cd] + want[cd + 1:]
    if tuple(y.shape) != want:
        raise DataError(f"output '{head.output}' gives {'×'.join(map(str, out.shape))} per batch but "
                        f"its targets are {'×'.join(map(str, y.shape))}"
                        + (" (a sequence output needs one target per time step)"
                           if head.spec.is_sequence else "") + ".")


def objective(outs: dict, batch: Batch, heads: list):
    """(this process's part of the mean loss, raw metric sums, their global denominators).

    The loss is divided by the global batch's units here (its gradient needs the mean); metric
    sums stay raw and are divided on the host when logged (one op less per metric)."""
    total, parts, denominators = 0.0, [], []
    for h in heads:
        out = outs[h.output]
        y, mask = batch.targets[h.output]
        check_shapes(h, out, y)
        units, local = batch.units[h.output], batch.local_units[h.output]
        # a batch whose every target is ignored has no units: its loss is 0, not 0/0
        total = total + h.loss.sum(out, y, mask, local) / (max(units, 1) * h.loss_mult)
        with torch.no_grad():
            det = out.detach()
            for _, m, mult in h.metrics:
                parts.append(m.sum(det, y, mask, local))
                denominators.append(units * mult)
    return total, parts, denominators


def float32(outs: dict) -> dict:
    """Half-precision outputs (autocast) → float32, so losses and metrics sum in float32."""
    return {k: v.float() if v.dtype in _HALF else v for k, v in outs.items()}


_HALF = (torch.float16, torch.bfloat16)


def backward(fwd, batch: Batch, heads: list, world: int, watch=None, d=None, cdev=None,
             amp=None, scaler=None, scale: float = 1.0):
    """Forward and backward of one (micro-)batch, its loss multiplied by `scale` (1/N when N
    micro-batches make one step), the gradients added to those already there. Returns the
    record (device tensor: the batch's own loss, unscaled, and its raw metric sums) and the
    metrics' denominators (host numbers). With `watch` (check_finite), a non-finite loss stops
    before any update. `amp`: the autocast context factory (mixed precision), `scaler`: fp16's
    GradScaler (it skips steps whose gradients overflowed)."""
    if watch is not None:
        watch.reset()
    if amp is None:
        outs, _ = fwd(batch.inputs)
    else:
        with amp():
            outs, _ = fwd(batch.inputs)
        outs = float32(outs)
    total, parts, denominators = objective(outs, batch, heads)
    factor = world * scale
    loss = total * factor if factor != 1 else total
    (loss if scaler is None else scaler.scale(loss)).backward()
    if watch is not None and d.any_(not bool(torch.isfinite(total.detach())), cdev):
        raise _located(watch, total)
    record = torch.stack([total.detach(), *parts]) if parts else total.detach().reshape(1)
    return record, denominators


def update(opt, clip, scaler=None, correction: float = 1.0) -> None:
    """The optimizer step on the gradients gathered, then the gradients cleared. `correction`
    multiplies the gradients first (a last, shorter group of micro-batches: N / its length)."""
    if correction != 1.0:
        for group in opt.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.grad.mul_(correction)
    if scaler is None:
        if clip is not None:
            clip()
        opt.step()
    else:
        if clip is not None:
            scaler.unscale_(opt)          # clip the true gradients, not the scaled ones
            clip()
        scaler.step(opt)
        scaler.update()
    opt.zero_grad(set_to_none=True)


def _evaluate_batch(forward, batch: Batch, slots: list, sums: torch.Tensor, units: list) -> None:
    """Adds one batch's loss and metric sums (and units) to the running totals."""
    outs, _ = forward(batch.inputs)
    for i, (h, m, mult) in enumerate(slots):
        out = outs[h.output]
        y, mask = batch.targets[h.output]
        u = batch.local_units[h.output]
        if m is None:
            check_shapes(h, out, y)
        fn = h.loss if m is None else m
        sums[i] += fn.sum(out, y, mask, u).double() / mult
        units[i] += u


def _located(watch, total):
    return NonFinite(watch.first_bad(), float(total.detach()))


@torch.no_grad()
def evaluate(net, source, heads: list, batch_size: int, d, device, cdev, amp=None,
             pieces=None, forward=None) -> dict:
    """Loss and metrics over the whole validation data, in eval mode; each process takes a
    contiguous part and the sums meet in one all-reduce. Returns {"loss": …, column: …}; the
    loss of several outputs is the sum of their mean losses, as in training. With `pieces`
    (TrainingOptions.sequence_length) each batch is cut as in training, the recurrent state
    carried from piece to piece in a carry of validation's own. `forward`: inputs → (outputs,
    masks), the network's own forward by default (fsdp: the sharded root, which gathers)."""
    forward = net.forward_with_masks if forward is None else forward
    was = net.training
    net.eval()
    slots = [(h, None, h.loss_mult) for h in heads] + \
        [(h, m, mult) for h in heads for _, m, mult in h.metrics]
    try:
        sums = torch.zeros(len(slots), dtype=torch.float64, device=device)
        units = [0.0] * len(slots)
        lo, hi = shard(0, len(source), d.rank, d.world)
        starts = np.append(np.arange(0, hi - lo, batch_size, dtype=np.int64), hi - lo)
        part = EpochOrder(np.arange(lo, hi, dtype=np.int64), starts if hi > lo else starts[-1:])
        carry = pieces.evaluation_carry() if pieces is not None else None
        with carried(net, carry):
            for _, whole in source.batches(part, 0, 0, 1, device, reduce=False):
                cut = [whole] if pieces is None else (p.batch for p in pieces.split(whole, carry))
                for batch in cut:
                    _evaluate_batch(forward, batch, slots, sums, units)
        totals = d.sum_(torch.cat([sums.to(cdev), torch.tensor(units, dtype=torch.float64,
                                                               device=cdev)])).tolist()
    finally:
        net.train(was)
    k = len(slots)
    # no counted target (every one ignored): the loss is 0, as in training; a metric has no value
    means = [s / u if u else (0.0 if i < len(heads) else float("nan"))
             for i, (s, u) in enumerate(zip(totals[:k], totals[k:]))]
    row = {"loss": sum(means[:len(heads)])}
    cols = [col for h in heads for col, _, _ in h.metrics]
    for col, (h, m, _), v in zip(cols, slots[len(heads):], means[len(heads):]):
        row[col] = m.finish(v)
    return row
