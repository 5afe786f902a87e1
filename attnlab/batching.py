"""Mini-batching of network inputs (for predict now, for training later)."""
from __future__ import annotations

import numpy as np
import torch

from .errors import DataError
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


def predict(net, args, kwargs, batch_size: int):
    given = normalize_inputs(net, args, kwargs)
    n = batch_count(given)
    was_training = net.training
    net.eval()
    try:
        chunks = []
        for i in range(0, n, batch_size):
            part = {k: _slice(v, i, i + batch_size) for k, v in given.items()}
            outs, masks = net.forward_with_masks(part)
            chunks.append((outs, masks))
    finally:
        net.train(was_training)
    listed = any(isinstance(v, (list, tuple)) for v in given.values())
    result = {}
    for name in chunks[0][0]:
        if listed and chunks[0][0][name].dim() == 3:
            seqs = []
            for outs, masks in chunks:
                seqs += unpad(outs[name], masks[name])
            result[name] = seqs
        else:
            result[name] = torch.cat([outs[name] for outs, _ in chunks])
    return result[next(iter(result))] if len(result) == 1 else result


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
