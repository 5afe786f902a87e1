"""Fixed elementwise maps: `Scaling` (a constant scale and bias per channel) and `Identity`."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Union, cast

import numpy as np
import torch
from torch import nn

from attnlab.core.errors import SizeError
from attnlab.core.spec import Spec
from attnlab.core import checks as check
from .base import Layer

Values = Union[float, Sequence[float], np.ndarray]     # a scalar or one value per channel


def _floats(layer, what, value):
    if value is None:
        return None
    vals = value.tolist() if hasattr(value, "tolist") else value
    vals = vals if isinstance(vals, (list, tuple)) else [vals]
    flat = []
    for v in vals:
        flat.extend(v if isinstance(v, (list, tuple)) else [v])
    try:
        return [float(v) for v in flat]
    except (TypeError, ValueError):
        raise check.fail(layer, what, "numbers (a scalar or one per channel)", value) from None



class Scaling(Layer):
    """`Y = scale · X + bias` with a fixed (not learned) scale and bias [scalingLayer].

    Parameters
    ----------
    scale, bias : float or sequence of float
        A scalar or one per channel; stored as buffers.

    Shape
    -----
    - `in`: any spec (B×T×C, B×C, B×C×H×W)
    - `out`: the same spec
    """

    stem = "scaling"
    time_local = True

    def __init__(self, scale: Values = 1.0, bias: Values = 0.0, name: str | None = None):
        super().__init__(name)
        for arg, v in (("scale", scale), ("bias", bias)):
            if v is None:
                raise check.fail(self, arg, "numbers (a scalar or one per channel)", v,
                                 f"Use e.g. {arg}={1.0 if arg == 'scale' else 0.0}.")
        self.scale = cast(list, _floats(self, "scale", scale))
        self.bias = cast(list, _floats(self, "bias", bias))

    def infer(self, specs: dict[str, Spec]) -> Spec:
        s = specs["in"]
        for what, v in (("Scale", self.scale), ("Bias", self.bias)):
            if len(v) != 1 and s.channels is not None and len(v) != s.channels:
                raise self.error(SizeError, "in", f"expected {what} with 1 or {s.channels} values "
                                 f"(one per channel), received {len(v)}.")
        return s

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        s = specs["in"]
        return _Scale(self.scale, self.bias, s.labels.index("C") if "C" in s.labels else -1,
                      len(s.labels))


class _Scale(nn.Module):
    def __init__(self, scale, bias, cdim, ndim):
        super().__init__()
        shape = [1] * ndim
        shape[cdim % ndim] = -1
        self.register_buffer("scale", torch.tensor(scale).view(shape))
        self.register_buffer("bias", torch.tensor(bias).view(shape))

    def forward(self, x):
        return x * self.scale + self.bias


class Identity(Layer):
    """Passes its input through unchanged [identityLayer]. No learnables.

    Shape
    -----
    - `in`: any spec (token ids stay ids)
    - `out`: the same spec
    """

    stem = "identity"
    time_local = True
    keeps_ids = True            # token ids stay ids

    def infer(self, specs: dict[str, Spec]) -> Spec:
        return specs["in"]

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return nn.Identity()
