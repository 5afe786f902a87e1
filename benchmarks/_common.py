"""Shared timing and reporting for the benchmark scripts (not tests: nothing here asserts)."""
from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import time
from pathlib import Path
from typing import Any, Callable

import torch

RESULTS = Path(__file__).with_name("RESULTS.md")


def interleaved(fns: dict, iters: int, repeats: int, warmup: int = 3) -> dict[str, float]:
    """Median seconds per call of each function, timed in alternation so that drift in the
    machine's speed hits every contender alike."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    samples = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(iters):
                fn()
            samples[k].append((time.perf_counter() - t0) / iters)
    return {k: statistics.median(v) for k, v in samples.items()}


def interleaved_samples(fns: dict, iters: int, repeats: int, warmup: int = 1,
                        sync=None) -> dict[str, list[float]]:
    """Seconds per call of each function in each of `repeats` rounds, the contenders timed in
    alternation within a round (so that load from other processes hits each alike); `sync`
    (e.g. torch.cuda.synchronize) runs before each clock read."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    samples: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            if sync:
                sync()
            t0 = time.perf_counter()
            for _ in range(iters):
                fn()
            if sync:
                sync()
            samples[k].append((time.perf_counter() - t0) / iters)
    return samples


def ratio_spread(slow: list[float], fast: list[float]) -> tuple[float, float, float]:
    """(median, lowest, highest) of the per-round ratios slow[i] / fast[i]: a round's two
    contenders ran back to back, so their ratio is steadier than either time under load."""
    r = sorted(a / b for a, b in zip(slow, fast))
    return statistics.median(r), r[0], r[-1]


def ratio_cells(slow: list[float], fast: list[float]) -> tuple[str, str]:
    """The two ratio cells of a results table: the per-round ratio with its range, "1.09×
    (1.04–1.10)", and the ratio of the median times, "1.08×"."""
    med, lo, hi = ratio_spread(slow, fast)
    return (f"{med:.2f}× ({lo:.2f}–{hi:.2f})",
            f"{statistics.median(slow) / statistics.median(fast):.2f}×")


def load_average() -> float | None:
    """The 1-minute load average (None where the system does not say)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def load_note(before: float | None, after: float | None) -> str:
    """A sentence saying how busy the machine was while a benchmark ran."""
    if before is None or after is None:
        return "Load during the run not known."
    cpus = os.cpu_count() or 1
    lo, hi = sorted((before, after))
    busy = hi > 0.5 * cpus
    return (f"Measured {'under load' if busy else 'on a quiet machine'}: 1-minute load "
            f"average {lo:.1f}–{hi:.1f} on {cpus} CPUs"
            + (" (other processes shared the cores: times are noisy, so the table gives "
               "medians of interleaved rounds and the spread of their ratios)." if busy
               else "."))


def machine() -> str:
    return (f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, "
            f"torch {torch.__version__}, Python {platform.python_version()}")


def write_section(name: str, text: str) -> None:
    """Replaces the section between `<!-- name:begin -->` and `<!-- name:end -->` in RESULTS.md."""
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    block = f"{begin}\n{text.rstrip()}\n{end}"
    old = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n\nWritten by `make bench`.\n"
    if begin in old:
        new = re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda m: block, old, flags=re.S)
    else:
        new = old.rstrip() + "\n\n" + block + "\n"
    RESULTS.write_text(new)


def bench_main(name: str, doc: str, measure: Callable[[bool, int], Any],
               report: Callable[..., str], rounds: int, argv: list[str] | None = None) -> Any:
    """A benchmark's command line: `--smoke` (a tiny model, one round; writes nothing),
    `--rounds`, `--threads`. Runs `measure(smoke, rounds)`, prints `report(result, load before,
    load after, rounds, smoke)` and writes it as section `name` of RESULTS.md; returns the
    result, for the smoke tests."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--smoke", action="store_true", help="a tiny model, one round; writes nothing")
    ap.add_argument("--rounds", type=int, default=rounds)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args, _ = ap.parse_known_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    rounds = 1 if args.smoke else args.rounds
    before = load_average()
    result = measure(args.smoke, rounds)
    text = report(result, before, load_average(), rounds, args.smoke)
    print(text)
    if not args.smoke:
        write_section(name, text)
    return result
