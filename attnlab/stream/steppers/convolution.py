"""Layers that look a fixed way along time: causal Conv1d (its left context) and the position
layers (the position of the first new step)."""
from __future__ import annotations

import torch
from torch import Tensor, nn

from ...layers import Conv1d, PositionEmbedding, SinusoidalPositionEncoding
from .registry import NotStreamable, Stepper, register_stepper


class CausalConv1dStepper(Stepper):
    """Causal Conv1d: keeps the last `reach` = (kernel − 1)·dilation input steps as the left
    context of the next call (zeros before the first step, as causal padding). B×t×C → B×t×F."""

    def __init__(self, module: nn.Conv1d, reach: int):
        self.module, self.reach = module, reach
        self.context = None

    def reset(self):
        self.context = None

    # a step (and prepare) replaces the context tensor: a reference undoes it
    def snapshot(self):
        return self.context

    def restore(self, snapshot, pos):
        self.context = snapshot

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
    needs_snapshot = False           # no state: the position is the stream's
    # left padding (B int64, set by `generate`): each row's positions start at its first
    # real step, as the forward pass's `mask_positions`
    padding: torch.Tensor | None = None

    def __init__(self, module):
        self.module = module

    def step(self, pos, x):
        m = self.module
        b, t = x.shape[0], x.shape[1]
        if pos + t > m.positions:
            self._past_the_end(pos, x)
        row = pos + m.first                                           # OPT's rows start at 2
        if self.padding is not None:
            at = torch.arange(pos, pos + t, device=x.device)[None, :] - self.padding[:, None]
            return m.weight[at.clamp(min=0) + m.first]                 # B×t×channels
        return m.weight[row:row + t].expand(b, t, -1)                 # B×t×channels

    def prepare(self, end, batch, device, dtype):
        if end > self.module.positions:
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
        m = self.module
        rows = positions + m.first if m.first else positions
        return m.weight.index_select(0, rows).expand(x.shape[0], -1, -1)   # B×t×channels


class SinusoidalStepper(Stepper):
    """Sinusoidal positions: a table of the module's own encodings (the stream's capacity × dim,
    doubled when outgrown), kept expanded to the batch (a view, no copy), sliced at the stream's
    position: one view per step instead of recomputing."""

    needs_pos = True
    needs_snapshot = False           # its table holds no steps: one grown by a failed step serves

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
