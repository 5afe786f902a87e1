"""`make demo-table`: the README's demo table and benchmark table, written from measurements.

    python tools/demo_table.py [--runs demo-out] [--readme README.md]

With `--runs DIR`, the summaries that `attnlab demo NAME --seeds 3 --out DIR` wrote
(`DIR/NAME/metrics.json`) are copied into `docs/demo-results.json` (the record the README's
figures come from, kept in the repository); then both tables are rewritten between their
markers in the README: the demo table from `docs/demo-results.json`, the benchmark table from
`benchmarks/RESULTS.md`. Nothing in either table is typed by hand, and a test checks that the
README holds exactly what this writes."""
from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from attnlab.core.errors import DataError, FormatError

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "demo-results.json"
BENCH = ROOT / "benchmarks" / "RESULTS.md"
README = ROOT / "README.md"
DEMOS = ("digits", "vowels", "forecast", "roman")
AIMS = {"digits": "≥ 99.4 %", "vowels": "≥ 99.5 %", "forecast": "≤ 0.45 ppm",
        "roman": "≥ 99.6 %"}
LABELS = {"digits": "digits, 360 test images", "vowels": "Japanese Vowels, 370 test sequences",
          "forecast": "CO₂ 2001, 52 weeks closed loop", "roman": "Roman numerals, 500 test numbers"}


# ------------------------------------------------------------------------ demo table ---

def collect(runs: Path) -> dict:
    """The seed summaries under `runs` (without the per-run lists of wrong answers); a single
    run's metrics.json (`make demo`) is no summary and is left out, with a note."""
    found = {}
    for name in DEMOS:
        path = Path(runs) / name / "metrics.json"
        if not path.is_file():
            continue
        summary = json.loads(path.read_text(encoding="utf-8"))
        if "runs" not in summary:
            print(f"left out {path}: a single run, not a summary over seeds "
                  f"(attnlab demo {name} --seeds 3 --out {runs} writes one)")
            continue
        for r in summary["runs"]:
            r.pop("errors", None)
        found[name] = summary
    return found


def _pm(summary, key, scale=100.0, digits=2, unit=" %"):
    m, s = summary["mean"][key], summary["sd"][key]
    return f"{scale * m:.{digits}f} ± {scale * s:.{digits}f}{unit}"


def versus(name: str, r: dict) -> str:
    """The mean's margin over the best baseline, and whether it exceeds one sd of the seeds."""
    return _margin(name, r["mean"], r["sd"])


def versus_run(name: str, run: dict) -> str:
    """One run's margin over the best baseline of the same run."""
    return _margin(name, run, None)


def _margin(name: str, m: dict, sd: dict | None) -> str:
    if name in ("digits", "vowels"):
        diff, unit = 100 * (m["test_accuracy"] - m["baseline_accuracy"]), " points"
        spread = None if sd is None else 100 * sd["test_accuracy"]
    elif name == "forecast":
        best = min(m[k] for k in ("holt_winters_rmse", "seasonal_naive_drift_rmse",
                                  "seasonal_naive_rmse"))
        diff, unit = best - m["test_rmse"], " ppm"
        spread = None if sd is None else sd["test_rmse"]
    else:
        return "—"
    digits = 3 if name == "forecast" else 2
    if round(abs(diff), digits) == 0:            # a tie, whatever the float rounding left
        return "level (no better, no worse)"
    word = "better" if diff > 0 else "worse"
    within = " (less than one sd)" if spread is not None and abs(diff) < spread else ""
    return f"{word} by {abs(diff):.{digits}f}{unit}{within}"


def first_run(r: dict) -> dict:
    """The run of the first seed (seed 0: what `attnlab demo NAME` gives, and `make demo` for
    the digits)."""
    first = r["seeds"][0]
    return next(x for x in r["runs"] if x.get("seed") == first)


def errors(n: float) -> str:
    """A count of wrong answers in words: "1 error", "3 errors", "0 errors"."""
    return f"{n:g} error" + ("" if n == 1 else "s")


def _figure(name: str, m: dict) -> str:
    """A run's (or the mean's) test figure in the table's words."""
    if name in ("digits", "vowels"):
        return f"{100 * m['test_accuracy']:.2f} % ({errors(m['test_errors'])})"
    if name == "forecast":
        return f"RMSE {m['test_rmse']:.3f} ppm"
    return f"{100 * m['test_exact_match']:.2f} % exact ({errors(m['test_errors'])})"


def _meets(name: str, value: float) -> bool:
    """Whether a figure meets the demo's aim (AIMS, in the same units as the table)."""
    bound = float(AIMS[name].split()[1])
    return value <= bound if AIMS[name].startswith("≤") else round(100 * value, 2) >= bound


def _headline(name: str, m: dict) -> float:
    return m["test_rmse"] if name == "forecast" else m[
        "test_exact_match" if name == "roman" else "test_accuracy"]


def _busy(results: dict) -> float:
    """The 1-minute load at a run's start above which other jobs shared the machine: the demos
    run one after another, so each starts at about the load the run before it left (its
    processes)."""
    workers = [int(r.get("workers") or 1) for x in results.values() for r in x["runs"]]
    return 0.5 + max(workers, default=1)


def _and(names: list[str]) -> str:
    """"a", "a and b", "a, b and c"."""
    return " and ".join(n for n in [", ".join(names[:-1]), names[-1]] if n) if names else ""


def shared(results: dict) -> list[str]:
    """The demos with a run that started while other jobs shared the machine."""
    busy = _busy(results)
    return [name for name in DEMOS if name in results
            if any(((r.get("machine") or {}).get("load_average_1min_at_start") or 0) >= busy
                   for r in results[name]["runs"])]


def demo_table(results: dict) -> str:
    firsts = sorted({first_run(r)["seed"] for r in results.values()})
    busy_demos = shared(results)
    alone = f"seed {'/'.join(map(str, firsts))} alone"
    lines = [f"| demo | {alone}: what `attnlab demo NAME` (and `make demo`: digits) gives | "
             "mean ± sd over the seeds | aim | classical baseline, same split and run | "
             "against the best baseline | time per run |",
             "|---|---|---|---|---|---|---|"]
    for name in DEMOS:
        if name not in results:
            continue
        r = results[name]
        n, one = len(r["seeds"]), first_run(r)
        if name in ("digits", "vowels"):
            ours = f"{_pm(r, 'test_accuracy')} ({r['mean']['test_errors']:.1f} errors; {n} seeds)"
            base = (f"{r['baseline']} {100 * r['mean']['baseline_accuracy']:.2f} % "
                    f"({errors(round(r['mean']['baseline_errors']))})")
        elif name == "forecast":
            ours = f"RMSE {_pm(r, 'test_rmse', 1.0, 3, ' ppm')} ({n} seeds)"
            base = (f"Holt–Winters {r['mean']['holt_winters_rmse']:.3f}, seasonal naive + drift "
                    f"{r['mean']['seasonal_naive_drift_rmse']:.3f}, seasonal naive "
                    f"{r['mean']['seasonal_naive_rmse']:.3f}")
        else:
            ours = f"{_pm(r, 'test_exact_match')} exact ({r['mean']['test_errors']:.1f} errors; {n} seeds)"
            base = "— (a rule-based converter is exact by construction)"
        seed = f"seed {one['seed']}"
        met = {True: "met", False: "not met"}
        aim = (f"{AIMS[name]} (mean: {met[_meets(name, _headline(name, r['mean']))]}; "
               f"{seed}: {met[_meets(name, _headline(name, one))]})")
        against = versus(name, r)
        if against != "—":
            against = f"{seed}: {versus_run(name, one)}; mean: {against}"
        time = f"{r['mean']['seconds']:.0f} ± {r['sd']['seconds']:.0f} s" + (
            " (a shared machine)" if name in busy_demos else "")
        lines.append(f"| {LABELS[name]} | {_figure(name, one)} | {ours} | {aim} | {base} "
                     f"| {against} | {time} |")
    m = next(iter(results.values())).get("machine") or {}
    machines = [r.get("machine") or {} for x in results.values() for r in x["runs"]]
    loads: list[float] = [v for v in (mm.get("load_average_1min_at_start") for mm in machines)
                          if v is not None]
    nices: list[int] = [v for v in (mm.get("nice") for mm in machines) if v is not None]
    # demos whose ensemble members train in several processes at once (metrics.json "workers")
    workers = {name: max(int(r.get("workers") or 1) for r in x["runs"]) for name, x in results.items()}
    parallel = [f"the {' and '.join(n for n, v in workers.items() if v == w)} members in {w} "
                "processes at once" for w in sorted({v for v in workers.values() if v > 1})]
    counts = sorted({mm["demo_threads"] for mm in machines if "demo_threads" in mm})
    threads = "/".join(map(str, counts)) if counts else None
    where = (f"{threads} torch thread(s) a process" + (f" ({', '.join(parallel)})" if parallel else "")
             if threads is not None else f"{m.get('torch_threads', '?')} torch thread(s)")
    lines += ["", f"Measured by {', '.join(f'`attnlab demo {d} --seeds 3`' for d in DEMOS if d in results)} "
                  "(what `make demos` runs) "
                  f"on {m.get('processor', '?')}, {m.get('cpus', '?')} CPUs, "
                  f"{where}, torch {m.get('torch', '?')}"
                  + (f", 1-minute load average {min(loads):.1f}–{max(loads):.1f} at the runs' starts"
                     if loads else "")
                  + (f" (other jobs shared the machine during the {_and(busy_demos)} "
                     "runs: their times are not a quiet machine's)" if busy_demos else "")
                  + (f", the runs at nice {max(nices)}" if nices and max(nices) > 0 else "")
                  + "; the table is written by `make demo-table` from `docs/demo-results.json`."]
    return "\n".join(lines)


# ------------------------------------------------------------------- benchmark table ---

def _section(text: str, name: str) -> str:
    m = re.search(rf"<!-- {name}:begin -->(.*?)<!-- {name}:end -->", text, flags=re.S)
    if not m:
        raise FormatError(f"benchmarks/RESULTS.md: no '{name}' section (<!-- {name}:begin --> … "
                          f"<!-- {name}:end -->). Run 'make bench' to write it.")
    return m.group(1)


def tables(text: str) -> list[list[dict]]:
    """Every markdown table in `text`, as lists of {header: cell} rows."""
    found: list[list[dict]] = []
    rows: list[dict] = []
    head: list[str] | None = None
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if head is None:
                head, rows = cells, []
            elif not set("".join(cells)) <= set("-: "):
                rows.append(dict(zip(head, cells)))
        elif head is not None:
            found.append(rows)
            head, rows = None, []
    return found


def _row(rows, col, start, optional=False):
    for r in rows:
        if r.get(col, "").startswith(start):
            return r
    if optional:
        return None
    raise FormatError(f"benchmarks/RESULTS.md: no row whose '{col}' starts with {start!r}. "
                      "Run 'make bench' to rewrite it.")


def _x(ratio: str) -> str:
    return f"{float(ratio.rstrip('×')):.2f}×"


def bench_table(text: str) -> str:
    over = tables(_section(text, "overhead"))[0]
    att = _section(text, "attention")
    step, infer, _core, memory, longest = tables(att)[1:6]
    dec = tables(_section(text, "decoding"))[0]
    train = tables(_section(text, "training"))[0]
    tiny, seed1 = _row(over, "network", "24 tiny"), _row(over, "network", "seed-1")
    s512 = next(r for r in step if r["B"] == "8" and r["T"] == "512")
    inf = _row(infer, "context", "torch.inference_mode")
    ours_m, naive_m = _row(memory, "attention", "attnlab"), _row(memory, "attention", "textbook")
    ours_t, naive_t = _row(longest, "attention", "attnlab"), _row(longest, "attention", "textbook")
    # Keras is the optional `bench` extra: a run without it has no Keras row, and the table says so
    tr, hand, keras = (_row(train, "trainer", "al.train"), _row(train, "trainer", "hand loop"),
                       _row(train, "trainer", "keras", optional=True))
    stream, recompute = _row(dec, "decoder", "attnlab `stream`"), _row(dec, "decoder", "the network")
    by_hand = _row(dec, "decoder", "hand-written torch, preallocated")
    per_token = lambda r: float(r["per token"].split()[0])
    mib = lambda s: int(re.sub(r"[^0-9]", "", s))
    rate = "rate / hand loop's"
    rows = [
        ("graph overhead, 24 tiny layers, forward + backward", tiny["attnlab"],
         f"hand-written module {tiny['hand-written torch']}", _x(tiny["ratio"])),
        ("seed-1 network, forward + backward", seed1["attnlab"],
         f"hand-written module {seed1['hand-written torch']}", _x(seed1["ratio"])),
        ("SelfAttention training step, B8 T512 E256 H8", f"{s512['attnlab SelfAttention']} ms",
         f"4 × `nn.Linear` + SDPA by hand {s512['hand-written (4 Linear + SDPA)']} ms",
         _x(s512["vs hand"])),
        ("SelfAttention training step, B8 T512 E256 H8", f"{s512['attnlab SelfAttention']} ms",
         f"`nn.MultiheadAttention` {s512['nn.MultiheadAttention']} ms", _x(s512["vs MHA"])),
        ("SelfAttention inference, T2048", f"{float(inf['attnlab SelfAttention (eval)']):.0f} ms",
         f"`nn.MultiheadAttention` fast path {float(inf['nn.MultiheadAttention (eval)']):.0f} ms",
         f"{inf['speed-up'].rstrip('×')}× faster"),
        ("peak memory of a training step, T8192", ours_m["peak extra memory"],
         f"naive softmax(QKᵀ)V {naive_m['peak extra memory']}",
         f"{mib(ours_m['peak extra memory']) / mib(naive_m['peak extra memory']):.3f}×"),
        ("longest trainable T within 8 GiB", f"{int(ours_t['largest T']):,}".replace(",", " "),
         f"naive attention {int(naive_t['largest T']):,}".replace(",", " "),
         f"{int(ours_t['largest T']) // int(naive_t['largest T'])}× longer"),
        ("`al.train`, LSTM + attention classifier", f"{float(tr['iterations/s']):.0f} it/s",
         f"hand loop {float(hand['iterations/s']):.0f} it/s; " + (
             f"Keras `fit` {float(keras['iterations/s']):.0f} it/s" if keras
             else "Keras not measured (not installed)"),
         f"{float(tr[rate]):.2f}×" + (f" (Keras {float(keras[rate]):.2f}×)" if keras else "")),
        ("decoding 512 tokens with `net.stream()`", f"{per_token(stream):.2f} ms/token",
         f"recomputing the prefix {per_token(recompute):.1f} ms/token",
         f"{float(stream['vs recompute'].rstrip('×')):.0f}× faster"),
        ("decoding 512 tokens with `net.stream()`", f"{per_token(stream):.3f} ms/token",
         f"a hand-written preallocated cache {per_token(by_hand):.3f} ms/token",
         f"{per_token(stream) / per_token(by_hand):.2f}×"),
    ]
    lines = ["| what | attnlab | reference | ratio |", "|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    return "\n".join(lines)


# ------------------------------------------------------------------------- the README ---

def replace_block(text: str, name: str, body: str) -> str:
    pattern = rf"(<!-- {name}:begin[^>]*-->\n)(.*?)(<!-- {name}:end -->)"
    if not re.search(pattern, text, flags=re.S):
        raise FormatError(f"README.md: no '{name}' block (<!-- {name}:begin … --> … "
                          f"<!-- {name}:end -->) to write the table into.")
    return re.sub(pattern, lambda m: m.group(1) + body + "\n" + m.group(3), text, count=1, flags=re.S)


def render(readme: str, results: dict, bench: str) -> str:
    readme = replace_block(readme, "demo-table", demo_table(results))
    return replace_block(readme, "bench-table", bench_table(bench))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python tools/demo_table.py", description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=Path, default=None,
                    help="folder of 'attnlab demo NAME --seeds 3 --out DIR' runs to record first")
    ap.add_argument("--readme", type=Path, default=README)
    args = ap.parse_args(argv)
    if args.runs is not None:
        recorded = json.loads(RESULTS.read_text(encoding="utf-8")) if RESULTS.is_file() else {}
        found = collect(args.runs)
        recorded.update(found)                        # demos not rerun keep their record
        RESULTS.write_text(json.dumps(recorded, indent=1, ensure_ascii=False) + "\n",
                           encoding="utf-8")
        print(f"recorded {', '.join(sorted(found)) or 'nothing new'} in {RESULTS}")
    if not RESULTS.is_file():
        raise DataError(f"{RESULTS} is missing: run 'make demos' (attnlab demo NAME --seeds 3 "
                        "--out demo-out for each demo, then this with --runs demo-out).")
    results = json.loads(RESULTS.read_text(encoding="utf-8"))
    text = render(args.readme.read_text(encoding="utf-8"), results,
                  BENCH.read_text(encoding="utf-8"))
    args.readme.write_text(text, encoding="utf-8")
    print(f"wrote the demo table and the benchmark table into {args.readme}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
