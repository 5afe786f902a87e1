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
"""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

# pseudo definitions (statement ids are tree-sitter node ids, never negative)
ENTRY = -1          # the caller's workspace, as a script starts in it: may hold any name
GIVEN = -2          # a --set / workspace= value (kept by `clear`, as the reader keeps them)
PARAM = -3          # a function's argument
DEAD = -4           # after return/break: code no path reaches
ANY = "*"           # the state's entry for every name it does not list

State = dict[str, frozenset]
_MOST_ANYWHERE = 16         # statements that may define any name, kept apart per workspace

# the functions whose calls make a network, its layers or its training (the slice's seeds);
# any function named …Layer is a layer function too
SEEDS = frozenset({
    "dlnetwork", "layerGraph", "addLayers", "connectLayers", "disconnectLayers", "removeLayers",
    "replaceLayer", "initialize", "setLayerWeights", "trainingOptions", "trainnet",
    "trainNetwork", "setLearnRateFactor", "setL2Factor", "networkLayer", "freezeWeights",
    "assembleNetwork",
})
# training and prediction: which of their positional arguments are data (not followed)
_TRAINING = {"trainNetwork": 2, "trainnet": 3}          # all but the last N are data
_PREDICTING = frozenset({"predict", "classify", "minibatchpredict", "predictAndUpdateState",
                         "forward", "activations"})     # all after the network are data
# names that change a workspace in ways the text does not say
_UNSURE = frozenset({"eval", "evalin", "evalc", "assignin"})
# words of `clear` that remove every variable (others: functions, mex, global, … keep them)
_CLEAR_ALL = frozenset({"all", "-all", "variables", "-variables", "-v"})
_CLEAR_WORDS = frozenset({"functions", "-functions", "classes", "-classes", "global", "-global",
                          "mex", "import", "java"})
_STATEMENTS = frozenset({"assignment", "command", "if_statement", "for_statement",
                         "while_statement", "switch_statement", "try_statement",
                         "break_statement", "continue_statement", "return_statement",
                         "global_operator", "persistent_operator", "spmd_statement"})
_SKIP = frozenset({"comment", "line_continuation", "function_definition",
                   "arguments_statement"})

# MATLAB functions and constants a script uses as bare names or calls that the reader does not
# run itself (its own are `known`): never reported as undefined
MATLAB_FUNCTIONS = frozenset("""
ans i j pi eps Inf inf NaN nan NaT true false missing realmax realmin intmax intmin flintmax
rand randn randi rng tic toc clock now date cputime pwd cd version ver computer matlabroot
tempdir tempname userpath getenv setenv nargin nargout varargin varargout narginchk
nargoutchk inputname mfilename dbstack lasterr lastwarn rethrow newline who whos path ispc
isunix ismac feature memory maxNumCompThreads parpool gcp gpuDevice gpuDeviceCount canUseGPU
gcf gca gco figure clc beep pause drawnow keyboard input zeros ones eye cell struct string char
table categorical datetime duration containers cellfun arrayfun structfun isempty numel size
length ndims isscalar isvector ismatrix isrow iscolumn isnumeric ischar isstring iscell
isstruct islogical isa class func2str str2func feval exist isvarname fieldnames rmfield
setfield getfield numel disp display fprintf sprintf num2str str2double mat2str int2str
error warning assert abs sign sqrt exp log log2 log10 sin cos tan tanh sigmoid floor ceil
round fix mod rem max min sum prod mean median std var cumsum cumprod sort unique find any
all isnan isinf isfinite numel reshape repmat cat horzcat vertcat squeeze permute linspace
colon logical double single int8 int16 int32 int64 uint8 uint16 uint32 uint64 true false
strcat strsplit strjoin strrep strtrim upper lower contains startsWith endsWith regexp
regexprep sprintf fullfile fileparts filesep exist dir mkdir isfile isfolder save load run
close hold grid axis legend title xlabel ylabel subplot plot figure format more diary echo
clear clearvars cla clf colorbar colormap datestr filesep pathsep
nnet deep images audio signal vision java py matlab parallel stats
alexnet googlenet inceptionv3 inceptionresnetv2 densenet201 mobilenetv2 resnet18 resnet50
resnet101 squeezenet vgg16 vgg19 xception nasnetlarge nasnetmobile shufflenet darknet19
darknet53 efficientnetb0
""".split())


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


def _text(node, src: bytes) -> str:
    return src[node.start_byte:node.end_byte].decode("utf-8", "replace")


def _child(node, kind):
    return next((c for c in node.children if c.type == kind), None)


def _block_nodes(node) -> list:
    body = _child(node, "block") if node is not None else None
    return list(body.named_children) if body is not None else []


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


class _Analysis:
    """The walk: statements in order, the state of definitions changed as they go, uses
    recorded per statement."""

    def __init__(self, src: bytes, given: set[str], known: Callable[[str], bool]):
        self.src = src
        self.given = given
        self.known = known
        self.scopes: dict[str, _Scope] = {}
        self.parent: dict[int, int] = {}         # statement -> the compound statement around it
        self.calls: dict[int, set[str]] = {}     # statement -> the functions it calls
        self.lines: dict[int, int] = {}          # statement -> its line
        self.scope_of: dict[int, str] = {}       # statement -> its workspace's name
        self.reach: dict[int, frozenset] = {}    # identifier -> the definitions reaching it
        self.load_lines: dict[int, int] = {}     # load statement -> line
        self.data_names: set[str] = set()
        self.functions: dict[str, Any] = {}
        self.unsure_everywhere = False
        self._defs_in: dict[int, dict[str, set]] = {}
        self._scope = _Scope("", False)
        self.s = _State({})
        self._returns: list[dict[str, frozenset]] = []   # the outputs at each `return`

    # ------------------------------------------------------------------------ statements --
    def block(self, nodes, parent: int | None) -> None:
        for node in nodes:
            if node.type in _SKIP or not node.is_named:
                if node.type == "function_definition":      # nested: shares the workspace
                    self._scope.unsure = True
                continue
            if parent is not None:
                self.parent[node.id] = parent
            self.lines[node.id] = node.start_point.row + 1
            self.scope_of[node.id] = self._scope.name
            self.statement(node)

    def _branch(self, nodes, parent: int) -> tuple[dict[str, frozenset], bool]:
        was = self.s.begin()
        self.block(nodes, parent)
        return self.s.end(was)

    def statement(self, node) -> None:
        kind = node.type
        if kind == "assignment":
            self._assignment(node)
        elif kind == "command":
            self._command(node)
        elif kind == "if_statement":
            self._if(node)
        elif kind == "switch_statement":
            self._switch(node)
        elif kind in ("for_statement", "while_statement"):
            self._loop(node)
        elif kind == "try_statement":
            self._try(node)
        elif kind in ("break_statement", "continue_statement"):
            self.s.dead = True                   # the loop's state already has its body's
        elif kind == "return_statement":
            if not self.s.dead:
                self._returns.append({out: self.s.get(out) for out in self._scope.outputs})
            self.s.dead = True
        elif kind in ("global_operator", "persistent_operator"):
            self._scope.unsure = True
            self._define(node, [_text(c, self.src) for c in node.named_children
                                if c.type == "identifier"])
        elif kind in ("block", "spmd_statement"):
            inner = node if kind == "block" else _child(node, "block")
            self.block(inner.named_children if inner is not None else [], node.id)
        else:
            self._expression_statement(node)

    def _assignment(self, node) -> None:
        left = node.child_by_field_name("left") or node.named_children[0]
        right = node.child_by_field_name("right") or node.named_children[-1]
        self._read(node, right)
        targets = left.named_children if left.type == "multioutput_variable" else [left]
        whole: list[str] = []
        part: list[str] = []
        for t in targets:
            if t.type == "identifier":
                whole.append(_text(t, self.src))
            elif t.type in ("function_call", "field_expression"):
                base = self._target_base(node, t)
                if base is not None:
                    part.append(base)
        self._define(node, whole)
        self._define(node, part, weak=True)

    def _target_base(self, stmt, target) -> str | None:
        """`x(i).f{k} = v`: x is updated (a partial definition that keeps what x held); the
        indices are read."""
        node = target
        while node.type in ("function_call", "field_expression"):
            head = node.named_children[0]
            if node.type == "function_call":
                args = _child(node, "arguments")
                if args is not None:
                    self._read(stmt, args)
            else:
                for part in node.named_children[1:]:
                    if part.type == "function_call":
                        args = _child(part, "arguments")
                        if args is not None:
                            self._read(stmt, args)
                    elif part.type == "indirect_access":
                        self._read(stmt, part)
            node = head
        if node.type != "identifier":
            return None
        name = _text(node, self.src)
        self._record(stmt, name, node, partial=True)
        return name

    def _command(self, node) -> None:
        name = _text(_child(node, "command_name"), self.src)
        args = [_text(c, self.src) for c in node.named_children if c.type == "command_argument"]
        self.calls.setdefault(node.id, set()).add(name)
        if name in ("clear", "clearvars"):
            self._clear(node, args, name)
        elif name == "load":
            self._load(node, args[1:] if args else [], literal=True)
        elif name in _UNSURE:
            self._unsure(node)
        elif name == "syms":
            self._define(node, [a for a in args if a.isidentifier()])
        elif name == "run":
            self._define_any(node)
        elif not args and not self.is_function(name):
            if name in self._scope.assigned or self.s.get(name) - {ENTRY, DEAD}:
                self._record(node, name, node.named_children[0])   # `XTrain` alone: shown
            else:
                self._define_any(node)           # a script on MATLAB's path may define anything

    def _expression_statement(self, node) -> None:
        self._read(node, node)
        if node.type != "function_call" or not node.named_children or \
                node.named_children[0].type != "identifier":
            return
        name = _text(node.named_children[0], self.src)
        if name in self._scope.assigned:         # a variable indexed, not the function
            return
        args = _child(node, "arguments")
        words = [_text(a, self.src)[1:-1] if a.type == "string" else None
                 for a in (args.named_children if args is not None else [])]
        if name in ("clear", "clearvars") and all(w is not None for w in words):
            self._clear(node, [w for w in words if w is not None], name)
        elif name == "load":
            self._load(node, [w for w in words[1:] if w is not None],
                       literal=all(w is not None for w in words[1:]))
        elif name in _UNSURE:
            self._unsure(node)
        elif name == "run":
            self._define_any(node)

    def _if(self, node) -> None:
        cond = node.child_by_field_name("condition") or node.named_children[0]
        self._read(node, cond)
        branches = [self._branch(_block_nodes(node), node.id)]
        has_else = False
        for clause in node.named_children:
            if clause.type == "elseif_clause":
                c = clause.child_by_field_name("condition") or clause.named_children[0]
                self._read(node, c, checked=False)
                branches.append(self._branch(_block_nodes(clause), node.id))
            elif clause.type == "else_clause":
                has_else = True
                branches.append(self._branch(_block_nodes(clause), node.id))
        self.s.merge(branches, through=not has_else)

    def _switch(self, node) -> None:
        self._read(node, node.named_children[0])
        branches = []
        otherwise = False
        for clause in node.named_children[1:]:
            if clause.type == "case_clause" and clause.named_children:
                self._read(node, clause.named_children[0], checked=False)
            elif clause.type == "otherwise_clause":
                otherwise = True
            else:
                continue
            branches.append(self._branch(_block_nodes(clause), node.id))
        self.s.merge(branches, through=not otherwise)

    def _loop(self, node) -> None:
        """A loop's body sees, from its start, what the body itself assigns (a later
        iteration); every state inside it is within that one, so after the loop (zero
        iterations, the last, a break) each name holds what it holds there."""
        if node.type == "for_statement":
            it = _child(node, "iterator")
            if it is not None and len(it.named_children) >= 2:
                self._read(node, it.named_children[1])
                self._define(node, [_text(it.named_children[0], self.src)])
        self.s.weak(self.defs_in(node))
        if node.type == "while_statement":
            self._read(node, node.named_children[0])
        self._branch(_block_nodes(node), node.id)

    def _try(self, node) -> None:
        """After try/catch: what the body assigned, or what the catch did after the body
        stopped anywhere."""
        body = self._branch(_block_nodes(node), node.id)
        catch = _child(node, "catch_clause")
        was = self.s.begin()
        self.s.weak(self.defs_in(node, only=_child(node, "block")))
        if catch is not None:
            ident = _child(catch, "identifier")
            if ident is not None:
                self._define(node, [_text(ident, self.src)])
            self.block(_block_nodes(catch), node.id)
        self.s.merge([body, self.s.end(was)], through=False)

    # ------------------------------------------------------------ definitions and kills --
    def _define(self, node, names, weak: bool = False) -> None:
        for name in names:
            self._scope.assigned.add(name)
            self.s.put(name, self.s.get(name) | {node.id} if weak else frozenset({node.id}))

    def _define_any(self, node) -> None:
        """`load file`, a script run: any name may now hold what it set. Past a few of them
        in one workspace the later ones count as the last one kept (a load is skipped, never
        an error, so which one reaches a use only names it in a note), so that a script of
        many loads stays linear."""
        scope = self._scope
        if len(scope.anywhere) < _MOST_ANYWHERE:
            scope.anywhere.append(node.id)
        self.s.weak({ANY: {scope.anywhere[-1]}})

    def _unsure(self, node) -> None:
        self.unsure_everywhere = True           # assignin/evalin reach other workspaces
        self._define_any(node)

    def _load(self, node, names: list[str], literal: bool) -> None:
        self.load_lines[node.id] = node.start_point.row + 1
        if literal and names and all(n.isidentifier() for n in names):
            self._define(node, names, weak=True)
        else:
            self._define_any(node)

    def _clear(self, node, words: list[str], name: str) -> None:
        """`clear`, `clear all`, `clearvars`: nothing is left but the given values; `clear x
        y`: x and y are gone; `clearvars -except a b`: only a, b and the given values stay.
        Patterns (`-regexp`, `tmp*`) and other words (`clear functions`) remove nothing here."""
        kept: dict[str, frozenset] = {}
        if name == "clearvars" and "-except" in words:
            at = words.index("-except")
            if words[:at] or not all(w.isidentifier() for w in words[at + 1:]):
                return
            kept = {w: self.s.get(w) for w in words[at + 1:]}
        elif not all(w.lower() in _CLEAR_ALL for w in words):
            if all(w.isidentifier() and w.lower() not in _CLEAR_WORDS for w in words):
                for w in words:
                    self.s.put(w, _EMPTY)
            return
        if self.s.dead:
            return
        for k in self.s.names():
            self.s.put(k, _EMPTY)
        self.s.put(ANY, _EMPTY)
        for k, v in kept.items():
            self.s.put(k, v)
        if not self._scope.function:              # the reader keeps --set values
            for g in self.given:
                self.s.put(g, frozenset({GIVEN}))
        self._scope.clears.append(node.start_point.row + 1)

    def is_function(self, name: str) -> bool:
        """A function MATLAB, the reader or the script has (not a variable of its own)."""
        return name in self.functions or name in MATLAB_FUNCTIONS or name in SEEDS or \
            name.endswith("Layer") or self.known(name)

    def defs_in(self, node, only=None) -> dict[str, set]:
        """What a statement's body may assign (names → statements; ANY for `load` without a
        list), for loops and `try`: found once per node, without recursion."""
        root = only if only is not None else node
        key = root.id
        if key in self._defs_in:
            return self._defs_in[key]
        found: dict[str, set] = {}
        stack = list(root.named_children)
        while stack:
            n = stack.pop()
            if n.type in ("function_definition", "lambda"):
                continue
            if n.type == "assignment":
                left = n.child_by_field_name("left") or n.named_children[0]
                for t in (left.named_children if left.type == "multioutput_variable"
                          else [left]):
                    while t.type in ("function_call", "field_expression"):
                        t = t.named_children[0]
                    if t.type == "identifier":
                        found.setdefault(_text(t, self.src), set()).add(n.id)
            elif n.type == "for_statement":
                it = _child(n, "iterator")
                if it is not None and it.named_children:
                    found.setdefault(_text(it.named_children[0], self.src), set()).add(n.id)
            elif n.type == "catch_clause":
                ident = _child(n, "identifier")
                if ident is not None:
                    found.setdefault(_text(ident, self.src), set()).add(n.id)
            elif n.type == "command" or n.type == "function_call" and n.named_children and \
                    n.named_children[0].type == "identifier":
                head = _child(n, "command_name") if n.type == "command" else n.named_children[0]
                word = _text(head, self.src)
                if word in ("load", "run") or word in _UNSURE or \
                        n.type == "command" and not _child(n, "command_argument") and \
                        not self.is_function(word):
                    found.setdefault(ANY, set()).add(n.id)
                elif word == "syms" and n.type == "command":
                    for a in n.named_children[1:]:
                        found.setdefault(_text(a, self.src), set()).add(n.id)
            stack.extend(n.named_children)
        self._defs_in[key] = found
        return found

    # ------------------------------------------------------------------------------ uses --
    def _record(self, stmt, name, node, **flags) -> None:
        reach = self.s.get(name)
        self._scope.uses.append(_Use(name, node, stmt.id, reach, **flags))
        self.reach[node.id] = reach

    def _read(self, stmt, expr, checked: bool = True) -> None:
        for ident, how, in_lambda, data in self._identifiers(expr):
            name = _text(ident, self.src)
            if how != "method":
                self._record(stmt, name, ident, called=how == "call",
                             in_lambda=in_lambda, data=data, checked=checked)
            if how != "name" and not in_lambda:
                self.calls.setdefault(stmt.id, set()).add(name)

    def _identifiers(self, expr) -> Iterator[tuple[Any, str, bool, bool]]:
        """The identifiers an expression reads as names (not field names, keywords of
        Name=value, a lambda's own parameters, `@f`): (node, how, in_lambda, data), `how`
        "name", "call" (`f(…)`: a call, or indexing a variable) or "method" (`net.f(…)`)."""
        stack: list[tuple[Any, frozenset, bool, bool]] = [(expr, frozenset(), False, False)]
        while stack:
            node, own, in_lambda, data = stack.pop()
            kind = node.type
            if kind == "identifier":
                if _text(node, self.src) not in own:
                    yield node, "name", in_lambda, data
            elif kind == "function_call":
                head = node.named_children[0] if node.named_children else None
                args = _child(node, "arguments")
                name = None
                if head is not None and head.type == "identifier":
                    name = _text(head, self.src)
                    if name not in own:
                        yield head, "call", in_lambda, data
                elif head is not None:
                    stack.append((head, own, in_lambda, data))
                if args is not None:
                    for arg, is_data in self._arguments(name, args):
                        stack.append((arg, own, in_lambda, data or is_data))
            elif kind == "field_expression":
                parts = node.named_children
                stack.append((parts[0], own, in_lambda, data))
                for part in parts[1:]:
                    if part.type == "function_call":
                        yield part.named_children[0], "method", in_lambda, data
                        args = _child(part, "arguments")
                        if args is not None:
                            for arg, is_data in self._arguments(None, args):
                                stack.append((arg, own, in_lambda, data or is_data))
                    elif part.type == "indirect_access":
                        stack.append((part, own, in_lambda, data))
            elif kind == "lambda":
                params = _child(node, "arguments")
                names = frozenset(_text(c, self.src) for c in params.named_children) \
                    if params is not None else frozenset()
                if node.named_children:
                    stack.append((node.named_children[-1], own | names, True, data))
            elif kind in ("handle_operator", "end_keyword", "string", "number", "boolean",
                          "comment", "line_continuation", "command"):
                continue
            else:
                stack.extend((c, own, in_lambda, data) for c in reversed(node.named_children))

    def _arguments(self, name, args) -> Iterator[tuple[Any, bool]]:
        """The argument expressions of a call (not the names of Name=value), each with whether
        it is data of training or prediction."""
        children = [c for c in args.children if c.type not in ("comment", "line_continuation")]
        positional: list = []                     # (expression, data?), text included
        i = 0
        while i < len(children):
            c = children[i]
            if c.type in (",", "(", ")", "{", "}"):
                i += 1
                continue
            if i + 2 < len(children) and children[i + 1].type == "=":      # Name=value
                key = _text(c, self.src).lower()
                yield children[i + 2], name == "trainingOptions" and key == "validationdata"
                i += 3
                continue
            after = positional[-1][0] if positional else None
            is_data = name == "trainingOptions" and after is not None and \
                after.type == "string" and _text(after, self.src)[1:-1].lower() == \
                "validationdata"                  # 'ValidationData', {XVal, YVal}
            positional.append((c, is_data))
            i += 1
        if name in _TRAINING:                     # trainnet(X, T, net, lossFcn, options)
            data = len(positional) - _TRAINING[name]
            positional = [(c, k < data or d) for k, (c, d) in enumerate(positional)]
        elif name in _PREDICTING:                 # predict(net, X, 'MiniBatchSize', 27)
            pairs = next((k for k, (c, _) in enumerate(positional) if k and c.type == "string"),
                         len(positional))
            positional = [(c, 0 < k < pairs or d) for k, (c, d) in enumerate(positional)]
        for c, is_data in positional:
            if is_data:
                self.data_names.update(self._roots(c))
            yield c, is_data

    def _roots(self, expr) -> list[str]:
        """The variables an argument is made of (`XTrain` in `XTrain{1}`, `{XVal, YVal}`)."""
        out, stack = [], [expr]
        while stack:
            n = stack.pop()
            if n.type == "identifier":
                out.append(_text(n, self.src))
            elif n.type in ("function_call", "field_expression", "postfix_operator",
                            "parenthesis") and n.named_children:
                stack.append(n.named_children[0])
            elif n.type in ("cell", "matrix", "row"):
                stack.extend(n.named_children)
        return out

    # ------------------------------------------------------------------------- scopes --
    def run_scope(self, scope: _Scope, nodes, entry: State) -> None:
        self._scope, self.s, self._returns = scope, _State(entry), []
        self.scopes[scope.name] = scope
        self.block(nodes, None)
        ends = self._returns + ([] if self.s.dead else
                                [{out: self.s.get(out) for out in scope.outputs}])
        for out in scope.outputs:
            reach = frozenset().union(*(e[out] for e in ends))
            scope.exit_uses.append(_Use(out, None, -1, reach))


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
