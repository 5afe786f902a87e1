"""Evaluating expressions: numbers, text, names, matrices, operators, indexing, fields."""
from __future__ import annotations

import math

import numpy as np

from attnlab.core.errors import AttnlabError, close_matches
from ..layers.base import Layer
from ..network import Network
from . import builtins as B
from .script_values import (
    _BINARY,
    _CUSTOM_LOOP,
    _EVAL,
    _WORK,
    Part,
    Passed,
    _arith,
    _child,
    _count,
    _is_layerish,
    _is_number,
    _kind,
    _size_text,
    _text,
)
from .values import (Categorical, Cell, Handle, Lambda, MatlabError, Missing, NamedHandle,
                     NeedsData, String, Struct)


class Evaluating(Part):
    """The interpreter's expressions (a part of `Interpreter`)."""

    def eval_in(self, node, scope, nargout=1):
        """The value of expression `node`, held to Limits.depth (its nesting) and to
        Limits.elements/chars (the size of what it makes)."""
        self.depth += 1
        if self.depth > self._max_depth:
            self._nest(node)
        self.steps += 1                          # an expression is a step too
        if self.steps > self._max_steps:
            self._tick(node)
        try:
            value = self._eval(node, scope, nargout)
        finally:
            self.depth -= 1
        kind = type(value)
        if kind is int or kind is float or kind is bool:
            return value
        if isinstance(value, np.ndarray):
            if value.size > self.limits.elements:
                self._limit(node, "elements", f"this makes an array of {value.size:,} elements, "
                            f"over the limit of {self.limits.elements:,} (Limits.elements).")
            if value.size >= _WORK and node.type != "identifier":
                self._work(value.size, node)
        elif isinstance(value, str):
            if len(value) > self.limits.chars:
                self._limit(node, "chars", f"this makes a text of {len(value):,} characters, "
                            f"over the limit of {self.limits.chars:,} (Limits.chars).")
            if len(value) >= _WORK and node.type != "identifier":
                self._work(len(value), node)
        elif isinstance(value, (Cell, Struct)):
            self._check_count(value, node)
        elif isinstance(value, list) and len(value) > self.limits.elements:
            self._limit(node, "elements", f"this makes {len(value):,} elements, over the limit "
                        f"of {self.limits.elements:,} (Limits.elements).")
        return value

    def _check_count(self, value, node):
        """A cell array or struct holding more values than Limits.elements, counted through
        nested cells and structs (so that `c = {c, c}` cannot double its way past memory)."""
        memo: dict = {}
        n = _count(value, memo) - 1              # what it holds
        walked = memo.get("walked", 0)           # a struct is counted afresh each time:
        if walked >= 4:                          # 4 fields or items walked are one step
            self._work(walked * _WORK // 4, node)
        if n > self.limits.elements:
            self._limit(node, "elements", f"this makes a {_kind(value)[2:]} holding {n:,} values "
                        f"(nested cells and structs counted through), over the limit of "
                        f"{self.limits.elements:,} (Limits.elements).")

    def _eval(self, node, scope, nargout=1):
        kind = node.type
        if kind == "number":
            text = _text(node, self.src)
            if text.endswith(("i", "j")):
                self._fail(node, "complex numbers are not supported")
            try:
                return B._scalar(float(text))     # a double; whole ones as int (sizes)
            except ValueError:
                self._fail(node, f"'{text[:40]}' is not a number attnlab reads (write decimals, "
                           "e.g. 16 or 1e-3)")
        if kind == "string":
            text = _text(node, self.src)
            q = text[0]
            body = text[1:-1].replace(q + q, q)
            return String(body) if q == '"' else body
        if kind == "identifier":
            return self._name(node, scope, nargout)
        if kind == "parenthesis":
            return self.eval_in(node.named_children[0], scope)
        if kind == "matrix":
            return self._matrix(node, scope)
        if kind == "cell":
            return self._cell(node, scope)
        if kind == "function_call":
            return self._function_call(node, scope, nargout)
        if kind == "field_expression":
            return self._field_expression(node, scope)
        if kind in ("binary_operator", "comparison_operator", "boolean_operator"):
            return self._binary(node, scope)
        if kind == "unary_operator":
            op = _text(node.children[0], self.src)
            v = self._value(node.named_children[0], scope)
            if isinstance(v, (bool, np.bool_)):
                v = int(v)
            if not isinstance(v, (int, float, np.ndarray, np.generic)) and not hasattr(v, "detach"):
                self._fail(node, f"unary {op} needs a number or numeric array, received "
                           f"{_kind(v)}")
            return -v if op == "-" else v
        if kind == "not_operator":
            v = self._value(node.named_children[0], scope)
            if isinstance(v, np.ndarray):
                return np.logical_not(v)
            if not isinstance(v, (int, float, bool, np.generic, str)):
                self._fail(node, f"~ needs a logical or number, received {_kind(v)}")
            return not v
        if kind == "postfix_operator":
            v = self._value(node.named_children[0], scope)
            if isinstance(v, np.ndarray):
                return v.reshape(-1, 1) if v.ndim == 1 else (v.ravel() if v.shape[1] == 1 else v.T)
            if isinstance(v, Cell):
                return v.transposed()
            return v
        if kind == "range":
            return self._range(node, scope)
        if kind == "lambda":
            args = _child(node, "arguments")
            params = [_text(c, self.src) for c in args.named_children] if args else []
            return Lambda(params, node.named_children[-1], dict(scope), self)
        if kind == "handle_operator":
            name = _text(node.named_children[0], self.src)
            return NamedHandle(name, lambda a, kw, n: self._call(name, a, kw, node, scope, n))
        if kind == "end_keyword":
            stack = getattr(self, "_end_stack", [])
            if not stack:
                self._fail(node, "'end' is used outside of an index")
            return stack[-1]
        if kind == "boolean":
            return _text(node, self.src) == "true"
        self._fail(node, f"{kind.replace('_', ' ')} is not in the MATLAB subset attnlab reads "
                   f"('{_text(node, self.src)[:30]}'); see docs/matlab.md for what is supported")

    def _range(self, node, scope):
        parts = [B._scalar(self._value(c, scope)) for c in node.named_children]
        chars = all(isinstance(p, str) and len(p) == 1 for p in parts)
        if chars:                                 # 'a':'z'
            parts = [ord(p) for p in parts]
        for p in parts:
            if isinstance(p, (bool, np.bool_)):
                continue
            if not isinstance(p, (int, float)):
                self._fail(node, f"a range a:b takes numbers, received {type(p).__name__}")
            if not math.isfinite(p):
                self._fail(node, f"a range a:b needs finite bounds and step, received "
                           f"{B._fmt_value(p)}")
        start, step, stop = (parts[0], 1, parts[1]) if len(parts) == 2 else parts
        n = int(np.floor((stop - start) / step + 1e-10)) + 1 if step else 0
        n = max(n, 0)
        if n > self.limits.elements:
            self._limit(node, "elements", f"this range would have {n:,} elements, over the "
                        f"limit of {self.limits.elements:,} (Limits.elements).")
        vals = start + step * np.arange(n)
        if chars:
            return "".join(chr(int(v)) for v in vals)
        return vals.astype(int) if all(isinstance(p, int) for p in (start, step)) else vals

    def _value(self, node, scope):
        v = self.eval_in(node, scope)
        if isinstance(v, Missing):
            raise NeedsData(f"uses a value from line {v.line}, which was skipped")
        return v

    def _name(self, node, scope, nargout):
        name = _text(node, self.src)
        if name in scope:
            v = scope[name]
            if isinstance(v, Passed):           # an argument its caller could not compute
                raise NeedsData(f"uses '{name}', which line {v.line} passed without a value "
                                f"({v.why})", v.var)
            if isinstance(v, Missing):
                raise NeedsData(f"uses '{name}' from line {v.line}, which was skipped" if v.line
                                else f"needs '{name}', {v.why} (give it with --set "
                                f"{name}=VALUE)", name)
            return v
        if name in B.CONSTANTS:
            return B.CONSTANTS[name]
        if name in self.functions or name in self.toolbox or name in B.BASE or name in B.DATA \
                or name in B.OUTSIDE or name in _CUSTOM_LOOP:
            return self._call(name, [], {}, node, scope, nargout)
        if name in B.NAMESPACES:
            return B.NAMESPACES[name]
        if scope is not self.ws and name in self.ws and self._outside_function(name, scope):
            self._fail(node, self._outside_function(name, scope))  # MATLAB's scopes (calling.py)
        if name in self.given and self._given_here(scope):
            return self.given[name]            # a function file's variable, given with --set
        if self.analyze:
            # data the script does not define: skipped, and named if a network needed it
            line = self.plan.loaded_by(node)
            where = f"which load at line {line} would read from a file" if line else \
                "which the script does not define"
            raise NeedsData(f"needs '{name}', {where} (give it with --set {name}=VALUE)",
                            name, node)
        known = list(scope) + (list(self.toolbox) + list(B.BASE) if name.endswith("Layer") else [])
        self._fail(node, f"undefined variable or function '{name}'.{close_matches(name, known)} "
                   f"Give it a value: attnlab analyze FILE.m --set {name}=VALUE, or "
                   f"run_file(path, workspace={{'{name}': …}})".replace(". .", "."))

    def _row(self, row, scope):
        out: list = []
        for c in row.named_children:
            if c.type in ("comment", "line_continuation"):
                continue
            v = self._value(c, scope)
            if isinstance(v, Cell) and c.type == "function_call" and _child(c, "{") is not None:
                out.extend(v)                    # [c{:}]: the cells' contents, side by side
            else:
                out.append(v)
        return out

    def _cell(self, node, scope) -> Cell:
        """{a, b} is 1×2, {a; b} 2×1, {a, b; c, d} 2×2: rows of one length, as MATLAB needs."""
        rows = [r for r in (self._row(row, scope) for row in node.named_children
                            if row.type == "row") if r]
        if len({len(r) for r in rows}) > 1:
            self._fail(node, "Dimensions of arrays being concatenated are not consistent: the "
                       f"rows of this cell array have {', '.join(str(len(r)) for r in rows)} "
                       "cells.")
        return Cell.from_rows(rows)

    def _cells(self, node, rows) -> Cell:
        """[c1, c2] side by side, [c1; c2] one above the other: cell arrays joined as MATLAB
        joins arrays (empty ones left out)."""
        grids = []
        for r in rows:
            parts = [v.grid() for v in r if isinstance(v, Cell) and len(v)]
            if not parts:
                continue
            if len({len(g) for g in parts}) > 1:
                self._fail(node, "Dimensions of arrays being concatenated are not consistent: "
                           "cell arrays side by side need the same number of rows.")
            grids.append([sum((g[i] for g in parts), []) for i in range(len(parts[0]))])
        joined = [row for g in grids for row in g]
        if len({len(r) for r in joined}) > 1:
            self._fail(node, "Dimensions of arrays being concatenated are not consistent: cell "
                       "arrays one above the other need the same number of columns.")
        return Cell.from_rows(joined)

    def _matrix(self, node, scope):
        rows = [self._row(r, scope) for r in node.named_children if r.type == "row"]
        items = [v for r in rows for v in r]
        if not items:
            return np.zeros(0)
        if any(isinstance(v, Categorical) for v in items):    # [YTrain; YTest]
            try:
                return Categorical.concatenate(items)
            except AttnlabError as e:
                self._fail(node, str(e))
        if any(isinstance(v, Cell) for v in items):       # [c1, c2]: cells concatenate
            if not all(isinstance(v, Cell) or isinstance(v, np.ndarray) and v.size == 0
                       for v in items):
                self._fail(node, "cannot concatenate a cell array with other values: put them "
                           "in the cell array ({c{:}, x}) or use {c, x}")
            return self._cells(node, rows)
        total = sum(len(v) if isinstance(v, (str, list)) else int(np.size(v))
                    if isinstance(v, (np.ndarray, int, float, bool, np.generic)) else 1
                    for v in items)
        if total > self.limits.elements or (total > self.limits.chars and
                                            all(isinstance(v, str) for v in items)):
            which = "chars" if all(isinstance(v, str) for v in items) else "elements"
            self._limit(node, which, f"this concatenation would have {total:,} "
                        f"{'characters' if which == 'chars' else 'elements'}, over the limit of "
                        f"{getattr(self.limits, which):,} (Limits.{which}).")
        if any(_is_layerish(v) for v in items):
            out = []
            for v in items:
                if isinstance(v, (list, tuple)):
                    out.extend(v)
                elif isinstance(v, np.ndarray) and v.size == 0:
                    continue
                else:
                    out.append(v)
            return out
        if all(isinstance(v, str) for v in items):
            if any(isinstance(v, String) for v in items):
                return [String(v) for v in items]
            return "".join(items) if len(rows) == 1 else items
        try:
            built = [np.hstack([np.atleast_1d(np.asarray(v, dtype=float)) for v in r]) for r in rows if r]
            return built[0] if len(built) == 1 else np.vstack(built)
        except (ValueError, TypeError) as e:
            self._fail(node, f"cannot concatenate these values: {e}")

    def _binary(self, node, scope):
        left, right = node.named_children[0], node.named_children[-1]
        op = _text(node.children[1], self.src)
        if op in ("&&", "||"):
            a = self._truth(self._value(left, scope), left)
            if (op == "&&" and not a) or (op == "||" and a):
                return a
            return self._truth(self._value(right, scope), right)
        a, b = self._value(left, scope), self._value(right, scope)
        if hasattr(a, "detach") and isinstance(b, np.ndarray):     # a prediction and an array
            a = a.detach().cpu().numpy()
        elif hasattr(b, "detach") and isinstance(a, np.ndarray):
            b = b.detach().cpu().numpy()
        if op in ("+", "-", "*", "/", "^", ".*", "./", ".^") and _is_number(a) and _is_number(b):
            return _arith(op, a, b)              # numbers are doubles: 2^1e9 is Inf, 1/0 Inf
        self._check_result(node, op, a, b)
        if op in ("&", "|"):
            return (np.logical_and if op == "&" else np.logical_or)(a, b) if \
                isinstance(a, np.ndarray) or isinstance(b, np.ndarray) else \
                (bool(a) and bool(b) if op == "&" else bool(a) or bool(b))
        if (isinstance(a, String) or isinstance(b, String)) and op == "+":
            return String(B._fmt_value(a) if not isinstance(a, str) else a) + \
                (B._fmt_value(b) if not isinstance(b, str) else b)     # "sa" + 1 is "sa1"
        if op == "*":
            if isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.ndim == 2 and \
                    b.ndim == 2:
                if a.shape[1] != b.shape[0]:
                    self._fail(node, f"*: matrix product of {_size_text(a.shape)} and "
                               f"{_size_text(b.shape)}: the inner sizes must agree (use .* "
                               "for elementwise)")
                return a @ b
            try:
                return a * b
            except (TypeError, ValueError) as e:
                self._fail(node, f"*: cannot apply it to {_kind(a)} and {_kind(b)} ({e})")
        if op == "/":
            if isinstance(b, np.ndarray) and b.size > 1:
                self._fail(node, "matrix right division is not supported; use ./")
            try:
                return a / b
            except (TypeError, ValueError) as e:
                self._fail(node, f"/: cannot apply it to {_kind(a)} and {_kind(b)} ({e})")
        if op == "^":
            if isinstance(a, np.ndarray) and a.size > 1:
                self._fail(node, "matrix power is not supported; use .^")
            try:
                return np.asarray(a, dtype=float) ** b if isinstance(a, np.ndarray) else a ** b
            except (TypeError, ValueError) as e:
                self._fail(node, f"^: cannot apply it to {_kind(a)} and {_kind(b)} ({e})")
        fn = _BINARY.get(op)
        if fn is None:
            self._fail(node, f"operator {op} is not supported")
        if op in ("==", "~=") and isinstance(a, str) and isinstance(b, str):
            return fn(a, b)
        try:
            return fn(a, b)
        except (TypeError, ValueError) as e:
            self._fail(node, f"{op}: cannot apply it to {_kind(a)} and {_kind(b)} ({e})")

    def _check_result(self, node, op, a, b):
        """Refuses, before it is computed, an operation on arrays whose result would be past
        Limits.elements (an outer product by broadcasting, a matrix product)."""
        if not (isinstance(a, np.ndarray) or isinstance(b, np.ndarray)):
            return
        sa, sb = np.shape(a), np.shape(b)
        if op == "*" and len(sa) == 2 and len(sb) == 2:
            n = sa[0] * sb[1]
        else:
            try:
                n = math.prod(np.broadcast_shapes(sa, sb))
            except ValueError:
                self._fail(node, f"{op}: the sizes {_size_text(sa)} and {_size_text(sb)} do not "
                           "match (each dimension must be equal, or 1 in one of them)")
        if n > self.limits.elements:
            self._limit(node, "elements", f"{op} would make an array of {n:,} elements, over "
                        f"the limit of {self.limits.elements:,} (Limits.elements).")

    # -------------------------------------------------------------------- indexing, fields --
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

