"""`TrainingOptions`: every knob of `al.train`, with MATLAB's and Keras' defaults where they agree.

Options are checked when the object is made, so a typo fails before any data is touched.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

from ..errors import ArgumentError, close_matches

SOLVERS = ("sgdm", "adam", "adamw", "rmsprop")
SHUFFLES = ("every-epoch", "once", "never")
SCHEDULES = (None, "none", "piecewise", "cosine", "warmup", "warmup-cosine")
CLIP_METHODS = ("global-l2norm", "l2norm", "absolute-value")
PLOTS = (None, "none", "training-progress")
UNITS = ("epoch", "iteration")

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
    the newest checkpoint exactly. `check_finite` True checks every step (one host sync per
    step) and names the first layer whose activations went non-finite. `device` None means the
    network's device.
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

    def __post_init__(self):
        _choice("solver", self.solver, SOLVERS)
        _choice("shuffle", self.shuffle, SHUFFLES)
        _choice("plots", self.plots, PLOTS)
        _choice("checkpoint_frequency_unit", self.checkpoint_frequency_unit, UNITS)
        _choice("schedule_step", self.schedule_step, UNITS)
        _choice("gradient_threshold_method", self.gradient_threshold_method, CLIP_METHODS)
        if not callable(self.learning_rate_schedule):
            _choice("learning_rate_schedule", self.learning_rate_schedule, SCHEDULES)
        for name in ("max_epochs", "batch_size", "validation_frequency", "verbose_frequency",
                     "checkpoint_frequency", "checkpoint_keep", "learning_rate_drop_period"):
            _positive_int(name, getattr(self, name))
        _positive_int("warmup_iterations", self.warmup_iterations, allow_zero=True)
        if self.validation_patience is not None:
            _positive_int("validation_patience", self.validation_patience)
        if self.learning_rate is not None:
            _positive_float("learning_rate", self.learning_rate)
        if self.gradient_threshold is not None:
            _positive_float("gradient_threshold", self.gradient_threshold)
        for name in ("l2", "momentum"):
            if not isinstance(getattr(self, name), (int, float)) or getattr(self, name) < 0:
                raise ArgumentError(f"TrainingOptions {name} must be a number ≥ 0, "
                                    f"got {getattr(self, name)!r}")
        if self.seed is not None and (not isinstance(self.seed, int) or isinstance(self.seed, bool)):
            raise ArgumentError(f"TrainingOptions seed must be an int or None, got {self.seed!r}")
        if self.resume and not self.checkpoint_dir:
            raise ArgumentError("TrainingOptions resume=True needs checkpoint_dir: the folder "
                                "where the checkpoints to resume from are written.")
        if self.output_fn is not None and not callable(self.output_fn):
            raise ArgumentError("TrainingOptions output_fn must be callable (state -> bool)")

    @property
    def lr(self) -> float:
        """The learning rate in effect (the given one or the solver's default)."""
        return self.learning_rate if self.learning_rate is not None \
            else DEFAULT_LEARNING_RATE[self.solver]

    def replace(self, **changes) -> "TrainingOptions":
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


def _choice(name, value, allowed):
    if value not in allowed:
        shown = ", ".join(repr(a) for a in allowed if a is not None)
        hint = close_matches(value, [a for a in allowed if a]) if isinstance(value, str) else ""
        raise ArgumentError(f"TrainingOptions {name} must be one of {shown}; got {value!r}.{hint}")


def _positive_int(name, v, allow_zero=False):
    if not isinstance(v, int) or isinstance(v, bool) or v < (0 if allow_zero else 1):
        raise ArgumentError(f"TrainingOptions {name} must be a {'non-negative' if allow_zero else 'positive'}"
                            f" int, got {v!r}")


def _positive_float(name, v):
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not v > 0:
        raise ArgumentError(f"TrainingOptions {name} must be a positive number, got {v!r}")
