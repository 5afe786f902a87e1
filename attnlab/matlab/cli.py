"""`attnlab analyze FILE.m` and `attnlab plot FILE.m`: run a MATLAB script with analyze=True and
report the networks it builds — the final ones: a layer array that went into a network is not
analysed again on its own. Exit status 0 clean, 1 network errors, 2 the script cannot be run."""
from __future__ import annotations

import sys
import warnings
from pathlib import Path

from ..errors import AttnlabError
from ..layers.base import Layer
from ..network import Network
from .interpreter import Interpreter, _run
from .reader import ScriptError
from .terms import matlab_analysis, matlab_count_note


def parse_sets(pairs: list[str]) -> dict:
    """`NAME=VALUE` pairs; VALUE is a MATLAB literal (8, [28 28 1], "adam", 'adam', true)."""
    ws = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier():
            raise ScriptError(f"--set expects NAME=VALUE, received {pair!r}", "--set", 0, 0)
        try:
            ws[name] = _run(Interpreter(f"v = {text};", f"--set {name}"))[0]["v"]
        except ScriptError as e:
            raise ScriptError(f"the value of {name} is not a MATLAB value ({e.reason}); write "
                              f"numbers as 8 or [28 28 1] and text in quotes, e.g. "
                              f"--set {name}='\"adam\"'", "--set", 0, 0) from None
    return ws


def final_networks(ws: dict, notes=None) -> list[tuple[str, Network]]:
    """The networks a script ends with, by variable name: each Network once, and layer arrays
    whose layers went into no network (as MATLAB's analyzeNetwork(layers) would see them)."""
    from .networks import layerGraph
    seen: set[int] = set()
    out = []
    for name, value in ws.items():
        if isinstance(value, Network) and id(value) not in seen and value.layers:
            seen.add(id(value))
            out.append((name, value))
    # a layer array counts as used only by a network the script keeps: one that went into a
    # discarded layerGraph (plot(layerGraph(layers))) or a skipped statement is shown itself
    in_nets = {id(l) for _, net in out for l in net.layers}
    for name, value in ws.items():
        if isinstance(value, list) and any(isinstance(v, Layer) for v in value) and \
                not any(id(v) in in_nets for v in value):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                out.append((name, layerGraph(value)))
            if notes is not None:
                notes.extend(f"'{name}': {w.message}" for w in caught)
    return out


def _load(path: Path, sets: list[str]):
    ws = parse_sets(sets)
    interp = Interpreter(path.read_bytes(), path.name, ws, analyze=True,
                         out=lambda *a, **k: None)
    ws, interp = _run(interp)
    nets = final_networks(ws, interp.notes)
    if not nets and interp.blocked:
        raise _blocked_error(interp)
    return nets, interp.notes


def _blocked_error(interp) -> ScriptError:
    """No network could be built because a statement that builds one needed a value the
    script does not have: the error names that value and how to give it."""
    node, e = interp.blocked[0]
    if e.node is not None:                       # an undefined variable: where it is used
        return ScriptError(f"undefined variable or function '{e.var}'. Give it a value: "
                           f"attnlab analyze FILE.m --set {e.var}=VALUE, or run_file(path, "
                           f"workspace={{'{e.var}': …}})", interp.file,
                           e.node.start_point.row + 1, e.node.start_point.column + 1)
    fix = f" Give it with --set {e.var}=VALUE." if e.var and "--set" not in e.why else ""
    return ScriptError(f"no network could be built: this statement was skipped ({e.why}).{fix}",
                       interp.file,
                       node.start_point.row + 1, node.start_point.column + 1)


def _load_reported(path: Path, sets: list[str]):
    """(networks, notes), or None once the one-line error of an unreadable script is printed."""
    try:
        return _load(path, sets)
    except FileNotFoundError:
        print(f"error: no such file: {path}", file=sys.stderr)
    except AttnlabError as e:
        print(f"error: {e}", file=sys.stderr)
    return None


def analyze(path: Path, sets: list[str], width: int = 120) -> int:
    loaded = _load_reported(path, sets)
    if loaded is None:
        return 2
    nets, notes = loaded
    status = 0
    if not nets:
        print(f"{path.name}: the script builds no network")
    for name, net in nets:
        analysis = matlab_analysis(net.analyze(), net)
        print(f"{path.name}: network '{name}': {len(net.layers)} layers, inputs "
              f"{', '.join(net.input_names) or '-'}, outputs {', '.join(net.output_names) or '-'}")
        print(analysis.table(width=width), end="")
        note = matlab_count_note(net, analysis)
        if note:
            print(note)
        status = status or (0 if analysis.ok else 1)
    for note in notes:
        print(f"note: {note}")
    return status


def plot(path: Path, sets: list[str], out: Path | None, **kwargs) -> int:
    loaded = _load_reported(path, sets)
    if loaded is None:
        return 2
    nets, _ = loaded
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
    return 0
