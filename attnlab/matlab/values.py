"""The values a MATLAB script computes with, in Python.

Numbers are Python ints/floats (a MATLAB double that holds an integer stays an int so layer sizes
read naturally), vectors and matrices numpy arrays (row vectors 1-D), '…' text is `str`, "…" text
`String` (so ["a" "b"] is a string array and ['a' 'b'] is 'ab'), cell arrays `Cell`, structs
`Struct`, layer arrays Python lists of layers.
"""
from __future__ import annotations

import numpy as np


class String(str):
    """A MATLAB string ("…"), as opposed to a character vector ('…')."""


class Cell(list):
    """A MATLAB cell array {…}: its cells in MATLAB's linear order (down each column, then the
    next column) and its size `dims`, rows × columns: 1×n unless made otherwise ({a; b} is
    2×1, {a, b; c, d} 2×2, cell(3, 1) 3×1). A vector that grows or shrinks keeps its
    orientation."""

    @property
    def dims(self) -> tuple[int, int]:
        given = self.__dict__.get("_dims")
        n = len(self)
        if given is not None and given[0] * given[1] == n:
            return given
        if given is not None and given[1] == 1 and given[0] != 1:
            return (n, 1)                          # a column that grew or shrank
        return (1, n)

    def with_dims(self, dims) -> "Cell":
        """Itself with the size `dims` (rows, columns), when its cells fill it."""
        rows, cols = int(dims[0]), int(dims[1])
        if rows * cols == len(self):
            self.__dict__["_dims"] = (rows, cols)
        return self

    def grid(self) -> list[list]:
        """The cells by row: [[row 1's cells], [row 2's cells], …]."""
        rows, cols = self.dims
        return [[self[r + k * rows] for k in range(cols)] for r in range(rows)]

    @classmethod
    def from_rows(cls, rows: list[list]) -> "Cell":
        """The cell array whose rows are `rows` (each a list of cells, all as long)."""
        rows = [r for r in rows if r]
        if not rows:
            return cls()
        cols = len(rows[0])
        return cls(rows[r][k] for k in range(cols) for r in range(len(rows))).with_dims(
            (len(rows), cols))

    def transposed(self) -> "Cell":
        return Cell.from_rows([list(col) for col in zip(*self.grid())]) if len(self) else Cell()


class Struct(dict):
    """A MATLAB struct: fields by name, in the order they were set."""

    def __repr__(self):
        return "struct(" + ", ".join(f"{k}={v!r}" for k, v in self.items()) + ")"


class Missing:
    """The value of a variable whose statement `attnlab analyze` skipped (it needs data)."""

    def __init__(self, line: int, why: str, var: str | None = None):
        self.line, self.why, self.var = line, why, var

    def __repr__(self):
        return f"<not computed: line {self.line} was skipped ({self.why})>"


class MatlabError(Exception):
    """An error a MATLAB `try`/`catch` can catch: from `error(...)` or from a toolbox call.
    `catch err` binds a Struct with `message` and `identifier`."""

    def __init__(self, message: str, identifier: str = "", node=None):
        super().__init__(message)
        self.message, self.identifier, self.node = message, identifier, node


class NeedsData(Exception):
    """Raised inside a statement that `attnlab analyze` skips: it needs data or trains.
    `var` names the variable whose value was missing (what `--set` can give), `node` is where
    an undefined one was used."""

    def __init__(self, why: str, var: str | None = None, node=None):
        super().__init__(why)
        self.why, self.var, self.node = why, var, node


class Categorical:
    """A MATLAB categorical array: `values` (text labels, a 1-D numpy object array; "" is
    <undefined>), `categories`, the classes in order (sorted unless given), and `ordinal`.

    It compares as MATLAB's does, element by element: `==` and `~=` with another categorical
    (by label; two ordinal arrays need the same categories in the same order) or with text (a
    character vector or string for every element, a string array or cell array of character
    vectors of the same size); <undefined> equals nothing. `<`, `<=`, `>`, `>=` compare the
    category order of ordinal arrays. The results are logical column vectors (numpy bool,
    N×1), so `mean(YPred == YTest)` is the accuracy. `c[i]` is a label, `c[i:j]` (or an index
    array) a categorical with the same categories."""

    __array_ufunc__ = None                 # numpy defers to these operators: arr == c is c == arr

    def __init__(self, values, categories, ordinal: bool = False, shape=None):
        self.values = np.asarray(values, dtype=object).reshape(-1)
        self.categories = [str(c) for c in categories]
        self.ordinal = bool(ordinal)
        # MATLAB's size: N×1 unless made otherwise (categorical() is 0×0, and growing an
        # empty one by c(1:n) = … makes a 1×n row)
        self._shape = tuple(shape) if shape is not None and \
            int(np.prod(shape)) == len(self.values) else None

    def __len__(self):
        return len(self.values)

    @property
    def shape(self):
        return self._shape if self._shape is not None else (len(self.values), 1)

    def matlab_index(self, interp, args, scope, node, brace=False):
        """`c(i)`, `c(i, j)` of a vector, `c(end)`: a categorical with the same categories."""
        idx = interp._index_args(args, self, scope)
        if brace:
            raise MatlabError("Brace indexing is not supported for variables of this type "
                              "(a categorical array): use c(i).", node=node)
        index = _linear(idx, self.shape, node)
        n = len(self.values)
        picked = np.arange(n)[index] if not isinstance(index, slice) else np.arange(n)[index]
        if np.any(np.atleast_1d(picked) >= n):
            raise MatlabError(f"Index exceeds the number of array elements ({n}).", node=node)
        out = self.take(index)
        if self._shape is not None and self._shape[0] == 1:
            out._shape = (1, len(out.values))
        return out

    def assign(self, idx, value) -> "Categorical":
        """A copy with the elements at `idx` set to `value` (a label, labels, a categorical;
        a label not among the categories becomes one, as MATLAB adds it — an ordinal array
        refuses it); past the end the array grows with <undefined>; `[]` deletes."""
        from attnlab.core.errors import ArgumentError
        index = _linear(idx, self.shape, None)
        values = list(self.values)
        if isinstance(value, np.ndarray) and value.size == 0:
            drop = set(np.atleast_1d(np.arange(max(len(values), 1))[index]).tolist()) \
                if isinstance(index, slice) else set(np.atleast_1d(index).tolist())
            kept = [v for i, v in enumerate(values) if i not in drop]
            return Categorical(kept, self.categories, self.ordinal,
                               (1, len(kept)) if self.shape[0] == 1 else None)
        positions = list(range(len(values)))[index] if isinstance(index, slice) else \
            [int(i) for i in np.atleast_1d(index)]
        if isinstance(value, Categorical):
            labels = [str(v) for v in value.values]
            new = [c for c in value.categories if c not in self.categories]
        elif isinstance(value, str):
            labels, new = [str(value)], [str(value)] if str(value) and \
                str(value) not in self.categories else []
        elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            labels = [str(v) for v in value]
            new = [v for v in dict.fromkeys(labels) if v and v not in self.categories]
        else:
            raise MatlabError(f"assigning into a categorical array: expected a label (text), "
                              f"labels or a categorical, received {_kind(value)}.")
        if len(labels) not in (1, len(positions)):
            raise MatlabError(f"assigning {len(labels)} labels to {len(positions)} elements of a "
                              "categorical array: the sizes must agree.")
        if new and self.ordinal:
            raise ArgumentError(f"Cannot add a new category ({', '.join(new)}) to an ordinal "
                                f"categorical array; its categories: "
                                f"{', '.join(self.categories)}. Add it with addcats first.")
        grown = len(values)
        for k, i in enumerate(positions):
            while len(values) <= i:
                values.append("")
            values[i] = labels[k if len(labels) > 1 else 0]
        shape = None
        if self.shape[0] == 1 or self.shape == (0, 0) or (grown == 0 and len(values)):
            shape = (1, len(values))              # an empty or a row grows as a row
        return Categorical(values, self.categories + new, self.ordinal, shape)

    def codes(self):
        """0-based class indices (−1 for <undefined>)."""
        index = {c: i for i, c in enumerate(self.categories)}
        return np.array([index.get(str(v), -1) for v in self.values], dtype=np.int64)

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.values, dtype=dtype if dtype is not None else object)

    def __iter__(self):
        return iter(self.values.tolist())

    def __getitem__(self, index):
        if isinstance(index, (int, np.integer)):
            return self.values[index]
        return self.take(index)

    def take(self, index) -> "Categorical":
        """The elements at `index` (an int, slice or array of 0-based indices), as a categorical
        with the same categories (MATLAB's `c(i)`)."""
        picked = self.values[index]
        return Categorical(np.atleast_1d(picked), self.categories, self.ordinal)

    def copy(self) -> "Categorical":
        return Categorical(self.values.copy(), self.categories, self.ordinal, self._shape)

    @staticmethod
    def concatenate(items) -> "Categorical":
        """`[a; b]`, `[a, b]`: the elements in order. Non-ordinal categories are the union, in
        order of appearance; ordinal arrays need the same categories in the same order. Text
        (a label, a cell array or string array of labels) joins as those labels; an empty `[]`
        adds nothing."""
        from attnlab.core.errors import ArgumentError
        parts = [v for v in items if not (isinstance(v, np.ndarray) and v.size == 0)]
        cats = [v for v in parts if isinstance(v, Categorical)]
        ordinal = cats[0].ordinal
        if any(c.ordinal != ordinal for c in cats):
            raise ArgumentError("concatenating categorical arrays: expected all ordinal or all "
                                "non-ordinal, received both. Make them alike with "
                                "categorical(x, Ordinal=…).")
        if ordinal and any(c.categories != cats[0].categories for c in cats):
            raise ArgumentError(f"concatenating ordinal categorical arrays: expected the same "
                                f"categories in the same order, received "
                                f"{' and '.join(str(c.categories) for c in cats)}.")
        categories = list(cats[0].categories)
        values: list[str] = []
        for v in parts:
            if isinstance(v, Categorical):
                labels = [str(x) for x in v.values]
                new = v.categories
            elif isinstance(v, str) or isinstance(v, (list, tuple)) and \
                    all(isinstance(x, str) for x in v):
                labels = [str(v)] if isinstance(v, str) else [str(x) for x in v]
                new = [x for x in labels if x]
            else:
                raise ArgumentError(f"concatenating a categorical array: expected categoricals "
                                    f"or text, received {_kind(v)}.")
            if ordinal and any(x not in categories for x in new):
                raise ArgumentError(f"concatenating an ordinal categorical array: "
                                    f"{', '.join(repr(x) for x in new if x not in categories)} "
                                    f"is not one of its categories ({', '.join(categories)}).")
            categories += [x for x in dict.fromkeys(new) if x not in categories]
            values += labels
        return Categorical(values, categories, ordinal)

    # -------------------------------------------------------------------- comparisons --
    def _labels_of(self, other, op: str):
        """`other` as labels to compare with, one per element of self (or one for all)."""
        from attnlab.core.errors import ArgumentError
        if isinstance(other, Categorical):
            if self.ordinal != other.ordinal:
                raise ArgumentError(f"categorical {op}: expected two ordinal or two non-ordinal "
                                    "categorical arrays, received one of each. Make both "
                                    "ordinal (categorical(x, Ordinal=true)) or neither.")
            if self.ordinal and self.categories != other.categories:
                raise ArgumentError(f"categorical {op}: ordinal categorical arrays must have the "
                                    f"same categories in the same order, received "
                                    f"{self.categories} and {other.categories}. Make them from "
                                    "the same valueset: categorical(x, valueset, Ordinal=true).")
            labels = list(other.values)
        elif isinstance(other, str):
            labels = [str(other)]
        elif isinstance(other, (list, tuple)) and all(isinstance(v, str) for v in other):
            labels = [str(v) for v in other]        # a cell array of text, a string array
        elif isinstance(other, np.ndarray) and other.dtype.kind in "OUS" and \
                all(isinstance(v, str) for v in other.ravel().tolist()):
            labels = [str(v) for v in other.ravel().tolist()]
        else:
            raise ArgumentError(f"categorical {op}: expected another categorical array or text "
                                f"(a label such as 'cat', a string array or a cell array of "
                                f"labels), received {_kind(other)}. Compare with the label as "
                                f"text, e.g. c {op} '{_first_label(other)}'.")
        if len(labels) not in (1, len(self.values)) and len(self.values) != 1:
            raise ArgumentError(f"categorical {op}: expected {len(self.values)} labels (one per "
                                f"element) or 1, received {len(labels)}: the sizes must agree.")
        if self.ordinal and not isinstance(other, Categorical):
            unknown = sorted({v for v in labels if v and v not in self.categories})
            if unknown:
                raise ArgumentError(f"categorical {op}: {', '.join(repr(u) for u in unknown)} "
                                    f"is not a category of this ordinal array; its categories: "
                                    f"{', '.join(self.categories)}.")
        return labels

    def _compare(self, other, op: str, test):
        labels = self._labels_of(other, op)
        mine = [str(v) for v in self.values]
        n = max(len(mine), len(labels))
        mine, labels = (mine * n)[:n], (labels * n)[:n]
        out = np.array([bool(a) and bool(b) and test(a, b) for a, b in zip(mine, labels)],
                       dtype=bool)
        return out.reshape(1, -1) if self._shape is not None and self._shape[0] == 1 else \
            out.reshape(-1, 1)

    def __eq__(self, other):
        if other is None:                  # Python's `c == None`: not a MATLAB comparison
            return NotImplemented
        return self._compare(other, "==", lambda a, b: a == b)

    def __ne__(self, other):
        if other is None:
            return NotImplemented
        return ~self._compare(other, "~=", lambda a, b: a == b)

    __hash__ = None  # type: ignore[assignment]

    def _order(self, other, op: str, test):
        from attnlab.core.errors import ArgumentError
        if not self.ordinal:
            raise ArgumentError(f"categorical {op}: expected an ordinal categorical array, "
                                "received a non-ordinal one: its categories have no order. "
                                "Make it with categorical(x, valueset, Ordinal=true).")
        rank = {c: i for i, c in enumerate(self.categories)}
        return self._compare(other, op, lambda a, b: test(rank[a], rank[b]))

    def __lt__(self, other):
        return self._order(other, "<", lambda a, b: a < b)

    def __le__(self, other):
        return self._order(other, "<=", lambda a, b: a <= b)

    def __gt__(self, other):
        return self._order(other, ">", lambda a, b: a > b)

    def __ge__(self, other):
        return self._order(other, ">=", lambda a, b: a >= b)

    def __repr__(self):
        shown = " ".join(str(v) or "<undefined>" for v in self.values[:8]) + \
            (" …" if len(self.values) > 8 else "")
        return (f"categorical([{shown}], categories {self.categories}"
                + (", ordinal" if self.ordinal else "") + ")")


def _linear(idx, shape, node):
    """One linear index out of MATLAB's subscripts of a vector (c(i), c(1, j), c(i, 1))."""
    if len(idx) == 1:
        return idx[0]
    if len(idx) == 2 and len(shape) == 2:
        rows, cols = shape
        if rows == 1 and idx[0] in (0, slice(None)):
            return idx[1]
        if cols == 1 and idx[1] in (0, slice(None)):
            return idx[0]
    raise MatlabError("a categorical vector takes one index, c(i)", node=node)


def _kind(value) -> str:
    if isinstance(value, np.ndarray):
        return f"a numeric array ({value.dtype})" if value.dtype.kind in "biuf" else \
            f"an array of {value.dtype}"
    if isinstance(value, (bool, int, float)):
        return f"the number {value!r}"
    return type(value).__name__


def _first_label(value) -> str:
    v = np.asarray(value).ravel()[0] if isinstance(value, np.ndarray) and value.size else value
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return str(v) if isinstance(v, (int, float, np.generic)) else "label"


class Lambda:
    """`@(x) expr`: a closure over the workspace it was made in."""

    def __init__(self, params, body, scope, interp):
        self.params, self.body, self.scope, self.interp = params, body, scope, interp

    def __call__(self, *args):
        return self.call_with(1, *args)

    def call_with(self, nargout: int, *args):
        """The body's value; `[a, b] = h(x)` asks the body (a call) for `nargout` outputs."""
        scope = dict(self.scope)
        scope.update(zip(self.params, args))
        return self.interp.eval_in(self.body, scope, nargout)


class NamedHandle:
    """`@name`: a handle to a function (the script's own, a toolbox or base function), called
    by name when used; `[a, b] = h(x)` gets all of its outputs."""

    def __init__(self, name: str, call):
        self.name, self._call = name, call           # call(args, kwargs, nargout)

    def __call__(self, *args, **kwargs):
        return self._call(list(args), kwargs, 1)

    def call_with(self, nargout: int, *args, **kwargs):
        return self._call(list(args), kwargs, nargout)

    def __repr__(self):
        return f"@{self.name}"


class Handle:
    """An object the reader does not model (a figure, axes, a tiled layout): setting its
    properties and calling its methods change nothing a network depends on, so they are
    no-ops, and reading a property gives another handle."""

    def __init__(self, kind: str):
        self.kind = kind

    def __repr__(self):
        return f"<{self.kind}>"


def matlab_shape(x) -> tuple[int, ...]:
    """A value's MATLAB size: a 1-D array is a row, a list a column, a scalar 1×1."""
    if isinstance(x, np.ndarray):
        return (1, x.shape[0]) if x.ndim == 1 else tuple(x.shape)
    if hasattr(x, "shape"):
        return tuple(x.shape)
    if isinstance(x, Cell):
        return x.dims
    if isinstance(x, (list, str)):
        return (1, len(x)) if isinstance(x, str) or isinstance(x, Cell) else (len(x), 1)
    return (1, 1)


def kind_of(v) -> str:
    """A value's MATLAB kind, for messages (layers and networks: `script_values._kind`)."""
    if isinstance(v, String):
        return "a string"
    if isinstance(v, str):
        return "a char vector"
    if isinstance(v, (bool, np.bool_)):
        return "a logical"
    if isinstance(v, (int, float, np.number)):
        return "a number"
    if isinstance(v, np.ndarray):
        shape = matlab_shape(v)
        return f"a {'×'.join(str(int(d)) for d in shape) if len(shape) else '1×1'} array"
    if isinstance(v, Cell):
        return "a cell array"
    if isinstance(v, Struct):
        return "a struct"
    if isinstance(v, Lambda) or callable(v):
        return "a function handle"
    return f"a {type(v).__name__}"
