"""What the demos share: the output folder, metrics, saving, pictures and attention scores."""
from __future__ import annotations

import importlib.util
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from attnlab.core.errors import ArgumentError


# the data extra (pip install 'attnlab[data]'): the packages each demo's data or baseline comes from
DATA_EXTRA = "pip install 'attnlab[data]'"
DATA_PACKAGES = {"sklearn": "scikit-learn", "sktime": "sktime", "statsmodels": "statsmodels"}
DEMO_PACKAGES = {"digits": ("sklearn",), "vowels": ("sklearn", "sktime"), "forecast": ("statsmodels",)}


def missing_data_packages(demo: str) -> list[str]:
    """The data-extra modules demo `demo` needs that are not installed (found without importing)."""
    missing = []
    for module in DEMO_PACKAGES.get(demo, ()):
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):        # a broken or half-removed install
            found = False
        if not found:
            missing.append(module)
    return missing


def data_extra_message(demo: str, missing) -> str:
    names = ", ".join(DATA_PACKAGES.get(m, m) for m in missing) or "a package of the data extra"
    return (f"demo '{demo}' needs {names}, which is not installed: install attnlab's data extra "
            f"with {DATA_EXTRA}")


class Stopwatch:
    def __init__(self):
        self.t0 = time.perf_counter()
        self.cpu0 = time.process_time()

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.t0

    @property
    def cpu_seconds(self) -> float:
        return time.process_time() - self.cpu0


def prepare(out) -> Path:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    import matplotlib
    if os.environ.get("MPLBACKEND") is None:
        matplotlib.use("Agg")
    return out


def write_metrics(out: Path, metrics: dict) -> Path:
    path = Path(out) / "metrics.json"
    path.write_text(json.dumps(metrics, indent=2, default=_jsonable) + "\n", encoding="utf-8")
    return path


def _jsonable(v):
    if isinstance(v, (np.generic,)):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, torch.Tensor):
        return v.tolist()
    return str(v)


def save_outputs(net, out: Path, info=None, plot_kw=None) -> list[str]:
    """model.attnlab, network.png and (from the TrainingInfo) training-progress.png."""
    written = []
    net.save(out / "model.attnlab")
    written.append("model.attnlab")
    net.plot(out / "network.png", **(plot_kw or {}))
    written.append("network.png")
    if info is not None:
        info.plot(out / "training-progress.png")
        written.append("training-progress.png")
    return written


def with_scores(build, net, layer: str, **build_kw):
    """A twin of `net` (made by `build(**build_kw, scores=True)`) whose attention layer `layer`
    also outputs its weights, holding `net`'s trained weights: the trained network keeps a
    single output, and the twin shows what it attends to."""
    twin = build(**build_kw, scores=True)
    twin.initialize()
    twin.load_state_dict(net.state_dict())
    twin.eval()
    return twin


def options_for(out: Path, epochs: int, verbose: bool = True, **kw):
    import attnlab as al
    return al.TrainingOptions(max_epochs=epochs, plots="training-progress",
                              plots_file=str(out / "training-progress.png"),
                              verbose=verbose, verbose_frequency=kw.pop("verbose_frequency", 100),
                              **kw)


def percent(x: float) -> str:
    return f"{100 * x:.2f} %"


class demo_threads:
    """Runs a demo with `n` torch threads (ATTNLAB_DEMO_THREADS, default 1) and restores the
    previous count. The demo networks are small: their operations are too short to gain from
    intra-op threads, and on a busy 2-core machine one thread ran them several times faster."""

    def __init__(self, n: int | None = None):
        self.n = n or demo_thread_count()

    def __enter__(self):
        self.before = torch.get_num_threads()
        torch.set_num_threads(self.n)
        return self

    def __exit__(self, *exc):
        torch.set_num_threads(self.before)
        return False


def classification_metrics(net, pred, data, base, n_train, n_validation, val_acc, epochs,
                           train_s, base_s) -> dict:
    """metrics.json of a classification demo: the model beside its baseline on the test split."""
    pred = np.asarray(pred)
    return {"test_accuracy": float(np.mean(pred == data.y_test)),
            "baseline_accuracy": base["accuracy"], "baseline": base["name"],
            "validation_accuracy": val_acc,
            "test_errors": int(np.sum(pred != data.y_test)),
            "baseline_errors": int(np.sum(base["predictions"] != data.y_test)),
            "n_train": n_train, "n_validation": n_validation, "n_test": len(data.y_test),
            "epochs": epochs, "train_seconds": round(train_s, 1),
            "baseline_seconds": round(base_s, 2),
            "learnables": net.analyze().total_learnables}


def classification_rows(metrics: dict) -> list[dict]:
    """The report's table for a classification demo."""
    return [{"model": "attention network (attnlab)", "test accuracy": percent(metrics["test_accuracy"]),
             "errors": metrics["test_errors"], "ours": True},
            {"model": metrics["baseline"], "test accuracy": percent(metrics["baseline_accuracy"]),
             "errors": metrics["baseline_errors"]}]


def ensemble_scores(nets, X) -> torch.Tensor:
    """The mean of the members' class probabilities (softmax of each network's scores)."""
    probabilities = []
    for net in nets:
        s = net.predict(X)
        if isinstance(s, list):
            s = torch.stack([t.reshape(-1) for t in s])
        probabilities.append(torch.softmax(s.float(), dim=-1))
    return torch.stack(probabilities).mean(0)


def ensemble_classify(nets, X) -> np.ndarray:
    """Class labels by the members' mean probability, in the label values seen in training."""
    return most_probable(nets, ensemble_scores(nets, X))


def most_probable(nets, probabilities: torch.Tensor) -> np.ndarray:
    """The label values seen in training (by `nets`) of each row's most probable class."""
    idx = probabilities.argmax(-1).numpy()
    labels = nets[0].metadata.get("class_labels")
    return np.asarray(labels)[idx] if labels is not None else idx


def member_seeds(seed: int, members: int) -> list[int]:
    """The training seeds of an ensemble's members: demo seeds 0, 1, 2 never share a member."""
    return [seed * members + k for k in range(members)]


def train_members(train, members: int, seed: int, workers: int = 1):
    """`members` networks from `train(k, member_seed)` → (net, info, …); returns (nets, infos).
    With `workers` > 1 the members train in that many processes at once (one torch thread
    each), so `train` must pickle (a module-level function or a partial of one); each member
    depends only on its seed, so the networks are those that one process with one thread
    trains."""
    seeds = member_seeds(seed, members)
    workers = max(1, min(workers, members))
    if workers == 1:
        got = [train(k, s) for k, s in enumerate(seeds)]
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor
        # spawn, not fork: a forked child inherits the parent's threads' locks half-held
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                 initializer=torch.set_num_threads, initargs=(1,)) as pool:
            got = list(pool.map(train, range(members), seeds))
    return [g[0] for g in got], [g[1] for g in got]


def _env_count(name: str, what: str, default: int, fix: str) -> int:
    """A whole number ≥ 1 of `what` from the environment variable `name`, `default` if unset."""
    text = os.environ.get(name)
    if text is None:
        return default
    if not text.isdigit() or int(text) < 1:
        raise ArgumentError(f"{name}: expected a whole number ≥ 1 of {what}, received {text!r}. "
                            f"{fix}")
    return int(text)


def demo_thread_count() -> int:
    """Torch threads a demo process runs: ATTNLAB_DEMO_THREADS, by default 1."""
    return _env_count("ATTNLAB_DEMO_THREADS", "torch threads", 1,
                      "Unset it for one thread a process (the demos' default), or set e.g. 2.")


def demo_workers() -> int:
    """Processes that train an ensemble's members at once: ATTNLAB_DEMO_WORKERS, by default
    the cores this process may use, at most 2 (the demos' budget is set on 2 cores)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return _env_count("ATTNLAB_DEMO_WORKERS", "processes", max(1, min(2, cores or 1)),
                      "Unset it to use up to 2 cores, or set it to 1 to train the members one "
                      "after another.")


def save_members(nets, out: Path) -> list[str]:
    """The ensemble's other members beside model.attnlab (the first): model-2.attnlab, …"""
    names = []
    for k, net in enumerate(nets[1:], start=2):
        net.save(Path(out) / f"model-{k}.attnlab")
        names.append(f"model-{k}.attnlab")
    return names


def save_sample(out: Path, inputs: dict, labels: dict | None = None) -> str:
    """sample.npz beside model.attnlab: one test item as the network reads it, an array per
    input name (no batch axis), and for inputs of tokens their labels (`labels:<input>`, shown
    on the attention axes). `attnlab view DIR` draws the attention of model.attnlab for it."""
    arrays: dict[str, Any] = {str(name): np.asarray(x) for name, x in inputs.items()}
    for name, tokens in (labels or {}).items():
        arrays[f"labels:{name}"] = np.array([str(t) for t in tokens])
    np.savez(Path(out) / "sample.npz", **arrays)
    return "sample.npz"
