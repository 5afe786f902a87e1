"""Integrated gradients (Sundararajan et al. 2017): the path integral of the gradient from a
baseline to the input, times the difference, per input element.

The integral over α ∈ [0, 1] is Gauss–Legendre quadrature with `steps` nodes (exact for
polynomials of degree 2·steps − 1, so far closer than a Riemann sum of as many steps), all the
steps in one batch. The sum of the attributions is checked against f(x) − f(baseline)
(completeness): a result that misses it by more than `tolerance` is refused, naming both and
what to change. (A zero baseline before a normalisation can make f change within a sliver of
α near 0 — RMSNorm(α·e) is e/rms(e) once α·rms(e) passes √eps —, which no fixed quadrature
sees; graded panels towards 0 caught one such model and lost accuracy on others, so the check
decides, and the baseline of pad tokens is the fix.)

Token inputs are attributed per token through their embedding: the embedding layer's output
is patched (`net.trace(..., patch=...)`) with the interpolation from the baseline's
embedding (zeros by default) to the tokens'.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np
import torch
from torch import Tensor

from attnlab.core.errors import ArgumentError, NetworkError, SizeError
from attnlab.core.sequences import Padded
from attnlab.explain.inputs import (Target, as_dict, data, kind_of, repeat, target_values,
                                    token_labels)
from attnlab.explain.results import Attribution
from attnlab.graph import codegen
from attnlab.graph.analysis import analyze
from attnlab.layers.embedding import Embedding

WHAT = "integrated_gradients"


def nodes(steps: int, dtype: torch.dtype = torch.float64) -> tuple[Tensor, Tensor]:
    """Gauss–Legendre nodes and weights on [0, 1]: Σ w·f(α) ≈ ∫₀¹ f."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ArgumentError(f"{WHAT}: steps must be a positive integer, received {steps!r}. "
                            "64 is plenty for completeness within 1 % on most models.")
    x, w = np.polynomial.legendre.leggauss(steps)
    return torch.as_tensor((x + 1) / 2, dtype=dtype), torch.as_tensor(w / 2, dtype=dtype)


def path(x: Tensor, base: Tensor, alphas: Tensor) -> Tensor:
    """The points base + α·(x − base), one batch per α, step-major (S·B × …)."""
    a = alphas.to(x.device, x.dtype).repeat_interleave(x.shape[0])
    a = a.reshape(-1, *([1] * (x.dim() - 1)))
    return repeat(base, len(alphas)) + a * repeat(x - base, len(alphas))


def integrate(grads: Tensor, weights: Tensor, batch: int) -> Tensor:
    """Σ_s w_s · grad_s, from S·B × … gradients (step-major)."""
    g = grads.reshape(len(weights), batch, *grads.shape[1:])
    w = weights.to(g.device, g.dtype).reshape(-1, *([1] * (g.dim() - 1)))
    return (w * g).sum(0)


def embedding_of(net: Any, name: str) -> str:
    """The layer that embeds token input `name`: its one `Embedding` reader (a position
    layer may read the ids too, as RoBERTa's does), else its one reader."""
    analysis = analyze(net, net.data_specs)
    key = codegen.input_key(net, name)
    readers = [(n, layer) for n, layer, keys in codegen.walk(net, analysis.order) if key in keys]
    embeddings = [n for n, layer in readers if isinstance(layer, Embedding)]
    if len(embeddings) == 1:
        return embeddings[0]
    if len(readers) != 1:
        found = ", ".join(n for n, _ in readers) or "none"
        raise NetworkError(f"{WHAT}: token input '{name}' is read by {len(readers)} layers "
                           f"({found}) and none or several of them is an Embedding; tokens "
                           "are attributed through the one layer that embeds them. Give a "
                           "network whose token input feeds one embedding layer.")
    return readers[0][0]


def integrated_gradients(net: Any, inputs: Any, target: Target,
                         baseline: Optional[Tensor] = None, steps: int = 64,
                         tolerance: Optional[float] = 0.01) -> Attribution:
    """Attributions of `target` to the network's first input (the other inputs held as given).

    Parameters
    ----------
    net : Network
    inputs : tensor or dict
        One batch: a tensor, or tensors by input name. The first input is attributed.
    target : int, tuple or callable
        An output index (class); (position, class) for a sequence output; or a function of
        the outputs giving one value per batch item.
    baseline : tensor, optional
        Where the path starts: zeros by default. For token inputs, in the embedding's space
        (B×T×C, or broadcastable), or token ids (integers, the input's size: e.g. all pad
        tokens), whose embedding is the baseline.
    steps : int
        Quadrature nodes.
    tolerance : float or None
        The relative miss of completeness (the sum of the attributions against f(x) −
        f(baseline)) above which the result is refused; None returns it whatever the miss.

    Returns
    -------
    Attribution
        `values` like the input (tokens: B×T, summed over channels; `full`, B×T×C); their sum
        per item equals `delta` = f(x) − f(baseline) up to the quadrature (`error`).
    """
    given = as_dict(net, inputs, WHAT)
    name = net.input_names[0]
    if name not in given:
        raise ArgumentError(f"{WHAT}: the inputs have no '{name}', the input attributed. "
                            f"Give it (inputs by name: {', '.join(net.input_names)}).")
    if tolerance is not None and (isinstance(tolerance, bool) or
                                  not isinstance(tolerance, (int, float)) or tolerance <= 0):
        raise ArgumentError(f"{WHAT}: tolerance must be a positive number or None, received "
                            f"{tolerance!r}.")
    alphas, weights = nodes(steps)
    if kind_of(net, name) == "tokens":
        attr, scale = _tokens(net, given, name, target, baseline, alphas, weights)
    else:
        attr, scale = _values(net, given, name, target, baseline, alphas, weights)
    if tolerance is not None:
        _check_complete(attr, scale, tolerance, steps)
    return attr


def _check_complete(attr: Attribution, scale: Tensor, tolerance: float, steps: int) -> None:
    """Refuses attributions whose sum misses f(x) − f(baseline) by more than `tolerance` of
    it (plus float round-off of f's size)."""
    allowed = tolerance * attr.delta.abs() + 1e-5 * scale
    bad = (attr.error.abs() > allowed).nonzero().flatten().tolist()
    if not bad:
        return
    b = bad[0]
    total, delta = float(attr.values[b].sum()), float(attr.delta[b])
    off = abs(total - delta) / max(abs(delta), 1e-30)
    raise ArgumentError(
        f"{WHAT}: the attributions of item {b} sum to {total:.6g}, but f(x) − f(baseline) is "
        f"{delta:.6g}: {off:.1%} off, more than the tolerance of {tolerance:.1%}. The "
        f"integrand changes faster than {steps} steps resolve: raise steps (e.g. "
        f"steps={4 * steps}) or start from a baseline nearer the input (for tokens, the ids "
        "of a pad token: baseline=torch.full_like(ids, pad_id)); tolerance=None returns the "
        "result as it is.")


def _baseline(x: Tensor, baseline: Optional[Tensor], what: str) -> Tensor:
    if baseline is None:
        return torch.zeros_like(x)
    if not isinstance(baseline, Tensor):
        raise ArgumentError(f"{WHAT}: baseline must be a tensor, received "
                            f"{type(baseline).__name__}.")
    try:
        return torch.broadcast_to(baseline.to(x.dtype).to(x.device), x.shape)
    except RuntimeError:
        raise SizeError(f"{WHAT}: the baseline of size {'×'.join(map(str, baseline.shape))} "
                        f"does not broadcast to {what} of size {'×'.join(map(str, x.shape))}. "
                        "Give one of that size.") from None


def _values(net, given, name, target, baseline, alphas, weights) -> tuple[Attribution, Tensor]:
    """A float input, interpolated itself (a `Padded` batch's data, its mask kept)."""
    given_x = given[name]
    mask = given_x.mask if isinstance(given_x, Padded) else None

    def wrap(v: Tensor, copies: int = 1) -> Any:
        return v if mask is None else Padded(v, repeat(mask, copies))

    x = data(given_x).to(net.input_dtype)
    base = _baseline(x, baseline, f"input '{name}'")
    delta, scale = _delta(net, given, {name: wrap(x)}, {name: wrap(base)}, target)  # target 1st
    z = path(x, base, alphas).detach().requires_grad_(True)
    others = {k: repeat(v, len(alphas)) for k, v in given.items() if k != name}
    with torch.enable_grad():
        f = target_values(net({name: wrap(z, len(alphas)), **others}), target, WHAT)
        (grads,) = torch.autograd.grad(f.sum(), z)
    values = ((x - base) * integrate(grads, weights, x.shape[0])).detach()
    return Attribution(values, kind_of(net, name), values, delta, input_name=name), scale


def _delta(net, given, actual, base, target, patch=None) -> tuple[Tensor, Tensor]:
    """f(x) − f(baseline) per item, and |f(x)| + |f(baseline)| (the size of f)."""
    with torch.no_grad():
        if patch is None:
            fx = target_values(net({**given, **actual}), target, WHAT)
            fb = target_values(net({**given, **base}), target, WHAT)
        else:
            fx = target_values(net.trace(given).outputs, target, WHAT)
            fb = target_values(net.trace(given, patch=patch).outputs, target, WHAT)
    return (fx - fb).detach(), (fx.abs() + fb.abs()).detach()


def _tokens(net, given, name, target, baseline, alphas, weights) -> tuple[Attribution, Tensor]:
    """A token input, through its embedding's output."""
    emb = embedding_of(net, name)
    with torch.no_grad():
        e = net.trace(given, capture=[emb])[emb].detach()
        if baseline is not None and isinstance(baseline, Tensor) and \
                not baseline.is_floating_point():
            ids = given[name]
            ids = Padded(baseline, ids.mask) if isinstance(ids, Padded) else baseline
            baseline = net.trace({**given, name: ids}, capture=[emb])[emb].detach()
    base = _baseline(e, baseline, f"the embedding '{emb}'")
    delta, scale = _delta(net, given, {}, {}, target, patch={emb: base})  # the target first
    z = path(e, base, alphas).detach().requires_grad_(True)
    steps = {k: repeat(v, len(alphas)) for k, v in given.items()}
    with torch.enable_grad():
        out = net.trace(steps, patch={emb: lambda v: z}).outputs
        f = target_values(out, target, WHAT)
        (grads,) = torch.autograd.grad(f.sum(), z)
    full = ((e - base) * integrate(grads, weights, e.shape[0])).detach()
    return Attribution(full.sum(-1), "tokens", full, delta, token_labels(net, given, name),
                       input_name=name), scale
