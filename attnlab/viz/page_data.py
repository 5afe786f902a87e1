"""The page's one JSON object: the layers with their places, ports, sizes, options,
learnables and issues; the edges as routed curves; totals; training curves and pictures; the
attention maps of a sample (attnlab.viz.page_attention). Laid out by the layout code of
`net.plot()` (`graph.compute_layout`, boxes sized by `graph._box_size`, edges routed by
`graph._smooth`), from the same analysis walk as `net.analyze()`."""
from __future__ import annotations

import base64
import math

import numpy as np

from attnlab.graph.analysis import analyze
from ..graph import Graph
from . import graph as G
from .page_attention import attention_maps, vocabulary_labels
from .page_explain import explanations

PX = 96.0                         # pixels per inch of the layout (text sizes: 1 pt = 96/72 px)


def page_data(net, sample=None, labels=None, training=None, metrics=None, title=None,
              images=None, methods=(), target=None, steps=64, strict=False,
              vocabulary=None) -> dict:
    """The page's one JSON object: layers with their places, ports, sizes, options, learnables
    and issues; edges as routed curves; the issues; totals; attention maps for `sample` (a
    dict by input name or one array, see `attention_maps`); `training` curves (a TrainingInfo
    or its dict of tables); a demo's `metrics`; `images` (name → PNG bytes) shown as pictures;
    the explanations of `sample` by `methods` (see `page_explain.explanations`, which takes
    `target`, `steps` and `strict`). `vocabulary` (token id → text, e.g. a tokenizer's) labels
    the token inputs that `labels` leaves out, and the tokens the logit lens predicts."""
    a = analyze(net, net.data_specs)
    geo = _geometry(net)
    issues = [{"severity": i.severity, "kind": i.kind, "message": i.message, "layer": i.layer,
               "port": i.port} for i in a.issues]
    named = _issues_by_layer(net, a)
    order = {n: i for i, n in enumerate(a.order)}
    to: dict[tuple[str, str], list[str]] = {}
    for (dst, dport), (src, sport) in net.sources.items():
        to.setdefault((src, sport), []).append(net.port_name(dst, dport, "input"))
    layers = []
    for node in geo["nodes"]:
        n = node["name"]
        layer = net.layer_map[n]
        ins = []
        for p in layer.input_ports:
            src = net.source(n, p)
            s = (a.in_specs.get(n) or {}).get(p)
            ins.append({"port": p, "size": None if s is None else str(s), "labels": _labels(s),
                        "kind": None if s is None else s.kind,
                        "from": None if src is None else net.port_name(src[0], src[1], "output")})
        outs = []
        out_specs = a.out_specs.get(n) or {}
        for p in layer.output_ports:
            s = out_specs.get(p)
            outs.append({"port": p, "size": None if s is None else str(s), "labels": _labels(s),
                         "kind": None if s is None else s.kind, "to": to.get((n, p), [])})
        params = [{"name": k, "shape": list(s), "count": _numel(s)}
                  for k, s in a.learnables.get(n, {}).items()]
        layers.append({**node, "index": order.get(n, len(order)), "options": _options(layer),
                       "inputs": ins, "outputs": outs, "learnables": params,
                       "count": sum(p["count"] for p in params), "issues": named.get(n, [])})
    data = {
        "title": title or "network",
        "layers": layers, "edges": geo["edges"], "size": geo["size"],
        "issues": issues, "cycles": a.cycles,
        "inputs": list(a.input_names), "outputs": list(a.output_names),
        "totals": {"layers": len(net.layer_map), "connections": len(net.sources),
                   "learnables": a.total_learnables, "errors": len(a.errors),
                   "warnings": len(a.warnings)},
        "colormap": _viridis(),
        "attention": [], "attention_note": None, "explanations": None,
        "training": _training(training), "metrics": _jsonable(metrics or {}),
        "images": [{"name": k, "src": "data:image/png;base64," + base64.b64encode(v).decode("ascii")}
                   for k, v in (images or {}).items()],
    }
    if sample is not None:
        if a.ok:
            labels = vocabulary_labels(net, sample, labels, vocabulary)
            data["attention"] = attention_maps(net, sample, labels)
            if methods:
                data["explanations"] = explanations(net, sample, labels, methods, target=target,
                                                    steps=steps, strict=strict,
                                                    vocabulary=vocabulary)
            if not data["attention"]:
                data["attention_note"] = "the network has no attention layer that gives weights"
        else:
            data["attention_note"] = ("the network has errors, so it cannot run on the sample: "
                                      "fix the issues first")
    return data


def _geometry(net) -> dict:
    """Boxes and edge curves in pixels, top-down, exactly as `plot_network` places them."""
    boxes: dict[str, tuple[float, float]] = {}

    def measure(node):
        boxes[node.name] = G._box_size(node, True, "TB")
        return boxes[node.name][0]

    lay = G.compute_layout(net, sizes=True, measure=measure, direction="TB")
    allnodes = {n.name: n for n in lay.nodes}
    allnodes.update(lay.virtual)
    along_ext = [max((boxes[n][1] for n in names if n in boxes), default=0.12) for names in lay.ranks]
    along, acc = [], 0.0
    for r, e in enumerate(along_ext):             # ranks stacked as plot_network stacks them
        acc += (along_ext[r - 1] / 2 + G._RANK_GAP if r else 0) + e / 2
        along.append(acc)

    def centre(name):
        n = allnodes[name]
        return n.pos, along[n.rank]

    def extents(name):
        return boxes.get(name, (0.0, 0.0))

    def port_point(name, slot, side):
        (c, al_), (ec, ea) = centre(name), extents(name)
        return (c + slot * ec, al_ + ea / 2) if side == "out" else (c + slot * ec, al_ - ea / 2)

    margin = 0.3
    xs = [centre(n)[0] + s * extents(n)[0] / 2 for n in allnodes for s in (-1, 1)] or [0.0]
    ys = [centre(n)[1] + s * extents(n)[1] / 2 for n in allnodes for s in (-1, 1)] or [0.0]
    x0, y0 = min(xs) - margin - 0.6, min(ys) - margin      # room left of the boxes for loops
    px = lambda p: [round((p[0] - x0) * PX, 1), round((p[1] - y0) * PX, 1)]

    nodes = []
    for n in lay.nodes:
        (c, al_), (w, h) = centre(n.name), boxes[n.name]
        face, edge = G.family_colors(n.type)
        nodes.append({"name": n.name, "type": n.type, "sizes": n.sizes, "rank": n.rank,
                      "x": round((c - w / 2 - x0) * PX, 1), "y": round((al_ - h / 2 - y0) * PX, 1),
                      "w": round(w * PX, 1), "h": round(h * PX, 1), "face": face, "edge": edge,
                      "in_ports": list(n.in_ports), "out_ports": list(n.out_ports),
                      "in_cycle": n.in_cycle})
    edges = []
    step = G._RANK_GAP * 0.45
    for ed in lay.edges:
        start = port_point(ed.source, ed.source_slot, "out")
        end = port_point(ed.destination, ed.slot, "in")
        mids = [centre(v) for v in ed.points]
        if ed.reversed:
            pts = G._loop_points(start, end, mids, centre(ed.source), extents(ed.source),
                                 centre(ed.destination), extents(ed.destination), step)
        else:
            pts = [start] + mids + [end]
        verts, _codes = G._smooth(pts, 0.5 * G._RANK_GAP)   # a move, then cubic Bézier triplets
        edges.append({"source": ed.source, "destination": ed.destination, "port": ed.port,
                      "source_port": ed.source_port, "in_cycle": ed.in_cycle,
                      "dst_port": _dst_port(net, ed), "points": [px(v) for v in verts]})
    width = (max(xs) + margin - x0) * PX
    height = (max(ys) + margin - y0) * PX
    return {"nodes": nodes, "edges": edges, "size": [round(width, 1), round(height, 1)]}


def _dst_port(net, e):
    """The destination port of a layout edge (the layout labels it only on multi-input layers)."""
    if e.port is not None:
        return e.port
    ports = net.layer_map[e.destination].input_ports
    return ports[0] if ports else None


def _issues_by_layer(net, a) -> dict[str, list[int]]:
    """Issue indices per layer: the issue's own layer, every layer of a cycle, and the layers an
    'after-cycle' warning lists."""
    out: dict[str, list[int]] = {}
    cycles = iter(a.cycles)                      # cycle issues come in the order of a.cycles
    for i, issue in enumerate(a.issues):
        names = set()
        if issue.layer:
            names.add(issue.layer)
        if issue.kind == "cycle":
            names.update(next(cycles, []))
        if issue.kind == "after-cycle":          # it lists the layers below the cycle
            names.update(n for n in net.layer_map if f"'{n}'" in issue.message)
        for n in names:
            if n in net.layer_map:
                out.setdefault(n, []).append(i)
    return out


def _labels(spec):
    if spec is None:
        return None
    return [{"B": "batch", "T": "time", "C": "channel", "S": "space", "H": "heads", "Q": "query time",
             "K": "key time"}.get(ch, ch) for ch in spec.labels]


def _options(layer) -> dict:
    try:
        cfg = layer.config()
    except Exception as e:      # a user's layer type: show why instead of failing the page
        return {"(options)": f"unavailable: {type(e).__name__}: {e}"}
    out = {}
    for k, v in cfg.items():
        if isinstance(v, Graph):                  # a nested network: its size, not its graph
            v = f"Network · {len(v.layer_map)} layers"
        out[str(k)] = v if isinstance(v, (bool, int, float, str, type(None))) else repr(v)
    return out


def _numel(shape):
    n = 1
    for s in shape:
        n *= int(s)
    return n


def _jsonable(v):
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float):
        return v if math.isfinite(v) else None     # JSON has no NaN or infinity
    if isinstance(v, (bool, int, str, type(None))):
        return v
    return str(v)


def _viridis() -> list[list[int]]:
    from matplotlib import colormaps
    cmap = colormaps["viridis"]
    return [[int(round(255 * c)) for c in cmap(i / 255)[:3]] for i in range(256)]


def _training(training):
    if training is None:
        return None
    tables = training if isinstance(training, dict) else \
        {"iterations": training.iterations, "validation": training.validation, "epochs": training.epochs}
    out = {}
    for table in ("iterations", "validation", "epochs"):
        cols = tables.get(table) or {}
        out[table] = {str(k): [_jsonable(x) if isinstance(x, (int, float, np.generic)) else None
                               for x in v] for k, v in cols.items() if isinstance(v, (list, tuple))}
    return out if any(out.values()) else None

