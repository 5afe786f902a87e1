"""`attnlab view`: one self-contained interactive HTML page of a network and its attention.

The page is a template (`assets/view.html`, `view.css`, `view.js`: plain JavaScript and SVG
written for attnlab, no library) and one JSON object, `page_data(net, ...)`, built from the
same analysis walk as `net.analyze()` and laid out by the layout code of `net.plot()`
(`graph.compute_layout`, boxes sized by `graph._box_size`, edges routed by `graph._smooth`).

Nothing from the network goes into the page as markup or code: the data sits in a
`<script type="application/json">` element with `<`, `>`, `&` and the JavaScript line
separators escaped, and the page's script writes every name and message with `textContent`.
A Content-Security-Policy in the page admits only its own inline script and style (by hash)
and `data:` images, so a viewed page can make no request at all.
"""
from __future__ import annotations

import base64
import hashlib
import html
import json
import math
import threading
import webbrowser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path

import numpy as np

from .._files import output_path
from ..analysis import analyze
from ..errors import ArgumentError, DataError
from . import graph as G

PX = 96.0                         # pixels per inch of the layout (text sizes: 1 pt = 96/72 px)
MAX_STEPS = 256                   # attention maps are cut to this many queries and keys
_TEMPLATE_FILES = ("view.html", "view.css", "view.js")


# ---------------------------------------------------------------------------- the data ---

def page_data(net, sample=None, labels=None, training=None, metrics=None, title=None,
              images=None) -> dict:
    """The page's one JSON object: layers with their places, ports, sizes, options, learnables
    and issues; edges as routed curves; the issues; totals; attention maps for `sample` (a
    dict by input name or one array, see `attention_maps`); `training` curves (a TrainingInfo
    or its dict of tables); a demo's `metrics`; `images` (name → PNG bytes) shown as pictures."""
    a = analyze(net, net._data_specs)
    geo = _geometry(net)
    issues = [{"severity": i.severity, "kind": i.kind, "message": i.message, "layer": i.layer,
               "port": i.port} for i in a.issues]
    named = _issues_by_layer(net, a)
    order = {n: i for i, n in enumerate(a.order)}
    to: dict[tuple[str, str], list[str]] = {}
    for (dst, dport), (src, sport) in net._conns.items():
        to.setdefault((src, sport), []).append(_port_ref(net, dst, dport, "in"))
    layers = []
    for node in geo["nodes"]:
        n = node["name"]
        layer = net._layers[n]
        ins = []
        for p in layer.input_ports:
            src = net._conns.get((n, p))
            s = (a.in_specs.get(n) or {}).get(p)
            ins.append({"port": p, "size": None if s is None else str(s), "labels": _labels(s),
                        "kind": None if s is None else s.kind,
                        "from": None if src is None else _port_ref(net, src[0], src[1], "out")})
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
        "totals": {"layers": len(net._layers), "connections": len(net._conns),
                   "learnables": a.total_learnables, "errors": len(a.errors),
                   "warnings": len(a.warnings)},
        "colormap": _viridis(),
        "attention": [], "attention_note": None,
        "training": _training(training), "metrics": _jsonable(metrics or {}),
        "images": [{"name": k, "src": "data:image/png;base64," + base64.b64encode(v).decode("ascii")}
                   for k, v in (images or {}).items()],
    }
    if sample is not None:
        if a.ok:
            data["attention"] = attention_maps(net, sample, labels)
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
    ports = net._layers[e.destination].input_ports
    return ports[0] if ports else None


def _port_ref(net, layer, port, side):
    ports = net._layers[layer].input_ports if side == "in" else net._layers[layer].output_ports
    return layer if len(ports) == 1 else f"{layer}/{port}"


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
            names.update(n for n in net._layers if f"'{n}'" in issue.message)
        for n in names:
            if n in net._layers:
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
        if hasattr(v, "_layers"):                 # a nested network: its size, not its graph
            v = f"Network · {len(v._layers)} layers"
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


# ------------------------------------------------------------------- attention weights ---

def _attention_modules(net, prefix=""):
    """(display name, module) of every attention layer that can return its weights, nested
    networks included ('outer/inner')."""
    from ..functional import AttentionModule    # torch, only when a page shows attention

    found = []
    for name, layer in net._layers.items():
        if hasattr(layer, "_layers") and name in net.layer_modules:     # a nested Network
            found += _attention_modules(net.layer_modules[name], f"{prefix}{name}/")
            continue
        mod = net.layer_modules[name] if name in net.layer_modules else None
        # attnlab's attention modules take need_weights=True per call
        if isinstance(mod, AttentionModule) and getattr(layer, "num_heads", None):
            found.append((prefix + name, name, net, mod))
    return found


def attention_maps(net, sample, labels=None, item: int = 0) -> list[dict]:
    """The attention weights of every attention layer for `sample`, item `item` of its batch:
    `[{"layer", "heads", "tq", "tk", "weights": heads×Tq×Tk nested lists, "query_labels",
    "key_labels"}]`. `sample`: one array (a network with one input) or a dict by input name;
    an array without its batch dimension gets one. `labels`: a dict input name → one label
    per position (tokens), used on the axes of attention whose queries or keys come from
    that input; positions otherwise."""
    import torch

    inputs = _sample_inputs(net, sample)
    if not net.initialized:       # build the modules first: the hooks go on them
        if any(l.is_input for l in net._layers.values()):
            net.initialize()
        else:
            net.initialize(inputs)
    mods = _attention_modules(net)
    if not mods:
        return []
    captured: dict[str, torch.Tensor] = {}
    handles = []

    def ask_weights(module, args, kwargs):
        return args, {**kwargs, "need_weights": True}          # a supported per-call option

    def hook_for(display, wanted_already):
        def hook(module, args, output):
            captured[display] = output[1].detach()
            return output if wanted_already else output[0]     # the plan expects one output
        return hook

    try:
        for display, _name, _owner, mod in mods:
            handles.append(mod.register_forward_pre_hook(ask_weights, with_kwargs=True))
            handles.append(mod.register_forward_hook(hook_for(display, mod.scores)))
        was_training = net.training
        net.eval()
        try:
            with torch.no_grad():
                net(inputs)
        finally:
            net.train(was_training)
    finally:
        for h in handles:
            h.remove()
    out = []
    for display, name, owner, _mod in mods:
        scores = captured.get(display)
        if scores is None:
            continue
        w = scores[item].float().cpu().numpy()               # heads×Tq×Tk
        if w.ndim != 3:
            continue
        w = w[:, :MAX_STEPS, :MAX_STEPS]
        heads, tq, tk = w.shape
        qlab, klab = _axis_labels(owner, name, labels, tq, tk)
        out.append({"layer": display, "type": owner._layers[name].type_name, "heads": heads,
                    "tq": tq, "tk": tk, "weights": np.round(w, 4).tolist(),
                    "query_labels": qlab, "key_labels": klab})
    return out


def _sample_inputs(net, sample) -> dict:
    import torch

    names = list(net.input_names)
    if not names:
        raise DataError("the network has no inputs to give the sample to")
    if not isinstance(sample, dict):
        if len(names) != 1:
            raise DataError(f"the sample is one array, but the network has {len(names)} inputs "
                            f"({', '.join(names)}). Give an .npz file with one array per input, "
                            f"named {', '.join(repr(n) for n in names)}.")
        sample = {names[0]: sample}
    missing = [n for n in names if n not in sample]
    if missing:
        raise DataError(f"the sample has no array for input(s) {', '.join(repr(n) for n in missing)} "
                        f"(it has {', '.join(repr(k) for k in sample) or 'none'}). Name the arrays "
                        "of the .npz file after the network's inputs.")
    a = analyze(net, net._data_specs)
    out = {}
    for n in names:
        x = np.asarray(sample[n])
        if x.dtype == object or not (np.issubdtype(x.dtype, np.number) or x.dtype == bool):
            raise DataError(f"input '{n}': the sample must be numbers, received {x.dtype}")
        spec = _input_spec(net, a, n)
        if spec is not None and x.ndim == len(spec.sizes) - 1:
            x = x[None]                                          # one item: add the batch axis
        if spec is not None and x.ndim != len(spec.sizes):
            raise DataError(f"input '{n}': expected {spec} ({len(spec.sizes)} dimensions, or "
                            f"{len(spec.sizes) - 1} for one item), received "
                            f"{'×'.join(map(str, x.shape))}.")
        out[n] = torch.as_tensor(x, dtype=torch.float32)
    return out


def _input_spec(net, a, name):
    layer_name, _, port = name.partition("/")
    layer = net._layers.get(layer_name)
    if layer is None:
        return None
    if layer.is_input:
        return next(iter((a.out_specs.get(layer_name) or {}).values()), None)
    return (net._data_specs or {}).get(name)


def _axis_labels(net, name, labels, tq, tk):
    """Token labels for the queries and keys of attention layer `name` in `net`: those of the
    input that its query (key) port traces back to through first inputs, when they fit."""
    if not labels:
        return None, None
    layer = net._layers[name]
    ports = layer.input_ports
    qport = "query" if "query" in ports else ports[0]
    kport = "key" if "key" in ports else ports[0]

    def trace(port):
        seen = set()
        cur, p = name, port
        while (cur, p) in net._conns and cur not in seen:
            seen.add(cur)
            cur, _ = net._conns[(cur, p)]
            if net._layers[cur].is_input:
                return cur
            ins = net._layers[cur].input_ports
            if not ins:
                return None
            p = ins[0]
        return None

    def fit(src, n):
        lab = labels.get(src) if src else None
        return [str(s) for s in lab] if lab is not None and len(lab) >= n else None

    q, k = fit(trace(qport), tq), fit(trace(kport), tk)
    return (q[:tq] if q else None), (k[:tk] if k else None)


# --------------------------------------------------------------------------- the page ---

def _asset(name: str) -> str:
    return (resources.files("attnlab.viz") / "assets" / name).read_text(encoding="utf-8")


def _script_json(data) -> str:
    """JSON that is safe inside a <script> element: no '<', '>' or '&' (so no '</script>' or
    '<!--'), and no U+2028/U+2029, all written as \\u escapes that JSON.parse reads back."""
    text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    for ch, esc in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e"),
                    ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(ch, esc)
    return text


def _csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


def render_html(data: dict) -> str:
    """The page for `page_data(...)`: one HTML document with its style, script and data inline."""
    template, css, js = (_asset(n) for n in _TEMPLATE_FILES)
    csp = (f"default-src 'none'; script-src {_csp_hash(js)}; style-src {_csp_hash(css)}; "
           "img-src data:; base-uri 'none'; form-action 'none'")
    # the placeholders are replaced once each, in one pass, so text in the data cannot
    # reintroduce a placeholder
    parts = {"@@CSP@@": html.escape(csp), "@@TITLE@@": html.escape(f"{data.get('title', 'network')} · attnlab view"),
             "@@CSS@@": css, "@@JS@@": js, "@@DATA@@": _script_json(data)}
    out, rest = [], template
    while True:
        hits = [(rest.find(k), k) for k in parts if rest.find(k) >= 0]
        if not hits:
            out.append(rest)
            break
        i, k = min(hits)
        out += [rest[:i], parts[k]]
        rest = rest[i + len(k):]
    return "".join(out)


def page_html(net, **kw) -> str:
    """The page of `net` as one HTML string (keywords as for `page_data`)."""
    return render_html(page_data(net, **kw))


def notebook_html(net, height: int = 640, **kw) -> str:
    """What Jupyter shows for a network: the page in a sandboxed iframe (scripts only, no
    access to the notebook), so its style and script cannot touch the notebook's."""
    page = page_html(net, **kw)
    return (f'<iframe sandbox="allow-scripts" srcdoc="{html.escape(page, quote=True)}" '
            f'style="width:100%;height:{int(height)}px;border:1px solid #ddd" '
            f'title="attnlab view"></iframe>')


def view(net, path=None, *, sample=None, labels=None, training=None, serve: bool = False,
         open_browser: bool = True, title: str | None = None, timeout: float | None = 3600.0):
    """Writes the interactive page of `net` to `path` (returns the Path) or, with `serve=True`,
    serves it on 127.0.0.1 and opens the browser (returns the running `PageServer`; stop it
    with `.stop()`, it stops by itself after `timeout` seconds). Without either, returns the
    HTML. `sample`: an input (array, or dict by input name) whose attention weights the page
    shows; `labels`: tokens per input name; `training`: a TrainingInfo for its curves."""
    text = page_html(net, sample=sample, labels=labels, training=training, title=title)
    if serve:
        server = PageServer(text, timeout=timeout)
        server.start()
        if open_browser:
            webbrowser.open(server.url)
        return server
    if path is None:
        return text
    return write_page(path, text)


def write_page(path, text: str, who: str = "view(path)") -> Path:
    """Writes a page to `path` (returns it as a Path) once it is known to be a file that can
    be written: not a folder, a device or another special file, in a folder that exists, named
    .html or .htm (or without an extension). The page appears whole or not at all."""
    path = output_path(path, who, ("html", "htm"), example="net.html")
    if path.exists() and not path.is_file():
        raise ArgumentError(f"{who}: '{path}' is not a regular file (a device, a pipe or a "
                            "socket); give a file name such as 'net.html'.")
    from .._files import atomic_write
    atomic_write(path, text.encode("utf-8"))
    return path


# ------------------------------------------------------------------------ the server ---

class PageServer:
    """Serves one page on 127.0.0.1 (never another interface) at `/`, on `port` (0: a free
    one), from a background thread, until `stop()` or `timeout` seconds. Requests whose Host
    is not this loopback address are refused (no DNS rebinding); any other path is 404."""

    def __init__(self, page: str, port: int = 0, timeout: float | None = 3600.0):
        if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
            raise ArgumentError(f"view: port must be an int in 0…65535, received {port!r}")
        if timeout is not None and not (isinstance(timeout, (int, float)) and timeout > 0):
            raise ArgumentError(f"view: timeout must be a positive number of seconds or None, "
                                f"received {timeout!r}")
        body = page.encode("utf-8")
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                host = self.headers.get("Host", "")
                if host not in owner._hosts:
                    self._send(403, b"forbidden: this page is served to 127.0.0.1 only\n", "text/plain")
                    return
                if self.path not in ("/", "/index.html"):
                    self._send(404, b"not found\n", "text/plain")
                    return
                self._send(200, body, "text/html; charset=utf-8")

            def _send(self, code, data, ctype):
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("X-Content-Type-Options", "nosniff")
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):          # quiet: no line per request on stderr
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._hosts = {f"127.0.0.1:{self.port}", f"localhost:{self.port}"}
        self.url = f"http://127.0.0.1:{self.port}/"
        self.timeout = timeout
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True,
                                        name="attnlab-view")
        self._timer: threading.Timer | None = None
        self._stopped = threading.Event()

    def start(self) -> "PageServer":
        self._thread.start()
        if self.timeout is not None:
            self._timer = threading.Timer(self.timeout, self.stop)
            self._timer.daemon = True
            self._timer.start()
        return self

    def stop(self) -> None:
        if self._stopped.is_set():
            return
        self._stopped.set()
        if self._timer is not None:
            self._timer.cancel()
        self._server.shutdown()
        self._server.server_close()

    def wait(self) -> None:
        """Blocks until the server stops (timeout or `stop()`); Ctrl-C stops it."""
        try:
            while not self._stopped.wait(0.5):
                pass
        except KeyboardInterrupt:
            self.stop()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False


# ------------------------------------------------------------------ files and folders ---

def read_sample(path) -> tuple[dict | np.ndarray, dict]:
    """A sample from `.npy` (one array) or `.npz` (arrays named after the network's inputs;
    arrays named `labels:<input>` hold that input's tokens). Never unpickles."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"--input: no such file: {path}")
    try:
        if path.suffix == ".npz":
            with np.load(path, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
        elif path.suffix == ".npy":
            arrays = np.load(path, allow_pickle=False)
        else:
            raise DataError(f"--input {path}: expected a .npy or .npz file, received '{path.suffix}'")
    except ValueError as e:         # an object array: would need pickle, which is refused
        raise DataError(f"--input {path}: cannot read it without unpickling ({e}); save numbers "
                        "with np.save / np.savez") from None
    if isinstance(arrays, dict):
        labels = {k.split(":", 1)[1]: [str(s) for s in v.tolist()] for k, v in arrays.items()
                  if k.startswith("labels:")}
        return {k: v for k, v in arrays.items() if not k.startswith("labels:")}, labels
    return arrays, {}


def read_folder(folder) -> dict:
    """What a demo's output folder (`attnlab demo NAME --out DIR` → DIR/NAME) offers the page:
    its model, a sample (`sample.npz`/`sample.npy`), its training history (`history.json`, as
    `page_data`'s `training`), `metrics.json`, and `training-progress.png` when there is no
    history to draw."""
    folder = Path(folder)
    model = folder / "model.attnlab"
    seeds = sorted(folder.glob("seed-*/model.attnlab"))
    if not model.exists() and seeds:           # `attnlab demo NAME --seeds N`: show the first run
        folder, model = seeds[0].parent, seeds[0]
    if not model.exists():
        raise DataError(f"{folder}: not a demo output folder (no model.attnlab in it)")
    out: dict = {"model": model, "sample": None, "labels": {}, "training": None, "metrics": None,
                 "images": {}}
    for name in ("sample.npz", "sample.npy"):
        if (folder / name).exists():
            out["sample"], out["labels"] = read_sample(folder / name)
            break
    if (folder / "history.json").exists():
        out["training"] = json.loads((folder / "history.json").read_text(encoding="utf-8"))
    if (folder / "metrics.json").exists():
        out["metrics"] = json.loads((folder / "metrics.json").read_text(encoding="utf-8"))
    if out["training"] is None and (folder / "training-progress.png").exists():
        out["images"]["training-progress.png"] = (folder / "training-progress.png").read_bytes()
    return out
