"""The layout of a network's picture, as data: ranks, order and positions of the boxes.

The layout is a small Sugiyama-style layered drawing (`compute_layout`):

1. ranks: the longest path from the sources (the edge that closes a cycle is laid out reversed);
2. edges spanning several ranks get a virtual point on every rank between, so that they run
   around the boxes instead of through them;
3. the order within each rank comes from barycenter sweeps (down and up, with the ports' places
   on multi-input layers), keeping the order with the fewest crossings, then adjacent swaps;
4. positions within each rank: each box as near as possible to the mean of its neighbours, no
   two boxes overlapping (isotonic regression), a few sweeps down and up.

Boxes are sized to their text (`box_size`), which the renderer measures (`text_width`): it
alone knows its fonts. Nothing here draws; `picture.py` places everything a drawing holds.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from attnlab.graph.analysis import analyze

TextWidth = Callable[[str, float, bool], float]     # (text, points, bold) → inches

# colours by layer family: face, edge
_FAMILIES = [
    (("Input",), ("#dbe8fb", "#3a6ab0")),
    (("Attention", "AttentionPool"), ("#fde3cf", "#c0621b")),
    (("LSTM", "GRU"), ("#dcefd9", "#3d8a34")),
    (("Conv", "Pool", "Flatten", "ImageToSequence"), ("#e9def5", "#6c4a9e")),
    (("Norm",), ("#fbf3cf", "#a68a12")),
    (("Addition", "Concatenation", "Multiplication", "Port", "Pick"), ("#d7f0ee", "#2b8279")),
    (("Position", "Embedding"), ("#f7dbe7", "#a63d6c")),
    (("Network", "Module"), ("#ffffff", "#555555")),
]
_DEFAULT_COLORS = ("#eeeeee", "#555555")
_CYCLE = "#d62728"
_EDGE = "#5a5a5a"
_PORT = "#1f4e9c"


def family_colors(type_name: str) -> tuple[str, str]:
    for keys, colors in _FAMILIES:
        if any(k in type_name for k in keys):
            return colors
    return _DEFAULT_COLORS


@dataclass
class Node:
    name: str
    type: str
    rank: int
    slot: float                       # place within the rank (order), 0-based
    sizes: str                        # the output sizes as text ("" when unknown)
    in_ports: tuple[str, ...] = ()
    out_ports: tuple[str, ...] = ()
    in_cycle: bool = False
    virtual: bool = False
    pos: float = 0.0                  # coordinate across the ranks, in inches (set by layout)


@dataclass
class Edge:
    source: str
    destination: str
    port: str | None                  # the destination port, labelled when the layer has several
    in_cycle: bool
    slot: float = 0.0                 # where the edge enters the destination's side, -0.5 … 0.5
    source_port: str | None = None    # labelled when the source layer has several outputs
    source_slot: float = 0.0
    reversed: bool = False            # drawn against the ranks (the edge closing a cycle)
    points: list = field(default_factory=list)   # virtual node names between source and destination


@dataclass
class Layout:
    nodes: list[Node]
    edges: list[Edge]
    virtual: dict[str, Node]
    ranks: list[list[str]]
    cycles: list[list[str]]

# ------------------------------------------------------------------------------- layout ---

def layout(net, sizes: bool = True, measure=None, direction: str = "TB") -> tuple[list[Node], list[Edge]]:
    """(nodes, edges) of the drawing; see `compute_layout` for everything."""
    lay = compute_layout(net, sizes=sizes, measure=measure, direction=direction)
    return lay.nodes, lay.edges


def compute_layout(net, sizes: bool = True, measure=None, direction: str = "TB") -> Layout:
    """Ranks, order and positions of every layer (and of the virtual points of long edges).
    `measure(node)` is a box's extent across the ranks, in inches (its width top-down, its
    height left to right), as the renderer's fonts make it; without it, an estimate."""
    a = analyze(net, net.data_specs)
    layers = net.layer_map
    cyc_edges = set()
    for c in a.cycles:
        ring = c + [c[0]]
        cyc_edges |= set(zip(ring, ring[1:]))
    in_cycle = {n for c in a.cycles for n in c}

    # 1. ranks: longest path from the sources once the edges that close cycles are turned round
    rank, back_edges = _ranks(net)
    nodes: dict[str, Node] = {}
    for n, l in layers.items():
        outs = a.out_specs.get(n)
        text = ""
        if sizes and outs:
            text = str(next(iter(outs.values()))) if len(outs) == 1 else \
                ", ".join(f"{p}: {s}" for p, s in outs.items())
        ins, outp = tuple(l.input_ports), tuple(l.output_ports)
        nodes[n] = Node(n, _type_text(l), rank[n], 0.0, text, ins, outp, n in in_cycle)

    # 2. edges, with virtual nodes on the ranks they cross
    edges: list[Edge] = []
    virtual: dict[str, Node] = {}
    for (dst, port), (src, sport) in net.sources.items():
        ins = layers[dst].input_ports
        outs = layers[src].output_ports
        e = Edge(src, dst, port if len(ins) > 1 else None, (src, dst) in cyc_edges,
                 _port_slot(ins, port), sport if len(outs) > 1 else None, _port_slot(outs, sport))
        r0, r1 = rank[src], rank[dst]
        if r1 <= r0:                       # an edge closing a cycle (or a layer feeding itself)
            e.reversed = True
            span = range(r0 - 1, r1, -1)              # from the source's rank up to the destination's
        else:
            span = range(r0 + 1, r1)
        for r in span:
            v = f"\0{len(virtual)}"
            virtual[v] = Node(v, "", r, 0.0, "", virtual=True, in_cycle=e.in_cycle)
            e.points.append(v)
        edges.append(e)

    allnodes = {**nodes, **virtual}
    n_ranks = max((nd.rank for nd in allnodes.values()), default=-1) + 1
    ranks = _initial_order(net, nodes, virtual, edges, n_ranks)
    links = _links(edges)
    ranks = _minimise_crossings(ranks, links, allnodes)
    for r, names in enumerate(ranks):
        for i, n in enumerate(names):
            allnodes[n].slot = float(i)
    _positions(ranks, links, allnodes, measure or _estimate(direction))
    return Layout(list(nodes.values()), edges, virtual, ranks, a.cycles)


def _ranks(net) -> tuple[dict[str, int], set[tuple[str, str]]]:
    """Each layer's rank (longest path from a source) with the back edges of a depth-first walk
    left out, so what remains is acyclic and every kept edge goes down by at least one rank.
    Iterative throughout: thousands of layers in a chain must not exhaust Python's stack."""
    layers = net.layer_map
    succ: dict[str, list[str]] = {n: [] for n in layers}
    for (dst, _), (src, _) in net.sources.items():
        succ[src].append(dst)
    state: dict[str, int] = {}                  # 1 on the walk's stack, 2 done
    back: set[tuple[str, str]] = set()
    for root in layers:
        if root in state:
            continue
        state[root] = 1
        work = [(root, iter(succ[root]))]
        while work:
            v, it = work[-1]
            for w in it:
                if w not in state:
                    state[w] = 1
                    work.append((w, iter(succ[w])))
                    break
                if state[w] == 1:
                    back.add((v, w))
            else:
                state[v] = 2
                work.pop()
    indeg = {n: 0 for n in layers}
    for v, ws in succ.items():
        for w in ws:
            if (v, w) not in back:
                indeg[w] += 1
    rank = {n: 0 for n in layers}
    ready = [n for n in layers if indeg[n] == 0]
    while ready:
        v = ready.pop()
        for w in succ[v]:
            if (v, w) in back:
                continue
            rank[w] = max(rank[w], rank[v] + 1)
            indeg[w] -= 1
            if indeg[w] == 0:
                ready.append(w)
    return rank, back


def _type_text(layer) -> str:
    from ..graph import Graph
    if isinstance(layer, Graph):
        return f"Network · {len(layer.layer_map)} layers"
    return layer.type_name


def _port_slot(ports, port) -> float:
    k = len(ports)
    return (ports.index(port) + 0.5) / k - 0.5 if k > 1 else 0.0


_BESIDE = 0.75          # where an edge closing a cycle runs: this far left of the box centre, in box widths


def _links(edges):
    """Each edge as a chain of (upper, lower, upper offset, lower offset) links between
    adjacent ranks; offsets are the port places (fractions of the box)."""
    links = []
    for e in edges:
        if e.reversed:                    # runs beside its two layers, on their left
            chain = [e.destination] + e.points[::-1] + [e.source]
            offs = [-_BESIDE] + [0.0] * len(e.points) + [-_BESIDE]
        else:
            chain = [e.source] + e.points + [e.destination]
            offs = [e.source_slot] + [0.0] * len(e.points) + [e.slot]
        for a, b, oa, ob in zip(chain, chain[1:], offs, offs[1:]):
            if a != b:                                      # a layer feeding itself: no link
                links.append((a, b, oa, ob))
    return links


def _initial_order(net, nodes: dict, virtual: dict, edges: list, n_ranks: int) -> list[list[str]]:
    """Depth-first from the sources in the order the layers were added: chains stay together."""
    ranks: list[list[str]] = [[] for _ in range(n_ranks)]
    succ: dict[str, list[str]] = {n: [] for n in list(nodes) + list(virtual)}
    for e in edges:
        chain = [e.destination] + e.points[::-1] + [e.source] if e.reversed else \
            [e.source] + e.points + [e.destination]
        for a, b in zip(chain, chain[1:]):
            if a != b:
                succ[a].append(b)
    seen = set()
    allnodes = {**nodes, **virtual}

    def visit(n):
        stack = [n]
        while stack:
            v = stack.pop()
            if v in seen:
                continue
            seen.add(v)
            ranks[allnodes[v].rank].append(v)
            stack.extend(reversed(succ[v]))

    order = [n for n in nodes if nodes[n].rank == 0] + list(nodes) + list(virtual)
    for n in order:
        visit(n)
    return ranks


def _crossings(upper, lower, links_between):
    pu = {n: i for i, n in enumerate(upper)}
    pl = {n: i for i, n in enumerate(lower)}
    segs = sorted((pu[a] + oa, pl[b] + ob) for a, b, oa, ob in links_between)
    count = 0
    for i in range(len(segs)):
        for j in range(i + 1, len(segs)):
            if segs[i][0] < segs[j][0] and segs[i][1] > segs[j][1]:
                count += 1
    return count


def _minimise_crossings(ranks, links, allnodes, sweeps: int = 16):
    by_pair: dict[int, list] = {}
    for a, b, oa, ob in links:
        by_pair.setdefault(allnodes[a].rank, []).append((a, b, oa, ob))

    def total(rs):
        return sum(_crossings(rs[r], rs[r + 1], by_pair.get(r, [])) for r in range(len(rs) - 1))

    best, best_cost = [list(r) for r in ranks], total(ranks)
    cur = [list(r) for r in ranks]
    for it in range(sweeps):
        if best_cost == 0:
            break
        down = it % 2 == 0
        order = range(1, len(cur)) if down else range(len(cur) - 2, -1, -1)
        for r in order:
            ref = cur[r - 1] if down else cur[r + 1]
            pos = {n: i for i, n in enumerate(ref)}
            bary = {}
            for i, n in enumerate(cur[r]):
                vals = [pos[a] + oa - ob for a, b, oa, ob in by_pair.get(r - 1, []) if b == n] if down \
                    else [pos[b] + ob - oa for a, b, oa, ob in by_pair.get(r, []) if a == n]
                bary[n] = sum(vals) / len(vals) if vals else i
            cur[r] = sorted(cur[r], key=lambda n: (bary[n], cur[r].index(n)))
        _transpose(cur, by_pair)
        cost = total(cur)
        if cost < best_cost:
            best, best_cost = [list(r) for r in cur], cost
    return best


def _transpose(ranks, by_pair, rounds: int = 4):
    """Swaps neighbours in a rank while that removes crossings."""
    for _ in range(rounds):
        improved = False
        for r in range(len(ranks)):
            for i in range(len(ranks[r]) - 1):
                def local(rs):
                    c = 0
                    if r > 0:
                        c += _crossings(ranks[r - 1], rs, by_pair.get(r - 1, []))
                    if r + 1 < len(ranks):
                        c += _crossings(rs, ranks[r + 1], by_pair.get(r, []))
                    return c
                swapped = ranks[r][:i] + [ranks[r][i + 1], ranks[r][i]] + ranks[r][i + 2:]
                if local(swapped) < local(ranks[r]):
                    ranks[r] = swapped
                    improved = True
        if not improved:
            return


def _positions(ranks, links, allnodes, measure, gap: float = 0.35, sweeps: int = 8):
    """Coordinates across the ranks (inches): near the neighbours' mean, never overlapping."""
    ext = {n: (measure(allnodes[n]) if not allnodes[n].virtual else 0.12) for n in allnodes}
    up: dict[str, list] = {n: [] for n in allnodes}
    down: dict[str, list] = {n: [] for n in allnodes}
    for a, b, oa, ob in links:
        down[a].append((b, oa, ob))
        up[b].append((a, oa, ob))
    for names in ranks:                                   # packed, centred on 0
        x = 0.0
        for n in names:
            allnodes[n].pos = x + ext[n] / 2
            x += ext[n] + gap
        shift = (x - gap) / 2
        for n in names:
            allnodes[n].pos -= shift

    def place(names, wants, weights):
        seps = [0.0]
        for a, b in zip(names, names[1:]):
            seps.append(seps[-1] + (ext[a] + ext[b]) / 2 + gap)
        ys = _isotonic([w - s for w, s in zip(wants, seps)], weights)
        for n, y, s in zip(names, ys, seps):
            allnodes[n].pos = y + s

    for it in range(sweeps):
        order = list(range(1, len(ranks))) if it % 2 == 0 else list(range(len(ranks) - 2, -1, -1))
        for r in order:
            names = ranks[r]
            wants, weights = [], []
            for n in names:
                nb = up[n] if it % 2 == 0 else down[n]
                if it % 2 == 0:
                    vals = [allnodes[a].pos + oa * ext[a] - ob * ext[n] for a, oa, ob in nb]
                else:
                    vals = [allnodes[b].pos + ob * ext[b] - oa * ext[n] for b, oa, ob in nb]
                if vals:
                    wants.append(sum(vals) / len(vals))
                    weights.append(len(vals) * (3.0 if allnodes[n].virtual else 1.0))
                else:
                    wants.append(allnodes[n].pos)
                    weights.append(0.1)
            place(names, wants, weights)
    xs = [allnodes[n].pos - ext[n] / 2 for n in allnodes] or [0.0]
    left = min(xs)
    for n in allnodes:
        allnodes[n].pos -= left


def _isotonic(values, weights):
    """Weighted least squares fit of a non-decreasing sequence (pool adjacent violators)."""
    blocks = []                                       # [mean, weight, count]
    for v, w in zip(values, weights):
        blocks.append([v, w, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            m2, w2, c2 = blocks.pop()
            m1, w1, c1 = blocks.pop()
            wt = w1 + w2
            blocks.append([(m1 * w1 + m2 * w2) / wt, wt, c1 + c2])
    out = []
    for m, _, c in blocks:
        out += [m] * c
    return out



# ------------------------------------------------------------------------------ the boxes ---

_NAME_PT, _SUB_PT, _PORT_PT = 9.0, 7.0, 6.5
_PAD_W, _BOX_H, _BOX_H_SIZES = 0.22, 0.42, 0.42
_RANK_GAP = 0.42                 # inches between ranks (room for port labels and arrows)


def sub_text(node: Node, sizes: bool) -> str:
    """The second line of a box: the layer's type, and its output size with `sizes`."""
    return node.type + (f"  ·  {node.sizes}" if sizes and node.sizes else "")


def box_size(node: Node, sizes: bool, direction: str, text_width: TextWidth) -> tuple[float, float]:
    """(width, height) of a layer's box in inches: room for its name, its second line and,
    on a layer with several inputs (or outputs), every port's label."""
    sub = sub_text(node, sizes)
    w = max(text_width(node.name, _NAME_PT, True), text_width(sub, _SUB_PT, False))
    h = _BOX_H
    for ports in (node.in_ports, node.out_ports):
        if len(ports) > 1:                   # room for every port label side by side
            if direction == "TB":
                w = max(w, sum(text_width(p, _PORT_PT, False) + 0.12 for p in ports))
            else:
                h = max(h, 0.17 * len(ports) + 0.06)
    return max(w + _PAD_W, 0.9), h


def estimated_width(text: str, points: float, bold: bool = False) -> float:
    """A text's width in inches without any font at hand: 0.6 em a character (0.66 bold)."""
    return len(text) * points * (0.66 if bold else 0.6) / 72.0


def _estimate(direction):
    return lambda node: box_size(node, True, direction, estimated_width)[0 if direction == "TB" else 1]
