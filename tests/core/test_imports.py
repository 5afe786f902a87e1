"""Imports follow the levels: each folder of attnlab/ is one level (docs/architecture.md lists
them in order), a module imports from its own level and the levels below, and no module imports
one that imports it back, counting imports inside functions too (they are cycles all the same,
only deferred)."""
import ast
import re
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


LEVELS_DOC = ROOT.parent / "docs" / "architecture.md"
EXEMPT = {"__init__.py", "_version.py", "py.typed", "__pycache__"}


def _levels() -> dict[str, int]:
    """Top-level entry of attnlab/ (`core`, `cli`, …) → its level, read from the numbered list
    under "Levels" in docs/architecture.md: the folders are the levels, the page says their order."""
    text = LEVELS_DOC.read_text()
    section = text.split("## Levels", 1)[1].split("\n## ", 1)[0]
    levels = {}
    # an item runs from its number to the next one; its entries are `name/` or `name.py`
    for number, text in re.findall(r"^(\d+)\. \*\*[^*]+\*\*(.*?)(?=^\d+\. |\Z)", section,
                                   re.MULTILINE | re.DOTALL):
        for entry in re.findall(r"`([\w]+)(?:/|\.py)`", text):
            levels[entry] = int(number)
    return levels


def _top(module: str) -> str:
    """The top-level entry of attnlab/ a module lives in: `attnlab.graph.plan` → `graph`."""
    return module.split(".")[1] if module.count(".") else ""


def _upward_imports(graph, levels) -> list[str]:
    bad = []
    for name, targets in sorted(graph.items()):
        if _top(name) not in levels:
            continue              # attnlab/__init__.py is the face, above every level
        for target in sorted(targets):
            # _version.py is below every level
            if levels.get(_top(target), 0) > levels[_top(name)]:
                bad.append(f"{name} (level {levels[_top(name)]}) imports {target} "
                           f"(level {levels[_top(target)]})")
    return bad


def test_every_top_level_entry_of_the_package_has_one_level():
    levels = _levels()
    entries = {p.stem for p in ROOT.iterdir() if p.name not in EXEMPT}
    assert entries - set(levels) == set(), "add them to the Levels list of docs/architecture.md"
    assert set(levels) - entries == set(), "the Levels list names entries that do not exist"
    assert sorted(set(levels.values())) == list(range(1, max(levels.values()) + 1))


def test_a_module_imports_from_its_own_level_and_the_levels_below():
    # counting imports inside functions and importlib calls with a literal name
    mods, imports = _modules(), _graph()
    graph = {name: {t for t in _imported_names(path) if t in mods} | imports[name]
             for name, path in mods.items()}
    assert _upward_imports(graph, _levels()) == []


def _documented_modules() -> list[str]:
    """The module of each table row under "The modules" in docs/architecture.md, as a path
    under attnlab/ (`graph/codegen.py`), in the page's order."""
    section = LEVELS_DOC.read_text().split("## The modules", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([\w/]+\.py)` \|", section, re.MULTILINE)


def _module_rows_problems(files: set[str], rows: list[str]) -> list[str]:
    missing, stale = sorted(files - set(rows)), sorted(set(rows) - files)
    twice = sorted({r for r in rows if rows.count(r) > 1})
    return ([f"no row for {', '.join(missing)}: add one under its level"] if missing else []) + \
        ([f"rows for modules that do not exist: {', '.join(stale)}"] if stale else []) + \
        ([f"more than one row for {', '.join(twice)}"] if twice else [])


def test_the_architecture_page_lists_every_module_once():
    files = {p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*.py")}
    problems = _module_rows_problems(files, _documented_modules())
    assert problems == [], "docs/architecture.md, 'The modules': " + "; ".join(problems)


def test_the_module_rows_check_names_what_drifted():
    assert _module_rows_problems({"a.py", "b/c.py"}, ["a.py", "a.py", "d.py"]) == [
        "no row for b/c.py: add one under its level", "rows for modules that do not exist: d.py",
        "more than one row for a.py"]


def test_the_level_checker_flags_an_upward_import():
    graph = {"attnlab.core.errors": {"attnlab.graph"}, "attnlab.graph": {"attnlab.core.errors"}}
    assert _upward_imports(graph, {"core": 1, "graph": 4}) == [
        "attnlab.core.errors (level 1) imports attnlab.graph (level 4)"]


def _imported_names(path: Path) -> set[str]:
    """Every module name `path` imports: import statements (inside functions too) and
    `importlib.import_module` / `__import__` calls with a literal name, relative ones resolved."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                mod = ".".join(base[:len(base) - node.level + 1] + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            found.update([mod] + [f"{mod}.{a.name}" for a in node.names])
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            f = node.func
            called = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if called in ("import_module", "__import__"):
                found.add(node.args[0].value)
    return found


def _front_end(name: str) -> bool:
    return name.split(".")[:2] in (["attnlab", "matlab"], ["attnlab", "cli"])


def test_the_checker_sees_every_way_of_importing(tmp_path):
    fake = ROOT / "_probe_for_the_import_test.py"
    assert not fake.exists()
    src = ("import attnlab.matlab\nfrom .cli.demos import seed1\nfrom . import matlab\n"
           "def f():\n    import importlib\n    importlib.import_module('attnlab.cli.demos.x')\n")
    try:
        fake.write_text(src)
        found = _imported_names(fake)
    finally:
        fake.unlink()
    assert {"attnlab.matlab", "attnlab.cli.demos", "attnlab.cli.demos.seed1", "attnlab.cli.demos.x"} <= found


def test_only_the_front_ends_import_attnlab_matlab_or_the_demos():
    # library code below the command line (io, viz, training, …) never names the MATLAB front
    # end or a demo: the MATLAB layer types register themselves when attnlab.matlab is
    # imported (and al.load imports the packages of attnlab.io.LAYER_PACKAGES by need)
    bad = []
    for name, path in sorted(_modules().items()):
        if _front_end(name):
            continue
        for target in _imported_names(path):
            if _front_end(target):
                bad.append(f"{name} imports {target}")
    assert bad == []


def test_the_layout_of_pictures_is_data_without_matplotlib():
    for data in ("layout.py", "picture.py"):
        names = _imported_names(ROOT / "viz" / data)
        assert not [n for n in names if n.split(".")[0] == "matplotlib"], (data, names)
    assert "matplotlib" in {n.split(".")[0] for n in _imported_names(ROOT / "viz" / "graph.py")}
