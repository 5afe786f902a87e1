"""Calling the script's own functions as MATLAB does: inputs bound by position, arguments
blocks applied (defaults, classes, sizes, validation functions, name-value structures),
outputs returned, nested functions sharing their parent's variables."""
from __future__ import annotations

from .script_values import Function, Part, _child, _Return, _text
from .signatures import VALIDATORS, Signature, check_size, convert_class, match_field, where_text
from .values import Cell, MatlabError, Missing, Struct


class ScriptFunctions(Part):
    """The interpreter's calls of the script's functions (a part of `Interpreter`)."""

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
