"""Pictures of a network, drawn with matplotlib (no Graphviz binary needed), or DOT text.

The layout is a small Sugiyama-style layered drawing, computed as data (`layout`):

1. ranks: the longest path from the sources (the edge that closes a cycle is laid out reversed);
2. edges spanning several ranks get a virtual point on every rank between, so that they run
   around the boxes instead of through them;
3. the order within each rank comes from barycenter sweeps (down and up, with the ports' places
   on multi-input layers), keeping the order with the fewest crossings, then adjacent swaps;
4. positions within each rank: each box as near as possible to the mean of its neighbours, no
   two boxes overlapping (isotonic regression), a few sweeps down and up.

`plot_network` then draws boxes sized to their text, smooth edges through the virtual points,
port names on layers with several inputs (and outputs), cycles in red.
"""
from __future__ import annotations

import functools
import io
from dataclasses import dataclass, field

from .._files import output_path
from ..analysis import analyze
from ..errors import ArgumentError

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
    a = analyze(net, net._data_specs)
    layers = net._layers
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
    for (dst, port), (src, sport) in net._conns.items():
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
    _positions(ranks, links, allnodes, measure or _rough_measure(direction))
    return Layout(list(nodes.values()), edges, virtual, ranks, a.cycles)


def _ranks(net) -> tuple[dict[str, int], set[tuple[str, str]]]:
    """Each layer's rank (longest path from a source) with the back edges of a depth-first walk
    left out, so what remains is acyclic and every kept edge goes down by at least one rank.
    Iterative throughout: thousands of layers in a chain must not exhaust Python's stack."""
    layers = net._layers
    succ: dict[str, list[str]] = {n: [] for n in layers}
    for (dst, _), (src, _) in net._conns.items():
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
        return f"Network · {len(layer._layers)} layers"
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


# -------------------------------------------------------------------------------- drawing ---

_NAME_PT, _SUB_PT, _PORT_PT = 9.0, 7.0, 6.5
_PAD_W, _BOX_H, _BOX_H_SIZES = 0.22, 0.42, 0.42
_RANK_GAP = 0.42                 # inches between ranks (room for port labels and arrows)


@functools.lru_cache(maxsize=4096)
def _text_width(text: str, points: float, bold: bool = False) -> float:
    """Width of `text` in inches at `points`, from matplotlib's own font metrics."""
    if not text:
        return 0.0
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import text_to_path
    prop = FontProperties(size=points, weight="bold" if bold else "normal")
    w, _, _ = text_to_path.get_text_width_height_descent(text, prop, ismath=False)
    return w / 72.0


def _box_size(node: Node, sizes: bool, direction: str = "TB") -> tuple[float, float]:
    sub = node.type + (f"  ·  {node.sizes}" if sizes and node.sizes else "")
    w = max(_text_width(node.name, _NAME_PT, bold=True), _text_width(sub, _SUB_PT))
    h = _BOX_H
    for ports in (node.in_ports, node.out_ports):
        if len(ports) > 1:                   # room for every port label side by side
            if direction == "TB":
                w = max(w, sum(_text_width(p, _PORT_PT) + 0.12 for p in ports))
            else:
                h = max(h, 0.17 * len(ports) + 0.06)
    return max(w + _PAD_W, 0.9), h


def _rough_measure(direction):
    return lambda node: _box_size(node, True, direction)[0 if direction == "TB" else 1]


# what matplotlib's Agg, SVG, PDF and PS backends write (a name without an extension: PNG)
_PICTURE_FORMATS = ("png", "svg", "svgz", "pdf", "ps", "eps", "jpg", "jpeg", "tif", "tiff", "webp")


def plot_network(net, path=None, direction: str = "TB", sizes: bool = True, ax=None,
                 title: str | None = None, dpi: int = 110):
    """Draws the network top-down (`direction="TB"`) or left to right (`"LR"`); `sizes` adds
    each layer's output size. Saves to `path` when given (PNG, SVG or PDF, by its extension)
    and closes the figure; returns the matplotlib Figure."""
    if direction not in ("TB", "LR"):
        raise ArgumentError(f"plot argument 'direction': expected 'TB' (top-down) or 'LR' (left to "
                            f"right), received {direction!r}.")
    if path is not None:
        path = output_path(path, "plot(path)", _PICTURE_FORMATS, example="net.png")
    import matplotlib
    if ax is None and path is not None:
        matplotlib.use("Agg", force=False) if matplotlib.get_backend() == "" else None
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch
    from matplotlib.path import Path as MPath

    tb = direction == "TB"
    boxes = {}

    def measure(node):
        boxes[node.name] = _box_size(node, sizes, direction)
        w, h = boxes[node.name]
        return w if tb else h + 0.1

    lay = compute_layout(net, sizes=sizes, measure=measure, direction=direction)
    allnodes = {n.name: n for n in lay.nodes}
    allnodes.update(lay.virtual)

    # layout coordinates: `across` within a rank, `along` the ranks (down the page for TB)
    def extents(name):                       # (across, along) sizes of a box
        w, h = boxes.get(name, (0.0, 0.0))
        return (w, h) if tb else (h, w)

    along_ext = [max((extents(n)[1] for n in names if n in boxes), default=0.12)
                 for names in lay.ranks]
    along, acc = [], 0.0
    for r, e in enumerate(along_ext):
        acc += (along_ext[r - 1] / 2 + _RANK_GAP if r else 0) + e / 2
        along.append(acc)

    def centre(name):
        n = allnodes[name]
        return n.pos, along[n.rank]

    def to_xy(p):
        return (p[0], -p[1]) if tb else (p[1], -p[0])

    xs, ys = [], []
    for name in allnodes:
        (c, a), (ec, ea) = centre(name), extents(name)
        for dc, da in ((-ec / 2, -ea / 2), (ec / 2, ea / 2)):
            x, y = to_xy((c + dc, a + da))
            xs.append(x)
            ys.append(y)
    margin = 0.3
    x0, x1 = min(xs, default=0) - margin, max(xs, default=1) + margin
    y0, y1 = min(ys, default=0) - margin, max(ys, default=1) + margin
    captions = []
    if title:
        captions.append((title, "#222222", 10.5, "bold"))
    for cyc in lay.cycles:
        captions.append(("cycle: " + " → ".join(cyc + [cyc[0]]), _CYCLE, 9.5, "bold"))
    cap_w = max((_text_width(t, pts, bold=wt == "bold") for t, _, pts, wt in captions), default=0)
    if cap_w + 2 * margin > x1 - x0:                       # room for the captions
        grow = (cap_w + 2 * margin - (x1 - x0)) / 2
        x0, x1 = x0 - grow, x1 + grow
    y1 += 0.3 * len(captions)
    width, height = x1 - x0, y1 - y0

    if ax is None:
        fig = plt.figure(figsize=(max(width, 2.5), max(height, 1.2)))
        ax = fig.add_axes((0, 0, 1, 1))
        # 1 data unit = 1 inch, so the text sizes in points match the boxes
        fw, fh = fig.get_size_inches()
        cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
        ax.set_xlim(cx - fw / 2, cx + fw / 2)
        ax.set_ylim(cy - fh / 2, cy + fh / 2)
        k = 1.0
    else:                                   # someone else's axes: scale the text to fit them
        fig = ax.figure
        ax.set_xlim(x0, x1)
        ax.set_ylim(y0, y1)
        ax.set_aspect("equal")
        box = ax.get_position()
        fw, fh = fig.get_size_inches()
        k = min(box.width * fw / width, box.height * fh / height)
    ax.axis("off")
    for i, (text, color, size_pt, weight) in enumerate(captions):
        ax.text((x0 + x1) / 2, y1 - 0.22 - 0.3 * i, text, ha="center", va="center", fontsize=size_pt * k,
                color=color, weight=weight)

    # edges, computed in layout coordinates and then turned for LR
    def port_point(name, slot, side):
        (c, a), (ec, ea) = centre(name), extents(name)
        return (c + slot * ec, a + ea / 2) if side == "out" else (c + slot * ec, a - ea / 2)

    step = _RANK_GAP * 0.45
    for e in lay.edges:
        start = port_point(e.source, e.source_slot, "out")
        end = port_point(e.destination, e.slot, "in")
        mids = [centre(v) for v in e.points]
        if e.reversed:
            pts = _loop_points(start, end, mids, centre(e.source), extents(e.source),
                               centre(e.destination), extents(e.destination), step)
        else:
            pts = [start] + mids + [end]
        color = _CYCLE if e.in_cycle else _EDGE
        verts, codes = _smooth(pts, 0.5 * _RANK_GAP)
        curve = MPath([to_xy(v) for v in verts], codes)
        ax.add_patch(FancyArrowPatch(path=curve, arrowstyle="-|>", mutation_scale=9 * k,
                                     color=color, lw=(1.7 if e.in_cycle else 0.9) * k,
                                     shrinkA=0, shrinkB=0, zorder=1))
        label = dict(fontsize=_PORT_PT * k, zorder=4,
                     bbox=dict(boxstyle="square,pad=0.04", fc="white", ec="none", alpha=0.9))
        if e.port:
            x, y = to_xy(end)
            if tb:
                ax.text(x + 0.035, y + 0.03, e.port, ha="left", va="bottom",
                        color=_CYCLE if e.in_cycle else _PORT, **label)
            else:
                ax.text(x - 0.04, y + 0.025, e.port, ha="right", va="bottom",
                        color=_CYCLE if e.in_cycle else _PORT, **label)
        if e.source_port:
            x, y = to_xy(start)
            if tb:
                ax.text(x + 0.035, y - 0.03, e.source_port, ha="left", va="top", style="italic",
                        color=_PORT, **label)
            else:
                ax.text(x + 0.04, y + 0.025, e.source_port, ha="left", va="bottom",
                        style="italic", color=_PORT, **label)

    # boxes
    for n in lay.nodes:
        x, y = to_xy(centre(n.name))
        w, h = boxes[n.name]
        face, edge = family_colors(n.type)
        ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h,
                                    boxstyle="round,pad=0,rounding_size=0.07", fc=face,
                                    ec=_CYCLE if n.in_cycle else edge,
                                    lw=(1.8 if n.in_cycle else 1.0) * k, zorder=2))
        ax.text(x, y + 0.075, n.name, ha="center", va="center", fontsize=_NAME_PT * k,
                weight="bold", zorder=3, color="#111111")
        sub = n.type + (f"  ·  {n.sizes}" if sizes and n.sizes else "")
        ax.text(x, y - 0.1, sub, ha="center", va="center", fontsize=_SUB_PT * k, color="#444444",
                zorder=3)
    if path is not None:
        w_in, h_in = fig.get_size_inches()
        dpi = min(dpi, int(30000 / max(w_in, h_in, 1)))         # stay below image size limits
        fig.savefig(path, dpi=dpi, facecolor="white")
        plt.close(fig)
    return fig


def _loop_points(start, end, mids, src_c, src_e, dst_c, dst_e, step):
    """The route of an edge against the ranks (closing a cycle), in layout coordinates: out of
    the source's output side, round the source, up through the virtual points, round the
    destination and into its input side."""
    first = mids[0][0] if mids else None
    last = mids[-1][0] if mids else None
    sign = 1.0 if first is None or first >= src_c[0] else -1.0
    side_src = src_c[0] + sign * (src_e[0] / 2 + 0.25)
    if first is not None and sign * (first - side_src) > 0:
        side_src = first
    sign_d = 1.0 if last is None or last >= dst_c[0] else -1.0
    if last is None:
        sign_d = sign
    side_dst = dst_c[0] + sign_d * (dst_e[0] / 2 + 0.25)
    if last is not None and sign_d * (last - side_dst) > 0:
        side_dst = last
    below, above = start[1] + step, end[1] - step
    return [start, (side_src, below)] + mids + [(side_dst, above), end]


def _smooth(points, reach):
    """A smooth path through `points` (layout coordinates, `along` increasing down the ranks):
    Catmull-Rom as cubic Béziers, leaving the first point and entering the last one along the
    ranks. Returns (vertices, codes)."""
    from matplotlib.path import Path as MPath
    pts = [tuple(map(float, p)) for p in points]
    if len(pts) == 2:
        (ac, aa), (bc, ba) = pts
        d = max(abs(ba - aa), 1e-6) * 0.5
        return ([pts[0], (ac, aa + d), (bc, ba - d), pts[1]],
                [MPath.MOVETO, MPath.CURVE4, MPath.CURVE4, MPath.CURVE4])
    ext = [(pts[0][0], pts[0][1] - reach)] + pts + [(pts[-1][0], pts[-1][1] + reach)]
    verts, codes = [pts[0]], [MPath.MOVETO]
    for i in range(1, len(ext) - 2):
        p0, p1, p2, p3 = ext[i - 1], ext[i], ext[i + 1], ext[i + 2]
        c1 = (p1[0] + (p2[0] - p0[0]) / 6, p1[1] + (p2[1] - p0[1]) / 6)
        c2 = (p2[0] - (p3[0] - p1[0]) / 6, p2[1] - (p3[1] - p1[1]) / 6)
        verts += [c1, c2, p2]
        codes += [MPath.CURVE4] * 3
    return verts, codes


# ----------------------------------------------------------------------- Jupyter, files ---

def network_png(net, **kw) -> bytes | None:
    """The picture as PNG bytes (for Jupyter's `_repr_png_`); None for an empty network."""
    return _render(net, "png", **kw)


def network_svg(net, **kw) -> str | None:
    """The picture as SVG text (for Jupyter's `_repr_svg_`); None for an empty network."""
    data = _render(net, "svg", **kw)
    return None if data is None else data.decode("utf-8")


def _render(net, fmt, **kw):
    if not net._layers:
        return None
    import matplotlib.pyplot as plt
    with plt.rc_context({"svg.fonttype": "none"}):
        buf = io.BytesIO()
        kw.setdefault("dpi", 96)
        fig = plot_network(net, None, **{k: v for k, v in kw.items() if k != "dpi"})
        fig.savefig(buf, format=fmt, dpi=kw["dpi"], facecolor="white")
        plt.close(fig)
    return buf.getvalue()


def to_dot(net) -> str:
    """The graph in Graphviz DOT, ports as edge labels, cycle edges red."""
    nodes, edges = layout(net)
    lines = ["digraph network {", "  rankdir=TB;", '  node [shape=box, style="rounded,filled", '
             'fillcolor="#f2f2f2", fontname="Helvetica"];']
    for n in nodes:
        label = f"{n.name}\\n{n.type}" + (f"\\n{n.sizes}" if n.sizes else "")
        face, _ = family_colors(n.type)
        lines.append(f'  "{n.name}" [label="{label}", fillcolor="{face}"];')
    for e in edges:
        attrs = []
        if e.port:
            attrs.append(f'label="{e.port}"')
        if e.source_port:
            attrs.append(f'taillabel="{e.source_port}"')
        if e.in_cycle:
            attrs.append('color="red"')
        lines.append(f'  "{e.source}" -> "{e.destination}"' + (f" [{', '.join(attrs)}]" if attrs else "") + ";")
    lines.append("}")
    return "\n".join(lines) + "\n"
