"""The picture of docs/tutorials/looking-inside.md, `docs/looking-inside.png`, made from the
page's own code: `python tools/looking_inside.py docs` (from the repository's root, with attnlab
and transformers installed; about a minute on a laptop's CPU, most of it the page's training).
A tool of the repository, not part of the installed package.

The page's Python blocks run in order in a temporary folder, with the training as the page
says (the docs test shortens it to one epoch; the picture needs the trained model). The
picture puts two of the page's results side by side, each drawn by its own `.plot()`: the
attention rollout of the trained GPT-2 (`r`) and the integrated gradients of its last
prediction (`ig`).
"""
from __future__ import annotations

import contextlib
import io
import os
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "tutorials" / "looking-inside.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def run_page(page: Path = PAGE) -> dict:
    """The namespace after the page's Python blocks, run in a temporary folder."""
    namespace: dict = {"__name__": "__looking_inside__"}
    here = Path.cwd()
    with tempfile.TemporaryDirectory(prefix="looking-inside-") as folder:
        os.chdir(folder)
        try:
            for n, code in enumerate(BLOCK.findall(page.read_text(encoding="utf-8"))):
                with contextlib.redirect_stdout(io.StringIO()):
                    exec(compile(code, f"{page.name} block {n + 1}", "exec"), namespace)
        finally:
            os.chdir(here)
    return namespace


def picture(namespace: dict, out: Path) -> Path:
    """The rollout's and the attributions' own figures, side by side in one PNG."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from PIL import Image

    parts = []
    for fig in (namespace["r"].plot(), namespace["ig"].plot()):
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110)
        plt.close(fig)
        buf.seek(0)
        parts.append(Image.open(buf).convert("RGB"))
    height = max(p.height for p in parts)
    sheet = Image.new("RGB", (sum(p.width for p in parts), height), "white")
    x = 0
    for p in parts:
        sheet.paste(p, (x, (height - p.height) // 2))
        x += p.width
    sheet.save(out, optimize=True)
    return out


def main(argv: list[str]) -> int:
    folder = Path(argv[0]) if argv else ROOT / "docs"
    out = picture(run_page(), folder / "looking-inside.png")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
