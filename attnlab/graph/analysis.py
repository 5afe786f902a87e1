"""One walk over the graph: order, cycles, unconnected ports, sizes, learnables.

Everything that looks at a network's structure (the analysis table, the summary, the plot, the
compiled forward) reads the `Analysis` this module produces. `analyze` never raises for a bad
graph: each problem becomes an `Issue`.
"""
from __future__ import annotations

import heapq
import io
from dataclasses import dataclass, field
from typing import Any, cast

import torch

from attnlab.core.errors import AttnlabError, FormatError, NetworkError, SizeError
from attnlab.graph import Graph
from attnlab.graph.names import format_port, learnable_name, under_layer
from attnlab.layers.tying import declared_ties
from attnlab.core.spec import Spec


@dataclass
class Issue:
    """One problem `analyze` found: its severity, kind, message and where (layer and port).

    `error_class` is the `AttnlabError` subclass raised for it when the network is run.
    """

    severity: str                 # "error" | "warning"
    kind: str                     # "cycle", "unconnected", "size", "format", "unused-output", ...
    message: str
    layer: str | None = None
    port: str | None = None
    error_class: type = NetworkError

    def __str__(self):
        return f"{self.severity}: {self.message}"


@dataclass
class Analysis:
    """What `Network.analyze` returns: the graph checked and every activation's size.

    Printing it shows the table (layer, type, output sizes, learnables) and the issues. By layer
    name: `in_specs`/`out_specs` (by port), `learnables` (shape by parameter), `types`; `order` is
    a topological order; `cycles` lists each cycle's layers in order.
    """

    order: list[str]
    # typed as a valid network has them; where sizes are unknown (after an error, below a
    # cycle) a port's in_spec or a layer's out_specs is None
    in_specs: dict[str, dict[str, Spec]]
    out_specs: dict[str, dict[str, Spec]]
    learnables: dict[str, dict[str, tuple[int, ...]]]
    issues: list[Issue]
    types: dict[str, str]
    cycles: list[list[str]] = field(default_factory=list)
    input_names: list[str] = field(default_factory=list)
    output_names: list[str] = field(default_factory=list)
    # tied learnables: 'layer/param' → the 'layer/param' it is the same Parameter as
    shared: dict[str, str] = field(default_factory=dict)

    @property
    def errors(self) -> list[Issue]:
        """The issues that stop the network from running (severity ``"error"``)."""
        return [i for i in self.issues if i.severity == "error"]

    @property
    def warnings(self) -> list[Issue]:
        """The issues that do not stop it (severity ``"warning"``)."""
        return [i for i in self.issues if i.severity == "warning"]

    @property
    def ok(self) -> bool:
        """True when there is no error, so the network can be initialised, run and trained."""
        return not self.errors

    @property
    def total_learnables(self) -> int:
        """The number of learnable values (a size still unknown counts as 0; a Parameter
        that serves several layers, such as tied weights, counts once)."""
        return sum(_numel(s) for n, params in self.learnables.items() for p, s in params.items()
                   if learnable_name(n, p) not in self.shared)

    def raise_if_errors(self, doing: str = "run", subject: str = "the network") -> None:
        """Raise the error class of the issues (e.g. `NetworkError`) listing every error, if any.

        `doing` and `subject` word the first line: "cannot run the network: …"."""
        errors = self.errors
        if not errors:
            return
        classes = {i.error_class for i in errors}
        lines = "\n".join(f"  - {i.message}" for i in errors)
        msg = f"cannot {doing} {subject}: {len(errors)} error(s)\n{lines}"
        raise network_error_class(classes)(msg, errors)

    # -- the table ------------------------------------------------------------------------
    def rows(self) -> list[tuple[str, str, str, str]]:
        """(name, type, activations, learnables) for each layer in order."""
        rows = []
        for name in self.order:
            outs = self.out_specs.get(name)
            if outs is None:
                act = "?"
            elif len(outs) == 1:
                act = str(next(iter(outs.values())))
            else:
                act = ", ".join(f"{p}: {s}" for p, s in outs.items())
            params = self.learnables.get(name, {})
            learn = ", ".join(f"{p} {'×'.join(map(str, s))}"
                              + (f" (= {self.shared[key]})" if (key := learnable_name(name, p))
                                 in self.shared else "")
                              for p, s in params.items())
            rows.append((name, self.types[name], act, learn))
        return rows

    def table(self, width: int = 110) -> str:
        """The analysis as text: one row per layer (name, type, output sizes, learnables), then the issues."""
        from rich.console import Console
        from rich.table import Table

        t = Table(title="network analysis", show_lines=False)
        for col in ("#", "name", "type", "activations", "learnables"):
            t.add_column(col, overflow="fold")
        for i, (name, typ, act, learn) in enumerate(self.rows(), 1):
            t.add_row(str(i), name, typ, act, learn)
        buf = io.StringIO()
        console = Console(file=buf, width=width, color_system=None, force_terminal=False)
        console.print(t)
        console.print(f"total learnables: {self.total_learnables:,}")
        if self.issues:
            console.print(f"{len(self.errors)} error(s), {len(self.warnings)} warning(s):")
            for issue in self.issues:
                console.print(f"  {issue.severity}: {issue.message}", markup=False, highlight=False)
        else:
            console.print("no issues")
        return buf.getvalue()

    def __str__(self):
        return self.table()

    def _repr_html_(self):
        import html
        head = "".join(f"<th>{c}</th>" for c in ("#", "name", "type", "activations", "learnables"))
        body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in (i, *r)) + "</tr>"
                       for i, r in enumerate(self.rows(), 1))
        issues = "".join(f"<li><b>{i.severity}</b>: {html.escape(i.message)}</li>" for i in self.issues)
        return (f"<table><tr>{head}</tr>{body}</table><p>total learnables: "
                f"{self.total_learnables:,}</p><ul>{issues or '<li>no issues</li>'}</ul>")


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


_CLASS_CACHE: dict[frozenset, type] = {}


def network_error_class(classes) -> type:
    """NetworkError, also an instance of SizeError/FormatError when those caused it, so that
    `except SizeError` works for a size mistake found while running a network."""
    flat: set[type] = set()
    for c in classes:
        if issubclass(c, NetworkError):     # a nested network's NetworkSizeError: take its parts
            flat.update(b for b in c.__bases__ if b is not NetworkError)
        else:
            flat.add(c)
    # AttnlabError itself says nothing NetworkError does not
    extra = tuple(sorted((c for c in flat if issubclass(c, AttnlabError) and c is not AttnlabError),
                         key=lambda c: c.__name__))
    if not extra:
        return NetworkError
    key = frozenset(extra)
    if key not in _CLASS_CACHE:
        # named as the mistake reads (SizeError), not NetworkSizeError; it is a NetworkError too
        name = extra[0].__name__ if len(extra) == 1 else "NetworkError"
        _CLASS_CACHE[key] = type(name, (NetworkError,) + extra, {"__module__": "attnlab.core.errors"})
    return _CLASS_CACHE[key]


# -- the walk -------------------------------------------------------------------------------

def analyze(net: Graph, input_specs: dict[str, Spec] | None = None) -> Analysis:
    layers = net.layer_map
    conns = net.sources                               # (dst, dst_port) → (src, src_port)
    issues: list[Issue] = []
    input_specs = dict(input_specs or {})
    has_input_layers = any(l.is_input for l in layers.values())

    # edges by layer
    succ: dict[str, list[tuple[str, str, str]]] = {n: [] for n in layers}   # src → (dst, port, src_port)
    for (dst, dport), (src, sport) in conns.items():
        succ[src].append((dst, dport, sport))

    # unconnected inputs
    dangling_in = [(n, p) for n, l in layers.items() if not l.is_input
                   for p in l.input_ports if (n, p) not in conns]
    if has_input_layers:
        for n, p in dangling_in:
            issues.append(Issue("error", "unconnected",
                                f"layer '{n}' port '{p}': input is not connected. Connect a layer "
                                f"to it, e.g. net.connect('<source>', '{n}/{p}').", n, p))
    if not layers:
        issues.append(Issue("error", "empty", "the network has no layers. Add some with net.add([...])."))

    # cycles (Tarjan's strongly connected components)
    cycles = _cycles(layers, succ, conns)
    in_cycle = {n for c in cycles for n in c}
    for cyc in cycles:
        issues.append(Issue("error", "cycle", _cycle_message(net, cyc), cyc[0], None))

    # topological order (Kahn), layers in cycles and below them left out; ties by add order
    position = {n: i for i, n in enumerate(layers)}
    indeg = {n: 0 for n in layers}
    for (dst, _), _src in conns.items():
        indeg[dst] += 1
    ready = [position[n] for n in layers if indeg[n] == 0]
    heapq.heapify(ready)
    names = list(layers)
    order = []
    while ready:
        n = names[heapq.heappop(ready)]
        order.append(n)
        for dst, _, _ in succ[n]:
            indeg[dst] -= 1
            if indeg[dst] == 0:
                heapq.heappush(ready, position[dst])
    placed = set(order)
    blocked = [n for n in layers if n not in placed]
    below = [n for n in blocked if n not in in_cycle]
    if below:
        issues.append(Issue("warning", "after-cycle", "sizes unknown for "
                            + ", ".join(f"'{n}'" for n in below) + ": they depend on a cycle.",
                            below[0]))
    order_all = order + blocked

    # sizes
    out_specs: dict[str, dict[str, Spec] | None] = {}
    in_specs: dict[str, dict[str, Spec | None]] = {}
    learnables: dict[str, dict[str, tuple[int, ...]]] = {}
    tensors: dict[str, Any] = {}          # 'layer/param' → its Parameter (kept alive: ids stay unique)
    shared: dict[str, str] = {}
    for n in order:
        layer = layers[n]
        specs: dict[str, Spec | None] = {}
        known = True
        for p in layer.input_ports:
            if (n, p) in conns:
                src, sport = conns[(n, p)]
                s = (out_specs.get(src) or {}).get(sport)
            else:
                s = input_specs.get(_port_name(layer, n, p))
            if s is None:
                known = False
            specs[p] = s
        in_specs[n] = specs
        if not known:
            out_specs[n] = None
            continue
        try:
            known_specs = cast("dict[str, Spec]", specs)     # no None: `known`
            out_specs[n] = _mark_computed(layer, known_specs, layer.infer_all(known_specs))
            # a port that looks ids up (Embedding's) must get them as the data gave them
            for port in getattr(layer, "reads_ids", ()):
                if known_specs[port].computed:
                    issues.append(_computed_ids(net, n, port, in_specs))
            learnables[n] = _learnable_shapes(net, n, layer, known_specs, tensors, shared)
            # a layer whose inputs fit but make it useless says so (LayerNorm over one channel)
            notes = getattr(layer, "analysis_warnings", None)
            for port, text in (notes(known_specs) if callable(notes) else ()):
                issues.append(Issue("warning", "useless", text, n, port))
        except AttnlabError as e:
            kind = "size" if isinstance(e, SizeError) else "format" if isinstance(e, FormatError) else "network"
            issues.append(Issue("error", kind, str(e), n, getattr(e, "port", None), type(e)))
            out_specs[n] = None

    # weights declared shared (tied_to): checked here, and counted once like the Parameters
    # that built modules share (which `_ties` finds; before modules exist, the declaration)
    _ties(tensors, shared)
    ties, problems = declared_ties(layers, learnables)
    for alias, owner in ties.items():
        if alias not in shared and owner not in shared:
            shared[alias] = owner
    for n, text, cls in problems:
        issues.append(Issue("error", "tie", text, n, None, cls))

    # outputs
    outputs = net.open_outputs()
    if layers and not outputs:
        issues.append(Issue("error", "no-output", "the network has no output: every layer output "
                            "feeds another layer, or there are only input layers. Add a layer "
                            "whose output stays unconnected."))
    used = {src for src, _ in conns.values()}
    for n, l in layers.items():
        if l.is_input and n not in used:
            issues.append(Issue("warning", "unused-input", f"input '{n}' feeds no layer. Connect it, "
                                f"e.g. net.connect('{n}', '<layer>'), or remove it.", n))
        size = getattr(l, "size", None) if l.type_name == "ImageInput" else None
        # MATLAB (and Keras) give image sizes as H×W×C: (28, 28, 1) there is a grey 28×28 image,
        # here it reads as 28 channels of 28×1
        if size is not None and size[2] in (1, 3, 4) and size[0] > 4 and size[1] > 4:
            h, w, c = size
            issues.append(Issue("warning", "image-layout",
                                f"layer '{n}': ImageInput({tuple(size)}) reads as C×H×W = {h} channels "
                                f"of {w}×{c} pixels. If you meant a {h}×{w} image with {c} "
                                f"channel(s) (MATLAB's and Keras' H×W×C order), write "
                                f"ImageInput(({c}, {h}, {w})).", n))
    if len(outputs) > 1:
        listed = ", ".join(o[2] for o in outputs)
        for n, p, oname in outputs:
            if layers[n].is_input:
                continue
            issues.append(Issue("warning", "unused-output",
                                f"layer '{n}' port '{p}' is not connected, so it is a network output "
                                f"(outputs: {listed}). Connect it if it should feed another layer.",
                                n, p))
    return Analysis(order=order_all, in_specs=cast("dict[str, dict[str, Spec]]", in_specs),
                    out_specs=cast("dict[str, dict[str, Spec]]",
                                   {n: out_specs.get(n) for n in order_all}),
                    learnables=learnables, shared=_ties(tensors, shared),
                    issues=issues, types={n: l.type_name for n, l in layers.items()}, cycles=cycles,
                    input_names=net.input_names, output_names=[o[2] for o in outputs])


def _mark_computed(layer, specs: dict[str, Spec], outs: dict[str, Spec]) -> dict[str, Spec]:
    """The output specs with `computed` set: False out of an input layer; a layer with
    `keeps_ids` (Index1d, Concatenation: values pass unchanged) passes on what it received, and
    a spec it passes through whole keeps its own flag; a nested network's come from its own
    analysis; every other layer computes its outputs."""
    if isinstance(layer, Graph):
        return outs
    if layer.is_input:
        return {p: s.with_computed(False) for p, s in outs.items()}
    if getattr(layer, "keeps_ids", False):
        ins = list(specs.values())
        flag = any(s.computed for s in ins)
        return {p: s if any(s is i for i in ins) else s.with_computed(flag) for p, s in outs.items()}
    return {p: s.with_computed(True) for p, s in outs.items()}


def _computed_ids(net, name, port, in_specs) -> Issue:
    """The error of a port that reads token ids but receives computed values: it names the
    layer that feeds it and, through layers that keep ids, the one that computed them, and
    says how to feed the ids from an input layer instead."""
    layers, conns = net.layer_map, net.sources
    layer = layers[name]
    fix = getattr(layer, "ids_fix", "")
    fix = f" {fix}" if fix else ""
    src = conns.get((name, port))
    msg = f"layer '{name}' port '{port}': expected token ids as the data gives them (whole numbers), "
    at, into, seen = (src[0] if src else None), (name, port), set()
    while at is not None and getattr(layers[at], "keeps_ids", False) and at not in seen:
        seen.add(at)
        q = next((q for q, sp in (in_specs.get(at) or {}).items() if sp is not None and sp.computed),
                 None)
        if q is None:
            break
        into = (at, q)
        at = conns[into][0] if into in conns else None       # None: an open port, fed from outside
    if src is None or at is None:
        return Issue("error", "ids", msg + "received values computed outside this network (it is "
                     "used as a layer there): values a layer computes are not ids, and the lookup "
                     "would fail at the first fractional one. Feed the ids from an input layer of the "
                     "outer network, directly or through layers that keep ids (Index1d, Concatenation)."
                     + fix, name, port, FormatError)
    feeder = src[0]
    received = f"the output of '{feeder}' ({layers[feeder].type_name})"
    if at != feeder:
        received += f", computed by '{at}' ({layers[at].type_name})"
    n, q = into
    dst = net.port_name(n, q, "input")
    out = conns[into]
    origin = net.port_name(out[0], out[1], "output")
    tokens, k = "tokens", 0
    while tokens in layers:
        k += 1
        tokens = f"tokens_{k}"
    return Issue("error", "ids",
                 msg + f"received {received}: values a layer computes, not ids, so the lookup would "
                 f"fail at the first fractional one. Feed it from an input layer, directly or through "
                 f"layers that keep ids (Index1d, Concatenation), e.g. net.disconnect('{origin}', "
                 f"'{dst}'); net.add(L.SequenceInput(1, name='{tokens}')); "
                 f"net.connect('{tokens}', '{dst}')." + fix, name, port, FormatError)


def _learnable_shapes(net, name, layer, specs, tensors=None, shared=None) -> dict[str, tuple[int, ...]]:
    """The layer's learnables' shapes; their Parameters are added to `tensors` (and the ties
    of a nested network analysed without modules to `shared`), by 'layer/param'."""
    # a Graph here is a Network (analysis sits below network.py, so the methods are untyped)
    tensors = {} if tensors is None else tensors
    mod = net._built_module(name, layer, specs)
    if mod is None:
        if isinstance(layer, Graph):       # analysed once per sizes (cached by the network)
            inner: Any = layer
            nested = inner.analyze_as_layer(specs)
            if shared is not None:
                shared.update({learnable_name(name, a): learnable_name(name, b)
                               for a, b in nested.shared.items()})
            return {k: tuple(s) for k, s in flat_learnables(nested).items()}
        with torch.device("meta"):
            mod = layer.build(specs)
    if isinstance(mod, Graph):
        built: Any = mod
        params = dict(built.learnables)
    else:
        params = dict(mod.named_parameters())
    tensors.update(under_layer(name, params))
    return {k: tuple(v.shape) for k, v in params.items()}


def _ties(tensors, shared) -> dict[str, str]:
    """'layer/param' → the first 'layer/param' holding the same Parameter."""
    first: dict[int, str] = {}
    for key, t in tensors.items():
        if id(t) in first:
            shared[key] = first[id(t)]
        else:
            first[id(t)] = key
    return shared


def flat_learnables(analysis) -> dict[str, tuple[int, ...]]:
    """'layer/param' → shape over an analysis, nested networks' already flattened."""
    return {learnable_name(n, p): s for n, params in analysis.learnables.items()
            for p, s in params.items()}


def _port_name(layer, name, port):
    return format_port(name, port, layer.input_ports)


def _cycles(layers, succ, conns) -> list[list[str]]:
    """One cycle per strongly connected component, as the ordered list of its layers
    (Tarjan's algorithm, iterative: a 5000-layer chain must not exhaust Python's stack)."""
    index, low, stack, on, comps = {}, {}, [], set(), []
    counter = 0
    for root in layers:
        if root in index:
            continue
        work = [(root, iter(succ[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, edges = work[-1]
            advanced = False
            for w, _, _ in edges:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(succ[w])))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                comps.append(comp)
    position = {n: i for i, n in enumerate(layers)}
    cycles = []
    for comp in comps:
        members = set(comp)
        if len(comp) == 1 and not any(w == comp[0] for w, _, _ in succ[comp[0]]):
            continue
        # start at an attention layer when there is one: the message is about its query
        start = min(comp, key=lambda n: ("query" not in layers[n].input_ports, position[n]))
        cycles.append(_path_back(start, succ, members, position))
    return sorted(cycles, key=lambda c: position[c[0]])


def _path_back(start, succ, members, position):
    """A shortest path start → … → start inside one component (breadth first)."""
    parent: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w, _, _ in sorted(succ[v], key=lambda e: position[e[0]]):
                if w not in members:
                    continue
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(parent[path[-1]])
                    return path[::-1]
                if w not in parent:
                    parent[w] = v
                    nxt.append(w)
        frontier = nxt
    return [start]


def _cycle_message(net, cycle):
    conns = net.sources
    ring = cycle + [cycle[0]]
    chain = " → ".join(ring)
    start = cycle[0]
    last = cycle[-1]
    into = [p for (d, p), (s, _) in conns.items() if d == start and s == last]
    msg = f"cycle: {chain}. A network must be acyclic to run."
    if "query" in into and len(cycle) > 1:
        return msg + _decoder_advice(net, cycle)
    a, b = ring[-2], ring[-1]
    port = [p for (d, p), (s, _) in conns.items() if d == b and s == a]
    dst = net.port_name(b, port[0], "input")
    return msg + f" Break it by removing one of its connections, e.g. net.disconnect('{a}', '{dst}')."


# layers that work on the attention's output where they follow it in a cycle: they stay with it
# when the decoder gets its own input (a LayerNorm over the input's one channel would be constant)
_AFTER_ATTENTION = ("LayerNorm", "RMSNorm", "BatchNorm", "Dropout")


def _decoder_advice(net, cycle) -> str:
    """The fix of an attention whose query is computed from its own output, as statements that
    leave a network without the cycle and without dead ends: the decoder (the cycle's layers from
    the first one that is not a norm or dropout after the attention) reads a new input, and the
    attention's output joins the decoder's output where that leaves the cycle."""
    layers, conns = net.layer_map, net.sources
    start, members = cycle[0], set(cycle)
    k = 1
    while k < len(cycle) - 1 and layers[cycle[k]].type_name in _AFTER_ATTENTION:
        k += 1
    tail, entry = cycle[k - 1], cycle[k]
    port, tail_port = next((p, sp) for (d, p), (s, sp) in conns.items() if d == entry and s == tail)
    names = set(layers)

    def unique(stem):
        name, i = stem, 0
        while name in names:
            i += 1
            name = f"{stem}_{i}"
        names.add(name)
        return name

    def src(n, p):
        return net.port_name(n, p, "output")

    def dst(n, p):
        return net.port_name(n, p, "input")

    dec = unique("decoder-input")
    code = [f"net.disconnect('{src(tail, tail_port)}', '{dst(entry, port)}')",
            f"net.add(L.SequenceInput(C, name='{dec}'))", f"net.connect('{dec}', '{dst(entry, port)}')"]
    what = (f"Give the decoder its own input: feed '{entry}' from a new input of C channels (what "
            f"the decoder reads at each step, e.g. the previous step's target)")
    others = [d for (d, _), (s, sp) in conns.items() if s == tail and sp == tail_port and d != entry]
    exits = [(x, d, p, sp) for x in cycle[k:] for (d, p), (s, sp) in conns.items()
             if s == x and d not in members]
    if not others and exits:         # the attention's output would feed nothing: join it
        x, d, p, sp = exits[0]
        cat = unique("context")
        code += [f"net.add(L.Concatenation(2, name='{cat}'))",
                 f"net.disconnect('{src(x, sp)}', '{dst(d, p)}')",
                 f"net.connect('{src(x, sp)}', '{cat}/in1')",
                 f"net.connect('{src(tail, tail_port)}', '{cat}/in2')",
                 f"net.connect('{cat}', '{dst(d, p)}')"]
        what += (f", and join the attention's output ('{tail}') to the decoder's ('{x}') "
                 f"before '{d}', so that it reaches the network's output")
    return (f" The query of '{start}' is computed from its own output. In an encoder–decoder the "
            f"decoder reads its own input sequence and only the encoder feeds 'key' and 'value'. "
            f"{what}. With C set: " + "; ".join(code) + ".")
