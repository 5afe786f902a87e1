"""plots="training-progress": a PNG of loss and metrics, training against validation, redrawn as
training goes (MATLAB's training-progress window, as a file any viewer refreshes).

Drawing uses matplotlib's object API on the Agg canvas (no pyplot, no GUI, no global state)
and is throttled: a redraw waits at least 2 s and ten times the last draw's duration, so the
picture never costs more than a few percent of training time.
"""
from __future__ import annotations

import io
import time
from pathlib import Path

from .checkpoint import atomic_write


def draw(info, path) -> str:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    it, val = info.iterations, info.validation
    names = [k for k in it if k not in ("iteration", "epoch", "learning_rate")]
    fig = Figure(figsize=(7, 2.6 * max(1, len(names))), dpi=100)
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(names) or 1, 1, squeeze=False)[:, 0]
    for ax, name in zip(axes, names or ["loss"]):
        x = it.get("iteration", [])
        y = it.get(name, [])
        pts = [(a, b) for a, b in zip(x, y) if b is not None]
        if pts:
            ax.plot(*zip(*pts), lw=0.8, color="tab:blue", alpha=0.45, label="training")
            sm = _smooth([b for _, b in pts])
            ax.plot([a for a, _ in pts], sm, lw=1.6, color="tab:blue", label="training (smoothed)")
        vp = [(a, b) for a, b in zip(val.get("iteration", []), val.get(name, [])) if b is not None]
        if vp:
            ax.plot(*zip(*vp), "o--", color="black", ms=3.5, lw=1, label="validation")
        ax.set_ylabel(name)
        ax.grid(alpha=0.3)
        for b in _epoch_ends(it):
            ax.axvline(b, color="gray", lw=0.6, alpha=0.35)
        ys = [b for _, b in pts if b == b]
        if name == "loss" and ys and min(ys) > 0 and max(ys) / min(ys) > 20:
            ax.set_yscale("log")                         # losses spanning decades
    axes[0].legend(loc="upper right", fontsize=8)
    axes[-1].set_xlabel("iteration")
    epochs = info.epochs.get("epoch", [])
    title = f"training progress: epoch {len(epochs)}, iteration {it['iteration'][-1] if it.get('iteration') else 0}"
    if info.stop_reason:
        title += f" ({info.stop_reason})"
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    atomic_write(Path(path), buf.getvalue())               # viewers never see half a file
    return str(path)


def _smooth(values):
    """Exponential moving average over about 1/20 of the run (2 to 25 iterations), so that
    short runs are not dragged behind their own progress."""
    alpha = 1 - 1 / min(25, max(2, len(values) // 20))
    out, s = [], None
    for v in values:
        s = v if s is None or s != s else alpha * s + (1 - alpha) * v
        out.append(s)
    return out


def _epoch_ends(it: dict) -> list:
    """Iterations where an epoch ends (drawn as faint lines when there are few epochs)."""
    ep, x = it.get("epoch", []), it.get("iteration", [])
    ends = [a for a, e, f in zip(x, ep, ep[1:]) if e != f]
    return ends if len(ends) <= 30 else []


class Plotter:
    """Redraws the picture at most every max(2 s, 10 × last draw time); `final` always draws."""

    def __init__(self, path):
        self.path = path
        self.next_time = 0.0

    def update(self, info, final: bool = False):
        now = time.perf_counter()
        if not final and now < self.next_time:
            return
        draw(info, self.path)
        took = time.perf_counter() - now
        self.next_time = time.perf_counter() + max(2.0, 10 * took)
