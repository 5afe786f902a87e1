"""Sequences cut along time while training: `TrainingOptions.sequence_length` (MATLAB's
trainingOptions SequenceLength).

"shortest": each mini-batch is cut to its shortest sequence (nothing padded, the steps past it
dropped), one iteration as usual. A positive int N: each mini-batch is padded to its longest
sequence, as always, then split along time into pieces of N steps (the last may be shorter),
trained in consecutive iterations; every LSTM and GRU starts a piece from the state the
previous piece of the same mini-batch left (zeros for the first), detached, so no gradient
crosses a piece (truncated backpropagation through time). Layers without state (attention,
convolution, pooling) see the piece alone, as MATLAB runs them.

What a piece trains on:

- the sequence input: the piece's steps, with their padding mask (padding is masked, as
  everywhere in attnlab: a sequence that ended keeps its state); other inputs whole;
- a target per time step (sequence-to-sequence): the piece's steps; the piece's loss is the
  mean over its valid steps;
- a target per sequence (sequence-to-one): counted in the piece that holds the sequence's last
  step, where the network's output is the one it gives at the sequence's end. MATLAB's
  documentation says that the pieces run in consecutive iterations with the state carried
  between them, and not where a sequence's one response applies; attnlab applies it there,
  once. A piece in which no sequence ends, in a network without per-step targets, only
  advances the state: no loss, no update, and it is not counted as an iteration.

What cannot be made exact is refused when training starts, naming the option and the case: a
bidirectional LSTM/GRU, one with state inputs, or a torch RNN module wrapped as a layer (split:
their state cannot be carried as MATLAB carries it), more than one sequence input, several
processes (torchrun), checkpoints every few iterations (split: one could fall between the
pieces of a mini-batch, where the carried state is not saved), and a learning-rate schedule
laid out over the run's iterations when their number changes from epoch to epoch.
"""
from __future__ import annotations

import math
from typing import Iterator, NamedTuple

import numpy as np
import torch
from torch import nn

from attnlab.core.errors import ArgumentError
from ..layers.recurrent import GRU, LSTM, StateCarry, _RecurrentModule
from attnlab.core.sequences import Padded
from .data import Batch, input_spec
from .labels import IGNORED
from .sampler import EpochOrder


class Piece(NamedTuple):
    """One piece of a mini-batch: the Batch it trains on, and whether it trains (False: it only
    advances the carried state)."""

    batch: Batch
    trains: bool


def make_pieces(net, heads: list, o, world: int, data) -> "Pieces | None":
    """The Pieces for `o.sequence_length`, or None when batches are used whole ("longest", or
    a network without a sequence input, where MATLAB's option has no effect either)."""
    length = o.sequence_length
    if length is None:
        return None
    what = _option(length)
    names = [n for n in net.input_names if _is_sequence(net, n, what)]
    if not names:
        return None
    if len(names) > 1:
        raise ArgumentError(f"{what} cuts one time axis, and the network has "
                            f"{len(names)} sequence inputs ({', '.join(map(repr, names))}), whose "
                            "lengths need not agree. Use sequence_length=None (\"longest\").")
    if world > 1:
        raise ArgumentError(f"{what} with training across {world} processes: each process "
                            "holds part of the mini-batch, and the pieces are cut by the whole "
                            "mini-batch's lengths. Train in one process, or use "
                            "sequence_length=None (\"longest\").")
    if isinstance(length, int):
        _check_split(net, o, what, data, names[0])
    return Pieces(length, names[0], heads)


class Pieces:
    """Cuts each mini-batch (`split`) and carries the recurrent state between its pieces."""

    def __init__(self, length, input_name: str, heads: list):
        self.length = length
        self.input = input_name
        self.heads = heads
        self.stepwise = {h.output for h in heads if h.spec.is_sequence}
        self.carry = StateCarry() if isinstance(length, int) else None

    def evaluation_carry(self) -> StateCarry | None:
        """A carry of its own for validation, so that it leaves training's state alone."""
        return None if self.carry is None else StateCarry()

    def split(self, batch: Batch, carry: StateCarry | None = None) -> Iterator[Piece]:
        """The pieces of `batch` in order; `carry` (default: training's) restarts from zeros."""
        x = batch.inputs[self.input]
        data, mask = (x.data, x.mask) if isinstance(x, Padded) else (x, None)
        t = data.shape[1]
        host = None if mask is None else mask.sum(1).cpu().numpy()   # one sync per batch
        self._check_targets(batch, t)
        if self.length == "shortest":          # every sequence cut to the shortest: all whole
            m = t if host is None else int(host.min())
            yield self._cut(batch, 0, m, None, m)
            return
        carry = carry if carry is not None else self.carry
        if carry is not None:
            carry.reset()
        for start in range(0, t, self.length):
            yield self._cut(batch, start, min(start + self.length, t), host, t)

    def per_epoch(self, order: EpochOrder, data) -> int | None:
        """The iterations of an epoch in this order, when the lengths are known beforehand."""
        if not isinstance(self.length, int):
            return None
        lengths = _lengths(data, self.input)
        if lengths is None:
            return None
        total = 0
        for k in range(order.batches):
            lo, hi = order.batch(k)
            total += _iterations(lengths[order.order[lo:hi]], self.length, bool(self.stepwise))
        return total

    # ------------------------------------------------------------------------ cutting ---

    def _cut(self, batch: Batch, start: int, stop: int, host, t: int) -> Piece:
        whole = host is None or bool((host >= stop).all())      # every row valid in the piece
        inputs = dict(batch.inputs)
        x = inputs[self.input]
        if isinstance(x, Padded):
            inputs[self.input] = x.data[:, start:stop] if whole else \
                Padded(x.data[:, start:stop], x.mask[:, start:stop])
        else:
            inputs[self.input] = x[:, start:stop]
        targets, units = {}, {}
        ends = None
        for h in self.heads:
            y, ymask = batch.targets[h.output]
            if h.output in self.stepwise:
                y = y[:, start:stop]
                ymask = None if ymask is None or whole else ymask[:, start:stop]
            else:
                ends = _ends(host, start, stop, t, len(y))
                ymask = None if ends is None else torch.as_tensor(ends, device=y.device)
            targets[h.output] = (y, ymask)
            units[h.output] = _units(h, y, ymask)
        trains = bool(self.stepwise) or ends is None or bool(ends.any())
        size = inputs[self.input].shape[0] if not isinstance(inputs[self.input], Padded) \
            else inputs[self.input].data.shape[0]
        return Piece(Batch(inputs, targets, units, size, dict(units)), trains)

    def _check_targets(self, batch: Batch, t: int) -> None:
        for name in self.stepwise:
            y, _ = batch.targets[name]
            if y.shape[1] != t:
                raise ArgumentError(
                    f"{_option(self.length)}: output '{name}' has {y.shape[1]} time steps in a "
                    f"mini-batch whose input '{self.input}' has {t}; the pieces are cut from "
                    "inputs and per-step targets alike, which needs an output that keeps the "
                    "input's time steps. Use sequence_length=None (\"longest\").")


def _ends(host, start: int, stop: int, t: int, b: int) -> np.ndarray | None:
    """B booleans: the sequences whose last step lies in [start, stop); None: all of them."""
    if host is None:
        return None if stop == t else np.zeros(b, dtype=bool)
    ends = (host > start) & (host <= stop)
    return None if ends.all() else ends


def _units(h, y: torch.Tensor, mask: torch.Tensor | None) -> int:
    """The prediction units of a piece's targets: what its mean loss divides by."""
    if h.kind == "class":
        keep = y != IGNORED
        if mask is not None:
            keep = keep & mask.view(*mask.shape, *([1] * (keep.dim() - mask.dim())))
        return int(keep.sum())
    cd = h.loss.channel_dim % y.dim()
    shape = y.shape[:cd] + y.shape[cd + 1:]                # a unit per position, not channel
    if mask is None:
        return math.prod(shape)
    return int(mask.sum()) * math.prod(shape[mask.dim():])


def _iterations(lengths: np.ndarray, n: int, stepwise: bool) -> int:
    pieces = -(-lengths // n)                               # ceil: the piece of each end
    return int(pieces.max()) if stepwise else len(np.unique(pieces))


def _lengths(data, name: str) -> np.ndarray | None:
    field = getattr(data, "inputs", {}).get(name)          # MemoryData; a Dataset: unknown
    if field is None:
        return None
    if field.lengths is not None:
        return field.lengths
    return np.full(len(field), field.data.shape[1], dtype=np.int64)


def _option(length) -> str:
    shown = f"\"{length}\"" if isinstance(length, str) else str(length)
    return f"TrainingOptions sequence_length={shown} (MATLAB's SequenceLength={shown})"


def _is_sequence(net, name: str, what: str) -> bool:
    spec = input_spec(net, name)
    if spec is None:
        raise ArgumentError(f"{what}: input '{name}' has no input layer, so which inputs are "
                            "sequences is not known before the data arrive. Start the network "
                            "with an input layer, e.g. L.SequenceInput(channels).")
    return spec.is_sequence


def _recurrent(net) -> Iterator:
    for layer in net.layers:
        if isinstance(layer, (LSTM, GRU)):
            yield layer
        elif hasattr(layer, "layers") and hasattr(layer, "input_names"):   # a nested Network
            yield from _recurrent(layer)


def _check_split(net, o, what: str, data, input_name: str) -> None:
    for layer in _recurrent(net):
        kind = type(layer).__name__
        if layer.bidirectional:
            raise ArgumentError(f"{what}: '{layer.name}' is a bidirectional {kind}, whose "
                                "backward direction reads each piece from its end; no state "
                                "carried from piece to piece gives its result over the whole "
                                "sequence, so attnlab does not guess one. Use "
                                "sequence_length=None (\"longest\") or \"shortest\".")
        if layer.has_state_inputs:
            raise ArgumentError(f"{what}: '{layer.name}' ({kind}) takes its initial state from "
                                "its state inputs, and split training carries the state from "
                                "one piece to the next. Use sequence_length=None (\"longest\").")
    foreign = next((name for name, m in net.named_modules() if isinstance(m, nn.RNNBase)
                    and not isinstance(m, _RecurrentModule)), None)
    if foreign is not None:
        raise ArgumentError(f"{what}: '{foreign}' is a torch recurrent module of its own (not "
                            "an attnlab LSTM or GRU layer), whose state attnlab cannot carry "
                            "from one piece to the next. Use L.LSTM/L.GRU, or "
                            "sequence_length=None (\"longest\").")
    if o.checkpoint_dir and o.checkpoint_frequency_unit == "iteration":
        raise ArgumentError(f"{what} with checkpoint_frequency_unit=\"iteration\": a checkpoint "
                            "could fall between two pieces of a mini-batch, where the state "
                            "carried to the next piece is not saved, and resuming from it "
                            "would not continue exactly. Checkpoint every epoch "
                            "(checkpoint_frequency_unit=\"epoch\").")
    laid_out = o.learning_rate_schedule in ("cosine", "warmup-cosine")
    lengths = _lengths(data, input_name)
    if laid_out and (lengths is None or len(set(lengths.tolist())) > 1):
        raise ArgumentError(f"{what} with learning_rate_schedule=\"{o.learning_rate_schedule}\""
                            ": the schedule is laid out over the run's iterations, and with "
                            "sequences of different lengths the number of pieces changes with "
                            "each epoch's mini-batches. Use \"piecewise\", \"warmup\" or no "
                            "schedule, or sequences of one length.")
