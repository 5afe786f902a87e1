"""Gradient accumulation (`TrainingOptions.accumulation_steps`): N micro-batches per optimizer
step, each loss scaled by 1/N, so that the step's gradient is that of one batch N times as
large (each micro-batch's mean loss weighing 1/N). The iteration count, the schedule, logging,
validation and checkpoints follow optimizer steps. A last, shorter group at the end of an
epoch (m < N micro-batches) still steps, its gradients multiplied by N/m: the mean over the
micro-batches it has.
"""
from __future__ import annotations

import math

import torch


def steps_per_epoch(micro_batches: int, n: int) -> int:
    """Optimizer steps in an epoch of `micro_batches` (the last group may be shorter)."""
    return math.ceil(micro_batches / n)


class Accumulation:
    """The micro-batches gathered since the last optimizer step: their records (device
    tensors), metric denominators and target units, for the step's one progress record."""

    def __init__(self, n: int):
        self.n = n
        self.scale = 1.0 / n
        self.records: list[torch.Tensor] = []
        self.denominators: list[float] = []
        self.units = 0.0

    @property
    def count(self) -> int:
        return len(self.records)

    @property
    def full(self) -> bool:
        return self.count >= self.n

    @property
    def correction(self) -> float:
        """What the gathered gradients are multiplied by: N/m for a group of m < N."""
        return self.n / self.count

    def add(self, record: torch.Tensor, denominators: list, units: float) -> None:
        self.records.append(record)
        self.denominators = [a + b for a, b in zip(self.denominators, denominators)] \
            if self.denominators else list(denominators)
        self.units += units

    def take(self) -> tuple[torch.Tensor, list, float]:
        """(the step's record: the mean loss and summed metric sums, denominators, units),
        and a fresh start."""
        if self.count == 1:
            record = self.records[0]
        else:
            record = torch.stack(self.records).sum(0)
            record[0] = record[0] / self.count
        out = (record, self.denominators, self.units)
        self.records, self.denominators, self.units = [], [], 0.0
        return out
