"""A safe interpreter of the MATLAB subset deep-learning scripts use (never Python's eval/exec).

It walks the tree from `reader.parse`: assignments (also `layers(end+1) = …`, `s.a.b = …`,
`[a, b] = f(…)`), numbers, text, logicals, matrices, cells, ranges, arithmetic, layer-array
concatenation, `if`/`elseif`/`else`, `for`, `while`, `switch`, `try`/`catch`, `break`/`continue`,
command syntax (`rng default`, `close all`), anonymous functions `@(x) …`, local functions and
function files. Calls go to the Deep Learning Toolbox functions of `attnlab.matlab` and the base
functions of `builtins.py` only; any other name is an error naming the closest known one.

With `analyze=True` (what `attnlab analyze FILE.m` does) statements that train, predict or read
data are skipped with a note naming the line, and so is every statement that uses their results
(skipping.py).

A script is untrusted input: its run is held to `Limits` (steps, array and text sizes, nesting;
reader.py), each one past is a located LimitError that the script's own `try` does not catch,
and any Python exception a statement raises becomes a located ScriptError (`FILE.m:LINE:COL`).
"""
from __future__ import annotations

import os
import sys
import types
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import numpy as np

from attnlab.core.errors import AttnlabError
from ..network import Network
from . import builtins as B
from .assigning import Assigning
from .calling import Calling
from .evaluating import Evaluating
from .indexing import Indexing
from .reader import (
    LimitError,
    Limits,
    ScriptError,
    check_size,
    current_limits,
    decode,
    parse,
    printable,
    read_source,
)
from .script_functions import ScriptFunctions
from .script_values import (
    _CUSTOM_LOOP,
    _DISPLAY,
    _FLOW,
    _STEPS,
    _WORK,
    Function,
    Undefined,
    _is_layerish,
    _Return,
)
from .skipping import Skipping, _Group
from .slicing import Plan, analyse
from .statements import Statements
from .values import MatlabError, Missing, NeedsData
from .workspace_calls import WorkspaceCalls


def _toolbox() -> dict:
    from . import (data, extras, factors, layers, networks, training, training_options,
                   utility_layers)
    names = {}
    for module in (layers, networks, training_options, training, extras, utility_layers, data,
                   factors):
        names.update({n: getattr(module, n) for n in module.__all__
                      if n[0].islower() and callable(getattr(module, n))})
    return names


def _stack() -> list:
    """The calling thread's Python frames (to size the recursion limit a run needs)."""
    frames: list = []
    f: types.FrameType | None = sys._getframe()
    while f is not None:
        frames.append(f)
        f = f.f_back
    return frames


# Python frames one unit of Limits.depth takes at most (a user-function call: eval_in, _eval,
# _function_call, _call, _call_function, _block, _statement, _execute, _assign), so that the
# interpreter's own stack never runs out before Limits.depth does
_FRAMES_PER_DEPTH = 12
# the recursion limit a run may raise Python's to: past it a raised Limits.depth ends in a
# LimitError from Python's own RecursionError, never in a C stack overflow
_MOST_FRAMES = 30_000
# elements made or copied that count as one step of Limits.steps

class Interpreter(Statements, Assigning, Evaluating, Indexing, Calling, WorkspaceCalls,
                  ScriptFunctions, Skipping):
    """Runs one script (or function file) on a workspace; its parts are the mixins."""

    def __init__(self, source: str | bytes, file: str = "<script>", workspace=None,
                 analyze: bool = False, out=print, limits: Limits | None = None,
                 folder: str | os.PathLike[str] | None = None):
        self.limits = limits or current_limits()
        if not isinstance(self.limits, Limits):
            from attnlab.core.errors import ArgumentError
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
        self.folder = folder                     # where files beside the script are
        # what the networks need and which names no path assigns (slicing.py), made once the
        # tree is parsed; > 0 inside a try body, where the script's catch handles errors
        self.plan = Plan.unknown()
        self._trying = 0
        # runs of skipped statements outside the network slice: last statement id -> group
        self._groups: dict[int, _Group] = {}
        self._grouped: set[int] = set()
        # statements the run got to, and those it skipped (what a name no path assigns needs)
        self._reached: set[int] = set()
        self._skipped_ids: set[int] = set()

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
                ws = self._run_tree(root)
            self._undefined_in_skipped()
            return ws
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
        self.plan = self._plan(root)
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
        try:
            self._block(script, self.ws)
        except _Return:                          # `return` in a script ends it, as in MATLAB
            pass
        return self.ws

    def _plan(self, root) -> Plan:
        """The network slice and the undefined names (slicing.py); a script nested too deeply
        for the walk gets none: every statement counts as needed, no name is reported."""
        try:
            return analyse(root, self.src, self.given, lambda name: not self._unknown(name),
                           self.folder)
        except RecursionError:
            return Plan.unknown()

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
        self._reached.add(node.id)
        try:
            undefined = self.plan.undefined(node)
            if undefined is not None:            # MATLAB stops here: no path assigns the name
                raise Undefined(undefined[0], undefined[2], undefined[1])
            self._statement_in(node, scope)
        except _FLOW:
            raise
        except LimitError:
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
        except (AttnlabError, MatlabError) as e:
            if not self._outside_slice(node, e):
                raise
            self._failed(node, e, scope)
        except Exception as e:                    # the last line of defence: located, the cause kept
            if self._outside_slice(node, e):
                self._failed(node, e, scope)
                return
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



def run_code(text: str, workspace: dict | None = None, *, file: str = "<script>",
             analyze: bool = False,
             out: Callable[[str], object] = print, limits: Limits | None = None,
             out_dir: str | os.PathLike[str] | None = None) -> dict:
    """Runs MATLAB code and returns its workspace (a dict by variable name). `workspace` gives
    variables the code uses undefined (and data a script would load). Errors are ScriptError
    `FILE.m:LINE:COL: …`; `limits` (a `Limits`) bounds the run, LimitError past one. Training
    writes only inside `out_dir` (default: the current folder), as for `run_file`."""
    from .confinement import script_outputs
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
    from .confinement import script_outputs
    with script_outputs(path.parent if out_dir is None else out_dir, "run_file", out, analyze):
        return _run(Interpreter(read_source(path, limits), path.name, workspace, analyze, out,
                                limits, folder=path.parent))[0]


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
