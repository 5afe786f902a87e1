"""Trax-style combinators: `Serial`, `Parallel`, `Branch`, `Residual`, `Select`.

Each returns an `al.Network` without input layers, usable as a layer (inside another combinator
or inside a Network with input layers) or on its own (sizes then come from the first call's data,
or from `net.analyze(x, ...)` with example inputs).

Items and ports
---------------
Trax layers read and write a *stack* of items. Here an item is one activation (a port), and a
combinator's items are its ports, in order:

- inputs are named `in` when there is one, else `in1`, `in2`, …, `inN`;
- outputs are named `out` when there is one, else `out1`, …, `outM`.

They are layers of type `Port` (the identity) inside the network, so `analyze()` shows the size
of every input and output, and one input can feed several children (`Branch`, `Residual`,
`Select`). A child named `in`, `out`, `in2`, … is refused (those names are the ports'). From
outside, connect to `"serial"` (one input) or `"serial/in2"`, and from `"serial/out1"`.

Counts
------
A child takes `len(layer.input_ports)` items and gives `len(layer.output_ports)`: `Dense` 1 → 1,
`Attention` 3 (query, key, value) → 1, `Addition(n)` n → 1, a Network its inputs → its outputs.
`None` is the identity (1 → 1), as in Trax; a list (or tuple) of children is a `Serial` of them.

- `Serial(a, b, c)`: a's outputs feed b's inputs in order, b's feed c's. The counts must match
  exactly (Trax would leave extra items on the stack; in a graph they would become stray outputs),
  else a `NetworkError` names both children and both counts. In: a's inputs; out: c's outputs.
- `Parallel(a, b)`: a takes the first n_in(a) inputs, b the next n_in(b); outputs are a's then
  b's. In: Σ n_in; out: Σ n_out.
- `Branch(a, b)`: every child reads copies of the same inputs — child j the first n_in(j) of
  them (Trax) —; outputs are a's then b's. In: max n_in; out: Σ n_out.
- `Residual(*layers, shortcut=None)`: `x + Serial(*layers)(x)` with `Addition`; the body gives one
  output; the shortcut (identity, or a 1 → 1 layer) reads the first input. In: the body's; out: 1.
- `Select(indices, n_in=None)`: output j is input `indices[j]` (0-based, as Trax), so items can
  be reordered, copied (`Select([0, 0, 0])` → query, key, value from one sequence) or dropped.
  In: `n_in` (default `max(indices) + 1`); out: `len(indices)`.

Padding masks travel with their items through every combinator.

Example — Trax's `AttentionQKV(d, n_heads)`, equal to `L.MultiHeadAttention(n_heads, d)` with
the same weights::

    al.Serial(al.Parallel(L.Dense(d), L.Dense(d), L.Dense(d)), L.Attention(n_heads), L.Dense(d))
"""
from __future__ import annotations

import re
from typing import Sequence

from torch import nn

from attnlab.core.errors import ArgumentError, NetworkError
from .graph.names import format_port
from attnlab.core.checks import MAX_PORTS
from .layers.base import Layer
from .layers.combine import Addition
from .network import Network
from attnlab.core.spec import Spec

__all__ = ["Serial", "Parallel", "Branch", "Residual", "Select", "Port", "Pick"]

_PORT_NAME = re.compile(r"^(in|out)\d*$")


# --------------------------------------------------------------------------- layers ---

class Port(Layer):
    """A combinator's input or output: passes its input through unchanged (any spec → the same
    spec, the padding mask too). No learnables."""

    stem = "port"
    keeps_ids = True            # the values pass unchanged: token ids stay ids

    def infer(self, specs: dict[str, Spec]) -> Spec:
        return specs["in"]

    def build(self, specs):
        return nn.Identity()


class Pick(Layer):
    """Rearranges `n_in` items: output j is input `indices[j]` (0-based). Ports `in`/`in1..inN`
    → `out`/`out1..outM`, M = len(indices); specs and padding masks follow their items; inputs
    not picked are dropped. No learnables. (`Select` wraps it in a network.)"""

    uses_mask = True
    returns_mask = True
    keeps_ids = True            # items pass unchanged: token ids stay ids

    def __init__(self, indices, n_in: int | None = None, name: str | None = None):
        super().__init__(name)
        self.indices, self.n_in = _check_indices(indices, n_in)

    @property
    def input_ports(self):
        return _port_names("in", self.n_in)

    @property
    def output_ports(self):
        return _port_names("out", len(self.indices))

    def infer(self, specs):
        ins = self.input_ports
        return {o: specs[ins[i]] for o, i in zip(self.output_ports, self.indices)}

    def build(self, specs):
        return _PickModule(self.indices)


class _PickModule(nn.Module):
    def __init__(self, indices):
        super().__init__()
        self.indices = indices

    def forward(self, *xs, masks=()):
        ys = tuple(xs[i] for i in self.indices)
        ms = tuple(masks[i] if masks else None for i in self.indices)
        if len(ys) == 1:            # one output: the plan unpacks (tensor, mask)
            return ys[0], ms[0]
        return ys, ms


# ---------------------------------------------------------------------- combinators ---

def Serial(*layers: Layer | list | None, name: str | None = None) -> Network:
    """Children in series, as Trax's stack: each child's outputs feed the next child's inputs
    in order.

    Parameters
    ----------
    *layers : Layer, list or None
        The children (a list is flattened into the series; None is the identity).
    name : str, optional
        The network's name when it is added as a layer.

    Returns
    -------
    Network
        Inputs: the first child's; outputs: the last child's. `Serial()` is the identity
        (1 → 1).

    Raises
    ------
    NetworkError
        When a child gives another number of items than the next one takes.
    """
    w = _Wiring("Serial", name)
    chain = _children(layers, "Serial")
    w.check_names(chain)
    ins = w.inputs(_n_in(chain))
    return w.finish(w.chain(chain, ins))


def Parallel(*layers: Layer | list | None, name: str | None = None) -> Network:
    """Children side by side: child i takes the next n_in(i) inputs and gives the next n_out(i)
    outputs.

    Parameters
    ----------
    *layers : Layer, list or None
        The children (a list runs in series as one child; None passes its item through).
    name : str, optional
        The network's name when it is added as a layer.

    Returns
    -------
    Network
        E.g. `Parallel(L.Dense(d), L.Dense(d), L.Dense(d))`: 3 items (B×T×C each) → 3 items
        (B×T×d).
    """
    w = _Wiring("Parallel", name)
    children = _children(layers, "Parallel", nest=True)
    if not children:
        raise ArgumentError("Parallel: expected at least one layer, received none. Give the "
                            "layers that run side by side, e.g. al.Parallel(L.Dense(8), None).")
    w.check_names(children)
    ins = w.inputs(sum(_n_in(c) for c in children))
    outs, at = [], 0
    for i, child in enumerate(children, 1):
        n = _n_in(child)
        outs += w.place(child, ins[at:at + n], i)
        at += n
    return w.finish(outs)


def Branch(*layers: Layer | list | None, name: str | None = None) -> Network:
    """Children reading copies of the same inputs: child j gets the first n_in(j) inputs, as in
    Trax; their outputs follow each other in order.

    Parameters
    ----------
    *layers : Layer, list or None
        The children (a list runs in series as one child; None passes its inputs through).
    name : str, optional
        The network's name when it is added as a layer.

    Returns
    -------
    Network
        Inputs: the largest n_in; outputs: Σ n_out. `Branch(None, L.Dense(d))` gives
        (x, Dense(x)).
    """
    w = _Wiring("Branch", name)
    children = _children(layers, "Branch", nest=True)
    if not children:
        raise ArgumentError("Branch: expected at least one layer, received none. Give the "
                            "layers that read the same input, e.g. al.Branch(None, L.Dense(8)).")
    w.check_names(children)
    ins = w.inputs(max(_n_in(c) for c in children))
    outs = []
    for i, child in enumerate(children, 1):
        outs += w.place(child, ins[:_n_in(child)], i)
    return w.finish(outs)


def Residual(*layers: Layer | list | None, shortcut: Layer | list | None = None,
             name: str | None = None) -> Network:
    """`x + Serial(*layers)(x)`, through an `Addition` named `addition`.

    Parameters
    ----------
    *layers : Layer, list or None
        The body, in series; it must give one output of the input's size.
    shortcut : Layer or list, optional
        Applied to the first input on the way to the addition (default: the input itself).
    name : str, optional
        The network's name when it is added as a layer.

    Returns
    -------
    Network
        Inputs: the body's (at least 1); one output. The addition's `in1` is the shortcut, `in2`
        the body's output.
    """
    w = _Wiring("Residual", name)
    body = _children(layers, "Residual")
    short = _children([shortcut], "Residual")[0]
    w.check_names(body + ([short] if short is not None else []))
    ins = w.inputs(_n_in(body))
    outs = w.chain(body, ins)
    if len(outs) != 1:
        raise NetworkError(f"Residual: expected the body to give 1 output to add to the input, "
                           f"received {len(outs)} ({', '.join(outs)}). End the body with a layer "
                           "that gives one output, or use al.Select([...]) to keep one item.")
    if short is not None and (_n_in(short) != 1 or _n_out(short) != 1):
        raise NetworkError(f"Residual: expected a shortcut with 1 input and 1 output, received "
                           f"{_describe(short)} with {_n_in(short)} input(s) and {_n_out(short)} "
                           "output(s). Use a one-to-one layer such as L.Dense(C).")
    skip = w.place(short, ins[:1], "shortcut") if short is not None else ins[:1]
    return w.finish([format_port(add_residual(w.net, skip[0], outs[0]), "out")])


def add_residual(net: Network, skip: str, branch: str, name: str | None = None) -> str:
    """Adds to `net` the `Addition` of `skip` (its `in1`) and `branch` (`in2`), two layers or
    ports already in `net`: the one way attnlab writes a residual connection into a graph
    (`Residual`, the blocks of `al.blocks`, the Hugging Face families). Returns its name."""
    add = Addition(2, name=name)
    net.add(add)
    net.connect(skip, format_port(add.name, "in1"))
    net.connect(branch, format_port(add.name, "in2"))
    return add.name


def Select(indices: Sequence[int], n_in: int | None = None, name: str | None = None) -> Network:
    """Picks, reorders, copies or drops items: output j is input `indices[j]` (0-based).

    Parameters
    ----------
    indices : sequence of int
        The input each output takes.
    n_in : int, optional
        The number of inputs (default: max(indices) + 1).
    name : str, optional
        The network's name when it is added as a layer.

    Returns
    -------
    Network
        `len(indices)` outputs. `Select([0, 0, 0])` turns one sequence into query, key and value;
        `Select([1, 0])` swaps two items; `Select([0], n_in=2)` drops the second.
    """
    indices, n_in = _check_indices(indices, n_in)
    w = _Wiring("Select", name)
    ins = w.inputs(n_in)
    pick = Pick(indices, n_in)
    w.net.add(pick)
    for ref, port in zip(ins, pick.input_ports):
        w.net.connect(ref, format_port(pick.name, port))
    return w.finish([format_port(pick.name, p) for p in pick.output_ports])


# ------------------------------------------------------------------------- wiring ------

class _Wiring:
    """Builds one combinator network: input ports, children, output ports."""

    def __init__(self, kind: str, name: str | None):
        self.kind = kind
        self.net = Network(name=name)
        # unnamed, it is added as 'serial', 'parallel', …: per instance, over the class's stem
        self.net.stem = kind.lower()  # type: ignore[misc]
        self.net.metadata["combinator"] = kind

    def check_names(self, children):
        for i, child in enumerate(_flat(children), 1):
            if child is not None and child.name is not None and _PORT_NAME.match(child.name):
                raise ArgumentError(
                    f"{self.kind}: layer '{child.name}' ({child.type_name}): expected a name other "
                    f"than in, in1…, out, out1…, received '{child.name}', which {self.kind} uses "
                    f"for its ports. Rename the layer, e.g. name='{child.name}_{child.stem}'.")

    def inputs(self, n: int) -> list[str]:
        refs = []
        for port in _port_names("in", n):
            self.net.add(Port(name=port))
            refs.append(f"{port}/out")
        return refs

    def finish(self, refs: list[str]) -> Network:
        for ref, port in zip(refs, _port_names("out", len(refs))):
            self.net.add(Port(name=port))
            self.net.connect(ref, port)
        return self.net

    def place(self, child, sources: list[str], position) -> list[str]:
        """Adds `child` (a layer, None or a list = series) fed by `sources`; its output refs."""
        if child is None:
            return list(sources)
        if isinstance(child, list):
            return self.chain(child, sources)
        self.net.add(child)
        for ref, port in zip(sources, child.input_ports):
            self.net.connect(ref, format_port(child.name, port))
        return [format_port(child.name, port) for port in child.output_ports]

    def chain(self, children: list, sources: list[str]) -> list[str]:
        """Children in series from `sources`; checks each count against the previous outputs."""
        before = None                                   # (description, position) of the feeder
        for i, child in enumerate(children, 1):
            if isinstance(child, Layer):
                self.net.add(child)                     # names it, for the message below
            need = _n_in(child)
            if need != len(sources) and before is not None:
                raise self._count_error(child, i, need, before, len(sources))
            before = (_describe(child), i, sources)
            if isinstance(child, Layer):
                for ref, port in zip(sources, child.input_ports):
                    self.net.connect(ref, format_port(child.name, port))
                sources = [format_port(child.name, port) for port in child.output_ports]
            else:
                sources = self.place(child, sources, i)
        return sources

    def _count_error(self, child, i, need, before, have):
        what, j, _ = before
        ports = f" ({', '.join(child.input_ports)})" if isinstance(child, Layer) else ""
        fix = ("Give it as many items as it takes: e.g. al.Select([0, 0, 0]) before it copies one "
               "item into three; al.Parallel(...) or al.Branch(...) make several"
               if need > have else
               "Reduce the items first: e.g. al.Select([0], n_in=2) keeps the first, "
               "L.Addition(n) or L.Concatenation(n) merges n")
        head = (f"layer '{child.name}' ({child.type_name}, child {i})" if isinstance(child, Layer)
                else f"child {i}, {_describe(child)}")
        return NetworkError(
            f"{self.kind}: {head}: expected {need} input(s){ports} from the previous child, "
            f"received {have}: the output(s) of child {j}, {what}. {fix}.")


# ------------------------------------------------------------------------- helpers -----

def _children(layers, kind: str, nest: bool = False) -> list:
    """Checks the children; Serial-style lists are flattened unless `nest` (then a list stays
    one child that runs in series)."""
    out: list = []                       # layers, None (identity) and nested lists
    for x in layers:
        if isinstance(x, (list, tuple)):
            inner = _children(x, kind)
            if nest:
                out.append(inner)
            else:
                out += inner
        elif x is None or isinstance(x, Layer):
            if x is not None and x.is_input:
                raise ArgumentError(
                    f"{kind}: layer '{x.name or x.stem}' ({x.type_name}): expected a layer with "
                    f"inputs, received an input layer. A combinator takes its inputs from where it "
                    f"is placed: put the input layer in the outer network, e.g. "
                    f"al.Network([{x.type_name}(...), al.{kind}(...)]).")
            out.append(x)
        else:
            fix = ("Wrap a torch module with L.Module(module)." if isinstance(x, nn.Module)
                   else "Give attnlab layers, None (identity) or lists of them.")
            raise ArgumentError(f"{kind}: expected attnlab layers, received "
                                f"{type(x).__name__}. {fix}")
    return out


def _flat(children):
    for c in children:
        if isinstance(c, list):
            yield from _flat(c)
        else:
            yield c


def _n_in(child) -> int:
    if child is None:
        return 1
    if isinstance(child, list):
        return _n_in(child[0]) if child else 1
    return len(child.input_ports)


def _n_out(child) -> int:
    if child is None:
        return 1
    if isinstance(child, list):
        return _n_out(child[-1]) if child else 1
    return len(child.output_ports)


def _describe(child) -> str:
    if child is None:
        return "None (identity, 1 → 1)"
    if isinstance(child, list):
        return f"a series of {len(child)}"
    return f"'{child.name}' ({child.type_name}, {len(child.input_ports)} → {len(child.output_ports)})"


def _port_names(prefix: str, n: int) -> tuple[str, ...]:
    return (prefix,) if n == 1 else tuple(f"{prefix}{i}" for i in range(1, n + 1))


def _check_indices(indices, n_in):
    try:
        indices = tuple(indices)
    except TypeError:
        raise ArgumentError(f"Select: expected a list of 0-based item indices, received "
                            f"{indices!r}. E.g. al.Select([0, 0, 0]).") from None
    if not indices or len(indices) > MAX_PORTS or not all(
            isinstance(i, int) and not isinstance(i, bool) and 0 <= i < MAX_PORTS for i in indices):
        raise ArgumentError(f"Select: expected a non-empty list of at most {MAX_PORTS} 0-based "
                            f"indices in 0…{MAX_PORTS - 1}, received {_short(list(indices))}. "
                            "E.g. al.Select([0, 0, 0]) copies item 0 three times.")
    least = max(indices) + 1
    if n_in is None:
        n_in = least
    if not isinstance(n_in, int) or isinstance(n_in, bool) or not least <= n_in <= MAX_PORTS:
        raise ArgumentError(f"Select: expected n_in ≥ {least} (the largest index + 1) and ≤ "
                            f"{MAX_PORTS}, received {n_in!r}. Leave n_in out, or pass the number "
                            "of items to select from.")
    return indices, n_in


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
