"""Where training stands, and its round trip through a checkpoint.

`State` is the position (epoch, next batch, iteration, the epoch's order) plus early-stopping
bookkeeping. `snapshot` gathers it with the weights, optimizer, scheduler, RNG states and the
history into (tensors, JSON); `restore` puts all of it back, so that the next step is exactly
the step an uninterrupted run would take.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import cast

import numpy as np
import torch

from attnlab.core.errors import TrainingError
from attnlab.io.messages import legacy_keys
from . import checkpoint as ck
from .history import TrainingInfo
from .sampler import EpochOrder

VERSION = 1


@dataclass
class State:
    epoch: int = 0                     # the current epoch, from 0
    batch: int = 0                     # the next batch of the current epoch
    iteration: int = 0                 # steps taken
    order: EpochOrder | None = None    # the current epoch's order
    best_loss: float = math.inf
    best_iteration: int | None = None
    best_weights: dict | None = None
    bad_validations: int = 0
    last_validation: int = -1          # iteration of the last validation
    stop_reason: str = ""


def snapshot(st: State, net, opt, scheduler, generator, recorder, info: TrainingInfo,
             options_json: dict, scaler=None) -> tuple[dict, dict]:
    tensors = {f"net/{k}": v for k, v in net.state_dict().items()}
    opt_tensors, opt_json = ck.pack_optimizer(opt.state_dict())
    tensors.update(opt_tensors)
    rng_tensors, rng_json = ck.rng_state(generator)
    tensors.update(rng_tensors)
    order = cast(EpochOrder, st.order)              # snapshots are taken within an epoch
    tensors["epoch/order"] = torch.from_numpy(np.ascontiguousarray(order.order))
    tensors["epoch/starts"] = torch.from_numpy(np.ascontiguousarray(order.starts))
    if st.best_weights is not None:
        tensors.update({f"best/{k}": v for k, v in st.best_weights.items()})
    meta = {
        "version": VERSION,
        # only early stopping ends a run for good: a run stopped by output_fn (or a crash)
        # resumes, and one that reached max_epochs continues if max_epochs grows
        "position": {"epoch": st.epoch, "batch": st.batch, "iteration": st.iteration,
                     "stop_reason": st.stop_reason if st.stop_reason == "validation-patience" else ""},
        "early_stopping": {"best_loss": None if math.isinf(st.best_loss) else st.best_loss,
                           "best_iteration": st.best_iteration,
                           "bad_validations": st.bad_validations,
                           "last_validation": st.last_validation},
        "optimizer": opt_json,
        "scheduler": scheduler.state_dict() if scheduler is not None else None,
        "rng": rng_json,
        "recorder": recorder.state(),
        "history": info.to_json(),
        "metadata": net.metadata,
        "options": options_json,
        # fp16's loss scale and growth tracker (host numbers: read at checkpoints only)
        "scaler": scaler.state_dict() if scaler is not None else None,
    }
    return tensors, meta


def restore(tensors: dict, meta: dict, st: State, net, opt, scheduler, generator, recorder,
            info: TrainingInfo, path, scaler=None) -> None:
    try:
        _restore(tensors, meta, st, net, opt, scheduler, generator, recorder, info, path, scaler)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
        # a file that passed the safetensors check but lacks what attnlab writes: damaged
        raise TrainingError(f"checkpoint '{path}' cannot be resumed from: it is damaged or was "
                            f"not written by this attnlab ({type(e).__name__}: {e}). Delete it to "
                            "resume from the previous one, or use another checkpoint_dir.") from None


def _restore(tensors: dict, meta: dict, st: State, net, opt, scheduler, generator, recorder,
             info: TrainingInfo, path, scaler=None) -> None:
    if meta.get("version") != VERSION:
        raise TrainingError(f"checkpoint '{path}' has format version {meta.get('version')}; this "
                            f"attnlab reads version {VERSION}.")
    weights = _renamed(net, {k[4:]: v for k, v in tensors.items() if k.startswith("net/")})
    _check_weights(net, weights, path)
    net.load_state_dict(weights)
    opt.load_state_dict(ck.unpack_optimizer(tensors, meta["optimizer"]))
    if scheduler is not None and meta["scheduler"] is not None:
        scheduler.load_state_dict(meta["scheduler"])
    ck.restore_rng(tensors, meta["rng"], generator)
    if scaler is not None and meta.get("scaler"):
        scaler.load_state_dict(meta["scaler"])
    pos, early = meta["position"], meta["early_stopping"]
    st.epoch, st.batch, st.iteration = pos["epoch"], pos["batch"], pos["iteration"]
    st.stop_reason = pos.get("stop_reason", "")      # a finished run stays finished
    st.order = EpochOrder(tensors["epoch/order"].numpy(), tensors["epoch/starts"].numpy())
    st.best_loss = math.inf if early["best_loss"] is None else early["best_loss"]
    st.best_iteration = early["best_iteration"]
    st.bad_validations = early["bad_validations"]
    st.last_validation = early["last_validation"]
    best = _renamed(net, {k[5:]: v for k, v in tensors.items() if k.startswith("best/")})
    st.best_weights = best or None
    recorder.load_state(meta["recorder"])
    loaded = TrainingInfo.from_json(meta["history"])
    info.iterations, info.validation, info.epochs = loaded.iterations, loaded.validation, loaded.epochs
    info.elapsed_s = loaded.elapsed_s
    net.metadata.update(meta.get("metadata") or {})


def _renamed(net, weights: dict) -> dict:
    """A checkpoint's weights by `net`'s state-dict keys: an earlier checkpoint names those of
    dotted layer names with U+2024 for '.' (`attnlab.io.messages.legacy_keys`)."""
    renames = legacy_keys(net, net.state_dict().keys(), weights) if weights else {}
    return {renames.get(k, k): v for k, v in weights.items()}


def _check_weights(net, weights: dict, path) -> None:
    own = net.state_dict()
    missing = [k for k in own if k not in weights]
    extra = [k for k in weights if k not in own]
    wrong = [k for k in own if k in weights and tuple(own[k].shape) != tuple(weights[k].shape)]
    if missing or extra or wrong:
        parts = []
        if missing:
            parts.append(f"missing {', '.join(missing[:5])}")
        if extra:
            parts.append(f"unexpected {', '.join(extra[:5])}")
        if wrong:
            parts.append("different sizes for " + ", ".join(
                f"{k} ({'×'.join(map(str, weights[k].shape))} saved, "
                f"{'×'.join(map(str, own[k].shape))} here)" for k in wrong[:5]))
        raise TrainingError(f"checkpoint '{path}' was written for another network: "
                            f"{'; '.join(parts)}. Resume with the network it was trained with, or "
                            "use another checkpoint_dir.")
