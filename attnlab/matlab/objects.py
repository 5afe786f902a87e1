"""MATLAB's container objects as a script uses them: string arrays that compare element by
element, struct arrays (`s(2).a = 1`), tables (`net.Learnables`, `table(...)`), and
`containers.Map`. Each indexes itself (`matlab_index`, `matlab_assign`), so the interpreter
needs to know nothing about them."""
from __future__ import annotations

import copy
from typing import Any

import numpy as np

from attnlab.core.errors import close_matches
from .values import Cell, MatlabError, String, Struct


class StringArray(list):
    """A string array ["a" "b"] whose `==`/`~=` compare element by element (a logical array),
    as MATLAB's do."""

    def _compare(self, other, same: bool):
        if isinstance(other, str):
            others = [str(other)] * len(self)
        elif isinstance(other, list) and len(other) in (1, len(self)):
            others = [str(o) for o in other] * (len(self) if len(other) == 1 else 1)
        else:
            raise MatlabError(f"comparing a string array of {len(self)} with "
                              f"{type(other).__name__}: the sizes must agree")
        return np.array([(str(a) == str(b)) == same for a, b in zip(self, others)], dtype=bool)

    def __eq__(self, other):
        return self._compare(other, True)

    def __ne__(self, other):
        return self._compare(other, False)

    __hash__ = None


def _positions(interp, container, args, scope, node):
    """The 0-based indices of a script's index arguments into `container` (MATLAB's `end`,
    `:`, logical masks and ranges), as the interpreter computes them."""
    try:
        return interp._index_args(args, container, scope)
    except MatlabError as e:
        if e.node is None:
            e.node = node
        raise


def _pick(n: int, index) -> list[int]:
    """The positions `index` (an int, a slice, an int array) selects among n."""
    if isinstance(index, slice):
        return list(range(n))[index]
    if isinstance(index, (int, np.integer)):
        picked = [int(index)]
    else:
        picked = [int(i) for i in np.atleast_1d(index)]
    bad = [i for i in picked if i >= n]
    if bad:
        raise MatlabError(f"Index exceeds the number of elements ({n}): index {bad[0] + 1}.")
    return picked


class StructArray(list):
    """A 1×N struct array: `s(2).a = 1` grows it, `s(i)` is the struct, `numel(s)` N; every
    element has the same fields (a field set on one is [] on the others), as in MATLAB."""

    shape = property(lambda self: (1, len(self)))

    def fields(self) -> list[str]:
        names: dict[str, None] = {}
        for s in self:
            names.update(dict.fromkeys(s))
        return list(names)

    def matlab_index(self, interp, args, scope, node, brace=False):
        idx = _positions(interp, self, args, scope, node)
        if brace:
            raise MatlabError("Brace indexing is not supported for variables of this type "
                              "(a struct array): use s(i).", node=node)
        if len(idx) == 2 and idx[0] in (0, slice(None)):
            idx = idx[1:]
        if len(idx) != 1:
            raise MatlabError("a struct array takes one index, s(i)", node=node)
        picked = _pick(len(self), idx[0])
        if isinstance(idx[0], (int, np.integer)):
            return self[picked[0]]
        return StructArray(self[i] for i in picked)

    def matlab_assign(self, idx, value):
        """A copy with element(s) `idx` set to `value` (a struct; [] deletes them)."""
        if len(idx) == 2 and idx[0] in (0, slice(None)):
            idx = idx[1:]
        if len(idx) != 1:
            raise MatlabError("a struct array takes one index, s(i) = value")
        items = list(self)
        if isinstance(value, np.ndarray) and value.size == 0:
            drop = set(_pick(len(items), idx[0]))
            return StructArray(s for i, s in enumerate(items) if i not in drop)
        if not isinstance(value, Struct):
            raise MatlabError(f"a struct array holds structs, received {type(value).__name__}")
        positions = range(len(items))[idx[0]] if isinstance(idx[0], slice) else \
            np.atleast_1d(idx[0]).tolist()
        for i in positions:
            while len(items) <= i:
                items.append(None)
            items[int(i)] = value
        return _aligned(items)


def _aligned(items) -> StructArray:
    """Struct array elements with the same fields, in order: missing fields are [] (and a
    never-set element is a struct of []), as MATLAB fills them."""
    names: dict[str, None] = {}
    for s in items:
        if s is not None:
            names.update(dict.fromkeys(s))
    out = []
    for s in items:
        s = Struct() if s is None else s
        out.append(Struct((k, s[k] if k in s else np.zeros(0)) for k in names))
    return StructArray(out)


def struct_array(elements) -> StructArray:
    return _aligned(list(elements))


# ============================================================================== tables ===

class Table:
    """A MATLAB table: named columns (variables) of one height. `T.Name` is a column, `T(rows,
    vars)` a table, `T{rows, var}` the contents, `height(T)`, `width(T)`, `size(T)`.
    Columns are numeric arrays (a row per observation), string arrays, categoricals or cell
    arrays."""

    def __init__(self, columns: dict[str, Any]):
        self.columns = dict(columns)
        heights = {_height(v) for v in self.columns.values()}
        if len(heights) > 1:
            raise MatlabError(f"table: all variables must have the same number of rows, "
                              f"received {sorted(heights)}")
        self.height = heights.pop() if heights else 0

    @property
    def shape(self):
        return (self.height, len(self.columns))

    def __repr__(self):
        return f"<table {self.height}×{len(self.columns)}: {', '.join(self.columns)}>"

    def variable(self, name: str):
        if name == "Properties":
            return Struct(VariableNames=Cell(self.columns), RowNames=Cell(),
                          Description="")
        if name not in self.columns:
            raise MatlabError(f"Unrecognized table variable name '{name}'; the variables are "
                              f"{', '.join(self.columns)}.{close_matches(name, list(self.columns))}")
        return self.columns[name]

    def set_variable(self, name: str, value) -> "Table":
        columns = dict(self.columns)
        columns[name] = value
        return Table(columns)

    def rows(self, index) -> "Table":
        picked = _pick(self.height, index)
        return Table({k: _rows(v, picked) for k, v in self.columns.items()})

    def matlab_index(self, interp, args, scope, node, brace=False):
        subs = subscripts(interp, args, scope, self.shape)
        if len(subs) != 2:
            raise MatlabError("a table takes two subscripts, T(rows, variables)", node=node)
        rows, which = subs
        names = list(self.columns)
        if isinstance(which, str):
            self.variable(str(which))
            chosen = [str(which)]
        elif isinstance(which, list) and all(isinstance(w, str) for w in which):
            chosen = [str(w) for w in which]
            for w in chosen:
                self.variable(w)
        else:
            chosen = [names[i] for i in _pick(len(names), positions(which, len(names)))]
        picked = self if isinstance(rows, slice) and rows == slice(None) else \
            self.rows(positions(rows, self.height))
        if not brace:
            return Table({k: picked.columns[k] for k in chosen})
        if len(chosen) != 1:
            raise MatlabError("T{rows, variable}: give one variable", node=node)
        column = picked.columns[chosen[0]]
        if isinstance(column, list) and len(column) == 1:
            return column[0]
        if isinstance(column, np.ndarray) and column.shape[0] == 1:
            from .numeric import _scalar
            return _scalar(column[0]) if column[0].size == 1 else column[0]
        return column


def subscripts(interp, args, scope, shape) -> list:
    """The values of a script's subscripts, `:` as slice(None) and `end` the size along
    that subscript (the last one counts all the dimensions left)."""
    children = [c for c in (args.named_children if args else [])
                if c.type not in ("comment", "line_continuation")]
    stack = interp.__dict__.setdefault("_end_stack", [])
    out: list = []
    for k, c in enumerate(children):
        if c.type == "spread_operator":
            out.append(slice(None))
            continue
        rest = shape[k:] if k < len(shape) else (1,)
        end = int(np.prod(shape)) if len(children) == 1 else \
            int(np.prod(rest)) if k == len(children) - 1 else shape[k] if k < len(shape) else 1
        stack.append(end)
        try:
            v = interp._value(c, scope)
        finally:
            stack.pop()
        out.append(slice(None) if isinstance(v, str) and v == ":" else v)
    return out


def positions(value, n: int):
    """A subscript's value as 0-based positions: logical masks, whole numbers ≥ 1, `:`."""
    if isinstance(value, slice):
        return value
    if isinstance(value, (bool, np.bool_)) or isinstance(value, np.ndarray) and \
            value.dtype == bool:
        return np.flatnonzero(np.atleast_1d(value))
    arr = np.atleast_1d(np.asarray(value, dtype=float)).ravel()
    if arr.size and (not np.all(np.isfinite(arr)) or np.any(arr < 1) or
                     np.any(arr != np.floor(arr))):
        raise MatlabError("Array indices must be positive integers or logical values.")
    found = arr.astype(int) - 1
    if np.ndim(value) == 0 and not isinstance(value, np.ndarray):
        return int(found[0])
    return found


def _height(v) -> int:
    if isinstance(v, np.ndarray):
        return v.shape[0] if v.ndim else 1
    if hasattr(v, "shape"):
        return v.shape[0]
    if isinstance(v, list):
        return len(v)
    return 1


def _rows(v, picked):
    if isinstance(v, np.ndarray):
        return v[picked] if v.ndim else v
    if hasattr(v, "take"):                         # a categorical
        return v.take(np.array(picked, dtype=int))
    if isinstance(v, list):
        return type(v)(v[i] for i in picked)
    return v


def table_of(names, values) -> Table:
    """A table from its variables, each a column (a row vector is made a column, as table()
    does with vectors of one row per element would not: MATLAB needs columns)."""
    columns = {}
    for name, v in zip(names, values):
        if isinstance(v, np.ndarray) and v.ndim == 1:
            v = v.reshape(-1, 1)
        elif isinstance(v, list) and not isinstance(v, (Cell, StringArray)) and \
                all(isinstance(x, str) for x in v):
            v = StringArray(String(x) for x in v)
        columns[str(name)] = v
    return Table(columns)


# ======================================================================= containers.Map ===

class MapObject:
    """`containers.Map`: keys (text or numbers) to values. A handle object, as in MATLAB:
    `m(key) = v` changes the map every variable holding it sees."""

    # the functions MATLAB also lets a script call as methods: m.isKey(k), m.keys(), …
    matlab_methods = ("isKey", "keys", "values", "remove", "length")

    def __init__(self, key_type: str = "char", value_type: str = "any"):
        self.key_type, self.value_type = key_type, value_type
        self.items: dict = {}

    @property
    def shape(self):
        return (len(self.items), 1)

    def __repr__(self):
        return f"<containers.Map with {len(self.items)} keys>"

    def key(self, k):
        if self.key_type == "char":
            if not isinstance(k, str):
                raise MatlabError(f"Specified key type does not match the type expected for "
                                  f"this container: the keys are text, received "
                                  f"{type(k).__name__}.")
            return str(k)
        if isinstance(k, str):
            raise MatlabError("Specified key type does not match the type expected for this "
                              "container: the keys are numbers, received text.")
        return float(np.asarray(k).ravel()[0])

    def sorted_keys(self) -> list:
        return sorted(self.items)

    def get(self, k):
        key = self.key(k)
        if key not in self.items:
            shown = f"'{k}'" if isinstance(k, str) else str(k)
            raise MatlabError(f"The specified key is not present in this container: {shown}.")
        return self.items[key]

    def matlab_index(self, interp, args, scope, node, brace=False):
        pos, _ = interp._arguments(args, scope)
        if brace or len(pos) != 1:
            raise MatlabError("a containers.Map takes one key, m(key)", node=node)
        try:
            return self.get(pos[0])
        except MatlabError as e:
            e.node = node
            raise

    def assign(self, key, value) -> "MapObject":
        self.items[self.key(key)] = value
        return self

    def keys(self) -> Cell:
        return Cell(_key_out(k, self.key_type) for k in self.sorted_keys())

    def values(self, which=None) -> Cell:
        if which is None:
            return Cell(self.items[k] for k in self.sorted_keys())
        return Cell(self.get(k) for k in which)

    def __copy__(self):                  # a handle: copies share it
        return self

    def __deepcopy__(self, memo):
        new = MapObject(self.key_type, self.value_type)
        new.items = copy.deepcopy(self.items, memo)
        return new


def _key_out(k, key_type):
    if key_type == "char":
        return k
    return int(k) if float(k).is_integer() else k


_KEY_TYPES = ("char", "double", "single", "int32", "uint32", "int64", "uint64")


def new_map(*args) -> MapObject:
    """containers.Map(), containers.Map('KeyType', kt, 'ValueType', vt),
    containers.Map(keys, values), containers.Map(keys, values, 'UniformValues', tf)."""
    options: dict = {}
    rest = list(args)
    while len(rest) >= 2 and isinstance(rest[-2], str) and \
            rest[-2].lower() in ("keytype", "valuetype", "uniformvalues"):
        options[rest[-2].lower()] = rest[-1]
        rest = rest[:-2]
    if len(rest) not in (0, 2):
        raise MatlabError("containers.Map: expected containers.Map(), containers.Map(keys, "
                          "values) or 'KeyType'/'ValueType' options")
    key_type = str(options.get("keytype", "char")).lower()
    if rest:
        keys, values = rest
        keys = list(keys) if isinstance(keys, list) else [keys] if isinstance(keys, str) \
            else np.atleast_1d(keys).tolist()
        if isinstance(values, Cell):
            values = list(values)
        elif len(keys) == 1:
            values = [values]
        else:
            values = np.atleast_1d(values).tolist()
        if len(keys) != len(values):
            raise MatlabError(f"containers.Map: the number of keys ({len(keys)}) and values "
                              f"({len(values)}) must be the same")
        if "keytype" not in options and keys and not isinstance(keys[0], str):
            key_type = "double"
    if key_type not in _KEY_TYPES:
        raise MatlabError(f"containers.Map: expected KeyType among {', '.join(_KEY_TYPES)}, "
                          f"received '{key_type}'")
    m = MapObject("char" if key_type == "char" else "double",
                  str(options.get("valuetype", "any")))
    for k, v in (zip(keys, values) if rest else ()):
        m.assign(k, v)
    return m


class _NewMap(MapObject):
    """What `containers.Map` names: without arguments an empty map; `containers.Map(…)` is
    the constructor (`m(key)` on a variable holding one looks a key up, as on any map)."""

    def matlab_index(self, interp, args, scope, node, brace=False):
        parent = node.parent
        if parent is not None and parent.type == "field_expression" and \
                parent.named_children and parent.named_children[-1] == node and \
                not self.items:
            pos, kw = interp._arguments(args, scope)
            pos += [v for k, value in kw.items() for v in (k, value)]
            try:
                return new_map(*pos)
            except MatlabError as e:
                e.node = node
                raise
        return super().matlab_index(interp, args, scope, node, brace)


class Containers:
    """MATLAB's `containers` package: `containers.Map`."""

    def member(self, name: str):
        if name != "Map":
            raise MatlabError(f"containers.{name} is not a class attnlab's reader knows; "
                              "containers.Map is")
        return _NewMap()
