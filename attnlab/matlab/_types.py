"""Type aliases for the signatures of `attnlab.matlab` (annotations only: nothing here is checked
at run time; the functions check their arguments themselves and raise ArgumentError)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Union

import numpy as np

# A MATLAB size: a scalar, or a row vector ([h w], [h w c]) as a Python sequence or numpy array
# (MATLAB's doubles that hold integers arrive as ints).
Size = Union[int, Sequence[int], np.ndarray]
# Numbers given as a scalar or one per channel (statistics, scale, bias).
Values = Union[float, Sequence[float], np.ndarray]

__all__ = ["Size", "Values"]
