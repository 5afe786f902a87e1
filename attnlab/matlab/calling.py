"""Calling functions: the toolbox, base MATLAB, the script's own, and clear."""
from __future__ import annotations

import warnings

import numpy as np

from attnlab.core.errors import AttnlabError, NetworkError, close_matches
from ..network import Network
from . import builtins as B
from ._options import MatlabNote
from .reader import ScriptError, parse
from .script_values import (
    _CLEAR_WORDS,
    _CUSTOM_LOOP,
    _DISPLAY,
    _INITIALIZES,
    Function,
    Part,
    _describe,
    _flat_layers,
    _is_layerish,
    _Return,
    _child,
    _text,
    _to_python,
)
from .signatures import VALIDATORS, Signature, check_size, convert_class, match_field, where_text
from .values import Cell, Handle, MatlabError, Missing, NeedsData, Struct

_SIGNATURES: dict = {}
# calls that read or change a workspace: name → the Calling method that runs them
_WORKSPACE_CALLS = {"evalin": "_evalin", "assignin": "_assignin", "feval": "_feval",
                    "exist": "_exist"}
# parse-tree kinds of statements (anything else evalin is given is an expression)
_STATEMENTS = {"assignment", "if_statement", "for_statement", "while_statement",
               "switch_statement", "try_statement", "command", "function_definition",
               "break_statement", "continue_statement", "return_statement"}


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


def _check_toolbox_arguments(name, fn, pos, node):
    """A toolbox function given too few or too many values: MATLAB's words, naming the
    arguments it needs (never Python's "missing 1 required positional argument")."""
    import inspect
    sig = _SIGNATURES.get(fn)
    if sig is None:
        try:
            sig = _SIGNATURES[fn] = inspect.signature(fn)
        except (TypeError, ValueError):
            return
    params = list(sig.parameters.values())
    required = [p.name for p in params if p.default is p.empty and
                p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    most = None if any(p.kind is p.VAR_POSITIONAL for p in params) else \
        sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)
    if len(pos) < len(required):
        raise MatlabError(f"{name}: not enough input arguments: expected "
                          f"{', '.join(required)}, received {len(pos)} "
                          f"argument{'s' if len(pos) != 1 else ''}"
                          + (f" (missing {', '.join(required[len(pos):])})" if pos else "")
                          + ".", "MATLAB:minrhs", node)
    if most is not None and len(pos) > most:
        raise MatlabError(f"{name}: too many input arguments: expected at most {most}, "
                          f"received {len(pos)}.", "MATLAB:TooManyInputs", node)


class Calling(Part):
    """The interpreter's calls (a part of `Interpreter`)."""

    def _call(self, name, pos, kw, node, scope, nargout=1):
        if name in self.functions:
            return self._call_function(self.functions[name], pos, nargout, node, kw)
        if name in _WORKSPACE_CALLS and name not in self.toolbox:
            return getattr(self, _WORKSPACE_CALLS[name])(pos, kw, node, scope, nargout)
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
            _check_toolbox_arguments(name, fn, pos, node)
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
                            f"script defines{hint.rstrip('?').replace(' Did', ' (did') + ')' if hint else ''}"
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

    # ------------------------------------------------------- workspaces: evalin, assignin --
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

    def _output_layer_refusal(self, node, fn, layers) -> None:
        """trainnet given a layer array that ends in an output layer: MATLAB refuses it (the
        loss is trainnet's argument); analyze, which skips the call, records the refusal."""
        from .training import output_layer_error
        if fn != "trainnet":
            return
        error = output_layer_error(fn, layers)
        if error is not None:
            self.refusals.append((node.start_point.row + 1, error))

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

    # ------------------------------------------------------------- the script's functions --
    def _signature(self, fn: Function) -> Signature:
        sig = fn.__dict__.get("_signature")
        if sig is None:
            sig = fn.__dict__["_signature"] = Signature(fn, self._source())
        return sig

    def _source(self) -> bytes:
        """The script's own text (evalin swaps in the text it evaluates for a while)."""
        return self.__dict__.get("_main_src", self.src)

    def _call_function(self, fn: Function, args, nargout, node, kw=None):
        """Calls a function of the script as MATLAB does: inputs bound by position (`~`
        dropped, the rest in `varargin`), an arguments block's defaults, classes, sizes and
        validation functions applied, name-value structures filled, `nargin`/`nargout` set;
        its outputs returned (`varargout` spread), nested functions sharing its variables."""
        sig = self._signature(fn)
        try:
            scope = self._bind(fn, sig, list(args), dict(kw or {}), nargout)
        except MatlabError as e:
            if e.node is None:
                e.node = node
            raise
        parent: dict = fn.__dict__.get("_parent_scope") or {}
        shared = self._shared(fn) if fn.__dict__.get("_parent_scope") is not None else ()
        for name in shared:
            if name in parent and name not in scope:
                scope[name] = parent[name]
        self._last_scope = scope
        if node is not None and getattr(node, "type", "") == "function_definition":
            self.__dict__.setdefault("_entry_scopes", set()).add(id(scope))  # a function file
        frames = self.__dict__.setdefault("_frames", [])
        frames.append(scope)
        names = self.__dict__.setdefault("_frame_names", [])
        names.append(fn.name)
        nested = self._nested(fn)
        saved = {f.name: (self.functions.get(f.name), f.__dict__.get("_parent_scope"))
                 for f in nested}
        for f in nested:
            f.__dict__["_parent_scope"] = scope
            self.functions[f.name] = f
        old_src = self.src
        self.src = self._source()
        try:
            self._block(fn.body.named_children if fn.body else [], scope)
        except _Return:
            pass
        finally:
            self.src = old_src
            self._last_scope = scope            # the outermost call's, once inner ones return
            frames.pop()
            names.pop()
            for f in nested:
                before, parent_scope = saved[f.name]
                f.__dict__["_parent_scope"] = parent_scope
                if before is None:
                    self.functions.pop(f.name, None)
                else:
                    self.functions[f.name] = before
            for name in shared:
                if name in scope:
                    parent[name] = scope[name]
        return self._outputs(fn, sig, scope, nargout, node)

    def _bind(self, fn: Function, sig: Signature, args: list, kw: dict, nargout) -> dict:
        name = fn.name
        if sig.varargin and len(args) == len(sig.inputs) and isinstance(args[-1], Missing):
            args = args[:-1]        # a function file run from the workspace: no varargin given
        if sig.options and len(args) == len(sig.inputs) and all(
                isinstance(args[k], (Struct, Missing)) for k, p in enumerate(sig.inputs)
                if p in sig.options):
            # a function file run with its inputs from the workspace, in declared order: a
            # name-value structure given there (a struct) holds its options, else none
            for k, p in enumerate(sig.inputs):
                if p in sig.options and isinstance(args[k], Struct):
                    kw = {**args[k], **kw}
            args = [a for a, p in zip(args, sig.inputs) if p not in sig.options]
        given = len(args) + 2 * len(kw)
        pos, pairs = sig.split(name, args, kw)
        if len(pos) > len(sig.positional) and not sig.varargin:
            raise MatlabError(f"Too many input arguments: {name} takes at most "
                              f"{len(sig.positional)}, received {len(pos)}.",
                              "MATLAB:TooManyInputs")
        most = len(sig.outputs) if not sig.varargout else None
        if most is not None and nargout > max(most, 1 if most else 0):
            raise MatlabError(f"Too many output arguments: {name} returns at most {most}, "
                              f"{nargout} were asked for.", "MATLAB:TooManyOutputs")
        scope: dict = {}
        for k, (param, value) in enumerate(zip(sig.positional, pos)):
            if param is not None:
                scope[param] = value
        if sig.varargin:
            scope["varargin"] = Cell(pos[len(sig.positional):])
        scope["nargin"] = given
        scope["nargout"] = nargout
        if sig.has_block:
            for k, param in enumerate(sig.positional):
                spec = sig.specs.get(param) if param is not None else None
                if spec is None:
                    continue
                where = where_text(name, k + 1, str(param), False)
                if isinstance(scope.get(param), Missing) and spec.default is None:
                    missing = [p for p in sig.positional if p is not None and
                               isinstance(scope.get(p), Missing) and sig.specs.get(p) is not None
                               and sig.specs[p].default is None]
                    raise MatlabError(f"Not enough input arguments: {name} requires "
                                      f"{', '.join(missing)} (its arguments block has no "
                                      "default for them). Give them: attnlab analyze FILE.m "
                                      + " ".join(f"--set {p}=VALUE" for p in missing),
                                      "MATLAB:minrhs")
                if param in scope:
                    scope[param] = self._validated(spec, scope[param], where, scope)
                elif spec.default is not None:
                    scope[param] = self._validated(spec, self._value(spec.default, scope),
                                                   where, scope)
                else:
                    raise MatlabError(f"Not enough input arguments: {name} needs '{param}' "
                                      f"(position {k + 1}), received {len(pos)}.",
                                      "MATLAB:minrhs")
        fields = {f: struct for struct, fs in sig.options.items() for f in fs}
        chosen: dict[str, dict] = {struct: {} for struct in sig.options}
        for given_name, value in pairs.items():
            field = match_field(name, dict.fromkeys(fields), given_name)
            chosen[fields[field]][field] = value
        for struct, specs in sig.options.items():
            opts = Struct()
            scope[struct] = opts
            for field, spec in specs.items():
                where = where_text(name, None, field, True)
                if field in chosen[struct]:
                    opts[field] = self._validated(spec, chosen[struct][field], where, scope,
                                                  struct)
                elif spec.default is not None:
                    opts[field] = self._validated(spec, self._value(spec.default, scope), where,
                                                  scope, struct)
        return scope

    def _validated(self, spec, value, where, scope, struct=None):
        """An argument after its declaration: class conversion, size, validation functions."""
        if isinstance(value, Missing):
            return value                       # analyze: a value only data would give
        if spec.cls:
            value = convert_class(value, spec.cls, where)
        if spec.dims:
            value = check_size(value, spec.dims, where)
        for v in spec.validators:
            self._validate_with(v, value, where, scope, spec, struct)
        return value

    def _validate_with(self, node, value, where, scope, spec, struct):
        if node.type == "identifier":
            fname, extra = _text(node, self.src), []
        elif node.type == "function_call":
            fname = _text(node.named_children[0], self.src)
            inner = dict(scope)
            if struct is not None:              # opts.Name refers to the value checked
                inner[struct] = Struct({**scope.get(struct, {}), spec.name.split(".")[-1]: value})
            else:
                inner[spec.name] = value
            pos, _ = self._arguments(_child(node, "arguments"), inner)
            extra = pos[1:]
        else:
            return
        check = VALIDATORS.get(fname)
        try:
            if check is not None and fname not in self.functions:
                check(value, where, *extra)
            else:
                self._call(fname, [value, *extra], {}, node, scope, nargout=0)
        except MatlabError as e:
            if e.message.startswith(where):
                raise
            raise MatlabError(f"{where} {e.message}", e.identifier, node) from None

    def _outputs(self, fn, sig, scope, nargout, node):
        named = sig.outputs[:-1] if sig.varargout else sig.outputs
        results: list = []
        for i in range(max(nargout, 1)):
            if i < len(named):
                out = named[i]
                if out not in scope:
                    if nargout == 0 and i == 0:
                        return None
                    raise MatlabError(f"Output argument \"{out}\" (and possibly others) not "
                                      f"assigned a value in the execution with \"{fn.name}\" "
                                      "function.", "MATLAB:unassignedOutputs", node)
                results.append(scope[out])
                continue
            extra = scope.get("varargout") if sig.varargout else None
            j = i - len(named)
            if not isinstance(extra, list) or j >= len(extra) or extra[j] is None:
                if nargout == 0 and i == 0:
                    return None
                raise MatlabError(f"Output argument \"varargout{{{j + 1}}}\" (and possibly "
                                  f"others) not assigned a value in the execution with "
                                  f"\"{fn.name}\" function.", "MATLAB:unassignedOutputs", node)
            results.append(extra[j])
        return results[0] if len(results) == 1 and nargout <= 1 else tuple(results)

    def _nested(self, fn: Function) -> list:
        """The functions defined inside `fn`'s body (MATLAB's nested functions)."""
        found = fn.__dict__.get("_nested")
        if found is None:
            found = []
            for c in (fn.body.named_children if fn.body else []):
                if c.type == "function_definition":
                    inner = Function(c, self._source())
                    inner.__dict__["_parent"] = fn
                    found.append(inner)
            fn.__dict__["_nested"] = found
        return found

    def _shared(self, fn: Function) -> tuple:
        """The variables a nested function shares with its parent: those both use (MATLAB's
        rule), but the nested function's own inputs and outputs."""
        found = fn.__dict__.get("_shared")
        if found is None:
            parent = fn.__dict__["_parent"]
            src = self._source()

            def names(block, skip_functions):
                out, stack = set(), list(block.named_children) if block is not None else []
                while stack:
                    n = stack.pop()
                    if skip_functions and n.type == "function_definition":
                        continue
                    if n.type == "identifier":
                        out.add(_text(n, src))
                    stack.extend(n.named_children)
                return out
            own = set(fn.params) | set(fn.outputs)
            found = tuple(sorted((names(fn.body, False) & (names(parent.body, True) |
                                                          set(parent.params)))
                                 - own))
            fn.__dict__["_shared"] = found
        return found
