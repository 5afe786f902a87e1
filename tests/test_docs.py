"""Every code block of the documentation runs (docs/**/*.md), and printed examples match.

The Python blocks of one page run in order in one namespace, in a temporary folder, with
training shortened to one epoch and no progress plots (the pages say how long to train; the test
checks that the code is right, not how well it learns). A Python block followed directly by a
``text`` block must print exactly that text (the error catalogue's messages are checked this way).
"""
from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import matplotlib
import pytest

import attnlab as al

DOCS = Path(__file__).resolve().parents[1] / "docs"
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
PAGES = sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts)


def blocks(page: Path) -> list[tuple[str, str, str | None]]:
    """(language, code, expected output) for each fenced block of a page, in order."""
    found = [(m.group(1), m.group(2), m.start(), m.end()) for m in FENCE.finditer(page.read_text())]
    text = page.read_text()
    out = []
    for i, (lang, code, _, end) in enumerate(found):
        expected = None
        if lang == "python" and i + 1 < len(found):
            nlang, ncode, nstart, _ = found[i + 1]
            if nlang == "text" and not text[end:nstart].strip():
                expected = ncode
        out.append((lang, code, expected))
    return out


def _lines(s: str) -> list[str]:
    return [line.rstrip() for line in s.strip().splitlines()]


# Files a page's code reads, written beside it first (docs/matlab.md reads a script).
FILES = {
    "matlab.md": {"model.m": "layers = [sequenceInputLayer(1)\n"
                             "          selfAttentionLayer(numHeads, 16)\n"
                             "          fullyConnectedLayer(2)];\n"
                             "net = dlnetwork(layers);\n"},
}


@pytest.fixture
def quick_training(monkeypatch, tmp_path):
    matplotlib.use("Agg")
    monkeypatch.chdir(tmp_path)
    real_train = al.train

    def one_epoch(net, X, Y=None, loss="crossentropy", options=None, **kw):
        if options is not None:
            options = options.replace(max_epochs=1, plots="none")
        kw.update(max_epochs=1, verbose=False)
        return real_train(net, X, Y, loss=loss, options=options, **kw)

    monkeypatch.setattr(al, "train", one_epoch)


def test_pages_found():
    names = {p.relative_to(DOCS).as_posix() for p in PAGES}
    for page in ("getting-started.md", "concepts.md", "errors.md", "porting-matlab.md",
                 "porting-trax.md", "saving.md", "attention.md", "tutorials/forecasting.md"):
        assert page in names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(DOCS).as_posix())
def test_page_code_runs(page, quick_training):
    for name, content in FILES.get(page.relative_to(DOCS).as_posix(), {}).items():
        Path(name).write_text(content)
    namespace: dict = {"__name__": "__docs__"}
    for n, (lang, code, expected) in enumerate(blocks(page)):
        if lang != "python":
            continue
        where = f"{page.relative_to(DOCS)} block {n + 1}"
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(code, where, "exec"), namespace)
        if expected is not None:
            assert _lines(printed.getvalue()) == _lines(expected), where


def test_output_check_catches_a_wrong_message(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("```python\nprint('a')\n```\n\n```text\nb\n```\n")
    [(lang, code, expected), _] = blocks(page)
    assert (lang, expected) == ("python", "b\n")


def _docstring_examples():
    import doctest

    import attnlab.layers as layers
    finder = doctest.DocTestFinder(recurse=False)
    return [t for name in layers.__all__ for t in finder.find(getattr(layers, name), name)
            if t.examples]


@pytest.mark.parametrize("example", _docstring_examples(), ids=lambda t: t.name)
def test_layer_docstring_examples_run(example):
    # the Examples sections of the layers' docstrings, rendered in the reference
    import doctest
    out = io.StringIO()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(example, out=out.write)
    assert runner.failures == 0, out.getvalue()


def test_every_layer_docstring_states_its_shape():
    import attnlab.layers as layers
    missing = [name for name in layers.__all__ if isinstance(getattr(layers, name), type)
               and name not in ("Layer",) and "Shape\n" not in (getattr(layers, name).__doc__ or "")]
    assert not missing, missing


def test_every_public_name_is_in_the_api_reference():
    # the strict `make docs` build checks this too, but CI runs `make test` only
    import re
    import attnlab
    import attnlab.layers
    import attnlab.matlab
    rst = "".join(p.read_text() for p in (DOCS / "api").glob("*.rst"))
    listed = set(re.findall(r"^\.\. auto(?:function|class|exception|data):: ([\w.]+)", rst, re.M))
    listed |= {f"attnlab.layers.{n}" for n in re.findall(r"^\.\. data:: (\w+)", rst, re.M)}
    missing = [f"{m.__name__}.{n}" for m in (attnlab, attnlab.layers, attnlab.matlab)
               for n in m.__all__ if f"{m.__name__}.{n}" not in listed and n != "layers"]
    assert not missing, "add them to docs/api/*.rst: " + ", ".join(missing)


def test_the_site_builds_strict(tmp_path):
    """`make docs` in the suite (the docs extra is part of `make test`'s environment): a broken
    reference or a public name without a docstring fails here, not only in a docs build."""
    pytest.importorskip("sphinx")
    pytest.importorskip("myst_parser")
    import subprocess
    import sys
    run = subprocess.run([sys.executable, "-m", "sphinx", "-E", "-W", "--keep-going", "-n", "-q",
                          "-b", "html", "-d", str(tmp_path / "doctrees"), str(DOCS),
                          str(tmp_path / "html")], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
    assert (tmp_path / "html" / "index.html").is_file()
