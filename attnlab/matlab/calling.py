"""Calling functions by name: the toolbox, base MATLAB, and clear (the calls that read or
change a workspace are workspace_calls.py, the script's own functions script_functions.py)."""
from __future__ import annotations

import warnings

import numpy as np

from attnlab.core.errors import AttnlabError, NetworkError, close_matches
from ..network import Network
from . import builtins as B
from ._options import MatlabNote
from .reader import ScriptError
from .script_values import (
    _CLEAR_WORDS,
    _CUSTOM_LOOP,
    _DISPLAY,
    _INITIALIZES,
    Part,
    _describe,
    _flat_layers,
    _is_layerish,
    _to_python,
)
from .values import Handle, MatlabError, NeedsData
from .workspace_calls import _WORKSPACE_CALLS

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

    def _output_layer_refusal(self, node, fn, layers) -> None:
        """trainnet given a layer array that ends in an output layer: MATLAB refuses it (the
        loss is trainnet's argument); analyze, which skips the call, records the refusal."""
        from .training import output_layer_error
        if fn != "trainnet":
            return
        error = output_layer_error(fn, layers)
        if error is not None:
            self.refusals.append((node.start_point.row + 1, error))
