"""Several processes: DistributedDataParallel under torchrun (WORLD_SIZE > 1).

`setup()` joins (or creates) the process group — gloo on CPU, nccl on GPUs. A group attnlab
creates stays for later `al.train` calls of the process and is destroyed at exit: destroying
and re-creating it under one torchrun launch would meet the first group's stale rendezvous keys
in torchrun's store and hang. Rank 0 logs, plots and writes checkpoints; metrics and losses are
summed across processes at logging time only.

BatchNorm statistics stay per process (as in plain DDP); the one-process equivalence holds for
networks without BatchNorm.
"""
from __future__ import annotations

import atexit
import gc
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn


@dataclass
class Dist:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def active(self) -> bool:
        return self.world > 1

    @property
    def main(self) -> bool:
        return self.rank == 0

    def sum_(self, t: torch.Tensor) -> torch.Tensor:
        """All-reduce (sum) in place across processes; a no-op for one process."""
        if self.active:
            dist.all_reduce(t, op=dist.ReduceOp.SUM)
        return t

    def any_(self, flag: bool, device) -> bool:
        if not self.active:
            return flag
        t = torch.tensor([1.0 if flag else 0.0], device=device)
        return bool(self.sum_(t).item() > 0)

    def broadcast_int(self, value: int, device) -> int:
        if not self.active:
            return value
        t = torch.tensor([value], dtype=torch.int64, device=device)
        dist.broadcast(t, 0)
        return int(t.item())

    def barrier(self):
        if self.active:
            dist.barrier()


def setup(device=None) -> Dist:
    """The process group of a torchrun launch, or a one-process Dist."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return Dist()
    if not dist.is_initialized():
        use_cuda = torch.cuda.is_available() and (device in (None, "auto") or torch.device(device).type == "cuda")
        dist.init_process_group(backend="nccl" if use_cuda else "gloo")
        atexit.register(_destroy)
    return Dist(rank=dist.get_rank(), world=dist.get_world_size(),
                local_rank=int(os.environ.get("LOCAL_RANK", "0")))


def _destroy():
    # Free unreachable DDP wrappers (their reducers hold the group) while the group still
    # exists, then let all processes reach exit before any tears its group down: otherwise
    # gloo now and then aborts a process ("terminate called without an active exception").
    if dist.is_initialized():
        gc.collect()
        dist.barrier()
        dist.destroy_process_group()


def collective_device(d: Dist, device: torch.device) -> torch.device:
    """Where collectives' tensors live: the GPU for nccl, the CPU for gloo."""
    if d.active and dist.get_backend() == "nccl":
        return device
    return torch.device("cpu")


class Forward(nn.Module):
    """The network's masked forward as a module, so DDP can wrap it: inputs dict → (outputs,
    masks), each a dict by output name."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, inputs: dict):
        return self.net.forward_with_masks(inputs)


def wrap(net, d: Dist, device: torch.device) -> nn.Module:
    """The module the loop calls: DDP around the forward under torchrun, else the forward."""
    fwd = Forward(net)
    if not d.active:
        return fwd
    from torch.nn.parallel import DistributedDataParallel as DDP
    ids = [device.index] if device.type == "cuda" else None
    return DDP(fwd, device_ids=ids)
