"""Acceptance runs of `attnlab view` in headless Chromium, and the screenshots in docs/.

    python benchmarks/view_pages.py [--demos DIR] [--shots docs]

Pages: the four demos' output folders (trained with `--epochs 1` into DIR when missing; a
sample from each demo's data set is saved beside the model), the seed-1 question (its cycle),
and a 200-layer network. For each: the time to write the page, the time until the page is
interactive (script done, measured from navigation start by the page itself), the time from a
click on a layer to the filled details panel, console errors and requests other than the page.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import attnlab as al                                              # noqa: E402
from attnlab import layers as L                                   # noqa: E402
from attnlab.cli import main as cli                               # noqa: E402
from attnlab.cli.demos.seed1 import question_network                  # noqa: E402
from chromium import Browser                                      # noqa: E402

DEMOS = ("digits", "vowels", "forecast", "roman")


def samples(folder: Path, name: str) -> None:
    """A sample from the demo's own data set, saved as the folder's sample.npz."""
    if name == "digits":
        d = al.datasets.digits()
        x = np.asarray(d.X_test[0], np.float32)
        np.savez(folder / "sample.npz", image=x.reshape(1, 8, 8) / max(float(x.max()), 1.0))
    elif name == "vowels":
        from attnlab.cli.demos.vowels import member_configs, member_view
        d = al.datasets.japanese_vowels()      # as model.attnlab (member 0) sees an utterance
        x = member_view(member_configs(1)[0], d.X_train, [d.X_test[0]])[1][0]
        np.savez(folder / "sample.npz", cepstrum=x)
    elif name == "forecast":
        rng = np.random.default_rng(0)       # three standardised channels, 40 weeks
        np.savez(folder / "sample.npz", input=rng.standard_normal((40, 3)).astype(np.float32))
    elif name == "roman":
        from attnlab.cli.demos.roman import Vocab
        d = al.datasets.roman_numerals()
        v = Vocab(d)
        src, tgt = "947", "CMXLVII"
        np.savez(folder / "sample.npz", source=v.encode_source([src])[0],
                 **{"decoder-input": v.decoder_inputs([tgt])[0],
                    "labels:source": np.array(list(src)),
                    "labels:decoder-input": np.array(["<start>"] + list(tgt))})


def big_network(n: int = 200) -> al.Network:
    """Residual self-attention blocks to `n` layers."""
    net = al.Network()
    net.add([L.SequenceInput(8, name="in"), L.Dense(16, name="embed")])
    prev, k = "embed", 1
    while len(net.layers) + 7 <= n - 2:
        net.add(L.SelfAttention(2, 16, name=f"attention{k}"))
        net.connect(prev, f"attention{k}")
        net.add([L.Addition(2, name=f"add{k}"), L.LayerNorm(name=f"norm{k}"),
                 L.Dense(32, name=f"ff{k}"), L.GELU(name=f"gelu{k}"), L.Dense(16, name=f"proj{k}"),
                 L.Addition(2, name=f"add{k}b")])
        net.connect(f"attention{k}", f"add{k}/in1")
        net.connect(prev, f"add{k}/in2")
        net.connect(f"norm{k}", f"add{k}b/in2")
        prev, k = f"add{k}b", k + 1
    while len(net.layers) < n - 2:
        net.add(L.Dense(16, name=f"extra{len(net.layers)}"))
        net.connect(prev, net.layers[-1].name)
        prev = net.layers[-1].name
    net.add([L.GlobalAvgPool1d(name="pool"), L.Dense(4, name="out")])
    net.connect(prev, "pool")
    return net


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--demos", type=Path, default=Path("/tmp/view-demos"))
    ap.add_argument("--shots", type=Path, default=ROOT / "docs")
    ap.add_argument("--work", type=Path, default=Path("/tmp/view-pages"))
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    args.shots.mkdir(parents=True, exist_ok=True)
    pages = []
    for name in DEMOS:
        folder = args.demos / name
        if not (folder / "model.attnlab").exists():
            subprocess.run([sys.executable, "-m", "attnlab.cli", "demo", name, "--epochs", "1",
                            "--out", str(args.demos)], check=True, stdout=subprocess.DEVNULL)
        samples(folder, name)
        pages.append((name, [str(folder)], None))
    question_network().save(args.work / "seed1-question.attnlab")
    pages.append(("seed1-question", [str(args.work / "seed1-question.attnlab")], "lstm_decoder"))
    big = big_network(200)
    big.save(args.work / "layers-200.attnlab")
    np.savez(args.work / "layers-200.npz", **{"in": np.random.default_rng(0).standard_normal((16, 8))})
    pages.append(("layers-200", [str(args.work / "layers-200.attnlab"), "--input",
                                 str(args.work / "layers-200.npz")], "attention3"))

    rows = []
    with Browser(width=1400, height=900) as b:
        for name, argv, click in pages:
            out = args.work / f"{name}.html"
            t = time.perf_counter()
            rc = cli(["view", *argv, "-o", str(out), "--title", name])
            write_s = time.perf_counter() - t
            assert rc == 0, name
            page = b.open(out)
            ready_ms = page.eval("window.attnlabReadyMs")
            data = page.eval("({layers: window.attnlab.data.layers.length, maps: window.attnlab.data.attention.length})")
            nodes = page.eval("document.querySelectorAll('#nodes .node').length")
            target = click or page.eval("window.attnlab.data.attention.length ? "
                                        "window.attnlab.data.attention[0].layer : window.attnlab.data.layers[1].name")
            page.eval(f"window.attnlab.centreOn({target!r})")         # in view, then a real click
            t = time.perf_counter()
            page.click(f'.node[data-name="{target}"]')
            page.wait(f"document.getElementById('details').dataset.layer === {target!r}")
            click_ms = 1000 * (time.perf_counter() - t)
            page.screenshot(args.shots / f"view-{name}.png")
            if name in ("roman", "digits"):
                page.eval("document.getElementById('attention').scrollIntoView()")
                page.screenshot(args.shots / f"view-{name}-attention.png")
            errors = page.console_errors
            other = [u for u in page.requests if u != out.resolve().as_uri() and not u.startswith("data:")]
            rows.append((name, data["layers"], nodes, data["maps"], write_s, ready_ms, click_ms,
                         len(errors), len(other)))
            if errors or other:
                print(name, "errors:", errors, "requests:", [u[:100] for u in other])
    print(f"{'page':16} {'layers':>6} {'nodes':>6} {'maps':>5} {'write s':>8} {'ready ms':>9} "
          f"{'click ms':>9} {'errors':>7} {'requests':>9}")
    for r in rows:
        print(f"{r[0]:16} {r[1]:6d} {r[2]:6d} {r[3]:5d} {r[4]:8.2f} {r[5]:9.0f} {r[6]:9.0f} "
              f"{r[7]:7d} {r[8]:9d}")
    return 0 if all(r[7] == 0 and r[8] == 0 and r[1] == r[2] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
