"""Solvers, learning-rate schedules and gradient clipping, all from torch."""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.optim import lr_scheduler as sched

from attnlab.core.errors import ArgumentError
from .options import TrainingOptions


def param_groups(params: list[nn.Parameter], lr: float, l2: float) -> list[dict]:
    """Optimizer parameter groups. `l2` decays weights (≥ 2 dimensions) only. A parameter's
    `learn_rate_factor` / `l2_factor` attributes (MATLAB's per-layer factors, set by
    attnlab.matlab) scale its learning rate / set its decay to l2 × factor; factor 0 freezes.
    The first group is the one at the base learning rate (what progress reports show)."""
    groups: dict[tuple[float, float], list[nn.Parameter]] = {}
    for p in params:
        f = float(getattr(p, "learn_rate_factor", 1.0))
        default = l2 if p.dim() >= 2 else 0.0
        decay = l2 * float(getattr(p, "l2_factor")) if hasattr(p, "l2_factor") else default
        groups.setdefault((f, decay), []).append(p)
    order = sorted(groups, key=lambda k: (k[0] != 1.0, k[0], -k[1]))   # decayed group first
    return [{"params": groups[k], "lr": lr * k[0], "weight_decay": k[1]} for k in order]


_FUSED_DEVICES = ("cpu", "cuda")
_FUSED_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def fusable(params: list[nn.Parameter]) -> bool:
    """Whether torch's fused Adam/AdamW kernel takes `params`: all floating point, on one CPU
    or CUDA device. It updates every parameter in one kernel where the default loops over
    them in Python: the same formula, rounded in another order (results agree to rounding,
    not bit for bit); on CPU about a tenth off a small network's training step."""
    devices = {p.device for p in params}
    return (len(devices) == 1 and next(iter(devices)).type in _FUSED_DEVICES
            and all(p.dtype in _FUSED_DTYPES for p in params))


def make_optimizer(params: list[nn.Parameter], o: TrainingOptions) -> torch.optim.Optimizer:
    """The torch optimizer for `o.solver`, over `param_groups`."""
    lr = o.lr
    groups = param_groups(params, lr, o.l2 or 0.0)
    if o.solver == "sgdm":
        return torch.optim.SGD(groups, lr=lr, momentum=o.momentum)
    beta2 = o.squared_gradient_decay
    if o.solver in ("adam", "adamw"):
        cls = torch.optim.Adam if o.solver == "adam" else torch.optim.AdamW
        return cls(groups, lr=lr, betas=(o.gradient_decay, 0.999 if beta2 is None else beta2),
                   eps=o.epsilon, **({"fused": True} if fusable(params) else {}))
    return torch.optim.RMSprop(groups, lr=lr, alpha=0.9 if beta2 is None else beta2, eps=o.epsilon)


def make_scheduler(opt: torch.optim.Optimizer, o: TrainingOptions, batches_per_epoch: int):
    """(scheduler or None, "iteration" | "epoch"): when the scheduler steps."""
    s = o.learning_rate_schedule
    if s is None or s == "none":
        return None, "iteration"
    if callable(s):
        made = s(opt)
        if not hasattr(made, "step") or not hasattr(made, "state_dict"):
            raise ArgumentError("learning_rate_schedule(optimizer) must return a torch lr scheduler")
        return made, o.schedule_step
    total = max(1, o.max_epochs * batches_per_epoch)
    if s == "piecewise":
        return sched.StepLR(opt, step_size=o.learning_rate_drop_period,
                            gamma=o.learning_rate_drop_factor), "epoch"
    warm = min(o.warmup_iterations, total - 1)
    if s == "cosine":
        return sched.CosineAnnealingLR(opt, T_max=total), "iteration"
    warmup = sched.LinearLR(opt, start_factor=o.warmup_fraction, end_factor=1.0, total_iters=max(warm, 1))
    if s == "warmup":
        return warmup, "iteration"
    cosine = sched.CosineAnnealingLR(opt, T_max=max(1, total - warm))
    return sched.SequentialLR(opt, [warmup, cosine], milestones=[warm]), "iteration"


def clipper(params: list[nn.Parameter], o: TrainingOptions):
    """A function that clips gradients in place (no host sync), or None."""
    t = o.gradient_threshold
    if t is None:
        return None
    if o.gradient_threshold_method == "global-l2norm":
        return lambda: torch.nn.utils.clip_grad_norm_(params, t)
    if o.gradient_threshold_method == "absolute-value":
        return lambda: torch.nn.utils.clip_grad_value_(params, t)

    def per_parameter():                           # MATLAB's "l2norm": each learnable alone
        for p in params:
            if p.grad is not None:
                torch.nn.utils.clip_grad_norm_([p], t)
    return per_parameter


def current_lr(opt: torch.optim.Optimizer) -> float:
    lr = opt.param_groups[0]["lr"]
    return float(lr) if not isinstance(lr, torch.Tensor) else math.nan
