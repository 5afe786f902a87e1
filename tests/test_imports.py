"""Imports follow the layering (layers → graph → analysis/compile/io/viz/stream → network): no
module of attnlab imports one that imports it back, counting imports inside functions too (they
are cycles all the same, only deferred)."""
import ast
from pathlib import Path

import attnlab

ROOT = Path(attnlab.__file__).parent


def _module_name(path: Path) -> str:
    parts = ("attnlab",) + path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in ROOT.rglob("*.py")}


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            # `from pkg import sub` imports the submodule `pkg.sub` when there is one, else a
            # name defined by `pkg` itself
            targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod for a in node.names]
        else:
            continue
        found.update(t for t in targets if t in known and t != name)
    return found


def _graph():
    mods = _modules()
    return {name: _imports(name, path, set(mods)) for name, path in mods.items()}


def _cycle(graph):
    """One import cycle as a list of modules, or None (iterative depth-first search)."""
    state = {}
    for root in sorted(graph):
        if root in state:
            continue
        stack = [(root, iter(sorted(graph[root])))]
        path = [root]
        state[root] = 1
        while stack:
            node, it = stack[-1]
            for nxt in it:
                if state.get(nxt) == 1:
                    return path[path.index(nxt):] + [nxt]
                if nxt not in state:
                    state[nxt] = 1
                    stack.append((nxt, iter(sorted(graph[nxt]))))
                    path.append(nxt)
                    break
            else:
                state[node] = 2
                stack.pop()
                path.pop()
    return None


def test_the_checker_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_attnlab_has_no_import_cycle():
    graph = _graph()
    assert "attnlab.network" in graph and "attnlab.graph" in graph
    cycle = _cycle(graph)
    assert cycle is None, "import cycle: " + " → ".join(cycle)


def test_the_graph_sits_below_everything_that_reads_it():
    graph = _graph()

    def reaches(a, b):
        seen, todo = set(), [a]
        while todo:
            m = todo.pop()
            if m == b:
                return True
            if m not in seen:
                seen.add(m)
                todo.extend(graph[m])
        return False

    for lower in ("attnlab.graph", "attnlab.analysis", "attnlab.compile", "attnlab.io",
                  "attnlab.onnx_export", "attnlab.stream.program", "attnlab.viz.graph"):
        assert not reaches(lower, "attnlab.network"), f"{lower} imports attnlab.network"
    assert reaches("attnlab.network", "attnlab.graph")
