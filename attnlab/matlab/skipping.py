"""What `analyze` (and `run_file`, for custom training loops) skips, and the notes it writes:
a statement that needs data the script does not have, one outside the network slice that
cannot run (one note for the run of statements skipped with it), a training call (its output
holds the network it was given), a custom training loop; and a name no path assigns found in a
statement the run never got to."""
from __future__ import annotations

import warnings

from attnlab.core.errors import AttnlabError
from ..network import Network
from . import builtins as B
from ._options import MatlabNote
from .reader import LimitError, ScriptError, printable
from .script_values import (
    _DISPLAY,
    _GRAPH_EDITS,
    _LOOP_TRAINING,
    _TRAINERS,
    Part,
    Undefined,
    _child,
    _descendants,
    _is_layerish,
    _text,
    _walk_ids,
)
from .values import MatlabError, Missing, NeedsData


class Skipping(Part):
    """The interpreter's skips and notes (a part of `Interpreter`)."""

    def _undefined_in_skipped(self) -> None:
        """A name no path assigns, used in a statement the run never got to because a loop,
        branch or statement around it was skipped (it needed data): given the data, MATLAB
        would get there and stop, so the reader stops too, at the first such use."""
        for stmt, name, ident, why in self.plan.undefined_uses():
            if stmt in self._reached:
                continue
            n = ident.parent
            while n is not None and n.type not in ("function_definition", "source_file"):
                if n.id in self._skipped_ids:
                    raise Undefined(name, why, ident)
                n = n.parent

    def _outside_slice(self, node, e) -> bool:
        """Whether analyze skips a statement that failed: one no network needs (outside the
        slice), unless MATLAB stops there (an undefined name), a limit was reached, or the
        script's own try/catch handles it. An error of a statement the networks need stays an
        error, also for the statements around it."""
        if not self.analyze or self._trying or isinstance(e, (Undefined, LimitError)) or \
                getattr(e, "_attnlab_needed", False) or self._raised_by_script(e):
            return False
        if self.plan.needed(node):
            try:
                setattr(e, "_attnlab_needed", True)   # the statements around it re-raise it
            except AttributeError:
                pass
            return False
        return True

    def _raised_by_script(self, e) -> bool:
        """An error the script raises itself (`error('…')`): MATLAB stops there, and so does
        analyze, wherever it is."""
        where = getattr(e, "node", None)
        if not isinstance(e, MatlabError) or where is None:
            return False
        head = _child(where, "command_name") if where.type == "command" else \
            where.named_children[0] if where.type == "function_call" and \
            where.named_children else None
        return head is not None and _text(head, self.src) == "error"

    def _skipped(self, node, e, scope):
        """analyze skips a statement: its targets become Missing, except that a variable
        holding a network keeps it and a training call's output holds the network trained."""
        kept, held = self._unset(node, e, scope)
        if self._grouped_note(node, None):
            return
        self._note(node, f"skipped: {e.why}" + (
            f"; {', '.join(kept)} keep{'s' if len(kept) == 1 else ''} the given value"
            if kept else "") + "".join(f"; {h}" for h in held))

    def _failed(self, node, e, scope):
        """A statement outside the network slice that cannot run (a function the reader does
        not have, a value it cannot take): skipped like one that needs data, with one note for
        the run of statements skipped with it."""
        why = _failure(e, self.src)
        self._unset(node, NeedsData(why), scope)
        self._grouped_note(node, why)

    def _unset(self, node, e, scope) -> tuple[list[str], list[str]]:
        """What a skipped statement assigns becomes Missing (given values and networks stay);
        a statement that builds a network and had to be skipped stops analyze (exit 2)."""
        kept, held = [], []
        line = node.start_point.row + 1
        self._skipped_ids.add(node.id)
        trained = self._trained_network(node, scope)
        builds = trained is None and self._builds_network(node)
        # a skipped loop or branch leaves unset what its body assigns, as a statement does
        names = self._targets(node) if node.type == "assignment" else list(dict.fromkeys(
            name for n in _descendants(node) if n.type == "assignment" for name in self._targets(n)))
        for k, name in enumerate(names):
            old = scope.get(name)
            if k == 0 and trained is not None:
                fn, source, net = trained
                if not isinstance(net, Network):             # trainnet(X, T, layers, …)
                    self._output_layer_refusal(node, fn, net)  # MATLAB's trainnet refuses them
                    from .networks import layerGraph
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", MatlabNote)
                        net = layerGraph(net)
                self._hold(node, name, net, scope)      # net{i} = trainNetwork(…): into the cell
                if name != source:
                    self.trained[name] = (line, fn, source)
                held.append(f"'{name}' holds the network {fn} was given ('{source}'), as built"
                            if name != source else f"'{name}' keeps its network")
            elif (isinstance(old, Network) or _is_layerish(old)) and not builds:
                held.append(f"'{name}' keeps its network")     # training, data, plots
            elif self._given_here(scope) and name in self.given:
                kept.append(name)            # --set gave it: the given value stands
                scope[name] = self.given[name]
            else:
                scope[name] = Missing(line, e.why, e.var or name)
        if builds:                       # the network would differ: analyze stops (exit 2)
            self.blocked.append((node, e))
        return kept, held

    def _grouped_note(self, node, why: str | None) -> bool:
        """One note for a run of statements outside the network slice that analyze skipped
        because one of them could not run (`why`): `lines 40-72: data preparation, skipped:
        …`. A statement skipped next after one of the run joins it; one that failed starts a
        run. Whether the note was taken care of (else the statement gets its own)."""
        if node.id in self._grouped:             # a loop runs it again
            return True
        if self.plan.needed(node):
            return False
        prev = node.prev_named_sibling
        while prev is not None and prev.type in ("comment", "line_continuation"):
            prev = prev.prev_named_sibling
        group = self._groups.pop(prev.id, None) if prev is not None else None
        if group is None:
            if why is None:
                return False
            group = _Group(node, why, len(self.notes))
            self.notes.append("")
        group.add(node, self.src)
        self._groups[node.id] = group
        self._grouped.add(node.id)
        self.notes[group.index] = printable(f"{self.file}:{group.first}: {group.text()}")
        return True

    def _trained_network(self, node, scope):
        """(function, variable, network) when a statement assigns the result of a training
        or update call (`net = trainnet(X, T, net, …)`) whose network the script has."""
        if node.type != "assignment":
            return None
        right = node.child_by_field_name("right") or node.named_children[-1]
        if right.type != "function_call" or right.named_children[0].type != "identifier":
            return None
        fn = _text(right.named_children[0], self.src)
        if fn not in _TRAINERS or fn in scope:
            return None
        for arg in (_child(right, "arguments").named_children if _child(right, "arguments")
                    else []):
            if arg.type == "identifier":
                value = scope.get(_text(arg, self.src))
                if isinstance(value, Network) or _is_layerish(value):
                    return fn, _text(arg, self.src), value
        return None

    def _custom_training_loop(self, node, scope) -> bool:
        """A loop that calls dlfeval, dlgradient or an optimizer update trains the network
        itself: analyze skips it whole with one note, and the network keeps its architecture."""
        key = ("loop", node.id)                  # an inner loop is walked once, not per run
        if key not in self._walks:
            calls = sorted({_text(n, self.src) for n in _descendants(node)
                            if n.type == "identifier" and _text(n, self.src) in _LOOP_TRAINING
                            and _text(n, self.src) not in self.functions})
            targets = [name for n in _descendants(node) if n.type == "assignment"
                       for name in self._targets(n)] if calls else []
            self._walks[key] = (calls, targets)
        calls, targets = self._walks[key]
        if not calls:
            return False
        self._skipped_ids.add(node.id)
        first, last = node.start_point.row + 1, node.end_point.row + 1
        why = f"set in the custom training loop at lines {first}-{last}"
        for name in targets:
            old = scope.get(name)
            if not (isinstance(old, Network) or _is_layerish(old)):
                scope[name] = Missing(first, why, name)
        if self.analyze:
            self._note(node, f"skipped: a custom training loop (lines {first}-{last}: "
                       f"{', '.join(calls)}); analyze does not train, and the network it trains "
                       "is analysed as built")
        else:
            nets = [n for n in dict.fromkeys(targets) if isinstance(scope.get(n), Network)]
            self._run_note(node, f"skipped: a custom training loop (lines {first}-{last}: "
                           f"{', '.join(calls)}), which run_file does not run"
                           + (f"; {', '.join(repr(n) for n in nets)} keep"
                              f"{'s' if len(nets) == 1 else ''} the network as built, untrained"
                              if nets else "")
                           + ". To train it, use trainnet(X, T, net, lossFcn, options)")
        return True

    def _run_note(self, node, text):
        """A note of run_file's: kept with the others, and printed once."""
        before = len(self.notes)
        self._note(node, text)
        if len(self.notes) > before:
            self.print(f"note: {self.notes[-1]}")

    def _builds_network(self, node) -> bool:
        """Whether a statement calls a layer or network-building function (for a compound
        statement, other than `initialize`, which leaves the architecture as it is)."""
        key = ("builds", node.id)                # a statement in a loop is walked once
        if key in self._walks:
            return self._walks[key]
        compound = node.type not in ("assignment", "expression_statement", "function_call")
        stack = [node]
        found = False
        while stack and not found:
            n = stack.pop()
            if n.type == "identifier":
                name = _text(n, self.src)
                if name in self.toolbox and (name.endswith("Layer") or name in _GRAPH_EDITS) \
                        and not (compound and name == "initialize"):
                    found = True
            stack.extend(n.named_children)
        self._walks[key] = found
        return found

    def _given_data(self, node) -> bool:
        """A statement that loads data whose variables the caller gave (run_file's workspace,
        --set): the given values stand."""
        if node.type != "assignment":
            return False
        right = node.child_by_field_name("right") or node.named_children[-1]
        targets = self._targets(node)
        call = right.named_children[0] if right.type == "function_call" else right
        if not targets or not all(t in self.given for t in targets):
            return False
        key = ("reads", node.id)                 # [XTrain, YTrain] = japaneseVowelsTrainData;
        if key not in self._walks:               # a call that reads files, one the reader does
            calls = [call] + [n.named_children[0] for n in _descendants(right)  # not run, or a
                              if n.type == "function_call" and _child(n, "{") is None]  # helper
            names = {_text(n, self.src) for n in calls if n.type == "identifier"}
            used = {_text(n, self.src) for n in [right, *_descendants(right)]
                    if n.type == "identifier"}                   # fullfile(matlabroot, …)
            self._walks[key] = any(n in B.FILES or n in B.OUTSIDE for n in used) or \
                any(n not in self.ws and self._unknown(n) for n in names)
        return self._walks[key]

    def _targets(self, node) -> list[str]:
        if node.type != "assignment":
            return []
        left = node.child_by_field_name("left") or node.named_children[0]
        ids = _walk_ids(left) if left.type in ("identifier", "multioutput_variable") else \
            [left.named_children[0]] if left.named_children else []
        return [_text(i, self.src) for i in ids if i.type == "identifier"]


# what a run of skipped statements was doing, by the functions it calls
_RESULTS = {"predict", "classify", "minibatchpredict", "forward", "activations",
            "predictAndUpdateState", "trainNetwork", "trainnet"}
_WRITES = {"save", "csvwrite", "dlmwrite", "writematrix", "writetable", "writecell", "xlswrite",
           "fopen", "fwrite", "fclose", "saveas", "savefig", "exportgraphics", "mkdir", "delete"}


class _Group:
    """A run of statements of one block that analyze skipped, outside the network slice,
    because the first of them could not run; its note sits at `index` of the notes."""

    def __init__(self, node, why: str, index: int):
        self.why, self.index = why, index
        self.first = self.last = node.start_point.row + 1
        self.names: set[str] = set()             # the names its statements use

    def add(self, node, src: bytes) -> None:
        self.last = node.end_point.row + 1
        self.names.update(_text(n, src) for n in [node, *_descendants(node)]
                          if n.type in ("identifier", "command_name"))

    def text(self) -> str:
        names, last = self.names, self.last
        kinds = [kind for kind, words in (("data preparation", B.FILES), ("results", _RESULTS),
                                          ("files", _WRITES), ("plots", B.GRAPHICS | _DISPLAY))
                 if names & set(words)] or ["data preparation"]
        what = " and ".join(kinds)
        if last == self.first:
            return f"{what}, skipped: {self.why} (no network needs this line)"
        return (f"lines {self.first}-{last}: {what}, skipped: {self.why} (line {self.first}; "
                "no network needs these lines)")


def _failure(e: BaseException, src: bytes) -> str:
    """Why a statement could not run, in the reader's words (never a Python message)."""
    if isinstance(e, ScriptError):
        why = e.reason
    elif isinstance(e, MatlabError):
        why = e.message
        cause = e.__cause__
        if isinstance(cause, (TypeError, ValueError)) and not isinstance(cause, AttnlabError):
            node = e.node
            name = _text(node.named_children[0], src) if node is not None and \
                node.type == "function_call" and node.named_children else "the function"
            why = f"{name} cannot take these arguments in attnlab's reader"
    elif isinstance(e, AttnlabError):
        why = str(e)
    else:
        why = f"attnlab's reader cannot run it ({type(e).__name__})"
    why = " ".join(why.split())
    return why if len(why) <= 200 else why[:199] + "…"
