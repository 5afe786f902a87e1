"""What a script's networks need, and which names no path assigns: found before it runs.

`analyse(root, src, …)` walks the parse tree once per workspace (the script's, each function's)
and follows the definitions and uses of variables: a reaching-definitions pass over the
structured statements (the branches of `if` and `switch` merge, a loop's body also sees what
the body itself assigns, `break` leaves the loop, `return` the function, a `catch` sees what
its `try` may have assigned). Two results come of it, a `Plan`:

- the network slice: the statements that make layers, networks or training options or that
  train (the seeds: the layer functions, `dlnetwork`, `layerGraph`, `addLayers`,
  `connectLayers`, `trainingOptions`, `trainnet`, `trainNetwork`, … and the local functions
  that call them), and, transitively, every statement whose assignment one of them may read,
  every loop or branch that decides whether one of them runs, and what the local functions
  they call compute. The data given to training and prediction (`XTrain` in
  `trainNetwork(XTrain, YTrain, layers, options)`, `ValidationData`) is not followed: the
  reader never trains, and the network does not depend on it. `attnlab analyze` keeps an error
  on a statement of the slice an error; a statement outside it that cannot run only touches
  data, results, plots or files, and is skipped with a note.
- undefined names: a use of a name that no path assigns before it — after `clear`, or in a
  function, whose workspace starts with its arguments — and that is no function MATLAB or the
  script has (`known`), no file beside the script, no `--set`/`workspace=` value: MATLAB stops
  there with "Unrecognized function or variable", and the reader does too when it gets there.

Where MATLAB decides at run time the analysis stays on the safe side: `load` of a file without a
list of variables (a statement, no outputs) may define any name; `eval`, `evalin`, `assignin`,
`global` and `persistent`, and nested functions (which share their parent's workspace), turn the
undefined-name check off; a name called with arguments that the script never assigns may be a
function on MATLAB's path; a name the script passes as the data of training or prediction is
data its caller has (`--set`), never reported; a use inside `@(x) …` is resolved when the
function runs; command syntax (`hold on`, `format long`) uses no variable.

Its parts: `slicing_walk.py` (the walk over one workspace's statements), `slicing_state.py`
(the reaching definitions the walk changes) and `slicing_names.py` (the names it knows).
"""
from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .slicing_names import SEEDS
from .slicing_state import ANY, ENTRY, GIVEN, PARAM, State, _Scope, _Use
from .slicing_walk import _Analysis


class Plan:
    """What the interpreter consults: `needed(node)`, whether a statement belongs to the
    network slice; `undefined(node)`, the first use in a statement of a name no path assigns
    (name, identifier node, why); `loaded_by(node, name)`, the line of a `load` that may
    define the name a use reads."""

    def __init__(self, needed: set[int] | None = None, analysed: set[int] | None = None,
                 undefined: dict | None = None, reach: dict | None = None,
                 load_lines: dict | None = None):
        self._needed = needed
        self._analysed = analysed or set()
        self._undefined = undefined or {}
        self._reach = reach or {}
        self._load_lines = load_lines or {}

    @classmethod
    def unknown(cls) -> "Plan":
        """No analysis (a script too deeply nested for it): every statement counts as needed
        and no name is reported, as the reader did before it had one."""
        return cls()

    def needed(self, node) -> bool:
        return self._needed is None or node.id in self._needed or \
            node.id not in self._analysed

    def undefined(self, node):
        return self._undefined.get(node.id)

    def undefined_uses(self) -> list[tuple[int, str, Any, str]]:
        """(statement id, name, identifier, why) of every use of a name no path assigns, in
        the order of the source."""
        return sorted(((stmt, *found) for stmt, found in self._undefined.items()),
                      key=lambda u: u[2].start_byte)

    def loaded_by(self, identifier) -> int | None:
        lines = [self._load_lines[d] for d in self._reach.get(identifier.id, ())
                 if d in self._load_lines]
        return min(lines) if lines else None


def analyse(root, src: bytes, given=(), known: Callable[[str], bool] = lambda name: False,
            folder: str | os.PathLike[str] | None = None) -> Plan:
    """The plan of the script whose tree is `root`: its network slice and the uses of names no
    path assigns. `given` are the --set/workspace= names, `known(name)` says whether a name is
    a function the reader or MATLAB has, `folder` is where files beside the script are."""
    from .script_values import Function
    a = _Analysis(src, set(given), known)
    top = [c for c in root.named_children if c.type not in ("comment", "line_continuation")]
    defs = [c for c in top if c.type == "function_definition"]
    stack = list(defs)
    while stack:                                  # every function, nested ones included
        d = stack.pop()
        fn = Function(d, src)
        a.functions.setdefault(fn.name, (fn, d))
        stack.extend(n for n in _descend(d) if n.type == "function_definition")
    script = [c for c in top if c.type != "function_definition"]
    if script:
        entry: State = {ANY: frozenset({ENTRY}), **{g: frozenset({GIVEN}) for g in a.given}}
        a.run_scope(_Scope("", False), script, entry)
    nested = {n.id for _, d in a.functions.values() for n in _descend(d)
              if n.type == "function_definition"}
    for name, (fn, d) in a.functions.items():
        params = [*fn.params, "varargin", "nargin", "nargout", "varargout"]
        state: State = {p: frozenset({PARAM}) for p in params}
        if d.id in nested:                        # shares its parent's workspace
            state[ANY] = frozenset({ENTRY})
        scope = _Scope(name, True, params, fn.outputs)
        a.run_scope(scope, fn.body.named_children if fn.body is not None else [], state)
        scope.unsure = scope.unsure or d.id in nested
    entry_function = None if script or not defs else Function(defs[0], src).name
    needed = _slice(a, entry_function)
    undefined = _undefined(a, folder)
    return Plan(needed, set(a.lines), undefined, a.reach, a.load_lines)


def _descend(node):
    stack = list(node.named_children)
    while stack:
        n = stack.pop()
        yield n
        stack.extend(n.named_children)


def _slice(a: _Analysis, entry_function: str | None) -> set[int]:
    """Seeds, then backwards along the definitions each statement reads, the statements
    around it, and the outputs of the local functions it calls."""
    calls: dict[int, set[str]] = {}               # statement -> functions (not variables) called
    for scope in a.scopes.values():
        for use in scope.uses:
            if use.called and not use.in_lambda and _function(a, scope, use.name):
                calls.setdefault(use.stmt, set()).add(use.name)
    for stmt, names in a.calls.items():           # command syntax and methods
        calls.setdefault(stmt, set()).update(n for n in names if n in SEEDS)
    builders: set[str] = set()
    changed = True
    while changed:                                # local functions that build, transitively
        changed = False
        for name, scope in a.scopes.items():
            if not scope.function or name in builders:
                continue
            stmts = [s for s, owner in a.scope_of.items() if owner == name]
            if any(_seed(n, builders) for s in stmts for n in calls.get(s, ())):
                builders.add(name)
                changed = True
    by_stmt: dict[int, list[tuple[_Use, _Scope]]] = {}
    for scope in a.scopes.values():
        for use in scope.uses:
            by_stmt.setdefault(use.stmt, []).append((use, scope))
    work = [s for s, names in calls.items() if any(_seed(n, builders) for n in names)]
    relevant: set[str] = set()
    if entry_function is not None:
        work.extend(_exit_defs(a, entry_function))
        relevant.add(entry_function)
    needed: set[int] = set()
    while work:
        s = work.pop()
        if s < 0 or s in needed:
            continue
        needed.add(s)
        for use, scope in by_stmt.get(s, ()):
            if not use.data and not _function(a, scope, use.name):
                work.extend(use.reach)
        if s in a.parent:
            work.append(a.parent[s])
        for name in calls.get(s, ()):
            if name in a.scopes and a.scopes[name].function and name not in relevant:
                relevant.add(name)
                work.extend(_exit_defs(a, name))
    return needed


def _function(a: _Analysis, scope: _Scope, name: str) -> bool:
    """Whether `name` in this workspace is a function (not one of its variables)."""
    return name not in scope.assigned and name not in scope.params and \
        (scope.function or name not in a.given) and a.is_function(name)


def _seed(name: str, builders: set[str]) -> bool:
    return name in SEEDS or name.endswith("Layer") or name in builders


def _exit_defs(a: _Analysis, name: str) -> list[int]:
    return [d for use in a.scopes[name].exit_uses for d in use.reach]


def _undefined(a: _Analysis, folder) -> dict:
    """statement -> (name, identifier, why) for the first use in it of a name no path
    assigns."""
    if a.unsure_everywhere:
        return {}
    out: dict = {}
    beside: dict[str, bool] = {}
    for scope in a.scopes.values():
        if scope.unsure:
            continue
        for use in scope.uses:
            if use.reach or use.in_lambda or use.partial or not use.checked:
                continue
            name = use.name
            if name in a.data_names or a.is_function(name):
                continue
            if use.called and name not in scope.assigned:
                continue                          # maybe a function on MATLAB's path
            if name not in beside:
                beside[name] = folder is not None and any(
                    (Path(folder) / f"{name}{ext}").is_file() for ext in (".m", ".mlx", ".p"))
            if beside[name]:
                continue
            old = out.get(use.stmt)
            if old is None or use.node.start_byte < old[1].start_byte:
                out[use.stmt] = (name, use.node, _why(scope, name, use.node))
    return out


def _why(scope: _Scope, name: str, node) -> str:
    line = node.start_point.row + 1
    if scope.function:
        return (f"{scope.name}'s workspace starts with its arguments, and no statement of "
                f"{scope.name} assigns '{name}' before line {line}")
    cleared = [c for c in scope.clears if c <= line]
    where = f"the workspace is cleared at line {cleared[-1]}" if cleared else \
        "the workspace is cleared"
    return f"{where}, and no statement after it assigns '{name}' before line {line}"
