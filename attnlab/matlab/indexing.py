"""Calls, indexing and fields in expressions: `f(a, b)` (a function, or indexing a variable),
`x(i, j)`, `c{k}`, `s.f`, `net.addLayers(…)`, with MATLAB's `end` and 1-based indices."""
from __future__ import annotations

import math

import numpy as np

from attnlab.core.errors import AttnlabError, close_matches
from ..layers.base import Layer
from ..network import Network
from . import builtins as B
from .script_values import (
    _EVAL,
    Part,
    Passed,
    _child,
    _is_layerish,
    _kind,
    _text,
)
from .values import Categorical, Cell, Handle, Lambda, MatlabError, Missing, NeedsData, Struct


class Indexing(Part):
    """The interpreter's calls, indexing and fields (a part of `Interpreter`)."""

    def _function_call(self, node, scope, nargout):
        name_node = node.named_children[0]
        args = _child(node, "arguments")
        brace = _child(node, "{") is not None
        if name_node.type == "identifier":
            name = _text(name_node, self.src)
            if name in _EVAL and name not in scope:
                self._no_eval(name, node)
            if name not in scope and (brace or self._unknown(name) and _indexes_with_end(args)):
                self._name(name_node, scope, 1)   # x{i}, x(2:end): a variable; undefined →
                #                                   needs data (named for --set)
            if name in scope:
                container = self._name(name_node, scope, 1)
                if isinstance(container, (Lambda,)) or callable(container) and \
                        not isinstance(container, (Network, Layer, list, np.ndarray)):
                    pos, kw = self._arguments(args, scope)
                    if isinstance(container, Lambda):
                        shown = f"@({', '.join(container.params)})"
                        if kw:
                            self._fail(node, f"the anonymous function {name} = {shown} takes no "
                                       f"name=value arguments, received {', '.join(kw)}")
                        if len(pos) > len(container.params):
                            self._fail(node, f"the anonymous function {name} = {shown} takes "
                                       f"at most {len(container.params)} arguments, received "
                                       f"{len(pos)}")
                    try:
                        if nargout != 1 and hasattr(container, "call_with"):
                            return container.call_with(nargout, *pos, **kw)   # [a, b] = h(x)
                        return container(*pos, **kw)
                    except MatlabError as e:
                        if not isinstance(container, Lambda):
                            e.node = node        # h = @disp; h(…): located at the call
                        raise
                return self._index(container, args, scope, node, brace)
            data = name in B.DATA or name == "trainingOptions"
            self._data_depth += data
            try:
                pos, kw = self._arguments(args, scope, function=name)
            finally:
                self._data_depth -= data
            return self._call(name, pos, kw, node, scope, nargout)
        container = self.eval_in(name_node, scope)
        return self._index(container, args, scope, node, brace)

    def _no_eval(self, name, node):
        """eval and its kin run text as code: the reader never does (analyze skips the
        statement with a note; run_file stops, naming the line)."""
        if self.analyze:
            raise NeedsData(f"{name} runs text as MATLAB code, which attnlab's reader never "
                            "does; what it would compute or assign is not known here")
        raise MatlabError(f"{name} runs text as MATLAB code, which attnlab's reader never does "
                          "(a script is untrusted input): write the statements it would run in "
                          "the script itself", node=node)

    def _arguments(self, args, scope, function=None):
        pos, kw = [], {}
        if args is None:
            return pos, kw
        children = [c for c in args.children if c.type not in ("comment", "line_continuation")]
        i = 0
        while i < len(children):
            c = children[i]
            if c.type in (",", "(", ")"):
                i += 1
                continue
            if i + 2 < len(children) and children[i + 1].type == "=":       # Name=value
                kw[_text(c, self.src)] = self._value(children[i + 2], scope)
                i += 3
                continue
            if c.type == "spread_operator":
                pos.append(slice(None))
            else:
                try:
                    v = self.eval_in(c, scope)
                except NeedsData as e:
                    # a function of the script's own gets the argument unset: what in it needs
                    # the value is skipped there, and the rest (its layers) runs
                    if not (self.analyze and function in self.functions and function not in scope):
                        raise
                    v = Passed(c.start_point.row + 1, e.why, e.var or _root(c, self.src))
                if isinstance(v, Missing) and not isinstance(v, Passed):
                    if function in B.DATA:
                        raise NeedsData(f"{function} needs data the script does not have")
                    raise NeedsData(f"uses a value from line {v.line}, which was skipped")
                if isinstance(v, Cell) and c.type == "function_call" and \
                        _child(c, "{") is not None:
                    pos.extend(v)                # f(c{:}): the cells' contents, one by one
                else:
                    pos.append(v)
            i += 1
        return pos, kw

    def _index_args(self, args, container, scope):
        self._end_stack = getattr(self, "_end_stack", [])
        children = [c for c in (args.named_children if args else [])
                    if c.type not in ("comment", "line_continuation")]
        out = []
        shape = B._shape(container) if container is not None else (0, 0)
        for k, c in enumerate(children):
            if c.type == "spread_operator":
                out.append(slice(None))
                continue
            end = int(np.prod(shape)) if len(children) == 1 else \
                (shape[k] if k < len(shape) else 1)
            if isinstance(container, np.ndarray) and container.ndim == 1 and len(children) == 2:
                end = (1 if container.size else 0) if k == 0 else container.shape[0]
            self._end_stack.append(end)
            try:
                v = self._value(c, scope)
            finally:
                self._end_stack.pop()
            if isinstance(v, (bool, np.bool_)) or (isinstance(v, np.ndarray) and v.dtype == bool):
                out.append(np.flatnonzero(v))
            elif isinstance(v, np.ndarray):
                flat = v.ravel()
                if flat.dtype.kind not in "iub":
                    try:
                        ok = bool(np.all(np.isfinite(flat) & (flat >= 1) & (flat == np.floor(flat))))
                    except TypeError:
                        ok = False
                    if not ok:
                        raise MatlabError("indices must be positive integers, received "
                                          f"{_kind(v)} with other values")
                elif flat.size and flat.min() < 1:
                    raise MatlabError(f"indices must be positive integers, received "
                                      f"{int(flat.min())}")
                out.append(flat.astype(int) - 1)
            elif isinstance(v, (int, float)):
                if not math.isfinite(v) or v < 1 or not float(v).is_integer():
                    raise MatlabError(f"index must be a positive integer, received "
                                      f"{B._fmt_value(v)}")
                out.append(int(v) - 1)
            elif isinstance(v, str) and v == ":":
                out.append(slice(None))
            else:
                raise MatlabError(f"expected a numeric index, received {type(v).__name__}")
        return out

    def _index(self, container, args, scope, node, brace=False):
        if hasattr(container, "matlab_index"):   # tables, maps, struct arrays, categoricals
            return container.matlab_index(self, args, scope, node, brace)
        try:
            idx = self._index_args(args, container, scope)
        except MatlabError as e:
            if e.node is None:
                e.node = node                    # located at the indexing
            raise
        what = _text(node, self.src)
        try:
            if isinstance(container, Cell):
                return _cell_index(container, idx, what, brace)
            if isinstance(container, (list, tuple, str)):
                if len(idx) == 2 and (idx[0] == 0 or idx[0] == slice(None)):
                    idx = idx[1:]
                if len(idx) != 1:
                    raise MatlabError(f"{what}: expected one index into a list")
                i = idx[0]
                if isinstance(i, int):
                    return container[i]
                picked = [container[j] for j in (range(len(container))[i] if isinstance(i, slice)
                                                 else i)]
                return "".join(picked) if isinstance(container, str) else type(container)(picked) \
                    if isinstance(container, Cell) else picked
            if _is_layerish(container) and not isinstance(container, (list, Network)):
                container = [container]
                return self._index(container, args, scope, node, brace) if False else \
                    [container[0]][idx[0]] if isinstance(idx[0], int) else container
            if isinstance(container, Categorical):    # c(i), c(i, 1): a categorical
                return container.take(idx[0])
            if isinstance(container, Network):
                if len(idx) != 1:
                    raise MatlabError(f"{what}: expected one index")
                return container.layers[idx[0]]
            arr = np.asarray(container)
            if arr.ndim == 0:
                arr = arr.reshape(1)
            if arr.ndim == 1 and len(idx) == 2:
                idx = idx[1:]
            result = arr[tuple(idx)] if len(idx) > 1 else arr.ravel(order="F")[idx[0]] \
                if arr.ndim > 1 else arr[idx[0]]
            return B._scalar(result) if np.ndim(result) == 0 or np.size(result) == 1 and \
                all(isinstance(i, int) for i in idx) else result
        except IndexError:
            raise MatlabError(f"{what}: index exceeds the number of elements "
                              f"({int(np.prod(B._shape(container)))})") from None

    def _field_expression(self, node, scope):
        parts = node.named_children
        obj = self._value(parts[0], scope)
        for part in parts[1:]:
            if isinstance(obj, Handle):          # f.Position, ax.YLim, t.nexttile(): no-ops
                continue
            if part.type == "function_call" and (isinstance(obj, Network) or _is_layerish(obj)):
                name = _text(part.named_children[0], self.src)
                if name in self.toolbox and name[0].islower():     # net.addLayers(layers)
                    pos, kw = self._arguments(_child(part, "arguments"), scope, function=name)
                    obj = self._call(name, [obj, *pos], kw, part, scope)
                    continue
            if part.type == "function_call" and \
                    _text(part.named_children[0], self.src) in getattr(obj, "matlab_methods", ()):
                name = _text(part.named_children[0], self.src)     # m.isKey(k): isKey(m, k)
                pos, kw = self._arguments(_child(part, "arguments"), scope, function=name)
                obj = self._call(name, [obj, *pos], kw, part, scope)
                continue
            if isinstance(obj, B.Namespace):     # parallel.gpu.rng(42, "Philox")
                name = _text(part.named_children[0] if part.type == "function_call" else part,
                             self.src)
                obj = obj.field(name)
                if part.type == "function_call":
                    pos, _ = self._arguments(_child(part, "arguments"), scope)
                    obj = obj.call(self, *pos)
                continue
            if part.type == "function_call":
                name = _text(part.named_children[0], self.src)
                obj = self._index(self._get_field(obj, name, part), _child(part, "arguments"),
                                  scope, part)
            elif part.type == "indirect_access":
                obj = self._get_field(obj, str(self._value(part.named_children[0], scope)), part)
            else:
                obj = self._get_field(obj, _text(part, self.src), part)
        return obj

    def _get_field(self, obj, name, node):
        if isinstance(obj, Struct):
            if name not in obj:
                self._fail(node, f"unknown field '{name}'; the struct has "
                           f"{', '.join(obj) or 'no fields'}.{close_matches(name, list(obj))}")
            return obj[name]
        from .properties import get_property
        try:
            return get_property(obj, name)
        except AttnlabError as e:
            self._fail(node, str(e))


def _indexes_with_end(args) -> bool:
    """Whether the arguments of `x(…)` use `end` of x itself (`x(2:end)`; not `x(y(end))`):
    then x is a variable, never a function."""
    stack = list(args.named_children) if args is not None else []
    while stack:
        n = stack.pop()
        if n.type == "end_keyword":
            return True
        if n.type != "function_call":
            stack.extend(n.named_children)
    return False


def _root(node, src: bytes) -> str | None:
    """The variable an argument is made of (`data_train` in `data_train{j}`)."""
    while node.type in ("function_call", "field_expression", "parenthesis") and \
            node.named_children:
        node = node.named_children[0]
    return _text(node, src) if node.type == "identifier" else None


def _positions(i, n: int) -> list[int]:
    """One index (an int, a slice, an array of positions) as a list of positions below n."""
    if isinstance(i, slice):
        return list(range(n))[i]
    return [int(i)] if isinstance(i, (int, np.integer)) else [int(j) for j in np.ravel(i)]


def _cell_index(c: Cell, idx: list, what: str, brace: bool = False):
    """c(i), c(i, j), c{…}: one cell's content for whole-number indices (and for c{…} that
    picks one cell), else the cell array of the cells picked (a vector keeps its orientation;
    c(rows, cols) is rows × cols)."""
    picked = _cell_pick(c, idx, what)
    if brace and isinstance(picked, Cell) and len(picked) == 1:
        return picked[0]
    return picked


def _cell_pick(c: Cell, idx: list, what: str):
    rows, cols = c.dims
    if len(idx) == 1:
        if isinstance(idx[0], (int, np.integer)):
            return c[int(idx[0])]
        picked = Cell(c[j] for j in _positions(idx[0], len(c)))
        return picked.with_dims((len(picked), 1) if cols == 1 and rows != 1 else
                                (1, len(picked)))
    if len(idx) != 2 or any(isinstance(i, (int, np.integer)) and i > 0 for i in idx[2:]):
        raise MatlabError(f"{what}: expected one or two indices into a cell array")
    rs, ks = _positions(idx[0], rows), _positions(idx[1], cols)
    if any(r >= rows for r in rs) or any(k >= cols for k in ks):
        raise IndexError
    if all(isinstance(i, (int, np.integer)) for i in idx):
        return c[rs[0] + ks[0] * rows]
    return Cell(c[r + k * rows] for k in ks for r in rs).with_dims((len(rs), len(ks)))
