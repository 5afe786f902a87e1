"""Running statements: if, for, while, switch, try, break, commands, and conditions."""
from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..network import Network
from . import builtins as B
from .reader import (
    LimitError,
    ScriptError,
)
from .script_values import (
    _EVAL,
    Part,
    _is_layerish,
    _Break,
    _child,
    _Continue,
    _equal,
    _Return,
    _text,
)
from .values import Cell, MatlabError, Missing, NeedsData, String, Struct

# `clear` words that remove every variable (`clear functions`, `clear mex` keep them)
_CLEAR_ALL = {"all", "-all", "variables", "-variables", "-v"}


class Statements(Part):
    """The interpreter's statements (a part of `Interpreter`)."""

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
        caught: MatlabError | ScriptError | None = None
        self._trying += 1                        # errors in the body are the catch's to handle
        try:
            self._block(body.named_children if body else [], scope)
        except LimitError:
            raise                                # a limit stops the script, try or not
        except (MatlabError, ScriptError) as e:
            caught = e
        finally:
            self._trying -= 1
        if caught is None or catch is None:
            return
        ident = _child(catch, "identifier")
        if ident is not None:
            msg = caught.reason if isinstance(caught, ScriptError) else caught.message
            scope[_text(ident, self.src)] = Struct(
                message=msg, identifier=getattr(caught, "identifier", ""), stack=Cell())
        cbody = _child(catch, "block")
        self._block(cbody.named_children if cbody else [], scope)

    def _command(self, node, scope):
        name_node = _child(node, "command_name")
        name = _text(name_node, self.src)
        args = [_text(c, self.src) for c in node.named_children if c.type == "command_argument"]
        if name in _EVAL and name not in scope:
            self._no_eval(name, node)
        if name in ("clear", "clearvars") and all(a.lower() in _CLEAR_ALL for a in args):
            self._clear_workspace(node, scope)
            return
        if not args and (name in scope or self._unknown(name)):
            self._name(name_node, scope, 0)      # `XTrain` alone: shows a variable
            return
        if name == "load" and not self.analyze and self.given:
            self._run_note(node, "skipped: load reads a file, which the reader never does; "
                           "the variables it loads come from the workspace given ("
                           + ", ".join(sorted(self.given)) + ")")
            return
        self._call(name, [String(a) for a in args], {}, node, scope, nargout=0)

    def _clear_workspace(self, node, scope):
        """`clear`, `clear all`, `clearvars`: every variable goes, as in MATLAB, but the
        --set/workspace= values, which stand as given. A network cleared is remembered:
        analyze shows it when the script ends with none."""
        line = node.start_point.row + 1
        for name in list(scope):
            value = scope.pop(name)
            if isinstance(value, Network) or _is_layerish(value):
                self.cleared[name] = (line, value)
        if scope is self.ws:
            scope.update(self.given)

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
