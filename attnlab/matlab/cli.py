"""`attnlab analyze FILE.m` and `attnlab plot FILE.m`: run a MATLAB script with analyze=True and
report the networks it builds — the final ones: a layer array that went into a network is not
analysed again on its own. Exit status 0 clean, 1 network errors, 2 the script cannot be run."""
from __future__ import annotations

import sys
import warnings
from pathlib import Path

from attnlab.core.errors import ArgumentError, AttnlabError
from ..layers.base import Layer
from ..network import Network
from .interpreter import Interpreter, _run
from .reader import ScriptError, printable, read_source
from .terms import matlab_analysis, matlab_count_note


def parse_sets(pairs: list[str]) -> dict:
    """`NAME=VALUE` pairs; VALUE is a MATLAB literal (8, [28 28 1], "adam", 'adam', true)."""
    ws = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier():
            raise ArgumentError(f"--set expects NAME=VALUE, received {pair!r}; e.g. "
                                "--set numHeads=8")
        try:
            ws[name] = _run(Interpreter(f"v = {text};", f"--set {name}"))[0]["v"]
        except ScriptError as e:
            raise ArgumentError(f"--set {name}: the value is not a MATLAB value ({e.reason}); "
                                f"write numbers as 8 or [28 28 1] and text in quotes, e.g. "
                                f"--set {name}='\"adam\"'") from None
    return ws


def final_networks(ws: dict, notes=None, cleared=None) -> list[tuple[str, Network]]:
    """The networks a script ends with, by variable name: each Network once, and layer arrays
    whose layers went into no network (as MATLAB's analyzeNetwork(layers) would see them).
    When the script cleared every one, those it cleared (`cleared`: name -> (line, value))."""
    from .networks import layerGraph
    seen: set[int] = set()
    out = []
    if cleared and not any(isinstance(v, Network) and v.layers or _layer_list(v)
                           for v in ws.values()):
        ws = {**{name: value for name, (_, value) in cleared.items()}, **ws}
        if notes is not None:
            notes.extend(f"'{name}' was cleared at line {line}: the analysis is of the network "
                         "it held" for name, (line, _) in cleared.items())
    for name, value in ws.items():
        if isinstance(value, Network) and id(value) not in seen and value.layers:
            seen.add(id(value))
            out.append((name, value))
    # a layer array counts as used only by a network the script keeps: one that went into a
    # discarded layerGraph (plot(layerGraph(layers))) or a skipped statement is shown itself
    # (a layer copied into a network, by repmat or by being used twice, counts as used); a
    # block without an input layer (`tempLayers` added to a graph later) is shown only when
    # the script has nothing else
    in_nets = {id(x) for _, net in out for l in net.layers
               for x in (l, l.__dict__.get("_matlab_copy_of"))}
    arrays = [(name, value) for name, value in ws.items()
              if _layer_list(value) and not any(id(v) in in_nets for v in value)]
    whole = [(n, v) for n, v in arrays if any(getattr(l, "is_input", False) for l in v)]
    for name, value in (whole if out or whole else arrays):
        if id(value) not in seen:
            seen.add(id(value))
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                out.append((name, layerGraph(value)))
            if notes is not None:
                notes.extend(printable(f"'{name}': {w.message}") for w in caught)
    return out


def _layer_list(value) -> bool:
    return isinstance(value, list) and any(isinstance(v, Layer) for v in value)


def holders(ws: dict, value, trained: dict) -> list[str]:
    """Every variable of the workspace that holds this network (or the layer array it was
    built from), each with how: `net (trainNetwork, line 28: analysed as built)`."""
    names = []
    for name, v in ws.items():
        if v is value:
            how = trained.get(name)
            names.append(f"'{name}'" + (f" ({how[1]} at line {how[0]}, from '{how[2]}': "
                                        "analysed as built, untrained)" if how else ""))
    return names


def _load(path: Path, sets: list[str]):
    ws = parse_sets(sets)
    interp = Interpreter(read_source(path), path.name, ws, analyze=True,
                         out=lambda *a, **k: None, folder=path.parent)
    ws, interp = _run(interp)
    nets = final_networks(ws, interp.notes, interp.cleared)
    if interp.blocked:           # a network the script builds could not be built whole
        built_some = any(isinstance(v, Network) and v.layers or _layer_list(v)
                         for v in ws.values())
        raise _blocked_error(interp, _all_undefined(path, sets, interp), built_some)
    return nets, interp, ws


def _all_undefined(path: Path, sets: list[str], interp, most: int = 30) -> list[str]:
    """The script's undefined variables, all of them, so that one error can name every
    --set the script needs: rerun with each one found given a placeholder (1) until the
    script runs or stops on something else. The placeholders never reach the analysis."""
    found: list[str] = []
    while interp.blocked and len(found) < most:
        e = interp.blocked[0][1]
        if not e.var or e.var in found:
            break
        found.append(e.var)
        ws = {**parse_sets(sets), **{name: 1.0 for name in found}}
        try:
            _, interp = _run(Interpreter(read_source(path), path.name, ws, analyze=True,
                                         out=lambda *a, **k: None, folder=path.parent))
        except AttnlabError:
            break                                   # the placeholder did not fit: stop here
    return found


def _blocked_error(interp, undefined: list[str] | None = None,
                   built_some: bool = False) -> ScriptError:
    """No network could be built because a statement that builds one needed a value the
    script does not have: the error names that value (and the other undefined ones the
    script uses) and how to give them."""
    node, e = interp.blocked[0]
    if e.node is not None:                       # an undefined variable: where it is used
        names = undefined if undefined and len(undefined) > 1 else [e.var]
        what = (f"undefined variable or function '{e.var}'" if len(names) == 1 else
                f"undefined variables or functions {', '.join(repr(n) for n in names)} "
                f"(the first used here)")
        return ScriptError(f"{what}. Give {'it a value' if len(names) == 1 else 'them values'}: "
                           f"attnlab analyze FILE.m "
                           + " ".join(f"--set {n}=VALUE" for n in names)
                           + ", or run_file(path, workspace={"
                           + ", ".join(f"'{n}': …" for n in names) + "})", interp.file,
                           e.node.start_point.row + 1, e.node.start_point.column + 1)
    names = undefined if undefined and len(undefined) > 1 else [e.var] if e.var else []
    fix = (f" Give {'it' if len(names) == 1 else 'them'} with "
           + " ".join(f"--set {n}=VALUE" for n in names) + "."
           if names and "--set" not in e.why else "")
    what = "the network could not be built whole" if built_some else "no network could be built"
    return ScriptError(f"{what}: this statement was skipped ({e.why}).{fix}",
                       interp.file,
                       node.start_point.row + 1, node.start_point.column + 1)


def _load_reported(path: Path, sets: list[str]):
    """(networks, interpreter, workspace), or None once the one-line error of an unreadable
    script is printed."""
    try:
        return _load(path, sets)
    except FileNotFoundError:
        print(f"error: no such file: {path}", file=sys.stderr)
    except AttnlabError as e:
        print(f"error: {e}", file=sys.stderr)
    return None


def analyze(path: Path, sets: list[str], width: int = 120) -> int:
    """Exit 0: every network the script ends with analysed clean; 1: a network has errors (or
    a line MATLAB refuses, such as dlnetwork given output layers); 2: the script cannot be
    run, builds no network, or a statement that builds its network had to be skipped."""
    loaded = _load_reported(path, sets)
    if loaded is None:
        return 2
    nets, interp, ws = loaded
    notes = interp.notes
    if not nets:
        for note in notes:
            print(f"note: {note}")
        print(f"error: {path.name}: the script builds no network (no variable holds a layer "
              "array, layerGraph or dlnetwork when it ends)", file=sys.stderr)
        return 2
    status = 0
    print(f"{path.name}: {len(nets)} network{'s' if len(nets) > 1 else ''}, held by " + "; ".join(
        ", ".join(holders(ws, ws.get(name), interp.trained) or [f"'{name}'"])
        for name, _ in nets))
    for name, net in nets:
        analysis = matlab_analysis(net.analyze(), net)
        print(f"{path.name}: network '{name}': {len(net.layers)} layers, inputs "
              f"{', '.join(net.input_names) or '-'}, outputs {', '.join(net.output_names) or '-'}")
        print(analysis.table(width=width), end="")
        note = matlab_count_note(net, analysis)
        if note:
            print(note)
        status = status or (0 if analysis.ok else 1)
    for line, message in interp.refusals:      # MATLAB refuses the network at this line
        print(f"error: {path.name}:{line}: {message}")
        status = 1
    for note in notes:
        print(f"note: {note}")
    return status


def plot(path: Path, sets: list[str], out: Path | None, **kwargs) -> int:
    loaded = _load_reported(path, sets)
    if loaded is None:
        return 2
    nets = loaded[0]
    if not nets:
        print(f"error: {path.name} builds no network to draw", file=sys.stderr)
        return 2
    import matplotlib
    matplotlib.use("Agg")
    out = out or path.with_suffix(".png")
    for name, net in nets:
        target = out if len(nets) == 1 else out.with_name(f"{out.stem}-{name}{out.suffix}")
        net.plot(target, **kwargs)
        print(f"wrote {target}")
    for note in getattr(loaded[1], "notes", []):      # what was skipped (training, data, …)
        print(f"note: {note}")
    return 0
