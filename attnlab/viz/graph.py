"""Pictures of a network drawn with matplotlib (no Graphviz binary needed), or DOT text.

The drawing is data first (`picture.picture`: every box, curve, label and caption placed, from
the layout of `layout.compute_layout`), rendered second: `plot_network` only turns that data
into matplotlib patches and text, measuring text in matplotlib's fonts (`_text_width`).
"""
from __future__ import annotations

import functools
import io

from attnlab.core.files import output_path
from attnlab.core.errors import ArgumentError
from . import layout as _layout
from .layout import (_CYCLE, _EDGE, _NAME_PT, _RANK_GAP, _SUB_PT, Edge, Layout, Node,  # noqa: F401
                     _crossings, _links, family_colors, layout)
from .picture import _loop_points, bezier, picture  # noqa: F401  (view.py routes edges with them)


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
    """(width, height) of a layer's box in inches, its text measured in matplotlib's fonts."""
    return _layout.box_size(node, sizes, direction, _text_width)


def _rough_measure(direction):
    return lambda node: _box_size(node, True, direction)[0 if direction == "TB" else 1]


def compute_layout(net, sizes: bool = True, measure=None, direction: str = "TB") -> Layout:
    """`layout.compute_layout` with the boxes as matplotlib draws them (unless `measure`)."""
    return _layout.compute_layout(net, sizes=sizes, measure=measure or _rough_measure(direction),
                                  direction=direction)


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

    pic = picture(net, _text_width, direction=direction, sizes=sizes, title=title)
    x0, x1, y0, y1 = pic.bounds
    width, height = pic.size
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
    for c in pic.captions:
        ax.text(c.x, c.y, c.text, ha="center", va="center", fontsize=c.points * k, color=c.color,
                weight="bold" if c.bold else "normal")
    for e in pic.curves:
        color = _CYCLE if e.in_cycle else _EDGE
        codes = [MPath.MOVETO] + [MPath.CURVE4] * (len(e.points) - 1)
        ax.add_patch(FancyArrowPatch(path=MPath(e.points, codes), arrowstyle="-|>",
                                     mutation_scale=9 * k, color=color,
                                     lw=(1.7 if e.in_cycle else 0.9) * k, shrinkA=0, shrinkB=0,
                                     zorder=1))
        for lb in e.labels:
            ax.text(lb.x, lb.y, lb.text, ha=lb.ha, va=lb.va, color=lb.color, fontsize=lb.points * k,
                    zorder=4, bbox=dict(boxstyle="square,pad=0.04", fc="white", ec="none", alpha=0.9),
                    **({"style": "italic"} if lb.italic else {}))
    for b in pic.boxes:
        ax.add_patch(FancyBboxPatch((b.x - b.w / 2, b.y - b.h / 2), b.w, b.h,
                                    boxstyle="round,pad=0,rounding_size=0.07", fc=b.face,
                                    ec=_CYCLE if b.in_cycle else b.edge,
                                    lw=(1.8 if b.in_cycle else 1.0) * k, zorder=2))
        ax.text(b.x, b.y + 0.075, b.name, ha="center", va="center", fontsize=_NAME_PT * k,
                weight="bold", zorder=3, color="#111111")
        ax.text(b.x, b.y - 0.1, b.sub, ha="center", va="center", fontsize=_SUB_PT * k,
                color="#444444", zorder=3)
    if path is not None:
        w_in, h_in = fig.get_size_inches()
        dpi = min(dpi, int(30000 / max(w_in, h_in, 1)))         # stay below image size limits
        fig.savefig(path, dpi=dpi, facecolor="white")
        plt.close(fig)
    return fig


def _smooth(points, reach):
    """`picture.bezier` with matplotlib's path codes: (vertices, codes)."""
    from matplotlib.path import Path as MPath
    verts = bezier(points, reach)
    return verts, [MPath.MOVETO] + [MPath.CURVE4] * (len(verts) - 1)


# ----------------------------------------------------------------------- Jupyter, files ---

def network_png(net, **kw) -> bytes | None:
    """The picture as PNG bytes (for Jupyter's `_repr_png_`); None for an empty network."""
    return _render(net, "png", **kw)


def network_svg(net, **kw) -> str | None:
    """The picture as SVG text (for Jupyter's `_repr_svg_`); None for an empty network."""
    data = _render(net, "svg", **kw)
    return None if data is None else data.decode("utf-8")


def _render(net, fmt, **kw):
    if not net.layer_map:
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
