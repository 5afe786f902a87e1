"""Metrics: accuracy, rmse, mae, or callables, accumulated as sums on the device.

Like losses, a metric gives the *sum* of its terms over a batch's valid units; dividing by the
global batch's units gives a part that sums over processes to the one-process value. `finish`
maps the mean to the reported value (rmse takes the square root of the mean squared error, so
that averaging over iterations and epochs stays exact).
"""
from __future__ import annotations

import math
from typing import Callable, TypeVar

import torch

from attnlab.core.errors import ArgumentError, close_matches
from .labels import IGNORED
from .losses import masked_sum

NAMES = ("accuracy", "rmse", "mae")
_M = TypeVar("_M", bound="Metric")


class Metric:
    name = "metric"
    per_element = False          # divides by units × channels (rmse, mae) or by units
    # set by `bind`, once the target's kind and the output's layout are known
    kind: str
    channel_dim: int
    logits: bool

    def bind(self: _M, kind: str, channel_dim: int, logits: bool) -> _M:
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.kind, new.channel_dim, new.logits = kind, channel_dim, logits
        return new

    def sum(self, out, target, mask, local_units=None) -> torch.Tensor:
        raise NotImplementedError

    def finish(self, mean: float) -> float:
        return mean


class Accuracy(Metric):
    """Share of correct predictions: argmax against class indices (or the argmax of one-hot or
    probability targets); with one channel, or binary targets, a threshold (0 on logits, 0.5 on
    probabilities) against targets > 0.5, element by element."""

    name = "accuracy"
    threshold: float

    def bind(self, kind, channel_dim, logits):
        new = super().bind(kind, channel_dim, logits)
        new.threshold = 0.0 if logits else 0.5
        return new

    def elementwise(self, channels: int | None, binary: bool) -> bool:
        return self.kind == "dense" and (binary or channels == 1)

    def sum(self, out, target, mask, local_units=None):
        cd = self.channel_dim % out.dim()
        if self.kind == "class":                     # an ignored target (IGNORED) never hits,
            hits = out.argmax(cd) == target          # and the units leave it out
        elif self.per_element:
            hits = (out > self.threshold) == (target > 0.5)
        else:
            hits = out.argmax(cd) == target.argmax(cd)
        return masked_sum(hits, mask)                # an integer count; divided later


class RMSE(Metric):
    name = "rmse"
    per_element = True

    def sum(self, out, target, mask, local_units=None):
        return masked_sum((out - target).square(), mask)

    def finish(self, mean):
        return math.sqrt(mean) if mean >= 0 else float("nan")


class MAE(Metric):
    name = "mae"
    per_element = True

    def sum(self, out, target, mask, local_units=None):
        return masked_sum((out - target).abs(), mask)


class CustomMetric(Metric):
    """A callable `(outputs, targets) -> mean over the batch`; with padding it sees only the
    valid steps. Over class targets it sees only the targets that count (neither padding nor
    ignored, see TrainingOptions.ignore_index): outputs U×C and class indices U."""

    def __init__(self, fn: Callable):
        self.fn = fn
        self.name = getattr(fn, "__name__", "metric")

    def sum(self, out, target, mask, local_units=None):
        if self.kind == "class":
            keep = target != IGNORED
            if mask is not None:
                keep &= mask.view(*mask.shape, *([1] * (keep.dim() - mask.dim())))
            out, target = out.movedim(self.channel_dim % out.dim(), -1)[keep], target[keep]
        elif mask is not None:
            out, target = out[mask], target[mask]
        return self.fn(out, target) * local_units


def make_metric(m) -> Metric:
    if callable(m) and not isinstance(m, str):
        return CustomMetric(m)
    if not isinstance(m, str) or m.lower() not in NAMES:
        hint = close_matches(m, NAMES) if isinstance(m, str) else ""
        raise ArgumentError(f"unknown metric {m!r}.{hint} Metrics: {', '.join(NAMES)}, or a callable "
                            "(outputs, targets) -> mean.")
    return {"accuracy": Accuracy, "rmse": RMSE, "mae": MAE}[m.lower()]()


def bind_metric(metric: Metric, kind: str, channel_dim: int, channels, logits: bool,
                binary: bool) -> Metric:
    bound = metric.bind(kind, channel_dim, logits)
    if isinstance(bound, Accuracy):
        bound.per_element = bound.elementwise(channels, binary)
    return bound
