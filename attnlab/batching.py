"""Mini-batching of network inputs (for predict now, for training later)."""
from __future__ import annotations

import numpy as np
import torch

from .compiled import maybe_compile
from .errors import ArgumentError, DataError
from .precision import autocast, autocast_dtype, check_compile, check_precision, resolve_device
from .sequences import Padded, pad_sequences, unpad
from .spec import Spec


def _length(x) -> int:
    if isinstance(x, Padded):
        return x.data.shape[0]
    return len(x)


def _slice(x, i, j):
    if isinstance(x, Padded):
        return Padded(x.data[i:j], x.mask[i:j])
    return x[i:j]


def normalize_inputs(net, args, kwargs) -> dict:
    names = net.input_names
    if len(args) == 1 and isinstance(args[0], dict):
        return dict(args[0])
    if kwargs:
        return dict(kwargs)
    if len(args) != len(names):
        raise DataError(f"the network has {len(names)} input(s) ({', '.join(names)}), received "
                        f"{len(args)}. Pass them in this order, or as a dict by input name.")
    return dict(zip(names, args))


def batch_count(given: dict) -> int:
    counts = {k: _length(v) for k, v in given.items()}
    if len(set(counts.values())) > 1:
        raise DataError("inputs differ in the number of observations: "
                        + ", ".join(f"'{k}' has {n}" for k, n in counts.items())
                        + ". Every input needs one entry per observation.")
    return next(iter(counts.values()))


RUN_OPTIONS = ("device", "precision", "compile")


def run_options(net, kwargs: dict) -> dict:
    """Takes predict's `device`, `precision` and `compile` out of its keyword inputs (inputs
    by name come as keywords too; an input of the same name keeps its keyword)."""
    names = set(net.input_names)
    return {k: kwargs.pop(k) for k in RUN_OPTIONS if k in kwargs and k not in names}


@torch.no_grad()
def predict(net, args, kwargs, batch_size: int, device=None, precision: str = "fp32",
            compile=False):
    """Outputs for the inputs in mini-batches of `batch_size`, in eval mode.

    device: where to compute (None: where the network is; the network moves there, as
        `net.to`); precision: "fp32" | "bf16" | "fp16" | "auto" (autocast; outputs float32);
    compile: torch.compile the forward (falls back to eager with a warning). Outputs come back
    on the CPU when the inputs were not CUDA/MPS tensors, else on the compute device."""
    kwargs = dict(kwargs)
    opts = run_options(net, kwargs)
    device, precision, compile = (opts.get("device", device), opts.get("precision", precision),
                                  opts.get("compile", compile))
    check_precision(precision, "predict precision")
    check_compile(compile, "predict compile")
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise ArgumentError(f"predict batch_size must be a positive int, got {batch_size!r}")
    given = normalize_inputs(net, args, kwargs)
    n = batch_count(given)
    if device is not None:
        net.to(resolve_device(device, "predict device"))
    on = _device_of(net)
    half = autocast_dtype(precision, on, "predict precision")
    forward = maybe_compile(net.forward_with_masks, compile, on, "inference")
    back = _return_device(given, on)
    was_training = net.training
    net.eval()
    try:
        chunks = []
        for i in range(0, n, batch_size):
            part = {k: _to(_slice(v, i, i + batch_size), on) for k, v in given.items()}
            with autocast(on, half):
                outs, masks = forward(part)
            if half is not None:
                outs = {k: v.float() if v.dtype in _HALF else v for k, v in outs.items()}
            chunks.append((outs, masks))
    finally:
        net.train(was_training)
    listed = any(isinstance(v, (list, tuple)) for v in given.values())
    result = {}
    for name in chunks[0][0]:
        if listed and chunks[0][0][name].dim() == 3:
            seqs = []
            for outs, masks in chunks:
                seqs += unpad(outs[name].to(back), None if masks[name] is None
                              else masks[name].to(back))
            result[name] = seqs
        else:
            result[name] = torch.cat([outs[name] for outs, _ in chunks]).to(back)
    return result[next(iter(result))] if len(result) == 1 else result


_HALF = (torch.float16, torch.bfloat16)


def _device_of(net) -> torch.device:
    """Where the network computes (a lazy one: where its last .to() put it)."""
    ref = next(iter(net.parameters()), None)
    if ref is not None:
        return ref.device
    target = getattr(net, "_target", None)
    return target[1] if target and target[1] is not None else torch.device("cpu")


def _to(x, device):
    """A batch part onto the compute device: tensors (and Padded) copied there, pinned and
    non-blocking on CUDA; lists and arrays are converted by the forward pass itself."""
    if device.type == "cpu":
        return x
    if isinstance(x, Padded):
        return Padded(_to(x.data, device), x.mask.to(device))
    if isinstance(x, torch.Tensor) and x.device != device:
        if device.type == "cuda" and x.device.type == "cpu":
            x = x.pin_memory()
        return x.to(device, non_blocking=True)
    if isinstance(x, np.ndarray):
        return _to(torch.as_tensor(x), device)
    return x


def _return_device(given: dict, on: torch.device) -> torch.device:
    """Outputs go back where the inputs were: the compute device for device tensors, else
    the CPU (lists, arrays, CPU tensors)."""
    for v in given.values():
        t = v.data if isinstance(v, Padded) else v
        if isinstance(t, torch.Tensor) and t.device.type != "cpu":
            return on
    return torch.device("cpu")


def as_batch(x, spec: Spec, name: str, dtype):
    """One input value → (tensor, mask or None), checked against the input's spec."""
    mask = None
    if isinstance(x, Padded):
        x, mask = x.data, x.mask
    elif isinstance(x, (list, tuple)):
        if not x:
            raise DataError(f"input '{name}': received an empty list.")
        if spec.is_sequence and all(getattr(s, "ndim", np.ndim(s)) in (1, 2) for s in x):
            x, mask = pad_sequences(x, dtype=dtype)
            if bool(mask.all()):     # equal lengths: no padding to carry
                mask = None
        else:
            x = torch.as_tensor(np.stack([np.asarray(s) for s in x]))
    elif not isinstance(x, torch.Tensor):
        x = torch.as_tensor(np.asarray(x))
    if x.dtype != dtype and x.dtype != torch.bool:
        x = x.to(dtype)
    if x.dim() != len(spec.labels) or any(
            s is not None and i > 0 and s != n for i, (s, n) in enumerate(zip(spec.sizes, x.shape))):
        raise DataError(f"input '{name}': expected {spec}, received "
                        f"{'×'.join(map(str, x.shape))}. {_shape_fix(x, spec)}".rstrip())
    return x, mask


def _shape_fix(x, spec: Spec) -> str:
    if spec.is_sequence and x.dim() == 2:
        if spec.channels == 1:
            return "Add the channel dimension: x.unsqueeze(-1) (B×T → B×T×1)."
        if x.shape[-1] == spec.channels:
            return "A single sequence needs a batch dimension: x.unsqueeze(0), or pass a list of sequences."
    if spec.is_sequence and x.dim() == 3 and x.shape[1] == spec.channels:
        return "Sequences are batch-first B×T×C in attnlab: use x.transpose(1, 2)."
    if spec.is_image and x.dim() == 4 and x.shape[-1] == spec.channels:
        return "Images are B×C×H×W in attnlab: use x.permute(0, 3, 1, 2)."
    if spec.is_image and x.dim() == 3:
        return "Add the channel dimension: x.unsqueeze(1) (B×H×W → B×1×H×W)."
    return "Check the sizes the input layer was declared with."
