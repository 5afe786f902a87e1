"""Base MATLAB's array functions along a dimension: sum, mean, min, max, std, var, sort, cat.

Each takes the interpreter's context first, as the other base functions do. A 1-D array is a
1×n row vector; without `dim` a matrix reduces along its first dimension (columns), a vector
over all of it, as MATLAB does.
"""
from __future__ import annotations

import numpy as np

from .values import MatlabError


def _scalar(x):
    """A one-element array or numpy scalar as a Python number; whole floats as ints."""
    if isinstance(x, np.ndarray) and x.size == 1:
        x = x.reshape(()).item()
    elif isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and x.is_integer() and abs(x) < 2 ** 53:
        return int(x)
    return x


def _num(x):
    """A MATLAB numeric value (number, array, tensor) as a number or numpy array."""
    if isinstance(x, (bool, int, float, np.ndarray)):
        return x
    if isinstance(x, (np.number, np.bool_)):
        return x.item()
    if hasattr(x, "detach"):                                 # a tensor, e.g. from dlarray
        return x.detach().cpu().numpy()
    raise MatlabError(f"expected a number or numeric array, received {type(x).__name__}")


def _dim(fn: str, dim) -> int:
    d = _scalar(_num(dim))
    if not isinstance(d, int) or isinstance(d, bool) or d < 1:
        raise MatlabError(f"{fn}: expected a dimension ≥ 1, received {d!r}")
    return d


def _along(fn: str, reduce, x, dim=None):
    """`reduce(array, axis)` of `x` along MATLAB dimension `dim` (None: the first that is not
    1), keeping a matrix's shape (mean(A, 2) is a column)."""
    x = _num(x)
    if isinstance(dim, str):
        if dim.lower() != "all":
            raise MatlabError(f"{fn}: expected a dimension or \"all\", received '{dim}'")
        x, dim = np.ravel(np.asarray(x, dtype=float)), None      # mean(x, "all")
    if not isinstance(x, np.ndarray):
        return _scalar(reduce(np.asarray(x, dtype=float).reshape(1), 0))
    if x.ndim == 1 or x.ndim == 2 and 1 in x.shape and dim is None:
        if x.size == 0:
            return np.zeros(0)
        if dim is not None and (x.ndim == 1 and _dim(fn, dim) == 1):
            return x.copy()                          # a row along its rows: itself
        return _scalar(reduce(np.ravel(x), 0))
    axis = 0 if dim is None else _dim(fn, dim) - 1
    if axis >= x.ndim:
        return x.copy()
    return reduce(x, axis)


def _keep(fn):
    return lambda a, axis: fn(a, axis=axis, keepdims=a.ndim > 1)


def reduction(fn):
    """sum(x), sum(x, dim) and the others of its kind."""
    def f(ctx, x, dim=None):
        return _along(fn.__name__, _keep(fn), x, dim)
    return f


def extreme(fn):
    """max(x), max(x, [], dim), max(a, b) (elementwise); min likewise."""
    def f(ctx, x, y=None, dim=None):
        if y is not None and not (isinstance(y, np.ndarray) and y.size == 0):
            return _scalar(fn(_num(x), _num(y)))  # max(a, b)
        x = _num(x)
        if isinstance(x, np.ndarray) and x.size == 0:
            return np.zeros(0)                       # max([]) is [] in MATLAB
        pick = np.max if fn is np.maximum else np.min
        return _along("max" if fn is np.maximum else "min", _keep(pick), x, dim)
    return f


def spread(fn):
    """std(x), std(x, w), std(x, w, dim): w 0 divides by n−1, 1 by n; var likewise."""
    def f(ctx, x, w=0, dim=None):
        w = 0 if isinstance(w, np.ndarray) and w.size == 0 else _scalar(_num(w))
        if w not in (0, 1):
            raise MatlabError(f"{fn.__name__}: expected the weight 0 or 1, received {w!r}")
        def reduce(a, axis):
            n = a.shape[axis]
            ddof = 1 if w == 0 and n > 1 else 0
            return fn(a, axis=axis, ddof=ddof, keepdims=a.ndim > 1)
        return _along(fn.__name__, reduce, x, dim)
    return f


def sort(ctx, x, *args):
    """[y, i] = sort(x), sort(x, dim), sort(x, 'descend'): i the 1-based positions."""
    x = _num(x)
    descend, dim = False, None
    for a in args:
        if isinstance(a, str):
            if a.lower() not in ("ascend", "descend"):
                raise MatlabError(f"sort: expected 'ascend' or 'descend', received '{a}'")
            descend = a.lower() == "descend"
        else:
            dim = _dim("sort", a)
    arr = np.atleast_1d(np.asarray(x, dtype=float))
    axis = (arr.ndim - 1 if arr.ndim == 1 or 1 in arr.shape[:1] else 0) if dim is None \
        else dim - 1 if arr.ndim > 1 else 0
    order = np.argsort(-arr if descend else arr, axis=axis, kind="stable")
    y = np.take_along_axis(arr, order, axis=axis)
    return y, order + 1


def cat(ctx, dim, *arrays):
    """cat(dim, A, B, …): arrays joined along dimension dim (1 rows, 2 columns); a 1-D array is
    a 1×n row, and empty arrays are left out, as MATLAB does."""
    d = _dim("cat", dim)
    parts = [np.asarray(_num(a), dtype=float) for a in arrays]
    parts = [p.reshape(1, -1) if p.ndim == 1 else p.reshape(1, 1) if p.ndim == 0 else p
             for p in parts if p.size]
    if not parts:
        return np.zeros(0)
    ndim = max(d, max(p.ndim for p in parts))
    parts = [p.reshape(p.shape + (1,) * (ndim - p.ndim)) for p in parts]
    try:
        return np.concatenate(parts, axis=d - 1)
    except ValueError:
        sizes = ", ".join("×".join(map(str, p.shape)) for p in parts)
        raise MatlabError(f"cat: the arrays ({sizes}) must agree in every dimension but "
                          f"dimension {d}") from None
