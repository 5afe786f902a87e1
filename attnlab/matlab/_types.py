"""Type aliases for the signatures of `attnlab.matlab` (annotations only: nothing here is checked
at run time; the functions check their arguments themselves and raise ArgumentError)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Union

import numpy as np

if TYPE_CHECKING:
    from ..layers.base import Layer
    from .layers import OutputLayer

# A MATLAB size: a scalar, or a row vector ([h w], [h w c]) as a Python sequence or numpy array
# (MATLAB's doubles that hold integers arrive as ints).
Size = Union[int, Sequence[int], np.ndarray]
# Numbers given as a scalar or one per channel (statistics, scale, bias).
Values = Union[float, Sequence[float], np.ndarray]
# A MATLAB layer array: layers (and legacy output layers), nested lists concatenated.
LayerArray = Union["Layer", "OutputLayer", Sequence["LayerArray"]]

__all__ = ["Size", "Values", "LayerArray"]
