"""Base MATLAB functions scripts write around their networks, on data already in the
workspace: cell arrays (`cell2mat`, `num2cell`, `cellfun`, `arrayfun`), `containers.Map`
(`keys`, `values`, `isKey`, `remove`), tables (`height`, `width`), classes (`class`, `isa`,
`iscell`, …), text (`lower`, `strsplit`, `strrep`, `contains`, …) and dates for file names
(`datetime`, `datestr`, `now`, `clock`). Each takes the interpreter's context first, as the
other base functions do."""
from __future__ import annotations

import datetime as _dt
import math

import numpy as np

from .budget import check_chars, check_elements
from .numeric import _num, _scalar
from .objects import MapObject, StringArray, StructArray, Table
from .values import Categorical, Cell, Lambda, MatlabError, String, Struct, kind_of, matlab_shape

# ============================================================================ cell arrays ===


def cell2mat(ctx, c):
    """The contents of a cell array joined into one array as its cells lie: the cells of a
    row side by side, the rows one above the other ({a, b} is [a, b], {a; b} is [a; b]);
    numbers, or text joined into one text (a row of cells)."""
    if not isinstance(c, list):
        raise MatlabError(f"cell2mat: expected a cell array, received {_what(c)}")
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
        raise MatlabError(f"num2cell: expected an array, received {_what(x)}")
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
                          f"{_what(f)}")
    return f(*args)


def _uniform(results, fn):
    out = []
    for r in results:
        if isinstance(r, (bool, np.bool_)):
            out.append(bool(r))
            continue
        v = _scalar(r) if isinstance(r, (np.ndarray, np.generic)) else r
        if not isinstance(v, (int, float, bool)) or isinstance(r, str):
            raise MatlabError(f"{fn}: the function returned {_what(r)} where UniformOutput "
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
        simple = {"isempty": lambda x: _size(x) == 0, "length": lambda x: max(_shape(x)) if
                  0 not in _shape(x) else 0, "ndims": lambda x: len(_shape(x)),
                  "prodofsize": _size, "isreal": lambda x: True,
                  "isclass": None}
        if name not in simple or simple[name] is None:
            raise MatlabError(f"cellfun: expected a function handle (@{name}) first")
        f = simple[name]
    for a in args:
        if not isinstance(a, list):
            raise MatlabError(f"cellfun: expected cell arrays after the function, received "
                              f"{_what(a)}")
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


# ================================================================================= dates ===

class DateTime:
    """A `datetime`: a moment and its display `Format` (MATLAB's letters: yyyy MM dd HH mm ss
    SSS MMM MMMM eee EEEE a). Text of it (`string(t)`, `char(t)`) follows the format; `t + d`
    adds a duration, `t1 - t2` is a duration."""

    def __init__(self, moment: _dt.datetime, fmt: str = "dd-MMM-yyyy HH:mm:ss"):
        self.moment, self.format = moment, fmt

    shape = property(lambda self: (1, 1))

    def text(self) -> str:
        return _cldr(self.moment, self.format)

    def __repr__(self):
        return self.text()

    def __add__(self, other):
        if isinstance(other, Duration):
            return DateTime(self.moment + _dt.timedelta(days=other.days), self.format)
        if isinstance(other, (int, float)) and not isinstance(other, bool):
            return DateTime(self.moment + _dt.timedelta(days=float(other)), self.format)
        return NotImplemented

    __radd__ = __add__

    def __sub__(self, other):
        if isinstance(other, DateTime):
            return Duration((self.moment - other.moment).total_seconds() / 86400)
        if isinstance(other, Duration):
            return DateTime(self.moment - _dt.timedelta(days=other.days), self.format)
        if isinstance(other, (int, float)) and not isinstance(other, bool):
            return DateTime(self.moment - _dt.timedelta(days=float(other)), self.format)
        return NotImplemented

    def _cmp(self, other, op):
        if not isinstance(other, DateTime):
            raise MatlabError("comparing a datetime with something that is not one")
        return op(self.moment, other.moment)

    def __lt__(self, other):
        return self._cmp(other, lambda a, b: a < b)

    def __gt__(self, other):
        return self._cmp(other, lambda a, b: a > b)

    def __le__(self, other):
        return self._cmp(other, lambda a, b: a <= b)

    def __ge__(self, other):
        return self._cmp(other, lambda a, b: a >= b)


class Duration:
    """A `duration` (kept in days): `hours(2)`, `t2 - t1`; `seconds(d)` reads it back."""

    def __init__(self, days: float):
        self.days = float(days)

    shape = property(lambda self: (1, 1))

    def __repr__(self):
        return f"{self.days * 24:g} hr"

    def __add__(self, other):
        if isinstance(other, Duration):
            return Duration(self.days + other.days)
        if isinstance(other, DateTime):
            return other + self
        return NotImplemented

    __radd__ = __add__

    def __sub__(self, other):
        if isinstance(other, Duration):
            return Duration(self.days - other.days)
        return NotImplemented

    def __mul__(self, k):
        if isinstance(k, (int, float)) and not isinstance(k, bool):
            return Duration(self.days * k)
        return NotImplemented

    __rmul__ = __mul__

    def __truediv__(self, k):
        if isinstance(k, Duration):
            return self.days / k.days
        if isinstance(k, (int, float)) and not isinstance(k, bool):
            return Duration(self.days / k)
        return NotImplemented

    def __lt__(self, other):
        return self.days < _days(other)

    def __gt__(self, other):
        return self.days > _days(other)


def _days(x) -> float:
    if isinstance(x, Duration):
        return x.days
    raise MatlabError("comparing a duration with something that is not one")


_CLDR = [("yyyy", "%Y"), ("MMMM", "%B"), ("MMM", "%b"), ("MM", "%m"), ("dd", "%d"),
         ("EEEE", "%A"), ("eeee", "%A"), ("EEE", "%a"), ("eee", "%a"), ("HH", "%H"),
         ("hh", "%I"), ("mm", "%M"), ("ss", "%S"), ("yy", "%y"), ("a", "%p")]


def _cldr(moment: _dt.datetime, fmt: str) -> str:
    """A datetime's Format (Unicode letters, as MATLAB's datetime takes them) applied."""
    out, i = [], 0
    while i < len(fmt):
        if fmt[i] == "'":                      # quoted literal text
            j = fmt.find("'", i + 1)
            j = len(fmt) if j < 0 else j
            out.append(fmt[i + 1:j])
            i = j + 1
            continue
        if fmt.startswith("SSS", i) or fmt.startswith("S", i) and fmt[i] == "S":
            n = len(fmt[i:]) - len(fmt[i:].lstrip("S"))
            out.append(f"{moment.microsecond:06d}"[:n].ljust(n, "0"))
            i += n
            continue
        for code, py in _CLDR:
            if fmt.startswith(code, i):
                out.append(moment.strftime(py))
                i += len(code)
                break
        else:
            if fmt[i] in "dMyHms":             # a single letter: no leading zero
                single = {"d": moment.day, "M": moment.month, "y": moment.year,
                          "H": moment.hour, "m": moment.minute, "s": moment.second}[fmt[i]]
                out.append(str(single))
            else:
                out.append(fmt[i])
            i += 1
    return "".join(out)


# datestr's letters (MATLAB's own, not datetime's): longest first
_DATESTR = [("yyyy", "%Y"), ("yy", "%y"), ("mmmm", "%B"), ("mmm", "%b"), ("mm", "%m"),
            ("dddd", "%A"), ("ddd", "%a"), ("dd", "%d"), ("HH", "%H"), ("MM", "%M"),
            ("SS", "%S"), ("PM", "%p"), ("AM", "%p")]
_DATESTR_NUMBERED = {0: "dd-mmm-yyyy HH:MM:SS", 1: "dd-mmm-yyyy", 2: "mm/dd/yy", 13: "HH:MM:SS",
                     23: "mm/dd/yyyy", 29: "yyyy-mm-dd", 30: "yyyymmddTHHMMSS", 31:
                     "yyyy-mm-dd HH:MM:SS"}


def _datestr_text(moment: _dt.datetime, fmt: str) -> str:
    out, i = [], 0
    while i < len(fmt):
        if fmt.startswith("FFF", i):
            out.append(f"{moment.microsecond // 1000:03d}")
            i += 3
            continue
        for code, py in _DATESTR:
            if fmt.startswith(code, i):
                out.append(moment.strftime(py))
                i += len(code)
                break
        else:
            out.append(fmt[i])
            i += 1
    return "".join(out)


_EPOCH = _dt.datetime(1, 1, 1)


def _from_datenum(n: float) -> _dt.datetime:
    """MATLAB's serial date number (days from year 0) → a datetime."""
    return _EPOCH + _dt.timedelta(days=float(n) - 367)


def _datenum(moment: _dt.datetime) -> float:
    return (moment - _EPOCH).total_seconds() / 86400 + 367


def now(ctx):
    return _datenum(_dt.datetime.now())


def clock(ctx):
    t = _dt.datetime.now()
    return np.array([t.year, t.month, t.day, t.hour, t.minute,
                     t.second + t.microsecond / 1e6], dtype=float)


def datestr(ctx, t=None, fmt=None):
    """`datestr(now)`, `datestr(now, 'yyyy-mm-dd_HH-MM-SS')`, `datestr(t, 30)` (a numbered
    format), `datestr(datetime(...))`."""
    if t is None:
        moment = _dt.datetime.now()
    elif isinstance(t, DateTime):
        moment = t.moment
    else:
        moment = _from_datenum(float(_scalar(_num(t))))
    if fmt is None:
        fmt = _DATESTR_NUMBERED[0 if moment.time() != _dt.time(0) else 1]
    elif not isinstance(fmt, str):
        code = int(_scalar(_num(fmt)))
        if code not in _DATESTR_NUMBERED:
            raise MatlabError(f"datestr: the numbered format {code} is not one attnlab knows; "
                              f"give the format as text, e.g. 'yyyy-mm-dd'")
        fmt = _DATESTR_NUMBERED[code]
    return _datestr_text(moment, str(fmt))


def datetime(ctx, *args):
    """`datetime('now')`, `datetime('today')`, `datetime(y, m, d[, h, mi, s])`,
    `datetime(..., 'Format', f)`."""
    args = list(args)
    fmt = None
    if len(args) >= 2 and isinstance(args[-2], str) and args[-2].lower() == "format":
        fmt = str(args[-1])
        args = args[:-2]
    if not args or len(args) == 1 and isinstance(args[0], str) and args[0].lower() == "now":
        moment = _dt.datetime.now()
    elif len(args) == 1 and isinstance(args[0], str) and args[0].lower() in ("today",
                                                                             "tomorrow",
                                                                             "yesterday"):
        day = _dt.datetime.combine(_dt.date.today(), _dt.time(0))
        moment = day + _dt.timedelta(days={"today": 0, "tomorrow": 1,
                                           "yesterday": -1}[args[0].lower()])
        fmt = fmt or "dd-MMM-yyyy"
    elif all(isinstance(a, (int, float)) and not isinstance(a, bool) for a in args) and \
            3 <= len(args) <= 6:
        parts = [float(a) for a in args] + [0.0] * (6 - len(args))
        y, mo, d, h, mi, sec = parts
        moment = _dt.datetime(int(y), int(mo), 1) + _dt.timedelta(
            days=d - 1, hours=h, minutes=mi, seconds=sec)
        if len(args) == 3:
            fmt = fmt or "dd-MMM-yyyy"
    else:
        raise MatlabError("datetime: attnlab reads datetime('now'), datetime('today') and "
                          "datetime(y, m, d, h, mi, s), with 'Format'; parse dates of text in "
                          "Python and give them as workspace variables")
    return DateTime(moment, fmt or "dd-MMM-yyyy HH:mm:ss")


def _duration(days_per_unit, name):
    def make(ctx, x):
        if isinstance(x, Duration):              # seconds(d): the duration in that unit
            return _scalar(x.days / days_per_unit)
        return Duration(float(_scalar(_num(x))) * days_per_unit)
    make.__name__ = name
    return make


def date_text(x) -> str | None:
    """The text of a datetime or duration (string(t), char(t)); None for other values."""
    if isinstance(x, DateTime):
        return x.text()
    if isinstance(x, Duration):
        return repr(x)
    return None


# ================================================================================ helpers ===

def _shape(x):
    return matlab_shape(x)


def _size(x) -> int:
    return int(np.prod(_shape(x)))


def _what(x) -> str:
    return kind_of(x)


FUNCTIONS = {
    "cell2mat": cell2mat, "num2cell": num2cell, "cellfun": cellfun, "arrayfun": arrayfun,
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
    "now": now, "clock": clock, "datestr": datestr, "datetime": datetime,
    "seconds": _duration(1 / 86400, "seconds"), "minutes": _duration(1 / 1440, "minutes"),
    "hours": _duration(1 / 24, "hours"), "days": _duration(1.0, "days"),
}
