"""LSTM and GRU: the recurrent state carried between calls, started from static state inputs."""
from __future__ import annotations

from torch import nn

from ...layers import GRU, LSTM
from .registry import NotStreamable, Stepper, register_stepper


class RecurrentStepper(Stepper):
    """LSTM/GRU: carries the state between calls. `step(x)`: B×t×C → B×t×H (or B×H for
    output_mode='last': the state after the newest step), then the state outputs (B×H each)."""

    def __init__(self, module, forward, init, last: bool, state_outputs: bool):
        self.module, self.forward, self.init = module, forward, init
        self.last, self.state_outputs = last, state_outputs
        self.state = init

    def reset(self):
        self.state = self.init

    # a step replaces the state tensors (torch returns new ones): a reference undoes it
    def snapshot(self):
        return self.state

    def restore(self, snapshot, pos):
        self.state = snapshot

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
