"""Assigning: x = v, [a, b] = f(...), x(i) = v, c{i} = v, s.a.b = v, obj.Prop = v."""
from __future__ import annotations

import numpy as np

from attnlab.core.errors import AttnlabError
from ..network import Network
from . import builtins as B
from .reader import (
    Limits,
    ScriptError,
)
from .script_values import (
    _WORK,
    Part,
    _child,
    _count,
    _has,
    _is_datastore,
    _is_layerish,
    _kind,
    _size_text,
    _text,
)
from .objects import MapObject, StructArray, Table
from .values import Categorical, Cell, Handle, MatlabError, Missing, NeedsData, Struct


class Assigning(Part):
    """The interpreter's assignments (a part of `Interpreter`)."""

    def _assign(self, node, scope):
        left = node.child_by_field_name("left") or node.named_children[0]
        right = node.child_by_field_name("right") or node.named_children[-1]
        if left.type == "multioutput_variable":
            outs = [c for c in left.named_children]
            values = self.eval_in(right, scope, nargout=len(outs))
            if not isinstance(values, tuple):
                values = (values,)
            if len(values) < len(outs):
                self._fail(right, f"expected {len(outs)} outputs, received {len(values)}")
            for target, value in zip(outs, values):
                if target.type == "identifier":
                    scope[_text(target, self.src)] = value
                elif target.type in ("function_call", "field_expression"):
                    self._store(target, value, scope)          # [Y(t, :), state] = predict(…)
            return
        value = self.eval_in(right, scope)
        if isinstance(value, tuple):
            value = value[0] if value else None
        if value is None:
            self._fail(right, "this call returns no value to assign")
        self._store(left, value, scope)

    def _hold(self, node, name, value, scope):
        """A skipped statement's first target holds `value` (the network a training call was
        given): the variable itself, or the element an indexed target names (`net{i} = …` in a
        cross-validation loop keeps the cell array and sets its element)."""
        left = node.child_by_field_name("left") or node.named_children[0]
        if left.type == "function_call" and _text(left.named_children[0], self.src) == name:
            held = scope.get(name)
            if held is None or isinstance(held, list):
                try:
                    self._store(left, value, scope)
                    return
                except (MatlabError, NeedsData, ScriptError):
                    pass                         # an index the skipped data would give
        scope[name] = value

    def _store(self, target, value, scope):
        if isinstance(value, (Cell, Struct)):
            self._check_count(value, target)
        if target.type == "identifier":
            scope[_text(target, self.src)] = value
        elif isinstance(value, Missing):               # x(i) = f(…) of a skipped result
            raise NeedsData(f"uses a value from line {value.line}, which was skipped")
        elif target.type == "function_call":           # x(i) = v, c{i} = v
            name_node = target.named_children[0]
            container = self._lvalue(name_node, scope)
            if isinstance(container, Missing):
                raise NeedsData(f"sets part of '{_text(name_node, self.src)}', which line "
                                f"{container.line} left uncomputed")
            if isinstance(container, Handle):
                return
            args = _child(target, "arguments")
            new = self._set_index(container, args, value, _text(target, self.src), scope,
                                  brace=_child(target, "{") is not None)
            self._store(name_node, new, scope) if name_node.type != "identifier" else \
                scope.__setitem__(_text(name_node, self.src), new)
        elif target.type == "field_expression":       # s.a.b = v
            parts = target.named_children
            obj_node, fields = parts[0], parts[1:]
            obj = self._lvalue(obj_node, scope)
            if isinstance(obj, Missing):
                raise NeedsData(f"sets a property of '{_text(obj_node, self.src)}', which "
                                + (f"line {obj.line} left uncomputed" if obj.line else obj.why))
            if isinstance(obj, Handle) or _is_datastore(obj):
                return                    # figure, axes, datastore settings: nothing to keep
            self._store(obj_node, self._set_field(obj, fields, value, scope, target), scope)
        else:
            self._fail(target, f"cannot assign to {target.type.replace('_', ' ')}")

    def _lvalue(self, node, scope):
        if node.type == "identifier":
            return scope.get(_text(node, self.src))
        if node.type == "function_call" and node.named_children[0].type == "identifier":
            held = scope.get(_text(node.named_children[0], self.src))
            if isinstance(held, (Struct, StructArray)):      # s(3).a = v grows s
                idx = self._index_args(_child(node, "arguments"), held, scope)
                items = [held] if isinstance(held, Struct) else list(held)
                i = idx[-1] if len(idx) in (1, 2) else None
                if isinstance(i, int):
                    return items[i] if i < len(items) else None
        try:
            return self.eval_in(node, scope)
        except ScriptError:
            return None

    def _set_field(self, obj, fields, value, scope, node):
        head, rest = fields[0], fields[1:]
        if head.type == "function_call":
            name = _text(head.named_children[0], self.src)
            inner = self._get_field(obj, name, head) if obj is not None and _has(obj, name) else None
            if rest:
                element = self._index(inner, _child(head, "arguments"), scope, head) \
                    if inner is not None else None
                value = self._set_field(element, rest, value, scope, node)
            value = self._set_index(inner, _child(head, "arguments"), value,
                                    _text(head, self.src), scope)
        else:
            name = _text(head, self.src) if head.type == "identifier" else \
                str(self.eval_in(head.named_children[0], scope))
            if rest:
                inner = self._get_field(obj, name, head) if obj is not None and _has(obj, name) \
                    else None
                value = self._set_field(inner, rest, value, scope, node)
        if obj is None:
            obj = Struct()
        if isinstance(obj, Struct):
            obj = Struct(obj)                    # a value: t = s; t.a = 1 leaves s as it was
            obj[name] = value
            return obj
        if isinstance(obj, Table):
            return obj.set_variable(name, value)
        from .properties import set_property
        try:
            return set_property(obj, name, value)
        except (AttnlabError, MatlabError) as e:
            self._fail(node, str(e) if isinstance(e, AttnlabError) else e.message)

    def _set_index(self, container, args, value, what, scope, brace=False):
        if isinstance(container, MapObject):            # m(key) = v
            pos, _ = self._arguments(args, scope)
            if len(pos) != 1:
                raise MatlabError(f"{what}: a containers.Map takes one key, m(key) = value")
            return container.assign(pos[0], value)
        if isinstance(container, Table):
            raise MatlabError(f"{what}: assigning into a table by index is not supported; set "
                              "a variable with T.Name = value")
        idx = self._index_args(args, container, scope)
        empty = container is None or isinstance(container, np.ndarray) and container.size == 0
        if empty and isinstance(value, Struct) and not brace:
            container = StructArray()                    # s(2) = struct(...)
        elif empty and isinstance(value, Categorical) and not brace:
            container = Categorical([], value.categories, value.ordinal, (0, 0))
        elif isinstance(container, Struct) and not brace:
            container = StructArray([container])         # s(2) = t on a struct: an array
        if isinstance(container, StructArray):
            self._check_growth(idx, container)
            return container.matlab_assign(idx, value)
        if isinstance(container, Categorical):          # c(i) = 'label' adds the category
            self._check_growth(idx, container)
            try:
                return container.assign(idx, value)
            except AttnlabError as e:
                raise MatlabError(f"{what}: {e}") from None
        if container is None:
            container = [] if _is_layerish(value) else Cell() if brace else np.zeros(0)
        column = None                                # a cell vector's orientation
        if isinstance(container, Cell):
            idx, column = _cell_position(container, idx)
        if isinstance(container, list) and not isinstance(container, Cell) and len(idx) == 2 \
                and (idx[0] == 0 or idx[1] == 0) and all(isinstance(i, int) for i in idx):
            idx = [idx[1] if idx[0] == 0 else idx[0]]  # c{1, j}, c{i, 1}: a vector's element
        elif _is_layerish(container) and not isinstance(container, (list, Network)):
            container = [container]                  # one layer is a 1×1 layer array
        self._check_growth(idx, container)
        # a list's items cost more to copy than an array's numbers
        size = 4 * len(container) if isinstance(container, list) else int(np.size(container))
        if size >= _WORK and args is not None:
            self._work(size, args)               # x(i) = v copies x
        if isinstance(container, list):
            items = list(container)
            if len(idx) != 1 or not isinstance(idx[0], int):
                if len(idx) == 1 and isinstance(value, np.ndarray) and value.size == 0:
                    drop = set(np.atleast_1d(idx[0]).tolist())
                    kept = type(container)(x for i, x in enumerate(items) if i not in drop)
                    return _cell_dims(kept, container, column)
                raise MatlabError(f"{what}: expected one index when assigning into a list")
            i = idx[0]
            count = container.__dict__.get("_count") if isinstance(container, Cell) else None
            if count is not None and i < len(items):
                count -= _count(items[i])
            if isinstance(value, np.ndarray) and value.size == 0 and not brace:
                del items[i]
            else:
                if len(items) <= i:
                    if count is not None:
                        count += i - len(items)  # the empty cells it grows by
                    items.extend([None] * (i + 1 - len(items)))
                items[i] = value
                if count is not None:
                    count += _count(value)
            if not isinstance(container, Cell):
                return items
            new = _cell_dims(type(container)(items), container, column)
            if count is not None:                # c{i} = v: counted from c's count
                new.__dict__["_count"] = count
            return new
        if not isinstance(container, np.ndarray) and not isinstance(container, (int, float, bool)):
            raise MatlabError(f"{what}: cannot assign into {_kind(container)} by index")
        if not isinstance(value, (int, float, bool, np.ndarray, np.generic)):
            raise MatlabError(f"{what}: an array of numbers takes numbers, received "
                              f"{_kind(value)} (use a cell array {{…}} for other values)")
        arr = np.array(container, dtype=float) if not isinstance(container, np.ndarray) \
            else container.copy()
        if arr.ndim == 0:
            arr = arr.reshape(1)
        if len(idx) == 1 and isinstance(idx[0], int) and idx[0] >= arr.size:
            grown = np.zeros(idx[0] + 1)
            grown[:arr.size] = arr.ravel()
            arr = grown
        elif len(idx) == 1 and isinstance(idx[0], np.ndarray) and idx[0].size and \
                int(idx[0].max()) >= arr.size and (arr.ndim == 1 or arr.size == 0):
            grown = np.zeros(int(idx[0].max()) + 1)     # x(4:6) = v past the end
            grown[:arr.size] = arr.ravel()
            arr = grown
        elif len(idx) >= 2 and not (isinstance(value, np.ndarray) and value.size == 0):
            arr = self._grown(arr, idx, value)          # x(3, 2) = v, r(end+1, :) = row
        try:
            if isinstance(value, np.ndarray) and value.size == 0 and len(idx) == 1:
                return np.delete(arr.ravel(order="F"), idx[0])  # x(i) = []
            if isinstance(value, np.ndarray) and value.size == 0 and len(idx) == 2 and \
                    arr.ndim == 2 and any(isinstance(i, slice) for i in idx):   # x(rows, :) = []
                axis = 0 if isinstance(idx[1], slice) else 1
                return np.delete(arr, idx[axis], axis=axis)
            if len(idx) == 1 and arr.ndim > 1 and arr.size not in arr.shape:
                flat = arr.ravel(order="F")                      # x(k) of a matrix: column-major
                flat[idx[0]] = value
                return flat.reshape(arr.shape, order="F")
            if len(idx) == 1 and arr.ndim > 1:                   # a 1×n or n×1 array
                arr.reshape(-1)[idx[0]] = value
                return arr
            arr[tuple(idx) if len(idx) > 1 else idx[0]] = value
        except (IndexError, ValueError) as e:
            raise MatlabError(f"{what}: cannot assign {_kind(value)} there in an array of size "
                              f"{_size_text(B._shape(arr))} ({e})") from None
        return arr

    def _grown(self, arr, idx, value):
        """`arr` padded with zeros to hold subscripts `idx` (MATLAB grows an array assigned
        past its end); a `:` of an empty array takes its size from the value."""
        shape = list((1, arr.shape[0]) if arr.ndim == 1 else arr.shape)
        shape += [1] * (len(idx) - len(shape))
        vshape = list(np.shape(value))
        need = []
        for k, i in enumerate(idx):
            if isinstance(i, slice):
                extent = shape[k] if shape[k] or not vshape else \
                    (vshape[-1] if k == len(idx) - 1 or len(vshape) == 1 else vshape[k])
                need.append(max(shape[k], extent))
            else:
                top = int(np.max(i)) if np.size(i) else -1
                need.append(max(shape[k], top + 1))
        if need == shape[:len(need)] and len(shape) == len(need):
            return arr if arr.ndim != 1 or len(idx) != 2 else arr.reshape(1, -1)
        n = int(np.prod(need))
        if n > self.limits.elements:
            raise B.Exhausted(f"assigning there would grow the array to {n:,} elements, past "
                              f"the limit of {self.limits.elements:,} (Limits.elements). "
                              f"{Limits.hint('elements')}", "elements")
        grown = np.zeros(need)
        old = arr.reshape(shape) if arr.size else np.zeros([0] * len(need))
        grown[tuple(slice(0, d) for d in old.shape)] = old
        return grown

    def _check_growth(self, idx, container):
        """An assignment past the end grows the array to that index: refused before it grows
        past Limits.elements."""
        if len(idx) != 1:
            return
        i = idx[0]
        top = int(np.max(i)) if isinstance(i, np.ndarray) and i.size else i \
            if isinstance(i, int) else -1
        if top + 1 > self.limits.elements:
            raise B.Exhausted(f"assigning element {top + 1:,} would grow the array past the "
                              f"limit of {self.limits.elements:,} elements (Limits.elements). "
                              f"{Limits.hint('elements')}", "elements")


def _cell_position(c: Cell, idx: list) -> tuple[list, bool | None]:
    """(the index, whether a vector it makes is a column): c{i, j} inside c is its linear
    position; c{i, 1} past the end of a column (or of an empty cell array) grows a column,
    c{1, j} a row."""
    if len(idx) != 2 or not all(isinstance(i, int) for i in idx):
        return idx, None
    rows, cols = c.dims
    if idx[0] < rows and idx[1] < cols:
        return [idx[0] + idx[1] * rows], None
    if idx[1] == 0 and cols <= 1:
        return [idx[0]], True
    if idx[0] == 0 and rows <= 1:
        return [idx[1]], False
    return idx, None


def _cell_dims(new, old, column: bool | None):
    """`new` (the cells after an assignment into `old`) with old's size when it still fits,
    else as a vector of old's orientation (or `column`'s)."""
    if not isinstance(new, Cell) or not isinstance(old, Cell):
        return new
    rows, cols = old.dims
    if len(new) == rows * cols:
        return new.with_dims((rows, cols))
    if column is None:
        column = cols == 1 and rows > 1
    return new.with_dims((len(new), 1) if column else (1, len(new)))

