"""What a script's function declares about its inputs and outputs, and binding a call to it as
MATLAB does: `~` inputs, `varargin`/`varargout`, `nargin`/`nargout`, and `arguments` blocks
(positional defaults, sizes, classes, validation functions, name-value structures `opts.Name`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from attnlab.core.errors import close_matches
from .script_values import _child, _text
from .values import Categorical, Cell, MatlabError, String, Struct


@dataclass
class ArgSpec:
    """One declaration of an arguments block: `name (dims) class {validators} = default`."""
    name: str
    dims: list | None = None            # ints and None (':'), or None when not declared
    cls: str | None = None
    validators: list = field(default_factory=list)   # parse nodes
    default: Any = None                 # a parse node, or None


class Signature:
    """A function's declaration: its inputs in order (None for `~`), `varargin`, `varargout`,
    and the specs of its (input) arguments blocks — positional ones by name, name-value ones
    by structure and field."""

    def __init__(self, fn, src: bytes):
        node = fn.node
        args = _child(node, "function_arguments")
        self.inputs: list[str | None] = []
        for c in (args.named_children if args is not None else []):
            if c.type == "identifier":
                self.inputs.append(_text(c, src))
            elif c.type == "ignored_argument":
                self.inputs.append(None)
        self.outputs = list(fn.outputs)
        self.varargin = bool(self.inputs) and self.inputs[-1] == "varargin"
        self.varargout = bool(self.outputs) and self.outputs[-1] == "varargout"
        self.specs: dict[str, ArgSpec] = {}
        self.options: dict[str, dict[str, ArgSpec]] = {}
        self.repeating: set[str] = set()
        self.has_block = False
        for block in (c for c in node.named_children if c.type == "arguments_statement"):
            words = {_text(a, src).lower() for a in _child(block, "attributes").named_children} \
                if _child(block, "attributes") is not None else set()
            if "output" in words:
                continue                        # output validation: the values are the script's
            self.has_block = True
            for prop in (c for c in block.named_children if c.type == "property"):
                spec = self._spec(prop, src)
                if spec is None:
                    continue
                if "." in spec.name:
                    struct, name = spec.name.split(".", 1)
                    self.options.setdefault(struct, {})[name] = spec
                else:
                    self.specs[spec.name] = spec
                    if "repeating" in words:
                        self.repeating.add(spec.name)
        self.positional = [p for p in self.inputs if p not in self.options and p != "varargin"]

    @staticmethod
    def _spec(prop, src) -> ArgSpec | None:
        head = prop.named_children[0]
        if head.type == "property_name":
            name = ".".join(_text(c, src) for c in head.named_children)
        elif head.type == "identifier":
            name = _text(head, src)
        else:
            return None
        spec = ArgSpec(name)
        for c in prop.named_children[1:]:
            if c.type == "dimensions":
                spec.dims = [None if d.type == "spread_operator" else
                             int(float(_text(d, src))) for d in c.named_children]
            elif c.type == "validation_functions":
                spec.validators = list(c.named_children)
            elif c.type == "default_value":
                spec.default = c.named_children[0] if c.named_children else None
            elif spec.cls is None:
                spec.cls = _text(c, src)
        return spec

    def split(self, fname: str, args: list, kw: dict) -> tuple[list, dict]:
        """(positional values, name-value pairs by given name), as MATLAB reads a call: after
        the required inputs, a text naming a name-value argument (and followed by a value)
        starts the pairs, also in place of an optional input."""
        kw = dict(kw)
        if not self.options:
            if kw:                              # f(x, Name=v) is f(x, "Name", v) for varargin
                args = list(args) + [v for k, value in kw.items() for v in (String(k), value)]
            return list(args), {}
        fields = {f.lower(): f for fields in self.options.values() for f in fields}
        required = next((i for i, p in enumerate(self.positional)
                         if p is not None and self.specs.get(p) is not None and
                         self.specs[p].default is not None), len(self.positional))
        pos: list = []
        i = 0
        while i < len(args) and len(pos) < len(self.positional):
            a = args[i]
            if len(pos) >= required and isinstance(a, str) and i + 1 < len(args) and \
                    _field(fields, a) is not None:
                break
            pos.append(a)
            i += 1
        rest = list(args[i:])
        if len(rest) % 2 or not all(isinstance(k, str) for k in rest[::2]):
            shown = ", ".join(self.options[next(iter(self.options))])
            raise MatlabError(f"{fname}: expected name-value arguments ({shown}) after its "
                              f"{len(pos)} positional argument{'s' if len(pos) != 1 else ''}, "
                              f"received {len(rest)} more value{'s' if len(rest) != 1 else ''}"
                              + (f" ({_shown(rest[0])} is not one of the names)" if rest and
                                 not (isinstance(rest[0], str) and _field(fields, rest[0]))
                                 else ""))
        pairs = dict(zip([str(k) for k in rest[::2]], rest[1::2]))
        pairs.update(kw)
        return pos, pairs


def _field(fields: dict, name: str) -> str | None:
    """The name-value field `name` names: its exact name case-insensitively, or the one it is
    the start of (MATLAB matches partial names when they are unique)."""
    key = str(name).lower()
    if key in fields:
        return fields[key]
    starts = [f for k, f in fields.items() if k.startswith(key)] if key else []
    return starts[0] if len(starts) == 1 else None


def match_field(fname: str, fields: dict[str, Any], name: str) -> str:
    found = _field({f.lower(): f for f in fields}, name)
    if found is None:
        raise MatlabError(f"{fname}: expected a name–value argument among "
                          f"{', '.join(fields)}, received '{name}'."
                          f"{close_matches(str(name), list(fields))}".rstrip("."))
    return found


def _shown(v) -> str:
    if isinstance(v, str):
        return f"'{v}'"
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return repr(v)
    return f"a {type(v).__name__}"


# ============================================================================ validation ===

def _shape(v) -> tuple[int, ...]:
    from .builtins import _shape as shape
    return shape(v)


def check_size(v, dims: list, where: str):
    """`(1,1)`, `(1,:)`, `(:,1)`, `(m,n)`: the value's size must fit; a column given for a
    row (or a row for a column) is reshaped, and a scalar is expanded to a fixed size, as
    MATLAB does."""
    shape = _shape(v)
    if len(shape) < len(dims):
        shape = shape + (1,) * (len(dims) - len(shape))
    fixed = [d for d in dims if d is not None]
    if shape == tuple(1 for _ in shape) and None not in dims and fixed and \
            isinstance(v, (int, float, bool, np.ndarray, np.generic)):
        if all(d == 1 for d in dims):
            return v
        return np.full(tuple(dims), float(np.asarray(v).ravel()[0]))   # expanded
    if len(shape) == len(dims) and all(d is None or d == s for d, s in zip(dims, shape)):
        return v
    vector = len(dims) == 2 and (dims[0] == 1 or dims[1] == 1) and \
        sum(s != 1 for s in shape) <= 1 and len(shape) == 2
    if vector and isinstance(v, np.ndarray):
        n = v.size
        want = [n if d is None else d for d in dims]
        if math.prod(want) == n:
            return v.reshape(n) if dims[0] == 1 else v.reshape(n, 1)
    if vector and isinstance(v, (str, list)) and (dims[0] == 1 or dims == [None, 1]):
        return v
    wanted = "×".join(":" if d is None else str(d) for d in dims)
    raise MatlabError(f"{where} Value must be of size {wanted}, received "
                      f"{'×'.join(map(str, shape))}.")


_NUMERIC = ("double", "single", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
            "uint64")


def convert_class(v, cls: str, where: str):
    """The implicit conversion of an arguments block's class: numbers and logicals to a numeric
    class, text to char or string, numbers to logical; other classes are checked."""
    kind = cls.lower()
    if kind in _NUMERIC:
        if isinstance(v, (bool, np.bool_)):
            return int(v)
        if isinstance(v, np.ndarray) and v.dtype == bool:
            return v.astype(float)
        if isinstance(v, str) and not isinstance(v, String):
            codes = [float(ord(c)) for c in v]       # char → its character codes, as MATLAB
            return int(codes[0]) if len(codes) == 1 else np.array(codes)
        if isinstance(v, (int, float, np.number)) or isinstance(v, np.ndarray) and \
                v.dtype.kind in "iuf" or hasattr(v, "detach"):
            return v
        raise MatlabError(f"{where} Value must be numeric or convertible to {cls}, received "
                          f"{_what(v)}.")
    if kind == "logical":
        if isinstance(v, (bool, np.bool_)):
            return bool(v)
        if isinstance(v, (int, float)) and not (isinstance(v, float) and math.isnan(v)):
            return bool(v)
        if isinstance(v, np.ndarray) and v.dtype.kind in "biuf":
            return v.astype(bool)
        raise MatlabError(f"{where} Value must be logical or convertible to logical, received "
                          f"{_what(v)}.")
    if kind == "char":
        if isinstance(v, str):
            return str(v)
        raise MatlabError(f"{where} Value must be a character vector, received {_what(v)}.")
    if kind == "string":
        if isinstance(v, str):
            return String(v)
        if isinstance(v, list) and all(isinstance(x, str) for x in v):
            return [String(x) for x in v]
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            from .text import _fmt_value
            return String(_fmt_value(v))
        raise MatlabError(f"{where} Value must be a string scalar or convertible to string, "
                          f"received {_what(v)}.")
    checks = {"cell": lambda x: isinstance(x, Cell), "struct": lambda x: isinstance(x, Struct),
              "categorical": lambda x: isinstance(x, Categorical),
              "function_handle": lambda x: callable(x) and not _is_matlab_object(x)}
    test = checks.get(kind)
    if test is not None and not test(v):
        raise MatlabError(f"{where} Value must be of class {cls}, received {_what(v)}.")
    return v


def _is_matlab_object(v) -> bool:
    from ..layers.base import Layer
    from ..network import Network
    return isinstance(v, (Layer, Network))


def _what(v) -> str:
    from .script_values import _kind
    return _kind(v)


def _numbers(v, where, name):
    try:
        arr = np.asarray(v.detach().cpu().numpy() if hasattr(v, "detach") else v, dtype=float)
    except (TypeError, ValueError):
        raise MatlabError(f"{where} Value must be numeric ({name}), received {_what(v)}.") from None
    if isinstance(v, str) and not isinstance(v, String):
        raise MatlabError(f"{where} Value must be numeric ({name}), received {_what(v)}.")
    return arr


def _rule(test, words):
    def check(v, where, *args):
        arr = _numbers(v, where, words)
        if not bool(np.all(test(arr, *args))):
            raise MatlabError(f"{where} Value must be {words}.")
    return check


def _member(v, where, options):
    items = list(options) if isinstance(options, (list, tuple)) else \
        np.asarray(options).ravel().tolist()
    values = [v] if isinstance(v, str) or np.ndim(v) == 0 else np.asarray(v).ravel().tolist()
    for x in values:
        if not any(str(x) == str(o) if isinstance(x, str) or isinstance(o, str) else x == o
                   for o in items):
            shown = ", ".join(f"'{o}'" if isinstance(o, str) else str(o) for o in items)
            raise MatlabError(f"{where} Value must be a member of this set: {shown}.")


def _in_range(v, where, lo, hi, *bounds):
    arr = _numbers(v, where, "in range")
    kind = str(bounds[0]).lower() if bounds else "inclusive"
    low = arr > lo if kind in ("exclusive", "exclude-lower") else arr >= lo
    high = arr < hi if kind in ("exclusive", "exclude-upper") else arr <= hi
    if not bool(np.all(low & high)):
        open_lo = kind in ("exclusive", "exclude-lower")
        open_hi = kind in ("exclusive", "exclude-upper")
        raise MatlabError(f"{where} Value must be greater than {'' if open_lo else 'or equal to '}"
                          f"{lo} and less than {'' if open_hi else 'or equal to '}{hi}.")


def _compare(test, words):
    def check(v, where, c):
        arr = _numbers(v, where, words)
        if not bool(np.all(test(arr, float(c)))):
            raise MatlabError(f"{where} Value must be {words} {c}.")
    return check


def _text_check(v, where):
    if not (isinstance(v, str) or isinstance(v, list) and all(isinstance(x, str) for x in v)):
        raise MatlabError(f"{where} Value must be text (a character vector, string array or "
                          "cell array of character vectors).")


def _scalar_text(v, where):
    if not isinstance(v, str):
        raise MatlabError(f"{where} Value must be a single piece of text.")


def _nonempty(v, where):
    if 0 in _shape(v):
        raise MatlabError(f"{where} Value must not be empty.")


def _vector(v, where, *args):
    shape = _shape(v)
    if not (len(shape) == 2 and 1 in shape) or (0 in shape):
        raise MatlabError(f"{where} Value must be a 1-by-n or n-by-1 vector.")


def _row(v, where):
    shape = _shape(v)
    if not (len(shape) == 2 and shape[0] == 1):
        raise MatlabError(f"{where} Value must be a row vector.")


def _column(v, where):
    shape = _shape(v)
    if not (len(shape) == 2 and shape[1] == 1):
        raise MatlabError(f"{where} Value must be a column vector.")


def _scalar_or_empty(v, where):
    shape = _shape(v)
    if 0 not in shape and math.prod(shape) != 1:
        raise MatlabError(f"{where} Value must be scalar or empty.")


def _numeric_check(v, where):
    if isinstance(v, str) or isinstance(v, (Cell, Struct)) or not (
            isinstance(v, (int, float, np.number, np.ndarray)) and not isinstance(v, bool)
            or hasattr(v, "detach")):
        raise MatlabError(f"{where} Value must be numeric.")


def _numeric_or_logical(v, where):
    if not isinstance(v, (bool, np.bool_)) and not (isinstance(v, np.ndarray) and
                                                     v.dtype == bool):
        _numeric_check(v, where)


def _file_check(v, where):
    raise MatlabError(f"{where} mustBeFile checks files, which attnlab's reader never reads.")


# MATLAB's validation functions: name → check(value, where, *their other arguments)
VALIDATORS = {
    "mustBePositive": _rule(lambda a: a > 0, "positive"),
    "mustBeNonnegative": _rule(lambda a: a >= 0, "nonnegative"),
    "mustBeNegative": _rule(lambda a: a < 0, "negative"),
    "mustBeNonpositive": _rule(lambda a: a <= 0, "nonpositive"),
    "mustBeNonzero": _rule(lambda a: a != 0, "nonzero"),
    "mustBeInteger": _rule(lambda a: np.isfinite(a) & (a == np.floor(a)), "integer"),
    "mustBeFinite": _rule(np.isfinite, "finite"),
    "mustBeNonNan": _rule(lambda a: ~np.isnan(a), "non-NaN"),
    "mustBeReal": _rule(lambda a: np.ones_like(a, dtype=bool), "real"),
    "mustBeGreaterThan": _compare(np.greater, "greater than"),
    "mustBeGreaterThanOrEqual": _compare(np.greater_equal, "greater than or equal to"),
    "mustBeLessThan": _compare(np.less, "less than"),
    "mustBeLessThanOrEqual": _compare(np.less_equal, "less than or equal to"),
    "mustBeInRange": _in_range, "mustBeMember": _member, "mustBeNumeric": _numeric_check,
    "mustBeNumericOrLogical": _numeric_or_logical, "mustBeText": _text_check,
    "mustBeTextScalar": _scalar_text, "mustBeNonzeroLengthText": _scalar_text,
    "mustBeNonempty": _nonempty, "mustBeVector": _vector, "mustBeRow": _row,
    "mustBeColumn": _column, "mustBeScalarOrEmpty": _scalar_or_empty,
    "mustBeFile": _file_check, "mustBeFolder": _file_check,
    "mustBeA": lambda v, where, classes: None, "mustBeUnderlyingType": lambda v, where, c: None,
}


def where_text(fname: str, position: int | None, name: str, option: bool) -> str:
    """MATLAB's start of a validation error."""
    if option:
        return f"{fname}: Invalid value for '{name}' argument."
    return f"{fname}: Invalid argument at position {position}."
