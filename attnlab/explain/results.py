"""What the explain functions return: the data first, each with `.plot()` (matplotlib,
imported only there, returning the Figure), its axes labelled as the input's kind says: tokens,
time steps, image patches or pixels."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional, Sequence

from torch import Tensor

from attnlab.core.errors import ArgumentError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

KINDS = ("tokens", "sequence", "image", "features")


def _item(values: Tensor, batch: int, what: str) -> Tensor:
    if not 0 <= batch < values.shape[0]:
        raise ArgumentError(f"{what}.plot: batch {batch} is outside the {values.shape[0]} "
                            f"items. Give 0 … {values.shape[0] - 1}.")
    return values[batch].detach().float().cpu()


def _figure(width: float, height: float):
    import matplotlib.pyplot as plt
    return plt.subplots(figsize=(width, height))


def position_labels(kind: str, n: int, labels: Optional[Sequence] = None,
                    batch: int = 0) -> list[str]:
    """One label per position: the given ones (one list per batch item: item `batch`'s),
    else `t0 …` (time steps), `p0 …` (patches) or the index."""
    if labels is not None and batch < len(labels) and len(labels[batch]) == n:
        return [str(s) for s in labels[batch]]
    stem = {"sequence": "t", "image": "p"}.get(kind, "")
    return [f"{stem}{i}" for i in range(n)]


def _heat_map(values: Tensor, cols: list[str], rows: list[str], size: tuple[float, float],
              bar: str, **style):
    """The figure of a heat map of `values` (rows × cols), its ticks labelled, a colour bar
    (labelled `bar`): what every explanation's matrix is drawn as."""
    fig, ax = _figure(*size)
    im = ax.imshow(values.numpy(), **style)
    fig.colorbar(im, ax=ax, **({"label": bar} if bar else {}))
    _ticks(ax, cols, "x")
    _ticks(ax, rows, "y")
    return fig, ax


def _ticks(ax, labels: list[str], axis: str) -> None:
    step = max(1, len(labels) // 40 + (len(labels) % 40 > 0))
    pos = list(range(0, len(labels), step))
    if axis == "x":
        ax.set_xticks(pos)
        ax.set_xticklabels([labels[i] for i in pos], fontsize=7, rotation=90)
    else:
        ax.set_yticks(pos)
        ax.set_yticklabels([labels[i] for i in pos], fontsize=7)


@dataclass
class Attribution:
    """Integrated gradients: `values` shaped like the input (B×T for tokens, summed over the
    embedding's channels; `full` keeps B×T×C), `kind` ("tokens", "sequence", "image",
    "features"), `labels` (per batch item, one per position: the token ids; or None), `delta` (f(x) − f(baseline), B) and
    `error` (the sum of the attributions minus `delta`: the completeness check)."""
    values: Tensor
    kind: str
    full: Tensor
    delta: Tensor
    labels: Optional[list] = None
    input_name: str = ""
    error: Tensor = field(init=False)

    def __post_init__(self) -> None:
        self.error = self.values.flatten(1).sum(1) - self.delta

    def positions(self, batch: int = 0) -> Tensor:
        """Item `batch`'s attributions, one per position: an image's pixels (H×W) and a time
        series' steps (T) summed over their channels; a token's or a feature's as they are."""
        v = _item(self.values, batch, "Attribution")
        if self.kind == "image":
            return v.sum(0) if v.dim() == 3 else v
        return v.sum(-1) if v.dim() == 2 else v             # a time series' channels

    def plot(self, batch: int = 0) -> "Figure":
        """Bars per token or time step (sequence inputs), a heat map over the pixels (images,
        summed over channels), bars per feature."""
        v = self.positions(batch)
        if self.kind == "image":
            fig, ax = _figure(4, 4)
            im = ax.imshow(v.numpy(), cmap="RdBu_r")
            fig.colorbar(im, ax=ax)
            ax.set_xlabel("width (pixels)")
            ax.set_ylabel("height (pixels)")
        else:
            labels = position_labels(self.kind, v.shape[0], self.labels, batch)
            fig, ax = _figure(max(4, 0.3 * len(labels)), 3)
            ax.bar(range(len(labels)), v.numpy(),
                   color=["tab:red" if x > 0 else "tab:blue" for x in v.tolist()])
            _ticks(ax, labels, "x")
            ax.set_xlabel({"tokens": "token", "sequence": "time step"}.get(self.kind, "feature"))
            ax.set_ylabel("attribution")
        ax.set_title(f"integrated gradients of {self.input_name or 'the input'}")
        fig.tight_layout()
        return fig


@dataclass
class Mixing:
    """Attention rollout or relevance: `values`, B×T×Tin (each output position's share of each
    input position), over the positions of `basis` (the input or layer where those positions
    enter); `terms` holds every basis's matrix when there are several (an encoder and a
    decoder); `layers`: the attention layers followed, in order; `method`: "rollout" or
    "relevance"; `labels`, the token ids per batch item when the basis is a token input."""
    values: Tensor
    basis: str
    terms: dict
    layers: list
    method: str
    kind: str = "tokens"
    labels: Optional[list] = None

    def plot(self, batch: int = 0) -> "Figure":
        """A heat map: rows the output positions, columns the input positions."""
        v = _item(self.values, batch, self.method.capitalize())
        cols = position_labels(self.kind, v.shape[1], self.labels, batch)
        rows = cols if v.shape[0] == v.shape[1] else position_labels("", v.shape[0])
        fig, ax = _heat_map(v, cols, rows, (max(4, 0.3 * len(cols)), max(3, 0.3 * len(rows))),
                            "", cmap="viridis")
        what = {"tokens": "token", "sequence": "time step", "image": "image patch"}
        ax.set_xlabel(f"input {what.get(self.kind, 'position')} ({self.basis})")
        ax.set_ylabel("output position")
        ax.set_title(f"attention {self.method}")
        fig.tight_layout()
        return fig


@dataclass
class LogitLens:
    """The logit lens: `logits`, blocks×B×T×V, each block's residual output through the final
    norm and the head; `blocks`, their names; `labels`, the tokens (one per position)."""
    logits: Tensor
    blocks: list
    labels: Optional[list] = None

    def probabilities(self, batch: int = 0) -> Tensor:
        """Item `batch`'s next-token probabilities, blocks×T×V: each block's logits' softmax."""
        return _item(self.logits.transpose(0, 1), batch, "LogitLens").softmax(-1)

    def top(self, k: int = 1, batch: int = 0) -> list[tuple[str, int, list[int], list[float]]]:
        """The table: (block, position, the top-k token ids, their probabilities)."""
        p = self.probabilities(batch)
        best = p.topk(k, dim=-1)
        return [(b, t, best.indices[i, t].tolist(), best.values[i, t].tolist())
                for i, b in enumerate(self.blocks) for t in range(p.shape[1])]

    def plot(self, batch: int = 0) -> "Figure":
        """Block × position: the top token's probability as colour, its id written in."""
        p = self.probabilities(batch)
        best = p.max(-1)
        fig, ax = _heat_map(best.values, position_labels("tokens", p.shape[1], self.labels, batch),
                            [str(b) for b in self.blocks],
                            (max(4, 0.5 * p.shape[1]), max(3, 0.4 * len(self.blocks))),
                            "top token's probability", cmap="viridis", vmin=0, vmax=1,
                            aspect="auto")
        for i in range(p.shape[0]):
            for t in range(p.shape[1]):
                ax.text(t, i, str(int(best.indices[i, t])), ha="center", va="center",
                        fontsize=6, color="white")
        ax.set_xlabel("token")
        ax.set_ylabel("block")
        ax.set_title("logit lens")
        fig.tight_layout()
        return fig


@dataclass
class Patching:
    """Activation patching: `values`, names×positions (NaN where a name has fewer positions;
    one column for a value patched whole), `names`, and `rows`: (name, position, value), the
    position None for a value patched whole; `labels`, the corrupted run's token ids (per
    batch item) when it has them."""
    values: Tensor
    names: list
    rows: list
    labels: Optional[list] = None

    def plot(self) -> "Figure":
        """A heat map: rows the activations, columns the positions."""
        v = self.values.detach().float().cpu()
        fig, ax = _heat_map(v, position_labels("tokens", v.shape[1], self.labels),
                            [str(n) for n in self.names],
                            (max(4, 0.4 * v.shape[1]), max(3, 0.35 * len(self.names))),
                            "metric", cmap="RdBu_r", aspect="auto")
        ax.set_xlabel("position")
        ax.set_ylabel("activation")
        ax.set_title("activation patching")
        fig.tight_layout()
        return fig
