"""Several processes: DistributedDataParallel under torchrun (WORLD_SIZE > 1).

`setup()` joins (or creates) the process group — gloo on CPU, nccl on GPUs. A group attnlab
creates stays for later `al.train` calls of the process and is destroyed at exit: destroying
and re-creating it under one torchrun launch would meet the first group's stale rendezvous keys
in torchrun's store and hang. Rank 0 logs, plots and writes checkpoints; metrics and losses are
summed across processes at logging time only.

BatchNorm statistics stay per process (as in plain DDP); the one-process equivalence holds for
networks without BatchNorm.

`launch(nproc)` starts that launch for the user (MATLAB's ExecutionEnvironment="multi-gpu" /
"parallel"): called at the top of a script, it re-runs the script under
`torch.distributed.run` with nproc processes and exits with their status; in the workers it
returns at once.
"""
from __future__ import annotations

import atexit
import contextlib
import gc
import os
import subprocess
import sys
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

from attnlab.core.errors import ArgumentError, TrainingError


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

    def __init__(self, net, run=None):
        super().__init__()
        self.net = net
        self.run = run          # another way to the same outputs (activation checkpointing)

    def forward(self, inputs: dict):
        if self.run is not None:
            return self.run(inputs)
        return self.net.forward_with_masks(inputs)


def wrap(net, d: Dist, device: torch.device, run=None) -> nn.Module:
    """The module the loop calls: DDP around the forward under torchrun, else the forward.
    `run`: inputs → (outputs, masks) used instead of the network's own forward."""
    fwd = Forward(net, run)
    if not d.active:
        return fwd
    from torch.nn.parallel import DistributedDataParallel as DDP
    ids = [device.index] if device.type == "cuda" else None
    return DDP(fwd, device_ids=ids)


def gradient_sync(module: nn.Module, sync: bool):
    """A context for one micro-batch's backward: with `sync` False (a micro-batch before the
    last of an accumulation group) the gradients stay in this process, to be averaged once
    with the last one's — DDP's `no_sync()`, FSDP's `set_requires_gradient_sync(False)`."""
    from torch.distributed.fsdp import FSDPModule
    from torch.nn.parallel import DistributedDataParallel as DDP
    inner = getattr(module, "_orig_mod", module)           # a compiled module's own
    if isinstance(inner, DDP) and not sync:
        return inner.no_sync()
    if isinstance(inner, FSDPModule):
        inner.set_requires_gradient_sync(sync)
    return contextlib.nullcontext()


def in_launch() -> bool:
    """True inside a torchrun (torch.distributed.run) worker."""
    return "TORCHELASTIC_RUN_ID" in os.environ or int(os.environ.get("WORLD_SIZE", "1")) > 1


def launch(nproc: int | str = "gpu", argv: list[str] | None = None, *,
           exit: bool = True) -> int | None:
    """Runs this program data-parallel: re-launches it (`argv`, default `sys.argv`, or the
    `python -m` module it was started as) through `torch.distributed.run --standalone` with
    `nproc` processes, waits, and exits with their status (`exit=False`: returns it).

    `nproc`: a number of processes (≥ 1; on a CPU-only machine they train with gloo), or
    "gpu" for one per visible GPU. Inside a worker, and for one process, it returns None and
    the program simply goes on: call it first thing, before loading data, e.g.
    ``al.launch(4)``, after which ``al.train(...)`` runs under DDP in each of the 4 workers.
    MATLAB's ``ExecutionEnvironment="multi-gpu"`` / ``"parallel"`` in ``attnlab.matlab``
    calls it when training starts.
    """
    if isinstance(nproc, str):
        if nproc != "gpu":
            raise ArgumentError(f"launch nproc: expected a number of processes or 'gpu', "
                                f"received {nproc!r}. Example: launch(2).")
    elif isinstance(nproc, bool) or not isinstance(nproc, int) or nproc < 1:
        raise ArgumentError(f"launch nproc: expected a number of processes ≥ 1 or 'gpu', "
                            f"received {nproc!r}. Example: launch(2).")
    if in_launch():
        return None
    if nproc == "gpu":
        nproc = torch.cuda.device_count()
        if nproc == 0:
            raise TrainingError("launch('gpu'): this machine has no CUDA GPU (torch sees "
                                f"none; torch {torch.__version__}). Give a number of CPU "
                                "processes, e.g. launch(2) (gloo), or train without launch.")
    if nproc == 1:
        return None
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc-per-node={nproc}", *_program(argv)]
    rc = subprocess.call(cmd)
    if exit:
        raise SystemExit(rc)
    return rc


def _program(argv: list[str] | None) -> list[str]:
    """What torchrun should run: the script and its arguments, or `-m module …`."""
    args = list(sys.argv if argv is None else argv)
    if argv is None:
        spec = getattr(sys.modules.get("__main__"), "__spec__", None)
        if spec is not None and spec.name:                   # started as python -m name
            name = spec.name[:-len(".__main__")] if spec.name.endswith(".__main__") else spec.name
            return ["-m", name, *args[1:]]
    if not args or args[0] in ("", "-c") or not os.path.isfile(args[0]):
        shown = args[0] if args else "nothing"
        raise TrainingError(f"launch: cannot re-run this program under torchrun (it was started "
                            f"as {shown!r}, not from a script file). Put the training in a "
                            "script and run it with launch() at the top, or start it yourself: "
                            "python -m torch.distributed.run --standalone --nproc-per-node=N "
                            "script.py.")
    return args
