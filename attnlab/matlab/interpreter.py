"""A safe interpreter of the MATLAB subset deep-learning scripts use (never Python's eval/exec).

It walks the tree from `reader.parse`: assignments (also `layers(end+1) = …`, `s.a.b = …`,
`[a, b] = f(…)`), numbers, text, logicals, matrices, cells, ranges, arithmetic, layer-array
concatenation, `if`/`elseif`/`else`, `for`, `while`, `switch`, `try`/`catch`, `break`/`continue`,
command syntax (`rng default`, `close all`), anonymous functions `@(x) …`, local functions and
function files. Calls go to the Deep Learning Toolbox functions of `attnlab.matlab` and the base
functions of `builtins.py` only; any other name is an error naming the closest known one.

With `analyze=True` (what `attnlab analyze FILE.m` does) statements that train, predict or read
data are skipped with a note naming the line, and so is every statement that uses their results.

A script is untrusted input: its run is held to `Limits` (steps, array and text sizes, nesting;
reader.py), each one past is a located LimitError that the script's own `try` does not catch,
and any Python exception a statement raises becomes a located ScriptError (`FILE.m:LINE:COL`).
"""
from __future__ import annotations

import math
import operator
import os
import sys
import types
import warnings
from pathlib import Path
from collections.abc import Callable, Iterable
from typing import NoReturn

import numpy as np

from ..errors import AttnlabError, NetworkError, close_matches
from ..layers.base import Layer
from ..network import Network
from . import builtins as B
from ._options import MatlabNote
from .reader import (LimitError, Limits, ScriptError, check_size, current_limits, decode, parse,
                     printable, read_source)
from .values import Categorical, Cell, Handle, Lambda, MatlabError, Missing, NeedsData, String, Struct

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
_CLEAR_WORDS = {"all", "variables", "functions", "classes", "global", "mex", "import", "java",
                "-all", "-variables", "-functions", "-classes", "-global"}


def _toolbox() -> dict:
    from . import layers, networks, training, extras, utility_layers, data, factors
    names = {}
    for module in (layers, networks, training, extras, utility_layers, data, factors):
        names.update({n: getattr(module, n) for n in module.__all__
                      if n[0].islower() and callable(getattr(module, n))})
    return names


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


class _Return(Exception):
    pass


# what passes through a statement unchanged: control flow, and the errors the interpreter
# handles itself (attnlab's errors, MATLAB errors, analyze's skips)
_CONTROL = (_Break, _Continue, _Return, AttnlabError, MatlabError, NeedsData)


def _stack() -> list:
    """The calling thread's Python frames (to size the recursion limit a run needs)."""
    frames: list = []
    f: types.FrameType | None = sys._getframe()
    while f is not None:
        frames.append(f)
        f = f.f_back
    return frames


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


# Python frames one unit of Limits.depth takes at most (a user-function call: eval_in, _eval,
# _function_call, _call, _call_function, _block, _statement, _execute, _assign), so that the
# interpreter's own stack never runs out before Limits.depth does
_FRAMES_PER_DEPTH = 12
# the recursion limit a run may raise Python's to: past it a raised Limits.depth ends in a
# LimitError from Python's own RecursionError, never in a C stack overflow
_MOST_FRAMES = 30_000
# elements made or copied that count as one step of Limits.steps
_WORK = 4096
_STEPS = (f"statements, loop iterations and expressions evaluated, and one more per {_WORK:,} "
          "array elements made or copied")


class Interpreter:
    def __init__(self, source: str | bytes, file: str = "<script>", workspace=None,
                 analyze: bool = False, out=print, limits: Limits | None = None):
        self.limits = limits or current_limits()
        if not isinstance(self.limits, Limits):
            from ..errors import ArgumentError
            raise ArgumentError(f"limits: expected attnlab.matlab.Limits(...), received "
                                f"{type(self.limits).__name__}")
        self.src = decode(source)                # UTF-8, or a Windows-1252/Latin-1 file's text
        self.file = file
        self.steps = 0                           # statements, loop iterations, expressions
        self.depth = 0                           # nesting of calls, expressions, statements
        self._max_steps, self._max_depth = self.limits.steps, self.limits.depth
        self.given = dict(workspace or {})
        self.ws: dict = dict(self.given)
        self.analyze = analyze
        self.notes: list[str] = []
        self.state: dict = {}
        # what the script prints is its text: control characters escaped (never terminal codes)
        self.print = lambda *a, **k: out(*(printable(x) if isinstance(x, str) else x for x in a),
                                         **k)
        self.functions: dict[str, Function] = {}
        self.toolbox = _toolbox()
        self._data_depth = 0                     # > 0 inside the arguments of a data call
        # variables a skipped training statement left holding the network it was given:
        # name -> (line, function, the variable that held the network)
        self.trained: dict[str, tuple[int, str, str]] = {}
        # networks the script cleared: name -> (line, value); analysed when none is left
        self.cleared: dict[str, tuple[int, object]] = {}
        # network errors MATLAB raises at a line that analyze goes past: (line, message)
        self.refusals: list[tuple[int, str]] = []
        # network-building statements analyze skipped: (node, NeedsData), in order
        self.blocked: list = []
        self._walks: dict = {}                   # (what, node id) -> what a walk of it found

    # ---------------------------------------------------------------------------- running --
    def run(self) -> dict:
        check_size(self.src, self.file, self.limits)
        root = parse(self.src, self.file)
        needed = min(len(_stack()) + _FRAMES_PER_DEPTH * self.limits.depth + 200,
                     _MOST_FRAMES)
        old = sys.getrecursionlimit()
        if needed > old:
            sys.setrecursionlimit(needed)
        try:
            with np.errstate(all="ignore"):      # 1/0 is Inf, as in MATLAB: no warnings
                return self._run_tree(root)
        finally:
            if needed > old:
                sys.setrecursionlimit(old)

    def _run_tree(self, root) -> dict:
        stmts = [c for c in root.named_children if c.type not in ("comment", "line_continuation")]
        for c in stmts:
            if c.type == "function_definition":
                fn = Function(c, self.src)
                self.functions.setdefault(fn.name, fn)
        script = [c for c in stmts if c.type != "function_definition"]
        if not script and stmts:                 # a function file: run its first function
            first = Function(stmts[0], self.src)
            missing = [p for p in first.params if p not in self.ws]
            if missing and self.analyze:         # arguments only data statements need may stay unset
                for p in missing:
                    self.ws[p] = Missing(0, f"an argument of {first.name} that was not given", p)
            elif missing:
                self._fail(stmts[0], f"function {first.name} needs its arguments "
                           f"{', '.join(missing)}: give them as workspace variables "
                           f"(attnlab analyze FILE.m --set {missing[0]}=…)")
            results = self._call_function(first, [self.ws[p] for p in first.params],
                                          len(first.outputs), stmts[0])
            if not isinstance(results, tuple):
                results = (results,)
            self.ws.update(zip(first.outputs, results))
            if self.analyze:                     # the networks it built, also those only its
                for k, v in self._last_scope.items():      # skipped statements returned
                    if k not in self.ws and (isinstance(v, Network) or _is_layerish(v)):
                        self.ws[k] = v
            return self.ws
        self._block(script, self.ws)
        return self.ws

    def _fail(self, node, message) -> NoReturn:
        raise ScriptError(message, self.file, node.start_point.row + 1,
                          node.start_point.column + 1)

    def _block(self, nodes, scope):
        for node in nodes:
            self._statement(node, scope)

    def _tick(self, node):
        """One step (a statement, a loop iteration) against Limits.steps."""
        self.steps += 1
        if self.steps > self._max_steps:
            self._limit(node, "steps", f"the script ran {self.limits.steps:,} steps ({_STEPS}), "
                        "the limit (Limits.steps); an endless loop?")

    def _work(self, n, node):
        """Making or copying `n` elements counts n / _WORK steps, so that a loop whose each
        iteration copies a large array is bounded in time as well."""
        self.steps += n // _WORK
        if self.steps > self._max_steps:
            self._limit(node, "steps", f"the script ran {self.limits.steps:,} steps ({_STEPS}), "
                        "the limit (Limits.steps)")

    def _limit(self, node, limit, message) -> NoReturn:
        raise LimitError(f"{message} {Limits.hint(limit)}", limit, self.file,
                         node.start_point.row + 1, node.start_point.column + 1)

    def _nest(self, node):
        self.depth += 1
        if self.depth > self._max_depth:
            self._limit(node, "depth", f"nesting deeper than {self.limits.depth} levels "
                        "(user-function calls, nested expressions and statements together; "
                        "the limit is Limits.depth); endless recursion?")

    def _statement(self, node, scope):
        kind = node.type
        if kind in ("comment", "line_continuation", "function_definition") or not node.is_named:
            return
        self._tick(node)
        self._nest(node)
        try:
            self._statement_in(node, scope)
        except _CONTROL:
            raise
        except B.Exhausted as e:
            where = e.node if e.node is not None else node
            self._limit(where, e.limit, e.message.replace(" " + Limits.hint(e.limit), ""))
        except RecursionError:
            self._limit(node, "depth", "nesting too deep for Python's stack (the limit is "
                        "Limits.depth); endless recursion?")
        except MemoryError:
            self._limit(node, "elements", "out of memory: the statement makes values too large "
                        "(Limits.elements bounds one array)")
        except Exception as e:                    # the last line of defence: located, the cause kept
            raise ScriptError(f"this statement cannot be run: {type(e).__name__}: "
                              f"{str(e)[:300]}", self.file, node.start_point.row + 1,
                              node.start_point.column + 1) from e
        finally:
            self.depth -= 1

    def _statement_in(self, node, scope):
        kind = node.type
        if self._given_data(node):
            self._note(node, "skipped: its result was given in the workspace")
            return
        if kind in ("for_statement", "while_statement") and \
                self._custom_training_loop(node, scope):
            return
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                self._execute(node, scope)
            for w in caught:
                if issubclass(w.category, UserWarning) and "attnlab" in (w.filename or "") or \
                        w.category.__name__ == "MatlabNote":
                    self._note(node, str(w.message))
                else:
                    warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        except MatlabError as e:
            if e.node is None:
                e.node = node
            raise
        except NeedsData as e:
            if not self.analyze:                 # a value run_file left unset (a skipped loop)
                raise MatlabError(e.why, node=e.node or node) from None
            self._skipped(node, e, scope)

    def _skipped(self, node, e, scope):
        """analyze skips a statement: its targets become Missing, except that a variable
        holding a network keeps it and a training call's output holds the network trained."""
        kept, held = [], []
        line = node.start_point.row + 1
        trained = self._trained_network(node, scope)
        builds = trained is None and self._builds_network(node)
        for k, name in enumerate(self._targets(node)):
            old = scope.get(name)
            if k == 0 and trained is not None:
                fn, source, net = trained
                if not isinstance(net, Network):             # trainnet(X, T, layers, …)
                    from .networks import layerGraph
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", MatlabNote)
                        net = layerGraph(net)
                scope[name] = net
                if name != source:
                    self.trained[name] = (line, fn, source)
                held.append(f"'{name}' holds the network {fn} was given ('{source}'), as built"
                            if name != source else f"'{name}' keeps its network")
            elif (isinstance(old, Network) or _is_layerish(old)) and not builds:
                held.append(f"'{name}' keeps its network")     # training, data, plots
            elif scope is self.ws and name in self.given:
                kept.append(name)            # --set gave it: the given value stands
                scope[name] = self.given[name]
            else:
                scope[name] = Missing(line, e.why, e.var or name)
        if builds:                       # the network would differ: analyze stops (exit 2)
            self.blocked.append((node, e))
        self._note(node, f"skipped: {e.why}" + (
            f"; {', '.join(kept)} keep{'s' if len(kept) == 1 else ''} the given value"
            if kept else "") + "".join(f"; {h}" for h in held))

    def _trained_network(self, node, scope):
        """(function, variable, network) when a statement assigns the result of a training
        or update call (`net = trainnet(X, T, net, …)`) whose network the script has."""
        if node.type != "assignment":
            return None
        right = node.child_by_field_name("right") or node.named_children[-1]
        if right.type != "function_call" or right.named_children[0].type != "identifier":
            return None
        fn = _text(right.named_children[0], self.src)
        if fn not in _TRAINERS or fn in scope:
            return None
        for arg in (_child(right, "arguments").named_children if _child(right, "arguments")
                    else []):
            if arg.type == "identifier":
                value = scope.get(_text(arg, self.src))
                if isinstance(value, Network) or _is_layerish(value):
                    return fn, _text(arg, self.src), value
        return None

    def _custom_training_loop(self, node, scope) -> bool:
        """A loop that calls dlfeval, dlgradient or an optimizer update trains the network
        itself: analyze skips it whole with one note, and the network keeps its architecture."""
        key = ("loop", node.id)                  # an inner loop is walked once, not per run
        if key not in self._walks:
            calls = sorted({_text(n, self.src) for n in _descendants(node)
                            if n.type == "identifier" and _text(n, self.src) in _LOOP_TRAINING
                            and _text(n, self.src) not in self.functions})
            targets = [name for n in _descendants(node) if n.type == "assignment"
                       for name in self._targets(n)] if calls else []
            self._walks[key] = (calls, targets)
        calls, targets = self._walks[key]
        if not calls:
            return False
        first, last = node.start_point.row + 1, node.end_point.row + 1
        why = f"set in the custom training loop at lines {first}-{last}"
        for name in targets:
            old = scope.get(name)
            if not (isinstance(old, Network) or _is_layerish(old)):
                scope[name] = Missing(first, why, name)
        if self.analyze:
            self._note(node, f"skipped: a custom training loop (lines {first}-{last}: "
                       f"{', '.join(calls)}); analyze does not train, and the network it trains "
                       "is analysed as built")
        else:
            nets = [n for n in dict.fromkeys(targets) if isinstance(scope.get(n), Network)]
            self._run_note(node, f"skipped: a custom training loop (lines {first}-{last}: "
                           f"{', '.join(calls)}), which run_file does not run"
                           + (f"; {', '.join(repr(n) for n in nets)} keep"
                              f"{'s' if len(nets) == 1 else ''} the network as built, untrained"
                              if nets else "")
                           + ". To train it, use trainnet(X, T, net, lossFcn, options)")
        return True

    def _run_note(self, node, text):
        """A note of run_file's: kept with the others, and printed once."""
        before = len(self.notes)
        self._note(node, text)
        if len(self.notes) > before:
            self.print(f"note: {self.notes[-1]}")

    def _builds_network(self, node) -> bool:
        """Whether a statement calls a layer or network-building function (for a compound
        statement, other than `initialize`, which leaves the architecture as it is)."""
        key = ("builds", node.id)                # a statement in a loop is walked once
        if key in self._walks:
            return self._walks[key]
        compound = node.type not in ("assignment", "expression_statement", "function_call")
        stack = [node]
        found = False
        while stack and not found:
            n = stack.pop()
            if n.type == "identifier":
                name = _text(n, self.src)
                if name in self.toolbox and (name.endswith("Layer") or name in _GRAPH_EDITS) \
                        and not (compound and name == "initialize"):
                    found = True
            stack.extend(n.named_children)
        self._walks[key] = found
        return found

    def _given_data(self, node) -> bool:
        """A statement that loads data whose variables the caller gave (run_file's workspace,
        --set): the given values stand."""
        if node.type != "assignment":
            return False
        right = node.child_by_field_name("right") or node.named_children[-1]
        targets = self._targets(node)
        call = right.named_children[0] if right.type == "function_call" else right
        if not targets or not all(t in self.given for t in targets):
            return False
        key = ("reads", node.id)                 # [XTrain, YTrain] = japaneseVowelsTrainData;
        if key not in self._walks:               # a call that reads files, one the reader does
            calls = [call] + [n.named_children[0] for n in _descendants(right)  # not run, or a
                              if n.type == "function_call" and _child(n, "{") is None]  # helper
            names = {_text(n, self.src) for n in calls if n.type == "identifier"}
            used = {_text(n, self.src) for n in [right, *_descendants(right)]
                    if n.type == "identifier"}                   # fullfile(matlabroot, …)
            self._walks[key] = any(n in B.FILES or n in B.OUTSIDE for n in used) or \
                any(n not in self.ws and self._unknown(n) for n in names)
        return self._walks[key]

    def _unknown(self, name) -> bool:
        """A name that is neither a function the reader knows nor one the script defines."""
        return not (name in self.functions or name in self.toolbox or name in B.BASE or
                    name in B.DATA or name in B.OUTSIDE or name in _CUSTOM_LOOP or
                    name in B.CONSTANTS or name in B.NAMESPACES or name in _DISPLAY)

    def _note(self, node, text):
        line = node.start_point.row + 1
        note = printable(f"{self.file}:{line}: {text}")   # text from the script: escaped
        if note not in self.notes:               # once per statement, not per loop iteration
            self.notes.append(note)

    def _targets(self, node) -> list[str]:
        if node.type != "assignment":
            return []
        left = node.child_by_field_name("left") or node.named_children[0]
        ids = _walk_ids(left) if left.type in ("identifier", "multioutput_variable") else \
            [left.named_children[0]] if left.named_children else []
        return [_text(i, self.src) for i in ids if i.type == "identifier"]

    def _execute(self, node, scope):
        kind = node.type
        if kind == "assignment":
            self._assign(node, scope)
        elif kind == "if_statement":
            self._if(node, scope)
        elif kind == "for_statement":
            self._for(node, scope)
        elif kind == "while_statement":
            cond = node.named_children[0]
            body = _child(node, "block")
            while self._truth(self.eval_in(cond, scope), cond):
                self._tick(node)
                try:
                    self._block(body.named_children if body else [], scope)
                except _Break:
                    break
                except _Continue:
                    continue
        elif kind == "switch_statement":
            self._switch(node, scope)
        elif kind == "try_statement":
            self._try(node, scope)
        elif kind == "break_statement":
            raise _Break
        elif kind == "continue_statement":
            raise _Continue
        elif kind == "return_statement":
            raise _Return
        elif kind == "command":
            self._command(node, scope)
        elif kind == "block":
            self._block(node.named_children, scope)
        else:                                    # an expression statement: f(x), x
            value = self.eval_in(node, scope, nargout=0)
            if value is not None and not isinstance(value, tuple):
                scope["ans"] = value

    def _if(self, node, scope):
        cond = node.child_by_field_name("condition") or node.named_children[0]
        if self._truth(self.eval_in(cond, scope), cond):
            body = _child(node, "block")
            return self._block(body.named_children if body else [], scope)
        for clause in node.named_children:
            if clause.type == "elseif_clause":
                c = clause.child_by_field_name("condition") or clause.named_children[0]
                if self._truth(self.eval_in(c, scope), c):
                    body = _child(clause, "block")
                    return self._block(body.named_children if body else [], scope)
            elif clause.type == "else_clause":
                body = _child(clause, "block")
                return self._block(body.named_children if body else [], scope)

    def _for(self, node, scope):
        it = _child(node, "iterator")
        var, expr = it.named_children[0], it.named_children[1]
        values = self.eval_in(expr, scope)
        body = _child(node, "block")
        items: Iterable
        if isinstance(values, np.ndarray):
            items = (B._scalar(v) for v in values.ravel()) if values.ndim == 1 or \
                1 in values.shape else (values[:, j] for j in range(values.shape[1]))
        elif isinstance(values, (list, tuple)):
            items = list(values)
        else:
            items = [values]
        name = _text(var, self.src)
        for v in items:
            self._tick(node)
            scope[name] = v
            try:
                self._block(body.named_children if body else [], scope)
            except _Break:
                break
            except _Continue:
                continue

    def _switch(self, node, scope):
        value = self.eval_in(node.named_children[0], scope)
        for clause in node.named_children[1:]:
            body = _child(clause, "block")
            if clause.type == "otherwise_clause":
                return self._block(body.named_children if body else [], scope)
            if clause.type == "case_clause":
                case = self.eval_in(clause.named_children[0], scope)
                options = case if isinstance(case, Cell) else [case]
                if any(_equal(value, o) for o in options):
                    return self._block(body.named_children if body else [], scope)

    def _try(self, node, scope):
        body = _child(node, "block")
        catch = _child(node, "catch_clause")
        try:
            self._block(body.named_children if body else [], scope)
        except LimitError:
            raise                                # a limit stops the script, try or not
        except (MatlabError, ScriptError) as e:
            if catch is None:
                return
            ident = _child(catch, "identifier")
            if ident is not None:
                msg = e.reason if isinstance(e, ScriptError) else e.message
                scope[_text(ident, self.src)] = Struct(
                    message=msg, identifier=getattr(e, "identifier", ""), stack=Cell())
            cbody = _child(catch, "block")
            self._block(cbody.named_children if cbody else [], scope)

    def _command(self, node, scope):
        name_node = _child(node, "command_name")
        name = _text(name_node, self.src)
        args = [_text(c, self.src) for c in node.named_children if c.type == "command_argument"]
        if not args and (name in scope or self._unknown(name)):
            self._name(name_node, scope, 0)      # `XTrain` alone: shows a variable
            return
        if name == "load" and not self.analyze and self.given:
            self._run_note(node, "skipped: load reads a file, which the reader never does; "
                           "the variables it loads come from the workspace given ("
                           + ", ".join(sorted(self.given)) + ")")
            return
        self._call(name, [String(a) for a in args], {}, node, scope, nargout=0)

    def _truth(self, value, node) -> bool:
        if isinstance(value, Missing):
            raise NeedsData(f"uses a value from line {value.line}, which was skipped")
        if isinstance(value, np.ndarray):
            return value.size > 0 and bool(np.all(value))
        if isinstance(value, (bool, int, float, np.bool_)):
            return bool(value)
        if isinstance(value, str):
            return len(value) > 0 and all(value)
        self._fail(node, f"expected a logical condition, received {type(value).__name__}")

    # --------------------------------------------------------------------------- assigning --
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

    def _store(self, target, value, scope):
        if isinstance(value, (Cell, Struct)):
            self._check_count(value, target)
        if target.type == "identifier":
            scope[_text(target, self.src)] = value
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
            obj[name] = value
            return obj
        from .properties import set_property
        try:
            set_property(obj, name, value)
        except AttnlabError as e:
            self._fail(node, str(e))
        return obj

    def _set_index(self, container, args, value, what, scope, brace=False):
        idx = self._index_args(args, container, scope)
        if container is None:
            container = [] if _is_layerish(value) else Cell() if brace else np.zeros(0)
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
                    return type(container)(x for i, x in enumerate(items) if i not in drop)
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
            new = type(container)(items)
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

    # -------------------------------------------------------------------------- evaluating --
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
            return Cell(v for row in node.named_children if row.type == "row"
                        for v in self._row(row, scope))
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
            return v
        if kind == "range":
            return self._range(node, scope)
        if kind == "lambda":
            args = _child(node, "arguments")
            params = [_text(c, self.src) for c in args.named_children] if args else []
            return Lambda(params, node.named_children[-1], dict(scope), self)
        if kind == "handle_operator":
            name = _text(node.named_children[0], self.src)
            return lambda *a, **kw: self._call(name, list(a), kw, node, scope)
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
        if self.analyze:
            # data the script does not define: skipped, and named if a network needed it
            raise NeedsData(f"needs '{name}', which the script does not define (give it with "
                            f"--set {name}=VALUE)", name, node)
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
            return Cell(x for v in items if isinstance(v, Cell) for x in v)
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
            if brace and name not in scope:
                self._name(name_node, scope, 1)   # x{i}: a variable; undefined → needs data
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
                v = self.eval_in(c, scope)
                if isinstance(v, Missing):
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
                end = 1 if k == 0 else container.shape[0]
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
        try:
            idx = self._index_args(args, container, scope)
        except MatlabError as e:
            if e.node is None:
                e.node = node                    # located at the indexing
            raise
        what = _text(node, self.src)
        try:
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

    # ---------------------------------------------------------------------------- calling --
    def _call(self, name, pos, kw, node, scope, nargout=1):
        if name in self.functions:
            return self._call_function(self.functions[name], pos, nargout, node, kw)
        if name in _DISPLAY and (self.analyze or name == "plot"):
            # pictures: `attnlab plot FILE.m` draws the networks; f = figure is a handle
            return Handle(name) if nargout >= 1 else None
        if name in _CUSTOM_LOOP and name not in self.toolbox:
            if not self.analyze and name in ("minibatchqueue", "trainingProgressMonitor"):
                self._run_note(node, f"skipped: {name} belongs to a custom training loop, "
                               "which run_file does not run")
                return Handle(name)              # its properties and methods: no-ops
            if self.analyze:
                raise NeedsData(f"{name} belongs to a custom training loop, which analyze "
                                "does not run")
            raise MatlabError(f"{name} belongs to a custom training loop, which attnlab's "
                              "reader does not run: train with trainnet(X, T, net, lossFcn, "
                              "options), or in Python with al.train", node=node)
        if name in B.OUTSIDE:
            if self.analyze:
                raise NeedsData(f"{name} is a MATLAB function attnlab's reader does not run")
            raise MatlabError(f"{name} is a MATLAB function attnlab's reader does not run: "
                              "compute its result in Python and pass it as a workspace "
                              "variable (run_file(path, workspace={...}))", node=node)
        if name in ("clear", "clearvars") and pos:
            self._clear([str(p) for p in pos], node, scope)
            return None
        if name in B.DATA:
            if self.analyze:
                raise NeedsData(f"{name} trains, predicts or reads data; analyze does not run it"
                                if name not in B.FILES else
                                f"{name} reads data the script does not have")
            if name in B.FILES:
                raise MatlabError(f"{name} reads files, which attnlab's MATLAB reader does not "
                                  "do: load the data in Python and pass it as a workspace "
                                  "variable (run_file(path, workspace={...}))", node=node)
        fn = self.toolbox.get(name)
        if fn is not None and nargout >= 2 and hasattr(fn, "with_scores"):
            fn = fn.with_scores                 # [labels, scores] = scores2label(...)
        if fn is not None:
            if name in _INITIALIZES:
                self._check_learnables(name, pos, node)
            try:
                result = fn(*[_to_python(a) for a in pos], **{k: _to_python(v) for k, v in kw.items()})
                if name in ("trainNetwork", "trainnet") and nargout >= 2:
                    return result, result.training_info         # [net, info] = trainnet(...)
                return result
            except (AttnlabError, ValueError, TypeError) as e:
                if isinstance(e, ScriptError):
                    raise
                held = getattr(e, "network", None)
                if self.analyze and isinstance(held, Network):
                    # MATLAB stops at this line; analyze goes on with the network, so that the
                    # analysis lists every issue (and a refusal is a network error, exit 1)
                    if getattr(e, "refused", False):
                        self.refusals.append((node.start_point.row + 1, str(e)))
                    else:
                        warnings.warn(f"{name}: the network has errors (its analysis lists "
                                      "them); MATLAB stops at this line", MatlabNote)
                    return held
                if isinstance(e, NetworkError) and self.analyze and name == "initialize" and \
                        pos and isinstance(pos[0], Network):
                    # MATLAB stops here; analyze goes on, so the analysis lists every issue
                    warnings.warn("initialize: the network has errors (its analysis lists "
                                  "them); MATLAB stops at this line", MatlabNote)
                    return pos[0]
                from .terms import in_matlab_terms
                raise MatlabError(in_matlab_terms(str(e)), type(e).__name__, node) from e
        base = B.BASE.get(name)
        if base is not None:
            _check_arguments(name, base, pos, kw, node)
            try:
                result = base(self, *pos, **kw)
            except (B.Exhausted, MatlabError) as e:
                if e.node is None:
                    e.node = node                # located at the call
                if isinstance(e, MatlabError) and name != "error" and \
                        not e.message.startswith(name):
                    e.message = f"{name}: {e.message}"
                raise
            except (NeedsData, AttnlabError, RecursionError, MemoryError):
                raise
            except Exception as e:
                raise MatlabError(f"{name}: cannot take these arguments ({_describe(pos)}): "
                                  f"{type(e).__name__}: {e}", node=node) from e
            if result is None and nargout >= 1 and (name in B.GRAPHICS or name in _DISPLAY):
                return Handle(name)              # t = tiledlayout(2, 1), ax = gca
            if name in ("max", "min") and nargout > 1 and len(pos) == 1:
                arr = np.asarray(B._num(pos[0])).ravel()
                if arr.size == 0:
                    return np.zeros(0), np.zeros(0)
                k = int(np.argmax(arr) if name == "max" else np.argmin(arr))
                return B._scalar(arr[k]), k + 1
            if name == "size" and nargout > 1 and isinstance(result, np.ndarray):
                dims = [int(d) for d in result] + [1] * nargout
                return tuple(dims[:nargout - 1]) + (int(np.prod(dims[nargout - 1:len(result)]))
                                                   if nargout <= len(result) else 1,)
            return result
        known = list(self.toolbox) + list(B.BASE) + list(self.functions)
        hint = close_matches(name, known)
        if self.analyze and not name.endswith(("Layer", "Layers", "network", "Network")):
            # a variable the script never defines, or a function of the user's in another file
            raise NeedsData(f"'{name}' is neither a function attnlab knows nor a variable the "
                            f"script defines{hint.rstrip('?').replace('. Did', ' (did') + ')' if hint else ''}"
                            f"; give what it computes with --set", name)
        what = "not a Deep Learning Toolbox function that attnlab knows" if \
            name.endswith(("Layer", "Layers", "network", "Network")) else \
            "an unknown function (attnlab reads the Deep Learning Toolbox subset listed in " \
            "docs/matlab.md)"
        self._fail(node, f"{name} is {what}.{hint}".rstrip("."))

    def _clear(self, words: list[str], node, scope) -> None:
        """`clear x y`, `clearvars -except net`, `clear -regexp ^temp`; `clear all` and the
        other words keep the caller's values, as a bare `clear` does. A network cleared is
        remembered: analyze shows it when the script ends with none."""
        import re
        names, keep, patterns, mode = [], [], [], "names"
        for w in words:
            if w in ("-except",):
                mode = "except"
            elif w == "-regexp":
                mode = "regexp" if mode == "names" else "except-regexp"
            elif w.lower() in _CLEAR_WORDS:
                continue
            elif mode == "names":
                names.append(w)
            elif mode == "except":
                keep.append(w)
            else:
                patterns.append((mode, w))
        if mode.startswith("except"):
            drop = [n for n in scope if n not in keep and not (scope is self.ws and n in self.given)
                    and not any(re.search(p, n) for m, p in patterns if m == "except-regexp")]
        else:
            drop = [n for n in scope if n in names or any(re.search(p, n) for m, p in patterns)]
        for n in drop:
            value = scope.pop(n)
            if isinstance(value, Network) or _is_layerish(value):
                self.cleared[n] = (node.start_point.row + 1, value)

    def _check_learnables(self, name, pos, node):
        """dlnetwork/initialize allocate the network's weights: refused first when they would
        be more than Limits.learnables (counted on an uninitialized copy, nothing allocated)."""
        import copy
        from .networks import layerGraph
        target = next((p for p in pos if isinstance(p, Network) or _is_layerish(p)), None)
        if target is None or isinstance(target, Network) and target.initialized:
            return
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                net = target if isinstance(target, Network) else \
                    layerGraph([copy.copy(layer) for layer in _flat_layers(target)])
                n = net.analyze().total_learnables
        except AttnlabError:
            return           # a network with errors: the call itself reports them, in MATLAB terms
        if n > self.limits.learnables:
            self._limit(node, "learnables", f"{name} would allocate {n:,} learnables, over the "
                        f"limit of {self.limits.learnables:,} (Limits.learnables).")

    def _call_function(self, fn: Function, args, nargout, node, kw=None):
        positional = [p for p in fn.params if p not in fn.options]
        if fn.options and len(args) > len(positional):     # f(8, 'Dropout', 0.2)
            pairs = list(args[len(positional):])
            args = list(args[:len(positional)])
            if len(pairs) % 2 or not all(isinstance(k, str) for k in pairs[::2]):
                self._fail(node, f"{fn.name}: expected name–value pairs after its "
                           f"{len(positional)} argument(s), received {len(pairs)} more values")
            kw = {**dict(zip(pairs[::2], pairs[1::2])), **(kw or {})}
        if kw and not fn.options:
            self._fail(node, f"{fn.name}: takes no name–value arguments (its arguments block "
                       f"declares none), received {', '.join(kw)}")
        if len(args) > len(positional):
            self._fail(node, f"{fn.name}: expected at most {len(positional)} arguments, received "
                       f"{len(args)}")
        scope = dict(zip(positional, args))
        scope["nargin"] = len(args)
        for p in positional[len(args):]:
            if p in fn.defaults:                  # arguments block: p = default
                scope[p] = self._value(fn.defaults[p], scope)
        for struct, fields in fn.options.items():
            given: dict = {}
            for name, value in (kw or {}).items():
                match = [f for f in fields if f.lower() == str(name).lower()] or \
                    [f for f in fields if f.lower().startswith(str(name).lower())]
                if len(match) != 1:
                    self._fail(node, f"{fn.name}: expected a name–value argument among "
                               f"{', '.join(fields)}, received '{name}'."
                               f"{close_matches(str(name), list(fields))}".rstrip("."))
                given[match[0]] = value
            opts = Struct()
            for field, default in fields.items():
                if field in given:
                    opts[field] = given[field]
                elif default is not None:
                    opts[field] = self._value(default, scope)
            scope[struct] = opts
        self._last_scope = scope
        try:
            self._block(fn.body.named_children if fn.body else [], scope)
        except _Return:
            pass
        results: list = []
        for out in fn.outputs[:max(nargout, 1)]:
            if out not in scope:
                if nargout == 0 and not results:
                    break
                self._fail(node, f"{fn.name}: output '{out}' was not assigned")
            results.append(scope[out])
        return results[0] if len(results) == 1 and nargout <= 1 else tuple(results)


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


def run_code(text: str, workspace: dict | None = None, *, file: str = "<script>",
             analyze: bool = False,
             out: Callable[[str], object] = print, limits: Limits | None = None,
             out_dir: str | os.PathLike[str] | None = None) -> dict:
    """Runs MATLAB code and returns its workspace (a dict by variable name). `workspace` gives
    variables the code uses undefined (and data a script would load). Errors are ScriptError
    `FILE.m:LINE:COL: …`; `limits` (a `Limits`) bounds the run, LimitError past one. Training
    writes only inside `out_dir` (default: the current folder), as for `run_file`."""
    from .training import script_outputs
    with script_outputs(Path.cwd() if out_dir is None else out_dir, "run_code", out, analyze):
        return _run(Interpreter(text, file, workspace, analyze, out, limits))[0]


def run_file(path: str | os.PathLike[str], workspace: dict | None = None, *, analyze: bool = False,
             out: Callable[[str], object] = print, limits: Limits | None = None,
             out_dir: str | os.PathLike[str] | None = None) -> dict:
    """Runs a MATLAB script or function file (its first function, with its arguments taken
    from `workspace`) and returns the workspace. The file must be a regular file of at most
    `limits.file_bytes` bytes (UTF-8, or Windows-1252/Latin-1 as MATLAB reads them).

    Training runs as the script says, in this process (`ExecutionEnvironment="parallel"` or
    `"multi-gpu"` included: nothing is launched, a note says so), and writes only inside
    `out_dir` (default: the script's own folder, as MATLAB's `run(path)` runs a script in its
    folder): `CheckpointPath` and other relative paths are read from it, the training-progress
    picture goes into it, and a path that resolves outside it (`..`, an absolute path, a
    symlink) is a ScriptError naming the option, the path and the folder."""
    limits = limits or current_limits()
    path = Path(path)
    from .training import script_outputs
    with script_outputs(path.parent if out_dir is None else out_dir, "run_file", out, analyze):
        return _run(Interpreter(read_source(path, limits), path.name, workspace, analyze, out,
                                limits))[0]


def _run(interp: Interpreter):
    try:
        ws = interp.run()
    except MatlabError as e:
        node = e.node
        line, col = (node.start_point.row + 1, node.start_point.column + 1) if node else (0, 0)
        raise ScriptError(e.message, interp.file, line, col) from e
    except B.Exhausted as e:                 # outside any statement (a function file's call)
        node = e.node
        line, col = (node.start_point.row + 1, node.start_point.column + 1) if node else (1, 1)
        raise LimitError(e.message, e.limit, interp.file, line, col) from None
    except RecursionError:
        raise LimitError("nesting too deep for Python's stack (Limits.depth). "
                         + Limits.hint("depth"), "depth", interp.file, 1, 1) from None
    return ws, interp


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
    if isinstance(v, String):
        return "a string"
    if isinstance(v, str):
        return "a char vector"
    if isinstance(v, (bool, np.bool_)):
        return "a logical"
    if isinstance(v, (int, float, np.number)):
        return "a number"
    if isinstance(v, np.ndarray):
        return f"a {_size_text(B._shape(v))} array"
    if isinstance(v, Cell):
        return "a cell array"
    if isinstance(v, Struct):
        return "a struct"
    if isinstance(v, Lambda) or callable(v) and not isinstance(v, (Layer, Network)):
        return "a function handle"
    if _is_layerish(v):
        return "a layer array" if isinstance(v, list) else f"a {type(v).__name__}"
    return f"a {type(v).__name__}"


def _size_text(shape) -> str:
    return "×".join(str(int(d)) for d in shape) if len(shape) else "1×1"


def _describe(pos) -> str:
    return ", ".join(_kind(p) for p in pos) or "none"


_SIGNATURES: dict = {}


def _check_arguments(name, fn, pos, kw, node):
    """A base function given arguments it does not take: MATLAB's words, not Python's."""
    import inspect
    sig = _SIGNATURES.get(fn)
    if sig is None:
        sig = _SIGNATURES[fn] = inspect.signature(fn)
    params = list(sig.parameters.values())[1:]
    if kw and not any(p.kind is p.VAR_KEYWORD for p in params):
        raise MatlabError(f"{name} takes no name=value arguments, received "
                          f"{', '.join(kw)}", node=node)
    try:
        sig.bind(None, *pos, **kw)
    except TypeError:
        most = None if any(p.kind is p.VAR_POSITIONAL for p in params) else len(params)
        least = sum(1 for p in params if p.default is p.empty and p.kind in
                    (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
        want = f"at least {least}" if most is None else f"{least}" if least == most else \
            f"{least} to {most}"
        raise MatlabError(f"{name}: expected {want} argument{'s' if want != '1' else ''}, "
                          f"received {len(pos)}", node=node) from None
