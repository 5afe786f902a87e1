"""The state of the slicer's walk (slicing_walk.py): the pseudo definitions, one use of a
name and one workspace as the walk records them, and the definitions that may reach each name,
changed in place as branches are begun, ended and merged."""
from __future__ import annotations

import dataclasses
from typing import Any

# pseudo definitions (statement ids are tree-sitter node ids, never negative)
ENTRY = -1          # the caller's workspace, as a script starts in it: may hold any name
GIVEN = -2          # a --set / workspace= value (kept by `clear`, as the reader keeps them)
PARAM = -3          # a function's argument
DEAD = -4           # after return/break: code no path reaches
ANY = "*"           # the state's entry for every name it does not list

State = dict[str, frozenset]


@dataclasses.dataclass
class _Use:
    """A name read by statement `stmt` (its identifier `node`), and the definitions that may
    reach it there."""
    name: str
    node: Any
    stmt: int
    reach: frozenset
    called: bool = False         # name(…): a call, or indexing a variable
    in_lambda: bool = False      # inside @(x) …: resolved when the function runs
    data: bool = False           # the data of training or prediction: not followed
    partial: bool = False        # x(i) = v, s.f = v: x is updated, not read as a whole
    checked: bool = True         # evaluated whenever its statement runs (not an elseif)


class _Scope:
    """One workspace: the script's statements, or one function's body."""

    def __init__(self, name: str, function: bool, params=(), outputs=()):
        self.name, self.function = name, function
        self.params, self.outputs = list(params), list(outputs)
        self.uses: list[_Use] = []
        self.exit_uses: list[_Use] = []          # the outputs, read when the function returns
        self.assigned: set[str] = set()          # every name assigned anywhere in it
        self.unsure = False                      # eval, global, nested functions, …
        self.clears: list[int] = []              # lines of statements that cleared it
        self.anywhere: list[int] = []            # statements that may define any name


_EMPTY: frozenset = frozenset()
_ABSENT: Any = object()                       # a name the state did not list before a branch


class _State:
    """The definitions that may reach each name at the walk's point, changed in place. A
    branch is walked between `begin()` and `end()`, which give its changes and put the state
    back as it was, so that a branch costs what it changes, never the size of the workspace."""

    def __init__(self, initial: State):
        self.map: dict[str, frozenset] = dict(initial)
        self.dead = False                        # after return, break, continue
        self._logs: list[dict[str, Any]] = []

    def get(self, name: str) -> frozenset:
        if self.dead:
            return frozenset({DEAD})
        m = self.map
        return m[name] if name in m else m.get(ANY, _EMPTY)

    def put(self, name: str, value: frozenset) -> None:
        if self._logs and name not in self._logs[-1]:
            self._logs[-1][name] = self.map.get(name, _ABSENT)
        self.map[name] = value

    def names(self) -> list[str]:
        return [k for k in self.map if k != ANY]

    def begin(self) -> bool:
        self._logs.append({})
        return self.dead

    def end(self, was_dead: bool) -> tuple[dict[str, frozenset], bool]:
        """The branch's changes and whether it ended where no path goes on; the state is
        back as it was at `begin()`."""
        log = self._logs.pop()
        delta = {k: self.map[k] for k in log if k in self.map}
        dead = self.dead
        for k, old in log.items():
            if old is _ABSENT:
                self.map.pop(k, None)
            else:
                self.map[k] = old
        self.dead = was_dead
        return delta, dead

    def merge(self, branches: list[tuple[dict[str, frozenset], bool]], through: bool) -> None:
        """After branches of which one runs (`through`: or none): each name may hold what
        it holds at the end of any branch that goes on."""
        if self.dead:
            return
        live = [d for d, dead in branches if not dead]
        if not live and not through:
            self.dead = True
            return
        keys = set().union(*live)
        merged = {k: frozenset().union(*(self._after(d, k) for d in live),
                                       self.get(k) if through else _EMPTY) for k in keys}
        for k, v in merged.items():
            self.put(k, v)

    def _after(self, delta: dict[str, frozenset], name: str) -> frozenset:
        if name in delta:
            return delta[name]
        if name not in self.map and ANY in delta:
            return delta[ANY]
        return self.get(name)

    def weak(self, defs: dict[str, set]) -> None:
        """Each name may also hold what `defs` assigns it (a loop's later iterations, a `try`
        body that may have stopped anywhere)."""
        if self.dead:
            return
        anywhere: frozenset = frozenset(defs.get(ANY, ()))
        if anywhere:
            for k, v in list(self.map.items()):
                if not anywhere <= v:                # the same load again: nothing new
                    self.put(k, v | anywhere)
            if ANY not in self.map:
                self.put(ANY, anywhere)
        for name, ids in defs.items():
            if name != ANY:
                self.put(name, self.get(name) | frozenset(ids))
