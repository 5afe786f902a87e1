"""A network's picture as data: every box, edge, label and caption placed, in inches.

`picture` lays the network out (`layout.compute_layout`, boxes measured in the renderer's
fonts), stacks the ranks, routes every edge as cubic Bézier curves through its virtual points
(round the boxes for an edge closing a cycle), places the port names on layers with several
inputs (and outputs) and the captions (title, cycles in red). Nothing here draws: `graph.py`
renders a picture with matplotlib.
"""
from __future__ import annotations

from dataclasses import dataclass

from .layout import (_CYCLE, _PORT, _PORT_PT, _RANK_GAP, Layout, TextWidth, box_size,
                     compute_layout, family_colors, sub_text)


@dataclass
class Box:
    name: str
    sub: str                          # the second line: type (and sizes)
    x: float                          # centre, inches (y grows upwards)
    y: float
    w: float
    h: float
    face: str
    edge: str
    in_cycle: bool


@dataclass
class Label:
    text: str
    x: float
    y: float
    ha: str
    va: str
    color: str
    italic: bool = False
    points: float = _PORT_PT


@dataclass
class Curve:
    """An edge: a start point, then cubic Bézier segments (two control points and an end each)."""
    source: str
    destination: str
    points: list[tuple[float, float]]
    in_cycle: bool
    labels: list[Label]               # its port names, at the ends


@dataclass
class Caption:
    text: str
    x: float
    y: float
    color: str
    points: float
    bold: bool


@dataclass
class Picture:
    layout: Layout
    boxes: list[Box]
    curves: list[Curve]
    captions: list[Caption]
    bounds: tuple[float, float, float, float]        # x0, x1, y0, y1 in inches

    @property
    def size(self) -> tuple[float, float]:
        x0, x1, y0, y1 = self.bounds
        return x1 - x0, y1 - y0


def picture(net, text_width: TextWidth, direction: str = "TB", sizes: bool = True,
            title: str | None = None) -> Picture:
    """Everything a drawing of `net` holds, placed (top-down for "TB", left to right for "LR"),
    in inches with y growing upwards; `text_width` measures text in the renderer's fonts."""
    tb = direction == "TB"
    boxes: dict[str, tuple[float, float]] = {}

    def measure(node):
        boxes[node.name] = box_size(node, sizes, direction, text_width)
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
    texts = []
    if title:
        texts.append((title, "#222222", 10.5, True))
    for cyc in lay.cycles:
        texts.append(("cycle: " + " → ".join(cyc + [cyc[0]]), _CYCLE, 9.5, True))
    cap_w = max((text_width(t, pts, bold) for t, _, pts, bold in texts), default=0)
    if cap_w + 2 * margin > x1 - x0:                       # room for the captions
        grow = (cap_w + 2 * margin - (x1 - x0)) / 2
        x0, x1 = x0 - grow, x1 + grow
    y1 += 0.3 * len(texts)
    captions = [Caption(t, (x0 + x1) / 2, y1 - 0.22 - 0.3 * i, color, pts, bold)
                for i, (t, color, pts, bold) in enumerate(texts)]

    # edges, computed in layout coordinates and then turned for LR
    def port_point(name, slot, side):
        (c, a), (ec, ea) = centre(name), extents(name)
        return (c + slot * ec, a + ea / 2) if side == "out" else (c + slot * ec, a - ea / 2)

    step = _RANK_GAP * 0.45
    curves = []
    for e in lay.edges:
        start = port_point(e.source, e.source_slot, "out")
        end = port_point(e.destination, e.slot, "in")
        mids = [centre(v) for v in e.points]
        if e.reversed:
            pts = _loop_points(start, end, mids, centre(e.source), extents(e.source),
                               centre(e.destination), extents(e.destination), step)
        else:
            pts = [start] + mids + [end]
        labels = []
        if e.port:
            x, y = to_xy(end)
            color = _CYCLE if e.in_cycle else _PORT
            labels.append(Label(e.port, x + 0.035, y + 0.03, "left", "bottom", color) if tb else
                          Label(e.port, x - 0.04, y + 0.025, "right", "bottom", color))
        if e.source_port:
            x, y = to_xy(start)
            labels.append(Label(e.source_port, x + 0.035, y - 0.03, "left", "top", _PORT, True)
                          if tb else
                          Label(e.source_port, x + 0.04, y + 0.025, "left", "bottom", _PORT, True))
        curves.append(Curve(e.source, e.destination,
                            [to_xy(v) for v in bezier(pts, 0.5 * _RANK_GAP)], e.in_cycle, labels))

    out = []
    for n in lay.nodes:
        x, y = to_xy(centre(n.name))
        w, h = boxes[n.name]
        face, edge = family_colors(n.type)
        out.append(Box(n.name, sub_text(n, sizes), x, y, w, h, face, edge, n.in_cycle))
    return Picture(lay, out, curves, captions, (x0, x1, y0, y1))


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


def bezier(points, reach) -> list[tuple[float, float]]:
    """A smooth path through `points` (layout coordinates, `along` increasing down the ranks):
    Catmull-Rom as cubic Béziers, leaving the first point and entering the last one along the
    ranks. Returns the first point, then two control points and an end point per segment."""
    pts: list[tuple[float, float]] = [(float(p[0]), float(p[1])) for p in points]
    if len(pts) == 2:
        (ac, aa), (bc, ba) = pts
        d = max(abs(ba - aa), 1e-6) * 0.5
        return [pts[0], (ac, aa + d), (bc, ba - d), pts[1]]
    ext = [(pts[0][0], pts[0][1] - reach)] + pts + [(pts[-1][0], pts[-1][1] + reach)]
    verts: list[tuple[float, float]] = [pts[0]]
    for i in range(1, len(ext) - 2):
        p0, p1, p2, p3 = ext[i - 1], ext[i], ext[i + 1], ext[i + 2]
        c1 = (p1[0] + (p2[0] - p0[0]) / 6, p1[1] + (p2[1] - p0[1]) / 6)
        c2 = (p2[0] - (p3[0] - p1[0]) / 6, p2[1] - (p3[1] - p1[1]) / 6)
        verts += [c1, c2, p2]
    return verts
