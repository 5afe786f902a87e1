"""The order of observations in each epoch, its mini-batches, and each process's part of them.

An epoch is an `EpochOrder`: the observation indices in order and where each mini-batch starts.
All processes draw the same order from the same seeded generator; process r of W takes the r-th
of W near-equal contiguous slices of every global batch (`shard`). The union over processes of
their slices is exactly the global batch one process would use, so `batch_size` is the global
mini-batch and the result matches one process. The order and the generator state go into
checkpoints, so a resumed run continues with the very next batch.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from torch.utils.data import Sampler


class EpochOrder(NamedTuple):
    order: np.ndarray       # int64 observation indices
    starts: np.ndarray      # int64, len = batches + 1: batch k is order[starts[k]:starts[k+1]]

    @property
    def batches(self) -> int:
        return len(self.starts) - 1

    def batch(self, k: int) -> tuple[int, int]:
        return int(self.starts[k]), int(self.starts[k + 1])


def draw_epoch(n: int, batch_size: int, shuffle: str, generator: torch.Generator,
               previous: EpochOrder | None = None, lengths: np.ndarray | None = None,
               sort_by_length: bool = False) -> EpochOrder:
    """This epoch's order. "every-epoch" draws a new permutation each epoch, "once" keeps the
    first one, "never" keeps the data order. With `sort_by_length`, observations of similar
    length are batched together (less padding) and, unless shuffle is "never", the batches are
    visited in a random order."""
    if shuffle == "once" and previous is not None:
        return previous
    if shuffle == "never":
        perm = np.arange(n, dtype=np.int64)
    else:
        perm = torch.randperm(n, generator=generator).numpy().astype(np.int64)
    bounds = np.append(np.arange(0, n, batch_size, dtype=np.int64), n)
    if sort_by_length and lengths is not None:
        perm = perm[np.argsort(lengths[perm], kind="stable")]       # ties stay in random order
        if shuffle != "never":
            visit = torch.randperm(len(bounds) - 1, generator=generator).numpy()
            sizes = np.diff(bounds)[visit]
            perm = np.concatenate([perm[bounds[k]:bounds[k + 1]] for k in visit])  # per epoch
            bounds = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    return EpochOrder(perm, bounds)


def shard(lo: int, hi: int, rank: int, world: int) -> tuple[int, int]:
    """Process `rank`'s contiguous part of positions [lo, hi): the first (hi-lo) % world parts
    are one longer (numpy.array_split's rule)."""
    n = hi - lo
    base, extra = divmod(n, world)
    start = lo + rank * base + min(rank, extra)
    return start, start + base + (1 if rank < extra else 0)


def usable(lo: int, hi: int, world: int) -> bool:
    """A batch is used when every process gets at least one observation of it (always true
    for one process; a final batch smaller than the number of processes is skipped)."""
    return hi - lo >= world


class DistributedBatchSampler(Sampler):
    """Yields this process's index list of each global batch of an `EpochOrder`, from batch
    `start`: the distributed sampler behind Dataset training (torch's DistributedSampler splits
    whole epochs instead, which would change which observations share a batch)."""

    def __init__(self, epoch: EpochOrder, start: int = 0, rank: int = 0, world: int = 1):
        self.epoch, self.start, self.rank, self.world = epoch, start, rank, world

    def __iter__(self):
        for k in range(self.start, self.epoch.batches):
            lo, hi = self.epoch.batch(k)
            if usable(lo, hi, self.world):
                a, b = shard(lo, hi, self.rank, self.world)
                yield self.epoch.order[a:b].tolist()

    def __len__(self):
        return sum(usable(*self.epoch.batch(k), self.world) for k in range(self.start, self.epoch.batches))
