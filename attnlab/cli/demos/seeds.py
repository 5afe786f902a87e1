"""`attnlab demo NAME --seed S --seeds N`: one demo run per training seed, and their summary.

The data splits stay fixed (they belong to the demo, so every seed meets the same test set and
the same baseline); the seed drives initialisation, batch order, dropout and augmentation.
With N > 1 each run writes its own folder `OUT/seed-S/`, and `OUT/metrics.json` holds every
run's metrics with the mean and sample standard deviation of each number."""
from __future__ import annotations

import importlib
import json
import os
import platform
from pathlib import Path

import numpy as np

from attnlab.core.errors import ArgumentError

# what a summary reports first, per demo: the figure the README's table shows
HEADLINE = {"digits": "test_accuracy", "vowels": "test_accuracy", "forecast": "test_rmse",
            "roman": "test_exact_match"}


def machine() -> dict:
    """Where a run happened: enough to compare times between machines."""
    import torch
    from attnlab.cli.demos._common import demo_thread_count
    try:
        load = os.getloadavg()[0]
    except OSError:                     # not every platform has a load average
        load = None
    return {"platform": platform.platform(), "processor": _cpu_name(),
            "cpus": os.cpu_count(), "torch": torch.__version__,
            "torch_threads": torch.get_num_threads(),
            "demo_threads": demo_thread_count(),
            "load_average_1min_at_start": load,
            "nice": os.nice(0) if hasattr(os, "nice") else None}


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def check(seed, seeds) -> None:
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or seed < 0):
        raise ArgumentError(f"argument 'seed': expected a non-negative integer, received {seed!r}. "
                            "Give e.g. --seed 0.")
    if not isinstance(seeds, int) or isinstance(seeds, bool) or seeds < 1:
        raise ArgumentError(f"argument 'seeds': expected a positive integer (how many seeds to "
                            f"run), received {seeds!r}. Give e.g. --seeds 3.")


def run(module_name: str, name: str, out: Path, epochs=None, seed=None, seeds: int = 1) -> dict:
    """Runs demo `name` (module `module_name`) for seeds seed, seed+1, …, seed+seeds−1."""
    check(seed, seeds)
    module = importlib.import_module(module_name)
    first = getattr(module, "SEED", 0) if seed is None else seed
    if seeds == 1:
        return _one(module, out, epochs, first)
    runs = [_one(module, Path(out) / f"seed-{s}", epochs, s) for s in range(first, first + seeds)]
    summary = summarize(name, runs)
    Path(out).mkdir(parents=True, exist_ok=True)
    (Path(out) / "metrics.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(describe(summary))
    print(f"wrote the summary of {seeds} seeds to {Path(out) / 'metrics.json'}")
    return summary


def _one(module, out, epochs, seed) -> dict:
    info = machine()
    metrics = module.run(Path(out), epochs=epochs, seed=seed)
    if isinstance(metrics, dict):
        path = Path(out) / "metrics.json"
        if path.is_file():                         # add seed and machine to what the demo wrote
            written = json.loads(path.read_text(encoding="utf-8"))
            written.update(seed=seed, machine=info)
            path.write_text(json.dumps(written, indent=2) + "\n", encoding="utf-8")
            metrics = written
    return metrics


def summarize(name: str, runs: list[dict]) -> dict:
    """Mean and sample standard deviation (ddof 1) of every number the runs share."""
    keys = [k for k, v in runs[0].items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "seed"
            and all(isinstance(r.get(k), (int, float)) for r in runs)]
    mean = {k: float(np.mean([r[k] for r in runs])) for k in keys}
    sd = {k: float(np.std([r[k] for r in runs], ddof=1)) if len(runs) > 1 else 0.0 for k in keys}
    return {"demo": name, "headline": HEADLINE.get(name), "seeds": [r.get("seed") for r in runs],
            "mean": mean, "sd": sd, "machine": runs[0].get("machine"),
            "baseline": runs[0].get("baseline"), "runs": runs}


def describe(summary: dict) -> str:
    k = summary["headline"]
    if k is None or k not in summary["mean"]:
        return f"{summary['demo']}: {len(summary['seeds'])} seeds"
    m, s = summary["mean"][k], summary["sd"][k]
    shown = f"{m:.3f} ± {s:.3f} ppm" if k.endswith("rmse") else f"{100 * m:.2f} ± {100 * s:.2f} %"
    return (f"{summary['demo']}: {k.replace('_', ' ')} {shown} (mean ± sd over seeds "
            f"{', '.join(map(str, summary['seeds']))})")
