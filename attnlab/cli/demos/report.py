"""`report.html`: one self-contained page (pictures embedded as base64) with a demo's metrics
beside its baselines, its pictures and how to reproduce it."""
from __future__ import annotations

import base64
import html
import json
import mimetypes
import platform
import time
from pathlib import Path

_STYLE = """
body{font:15px/1.5 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1000px;margin:2em auto;
padding:0 1em;color:#222}
h1{font-size:1.6em;margin-bottom:.2em} h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.6em 0} td,th{border:1px solid #ccc;padding:.3em .7em;text-align:left}
th{background:#f4f4f4} td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.ours td{font-weight:600;background:#eef6ff}
figure{margin:1em 0} figure img{max-width:100%;border:1px solid #eee}
figcaption{color:#555;font-size:.9em} code,pre{background:#f6f6f6;border-radius:3px}
pre{padding:.6em;overflow:auto} .muted{color:#666;font-size:.9em}
"""


def _img(path: Path) -> str:
    mime = mimetypes.guess_type(path.name)[0] or "image/png"
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<img src="data:{mime};base64,{data}" alt="{html.escape(path.name)}">'


def _cell(v) -> str:
    if isinstance(v, float):
        return f'<td class="num">{v:.4g}</td>'
    return f"<td>{html.escape(str(v))}</td>"


def write_report(out: Path, title: str, summary: str, comparison: list[dict],
                 figures: list[tuple[str, str]], details: dict, command: str,
                 notes: str = "") -> Path:
    """Writes `out/report.html`.

    comparison: rows {"model": ..., "<metric>": value, ..., "ours": bool} shown as one table;
    figures: (file name in `out`, caption) — missing files are listed, not fatal;
    details: key → value (sizes, times, settings) shown as a second table."""
    out = Path(out)
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
             f"<style>{_STYLE}</style></head><body>",
             f"<h1>{html.escape(title)}</h1>", f"<p>{summary}</p>"]
    if comparison:
        cols = [k for k in comparison[0] if k != "ours"]
        parts.append("<h2>Held-out results</h2><table><tr>"
                     + "".join(f"<th>{html.escape(c)}</th>" for c in cols) + "</tr>")
        for row in comparison:
            cls = ' class="ours"' if row.get("ours") else ""
            parts.append(f"<tr{cls}>" + "".join(_cell(row.get(c, "")) for c in cols) + "</tr>")
        parts.append("</table>")
    if notes:
        parts.append(f"<p>{notes}</p>")
    parts.append("<h2>Pictures</h2>")
    for name, caption in figures:
        p = out / name
        if p.exists():
            parts.append(f"<figure>{_img(p)}<figcaption><b>{html.escape(name)}</b> — "
                         f"{html.escape(caption)}</figcaption></figure>")
        else:
            parts.append(f"<p class='muted'>{html.escape(name)} was not written.</p>")
    parts.append("<h2>Details</h2><table>")
    for k, v in details.items():
        shown = json.dumps(v) if isinstance(v, (dict, list)) else v
        parts.append(f"<tr><th>{html.escape(str(k))}</th>{_cell(shown)}</tr>")
    parts.append("</table>")
    parts.append(f"<h2>Reproduce</h2><pre>{html.escape(command)}</pre>"
                 f"<p class='muted'>Written {time.strftime('%Y-%m-%d %H:%M')} on "
                 f"{html.escape(platform.platform())}, Python {platform.python_version()}.</p>")
    parts.append("</body></html>")
    path = out / "report.html"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path
