"""Checkpoints: one safetensors file each, written atomically, no pickle.

Tensors (weights and buffers, optimizer state, RNG states, the epoch's data order, the best
weights for early stopping) are safetensors entries; everything else (counters, scheduler state,
optimizer hyperparameters, Python/numpy RNG states, history) is one JSON document in the file's
metadata. A file is written to a temporary name in the same folder, fsync'ed, then renamed over
the final name (and the folder fsync'ed), so a crash at any moment leaves either the old set of
checkpoints or the new one, never a torn file. The temporaries of a killed run (their names carry
the writer's pid) are removed by the next checkpoint written to, or resumed from, the same folder;
never one that a live process is still writing.
"""
from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save as st_save

from attnlab.core.files import atomic_write, remove_stale
from attnlab.core.errors import TrainingError

PATTERN = re.compile(r"^checkpoint-(\d{9})\.safetensors$")
META_KEY = "attnlab.training"


def path_for(directory: Path, iteration: int) -> Path:
    return Path(directory) / f"checkpoint-{iteration:09d}.safetensors"


def save(directory, iteration: int, tensors: dict[str, torch.Tensor], meta: dict,
         keep: int = 2) -> Path:
    """Writes checkpoint `iteration` and deletes all but the newest `keep`."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    remove_stale(directory)                          # a killed earlier run's temporaries
    flat = {k: v.detach().to("cpu").contiguous().clone() for k, v in tensors.items()}
    data = st_save(flat, metadata={META_KEY: json.dumps(meta, default=_json_default)})
    path = path_for(directory, iteration)
    atomic_write(path, data)
    for old in checkpoints(directory)[:-keep]:
        old.unlink(missing_ok=True)
    return path


def checkpoints(directory) -> list[Path]:
    """The checkpoint files in `directory`, oldest first (temporary files are ignored)."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in directory.iterdir() if (m := PATTERN.match(p.name))]
    return [p for _, p in sorted(found, key=lambda e: e[0])]


def load(path) -> tuple[dict[str, torch.Tensor], dict]:
    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata() or {}
        if META_KEY not in meta:
            raise TrainingError(f"'{path}' is not an attnlab training checkpoint (no "
                                f"'{META_KEY}' metadata).")
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    try:
        doc = json.loads(meta[META_KEY])
    except (ValueError, RecursionError) as e:
        raise TrainingError(f"'{path}': its '{META_KEY}' metadata is not valid JSON ({e}).") from None
    if not isinstance(doc, dict):
        raise TrainingError(f"'{path}': its '{META_KEY}' metadata is not a JSON object.")
    return tensors, doc


def load_latest(directory):
    """(tensors, meta, path) of the newest readable checkpoint, or None when there is none."""
    remove_stale(directory)                          # what a killed run was writing
    for path in reversed(checkpoints(directory)):
        try:
            return (*load(path), path)
        except (OSError, ValueError, RuntimeError, SafetensorError, TrainingError):
            continue                                 # unreadable (not ours): try the previous
    return None


def _json_default(v):
    if isinstance(v, (np.integer, np.floating)):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, tuple):
        return list(v)
    if isinstance(v, torch.Tensor) and v.numel() == 1:
        return v.item()
    raise TypeError(f"cannot store {type(v).__name__} in a checkpoint's JSON")


# ------------------------------------------------------------------------ pieces ---

def pack_optimizer(state: dict) -> tuple[dict[str, torch.Tensor], dict]:
    """torch optimizer state_dict → (tensors 'optimizer/<param>/<key>', JSON rest)."""
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict = {}
    for idx, entry in state["state"].items():
        for key, value in entry.items():
            if isinstance(value, torch.Tensor):
                tensors[f"optimizer/{idx}/{key}"] = value
            else:
                scalars.setdefault(str(idx), {})[key] = value
    return tensors, {"scalars": scalars, "param_groups": state["param_groups"]}


def unpack_optimizer(tensors: dict[str, torch.Tensor], packed: dict) -> dict:
    state: dict = {}
    for name, value in tensors.items():
        if name.startswith("optimizer/"):
            _, idx, key = name.split("/", 2)
            state.setdefault(int(idx), {})[key] = value
    for idx, entries in packed["scalars"].items():
        state.setdefault(int(idx), {}).update(entries)
    groups = [{k: tuple(v) if k == "betas" else v for k, v in g.items()} for g in packed["param_groups"]]
    return {"state": state, "param_groups": groups}


def rng_state(generator: torch.Generator) -> tuple[dict[str, torch.Tensor], dict]:
    """Every random state training reads: torch (CPU and each GPU), the data-order generator,
    Python's and numpy's (which Dataset transforms may use)."""
    tensors = {"rng/torch": torch.get_rng_state(), "rng/data": generator.get_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        for i, s in enumerate(torch.cuda.get_rng_state_all()):
            tensors[f"rng/cuda/{i}"] = s
    version, state, gauss = random.getstate()
    legacy: Any = np.random.get_state()             # the legacy tuple (its default)
    name, keys, pos, has_gauss, cached = legacy
    meta = {"python": [version, list(state), gauss],
            "numpy": [name, keys.tolist(), int(pos), int(has_gauss), float(cached)]}
    return tensors, meta


def restore_rng(tensors: dict[str, torch.Tensor], meta: dict, generator: torch.Generator) -> None:
    torch.set_rng_state(tensors["rng/torch"])
    generator.set_state(tensors["rng/data"])
    cuda = sorted((k for k in tensors if k.startswith("rng/cuda/")), key=lambda k: int(k.split("/")[2]))
    if cuda and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([tensors[k] for k in cuda][:torch.cuda.device_count()])
    version, state, gauss = meta["python"]
    random.setstate((version, tuple(state), gauss))
    name, keys, pos, has_gauss, cached = meta["numpy"]
    np.random.set_state((name, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))
