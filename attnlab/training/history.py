"""`TrainingInfo` (the history of a run) and the `Recorder` that fills it without stalling.

Each iteration leaves one small device tensor — the loss and metric sums of that step, already
divided by the global batch's units — in a list. Only at logging points (every
`verbose_frequency` iterations, validations, epoch ends, checkpoints) are the pending records
stacked, summed across processes and copied to the host in one transfer.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import torch


@dataclass
class TrainingInfo:
    """What `al.train` returns: the history per iteration, per validation and per epoch.

    Iterations and epochs count from 1, as MATLAB and the progress display do.
    `iterations`: columns "iteration", "epoch", "loss", "learning_rate" and one per metric
    (the mini-batch's values, as MATLAB's training table shows them).
    `validation`: "iteration", "epoch", "loss" and the metrics on the validation data.
    `epochs`: "epoch", "loss", metrics (means over the epoch) and "val_loss", "val_<metric>"
    (the last validation up to the epoch's end, or None). `history` gives the per-epoch columns
    as Keras' `History.history` does. `stop_reason`: "max-epochs", "validation-patience",
    "output-function"."""

    iterations: dict = field(default_factory=dict)
    validation: dict = field(default_factory=dict)
    epochs: dict = field(default_factory=dict)
    stop_reason: str = ""
    best_iteration: int | None = None
    best_validation_loss: float | None = None
    elapsed_s: float = 0.0
    plot_file: str | None = None
    checkpoint: str | None = None

    @property
    def history(self) -> dict[str, list]:
        """The per-epoch columns without "epoch", as Keras' `History.history`."""
        return {k: v for k, v in self.epochs.items() if k != "epoch"}

    @property
    def final_loss(self) -> float | None:
        """The loss of the last iteration (None before the first)."""
        losses = self.iterations.get("loss") or [None]
        return losses[-1]

    @property
    def final_validation(self) -> dict | None:
        """The last validation row by column, or None when there was no validation."""
        if not self.validation.get("iteration"):
            return None
        return {k: v[-1] for k, v in self.validation.items()}

    def append(self, table: str, row: dict) -> None:
        """Add one row to `table` ("iterations", "validation" or "epochs"); missing columns get None."""
        cols = getattr(self, table)
        n = len(next(iter(cols.values()))) if cols else 0
        for k, v in row.items():
            cols.setdefault(k, [None] * n).append(v)
        for k, v in cols.items():
            if len(v) < n + 1:
                v.append(None)

    def to_json(self) -> dict:
        """The history as a JSON-ready dict (what checkpoints and `Network.save` keep)."""
        return {"iterations": self.iterations, "validation": self.validation, "epochs": self.epochs,
                "stop_reason": self.stop_reason, "best_iteration": self.best_iteration,
                "best_validation_loss": self.best_validation_loss, "elapsed_s": self.elapsed_s}

    @staticmethod
    def from_json(d: dict) -> "TrainingInfo":
        """The `TrainingInfo` from `to_json`'s dict."""
        return TrainingInfo(**d)

    def plot(self, path: str | os.PathLike) -> str:
        """Draws loss and metrics, training and validation, into a PNG at `path`."""
        from .plots import draw
        return draw(self, path)

    def __repr__(self):
        n = len(self.iterations.get("iteration", []))
        last = self.final_loss
        val = self.final_validation
        extra = f", validation loss {val['loss']:.4g}" if val and val.get("loss") is not None else ""
        loss = f", loss {last:.4g}" if last is not None else ""
        return f"TrainingInfo({n} iterations{loss}{extra}, stop_reason={self.stop_reason!r})"


class Recorder:
    """Collects per-iteration device records and turns them into history rows when flushed.

    A record is [loss part, raw metric sums…]; each metric's denominator (the global batch's
    units) comes from the host. `names`: the metric columns; `finish`: per metric, mean →
    reported value (rmse: the square root)."""

    def __init__(self, info: TrainingInfo, names: list[str], finish: list, reduce):
        self.info, self.names, self.finish, self.reduce = info, names, finish, reduce
        self.pending: list[torch.Tensor] = []
        self.meta: list[tuple] = []
        self._reset_epoch()

    def _reset_epoch(self):
        self.epoch_loss, self.epoch_weight = 0.0, 0.0
        self.epoch_sums = [0.0] * len(self.names)
        self.epoch_denominators = [0.0] * len(self.names)

    def add(self, record: torch.Tensor, iteration: int, epoch: int, lr: float, weight: float,
            denominators: list):
        self.pending.append(record.detach())
        self.meta.append((iteration, epoch, lr, weight, denominators))

    def flush(self) -> list[dict]:
        """Moves pending records into `info.iterations`; returns the new rows."""
        if not self.pending:
            return []
        values = self.reduce(torch.stack(self.pending)).tolist()     # one transfer
        rows = []
        for vals, (it, ep, lr, w, dens) in zip(values, self.meta):
            self.epoch_loss += vals[0] * w
            self.epoch_weight += w
            for j, (v, d) in enumerate(zip(vals[1:], dens)):
                self.epoch_sums[j] += v
                self.epoch_denominators[j] += d
            row = {"iteration": it, "epoch": ep, "loss": vals[0], "learning_rate": lr}
            row.update({n: f(_ratio(v, d)) for n, f, v, d in zip(self.names, self.finish, vals[1:], dens)})
            self.info.append("iterations", row)
            rows.append(row)
        self.pending.clear()
        self.meta.clear()
        return rows

    def end_epoch(self, epoch: int) -> dict:
        self.flush()
        row = {"epoch": epoch, "loss": _ratio(self.epoch_loss, self.epoch_weight)}
        row.update({n: f(_ratio(s, d)) for n, f, s, d in
                    zip(self.names, self.finish, self.epoch_sums, self.epoch_denominators)})
        val = self.info.final_validation
        if val is not None:
            row.update({f"val_{k}": v for k, v in val.items() if k not in ("iteration", "epoch")})
        self.info.append("epochs", row)
        self._reset_epoch()
        return row

    def state(self) -> dict:
        return {"epoch_loss": self.epoch_loss, "epoch_weight": self.epoch_weight,
                "epoch_sums": self.epoch_sums, "epoch_denominators": self.epoch_denominators}

    def load_state(self, s: dict) -> None:
        self.epoch_loss, self.epoch_weight = s["epoch_loss"], s["epoch_weight"]
        self.epoch_sums, self.epoch_denominators = list(s["epoch_sums"]), list(s["epoch_denominators"])


def _ratio(a: float, b: float) -> float:
    return a / b if b else math.nan
