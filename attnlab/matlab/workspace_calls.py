"""The calls that read or change a workspace: `evalin` and `assignin` (MATLAB's 'base' and
'caller' workspaces; the text evalin is given is parsed by the reader and run by the
interpreter, never by Python), `feval` and `exist`; and which workspace a function sees."""
from __future__ import annotations

from . import builtins as B
from .reader import ScriptError, parse
from .script_values import Part, _child, _describe
from .values import MatlabError, NeedsData

# calls that read or change a workspace: name → the WorkspaceCalls method that runs them
_WORKSPACE_CALLS = {"evalin": "_evalin", "assignin": "_assignin", "feval": "_feval",
                    "exist": "_exist"}
# parse-tree kinds of statements (anything else evalin is given is an expression)
_STATEMENTS = {"assignment", "if_statement", "for_statement", "while_statement",
               "switch_statement", "try_statement", "command", "function_definition",
               "break_statement", "continue_statement", "return_statement"}


class WorkspaceCalls(Part):
    """The interpreter's calls on workspaces (a part of `Interpreter`)."""

    def _outside_function(self, name: str, scope) -> str | None:
        """The message for a variable of the script (or a --set value) that a function uses
        without having it: functions see only their own workspace, as in MATLAB. None in the
        function a function file runs (its workspace values come from --set/workspace=)."""
        if id(scope) in self.__dict__.get("_entry_scopes", ()):
            return None
        names = self.__dict__.get("_frame_names") or ["the function"]
        given = " (given with --set)" if name in self.given else ""
        return (f"'{name}' is not defined in the workspace of {names[-1]}: a function sees only "
                f"its arguments and its own variables, and '{name}'{given} is a variable of the "
                f"script's (base) workspace. Pass it as an argument, or read it with "
                f"evalin('base', '{name}').")
    def _given_here(self, scope) -> bool:
        """Whether --set/workspace= values are this workspace's: the script's, or that of the
        function a function file runs (its variables are what --set gives)."""
        return scope is self.ws or id(scope) in self.__dict__.get("_entry_scopes", ())

    def _workspace(self, which, fn: str) -> dict:
        """MATLAB's 'base' workspace (the script's, where --set and workspace= values are) or
        the 'caller''s: the workspace of the function that called the running one."""
        word = str(which).lower() if isinstance(which, str) else None
        if word not in ("base", "caller"):
            raise MatlabError(f"{fn}: expected the workspace 'base' or 'caller', received "
                              f"{which!r}.")
        frames = self.__dict__.get("_frames") or []
        if word == "base" or len(frames) < 2:
            return self.ws
        return frames[-2]

    def _evalin(self, pos, kw, node, scope, nargout):
        """`evalin('base', expr)`, `evalin('caller', expr, catchExpr)`: the text is parsed by
        the reader and run by this interpreter in that workspace, never by Python."""
        if kw or len(pos) not in (2, 3) or not all(isinstance(p, str) for p in pos):
            raise MatlabError("evalin: expected evalin(workspace, expression) or "
                              "evalin(workspace, expression, catchExpression) with texts, "
                              f"received {_describe(pos)}.", node=node)
        target = self._workspace(pos[0], "evalin")
        try:
            return self._run_text(str(pos[1]), target, node, nargout, "evalin")
        except MatlabError:
            if len(pos) < 3:
                raise
            return self._run_text(str(pos[2]), target, node, nargout, "evalin")

    def _assignin(self, pos, kw, node, scope, nargout):
        """`assignin('base', 'name', value)`: sets a variable of that workspace."""
        if kw or len(pos) != 3 or not isinstance(pos[1], str):
            raise MatlabError("assignin: expected assignin(workspace, 'name', value), received "
                              f"{_describe(pos)}.", node=node)
        name = str(pos[1])
        if not name.isidentifier() or not name[0].isalpha():
            raise MatlabError(f"assignin: '{name}' is not a valid variable name.", node=node)
        self._workspace(pos[0], "assignin")[name] = pos[2]
        return None

    def _run_text(self, text, target, node, nargout, fn):
        trees = self.__dict__.setdefault("_texts", {})
        self.__dict__.setdefault("_main_src", self.src)
        source = text.encode("utf-8")
        if text not in trees:
            try:
                trees[text] = parse(source, self.file)
            except ScriptError as e:
                raise MatlabError(f"{fn}: cannot read {text!r}: {e.reason}", node=node) from None
        statements = [c for c in trees[text].named_children
                      if c.type not in ("comment", "line_continuation")]
        old = self.src
        self.src = source + b"\n" if not source.endswith(b"\n") else source
        try:
            if len(statements) == 1 and statements[0].type == "command" and \
                    not any(c.type == "command_argument" for c in statements[0].named_children):
                return self._name(_child(statements[0], "command_name"), target, nargout)
            if len(statements) == 1 and statements[0].type not in _STATEMENTS:
                return self.eval_in(statements[0], target, nargout)
            for c in statements:
                self._statement(c, target)
            return None
        except ScriptError as e:
            raise MatlabError(f"{fn}({text!r}): {e.reason}", node=node) from None
        finally:
            self.src = old

    def _feval(self, pos, kw, node, scope, nargout):
        """`feval(@f, x)`, `feval('f', x)`: the function called with the other arguments."""
        if not pos:
            raise MatlabError("feval: expected a function name or handle first, received no "
                              "arguments.", node=node)
        f, rest = pos[0], list(pos[1:])
        if isinstance(f, str):
            return self._call(str(f), rest, kw, node, scope, nargout)
        if callable(f):
            if nargout != 1 and hasattr(f, "call_with"):
                return f.call_with(nargout, *rest, **kw)       # [a, b] = feval(@f, x)
            return f(*rest, **kw)
        raise MatlabError(f"feval: expected a function name or handle first, received "
                          f"{_describe([f])}.", node=node)

    def _exist(self, pos, kw, node, scope, nargout):
        """`exist(name)`, `exist(name, 'var')`: 1 for a variable of the running workspace, 5
        for a built-in function, 2 for a function file (the toolbox's), else 0. Files and
        folders are not looked at: the reader never reads files."""
        if kw or len(pos) not in (1, 2) or not all(isinstance(p, str) for p in pos):
            raise MatlabError(f"exist: expected exist(name) or exist(name, type) with texts, "
                              f"received {_describe(pos)}.", node=node)
        name, kind = str(pos[0]), str(pos[1]).lower() if len(pos) > 1 else "any"
        if kind in ("file", "dir") or kind == "any" and ("." in name or "/" in name or
                                                         "\\" in name):
            if self.analyze:
                raise NeedsData(f"exist('{name}', '{kind}') asks about files, which analyze "
                                "never reads")
            raise MatlabError(f"exist: '{name}' asks about files, which attnlab's reader never "
                              "reads: decide in Python and give the result as a workspace "
                              "variable (run_file(path, workspace={...}))", node=node)
        if kind in ("var", "any") and name in scope:
            return 1
        if kind in ("builtin", "any") and (name in B.BASE or name in B.CONSTANTS):
            return 5
        if kind == "any" and name in self.toolbox:
            return 2
        if kind not in ("var", "builtin", "any", "class"):
            raise MatlabError(f"exist: expected the type 'var', 'builtin', 'file', 'dir' or "
                              f"'class', received '{pos[1]}'.", node=node)
        return 0
