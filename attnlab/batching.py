"""Mini-batching of network inputs (for predict now, for training later)."""
from __future__ import annotations

import torch

from .errors import DataError
from .sequences import Padded, unpad


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
