"""Shared timing and reporting for the benchmark scripts (not tests: nothing here asserts)."""
from __future__ import annotations

import platform
import re
import statistics
import time
from pathlib import Path

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
