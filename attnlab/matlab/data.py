"""In-memory data as MATLAB scripts hold it: `arrayDatastore`, `combine`, `categorical`,
`categories`, `countcats`, `unique`, `isequal`, `scores2label`. Datastores here wrap arrays the
script already has (the reader never reads files); training unwraps them into the arrays
`al.train` takes."""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from attnlab.core.errors import ArgumentError
from ._options import _flag, _int, _parse, _word
from .values import Categorical, Cell

if TYPE_CHECKING:
    import torch

__all__ = ["ImageDatastore", "arrayDatastore", "combine", "categorical", "categories", "countcats", "unique",
           "isequal", "scores2label", "removecats", "addcats", "renamecats", "reordercats",
           "mergecats", "iscategory", "isundefined", "isordinal"]


class ArrayDatastore:
    """`arrayDatastore(X)`: observations along `IterationDimension` (1, as MATLAB's default),
    or the cells of a cell array."""

    def __init__(self, data):
        self.data = data

    def __len__(self):
        return len(self.data)

    def __repr__(self):
        return f"arrayDatastore({len(self)} observations)"


class CombinedDatastore:
    """`combine(ds1, ds2, …)`: reads one observation of each, in order (predictors, then
    targets)."""

    def __init__(self, parts):
        self.parts = parts

    def __repr__(self):
        return f"combine({', '.join(map(repr, self.parts))})"


class ImageDatastore:
    """An in-memory stand-in for MATLAB's `imageDatastore` (the reader never reads files), to
    give a script in its workspace: `images` B×C×H×W (attnlab's layout), `labels` a categorical
    (one per image), `files` the names `ds.Files` reads (default image1.png, …). Training and
    classify read it as (images, labels); `ds.Labels` and `ds.Files` read as in MATLAB."""

    def __init__(self, images: Sequence[Any] | np.ndarray, labels: Categorical,
                 files: Sequence[str] | None = None):
        self.images, self.labels = images, labels
        n = len(images)
        if len(labels) != n:
            raise ArgumentError(f"ImageDatastore: expected one label per image ({n}), received "
                                f"{len(labels)}.")
        self.files = Cell(files if files is not None else [f"image{i + 1}.png" for i in range(n)])

    def __len__(self):
        return len(self.images)

    def __repr__(self):
        return f"imageDatastore({len(self)} images in memory)"


def arrayDatastore(X: ArrayLike | torch.Tensor | Categorical, *args: Any, **kwargs: Any) -> ArrayDatastore:
    """`arrayDatastore(X, IterationDimension=d)`: the observations of `X` along dimension d (1-based), read one at a time, for `trainnet(ds, net, …)`."""
    fn = "arrayDatastore"
    _, o = _parse(fn, args, kwargs, {"IterationDimension": 1, "ReadSize": 1,
                                     "OutputType": "cell"})
    _word(fn, "OutputType", o["OutputType"], ("cell", "same"))
    _int(fn, "ReadSize", o["ReadSize"])
    dim = _int(fn, "IterationDimension", o["IterationDimension"])
    if isinstance(X, Categorical):
        return ArrayDatastore(X)
    if isinstance(X, (list, tuple)):
        if dim != 1:
            raise ArgumentError(f"{fn}: expected IterationDimension=1 for a cell array (one "
                                f"observation per cell), received {dim}.")
        return ArrayDatastore(list(X))
    arr: Any = X if hasattr(X, "shape") else np.asarray(X)      # an array or a tensor
    if dim > arr.ndim:
        raise ArgumentError(f"{fn}: expected IterationDimension at most {arr.ndim} for a "
                            f"{'×'.join(map(str, arr.shape))} array, received {dim}.")
    if dim != 1:                        # observations first, the rest in order
        arr = np.moveaxis(np.asarray(arr), dim - 1, 0)
    return ArrayDatastore(arr)


def combine(*datastores: ArrayDatastore | CombinedDatastore, **kwargs: Any) -> CombinedDatastore:
    """`combine(dsX, dsT)`: datastores read together, observation by observation (inputs, then targets)."""
    _parse("combine", (), kwargs, {"ReadOrder": "associated"})
    parts = []
    for ds in datastores:
        if isinstance(ds, CombinedDatastore):
            parts.extend(ds.parts)
        elif isinstance(ds, ArrayDatastore):
            parts.append(ds)
        else:
            raise ArgumentError(f"combine: expected datastores (arrayDatastore), received "
                                f"{type(ds).__name__}.")
    n = {len(p) for p in parts}
    if len(n) > 1:
        raise ArgumentError(f"combine: expected datastores with the same number of "
                            f"observations, received {sorted(n)}.")
    return CombinedDatastore(parts)


def as_training_data(X, T, fn):
    """(X, T) with datastores unwrapped: combine(dsX, dsT) → (X, T)."""
    if isinstance(X, CombinedDatastore):
        if T is not None:
            raise ArgumentError(f"{fn}: expected targets inside the combined datastore or as T, "
                                "received both.")
        if len(X.parts) != 2:
            raise ArgumentError(f"{fn}: expected combine(predictors, targets) — two datastores — "
                                f"received {len(X.parts)}.")
        return X.parts[0].data, X.parts[1].data
    if isinstance(X, ImageDatastore):
        return X.images, X.labels if T is None else T
    if isinstance(X, ArrayDatastore):
        raise ArgumentError(f"{fn}: expected predictors and targets, received an arrayDatastore "
                            "of predictors only. Combine them: ds = combine(dsX, dsT).")
    if isinstance(T, ArrayDatastore):
        T = T.data
    return X, T


def _text(v) -> str:
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return str(v.item() if isinstance(v, np.generic) else v)


def categorical(x: ArrayLike | Categorical | None = None, *args: Any,
                **kwargs: Any) -> Categorical:
    """`categorical()` (an empty 0×0 categorical); `categorical(x)`: categories are the sorted
    unique values (numbers compare as numbers); `categorical(x, valueset)` fixes them and their
    order (values outside it are <undefined>); `categorical(x, valueset, catnames)` renames
    them; `Ordinal=true` gives the categories an order (`<`, `>` compare by it)."""
    pos: list = []
    rest = list(args)
    while rest and len(pos) < 2 and not (isinstance(rest[0], str) and len(rest) >= 2 and
                                          rest[0].lower() in ("ordinal", "protected")):
        pos.append(rest.pop(0))
    _, o = _parse("categorical", tuple(rest), kwargs, {"Ordinal": False, "Protected": False})
    ordinal = _flag("categorical", "Ordinal", o["Ordinal"])
    _flag("categorical", "Protected", o["Protected"])
    valueset = pos[0] if pos else None
    catnames = pos[1] if len(pos) > 1 else None
    if x is None:
        if valueset is not None:
            raise ArgumentError("categorical: expected the data first, received none.")
        return Categorical([], [], ordinal, (0, 0))
    if isinstance(x, Categorical):
        return x if valueset is None and catnames is None and ordinal == x.ordinal else \
            categorical(np.asarray(x.values, dtype=object), valueset if valueset is not None
                        else x.categories, catnames, Ordinal=ordinal)
    vals = [x] if isinstance(x, str) else list(x) if isinstance(x, (list, tuple)) else \
        np.asarray(x).reshape(-1).tolist()
    if valueset is None:
        present = [v for v in vals if not (isinstance(v, float) and np.isnan(v)) and v != ""]
        try:
            unique = sorted(set(present))
        except TypeError:
            unique = sorted(set(present), key=str)
        valueset = unique
    else:
        valueset = [valueset] if isinstance(valueset, str) else list(valueset) \
            if isinstance(valueset, (list, tuple)) else np.asarray(valueset).reshape(-1).tolist()
    keys = [_text(v) for v in valueset]
    names = keys if catnames is None else [str(c) for c in (
        [catnames] if isinstance(catnames, str) else list(catnames)
        if isinstance(catnames, (list, tuple)) else np.asarray(catnames).reshape(-1))]
    if len(names) != len(keys):
        raise ArgumentError(f"categorical: expected one name per value of valueset ({len(keys)}), "
                            f"received {len(names)}.")
    rename = dict(zip(keys, names))
    return Categorical([rename.get(_text(v), "") for v in vals], list(dict.fromkeys(names)),
                       ordinal)


def _categorical(fn: str, c) -> Categorical:
    if not isinstance(c, Categorical):
        raise ArgumentError(f"{fn}: expected a categorical array, received "
                            f"{type(c).__name__}. Make one with categorical(x).")
    return c


def _names(value) -> list[str]:
    return [str(value)] if isinstance(value, str) else [str(v) for v in value]


def removecats(c: Categorical, oldcats: Any = None) -> Categorical:
    """`removecats(c, oldcats)`: those categories removed (their elements become
    <undefined>); `removecats(c)` removes the categories no element has."""
    c = _categorical("removecats", c)
    drop = set(_names(oldcats)) if oldcats is not None else \
        set(c.categories) - {str(v) for v in c.values}
    values = ["" if str(v) in drop else v for v in c.values]
    return Categorical(values, [k for k in c.categories if k not in drop], c.ordinal, c._shape)


def addcats(c: Categorical, newcats: Any, *args: Any, **kwargs: Any) -> Categorical:
    """`addcats(c, newcats)`: categories added at the end (no element has them yet)."""
    c = _categorical("addcats", c)
    new = [k for k in _names(newcats) if k not in c.categories]
    return Categorical(c.values, c.categories + new, c.ordinal, c._shape)


def renamecats(c: Categorical, oldnames: Any, newnames: Any = None) -> Categorical:
    """`renamecats(c, newnames)` (all, in order) or `renamecats(c, oldnames, newnames)`."""
    c = _categorical("renamecats", c)
    old, new = (c.categories, _names(oldnames)) if newnames is None else \
        (_names(oldnames), _names(newnames))
    if len(old) != len(new):
        raise ArgumentError(f"renamecats: expected {len(old)} new names, received {len(new)}.")
    missing = [k for k in old if k not in c.categories]
    if missing:
        raise ArgumentError(f"renamecats: {', '.join(missing)} is not a category of the array "
                            f"({', '.join(c.categories)}).")
    rename = dict(zip(old, new))
    return Categorical([rename.get(str(v), v) if str(v) else "" for v in c.values],
                       [rename.get(k, k) for k in c.categories], c.ordinal, c._shape)


def reordercats(c: Categorical, neworder: Any = None) -> Categorical:
    """`reordercats(c, neworder)`: the same categories in a new order (`reordercats(c)`:
    alphabetical)."""
    c = _categorical("reordercats", c)
    order = sorted(c.categories) if neworder is None else _names(neworder)
    if sorted(order) != sorted(c.categories):
        raise ArgumentError(f"reordercats: expected the categories {', '.join(c.categories)} in "
                            f"a new order, received {', '.join(order)}.")
    return Categorical(c.values, order, c.ordinal, c._shape)


def mergecats(c: Categorical, oldcats: Any, newcat: Any = None) -> Categorical:
    """`mergecats(c, oldcats, newcat)`: several categories made one (named newcat, default
    the first of them)."""
    c = _categorical("mergecats", c)
    old = _names(oldcats)
    target = str(newcat) if newcat is not None else old[0]
    values = [target if str(v) in old else v for v in c.values]
    cats: list[str] = []
    for k in c.categories:
        k2 = target if k in old else k
        if k2 not in cats:
            cats.append(k2)
    return Categorical(values, cats, c.ordinal, c._shape)


def iscategory(c: Categorical, names: Any) -> Any:
    """`iscategory(c, names)`: whether each name is a category of c."""
    c = _categorical("iscategory", c)
    found = [k in c.categories for k in _names(names)]
    return found[0] if isinstance(names, str) else np.array(found, dtype=bool)


def isundefined(c: Categorical) -> np.ndarray:
    """`isundefined(c)`: true where an element is <undefined>."""
    c = _categorical("isundefined", c)
    out = np.array([not str(v) for v in c.values], dtype=bool)
    return out.reshape(c.shape) if len(out) else out


def isordinal(c: Categorical) -> bool:
    """`isordinal(c)`: whether the categorical array's categories have an order (made with
    `categorical(…, Ordinal=true)`), which `<` and `>` compare by."""
    return _categorical("isordinal", c).ordinal


def categories(c: Categorical) -> Cell:
    """`categories(c)`: the categories of a categorical array, as a cell array."""
    if not isinstance(c, Categorical):
        raise ArgumentError(f"categories: expected a categorical array, received "
                            f"{type(c).__name__}. Make one with categorical(x).")
    return Cell(c.categories)


def countcats(c: Categorical) -> np.ndarray:
    """`countcats(c)`: how many elements of `c` are in each category, in category order (a
    column vector; <undefined> elements are not counted)."""
    if not isinstance(c, Categorical):
        raise ArgumentError(f"countcats: expected a categorical array, received "
                            f"{type(c).__name__}. Make one with categorical(x).")
    codes = c.codes()
    counts = np.bincount(codes[codes >= 0], minlength=len(c.categories))
    return counts.astype(float).reshape(-1, 1)


def unique(x: Any) -> Any:
    """`unique(x)`: the distinct values of `x`, sorted. A categorical gives a categorical of the
    categories that occur, in category order (its categories kept; <undefined> left out); a
    cell array of text or a string array the distinct texts in character order; a character
    vector its distinct characters; numbers a sorted row vector (NaN left out)."""
    if isinstance(x, Categorical):
        present = {str(v) for v in x.values if str(v)}
        return Categorical([c for c in x.categories if c in present], x.categories, x.ordinal)
    if isinstance(x, str):
        return "".join(sorted(set(x)))
    if isinstance(x, (list, tuple)) and x and all(isinstance(v, str) for v in x):
        kind = type(x[0])
        found = [kind(v) for v in sorted({str(v) for v in x})]
        return Cell(found) if isinstance(x, Cell) else found
    try:
        arr = np.asarray(x, dtype=float).ravel()
    except (TypeError, ValueError):
        raise ArgumentError(f"unique: expected numbers, text or a categorical array, received "
                            f"{type(x).__name__}.") from None
    return np.unique(arr[~np.isnan(arr)])


def isequal(a: Any, b: Any, *more: Any) -> bool:
    """`isequal(A, B, …)`: true when all are the same size and hold equal values: numbers by
    value (NaN equals nothing), text by its characters (a character vector equals the string
    with the same text), categoricals by label (<undefined> equals nothing), cell arrays and
    structs element by element."""
    return all(_isequal(a, x) for x in (b, *more))


def _isequal(a, b) -> bool:
    if isinstance(a, Categorical) or isinstance(b, Categorical):
        if not isinstance(a, Categorical):
            a, b = b, a
        other = list(b.values) if isinstance(b, Categorical) else [b] if isinstance(b, str) else \
            list(b) if isinstance(b, (list, tuple)) and all(isinstance(v, str) for v in b) else None
        if other is None or len(other) != len(a.values):
            return False
        return all(str(x) != "" and str(x) == str(y) for x, y in zip(a.values, other))
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and str(a) == str(b)
    if isinstance(a, dict) or isinstance(b, dict):
        return isinstance(a, dict) and isinstance(b, dict) and set(a) == set(b) and \
            all(_isequal(a[k], b[k]) for k in a)
    if isinstance(a, list) or isinstance(b, list):
        return isinstance(a, list) and isinstance(b, list) and len(a) == len(b) and \
            all(x is y or _isequal(x, y) for x, y in zip(a, b))
    try:
        x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    except (TypeError, ValueError):
        return a is b
    return _matlab_shape(x) == _matlab_shape(y) and bool(np.array_equal(x, y))


def _matlab_shape(x: np.ndarray) -> tuple[int, ...]:
    return (1, 1) if x.ndim == 0 else (1, x.shape[0]) if x.ndim == 1 else tuple(x.shape)


def scores2label(scores: ArrayLike | torch.Tensor, classNames: ArrayLike | Categorical,
                 *args: Any, **kwargs: Any) -> Categorical:
    """`Y = scores2label(scores, classNames)`: the class of the highest score of each
    observation, a categorical with categories classNames. The class axis is the last one whose
    size is numel(classNames) (attnlab's outputs are B×C, B×T×C), or `dim` (1-based)."""
    import torch
    fn = "scores2label"
    pos, _ = _parse(fn, args, kwargs, {}, positional=1)
    names = [str(c) for c in (classNames.categories if isinstance(classNames, Categorical) else
                              (list(classNames) if isinstance(classNames, (list, tuple)) else
                               np.asarray(classNames).reshape(-1)))]
    s = scores.detach().cpu().numpy() if isinstance(scores, torch.Tensor) else np.asarray(scores)
    if s.ndim == 1:
        s = s[None]
    if pos:
        dim = _int(fn, "dim", pos[0]) - 1
    else:
        dims = [d for d in range(s.ndim) if s.shape[d] == len(names)]
        if not dims:
            raise ArgumentError(f"{fn}: expected scores with a dimension of size "
                                f"{len(names)} (one per class name), received a "
                                f"{'×'.join(map(str, s.shape))} array.")
        dim = dims[-1]
    idx = s.argmax(axis=dim)
    return Categorical([names[i] for i in idx.reshape(-1)], names)


def _scores2label_both(scores, classNames, *args, **kwargs):
    """`[Y, scores] = scores2label(scores, classNames)`: the labels and each observation's
    highest score (what MATLAB's second output holds)."""
    import torch
    labels = scores2label(scores, classNames, *args, **kwargs)
    s = scores.detach().cpu().numpy() if isinstance(scores, torch.Tensor) else np.asarray(scores)
    s = s[None] if s.ndim == 1 else s
    names = labels.categories
    dims = [d for d in range(s.ndim) if s.shape[d] == len(names)]
    dim = _int("scores2label", "dim", args[0]) - 1 if args else dims[-1]
    return labels, s.max(axis=dim)


# `[labels, best] = scores2label(...)` in a script, `scores2label.with_scores(...)` in Python
setattr(scores2label, "with_scores", _scores2label_both)
