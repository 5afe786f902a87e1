"""Attention weights as heatmaps, one panel per head, with token labels."""
from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from attnlab.core.errors import ArgumentError

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def plot_attention(scores: Any, query_labels: Sequence | None = None,
                   key_labels: Sequence | None = None, heads: int | Sequence[int] | None = None,
                   path: str | os.PathLike | None = None, *, batch: int = 0, title: str | None = None,
                   cmap: str = "viridis", ncols: int | None = None, annotate: bool | None = None) -> Figure:
    """Heatmaps of attention weights, one per head: rows are queries, columns keys.

    Padded keys, whose weights are 0, show as the lowest colour.

    Parameters
    ----------
    scores : tensor or array
        The weights, B×heads×Tq×Tk (an attention layer's `scores` output, or
        ``al.attention(..., need_weights=True)[1]``), heads×Tq×Tk or Tq×Tk; of a batch, item
        `batch` is drawn.
    query_labels, key_labels : sequence, optional
        The tokens (any values, shown with `str`), Tq and Tk of them.
    heads : int or sequence of int, optional
        Which heads (default: all).
    path : str or os.PathLike, optional
        Save there (PNG, SVG, PDF by extension) and close the figure.
    batch : int
        The item of a batch to draw.
    title : str, optional
        The figure's title.
    cmap : str
        A matplotlib colour map.
    ncols : int, optional
        Panels per row.
    annotate : bool, optional
        Write each weight in its cell (default: when the map is small).

    Returns
    -------
    matplotlib.figure.Figure
    """
    w = _as_array(scores)
    if w.ndim == 4:
        if not 0 <= batch < w.shape[0]:
            raise ArgumentError(f"plot_attention: batch {batch} is outside the {w.shape[0]} "
                                "sequences of the scores.")
        w = w[batch]
    elif w.ndim == 2:
        w = w[None]
    elif w.ndim != 3:
        raise ArgumentError(f"plot_attention: scores must be B×heads×Tq×Tk, heads×Tq×Tk or Tq×Tk, "
                            f"received {w.ndim} dimensions ({'×'.join(map(str, w.shape))}).")
    n_heads, tq, tk = w.shape
    if heads is None:
        chosen = list(range(n_heads))
    else:
        chosen = [int(heads)] if isinstance(heads, (int, np.integer)) else list(heads)
        bad = [h for h in chosen if not isinstance(h, (int, np.integer)) or not 0 <= h < n_heads]
        if bad or not chosen:
            raise ArgumentError(f"plot_attention: heads {bad or heads!r} are not among the "
                                f"{n_heads} heads (0…{n_heads - 1}).")
    qlab = _labels(query_labels, tq, "query_labels", "Tq")
    klab = _labels(key_labels, tk, "key_labels", "Tk")

    import matplotlib
    if path is not None and matplotlib.get_backend() == "":
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(chosen)
    cols = ncols or min(n, 4 if tk <= 16 else 2 if tk <= 40 else 1)
    rows = math.ceil(n / cols)
    cell = 0.34 if max(tq, tk) <= 16 else max(0.08, 5.5 / max(tq, tk))
    label_room = 0.0
    if klab is not None or qlab is not None:
        longest = max((len(s) for s in (klab or []) + (qlab or [])), default=1)
        label_room = min(0.08 * longest + 0.2, 1.4)
    pw, ph = tk * cell + label_room + 0.4, tq * cell + label_room + 0.55
    fig, axes = plt.subplots(rows, cols, figsize=(cols * pw + 1.0, rows * ph + (0.4 if title else 0.1)),
                             squeeze=False, constrained_layout=True)
    vmax = float(max(w[chosen].max(), 1e-12))
    if annotate is None:
        annotate = tq * tk <= 144
    image = None
    for k, ax in enumerate(axes.flat):
        if k >= n:
            ax.axis("off")
            continue
        h = chosen[k]
        image = ax.imshow(w[h], cmap=cmap, vmin=0.0, vmax=vmax, aspect="equal",
                          interpolation="nearest")
        ax.set_title(f"head {h}" if n_heads > 1 else "attention", fontsize=10)
        ax.set_xlabel("key", fontsize=8)
        ax.set_ylabel("query", fontsize=8)
        _ticks(ax, klab, tk, "x")
        _ticks(ax, qlab, tq, "y")
        ax.tick_params(length=0)
        if annotate:
            for i in range(tq):
                for j in range(tk):
                    v = w[h, i, j]
                    if v < 0.005:                     # leave (near) zeros blank: less clutter
                        continue
                    ax.text(j, i, f"{v:.2f}".lstrip("0") if v < 1 else "1", ha="center",
                            va="center", fontsize=6,
                            color="black" if v > 0.6 * vmax else "white")
    if image is not None:                             # at least one head is drawn
        fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.8, label="weight")
    if title:
        fig.suptitle(title, fontsize=11)
    if path is not None:
        fig.savefig(path, dpi=130, facecolor="white")
        plt.close(fig)
    return fig


def _as_array(scores) -> np.ndarray:
    try:
        import torch
        if isinstance(scores, torch.Tensor):
            return scores.detach().float().cpu().numpy()
    except ImportError:                       # pragma: no cover - torch is a dependency
        pass
    w = np.asarray(scores, dtype=np.float64)
    if w.dtype == object:
        raise ArgumentError("plot_attention: scores must be numbers (a tensor or array)")
    return w


def _labels(labels, n, what, dim):
    if labels is None:
        return None
    labels = [str(s) for s in labels]
    if len(labels) != n:
        raise ArgumentError(f"plot_attention: {len(labels)} {what} for {n} positions ({dim} = {n}). "
                            f"Give one label per {'query' if dim == 'Tq' else 'key'}.")
    return labels


def _ticks(ax, labels, n, axis):
    step = max(1, math.ceil(n / 40))
    pos = list(range(0, n, step))
    names = [labels[i] for i in pos] if labels is not None else [str(i) for i in pos]
    if axis == "x":
        ax.set_xticks(pos)
        long = labels is not None and max((len(s) for s in names), default=0) > 2
        ax.set_xticklabels(names, fontsize=7, rotation=90 if long else 0)
    else:
        ax.set_yticks(pos)
        ax.set_yticklabels(names, fontsize=7)
