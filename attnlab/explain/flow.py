"""Attention rollout (Abnar & Zuidema 2020) and attention × gradient relevance (Chefer et al.
2021, "Generic attention-model explainability"), both by the graph walk of
`attnlab.explain.mixing`: rollout with each layer's head-mean weights and additions averaged
(0.5·A + 0.5·I at a residual), relevance with mean_h((∇A ⊙ A)⁺) and additions summed
(R += Ā·R at a residual)."""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from attnlab.core.errors import NetworkError
from attnlab.explain.inputs import (Target, as_dict, called, kind_of, target_values,
                                    token_labels)
from attnlab.explain.mixing import Walk, attention_layers
from attnlab.explain.results import Mixing
from attnlab.graph.names import format_port


def _layers(net: Any, what: str) -> list[str]:
    names = attention_layers(net)
    if not names:
        raise NetworkError(f"{what}: expected a network with attention layers, but "
                           f"{called(net)} has none ({len(net.layer_map)} layers). "
                           f"{what.capitalize()} follows attention weights; use "
                           "al.explain.integrated_gradients for a network without attention.")
    return names


def _scores(names: list[str]) -> dict[str, str]:
    """Each attention layer's name → the trace's name of its weights, "layer/scores"."""
    return {n: format_port(n, "scores") for n in names}


def rollout(net: Any, inputs: Any) -> Mixing:
    """Attention rollout (Abnar & Zuidema 2020): each output position's share of each input
    position, through every attention layer's head-mean weights, residual additions
    averaged.

    Parameters
    ----------
    net : Network
        A network with attention layers.
    inputs : tensor or dict
        One batch: a tensor for a one-input network, else tensors by input name (a
        Hugging Face network's dict may hold an ``attention_mask``).

    Returns
    -------
    Mixing
        ``values``, B×T×Tin, for the last value the attention mixed; rows sum to 1.
    """
    names = _layers(net, "rollout")
    given = as_dict(net, inputs, "rollout")
    scores = _scores(names)
    with torch.no_grad():
        trace = net.trace(given, capture=list(scores.values()))
        weights = {n: trace[s].float().mean(1) for n, s in scores.items()}
    return _walk(net, given, weights, mean=True, method="rollout")


def relevance(net: Any, inputs: Any, target: Target) -> Mixing:
    """Attention × gradient relevance (Chefer et al. 2021): R = I, then for each attention
    layer in graph order R += mean_h((∇A ⊙ A)⁺)·R, residual additions summed.

    Parameters
    ----------
    net : Network
        A network with attention layers.
    inputs : tensor or dict
        One batch: a tensor, or tensors by input name.
    target : int, tuple or callable
        What the gradients are of: a class, (position, class), or a function of the outputs
        giving one value per batch item.

    Returns
    -------
    Mixing
        ``values``, B×T×Tin: the relevance of each input position to each output position.
    """
    names = _layers(net, "relevance")
    given = as_dict(net, inputs, "relevance")
    # a zero added to each layer's weights: its gradient is ∂target/∂A through every later
    # layer, whether or not the network's own parameters take gradients
    zeros: dict[str, Tensor] = {}

    def shifted(name: str):
        def patch(a: Tensor) -> Tensor:
            zeros[name] = torch.zeros_like(a, requires_grad=True)
            return a + zeros[name]
        return patch

    scores = _scores(names)
    with torch.enable_grad():
        trace = net.trace(given, capture=list(scores.values()),
                          patch={s: shifted(n) for n, s in scores.items()})
        f = target_values(trace.outputs, target, "relevance")
        grads = torch.autograd.grad(f.sum(), [zeros[n] for n in names], allow_unused=True)
    weights = {}
    for n, g in zip(names, grads):
        a = trace[scores[n]].detach().float()
        g = torch.zeros_like(a) if g is None else g.float()
        weights[n] = (g * a).clamp_min(0).mean(1)
    return _walk(net, given, weights, mean=False, method="relevance")


def _walk(net: Any, given: dict, weights: dict, mean: bool, method: str) -> Mixing:
    walk = Walk(weights.__getitem__, mean)
    walk.run(net, {})
    last = walk.last
    if last is None:
        raise NetworkError(f"{method}: no attention layer of {called(net)} mixes the positions "
                           "of an input sequence (their value inputs carry no token). "
                           "Explain a network whose attention attends over its inputs.")
    basis = next(iter(last.terms))
    values = last.terms[basis]
    if values is None:           # pragma: no cover - a mixed value has a matrix
        raise NetworkError(f"{method}: nothing was mixed.")
    kind = kind_of(net, basis) if basis in net.input_names else \
        "image" if any(kind_of(net, n) == "image" for n in net.input_names) else "sequence"
    labels = token_labels(net, given, basis) if basis in net.input_names else None
    return Mixing(values, basis, dict(last.terms), list(walk.attention), method, kind, labels)
