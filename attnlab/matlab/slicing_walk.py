"""The slicer's walk over one workspace (a script's statements, or a function's body):
statements in order, the reaching definitions changed as they go (slicing_state.py), the uses of
names and the calls recorded per statement, for slicing.py to turn into a `Plan`."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from .slicing_names import (
    _CLEAR_ALL,
    _CLEAR_WORDS,
    _PREDICTING,
    _SKIP,
    _TRAINING,
    _UNSURE,
    MATLAB_FUNCTIONS,
    SEEDS,
)
from .slicing_state import _EMPTY, ANY, DEAD, ENTRY, GIVEN, State, _Scope, _State, _Use

_MOST_ANYWHERE = 16         # statements that may define any name, kept apart per workspace


def _text(node, src: bytes) -> str:
    return src[node.start_byte:node.end_byte].decode("utf-8", "replace")


def _child(node, kind):
    return next((c for c in node.children if c.type == kind), None)


def _block_nodes(node) -> list:
    body = _child(node, "block") if node is not None else None
    return list(body.named_children) if body is not None else []


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
