"""`attnlab view`: one self-contained interactive HTML page of a network and its attention.

The page is a template (`assets/view.html`, `view.css`, `view.js`: plain JavaScript and SVG
written for attnlab, no library) and one JSON object, `page_data(net, ...)`
(attnlab.viz.page_data, its attention maps from attnlab.viz.page_attention). This module puts
them together and writes or serves the page (attnlab.viz.server); samples and demo folders
are read by attnlab.viz.samples.

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
import webbrowser
from importlib import resources
from pathlib import Path

from attnlab.core.files import output_path
from attnlab.core.errors import ArgumentError
from .page_attention import MAX_STEPS, attention_maps
from .page_data import PX, page_data
from .samples import read_folder, read_sample
from .server import PageServer

__all__ = ["page_data", "attention_maps", "render_html", "page_html", "notebook_html", "view",
           "write_page", "PageServer", "read_sample", "read_folder", "PX", "MAX_STEPS"]

_TEMPLATE_FILES = ("view.html", "view.css", "view.js")


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


def render_html(data: dict, tool: str = "view") -> str:
    """The page for `page_data(...)`: one HTML document with its style, script and data inline,
    titled as the page of `tool` ("view", "explain")."""
    template, css, js = (_asset(n) for n in _TEMPLATE_FILES)
    csp = (f"default-src 'none'; script-src {_csp_hash(js)}; style-src {_csp_hash(css)}; "
           "img-src data:; base-uri 'none'; form-action 'none'")
    # the placeholders are replaced once each, in one pass, so text in the data cannot
    # reintroduce a placeholder
    parts = {"@@CSP@@": html.escape(csp),
             "@@TITLE@@": html.escape(f"{data.get('title', 'network')} · attnlab {tool}"),
             "@@TOOL@@": html.escape(tool),
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
         open_browser: bool = True, title: str | None = None, timeout: float | None = 3600.0,
         methods=()):
    """Writes the interactive page of `net` to `path` (returns the Path) or, with `serve=True`,
    serves it on 127.0.0.1 and opens the browser (returns the running `PageServer`; stop it
    with `.stop()`, it stops by itself after `timeout` seconds). Without either, returns the
    HTML. `sample`: an input (array, or dict by input name) whose attention weights the page
    shows; `labels`: tokens per input name; `training`: a TrainingInfo for its curves;
    `methods`: the explanations of the sample to add ("rollout", "ig", "lens", "heads", or
    one string as `attnlab view --method` takes it, e.g. "all"; attnlab.viz.page_explain)."""
    text = page_html(net, sample=sample, labels=labels, training=training, title=title,
                     methods=methods)
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
    from attnlab.core.files import atomic_write
    atomic_write(path, text.encode("utf-8"))
    return path

