"""Evaluating expressions: numbers, text, names, ranges, matrices, cells, operators (calls,
indexing and fields are indexing.py)."""
from __future__ import annotations

import math

import numpy as np

from attnlab.core.errors import AttnlabError, close_matches
from . import builtins as B
from .script_values import (
    _BINARY,
    _CUSTOM_LOOP,
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
from .values import Categorical, Cell, Lambda, Missing, NamedHandle, NeedsData, String, Struct


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
            self._fail(node, self._outside_function(name, scope))  # MATLAB's scopes (workspace_calls.py)
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
