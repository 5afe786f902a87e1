"""The README's benchmark table, written from benchmarks/RESULTS.md (never typed by hand).

`python benchmarks/readme_table.py` prints the table; `--write` puts it into README.md between
`<!-- bench-table:begin -->` and `<!-- bench-table:end -->` (`make bench` does that after the
benchmarks). `benchmark_table(results_text)` is the function other generators call.
A row whose benchmark has not written its section yet is left out, not invented.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "RESULTS.md"
README = HERE.parent / "README.md"
BEGIN, END = "<!-- bench-table:begin -->", "<!-- bench-table:end -->"


def sections(text: str) -> dict[str, str]:
    """RESULTS.md's sections by name (`<!-- name:begin -->` … `<!-- name:end -->`)."""
    return {m.group(1): m.group(2) for m in
            re.finditer(r"<!-- ([\w-]+):begin -->\n(.*?)<!-- \1:end -->", text, flags=re.S)}


def tables(section: str) -> list[tuple[str, list[dict[str, str]]]]:
    """Every markdown table of a section: (the heading or bold line above it, rows as dicts by
    column header)."""
    out, heading, rows, header = [], "", None, None
    for line in section.splitlines() + [""]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if header is None:
                header, rows = cells, []
            elif not all(set(c) <= set("-: ") for c in cells):
                rows.append(dict(zip(header, cells)))
            continue
        if header is not None:
            out.append((heading, rows))
            header = None
        if line.startswith("#") or line.startswith("**"):
            heading = line.strip("#* ").strip()
    return out


def _table(secs, name, heading_start=""):
    for heading, rows in tables(secs.get(name, "")):
        if heading.startswith(heading_start):
            return rows
    return None


def _num(text: str) -> float:
    return float(re.search(r"[-\d.]+", text.replace(" ", "")).group())


def benchmark_table(results_text: str) -> str:
    """The README table (markdown) from the text of RESULTS.md."""
    secs = sections(results_text)
    rows = []
    overhead = _table(secs, "overhead")
    if overhead:
        for r, what in zip(overhead, ("graph overhead, 24 tiny layers, forward + backward",
                                      "seed-1 network, forward + backward")):
            rows.append((what, r["attnlab"], f"hand-written module {r['hand-written torch']}",
                         f"{_num(r['ratio']):.2f}×"))
    train = _table(secs, "attention", "Training step")
    for r in train or []:
        if r["T"] == "512":
            what = f"SelfAttention training step, B{r['B']} T512 E{r['E']} H{r['H']}"
            rows.append((what, f"{r['attnlab SelfAttention']} ms",
                         f"4 × `nn.Linear` + SDPA by hand {r['hand-written (4 Linear + SDPA)']} ms",
                         r["vs hand"]))
            rows.append((what, f"{r['attnlab SelfAttention']} ms",
                         f"`nn.MultiheadAttention` {r['nn.MultiheadAttention']} ms", r["vs MHA"]))
    inference = _table(secs, "attention", "Inference")
    if inference:
        r = inference[0]
        rows.append(("SelfAttention inference, T2048", f"{r['attnlab SelfAttention (eval)']} ms",
                     f"`nn.MultiheadAttention` fast path {r['nn.MultiheadAttention (eval)']} ms",
                     f"{r['speed-up']} faster"))
    memory = _table(secs, "attention", "Peak memory")
    if memory and len(memory) >= 2:
        ours, naive = memory[0]["peak extra memory"], memory[1]["peak extra memory"]
        rows.append(("peak memory of a training step, T8192", ours,
                     f"naive softmax(QKᵀ)V {naive}", f"{_num(ours) / _num(naive):.3f}×"))
    longest = _table(secs, "attention", "Longest")
    if longest and len(longest) >= 2:
        naive, ours = longest[0]["largest T"], longest[1]["largest T"]
        rows.append(("longest trainable T within 8 GiB", f"{int(ours):,}".replace(",", " "),
                     f"naive attention {int(naive):,}".replace(",", " "),
                     f"{int(ours) // int(naive)}× longer"))
    trainers = _table(secs, "training")
    if trainers:
        by = {r["trainer"]: r for r in trainers}
        if "al.train" in by and "hand loop" in by:
            ours, hand = _num(by["al.train"]["iterations/s"]), _num(by["hand loop"]["iterations/s"])
            ref, ratio = f"hand loop {hand:.0f} it/s", f"{ours / hand:.2f}×"
            if "keras fit" in by:
                keras = _num(by["keras fit"]["iterations/s"])
                ref += f"; Keras `fit` {keras:.0f} it/s"
                ratio += f" (Keras {keras / hand:.2f}×)"
            rows.append(("`al.train`, LSTM + attention classifier", f"{ours:.0f} it/s", ref, ratio))
    decoding = _table(secs, "decoding")
    if decoding:
        by = {r["decoder"]: r for r in decoding}
        stream = next((r for k, r in by.items() if k.startswith("attnlab `stream`")), None)
        recompute = next((r for k, r in by.items() if k.startswith("the network's full")), None)
        hand = next((r for k, r in by.items() if k.startswith("hand-written torch, prealloc")), None)
        if stream and recompute:
            rows.append(("decoding 512 tokens with `net.stream()`", stream["per token"] + "/token",
                         f"recomputing the prefix {recompute['per token']}/token",
                         f"{stream['vs recompute'].rstrip('×')}× faster"))
        if stream and hand:
            rows.append(("decoding step, `net.stream()`", stream["per token"] + "/token",
                         f"hand-written preallocated cache {hand['per token']}/token",
                         f"{_num(stream['per token']) / _num(hand['per token']):.2f}×"))
    gpu = _table(secs, "gpu", "Targets")
    for r in gpu or []:
        rows.append((f"GPU: {r['target']}", r["result"], "(see RESULTS.md, GPU)", r[""]))
    lines = ["| what | attnlab | reference | ratio |", "|---|---|---|---|"]
    lines += [f"| {' | '.join(r)} |" for r in rows]
    return "\n".join(lines)


def write_readme(readme: Path = README, results: Path = RESULTS) -> bool:
    """Replaces the table between the markers in README.md; False when the markers are missing."""
    text = readme.read_text()
    if BEGIN not in text or END not in text:
        return False
    table = benchmark_table(results.read_text())
    new = re.sub(re.escape(BEGIN) + ".*?" + re.escape(END),
                 lambda m: f"{BEGIN}\n{table}\n{END}", text, flags=re.S)
    readme.write_text(new)
    return True


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--write", action="store_true", help="update README.md between the markers")
    args = ap.parse_args(argv)
    if args.write:
        if not write_readme():
            print(f"README.md has no {BEGIN} … {END} markers: nothing written", file=sys.stderr)
            return 1
        print("README.md benchmark table written from benchmarks/RESULTS.md")
        return 0
    print(benchmark_table(RESULTS.read_text()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
