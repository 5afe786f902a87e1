"""The one place attnlab writes Python code and runs it.

Two users: `attnlab.graph.plan` (a network's forward as straight-line code) and
`attnlab.stream.program` (a stream's step). Both walk the analysed graph in topological order
(`walk`), give every value an identifier made here (`Names`, `Refs`), write one line per layer
(`Source.line`), and run the source once (`define`) as a file of its own, `<attnlab KIND N>`,
which `linecache` knows, so tracebacks show the generated lines.

Data never becomes code: the source holds only identifiers and literals made here (`m3`, `v7`,
`x0`, …). Layer names, port names and specs come from users and files; they stay in the line
table (generated line → layer name), which `layer_at` reads to name the layer of a failing
line, and never enter the source, not even a comment.
"""
from __future__ import annotations

import itertools
import linecache
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Collection, Iterator

from attnlab.graph.names import format_port, parse_port

Key = tuple[str, str]          # (layer, port) of a value; ("<in>", input name) for a bare port

_ids = itertools.count()
_TABLES: dict[str, tuple[str, dict[int, str]]] = {}   # file name → (kind, {line: layer name})
_SHARED: dict[tuple, Generated] = {}          # (kind, source, line table) → its definition


# -- the walk -------------------------------------------------------------------------------

def input_key(net: Any, name: str) -> Key:
    """The key of network input `name`: an input layer's output, or an unconnected port
    (`layer` or `layer/port`) of another layer."""
    lname = parse_port(name)[0]
    layer = net.layer_map[lname]
    return (lname, layer.output_ports[0]) if layer.is_input else ("<in>", name)


def walk(net: Any, order: list[str]) -> Iterator[tuple[str, Any, list[Key]]]:
    """(name, layer, the keys of the values at its input ports) for each layer of `order` that
    is not an input layer; an unconnected port is the network input named after it."""
    layers, conns = net.layer_map, net.sources
    for name in order:
        layer = layers[name]
        if layer.is_input:
            continue
        keys = []
        for p in layer.input_ports:
            src = conns.get((name, p))
            keys.append(src if src is not None else ("<in>", format_port(name, p, layer.input_ports)))
        yield name, layer, keys


def output_keys(net: Any) -> list[tuple[str, Key]]:
    """(output name, key) for each network output, in output order."""
    return [(o, (n, p)) for n, p, o in net.open_outputs()]


# -- names --------------------------------------------------------------------------------

class Names:
    """Fresh variable names, `prefix` and a counter: v0, v1, …"""

    def __init__(self, prefix: str = "v") -> None:
        self.prefix, self.count = prefix, 0

    def new(self) -> str:
        self.count += 1
        return f"{self.prefix}{self.count - 1}"


def mask_var(var: str) -> str:
    """The name of the mask variable beside tensor variable `var` (v7 → w7)."""
    return "w" + var[1:]


class Refs:
    """Objects the generated code reads (modules, functions, constants), each by an indexed
    name (`prefix` and its index: m0, m1, …), never by anything of its own."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.items: list = []

    def add(self, obj: object) -> str:
        self.items.append(obj)
        return f"{self.prefix}{len(self.items) - 1}"

    def names(self) -> list[str]:
        return [f"{self.prefix}{i}" for i in range(len(self.items))]


def targets(outs: list[str]) -> str:
    """`a` for one variable, `a, b,` for several: the left-hand side taking a tuple apart."""
    return ", ".join(outs) + ("," if len(outs) > 1 else "")


def unpack(names: list[str], tuple_var: str) -> str:
    """`a, b, = t` (a plain `pass` when there is nothing to unpack)."""
    return f"{', '.join(names)}, = {tuple_var}" if names else "pass"


# -- the source ---------------------------------------------------------------------------

class Source:
    """Lines of generated code; a line written for a layer remembers its name (line → layer)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.layers: dict[int, str] = {}     # line number (from 1) → layer name

    def line(self, text: str, layer: str | None = None, indent: int = 0) -> None:
        self.lines.append(" " * indent + text)
        if layer is not None:
            self.layers[len(self.lines)] = layer

    def extend(self, other: Source, indent: int = 0) -> None:
        """Appends `other`'s lines (indented further), with their layers."""
        base = len(self.lines)
        self.lines += [" " * indent + t for t in other.lines]
        self.layers.update({base + i: n for i, n in other.layers.items()})

    @property
    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


@dataclass(frozen=True)
class Generated:
    """Source run as its own file: the names it defined and its line table."""

    namespace: dict
    filename: str
    source: str
    line_layers: dict[int, str]          # line number in the source → layer name


def define(source: Source, kind: str, share: bool = False) -> Generated:
    """Runs `source` as the file `<attnlab KIND N>` (in linecache and in the line table) and
    returns what it defined. `share`: the same source with the same line table (the same
    structure with the same layer names) is run once and its definition shared."""
    text = source.text
    key = (kind, text, tuple(sorted(source.layers.items()))) if share else None
    if key is not None and key in _SHARED:
        return _SHARED[key]
    filename = f"<attnlab {kind} {next(_ids)}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    table = dict(source.layers)
    _TABLES[filename] = (kind, table)
    ns: dict = {}
    exec(compile(text, filename, "exec"), ns)
    out = Generated(ns, filename, text, table)
    if key is not None:
        _SHARED[key] = out
    return out


def layer_at(tb: TracebackType | None, files: Collection[str] | None = None,
             kind: str | None = None) -> str | None:
    """The layer of the innermost generated line the traceback passes through, in the
    generated files `files` (any when None) of `kind` (any when None); None when it passes
    through none."""
    layer = None
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        found = _TABLES.get(filename)
        if found is not None and (files is None or filename in files) and \
                (kind is None or found[0] == kind):
            layer = found[1].get(tb.tb_lineno, layer)
        tb = tb.tb_next
    return layer
