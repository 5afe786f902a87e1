"""MATLAB's legacy output layers and its layer arrays: classificationLayer, regressionLayer
(an `OutputLayer` marker that trainNetwork takes its loss from), and reading a layer array."""
from __future__ import annotations

import copy
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Union


from .. import layers as L
from attnlab.core.errors import ArgumentError
from ..layers.base import Layer
from ._options import (MatlabNote, _parse, _word)

if TYPE_CHECKING:
    from .losses import WeightedCrossEntropy


# ==================================================================== output layers ===


def _norm_name(layer):
    """The name of the InputNormalization an input layer's Normalization option adds."""
    return None if layer.name is None else f"{layer.name}-normalization"


class OutputLayer:
    """A legacy MATLAB output layer (classificationLayer, regressionLayer): not part of an
    attnlab graph. `trainNetwork` takes the loss from it (`make_loss`); `source` is the layer
    that feeds it (the one before it in a layer array, or connectLayers' source)."""

    def __init__(self, kind: str, loss: str, name: str | None,
                 classes: list[Any] | None = None, class_weights: list[float] | None = None):
        self.kind, self.loss, self.name = kind, loss, name
        self.classes, self.class_weights = classes, class_weights
        self.source: Any = None          # a Layer, or a layer name (connectLayers)

    def make_loss(self) -> str | WeightedCrossEntropy:
        """The loss trainNetwork trains with: "crossentropy", "mse", or the weighted
        cross-entropy of ClassWeights."""
        if self.class_weights is None:
            return self.loss
        from .losses import WeightedCrossEntropy
        return WeightedCrossEntropy(self.class_weights)

    def __repr__(self):
        return f"{self.kind}(Name={self.name!r})  # loss {self.loss!r}, not an attnlab graph layer"


def _classes(fn, value):
    if isinstance(value, str) and value.lower() == "auto":
        return None
    from .values import Categorical
    if isinstance(value, Categorical):
        return list(value.categories)
    vals = value.tolist() if hasattr(value, "tolist") else value
    vals = [vals] if isinstance(vals, str) or not isinstance(vals, (list, tuple)) else list(vals)
    if not vals or len(set(map(str, vals))) != len(vals):
        raise ArgumentError(f"{fn}: expected Classes \"auto\" or distinct class names, received "
                            f"{value!r}.")
    return vals


def classificationLayer(*args: Any, **kwargs: Any) -> OutputLayer:
    """Legacy: not an attnlab graph layer (a MatlabNote says so); trainNetwork trains with
    "crossentropy", weighted by `ClassWeights` (one weight per class of `Classes`, MATLAB's
    loss −(1/N) Σₙ w_cₙ log yₙ,cₙ)."""
    fn = "classificationLayer"
    _, o = _parse(fn, args, kwargs, {"Name": None, "Classes": "auto", "ClassWeights": "none"})
    classes = _classes(fn, o["Classes"])
    weights = o["ClassWeights"]
    if isinstance(weights, str):
        _word(fn, "ClassWeights", weights, ("none",))
        weights = None
    else:
        vals = weights.tolist() if hasattr(weights, "tolist") else weights
        vals = vals if isinstance(vals, (list, tuple)) else [vals]
        try:
            weights = [float(v) for v in vals]
        except (TypeError, ValueError):
            raise ArgumentError(f"{fn}: expected ClassWeights \"none\" or a vector of "
                                f"positive numbers, received {o['ClassWeights']!r}.") from None
        if any(not w > 0 for w in weights):
            raise ArgumentError(f"{fn}: expected ClassWeights to be positive, received {weights}.")
        if classes is not None and len(classes) != len(weights):
            raise ArgumentError(f"{fn}: expected one ClassWeights value per class "
                                f"({len(classes)} Classes), received {len(weights)}.")
    return OutputLayer("classificationLayer", "crossentropy", o["Name"], classes, weights)


def regressionLayer(*args: Any, **kwargs: Any) -> OutputLayer:
    """Legacy: not an attnlab graph layer (a MatlabNote says so); trainNetwork trains with
    "mse" (MATLAB's half-mean-squared-error: the same minimum)."""
    _, o = _parse("regressionLayer", args, kwargs, {"Name": None, "ResponseNames": None})
    return OutputLayer("regressionLayer", "mse", o["Name"])


def _layer_array(layers, fn: str) -> tuple[list, list[OutputLayer]]:
    """A MATLAB layer array (a list, nested lists concatenated) → (attnlab layers, dropped
    output layers)."""
    flat: list = []

    def walk(x):
        if isinstance(x, (list, tuple)):
            for y in x:
                walk(y)
        else:
            flat.append(x)

    walk(layers)
    seen: set[int] = set()
    for i, x in enumerate(flat):
        if id(x) in seen:                 # the same layer twice: MATLAB layers are values,
            flat[i] = copy.copy(x)        # so each place holds its own copy
            flat[i].__dict__["_matlab_copy_of"] = x.__dict__.get("_matlab_copy_of", x)
            x = flat[i]
        seen.add(id(x))
    keep: list = []
    dropped: list = []
    from .mlayers import FrameFlatten, SequenceFolding, SequenceUnfolding
    for i, x in enumerate(flat):         # flattenLayer after sequenceInputLayer([h w c]):
        if i and isinstance(x, L.Flatten) and "_matlab_frame" in flat[i - 1].__dict__:
            # the frames are already flat
            flat[i] = FrameFlatten(flat[i - 1].__dict__["_matlab_frame"], name=x.name)
        elif i and isinstance(x, L.Flatten) and isinstance(flat[i - 1], SequenceUnfolding):
            flat[i] = FrameFlatten(None, name=x.name)    # unfolded frames are flat too
        elif i and isinstance(x, SequenceFolding) and x.frame is None \
                and "_matlab_frame" in flat[i - 1].__dict__:
            x.frame = list(flat[i - 1].__dict__["_matlab_frame"])     # the frame size it folds
            x.frame += [1] * (3 - len(x.frame))
    for x in flat:
        if isinstance(x, OutputLayer):
            x.source = keep[-1] if keep else None           # a Layer: its name is set by add()
            dropped.append(x)
        elif isinstance(x, Layer):
            keep.append(x)
            norm = getattr(x, "_matlab_normalization", None)
            if norm is not None:
                from .mlayers import InputNormalization
                keep.append(InputNormalization(**norm, name=_norm_name(x)))
        else:
            raise ArgumentError(f"{fn}: expected layers, received {type(x).__name__}. Build layers "
                                "with the *Layer functions (or attnlab.layers).")
    for d in dropped:
        use = ("trainNetwork takes its loss from it" if fn in ("layerGraph", "addLayers")
               else f"the loss is an argument of training — trainnet(X, T, net, \"{d.loss}\", "
                    "options)")
        warnings.warn(f"{fn}: {d.kind} '{d.name or d.kind}' is not a layer of the attnlab graph: "
                      f"attnlab networks end at their last layer, and {use}.", MatlabNote,
                      stacklevel=3)
    return keep, dropped


# A MATLAB layer array: layers (and legacy output layers), nested lists concatenated.
LayerArray = Union[Layer, OutputLayer, Sequence["LayerArray"]]
