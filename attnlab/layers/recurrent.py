"""Recurrent layers. With a padding mask they run on each sequence's true length (packed)."""
from __future__ import annotations

from contextlib import contextmanager

import torch
from torch import nn
from torch.nn.utils import rnn as rnn_utils

from attnlab.core.spec import Spec
from attnlab.core import checks as check
from .base import Layer


class _Recurrent(Layer):
    uses_mask = True
    state_names: tuple[str, ...] = ()
    torch_class: type = nn.Module
    module_class: type[nn.Module]          # the module that runs it (set by LSTM, GRU)

    def __init__(self, hidden: int, output_mode: str = "sequence", bidirectional: bool = False,
                 has_state_inputs: bool = False, has_state_outputs: bool = False,
                 name: str | None = None):
        super().__init__(name)
        self.hidden = check.integer(self, "hidden", hidden, example=64)
        self.output_mode = check.choice(self, "output_mode", output_mode, ("sequence", "last"))
        self.bidirectional = check.flag(self, "bidirectional", bidirectional)
        self.has_state_inputs = check.flag(self, "has_state_inputs", has_state_inputs)
        self.has_state_outputs = check.flag(self, "has_state_outputs", has_state_outputs)

    @property
    def input_ports(self) -> tuple[str, ...]:
        return ("in",) + (self.state_names if self.has_state_inputs else ())

    @property
    def output_ports(self) -> tuple[str, ...]:
        return ("out",) + (self.state_names if self.has_state_outputs else ())

    @property
    def width(self):
        return self.hidden * (2 if self.bidirectional else 1)

    def infer(self, specs: dict[str, Spec]) -> dict[str, Spec]:
        s = specs["in"]
        self.require(s, "in", ("BTC",), f"{type(self).__name__} reads sequences B×T×C; for images "
                     "insert ImageToSequence first, for features use Dense.")
        gates = 4 if self.state_names == ("hidden", "cell") else 3
        check.learnables_fit(self, "in", "Use a smaller hidden size.",
                             weight_ih=(gates * self.hidden, s.channels),
                             weight_hh=(gates * self.hidden, self.hidden))
        for port in self.input_ports[1:]:
            self.require(specs[port], port, ("BC",))
            self.require_channels(specs[port], port, self.width,
                                  f"The initial {port} state has {self.width} channels.")
        out = {"out": Spec.sequence(self.width, s.time) if self.output_mode == "sequence"
               else Spec.features(self.width)}
        out.update({p: Spec.features(self.width) for p in self.output_ports[1:]})
        return out

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return self.module_class(self, check.known(self, "in", specs["in"].channels))


class StateCarry:
    """The state LSTM and GRU modules hand from one call to the next while it is installed
    (`carried`): training on sequences split into pieces (TrainingOptions.sequence_length)
    starts each piece where the previous piece of the same mini-batch ended. The state is kept
    detached (truncated backpropagation through time: no gradient crosses a piece). A sequence
    with no step in a piece keeps its state. `reset()` starts the next mini-batch from zeros."""

    def __init__(self) -> None:
        self.states: dict[nn.Module, tuple[torch.Tensor, ...]] = {}

    def reset(self) -> None:
        self.states.clear()

    def initial(self, module: nn.Module):
        """The state to start from (dirs×B×H tensors, as torch takes it), or None: zeros."""
        state = self.states.get(module)
        if state is None:
            return None
        return state if len(state) > 1 else state[0]

    def keep(self, module: nn.Module, final, init, lengths) -> None:
        final = final if isinstance(final, tuple) else (final,)
        if init is not None and lengths is not None:
            start = init if isinstance(init, tuple) else (init,)
            ran = (lengths > 0).view(1, -1, 1)
            final = tuple(torch.where(ran, f, s) for f, s in zip(final, start))
        self.states[module] = tuple(f.detach() for f in final)


@contextmanager
def carried(root: nn.Module, carry: StateCarry | None):
    """While active, every LSTM and GRU module under `root` starts from `carry`'s state and
    leaves its final state there (None: each call starts from zeros, as usual)."""
    mods = [m for m in root.modules() if isinstance(m, _RecurrentModule)]
    before = [m.carry for m in mods]
    try:
        for m in mods:
            m.carry = carry
        yield mods
    finally:
        for m, c in zip(mods, before):
            m.carry = c


class _RecurrentModule:
    """Mixin run over an nn.LSTM/nn.GRU subclass: masks, output modes and state ports."""

    hidden_size: int                       # nn.LSTM's / nn.GRU's, next in the MRO
    carry: StateCarry | None = None        # installed by `carried` (pieces of sequences)

    def _setup(self, layer):
        self.last = layer.output_mode == "last"
        self.n_state_in = len(layer.input_ports) - 1
        self.n_state_out = len(layer.output_ports) - 1
        self.dirs = 2 if layer.bidirectional else 1

    def _run(self, x, states, mask):
        b = x.shape[0]
        init = None
        if states:
            # B×(dirs·H) → dirs×B×H, as torch wants initial states
            init = tuple(s.reshape(b, self.dirs, self.hidden_size).transpose(0, 1).contiguous()
                         for s in states)
            init = init[0] if len(init) == 1 else init
        elif self.carry is not None:
            init = self.carry.initial(self)  # type: ignore[arg-type]
        if mask is None:
            y, final = super().forward(x, init)  # type: ignore[misc]  # y: B×T×(dirs·H)
            lengths = None
        else:
            lengths = mask.sum(1)
            packed = rnn_utils.pack_padded_sequence(x, lengths.cpu().clamp(min=1),
                                                    batch_first=True, enforce_sorted=False)
            y, final = super().forward(packed, init)  # type: ignore[misc]
            y, _ = rnn_utils.pad_packed_sequence(y, batch_first=True, total_length=x.shape[1])
        if self.carry is not None:
            self.carry.keep(self, final, init, lengths)  # type: ignore[arg-type]
        if self.last:
            y = y[:, -1] if lengths is None else \
                y[torch.arange(b, device=y.device), (lengths - 1).clamp(min=0)]  # B×(dirs·H)
        if not self.n_state_out:
            return y
        final = final if isinstance(final, tuple) else (final,)
        # dirs×B×H → B×(dirs·H)
        return (y,) + tuple(f.transpose(0, 1).reshape(b, -1) for f in final)

    def forward(self, x, *states, masks=(None,)):
        return self._run(x, states, masks[0])


class _LSTMModule(_RecurrentModule, nn.LSTM):
    def __init__(self, layer, cin):
        nn.LSTM.__init__(self, cin, layer.hidden, batch_first=True, bidirectional=layer.bidirectional)
        self._setup(layer)


class _GRUModule(_RecurrentModule, nn.GRU):
    def __init__(self, layer, cin):
        nn.GRU.__init__(self, cin, layer.hidden, batch_first=True, bidirectional=layer.bidirectional)
        self._setup(layer)


class LSTM(_Recurrent):
    """Long short-term memory [lstmLayer, bilstmLayer].

    With a padding mask each sequence runs on its own length (packed), so padding changes
    neither its outputs nor its final state. Learnables as in `torch.nn.LSTM` (`weight_ih_l0`,
    `weight_hh_l0`, `bias_ih_l0`, `bias_hh_l0`, and `*_reverse` when bidirectional).

    Parameters
    ----------
    hidden : int
        The hidden size H.
    output_mode : "sequence" or "last"
        "sequence": every step's output; "last": each sequence's last valid step only.
    bidirectional : bool
        Also run backwards over each sequence (its valid steps) and concatenate: 2H channels.
    has_state_inputs : bool
        Adds input ports for the initial state (otherwise it starts at zero).
    has_state_outputs : bool
        Adds output ports for the final state.

    Shape
    -----
    - `in`: B×T×C
    - `hidden`, `cell` (with `has_state_inputs`): B×H' each
    - `out`: B×T×H' ("sequence") or B×H' ("last"), H' = H, or 2H when bidirectional
    - `hidden`, `cell` (with `has_state_outputs`): B×H' each

    Examples
    --------
    >>> import torch, attnlab as al
    >>> from attnlab import layers as L
    >>> net = al.Network([L.SequenceInput(3), L.LSTM(8, output_mode="last")])
    >>> net(torch.randn(2, 5, 3)).shape
    torch.Size([2, 8])
    """

    state_names = ("hidden", "cell")
    module_class = _LSTMModule


class GRU(_Recurrent):
    """Gated recurrent unit [gruLayer].

    As `LSTM`, with a single state `hidden`. Learnables as in `torch.nn.GRU`.

    Parameters
    ----------
    hidden : int
        The hidden size H.
    output_mode : "sequence" or "last"
        "sequence": every step's output; "last": each sequence's last valid step only.
    bidirectional : bool
        Also run backwards over each sequence (its valid steps) and concatenate: 2H channels.
    has_state_inputs : bool
        Adds input ports for the initial state (otherwise it starts at zero).
    has_state_outputs : bool
        Adds output ports for the final state.

    Shape
    -----
    - `in`: B×T×C
    - `hidden` (with `has_state_inputs`): B×H'
    - `out`: B×T×H' ("sequence") or B×H' ("last"), H' = H, or 2H when bidirectional
    - `hidden` (with `has_state_outputs`): B×H'
    """

    state_names = ("hidden",)
    module_class = _GRUModule
