"""Losses, computed as sums over the valid prediction units of a batch.

A loss returns the *sum* of its terms over the batch's valid units (observations, valid time
steps, pixels); the caller divides by the number of units in the whole global batch. That makes
the padded-batch loss equal the mean of per-sequence losses, and the sum over processes equal
the one-process mean.

Classification losses work on logits. A network that ends in `Softmax` (MATLAB style) is
trained from the Softmax's *input*: while training, the final Softmax passes its input through
(its forward is shadowed), so `log_softmax` sees the logits and the loss stays finite for any logit size
(taking `log` of a saturated softmax would give -inf and zero gradients). The same holds for a
final `Sigmoid` under "binary-crossentropy". The Softmax is restored when training ends.
"""
from __future__ import annotations

import inspect
from contextlib import contextmanager
from typing import Callable

import torch
from torch import nn
from torch.nn import functional as F

from attnlab.core.errors import ArgumentError, close_matches
from ..graph.names import parse_port
from attnlab.core.spec import Spec
from .labels import IGNORED

NAMES = ("crossentropy", "mse", "mae", "huber", "binary-crossentropy")
ALIASES = {"cross-entropy": "crossentropy", "categorical-crossentropy": "crossentropy",
           "ce": "crossentropy", "l2": "mse", "mean-squared-error": "mse", "l1": "mae",
           "mean-absolute-error": "mae", "bce": "binary-crossentropy", "binary-cross-entropy":
           "binary-crossentropy", "binarycrossentropy": "binary-crossentropy"}


class Loss:
    """One output's loss. `kind` is "class" when targets are class indices, "dense" when they
    have the output's shape; `channel_dim` is the output's channel axis."""

    name = "custom"
    classification = False          # targets may be class labels
    per_element = True              # averages over channels too (mse), or per unit (crossentropy)
    bypass: type | None = None      # a final activation trained through (Softmax, Sigmoid)

    def __init__(self, spec: Spec | None = None, kind: str = "dense"):
        self.spec = spec
        self.kind = kind
        self.channel_dim = spec.labels.index("C") if spec is not None and "C" in spec.labels else -1

    def bind(self, spec: Spec, kind: str) -> "Loss":
        """A copy bound to an output's spec and target kind."""
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        Loss.__init__(new, spec, kind)
        return new

    def terms(self, out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Loss terms, B×(T)×… without the channel axis (per unit) or with it (per element)."""
        raise NotImplementedError

    def sum(self, out, target, mask, local_units=None) -> torch.Tensor:
        return masked_sum(self.terms(out, target), mask)


def masked_sum(terms: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Σ terms over valid steps; mask B×T (True = valid) broadcasts over trailing axes. Padded
    terms are replaced, not multiplied, so garbage there (even NaN) cannot leak in."""
    if mask is None:
        return terms.sum()
    m = mask.view(*mask.shape, *([1] * (terms.dim() - mask.dim())))
    return terms.masked_fill(~m, 0).sum()


class CrossEntropy(Loss):
    """Cross-entropy from logits. Class targets equal to `IGNORED` (the index of a target equal
    to TrainingOptions.ignore_index) add nothing: the caller's units leave them out too, so the
    mean is over the other targets, as torch's `cross_entropy(ignore_index=-100)`."""

    name = "crossentropy"
    classification = True
    per_element = False
    bypass = nn.Softmax

    def terms(self, out, target):
        cd = self.channel_dim % out.dim()
        if self.kind == "class":                      # target: indices, out without its C axis
            logits = out if cd == 1 else out.movedim(cd, 1)
            return F.cross_entropy(logits, target, reduction="none", ignore_index=IGNORED)
        return -(target * F.log_softmax(out, dim=cd)).sum(cd)     # target: probabilities

    def sum(self, out, target, mask, local_units=None):
        if mask is None and self.kind == "class":      # the common case, one fused op
            cd = self.channel_dim % out.dim()
            return F.cross_entropy(out if cd == 1 else out.movedim(cd, 1), target, reduction="sum",
                                   ignore_index=IGNORED)
        return super().sum(out, target, mask, local_units)


class MSE(Loss):
    name = "mse"

    def terms(self, out, target):
        return (out - target).square()


class MAE(Loss):
    name = "mae"

    def terms(self, out, target):
        return (out - target).abs()


class Huber(Loss):
    name = "huber"

    def terms(self, out, target):
        return F.huber_loss(out, target, reduction="none", delta=1.0)


class BinaryCrossEntropy(Loss):
    name = "binary-crossentropy"
    classification = True
    bypass = nn.Sigmoid

    def terms(self, out, target):
        return F.binary_cross_entropy_with_logits(out, target, reduction="none")


class CustomLoss(Loss):
    """A callable `(outputs, targets) -> mean loss` (Keras style). With padding, a callable that
    takes `mask=` gets the B×T mask; otherwise it sees only the valid steps."""

    per_element = False

    def __init__(self, fn: Callable, spec=None, kind="dense"):
        super().__init__(spec, kind)
        self.fn = fn
        self.name = getattr(fn, "__name__", "custom")
        try:
            self.takes_mask = "mask" in inspect.signature(fn).parameters
        except (TypeError, ValueError):
            self.takes_mask = False

    def sum(self, out, target, mask, local_units=None):
        if mask is not None and self.takes_mask:
            mean = self.fn(out, target, mask=mask)
        elif mask is not None:
            mean = self.fn(out[mask], target[mask])            # valid steps only: U×C
        else:
            mean = self.fn(out, target)
        if not isinstance(mean, torch.Tensor) or mean.dim() != 0:   # metadata only: no sync
            got = (f"a tensor {'×'.join(map(str, mean.shape))}" if isinstance(mean, torch.Tensor)
                   else f"{type(mean).__name__} {mean!r}"[:60])
            raise ArgumentError(f"loss '{self.name}': a loss callable must return a scalar tensor "
                                f"(the mean over the batch), returned {got}. Reduce it, e.g. "
                                "return ((outputs - targets) ** 2).mean(); a plain number cannot "
                                "carry gradients.")
        return mean * local_units


_CLASSES = {c.name: c for c in (CrossEntropy, MSE, MAE, Huber, BinaryCrossEntropy)}


def make_loss(loss) -> Loss:
    """A loss name or callable → an unbound Loss. A `Loss` instance (e.g. a weighted
    cross-entropy a caller built) is used as it is."""
    if isinstance(loss, Loss):
        return loss
    if callable(loss) and not isinstance(loss, str):
        return CustomLoss(loss)
    if not isinstance(loss, str):
        raise ArgumentError(f"loss must be one of {', '.join(NAMES)} or a callable, got {loss!r}")
    key = ALIASES.get(loss.lower(), loss.lower())
    if key not in _CLASSES:
        raise ArgumentError(f"unknown loss '{loss}'.{close_matches(loss, NAMES)} Losses: "
                            f"{', '.join(NAMES)}, or a callable (outputs, targets) -> mean.")
    return _CLASSES[key]()


# ----------------------------------------------------------------- final activations ---

def final_module(net, output: str, kind: type[nn.Module]) -> nn.Module | None:
    """The module of type `kind` that produces `output` (looking inside nested networks), if
    it acts on the channel axis; else None."""
    from ..graph import Graph

    layer_name, port = parse_port(output)
    if layer_name not in net.layer_modules:
        return None
    mod = net.layer_modules[layer_name]
    if isinstance(mod, Graph):
        inner = port or (mod.output_names[0] if mod.output_names else "")
        return final_module(mod, inner, kind) if inner else None
    if type(mod) is not kind:
        return None
    return mod if _on_channels(net, layer_name, mod) else None


def _on_channels(net, layer_name, mod) -> bool:
    if not isinstance(mod, nn.Softmax):
        return True                                       # Sigmoid is elementwise
    try:
        spec = net.analyze().out_specs[layer_name]["out"]
    except (KeyError, TypeError):
        return False
    cd = spec.labels.index("C") if "C" in spec.labels else -1
    n = len(spec.labels)
    return mod.dim is not None and mod.dim % n == cd % n


def _identity(x, *args, **kwargs):
    return x


@contextmanager
def trained_from_logits(net, losses: dict[str, Loss]):
    """While active, each output's final Softmax (Sigmoid) that its loss bypasses passes its
    input through, so the outputs are logits. Yields the names of the bypassed outputs.

    The module's `forward` is shadowed by an instance attribute (`nn.Module.__call__` calls
    `self.forward`), so the activation is neither computed nor hooked; deleting the attribute
    restores the class's forward."""
    patched, bypassed = [], []
    try:
        for output, loss in losses.items():
            if loss.bypass is None:
                continue
            mod = final_module(net, output, loss.bypass)
            if mod is not None and "forward" not in mod.__dict__:
                mod.forward = _identity
                patched.append(mod)
                bypassed.append(output)
        yield bypassed
    finally:
        for mod in patched:
            del mod.forward
