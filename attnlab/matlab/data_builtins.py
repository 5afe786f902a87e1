"""Base MATLAB functions scripts write around their networks, on data already in the
workspace: `containers.Map` (`keys`, `values`, `isKey`, `remove`), tables (`height`,
`width`), classes (`class`, `isa`, `iscell`, …), text (`lower`, `strsplit`, `strrep`,
`contains`, …) and numbers (`find`, `cumsum`, `fliplr`, …); with those of cell_builtins.py (cell
arrays) and date_builtins.py (dates for file names) in `FUNCTIONS`. Each takes the
interpreter's context first, as the other base functions do."""
from __future__ import annotations

import math

import numpy as np

from .budget import check_chars
from .cell_builtins import FUNCTIONS as _CELL_FUNCTIONS
from .date_builtins import FUNCTIONS as _DATE_FUNCTIONS
from .date_builtins import DateTime, Duration
from .numeric import _num, _scalar
from .objects import MapObject, StringArray, StructArray, Table
from .values import Categorical, Cell, Lambda, MatlabError, String, Struct, kind_of, matlab_shape

# ========================================================================= containers.Map ===

def _map(m, fn) -> MapObject:
    if not isinstance(m, MapObject):
        raise MatlabError(f"{fn}: expected a containers.Map, received {_what(m)}")
    return m


def keys(ctx, m):
    return _map(m, "keys").keys()


def values(ctx, m, which=None):
    return _map(m, "values").values(which)


def isKey(ctx, m, k):
    m = _map(m, "isKey")
    if isinstance(k, list):
        return np.array([m.key(x) in m.items for x in k], dtype=bool)
    return m.key(k) in m.items


def remove(ctx, m, k):
    m = _map(m, "remove")
    for key in (k if isinstance(k, list) else [k]):
        m.get(key)                                   # a missing key is MATLAB's error
        del m.items[m.key(key)]
    return m


def length_of(x) -> int | None:
    if isinstance(x, MapObject):
        return len(x.items)
    return None


# ================================================================================ tables ===

def height(ctx, x):
    return _shape(x)[0]


def width(ctx, x):
    shape = _shape(x)
    return shape[1] if len(shape) > 1 else 1


# =============================================================================== classes ===

def class_of(x) -> str:
    """MATLAB's class name of a value."""
    from ..layers.base import Layer
    from ..network import Network
    if isinstance(x, (bool, np.bool_)) or isinstance(x, np.ndarray) and x.dtype == bool:
        return "logical"
    if isinstance(x, String) or isinstance(x, StringArray):
        return "string"
    if isinstance(x, str):
        return "char"
    if isinstance(x, (int, float, np.floating, np.integer)) or isinstance(x, np.ndarray):
        return "single" if getattr(x, "dtype", None) == np.float32 else "double"
    if hasattr(x, "detach"):
        return "dlarray"
    if isinstance(x, Cell):
        return "cell"
    if isinstance(x, (Struct, StructArray)):
        return "struct"
    if isinstance(x, Categorical):
        return "categorical"
    if isinstance(x, Table):
        return "table"
    if isinstance(x, MapObject):
        return "containers.Map"
    if isinstance(x, DateTime):
        return "datetime"
    if isinstance(x, Duration):
        return "duration"
    if isinstance(x, Network):
        return "dlnetwork"
    if isinstance(x, list) and x and all(isinstance(v, Layer) for v in x) or isinstance(x, Layer):
        return "nnet.cnn.layer.Layer"
    if isinstance(x, list) and x and all(isinstance(v, str) for v in x):
        return "string"
    if isinstance(x, Lambda) or callable(x):
        return "function_handle"
    if type(x).__name__ == "TrainingOptions":
        return "nnet.cnn.TrainingOptions"
    return type(x).__name__


def matlab_class(ctx, x):
    return class_of(x)


_NUMERIC = ("double", "single", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
            "uint64")


def isa(ctx, x, name):
    if not isinstance(name, str):
        raise MatlabError(f"isa: expected a class name (text), received {_what(name)}")
    kind = class_of(x)
    want = str(name)
    if want == "numeric":
        return kind in _NUMERIC
    if want == "float":
        return kind in ("double", "single")
    if want in ("nnet.cnn.layer.Layer", "nnet.layer.Layer"):
        return kind == "nnet.cnn.layer.Layer"
    return kind == want


def _is(kinds):
    def check(ctx, x):
        return class_of(x) in kinds
    return check


def isscalar(ctx, x):
    return _size(x) == 1


def isvector(ctx, x):
    shape = _shape(x)
    return len(shape) == 2 and 1 in shape and 0 not in shape


def isrow(ctx, x):
    shape = _shape(x)
    return len(shape) == 2 and shape[0] == 1


def iscolumn(ctx, x):
    shape = _shape(x)
    return len(shape) == 2 and shape[1] == 1


def ismatrix(ctx, x):
    return len(_shape(x)) == 2


# ================================================================================== text ===

def _texts(x, fn):
    """A text or a list of texts → (list of str, rebuild function)."""
    if isinstance(x, str):
        return [str(x)], lambda out: (String(out[0]) if isinstance(x, String) else out[0])
    if isinstance(x, list) and all(isinstance(v, str) for v in x):
        kind = type(x)
        return [str(v) for v in x], lambda out: (Cell(out) if kind is Cell else
                                                 StringArray(String(v) for v in out))
    raise MatlabError(f"{fn}: expected text (a character vector, string or cell array of "
                      f"them), received {_what(x)}")


def _text_map(f, fn):
    def run(ctx, x, *args):
        items, back = _texts(x, fn)
        return back([f(t, *args) for t in items])
    return run


def strrep(ctx, s, old, new):
    items, back = _texts(s, "strrep")
    out = [t.replace(str(old), str(new)) for t in items]
    check_chars(ctx, sum(len(t) for t in out), "strrep's text")
    return back(out)


def strsplit(ctx, s, delimiter=" "):
    if not isinstance(s, str):
        raise MatlabError(f"strsplit: expected a text, received {_what(s)}")
    delims = [str(d) for d in delimiter] if isinstance(delimiter, list) else [str(delimiter)]
    parts = [str(s)]
    for d in delims:
        parts = [p for part in parts for p in part.split(d)]
    return Cell(parts)


def split(ctx, s, delimiter=None):
    if not isinstance(s, str):
        raise MatlabError(f"split: expected a text, received {_what(s)}")
    parts = str(s).split() if delimiter is None else str(s).split(str(delimiter))
    return StringArray(String(p) for p in parts)


def strjoin(ctx, c, delimiter=" "):
    if not isinstance(c, list) or not all(isinstance(v, str) for v in c):
        raise MatlabError(f"strjoin: expected a cell array of texts, received {_what(c)}")
    out = str(delimiter).replace("\\n", "\n").replace("\\t", "\t").join(str(v) for v in c)
    check_chars(ctx, len(out), "strjoin's text")
    return out


def join(ctx, c, delimiter=" "):
    out = strjoin(ctx, c, delimiter)
    return String(out)


def contains(ctx, s, pattern, *args):
    ignore = len(args) >= 2 and str(args[0]).lower() == "ignorecase" and bool(args[1])
    items, _ = _texts(s, "contains")
    pats = [str(p) for p in pattern] if isinstance(pattern, list) else [str(pattern)]
    def test(t):
        return any((p.lower() in t.lower()) if ignore else (p in t) for p in pats)
    found = [test(t) for t in items]
    return found[0] if isinstance(s, str) else np.array(found, dtype=bool)


def _edge(which):
    def check(ctx, s, pattern, *args):
        items, _ = _texts(s, which)
        pats = [str(p) for p in pattern] if isinstance(pattern, list) else [str(pattern)]
        test = (lambda t: any(t.startswith(p) for p in pats)) if which == "startsWith" else \
            (lambda t: any(t.endswith(p) for p in pats))
        found = [test(t) for t in items]
        return found[0] if isinstance(s, str) else np.array(found, dtype=bool)
    return check


def str2double(ctx, s):
    def one(t):
        try:
            return float(str(t).strip().replace("Inf", "inf").replace("NaN", "nan"))
        except ValueError:
            return math.nan
    if isinstance(s, str):
        return _scalar(one(s))
    if isinstance(s, list):
        return np.array([one(t) if isinstance(t, str) else math.nan for t in s], dtype=float)
    return math.nan


def int2str(ctx, x):
    v = np.round(np.asarray(_num(x), dtype=float))
    if v.size == 1:
        return str(int(v.ravel()[0])) if np.isfinite(v.ravel()[0]) else _fmt(v.ravel()[0])
    return "  ".join(str(int(a)) if np.isfinite(a) else _fmt(a) for a in v.ravel())


def mat2str(ctx, x, *args):
    if isinstance(x, str):
        return "'" + str(x).replace("'", "''") + "'"
    if isinstance(x, (bool, np.bool_)):
        return "true" if x else "false"
    arr = np.asarray(_num(x))
    digits = int(_scalar(_num(args[0]))) if args else 15
    def one(v):
        if arr.dtype == bool:
            return "true" if v else "false"
        return _fmt(float(v), digits)
    if arr.ndim == 0 or arr.size == 1:
        return one(arr.ravel()[0])
    rows = arr.reshape(1, -1) if arr.ndim == 1 else arr
    text = ";".join(" ".join(one(v) for v in row) for row in rows)
    check_chars(ctx, len(text), "mat2str's text")
    return "[" + text + "]"


def _fmt(v, digits=15) -> str:
    v = float(v)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Inf" if v > 0 else "-Inf"
    return f"{v:.{digits}g}"


def upper(ctx, s):
    return _text_map(str.upper, "upper")(ctx, s)


def lower(ctx, s):
    return _text_map(str.lower, "lower")(ctx, s)


def strtrim(ctx, s):
    return _text_map(str.strip, "strtrim")(ctx, s)


# ============================================================================== numbers ===

def isnan(ctx, x):
    out = np.isnan(np.asarray(_num(x), dtype=float))
    return bool(out) if out.ndim == 0 else out


def isinf(ctx, x):
    out = np.isinf(np.asarray(_num(x), dtype=float))
    return bool(out) if out.ndim == 0 else out


def find(ctx, x, k=None):
    arr = np.asarray(_num(x))
    idx = np.flatnonzero(arr.ravel(order="F")) + 1
    if k is not None:
        idx = idx[:int(_scalar(_num(k)))]
    if arr.ndim == 2 and arr.shape[1] == 1 and arr.shape[0] != 1:
        return idx.reshape(-1, 1).astype(float)
    return idx.astype(float)


def cumsum(ctx, x, dim=None):
    arr = np.asarray(_num(x), dtype=float)
    if arr.ndim <= 1:
        return np.cumsum(arr)
    axis = 0 if dim is None else int(_scalar(_num(dim))) - 1
    return np.cumsum(arr, axis=axis)


def fliplr(ctx, x):
    if isinstance(x, list):
        return type(x)(reversed(x))
    if isinstance(x, str):
        return x[::-1]
    arr = np.asarray(_num(x))
    return arr[::-1].copy() if arr.ndim == 1 else arr[:, ::-1].copy()


def flipud(ctx, x):
    arr = np.asarray(_num(x))
    return arr.copy() if arr.ndim == 1 else arr[::-1].copy()


def squeeze(ctx, x):
    arr = np.asarray(_num(x))
    if arr.ndim <= 2:
        return arr
    out = arr.reshape([d for d in arr.shape if d != 1] or [1])
    return out if out.ndim >= 2 else out.reshape(-1, 1) if out.size > 1 else _scalar(out)

# ================================================================================ helpers ===

def _shape(x):
    return matlab_shape(x)


def _size(x) -> int:
    return int(np.prod(_shape(x)))


def _what(x) -> str:
    return kind_of(x)


FUNCTIONS = {
    **_CELL_FUNCTIONS,
    "keys": keys, "values": values, "isKey": isKey, "remove": remove,
    "height": height, "width": width, "class": matlab_class, "isa": isa,
    "iscell": _is(("cell",)), "isstruct": _is(("struct",)), "ischar": _is(("char",)),
    "isstring": _is(("string",)), "islogical": _is(("logical",)),
    "isnumeric": _is(_NUMERIC + ("dlarray",)), "iscategorical": _is(("categorical",)),
    "istable": _is(("table",)), "isfloat": _is(("double", "single")),
    "iscellstr": lambda ctx, x: isinstance(x, Cell) and all(isinstance(v, str) and
                                                             not isinstance(v, String) for v in x),
    "isdatetime": _is(("datetime",)), "isscalar": isscalar, "isvector": isvector,
    "isrow": isrow, "iscolumn": iscolumn, "ismatrix": ismatrix,
    "strrep": strrep, "strsplit": strsplit, "split": split, "strjoin": strjoin, "join": join,
    "contains": contains, "startsWith": _edge("startsWith"), "endsWith": _edge("endsWith"),
    "str2double": str2double, "int2str": int2str, "mat2str": mat2str, "upper": upper,
    "lower": lower, "strtrim": strtrim, "isnan": isnan, "isinf": isinf, "find": find,
    "cumsum": cumsum, "fliplr": fliplr, "flipud": flipud, "squeeze": squeeze,
    **_DATE_FUNCTIONS,
}
