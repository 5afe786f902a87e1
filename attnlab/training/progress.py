"""What the user watches: a rich progress bar in a terminal, plain lines elsewhere, TensorBoard.

`advance` runs every iteration and touches no tensor; loss and metrics arrive through `log` at
logging points only, already on the host.
"""
from __future__ import annotations

import sys
import time
import warnings


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _hms(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def summary(row: dict, prefix: str = "") -> str:
    skip = ("iteration", "epoch", "learning_rate")
    return "  ".join(f"{prefix}{k} {_fmt(v)}" for k, v in row.items() if k not in skip)


class Quiet:
    """No output (verbose=False, or a process other than rank 0)."""

    def start(self, total: int, epochs: int, done: int = 0, what: str = ""): pass
    def advance(self, iteration: int, epoch: int): pass
    def log(self, row: dict): pass
    def validation(self, row: dict): pass
    def message(self, text: str): pass
    def close(self): pass


class Lines(Quiet):
    """Plain lines, for logs and notebooks without a terminal: one per logging point
    (`verbose_frequency`) until the first validation, then one per validation only (with the
    latest training figures), so that a log does not fill with a line per iteration."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stdout
        self.last, self.validated = None, False

    def start(self, total, epochs, done=0, what=""):
        self.total, self.epochs, self.t0 = total, epochs, time.perf_counter()
        self._print(f"training{' ' + what if what else ''}: {epochs} epoch(s), {total} iteration(s)"
                    + (f", resuming after iteration {done}" if done else ""))

    def _head(self, row):
        return (f"epoch {row['epoch']}/{self.epochs}  iteration {row['iteration']}/{self.total}  "
                f"{_hms(time.perf_counter() - self.t0)}")

    def log(self, row):
        self.last = row
        if not self.validated:
            self._print(f"{self._head(row)}  {summary(row)}  lr {row['learning_rate']:.3g}")

    def validation(self, row):
        self.validated = True
        train = f"{summary(self.last)}  " if self.last else ""
        self._print(f"{self._head(row)}  {train}{summary(row, 'val_')}")

    def message(self, text):
        self._print(text)

    def _print(self, text):
        print(text, file=self.stream, flush=True)


class Bar(Lines):
    """A rich progress bar with the latest loss and metrics; validation lines print above it."""

    def __init__(self, console):
        super().__init__()
        self.console = console

    def start(self, total, epochs, done=0, what=""):
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                   TimeElapsedColumn, TimeRemainingColumn)
        self.total, self.epochs, self.t0 = total, epochs, time.perf_counter()
        self.bar = Progress(TextColumn("epoch {task.fields[epoch]}/{task.fields[epochs]}"),
                            BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                            TimeRemainingColumn(), TextColumn("{task.fields[stats]}"),
                            console=self.console, transient=False)
        self.bar.start()
        self.task = self.bar.add_task("train", total=total, completed=done, epoch=1, epochs=epochs,
                                      stats="")
        if what:
            self._print(f"training {what}")

    def advance(self, iteration, epoch):
        self.bar.update(self.task, completed=iteration, epoch=epoch + 1)

    def log(self, row):
        self.bar.update(self.task, stats=summary(row))

    def _print(self, text):
        self.bar.console.print(text, markup=False, highlight=False)

    def close(self):
        self.bar.stop()


def make_progress(verbose: bool, main: bool):
    if not verbose or not main:
        return Quiet()
    from rich.console import Console
    console = Console()
    return Bar(console) if console.is_terminal else Lines()


class TensorBoard:
    """Scalars to TensorBoard under `log_dir` when tensorboard is installed (else a warning)."""

    def __init__(self, log_dir):
        self.writer = None
        if log_dir is None:
            return
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            warnings.warn("log_dir: tensorboard is not installed (pip install tensorboard); "
                          "training continues without TensorBoard logs.", stacklevel=3)
            return
        self.writer = SummaryWriter(log_dir=str(log_dir))

    def log(self, rows: list[dict], prefix: str = "train"):
        if self.writer is None:
            return
        for row in rows:
            for k, v in row.items():
                if k not in ("iteration", "epoch") and isinstance(v, (int, float)):
                    self.writer.add_scalar(f"{prefix}/{k}", v, row["iteration"])

    def close(self):
        if self.writer is not None:
            self.writer.flush()
            self.writer.close()


def describe_trainable(net) -> str:
    """"12 of 148 learnables (1.2 M of 124 M parameters)": what training updates (the
    parameters with requires_grad). Each Parameter counts once (a tie is one)."""
    params = list(net.parameters())
    trained = [p for p in params if p.requires_grad]
    return (f"{len(trained)} of {len(params)} learnables "
            f"({_count(sum(p.numel() for p in trained))} of "
            f"{_count(sum(p.numel() for p in params))} parameters)")


def _count(n: int) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return str(n)
