"""Sharding across processes: `TrainingOptions(strategy="fsdp")` under torchrun.

torch's `fully_shard` (FSDP2) splits every parameter across the N processes of the launch:
each keeps 1/N of each parameter (a DTensor shard), its gradient and its optimizer state. A
unit's parameters are gathered whole just before the unit runs and dropped again after it, in
the forward and in the backward pass; its gradients are reduce-scattered back into shards.

Units: one per block (`checkpointing.block_of`: a nested network, or the layers of one
numbered prefix such as "h.0.*"). The forward plan calls each layer's module, never a block's
container, so a block's unit is the list of its layers' modules (torch fires the unit's hooks
on the first of them called). Everything outside the blocks — embeddings, the final norm, the
head — is the root unit, on the module the loop calls (`distributed.Forward`). A learnable tied
across units (GPT-2's wte and lm_head are both outside the blocks and so share the root) puts
the blocks holding it into the root: one parameter lives in one unit.

After training, `Sharded.release` (on every process, at the end of `al.train`) gathers each
parameter whole into the network's own `Parameter` objects, removes torch's hooks and puts the
module classes back: the network is then a plain `nn.Module` again in every process, so that
`net.save` or `net.save_pretrained` on rank 0 alone, `predict` and `state_dict` just work.

Checkpoints (`write` / `read`): the weights and optimizer state as
`torch.distributed.checkpoint` shards in a folder `checkpoint-<iteration>.dcp` beside the
usual checkpoint file, which holds the rest (position, schedule, random states, history) and
is written last, by rank 0, once every shard is on disk: a checkpoint file is only there when
its shards are complete. `checkpoint_dir` must be a folder every process can read and write.
"""
from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from attnlab.core.errors import ArgumentError, TrainingError
from .checkpointing import block_of

SUFFIX = ".dcp"


def units(net) -> list[list[nn.Module]]:
    """The modules of each block, in the order of the network's layers; a block that shares
    a learnable with another unit (a block or the root) is left to the root."""
    mods = net.layer_modules
    blocks: dict[str | None, list[nn.Module]] = {}
    for layer in net.layers:
        if layer.name in mods:
            blocks.setdefault(block_of(layer.name, layer), []).append(mods[layer.name])
    holders: dict[int, set] = {}                   # parameter → the units holding it
    for block, ms in blocks.items():
        for m in ms:
            for p in m.parameters():
                holders.setdefault(id(p), set()).add(block)
    shared = {b for held in holders.values() if len(held) > 1 for b in held}
    return [ms for b, ms in blocks.items() if b is not None and b not in shared
            and any(True for m in ms for _ in m.parameters())]


def check(o, scaler) -> None:
    """What fsdp cannot do exactly is refused before anything is sharded."""
    if scaler is not None:
        raise ArgumentError("TrainingOptions strategy='fsdp' with precision 'fp16': fp16's "
                            "gradient scaler would check each process's shard for overflow "
                            "apart, so processes could disagree on skipping a step. Use "
                            "precision='bf16' (no scaler needed) or 'fp32', or strategy='ddp'.")


class Sharded:
    """The network sharded for one `al.train` call. `fwd` is the root module the loop calls."""

    def __init__(self, fwd: nn.Module, net, device: torch.device, half: torch.dtype | None):
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        self.fwd = fwd
        # the network's own parameters, kept to be filled again by release()
        self.own = [(m, name, p) for m in fwd.modules() for name, p in m._parameters.items()
                    if p is not None]
        self.hooks = {m: (set(m._forward_pre_hooks), set(m._forward_hooks)) for m in fwd.modules()}
        self.classes = {m: type(m) for m in fwd.modules()}
        with torch.no_grad():
            for _, _, p in self.own:                # torch shards contiguous tensors only
                if not p.is_contiguous():           # (from_pretrained's transposed views)
                    p.data = p.data.contiguous()
        if device.type == "cuda":
            torch.cuda.set_device(device)           # fully_shard places shards on the current GPU
        mesh = init_device_mesh(device.type, (dist.get_world_size(),))
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) \
            if half is torch.bfloat16 else MixedPrecisionPolicy()
        for ms in units(net):
            fully_shard(ms, mesh=mesh, mp_policy=policy)
        fully_shard(fwd, mesh=mesh, mp_policy=policy)
        with torch.no_grad():
            for _, _, p in self.own:                # the whole copies: freed while sharded
                p.data = torch.empty(0, dtype=p.dtype, device=p.device)
        self.released = False

    def reshard(self) -> None:
        """Every unit back to its shards (the root stays gathered after a forward without
        backward, e.g. validation's). Local: no collective."""
        from torch.distributed.fsdp import FSDPModule
        for m in self.fwd.modules():
            if isinstance(m, FSDPModule):
                m.reshard()

    def parameters(self) -> list[nn.Parameter]:
        """The sharded parameters that train (what the optimizer is made over)."""
        return [p for p in self.fwd.parameters() if p.requires_grad]

    def release(self) -> None:
        """Every parameter gathered whole into the network's own Parameter objects, torch's
        hooks and classes removed: a plain module again. Collective: every process calls it."""
        if self.released:
            return
        self.released = True
        self.reshard()                              # the registered parameters: the shards
        whole: dict[int, torch.Tensor] = {}
        with torch.no_grad():
            for m, name, p in self.own:
                now = m._parameters[name]
                if now is None:                     # not one torch put there: left as it is
                    continue
                if id(now) not in whole:
                    whole[id(now)] = _full(now)
                p.data = whole[id(now)].to(p.dtype)
                p.grad = None
                m._parameters[name] = p
        self._unhook()

    def _unhook(self) -> None:
        for m, (pre, post) in self.hooks.items():
            for k in [k for k in m._forward_pre_hooks if k not in pre]:
                del m._forward_pre_hooks[k]
                m._forward_pre_hooks_with_kwargs.pop(k, None)
            for k in [k for k in m._forward_hooks if k not in post]:
                del m._forward_hooks[k]
                m._forward_hooks_with_kwargs.pop(k, None)
                m._forward_hooks_always_called.pop(k, None)
            m.__class__ = self.classes[m]
            for key in [k for k, v in vars(m).items() if _is_fsdp_state(k, v)]:
                delattr(m, key)
            # torch's registry of sharded modules: left there, the next al.train's
            # fully_shard of the same module would fail ("Inserting … more than once").
            # A private table of torch 2.x: read defensively, so that a torch without it
            # still trains (only a second sharding of the same network would then fail)
            _registry().pop(m, None)


def _registry() -> dict:
    try:
        from torch.distributed import _composable_state
    except ImportError:                  # a later torch: no such table to clear
        return {}
    return getattr(_composable_state, "_module_state_mapping", {})


def _full(t: torch.Tensor) -> torch.Tensor:
    from torch.distributed.tensor import DTensor
    return t.full_tensor().detach() if isinstance(t, DTensor) else t.detach()


def _is_fsdp_state(key: str, value: Any) -> bool:
    """The attributes `fully_shard` (through torch's composable API) sets on a module."""
    if key in ("_is_fsdp_managed_module", "_fsdp_use_orig_params"):
        return True
    return key.startswith("__composable_api_state_key") or \
        key.startswith("__composable_api_registry_key") or \
        (isinstance(value, dict) and any(getattr(k, "__name__", "") == "fully_shard"
                                         for k in value))


# ---------------------------------------------------------------------- checkpoints ---

def folder_for(checkpoint_file: Path) -> Path:
    return checkpoint_file.with_suffix(SUFFIX)


def _state(fwd: nn.Module, opt, best: dict | None) -> dict:
    from torch.distributed.checkpoint.state_dict import get_state_dict
    model, optim = get_state_dict(fwd, opt)
    state = {"model": model, "optim": optim}
    if best is not None:
        state["best"] = best
    return state


def write(folder: Path, fwd: nn.Module, opt, best: dict | None) -> None:
    """Every process writes its shards of the weights and optimizer state (and of the best
    weights of early stopping) into `folder`. Collective."""
    import torch.distributed.checkpoint as dcp
    if folder.exists() and dist.get_rank() == 0:
        shutil.rmtree(folder)                    # a killed run's partial shards
    dist.barrier()
    dcp.save(_state(fwd, opt, best), checkpoint_id=str(folder))


def read(folder: Path, fwd: nn.Module, opt, net, has_best: bool) -> dict | None:
    """The shards of `folder` back into the sharded weights and optimizer state; returns the
    best weights of early stopping (sharded), or None. Collective."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import set_state_dict
    if not folder.is_dir():
        raise TrainingError(f"checkpoint '{folder.with_suffix('.safetensors')}' was written "
                            f"sharded (strategy='fsdp'), but its shards '{folder}' are missing. "
                            "Copy the folder beside it, or resume from another checkpoint_dir.")
    best = {k: v.detach().clone() for k, v in net.state_dict().items()} if has_best else None
    state = _state(fwd, opt, best)
    dcp.load(state, checkpoint_id=str(folder))
    set_state_dict(fwd, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
    return state.get("best")


def remove_unlisted(directory: Path, kept: list[Path]) -> None:
    """Shard folders whose checkpoint file is gone (older ones, or a killed run's)."""
    keep = {folder_for(p).name for p in kept}
    for f in Path(directory).glob("checkpoint-*" + SUFFIX):
        if f.is_dir() and f.name not in keep:
            shutil.rmtree(f, ignore_errors=True)


class Weightless:
    """The network as the checkpoint file sees it under fsdp: no weights (they are in the
    shards), its metadata."""

    def __init__(self, net):
        self.metadata = net.metadata

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, weights: dict) -> None:
        pass


class StatelessOptimizer:
    """The optimizer as the checkpoint file sees it under fsdp: its state is in the shards."""

    def __init__(self, opt):
        self.param_groups = opt.param_groups

    def state_dict(self) -> dict:
        return {"state": {}, "param_groups": []}

    def load_state_dict(self, state: dict) -> None:
        pass


def without_best(st):
    """The training state for the checkpoint file: the best weights go to the shards."""
    return dataclasses.replace(st, best_weights=None)
