"""`TrainingOptions`: every knob of `al.train`, with MATLAB's and Keras' defaults where they agree.

Options are checked when the object is made, so a typo fails before any data is touched.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import numbers
import os
import re
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

import torch
from torch.utils.data import DataLoader, Dataset

from attnlab.core.errors import ArgumentError, close_matches
from attnlab.core.precision import check_compile, check_precision
from .metrics import NAMES as METRIC_NAMES

SOLVERS = ("sgdm", "adam", "adamw", "rmsprop")
SHUFFLES = ("every-epoch", "once", "never")
SCHEDULES = (None, "none", "piecewise", "cosine", "warmup", "warmup-cosine")
CLIP_METHODS = ("global-l2norm", "l2norm", "absolute-value")
PLOTS = (None, "none", "training-progress")
UNITS = ("epoch", "iteration")
STRATEGIES = ("ddp", "fsdp")

# learning rate when none is given: MATLAB's trainingOptions defaults
DEFAULT_LEARNING_RATE = {"sgdm": 0.01, "adam": 0.001, "adamw": 0.001, "rmsprop": 0.001}


@dataclass
class TrainingOptions:
    """Options of `al.train` (MATLAB `trainingOptions`, Keras `compile`/`fit` arguments).

    Solver: `solver` "sgdm" | "adam" | "adamw" | "rmsprop" (torch.optim). `learning_rate` defaults
    to 0.01 for sgdm and 0.001 for the others. `momentum` 0.9 (sgdm); `gradient_decay` 0.9
    (Adam's β1); `squared_gradient_decay` (Adam's β2, default 0.999; RMSprop's α, default 0.9);
    `epsilon` 1e-8. `l2` (default 0) is weight decay on weights — parameters with two or more
    dimensions, not biases or normalisation scales, as MATLAB does; decoupled for "adamw".

    Schedule: `learning_rate_schedule` None | "piecewise" (multiply by `learning_rate_drop_factor`
    0.1 every `learning_rate_drop_period` 10 epochs) | "cosine" (to 0 over the whole run, per
    iteration) | "warmup" (linear from `warmup_fraction` of the rate over `warmup_iterations`) |
    "warmup-cosine" | a callable `optimizer -> torch.optim.lr_scheduler.LRScheduler`, stepped
    every `schedule_step` ("iteration" or "epoch").

    Data: `max_epochs` 30, `batch_size` 128 (the global mini-batch; split across processes under
    torchrun), `shuffle` "every-epoch" | "once" | "never", `sort_by_length` False (batches of
    similar lengths, less padding), `seed` 0 (None: a fresh one).

    Validation: `validation_data` (X, Y) or a Dataset/DataLoader, evaluated every
    `validation_frequency` (50) iterations and at the end; `validation_patience` None or the
    number of validations without a lower loss before training stops (the best weights are
    then restored). `metrics` None means ["accuracy"] for classification losses, none otherwise;
    else names "accuracy", "rmse", "mae" or callables `(outputs, targets) -> mean`.

    Gradients: `gradient_threshold` None or a float, `gradient_threshold_method`
    "global-l2norm" (`torch.nn.utils.clip_grad_norm_` over all) | "l2norm" (per parameter) |
    "absolute-value".

    Output: `verbose` True (rich progress bar in a terminal, plain lines otherwise, every
    `verbose_frequency` 50 iterations), `plots` "training-progress" writes `plots_file`
    (default `training-progress.png` in `log_dir`, else `checkpoint_dir`, else the current
    folder), refreshed as training goes; `log_dir` also receives TensorBoard logs when
    tensorboard is installed. `output_fn(state)` is called after every iteration; returning
    True stops training (MATLAB's OutputFcn).

    Checkpoints: `checkpoint_dir`, `checkpoint_frequency` 1 in `checkpoint_frequency_unit`
    "epoch" | "iteration", keeping the newest `checkpoint_keep` (2); `resume` True continues from
    the newest checkpoint exactly, also a finished run given a larger `max_epochs` (it then
    equals a run of that length from the start), except where the schedule is laid out over
    `max_epochs` ("cosine", "warmup-cosine"): that resume warns and follows the new length's
    schedule from the checkpoint's iteration. `check_finite` True checks every step (one host sync per
    step) and names the first layer whose activations went non-finite.

    Hardware (`attnlab.core.precision`, `attnlab.core.torch_compile`): `device` None (the network's device) |
    "auto" | "cpu" | "cuda" | "cuda:N" | "mps"; a device this machine lacks fails when
    training starts. `precision` "fp32" | "bf16" | "fp16" (torch.autocast; fp16 with a
    GradScaler, kept in checkpoints) | "auto"; losses and metrics are computed in float32.
    `compile` False | True (torch.compile, falling back to eager with a warning) | a dict of
    torch.compile arguments.

    Labels: `ignore_index` -100 (Hugging Face's and torch's convention) — class targets equal to
    it are left out of the "crossentropy" loss (the mean is over the other targets) and of the
    metrics, are never a class, and a batch whose every target is ignored gives loss 0. None
    turns it off; then a target of -100 is a DataError rather than a class.

    Sequences (MATLAB's SequenceLength): `sequence_length` None or "longest" (each mini-batch
    padded to its longest sequence, the padding masked), "shortest" (each mini-batch cut to its
    shortest sequence, nothing padded) or a positive int N (each mini-batch padded to its
    longest, then split along time into pieces of N steps trained in consecutive iterations,
    the LSTM/GRU state carried from one piece to the next and detached between them: truncated
    backpropagation through time). See `attnlab.training.pieces` for what a piece trains on.

    Fine-tuning: `accumulation_steps` 1 (an int ≥ 1): N mini-batches (micro-batches) per
    optimizer step, each loss scaled by 1/N, so that the gradient equals one batch N times as
    large (each micro-batch's mean loss weighing 1/N; with `sequence_length` N, the pieces
    count as micro-batches). Iterations, the learning-rate schedule, logging, validation and
    checkpoints count optimizer steps. A last, shorter group at the end of an epoch (m < N
    micro-batches) still steps, on the mean over its m micro-batches.
    `checkpoint_activations` False: True recomputes each block's activations in the backward
    pass instead of keeping them (torch.utils.checkpoint, non-reentrant): less memory, about
    one more forward of time, the same gradients. A block is a nested network or the layers of
    one numbered prefix ("h.0.*", "model.layers.3.*", as from_pretrained names them); a
    network with neither is refused. See `attnlab.training.checkpointing`.

    Several processes (under torchrun): `strategy` "ddp" (each process holds the whole network
    and the gradients are averaged: DistributedDataParallel) or "fsdp" (torch's `fully_shard`:
    each process holds 1/N of the parameters, gradients and optimizer state, one unit per
    block gathered while it runs; checkpoints are written sharded). Either gives the weights
    one process would train. In one process both train as usual. See
    `attnlab.training.fsdp`.
    """

    solver: str = "sgdm"
    learning_rate: Optional[float] = None
    max_epochs: int = 30
    batch_size: int = 128
    shuffle: str = "every-epoch"
    validation_data: Any = None
    validation_frequency: int = 50
    validation_patience: Optional[int] = None
    metrics: Optional[Sequence] = None
    plots: Optional[str] = None
    checkpoint_dir: Optional[str] = None
    gradient_threshold: Optional[float] = None
    l2: float = 0.0
    seed: Optional[int] = 0
    momentum: float = 0.9
    gradient_decay: float = 0.9
    squared_gradient_decay: Optional[float] = None
    epsilon: float = 1e-8
    learning_rate_schedule: Any = None
    learning_rate_drop_period: int = 10
    learning_rate_drop_factor: float = 0.1
    warmup_iterations: int = 100
    warmup_fraction: float = 0.01
    schedule_step: str = "iteration"
    gradient_threshold_method: str = "global-l2norm"
    sort_by_length: bool = False
    verbose: bool = True
    verbose_frequency: int = 50
    plots_file: Optional[str] = None
    log_dir: Optional[str] = None
    checkpoint_frequency: int = 1
    checkpoint_frequency_unit: str = "epoch"
    checkpoint_keep: int = 2
    resume: bool = False
    check_finite: bool = False
    output_fn: Optional[Callable] = None
    device: Any = None
    precision: str = "fp32"
    compile: Any = False
    ignore_index: Optional[int] = -100
    sequence_length: Any = None
    accumulation_steps: int = 1
    checkpoint_activations: bool = False
    strategy: str = "ddp"

    def __post_init__(self):
        _choice("solver", self.solver, SOLVERS)
        _choice("shuffle", self.shuffle, SHUFFLES)
        _choice("plots", self.plots, PLOTS)
        _choice("checkpoint_frequency_unit", self.checkpoint_frequency_unit, UNITS)
        _choice("schedule_step", self.schedule_step, UNITS)
        _choice("gradient_threshold_method", self.gradient_threshold_method, CLIP_METHODS)
        _choice("strategy", self.strategy, STRATEGIES)
        if not callable(self.learning_rate_schedule):
            _choice("learning_rate_schedule", self.learning_rate_schedule, SCHEDULES)
        for name in ("max_epochs", "batch_size", "validation_frequency", "verbose_frequency",
                     "checkpoint_frequency", "checkpoint_keep", "learning_rate_drop_period",
                     "accumulation_steps"):
            _positive_int(name, getattr(self, name))
        _positive_int("warmup_iterations", self.warmup_iterations, allow_zero=True)
        if self.validation_patience is not None:
            _positive_int("validation_patience", self.validation_patience)
        if self.learning_rate is not None:
            _positive_float("learning_rate", self.learning_rate)
        if self.gradient_threshold is not None:
            _positive_float("gradient_threshold", self.gradient_threshold)
        _positive_float("epsilon", self.epsilon)
        _in_range("l2", self.l2, 0, None, "≥ 0 (0: no weight decay)")
        # decay rates are fractions of the running average kept per step: 1 would never update
        _in_range("momentum", self.momentum, 0, 1, "in [0, 1), e.g. 0.9", upper_open=True)
        _in_range("gradient_decay", self.gradient_decay, 0, 1, "in [0, 1), e.g. 0.9 (Adam's β1)",
                  upper_open=True)
        if self.squared_gradient_decay is not None:
            _in_range("squared_gradient_decay", self.squared_gradient_decay, 0, 1,
                      "in [0, 1), e.g. 0.999 (Adam's β2) or 0.9 (RMSprop)", upper_open=True)
        _in_range("learning_rate_drop_factor", self.learning_rate_drop_factor, 0, 1,
                  "in [0, 1], e.g. 0.1 (the rate is multiplied by it every drop period)")
        _in_range("warmup_fraction", self.warmup_fraction, 0, 1, "in [0, 1], e.g. 0.01")
        for name in ("sort_by_length", "verbose", "resume", "check_finite",
                     "checkpoint_activations"):
            if not isinstance(getattr(self, name), bool):
                raise ArgumentError(f"TrainingOptions {name} must be True or False, got "
                                    f"{getattr(self, name)!r}")
        if self.seed is not None and (not isinstance(self.seed, numbers.Integral)
                                      or isinstance(self.seed, bool)):
            raise ArgumentError(f"TrainingOptions seed must be an int or None, got {self.seed!r}")
        for name in ("checkpoint_dir", "log_dir"):
            _folder(name, getattr(self, name))
        if self.plots_file is not None:
            _path("plots_file", self.plots_file)
            if os.path.isdir(self.plots_file):
                raise ArgumentError(f"TrainingOptions plots_file {str(self.plots_file)!r} is a "
                                    "folder; give a picture file name such as "
                                    "'training-progress.png'.")
        if isinstance(self.metrics, str):
            self.metrics = [self.metrics]         # metrics="accuracy" as MATLAB writes it
        if self.metrics is not None:
            if not isinstance(self.metrics, (list, tuple)):
                raise ArgumentError(f"TrainingOptions metrics must be None or a list of names "
                                    f"({', '.join(METRIC_NAMES)}) or callables, got {self.metrics!r}")
            for m in self.metrics:
                if not callable(m) and not (isinstance(m, str) and m.lower() in METRIC_NAMES):
                    hint = close_matches(m, METRIC_NAMES) if isinstance(m, str) else ""
                    raise ArgumentError(f"TrainingOptions metrics: unknown metric {m!r}.{hint} "
                                        f"Metrics: {', '.join(METRIC_NAMES)}, or a callable "
                                        "(outputs, targets) -> mean.")
        vd = self.validation_data
        if vd is not None and not isinstance(vd, (Dataset, DataLoader)) and \
                not (isinstance(vd, (tuple, list)) and len(vd) == 2):
            raise ArgumentError("TrainingOptions validation_data must be (X, Y) or a "
                                f"Dataset/DataLoader of (x, y) items, got {_short(vd)}.")
        _device_name(self.device)
        if self.resume and not self.checkpoint_dir:
            raise ArgumentError("TrainingOptions resume=True needs checkpoint_dir: the folder "
                                "where the checkpoints to resume from are written.")
        check_precision(self.precision, "TrainingOptions precision")
        check_compile(self.compile, "TrainingOptions compile")
        if self.ignore_index is not None and (not isinstance(self.ignore_index, numbers.Integral)
                                              or isinstance(self.ignore_index, bool)):
            raise ArgumentError(f"TrainingOptions ignore_index must be an int (the target value "
                                f"to leave out of the loss, e.g. -100) or None (ignore nothing), "
                                f"got {_short(self.ignore_index)}")
        if self.ignore_index is not None:
            self.ignore_index = int(self.ignore_index)      # numpy ints compare and save as ints
        self.sequence_length = _sequence_length(self.sequence_length)
        if self.output_fn is not None and not callable(self.output_fn):
            raise ArgumentError(f"TrainingOptions output_fn must be callable (state -> bool), got "
                                f"{_short(self.output_fn)}")

    @property
    def lr(self) -> float:
        """The learning rate in effect (the given one or the solver's default)."""
        return self.learning_rate if self.learning_rate is not None \
            else DEFAULT_LEARNING_RATE[self.solver]

    def replace(self, **changes: Any) -> "TrainingOptions":
        """A copy with the given options changed, e.g. ``opts.replace(max_epochs=1)``."""
        return dataclasses.replace(self, **changes)

    def to_json(self) -> dict:
        """The JSON-able options (data and callables left out), as recorded in checkpoints."""
        out = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name in ("validation_data", "output_fn", "device") or callable(v):
                continue
            if f.name == "metrics" and v is not None:
                v = [m if isinstance(m, str) else getattr(m, "__name__", "custom") for m in v]
            if isinstance(v, os.PathLike):                 # checkpoint_dir=Path(...), …
                v = os.fspath(v)
            out[f.name] = v
        return out


def make_options(options: TrainingOptions | None, overrides: dict) -> TrainingOptions:
    """`options` with keyword overrides (`al.train(..., max_epochs=3)`), checked by name."""
    if options is None:
        options = TrainingOptions()
    elif not isinstance(options, TrainingOptions):
        raise ArgumentError(f"options must be al.TrainingOptions, got {type(options).__name__}")
    names = {f.name for f in dataclasses.fields(TrainingOptions)}
    for k in overrides:
        if k not in names:
            raise ArgumentError(f"unknown training option '{k}'.{close_matches(k, names)}")
    return options.replace(**overrides) if overrides else options


def _sequence_length(v):
    """None | "longest" | "shortest" | a positive int; "longest" is read as None."""
    if v is None or (isinstance(v, str) and v == "longest"):
        return None
    if isinstance(v, str) and v == "shortest":
        return v
    if isinstance(v, numbers.Integral) and not isinstance(v, bool) and int(v) >= 1:
        return int(v)
    hint = close_matches(v, ["longest", "shortest"]) if isinstance(v, str) else ""
    raise ArgumentError(f"TrainingOptions sequence_length must be None, \"longest\", "
                        f"\"shortest\" or a positive int (steps per piece), got {_short(v)}."
                        f"{hint}")


def _choice(name, value, allowed):
    if value not in allowed:
        shown = ", ".join(repr(a) for a in allowed if a is not None)
        hint = close_matches(value, [a for a in allowed if a]) if isinstance(value, str) else ""
        raise ArgumentError(f"TrainingOptions {name} must be one of {shown}; got {value!r}.{hint}")


def _checked_init(init):
    """TrainingOptions(max_epoch=3) gets the close-match hint that al.train(..., max_epoch=3)
    gives, instead of the dataclass's bare TypeError."""
    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        names = [f.name for f in dataclasses.fields(TrainingOptions)]
        unknown = [k for k in kwargs if k not in names]
        if unknown:
            k = unknown[0]
            raise ArgumentError(f"unknown training option '{k}'.{close_matches(k, names)} "
                                "help(al.TrainingOptions) lists them all.")
        if len(args) > len(names):
            raise ArgumentError(f"TrainingOptions takes at most {len(names)} positional options "
                                f"(solver first), received {len(args)}; give the others by name.")
        init(self, *args, **kwargs)
    return __init__


TrainingOptions.__init__ = _checked_init(TrainingOptions.__init__)  # type: ignore[method-assign]


def _short(v, n: int = 40) -> str:
    text = repr(v)
    return text if len(text) <= n else text[: n - 1] + "…"


def _number(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _in_range(name, v, lo, hi, allowed: str, upper_open: bool = False):
    ok = _number(v) and math.isfinite(v) and v >= lo and (
        hi is None or (v < hi if upper_open else v <= hi))
    if not ok:
        raise ArgumentError(f"TrainingOptions {name} must be a number {allowed}, got {_short(v)}")


def _path(name, v):
    if not isinstance(v, (str, os.PathLike)) or not str(v):
        raise ArgumentError(f"TrainingOptions {name} must be a path (str or pathlib.Path), got "
                            f"{_short(v)}")


def _folder(name, v):
    if v is None:
        return
    _path(name, v)
    if os.path.exists(v) and not os.path.isdir(v):
        raise ArgumentError(f"TrainingOptions {name} {str(v)!r} names a file, not a folder: give a "
                            "folder (it is created if missing), e.g. 'checkpoints/'.")


_DEVICE = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")


def _device_name(v):
    """The device option's form (whether this machine has it is checked when training starts)."""
    if v is None or isinstance(v, torch.device) or (isinstance(v, str) and _DEVICE.match(v)):
        return
    raise ArgumentError(f"TrainingOptions device must be None, 'auto', 'cpu', 'cuda', 'cuda:N' "
                        f"or 'mps' (or a torch.device), got {_short(v)}")


def _positive_int(name, v, allow_zero=False):
    if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v < (0 if allow_zero else 1):
        raise ArgumentError(f"TrainingOptions {name} must be a {'non-negative' if allow_zero else 'positive'}"
                            f" int, got {v!r}")


def _positive_float(name, v):
    if not _number(v) or not math.isfinite(v) or not v > 0:
        raise ArgumentError(f"TrainingOptions {name} must be a positive number, got {v!r}")
