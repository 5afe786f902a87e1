"""Pictures of a network: a layout computed as data, then drawn with matplotlib (no Graphviz
binary needed), or written as DOT text."""
from __future__ import annotations

from dataclasses import dataclass

from ..analysis import analyze


@dataclass
class Node:
    name: str
    type: str
    rank: int
    slot: float
    sizes: str


@dataclass
class Edge:
    source: str
    destination: str
    port: str | None      # the destination port, labelled when the layer has several inputs
    in_cycle: bool
    slot: float = 0.0     # where on the destination's side the edge enters, -0.5 … 0.5


def layout(net) -> tuple[list[Node], list[Edge]]:
    """Ranks by longest path from the sources (cycle edges ignored), slots ordered by the mean
    slot of each layer's sources to keep edges short."""
    a = analyze(net, net._data_specs)
    cyc_edges, back_edges = set(), set()
    for c in a.cycles:
        ring = c + [c[0]]
        cyc_edges |= set(zip(ring, ring[1:]))
        back_edges.add((c[-1], c[0]))     # the edge that closes the cycle is drawn going back up
    layers = net._layers
    preds = {n: [] for n in layers}
    for (dst, port), (src, _) in net._conns.items():
        if (src, dst) not in back_edges:
            preds[dst].append(src)
    rank: dict[str, int] = {}

    def depth(n, seen=()):
        if n in rank:
            return rank[n]
        ps = [p for p in preds[n] if p not in seen]
        rank[n] = 0 if not ps else 1 + max(depth(p, seen + (n,)) for p in ps)
        return rank[n]

    for n in layers:
        depth(n)
    by_rank: dict[int, list[str]] = {}
    for n in layers:
        by_rank.setdefault(rank[n], []).append(n)
    slot: dict[str, float] = {}
    for r in sorted(by_rank):
        names = by_rank[r]
        if r > 0:
            names.sort(key=lambda n: sum(slot.get(p, 0) for p in preds[n]) / max(len(preds[n]), 1))
        for i, n in enumerate(names):
            slot[n] = i - (len(names) - 1) / 2
    nodes = []
    for n, l in layers.items():
        outs = a.out_specs.get(n)
        sizes = "" if not outs else ", ".join(str(s) for s in outs.values())
        nodes.append(Node(n, l.type_name, rank[n], slot[n], sizes))
    edges = []
    for (dst, port), (src, _) in net._conns.items():
        ports = layers[dst].input_ports
        k = len(ports)
        edges.append(Edge(src, dst, port if k > 1 else None, (src, dst) in cyc_edges,
                          (ports.index(port) + 0.5) / k - 0.5 if k > 1 else 0.0))
    return nodes, edges


def plot_network(net, path=None, direction: str = "TB", sizes: bool = True, ax=None):
    """Draws the network; saves to `path` when given; returns the matplotlib Figure."""
    import matplotlib
    if ax is None:
        matplotlib.use("Agg", force=False) if matplotlib.get_backend() == "" else None
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyBboxPatch

    nodes, edges = layout(net)
    if direction not in ("TB", "LR"):
        raise ValueError(f"direction must be 'TB' (top-down) or 'LR' (left to right), got {direction!r}")
    n_ranks = max((n.rank for n in nodes), default=0) + 1
    width = max((sum(1 for n in nodes if n.rank == r) for r in range(n_ranks)), default=1)
    box_w, box_h, gap_x, gap_y = 2.6, 0.8, 3.0, 1.5

    def pos(node):
        if direction == "TB":
            return node.slot * gap_x, -node.rank * gap_y
        return node.rank * gap_x * 1.25, -node.slot * gap_y

    where = {n.name: pos(n) for n in nodes}
    if ax is None:
        span = (width * 3.1, n_ranks * 1.55) if direction == "TB" else (n_ranks * 3.8, width * 1.6)
        fig, ax = plt.subplots(figsize=(max(4.0, span[0]), max(3.0, span[1])))
    else:
        fig = ax.figure
    for e in edges:
        (x0, y0), (x1, y1) = where[e.source], where[e.destination]
        back = y1 >= y0 if direction == "TB" else x1 <= x0
        if direction == "TB":
            start, end = (x0, y0 - box_h / 2), (x1 + e.slot * box_w * 0.8, y1 + box_h / 2)
        else:
            start, end = (x0 + box_w / 2, y0), (x1 - box_w / 2, y1 - e.slot * box_h * 0.8)
        color = "#d62728" if e.in_cycle else "#555555"
        rad = -0.5 if back else 0.0
        ax.annotate("", xy=end, xytext=start, arrowprops=dict(
            arrowstyle="-|>", color=color, lw=1.6 if e.in_cycle else 1.0,
            connectionstyle=f"arc3,rad={rad}", shrinkA=0, shrinkB=2))
        if e.port:
            lx, ly = (end[0], end[1] + 0.12) if direction == "TB" else (end[0] - 0.1, end[1] + 0.1)
            ax.text(lx, ly, e.port, fontsize=7, ha="center" if direction == "TB" else "right",
                    va="bottom", color="#d62728" if e.in_cycle else "#1f4e9c",
                    bbox=dict(boxstyle="round,pad=0.1", fc="white", ec="none", alpha=0.85))
    for n in nodes:
        x, y = where[n.name]
        face = "#e8f0fe" if n.type.endswith("Input") else \
            "#fde9d9" if "Attention" in n.type else "#f2f2f2"
        ax.add_patch(FancyBboxPatch((x - box_w / 2, y - box_h / 2), box_w, box_h,
                                    boxstyle="round,pad=0.02,rounding_size=0.12",
                                    fc=face, ec="#333333", lw=1.0))
        ax.text(x, y + (0.12 if sizes and n.sizes else 0), n.name, ha="center", va="center",
                fontsize=8.5, weight="bold")
        sub = n.type + (f"  {n.sizes}" if sizes and n.sizes else "")
        ax.text(x, y - 0.2, sub, ha="center", va="center", fontsize=6.5, color="#444444")
    xs = [p[0] for p in where.values()] or [0]
    ys = [p[1] for p in where.values()] or [0]
    ax.set_xlim(min(xs) - box_w, max(xs) + box_w)
    ax.set_ylim(min(ys) - box_h * 1.5, max(ys) + box_h * 1.5)
    ax.set_aspect("equal")
    ax.axis("off")
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=130)
        plt.close(fig)
    return fig


def to_dot(net) -> str:
    """The graph in Graphviz DOT, ports as edge labels, cycle edges red."""
    nodes, edges = layout(net)
    lines = ["digraph network {", "  rankdir=TB;", '  node [shape=box, style="rounded,filled", '
             'fillcolor="#f2f2f2", fontname="Helvetica"];']
    for n in nodes:
        label = f"{n.name}\\n{n.type}" + (f"\\n{n.sizes}" if n.sizes else "")
        lines.append(f'  "{n.name}" [label="{label}"];')
    for e in edges:
        attrs = []
        if e.port:
            attrs.append(f'label="{e.port}"')
        if e.in_cycle:
            attrs.append('color="red"')
        lines.append(f'  "{e.source}" -> "{e.destination}"' + (f" [{', '.join(attrs)}]" if attrs else "") + ";")
    lines.append("}")
    return "\n".join(lines) + "\n"
