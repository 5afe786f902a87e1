"""Base MATLAB functions on cell arrays and element by element: `cell2mat`, `num2cell`,
`cellfun` and `arrayfun` (with 'UniformOutput' and 'ErrorHandler'). Each takes the
interpreter's context first, as the other base functions do; data_builtins.py lists them with
the rest."""
from __future__ import annotations

import numpy as np

from .budget import check_elements
from .numeric import _num, _scalar
from .objects import StructArray
from .values import Categorical, Cell, MatlabError, Struct, kind_of, matlab_shape


def cell2mat(ctx, c):
    """The contents of a cell array joined into one array as its cells lie: the cells of a
    row side by side, the rows one above the other ({a, b} is [a, b], {a; b} is [a; b]);
    numbers, or text joined into one text (a row of cells)."""
    if not isinstance(c, list):
        raise MatlabError(f"cell2mat: expected a cell array, received {kind_of(c)}")
    items = list(c)
    if not items:
        return np.zeros(0)
    rows = c.grid() if isinstance(c, Cell) else [items]
    if all(isinstance(x, str) for x in items):
        if len(rows) > 1:
            raise MatlabError("cell2mat: a column of text would be a character matrix, which "
                              "attnlab's reader does not have: use a string array "
                              "(string(c)) or join the texts (strjoin(c, ''))")
        return "".join(items)
    if any(isinstance(x, (Cell, Struct)) for x in items):
        raise MatlabError("cell2mat: the cells must hold numbers or text, not cell arrays or "
                          "structs")
    if len(rows) == 1 and all(np.ndim(_num(x)) <= 1 for x in items):
        out = np.concatenate([np.atleast_1d(np.asarray(_num(x), dtype=float)) for x in items])
        return _scalar(out) if out.size == 1 else out
    try:
        joined = [np.concatenate([_matrix(x) for x in r], axis=1) for r in rows]
    except ValueError:
        raise MatlabError("cell2mat: the contents must have the same number of rows to be "
                          "joined side by side") from None
    try:
        out = np.concatenate(joined, axis=0)
    except ValueError:
        raise MatlabError("cell2mat: the rows of cells must have the same number of columns "
                          "to be joined one above the other") from None
    return _scalar(out) if out.size == 1 else out


def _matrix(x) -> np.ndarray:
    """A cell's content as a 2-D array (a row vector 1×n, a number 1×1)."""
    a = np.asarray(_num(x), dtype=float)
    return a.reshape(1, -1) if a.ndim <= 1 else a


def num2cell(ctx, x):
    """Each element of an array in its own cell."""
    if isinstance(x, (Cell, Struct)):
        raise MatlabError(f"num2cell: expected an array, received {kind_of(x)}")
    if isinstance(x, str):
        return Cell(list(x))
    if isinstance(x, Categorical):
        return Cell(x.take(np.array([i])) for i in range(len(x)))
    arr = np.asarray(_num(x))
    check_elements(ctx, arr.size, "num2cell's cell array")
    out = Cell(_scalar(v) for v in arr.ravel(order="F"))
    return out.with_dims(arr.shape) if arr.ndim == 2 else out


def _call(f, args, fn):
    if not callable(f):
        raise MatlabError(f"{fn}: expected a function handle first (@(x) …), received "
                          f"{kind_of(f)}")
    return f(*args)


def _uniform(results, fn):
    out = []
    for r in results:
        if isinstance(r, (bool, np.bool_)):
            out.append(bool(r))
            continue
        v = _scalar(r) if isinstance(r, (np.ndarray, np.generic)) else r
        if not isinstance(v, (int, float, bool)) or isinstance(r, str):
            raise MatlabError(f"{fn}: the function returned {kind_of(r)} where UniformOutput "
                              "(the default) needs one number or logical per element. Set "
                              "'UniformOutput', false to get a cell array.")
        out.append(v)
    if out and all(isinstance(v, bool) for v in out):
        return np.array(out, dtype=bool)
    return np.array(out, dtype=float)


def _options(args, fn):
    """(the data arguments, UniformOutput, ErrorHandler)."""
    args = list(args)
    uniform, handler = True, None
    while len(args) >= 2 and isinstance(args[-2], str) and \
            args[-2].lower() in ("uniformoutput", "errorhandler"):
        if args[-2].lower() == "uniformoutput":
            uniform = bool(args[-1])
        else:
            handler = args[-1]
        args = args[:-2]
    if not args:
        raise MatlabError(f"{fn}: expected data after the function")
    return args, uniform, handler


def _apply(f, columns, uniform, handler, fn, shape=None):
    results = []
    for k, items in enumerate(zip(*columns)):
        try:
            results.append(_call(f, items, fn))
        except MatlabError as e:
            if handler is None:
                raise
            err = Struct(message=e.message, identifier=e.identifier, index=k + 1)
            results.append(_call(handler, (err, *items), fn))
    if uniform:
        out = _uniform(results, fn)
        return out.reshape(shape) if shape is not None and out.size == int(np.prod(shape)) \
            else out
    return Cell(results)


def cellfun(ctx, f, *args):
    """`cellfun(@f, c)`, several cell arrays, `'UniformOutput', false`, `'ErrorHandler', @h`;
    the old names ('isempty', 'length') as text too."""
    args, uniform, handler = _options(args, "cellfun")
    if isinstance(f, str):
        name = f
        simple = {"isempty": lambda x: _size(x) == 0, "length": lambda x: max(matlab_shape(x)) if
                  0 not in matlab_shape(x) else 0, "ndims": lambda x: len(matlab_shape(x)),
                  "prodofsize": _size, "isreal": lambda x: True,
                  "isclass": None}
        if name not in simple or simple[name] is None:
            raise MatlabError(f"cellfun: expected a function handle (@{name}) first")
        f = simple[name]
    for a in args:
        if not isinstance(a, list):
            raise MatlabError(f"cellfun: expected cell arrays after the function, received "
                              f"{kind_of(a)}")
    if len({len(a) for a in args}) > 1:
        raise MatlabError("cellfun: all the cell arrays must have the same size")
    out = _apply(f, [list(a) for a in args], uniform, handler, "cellfun")
    dims = args[0].dims if isinstance(args[0], Cell) else None
    if isinstance(out, Cell) and dims is not None:
        return out.with_dims(dims)
    if isinstance(out, np.ndarray) and dims is not None and dims[0] > 1:
        return out.reshape(dims, order="F")            # as the cells lie: a column stays one
    return out


def arrayfun(ctx, f, *args):
    """`arrayfun(@f, A)`: f of each element (several arrays element by element)."""
    args, uniform, handler = _options(args, "arrayfun")
    columns, shape = [], None
    for a in args:
        if isinstance(a, (StructArray, list)) and not isinstance(a, str):
            columns.append(list(a))
        elif isinstance(a, Struct):
            columns.append([a])
        elif isinstance(a, Categorical):
            columns.append([a.take(np.array([i])) for i in range(len(a))])
        else:
            arr = np.asarray(_num(a))
            shape = arr.shape if arr.ndim > 1 else None
            columns.append([_scalar(v) for v in arr.ravel(order="F")])
    if len({len(c) for c in columns}) > 1:
        raise MatlabError("arrayfun: all the arrays must have the same number of elements")
    out = _apply(f, columns, uniform, handler, "arrayfun", shape)
    if isinstance(out, np.ndarray) and shape is not None:
        out = out.reshape(shape, order="F")
    return out


def _size(x) -> int:
    return int(np.prod(matlab_shape(x)))


FUNCTIONS = {"cell2mat": cell2mat, "num2cell": num2cell, "cellfun": cellfun, "arrayfun": arrayfun}
