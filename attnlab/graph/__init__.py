"""The graph: named layers joined port to port, and its editing. No tensors, no modules.

`Graph` is what analysis, compilation, pictures, persistence and streaming read; `Network`
(attnlab.network) is a `Graph` that is also a `torch.nn.Module`, owning the built modules and
the compiled plan. This module imports nothing above the layers, so imports flow one way:
layers → graph → analysis/compile/io/viz/stream → network. The names of ports, learnables and
module paths are written in `attnlab.graph.names`; the messages' hints in `.hints`.
"""
from __future__ import annotations
from types import MappingProxyType
from typing import Mapping, NamedTuple

from attnlab.core.errors import AttnlabError, NetworkError, close_matches
from attnlab.layers.base import LAYER_TYPES, Layer, check_name
from .hints import described, layer_fix, name_fix
from .names import NameIndex, format_port, module_containers, module_path, parse_port


class Connection(NamedTuple):
    """One edge of a network: from `source` ("layer" or "layer/port", an output) to
    `destination` (an input port, "layer/port"), as `Network.connections` lists them."""

    source: str
    destination: str

    def __str__(self):
        return f"{self.source} → {self.destination}"


def _path_clash(container: str, nested: str) -> NetworkError:
    return NetworkError(
        f"layer names '{container}' and '{nested}' clash: a '.' in a layer name nests its module "
        f"under containers named by the parts before it, so layer_modules.{container} would hold "
        f"the module of layer '{container}' and be the container of layer '{nested}' at once. "
        f"Rename one of them, e.g. '{nested}' to '{container}_{nested[len(container) + 1:]}' "
        "(a '_' does not nest).")


class LayerList(tuple):
    """The network's layers in order; also indexable by name."""

    def __getitem__(self, key):
        if isinstance(key, str):
            for layer in self:
                if layer.name == key:
                    return layer
            raise KeyError(f"no layer named '{key}'.{close_matches(key, [l.name for l in self])}")
        return tuple.__getitem__(self, key)


# What every Layer offers those who write layer kinds (checks, messages, the default name's
# stem). A graph is a layer and keeps them working, but they are not a network's API, so they
# stay out of dir() and tab completion.
LAYER_AUTHOR_HELPERS = frozenset({"error", "require", "require_channels", "infer_all", "stem"})


class Graph(Layer):
    """Layers by unique name and connections `(dst, dst_port) → (src, src_port)`."""

    stem = "network"
    # the attributes of the containers that hold the layers' modules (a Network's, set there):
    # a part of a module path named so would be shadowed by them
    _reserved_parts: frozenset[str] = frozenset()

    def __init__(self, name: str | None = None):
        Layer.__init__(self, name)
        self._layers: dict[str, Layer] = {}
        self._conns: dict[tuple[str, str], tuple[str, str]] = {}
        self._names = NameIndex()

    # ------------------------------------------------------------------------- editing ---
    def add(self, layers: Layer | list[Layer] | tuple[Layer, ...]) -> "Graph":
        """Adds a layer, or a list of layers connected in order (each first output to the next
        layer's first input). Returns the network, so calls can chain."""
        new = list(layers) if isinstance(layers, (list, tuple)) else [layers]
        for i, layer in enumerate(new):
            if not isinstance(layer, Layer):
                at = f" at position {i} of the list" if isinstance(layers, (list, tuple)) else ""
                raise NetworkError(f"add(): expected attnlab layers, received {described(layer)}{at}. "
                                   f"{layer_fix(layer)}")
            check_name(layer.name)        # also a name set on the layer after it was made
            if layer.name is not None and self._layers.get(layer.name) is layer:
                raise NetworkError(f"layer '{layer.name}' is already in this network: a layer can be "
                                   "added once; create another layer to use it twice.")
        seen: dict[int, int] = {}
        for i, layer in enumerate(new):
            j = seen.setdefault(id(layer), i)
            if j != i:
                who = f"layer '{layer.name}' ({layer.type_name})" if layer.name else \
                    f"a {layer.type_name} layer"
                copy_ = "copy.deepcopy(layer) with a new name" if layer.name else \
                    "copy.deepcopy(layer)"
                raise NetworkError(f"add(): the same layer object, {who}, is at positions {j} and {i} "
                                   "of the list; a layer object can be in a network once. Make a "
                                   f"second layer for position {i}: another {layer.type_name}(...), "
                                   f"or {copy_}.")
        for layer in new:
            if isinstance(layer, Graph):
                _check_nesting(self, layer)
        index = self._name_index()
        saved = dict(index.start)
        try:
            names = self._new_names(new, index)
            _check_chain(new, names)
        except BaseException:
            index.start = saved            # the default names found were not taken after all
            raise
        for layer, name in zip(new, names):
            layer.name = name
            self._layers[name] = layer
            index.added(name)
        for a, b in zip(new, new[1:]):
            self._conns[(b.name, b.input_ports[0])] = (a.name, a.output_ports[0])
        self._changed()
        return self

    def _new_names(self, new: list[Layer], index: "NameIndex") -> list[str]:
        """The names `new` will have (a default for each unnamed one), once known to clash
        with none in use. The names in use are looked up, never listed: adding a layer costs
        the same in a graph of ten layers as in one of a hundred thousand."""
        pending: set[str] = set()

        def taken(n: str) -> bool:
            return n in self._layers or n in pending

        nesting: dict[str, str] = {}            # container of a new name's module → that name

        def used(n: str) -> bool:               # a default name is neither a layer nor a container
            return taken(n) or n in index.under or n in nesting

        names: list = []
        for layer in new:
            if layer.name is not None:
                if taken(layer.name):
                    raise NetworkError(f"duplicate layer name '{layer.name}': names are unique. "
                                       f"Rename one, e.g. name='{index.fresh(layer.name, used)}'.")
                pending.add(layer.name)
                for c in module_containers(layer.name):
                    nesting.setdefault(c, layer.name)
            names.append(layer.name)
        for i, layer in enumerate(new):
            if layer.name is None:
                names[i] = index.fresh(layer.stem, used, first_plain=True)
                pending.add(names[i])
        for n in names:
            self._check_path(n, index, pending, nesting)
        return names

    def _check_path(self, name: str, index: "NameIndex", pending: set[str],
                    nesting: dict[str, str]) -> None:
        """Refuses a name whose module path (`module_path`) cannot be: an empty part, a part
        that torch's containers use as an attribute (`_reserved_parts`), or a layer where
        another name needs a container ("h" beside "h.0"). Never merged, never renamed."""
        parts = module_path(name)
        bad = next((p for p in parts if not p or p in self._reserved_parts), None)
        if bad is not None:
            path = "layer_modules." + ".".join(p or "<empty>" for p in parts)
            fixed = ".".join(p if p != bad else f"{p}_" for p in parts if p)
            nests = (" (a '.' in a layer name nests its module under containers named by the "
                     "parts before it)") if len(parts) > 1 else ""
            why = (f"a part of its module path {path} is empty" if not bad else
                   f"its module path {path} holds '{bad}', which torch's module containers "
                   "have as an attribute, so get_submodule and attribute access would not "
                   "reach the module")
            raise NetworkError(f"layer name '{name}' cannot be used: {why}{nests}. Rename the "
                               f"layer, e.g. name='{fixed}'.")
        for c in module_containers(name):
            if c in self._layers or c in pending:
                raise _path_clash(c, name)
        other = next(iter(index.under.get(name, ())), None) or nesting.get(name)
        if other is not None:
            raise _path_clash(name, other)

    def connect(self, source: str, destination: str) -> "Graph":
        """Connects an output ("layer" or "layer/port") to an input ("layer" or "layer/port")."""
        src, sport = self._resolve(source, "output", "connect", "source")
        dst, dport = self._resolve(destination, "input", "connect", "destination")
        if (dst, dport) in self._conns:
            old = self._conns[(dst, dport)]
            raise NetworkError(f"layer '{dst}' port '{dport}': already connected from "
                               f"'{_fmt(self._layers[old[0]], old[0], old[1], 'output')}'. An input "
                               f"takes one source: net.disconnect('{old[0]}', '{dst}/{dport}') first, "
                               "or combine the sources with Addition or Concatenation.")
        self._conns[(dst, dport)] = (src, sport)
        self._changed()
        return self

    def disconnect(self, source: str, destination: str) -> "Graph":
        """Removes the connection `source` → `destination` (named as for `connect`)."""
        src, sport = self._resolve(source, "output", "disconnect", "source")
        dst, dport = self._resolve(destination, "input", "disconnect", "destination")
        if self._conns.get((dst, dport)) != (src, sport):
            have = [str(c) for c in self.connections if parse_port(c.destination)[0] == dst]
            raise NetworkError(f"no connection {source} → {destination}. Connections into '{dst}': "
                               f"{', '.join(have) or 'none'}.")
        del self._conns[(dst, dport)]
        self._changed()
        return self

    def remove(self, *names: str) -> "Graph":
        """Removes layers and every connection that touches them."""
        for n in names:
            self._layer(n, "remove")
        names = tuple(dict.fromkeys(names))        # a name given twice is removed once
        index = self._name_index()
        for n in names:
            del self._layers[n]
            index.removed(n)
            self._forget(n)
        self._conns = {d: s for d, s in self._conns.items()
                       if d[0] not in names and s[0] not in names}
        self._changed()
        return self

    def replace(self, name: str, layers: Layer | list[Layer] | tuple[Layer, ...]) -> "Graph":
        """Replaces a layer by a layer or a list (connected in order); the old layer's input
        connections go to the first new layer and its output connections leave from the last."""
        old = self._layer(name, "replace")
        new = list(layers) if isinstance(layers, (list, tuple)) else [layers]
        if not new:
            raise NetworkError(f"replace('{name}'): expected a layer or a non-empty list of layers, "
                               f"received an empty {type(layers).__name__}, which replaces nothing. "
                               f"To delete the layer use net.remove('{name}').")
        for i, layer in enumerate(new):
            if not isinstance(layer, Layer):
                at = f" at position {i} of the list" if isinstance(layers, (list, tuple)) else ""
                raise NetworkError(f"replace('{name}'): expected an attnlab layer or a list of them, "
                                   f"received {described(layer)}{at}. {layer_fix(layer)}")
        first, last = new[0], new[-1]
        touching = {d: s for d, s in self._conns.items() if name in (d[0], s[0])}
        for (dst, port), (src, sport) in touching.items():
            if dst == name and old.input_ports.index(port) >= len(first.input_ports):
                raise NetworkError(f"replace('{name}'): its input '{port}' is connected but the new "
                                   f"layer {first.type_name} has only {len(first.input_ports)} input(s).")
            if src == name and old.output_ports.index(sport) >= len(last.output_ports):
                raise NetworkError(f"replace('{name}'): its output '{sport}' is connected but the new "
                                   f"layer {last.type_name} has only {len(last.output_ports)} output(s).")
        keep_order = list(self._layers)
        at = keep_order.index(name)
        saved = dict(self._conns)
        self.remove(name)
        if len(new) == 1 and new[0].name is None:
            new[0].name = name
        try:
            self.add(new)
        except AttnlabError:
            index = self._name_index()
            self._layers[name] = old   # put the old layer back so the network stays as it was
            index.added(name)
            self._conns = saved
            self._reorder(keep_order)
            raise
        order = keep_order[:at] + [l.name for l in new] + keep_order[at + 1:]
        self._reorder(order)
        # inputs of the old layer enter the first new layer, its outputs leave from the last
        # (both ends of a connection from the layer to itself move)
        for (dst, port), (src, sport) in touching.items():
            if dst == name:
                dst, port = first.name, first.input_ports[old.input_ports.index(port)]
            if src == name:
                src, sport = last.name, last.output_ports[old.output_ports.index(sport)]
            self._conns[(dst, port)] = (src, sport)
        self._changed()
        return self

    def __dir__(self):
        return sorted(n for n in super().__dir__() if n not in LAYER_AUTHOR_HELPERS)

    # ------------------------------------------------------------------ reading -------
    # What analysis, code generation, pictures, persistence and streaming read of a graph;
    # none of them touches the attributes behind these.
    @property
    def layer_map(self) -> Mapping[str, Layer]:
        """The layers by name, in the order they were added (a read-only mapping)."""
        return MappingProxyType(self._layers)

    @property
    def sources(self) -> Mapping[tuple[str, str], tuple[str, str]]:
        """The edges, as a read-only mapping from each connected input port, `(layer, port)`,
        to the output port that feeds it, `(layer, port)`."""
        return MappingProxyType(self._conns)

    def source(self, layer: str, port: str) -> tuple[str, str] | None:
        """`(layer, output port)` feeding input `port` of `layer`, or None when unconnected."""
        return self._conns.get((layer, port))

    def port_name(self, layer: str, port: str, side: str = "input") -> str:
        """The public name of a port of one of the graph's layers: "layer" when it is the
        layer's only port on that `side` ("input" or "output"), else "layer/port"."""
        l = self._layers[layer]
        return format_port(layer, port, l.output_ports if side == "output" else l.input_ports)

    def port_of(self, ref: str, side: str = "input") -> tuple[str, str]:
        """`(layer, port)` of a port name of this graph, "layer" standing for the layer's first
        port on that `side` ("" for an input layer's input); the layer must exist (names from
        `input_names`, `output_names`)."""
        name, port = parse_port(ref)
        if port:
            return name, port
        l = self._layers[name]
        ports = l.output_ports if side == "output" else l.input_ports
        return name, ports[0] if ports else ""

    def open_outputs(self) -> list[tuple[str, str, str]]:
        """`(layer, port, output name)` of each network output, in `output_names` order."""
        return self._dangling_outputs()

    @property
    def data_specs(self) -> "dict | None":
        """The input sizes taken from data, for a graph without input layers that has run or
        been initialised; None otherwise (a Network keeps them)."""
        return None

    def _name_index(self) -> "NameIndex":
        """The index of the names in use (made again for a graph unpickled from before it)."""
        index = self.__dict__.get("_names")
        if index is None or len(index) != len(self._layers):
            index = NameIndex(self._layers)
            self.__dict__["_names"] = index
        return index

    def _reorder(self, order):
        self._layers = {n: self._layers[n] for n in order if n in self._layers}

    def _changed(self):
        """Called after every edit (a Network drops its plan here)."""

    def _forget(self, name):
        """Called for each removed layer (a Network drops its module here)."""

    def _built_module(self, name, layer, specs):
        """The module built for a layer at these sizes, if any (a Network has them)."""
        return None

    # --------------------------------------------------------------------- addressing ---
    def _layer(self, name: str, fn: str | None = None) -> Layer:
        if not isinstance(name, str):
            call = f"{fn}(): " if fn else ""
            raise NetworkError(f"{call}expected a layer name (a string), received {described(name)}. "
                               + name_fix(self._layers, name, f"net.{fn}('{{}}')" if fn else "'{}'"))
        if name not in self._layers:
            raise NetworkError(f"unknown layer '{name}'.{close_matches(name, self._layers)} "
                               f"Layers: {', '.join(self._layers) or 'none'}.")
        return self._layers[name]

    def _resolve(self, ref: str, side: str, fn: str = "connect",
                 arg: str = "") -> tuple[str, str]:
        if not isinstance(ref, str):
            what = f"{fn}() argument '{arg}'" if arg else f"{fn}()"
            raise NetworkError(f"{what}: expected a string 'layer' or 'layer/port' naming an "
                               f"{side}, received {described(ref)}. "
                               + name_fix(self._layers, ref, "'{}'"))
        name, port = parse_port(ref)
        layer = self._layer(name)
        ports = layer.output_ports if side == "output" else layer.input_ports
        if not ports:
            raise NetworkError(f"layer '{name}' ({layer.type_name}) has no {side}s"
                               + (": it is an input layer; connect from it instead." if side == "input" else "."))
        if not port:
            if side == "input" and len(ports) > 1:
                raise NetworkError(f"layer '{name}' has inputs {', '.join(repr(p) for p in ports)}: "
                                   f"name one, e.g. '{name}/{ports[0]}'.")
            return name, ports[0]
        if port not in ports:
            raise NetworkError(f"layer '{name}' has no {side} port '{port}'.{close_matches(port, ports)} "
                               f"Its {side}s: {', '.join(ports)}.")
        return name, port

    # ----------------------------------------------------------------------- views -----
    @property
    def layers(self) -> LayerList:
        """The layers in the order they were added, read-only, also by name (`net.layers["fc"]`)."""
        return LayerList(self._layers.values())

    @property
    def connections(self) -> tuple[Connection, ...]:
        """The connections, each `Connection(source, destination)` as "layer" or "layer/port"."""
        out = []
        for (dst, dport), (src, sport) in self._conns.items():
            out.append(Connection(_fmt(self._layers[src], src, sport, "output"),
                                  _fmt(self._layers[dst], dst, dport, "input")))
        return tuple(out)

    @property
    def input_names(self) -> list[str]:
        """The names of the network's inputs (its input layers, or else its open input ports)."""
        inputs = [n for n, l in self._layers.items() if l.is_input]
        if inputs:
            return inputs
        return [_fmt(l, n, p, "input") for n, l in self._layers.items()
                for p in l.input_ports if (n, p) not in self._conns]

    @property
    def output_names(self) -> list[str]:
        """The names of the network's outputs (the layer outputs that feed no other layer)."""
        return [o[2] for o in self._dangling_outputs()]

    def choose_outputs(self, names: str | list[str] | tuple[str, ...] | None = None) -> "Graph":
        """Makes these layer outputs ("layer" or "layer/port", inner ones too) the network's
        outputs, in this order (MATLAB's `net.OutputNames = [...]`); None goes back to the
        default, the unconnected outputs. A Network keeps the choice in
        `metadata["output_names"]`, so saving and loading keep it."""
        if names is None:
            chosen = None
        else:
            names = [names] if isinstance(names, str) else list(names)
            if not names:
                raise NetworkError("choose_outputs: expected at least one output, received none. "
                                   "Pass None to use the unconnected outputs.")
            chosen = [self._output_port(n) for n in names]
            if len(set(chosen)) != len(chosen):
                raise NetworkError(f"choose_outputs: expected each output once, received "
                                   f"{', '.join(map(str, names))}.")
        meta = getattr(self, "metadata", None)
        if isinstance(meta, dict):
            if chosen is None:
                meta.pop("output_names", None)
            else:
                meta["output_names"] = [format_port(n, p) for n, p in chosen]
        self.__dict__["_chosen_outputs"] = chosen
        self._changed()
        return self

    def _output_port(self, name) -> tuple[str, str]:
        if not isinstance(name, str):
            raise NetworkError(f"choose_outputs: expected output names (text), received "
                               f"{type(name).__name__}.")
        lname, port = parse_port(name)
        layer = self._layers.get(lname)
        if layer is None:
            raise NetworkError(f"choose_outputs: the network has no layer '{lname}'."
                               f"{close_matches(lname, list(self._layers))}")
        if not port:
            if len(layer.output_ports) != 1:
                raise NetworkError(f"choose_outputs: layer '{lname}' has outputs "
                                   f"{', '.join(layer.output_ports)}: name one, e.g. "
                                   f"'{lname}/{layer.output_ports[0]}'.")
            port = layer.output_ports[0]
        if port not in layer.output_ports:
            raise NetworkError(f"choose_outputs: layer '{lname}' has no output '{port}'; its "
                               f"outputs: {', '.join(layer.output_ports)}.")
        return lname, port

    def _dangling_outputs(self):
        chosen = self.__dict__.get("_chosen_outputs")
        if chosen is None:                       # a loaded network: its saved choice
            meta = getattr(self, "metadata", None)
            saved = meta.get("output_names") if isinstance(meta, dict) else None
            if saved:
                chosen = [parse_port(s) for s in saved]
        if chosen:
            live = [(n, p) for n, p in chosen
                    if n in self._layers and p in self._layers[n].output_ports]
            if live:                             # a removed layer leaves the choice
                return [(n, p, _fmt(self._layers[n], n, p, "output")) for n, p in live]
        used = set(self._conns.values())
        return [(n, p, _fmt(l, n, p, "output")) for n, l in self._layers.items() if not l.is_input
                for p in l.output_ports if (n, p) not in used]


LAYER_TYPES.pop("Graph", None)     # a graph is saved and loaded as a Network, never on its own


# ------------------------------------------------------------------------- helpers ---

def _check_chain(new: list[Layer], names: list[str]) -> None:
    """Refuses a list whose layers cannot be connected in order."""
    for i, (a, b) in enumerate(zip(new, new[1:])):
        if not b.input_ports:
            raise NetworkError(f"layer '{names[i + 1]}' ({b.type_name}) has no input, so it "
                               f"cannot follow '{names[i]}' in a list. Start a new list with it.")
        if not a.output_ports:
            raise NetworkError(f"layer '{names[i]}' has no output to connect.")


def _fmt(layer, name, port, side):
    return format_port(name, port, layer.output_ports if side == "output" else layer.input_ports)


# Nested networks run, analyse and save recursively (a few Python frames a level), and
# al.load() refuses files nested deeper than this (attnlab.io.LIMITS["network_depth"]).
MAX_NESTING = 64


def _check_nesting(outer: Graph, inner: Graph) -> None:
    """Refuses a network that would contain itself, or nest deeper than MAX_NESTING."""
    depth, level, seen = 0, [inner], set[int]()
    while level:                                    # breadth first, one level of nesting at a time
        if any(g is outer for g in level):
            raise NetworkError("add(): the network would contain itself (directly or through the "
                               "networks inside it), which never ends. Add a copy instead, e.g. "
                               "copy.deepcopy(net), or build a new network.")
        depth += 1
        if depth >= MAX_NESTING:
            raise NetworkError(f"add(): networks would be nested more than {MAX_NESTING} levels "
                               f"deep (a Network inside a Network inside …), more than attnlab "
                               "runs, saves and loads. Put the layers side by side in one "
                               "network, e.g. al.Serial(*layers) instead of nesting Serials.")
        seen.update(id(g) for g in level)
        level = [l for g in level for l in g._layers.values()
                 if isinstance(l, Graph) and id(l) not in seen]
