"""Layers that combine several inputs: in1..inN → out."""
from __future__ import annotations

import torch
from torch import nn

from attnlab.core.errors import FormatError, SizeError
from attnlab.core.spec import Spec
from attnlab.core import checks as check
from .base import Layer


class _Combine(Layer):
    def __init__(self, n: int = 2, name: str | None = None):
        super().__init__(name)
        self.n = check.integer(self, "n", n, least=2, most=check.MAX_PORTS, example=2)

    @property
    def input_ports(self) -> tuple[str, ...]:
        return tuple(f"in{i}" for i in range(1, self.n + 1))

    def _check_same(self, specs, skip_dim=None):
        first = specs["in1"]
        for p in self.input_ports[1:]:
            s = specs[p]
            if s.labels != first.labels:
                raise self.error(FormatError, p, f"expected {first} (as 'in1'), received {s}. "
                                 "All inputs must have the same kind of dimensions.")
            for i, (a, b) in enumerate(zip(first.sizes, s.sizes)):
                if i != skip_dim and a is not None and b is not None and a != b:
                    raise self.error(SizeError, p, f"expected {first} (as 'in1'), received {s}. "
                                     "Insert a Dense layer to match the channels.")
        return first


class Addition(_Combine):
    """Elementwise sum of `n` inputs of the same spec [additionLayer]. No learnables.

    Parameters
    ----------
    n : int
        The number of inputs, ports `in1` … `in{n}`.

    Shape
    -----
    - `in1` … `in{n}`: the same spec each (any kind)
    - `out`: that spec
    """

    time_local = True

    def infer(self, specs: dict[str, Spec]) -> Spec:
        return self._check_same(specs)

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return _Sum()


class Multiplication(_Combine):
    """Elementwise product of `n` inputs of the same spec [multiplicationLayer]. No learnables.

    Parameters
    ----------
    n : int
        The number of inputs, ports `in1` … `in{n}`.

    Shape
    -----
    - `in1` … `in{n}`: the same spec each (any kind)
    - `out`: that spec
    """

    time_local = True

    def infer(self, specs: dict[str, Spec]) -> Spec:
        return self._check_same(specs)

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return _Product()


class _Sum(nn.Module):
    def forward(self, *xs):
        y = xs[0]
        for x in xs[1:]:
            y = y + x
        return y


class _Product(nn.Module):
    def forward(self, *xs):
        y = xs[0]
        for x in xs[1:]:
            y = y * x
        return y


class Concatenation(_Combine):
    """Concatenation of `n` inputs [concatenationLayer, depthConcatenationLayer].

    Parameters
    ----------
    n : int
        The number of inputs, ports `in1` … `in{n}`.
    dim : "channel" or "time"
        "channel" joins the channels (of sequences, features or images); "time" joins sequences
        one after the other, padding masks included.

    Shape
    -----
    - `in1` … `in{n}`: the same spec except along `dim`
    - `out`: B×T×ΣC, B×ΣC or B×ΣC×H×W ("channel"); B×ΣT×C ("time")

    Examples
    --------
    >>> import torch, attnlab as al
    >>> from attnlab import layers as L
    >>> net = al.Network([L.FeatureInput(3, name="a"), L.Concatenation(2, name="cat")])
    >>> net.add(L.FeatureInput(5, name="b")).connect("b", "cat/in2").analyze().out_specs["cat"]["out"]
    Spec(B×8)
    """

    stem = "concat"
    uses_mask = True
    returns_mask = True
    keeps_ids = True            # the values pass unchanged: token ids stay ids

    def __init__(self, n: int = 2, dim: str = "channel", name: str | None = None):
        super().__init__(n, name)
        self.dim = check.choice(self, "dim", dim, ("channel", "time"))

    def infer(self, specs: dict[str, Spec]) -> Spec:
        first = specs["in1"]
        if self.dim == "time":
            self.require(first, "in1", ("BTC",), "dim='time' concatenates sequences.")
            axis = 1
        else:
            axis = first.labels.index("C")
        self._check_same(specs, skip_dim=axis)
        parts = [specs[p].sizes[axis] for p in self.input_ports]
        total = None if any(p is None for p in parts) else sum(p for p in parts if p is not None)
        return Spec(first.labels, first.sizes[:axis] + (total,) + first.sizes[axis + 1:])

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        first = specs["in1"]
        return _Concat(1 if self.dim == "time" else first.labels.index("C") - len(first.labels),
                       self.dim == "time")


class _Concat(nn.Module):
    def __init__(self, axis, time):
        super().__init__()
        self.axis, self.time = axis, time

    def forward(self, *xs, masks=()):
        y = torch.cat(xs, self.axis)
        if not masks or all(m is None for m in masks):
            return y, None
        if self.time:
            return _pack_in_time(xs, masks)
        # channel concat: a step is valid where every input is valid
        out = None
        for m in masks:
            if m is not None:
                out = m if out is None else out & m
        return y, out


def _pack_in_time(xs, masks):
    """Each row: the valid steps of in1, then those of in2, …, then padding (B×ΣT×C, B×ΣT)."""
    b, total = xs[0].shape[0], sum(x.shape[1] for x in xs)
    lengths = [m.sum(1) if m is not None else torch.full((b,), x.shape[1], device=x.device)
               for x, m in zip(xs, masks)]
    pos = torch.arange(total, device=xs[0].device).unsqueeze(0)           # 1×ΣT
    y = torch.zeros(b, total, xs[0].shape[2], dtype=xs[0].dtype, device=xs[0].device)
    start = torch.zeros(b, 1, dtype=torch.long, device=xs[0].device)
    for x, n in zip(xs, lengths):                     # over the inputs, not over batch or time
        local = pos - start                                               # B×ΣT
        take = (local >= 0) & (local < n.unsqueeze(1))
        idx = local.clamp(0, x.shape[1] - 1).unsqueeze(-1).expand(-1, -1, x.shape[2])
        y = torch.where(take.unsqueeze(-1), x.gather(1, idx), y)
        start = start + n.unsqueeze(1)
    return y, pos < start
