"""What the interpreter's parts share: the toolbox's name sets, control flow, the script's functions, parse-tree walks and value kinds."""
from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

from attnlab.core.errors import AttnlabError
from ..layers.base import Layer
from ..network import Network
from . import builtins as B
from .values import (Categorical, Cell, Lambda, MatlabError, Missing, NeedsData, Struct,
                     kind_of)

_DISPLAY = {"plot", "analyzeNetwork", "figure", "deepNetworkDesigner"}
# toolbox functions that allocate a network's weights (checked against Limits.learnables)
_INITIALIZES = {"dlnetwork", "initialize", "trainnet", "trainNetwork"}
_GRAPH_EDITS = {"dlnetwork", "layerGraph", "addLayers", "connectLayers", "disconnectLayers",
                "removeLayers", "replaceLayer", "initialize"}
# functions that return the network they were given, trained or updated: a statement that calls
# one and is skipped leaves its first output holding that network (the architecture is the same)
_TRAINERS = {"trainNetwork", "trainnet", "dlupdate", "adamupdate", "sgdmupdate",
             "rmspropupdate", "lbfgsupdate", "initialize", "resetState", "predictAndUpdateState"}
# the functions of a custom training loop: a loop that calls one is skipped whole by analyze
_LOOP_TRAINING = {"dlfeval", "dlgradient", "adamupdate", "sgdmupdate", "rmspropupdate",
                  "dlupdate", "lbfgsupdate"}
_CUSTOM_LOOP = _LOOP_TRAINING | {"trainingProgressMonitor", "recordMetrics", "updateInfo",
                                 "groupSubPlot", "minibatchqueue"}
# functions that run text as code: never run (the reader has no eval). evalin and assignin,
# which read or set a variable of another workspace, run in workspace_calls.py: their text is
# parsed and run by this interpreter, bounded by the script's Limits, never by Python
_EVAL = {"eval", "evalc"}
_CLEAR_WORDS = {"all", "variables", "functions", "classes", "global", "mex", "import", "java",
                "-all", "-variables", "-functions", "-classes", "-global"}


class Part:
    """A part of the Interpreter (its statements, assignments, expressions, calls): the
    attributes and methods it uses belong to the Interpreter the parts make together."""

    if TYPE_CHECKING:
        src: bytes                               # the text running now (evalin swaps it)

        def _fail(self, node: Any, message: str) -> NoReturn: ...

        def __getattr__(self, name: str) -> Any: ...


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


class _Return(Exception):
    pass


# what passes through a statement unchanged: control flow, and analyze's skips
_FLOW = (_Break, _Continue, _Return, NeedsData)


class Passed(Missing):
    """An argument analyze passes to a function of the script's own although it could not be
    computed (it needs data): the statements of the function that use it are skipped, the
    others run. `var` names what to give with --set (the caller's variable)."""


class Undefined(MatlabError):
    """A name no path of the script assigns, used where MATLAB stops with "Unrecognized
    function or variable" (found before the script runs; a `try` in the script catches it, as
    MATLAB's does)."""

    def __init__(self, name: str, why: str, node=None):
        super().__init__(f"Unrecognized function or variable '{name}'. MATLAB stops here too: "
                         f"{why}; assign it before this line", "MATLAB:UndefinedFunction", node)
        self.name = name


class Function:
    """A function defined in the script (local function, or the first function of a file)."""

    def __init__(self, node, src: bytes):
        self.node = node
        self.name = _text(node.child_by_field_name("name") or _child(node, "identifier"), src)
        out = _child(node, "function_output")
        if out is not None and _child(out, "multioutput_variable") is not None:
            out = _child(out, "multioutput_variable")      # function [a, b] = f(...)
        self.outputs = [_text(c, src) for c in _walk_ids(out)] if out else []
        args = _child(node, "function_arguments")
        self.params = [_text(c, src) for c in args.named_children if c.type == "identifier"] \
            if args else []
        self.body = _child(node, "block")
        # arguments blocks: defaults of positional arguments, and name–value arguments
        # (options.Name = default) by struct parameter, in order
        self.defaults: dict = {}
        self.options: dict[str, dict] = {}
        for block in (c for c in node.named_children if c.type == "arguments_statement"):
            for prop in (c for c in block.named_children if c.type == "property"):
                head = prop.named_children[0]
                default = _child(prop, "default_value")
                value = default.named_children[0] if default is not None and \
                    default.named_children else None
                if head.type == "property_name" and len(head.named_children) == 2:
                    struct, field = (_text(c, src) for c in head.named_children)
                    self.options.setdefault(struct, {})[field] = value
                elif head.type == "identifier" and value is not None:
                    self.defaults[_text(head, src)] = value


def _child(node, kind):
    return next((c for c in node.children if c.type == kind), None) if node is not None else None


def _descendants(node):
    stack = list(node.named_children)
    while stack:
        n = stack.pop()
        yield n
        stack.extend(n.named_children)


def _walk_ids(node):
    return [c for c in node.named_children if c.type == "identifier"] if node.type != "identifier" \
        else [node]


def _text(node, src: bytes) -> str:
    return src[node.start_byte:node.end_byte].decode("utf-8")


_BINARY = {"+": operator.add, "-": operator.sub, ".*": operator.mul, "./": operator.truediv,
           ".^": operator.pow, "<": operator.lt, "<=": operator.le, ">": operator.gt,
           ">=": operator.ge, "==": operator.eq, "~=": operator.ne, "!=": operator.ne}


_WORK = 4096
_STEPS = (f"statements, loop iterations and expressions evaluated, and one more per {_WORK:,} "
          "array elements made or copied")


def _is_datastore(obj) -> bool:
    from .data import ArrayDatastore, CombinedDatastore
    return isinstance(obj, (ArrayDatastore, CombinedDatastore))


def _count(v, memo=None) -> int:
    """How many values `v` holds: an array its elements, a cell array or struct one (itself)
    plus what it holds, a part held twice counted twice. A cell array's count is kept on it (the
    interpreter never changes a cell array in place, it makes a new one)."""
    if isinstance(v, np.ndarray):
        return int(v.size)
    if isinstance(v, Cell):
        n = v.__dict__.get("_count")
        if n is None:
            memo = {} if memo is None else memo
            memo["walked"] = memo.get("walked", 0) + len(v)
            n = 1 + sum(_count(x, memo) for x in v)
            v.__dict__["_count"] = n
        return n
    if isinstance(v, Struct):
        memo = {} if memo is None else memo
        key = id(v)
        if key not in memo:
            memo[key] = 1                        # a struct holding itself counts once
            memo["walked"] = memo.get("walked", 0) + len(v)
            memo[key] = 1 + sum(_count(x, memo) for x in v.values())
        return memo[key]
    if isinstance(v, list):
        return 1 + len(v)
    return 1


def _flat_layers(v) -> list:
    out: list = []
    stack = [v]
    while stack:
        x = stack.pop()
        if isinstance(x, (list, tuple)):
            stack.extend(reversed(x))
        else:
            out.append(x)
    return out


def _has(obj, name):
    return isinstance(obj, Struct) and name in obj or not isinstance(obj, Struct)


def _is_layerish(v) -> bool:
    from .layers import OutputLayer
    if isinstance(v, (Layer, OutputLayer, Network)):
        return True
    return isinstance(v, list) and not isinstance(v, Cell) and any(
        isinstance(x, (Layer, OutputLayer)) for x in v)


def _equal(a, b) -> bool:
    if isinstance(a, Categorical) or isinstance(b, Categorical):   # switch c, case 'label'
        try:
            return bool(np.all(a == b))
        except AttnlabError:
            return False
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    if not all(isinstance(v, (int, float, bool, np.ndarray, np.generic)) for v in (a, b)):
        return a is b                            # cells, structs, layers: never walked
    try:
        return bool(np.all(np.asarray(a) == np.asarray(b)))
    except (TypeError, ValueError):
        return False


def _to_python(v):
    """MATLAB values → what attnlab.matlab's functions take (numbers, lists, arrays)."""
    if isinstance(v, np.ndarray):
        if v.size == 1 and v.ndim <= 1:
            return B._scalar(v)
        if v.ndim == 2 and 1 in v.shape and v.dtype != object:
            return v.ravel()
        return v
    if isinstance(v, Lambda):
        return v
    return B._scalar(v) if isinstance(v, float) else v


def _is_number(v) -> bool:
    return isinstance(v, (int, float, np.number)) and not isinstance(v, np.ndarray)


_ARITH = {"+": operator.add, "-": operator.sub, "*": operator.mul, ".*": operator.mul,
          "/": operator.truediv, "./": operator.truediv, "^": operator.pow, ".^": operator.pow}


def _arith(op, a, b):
    """`a op b` for two numbers, as MATLAB's doubles: 1/0 is Inf, 2^10000 Inf, (-8)^(1/3) NaN
    (complex results are not supported); whole results stay ints."""
    return B._scalar(_ARITH[op](np.float64(a), np.float64(b)))


def _kind(v) -> str:
    """A value's MATLAB kind, for messages."""
    if _is_layerish(v):
        return "a layer array" if isinstance(v, list) else f"a {type(v).__name__}"
    return kind_of(v)


def _size_text(shape) -> str:
    return "×".join(str(int(d)) for d in shape) if len(shape) else "1×1"


def _describe(pos) -> str:
    return ", ".join(_kind(p) for p in pos) or "none"
