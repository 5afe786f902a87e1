"""Activation patching (as TransformerLens' `patching`): for each named activation and each of
its positions, the clean run's value put into the corrupted run there, and a metric of the
outputs."""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence, Union

import torch
from torch import Tensor

from attnlab.core.errors import ArgumentError, SizeError
from attnlab.explain.inputs import as_dict, token_labels
from attnlab.explain.results import Patching

# the dimension of positions of attention's inside; a layer's B×T×C output has it at 1
POSITION_DIM = {"scores": 2, "query": 2, "key": 2, "heads": 1}


def position_dim(name: str, value: Tensor) -> int | None:
    """The dimension along which `name`'s value has positions, None for a value patched whole
    (features B×C, images B×C×H×W)."""
    port = name.rsplit("/", 1)[-1]
    if port in POSITION_DIM and value.dim() == 4:
        return POSITION_DIM[port]
    return 1 if value.dim() == 3 else None


def _metric(metric: Callable, outputs: Any) -> float:
    got = metric(outputs)
    if isinstance(got, Tensor) and got.numel() == 1:
        return float(got)
    if isinstance(got, (int, float)) and not isinstance(got, bool):
        return float(got)
    raise ArgumentError(f"patching: the metric must return a number (a float or a one-element "
                        f"tensor), returned {type(got).__name__}"
                        + (f" of size {tuple(got.shape)}" if isinstance(got, Tensor) else "")
                        + ". Reduce the outputs to one number, e.g. a logit difference.")


def _placed(clean: Tensor, dim: int | None, pos: int | None) -> Callable[[Tensor], Tensor]:
    """A patch: the value with the clean run's at position `pos` along `dim` (all of it when
    `dim` is None)."""
    def patch(value: Tensor) -> Tensor:
        if dim is None:
            return clean.to(value.dtype)
        out = value.clone()
        index = (slice(None),) * dim + (pos,)
        out[index] = clean[index].to(value.dtype)
        return out
    return patch


def patching(net: Any, clean: Any, corrupted: Any, names: Union[str, Sequence[str]],
             metric: Callable[[Any], Any]) -> Patching:
    """Activation patching, as TransformerLens': for each activation named by `names` and
    each of its positions, the corrupted run with the clean run's value at that position,
    measured by `metric`.

    Parameters
    ----------
    net : Network
    clean, corrupted : tensor or dict
        Two batches of the same sizes: tensors, or tensors by input name.
    names : str or list of str
        `fnmatch` patterns of the names `net.trace` captures (``"h.*.attn"``,
        ``"h.0.attn/scores"``).
    metric : callable
        The outputs → a number (a float or a one-element tensor), e.g. a logit difference.

    Returns
    -------
    Patching
        ``rows`` (name, position, value) and ``values``, names×positions.
    """
    if not callable(metric):
        raise ArgumentError(f"patching: metric must be a function of the outputs returning a "
                            f"number, received {type(metric).__name__}.")
    if not isinstance(names, str) and hasattr(names, "__len__") and len(names) == 0:
        raise ArgumentError("patching: names is empty, so there is nothing to patch. Give the "
                            "activations to patch, e.g. names=['h.*.attn/heads'] or 'h.*.mlp*'.")
    clean_in = as_dict(net, clean, "patching (clean)")
    bad_in = as_dict(net, corrupted, "patching (corrupted)")
    with torch.no_grad():
        good = net.trace(clean_in, capture=names)
        found = list(good)
        bad = net.trace(bad_in, capture=found)
        rows: list[tuple[str, int | None, float]] = []
        for name in found:
            if good[name].shape != bad[name].shape:
                raise SizeError(f"patching: '{name}' is {'×'.join(map(str, good[name].shape))} "
                                f"in the clean run and {'×'.join(map(str, bad[name].shape))} in "
                                "the corrupted one. Give clean and corrupted inputs of the "
                                "same sizes (the same number of tokens).")
            dim = position_dim(name, good[name])
            for pos in ([None] if dim is None else range(good[name].shape[dim])):
                out = net.trace(bad_in, patch={name: _placed(good[name], dim, pos)}).outputs
                rows.append((name, pos, _metric(metric, out)))
    width = max((1 + (p or 0) for _, p, _ in rows), default=0)
    table = torch.full((len(found), width), math.nan)
    for name, pos, v in rows:
        table[found.index(name), pos or 0] = v
    first = next(iter(bad_in))
    return Patching(table, found, rows, token_labels(net, bad_in, first))
