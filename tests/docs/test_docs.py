"""Every code block of the documentation runs (docs/**/*.md), and printed examples match.

The blocks of one page run in order in one namespace, in a temporary folder, with training
shortened to one epoch and no progress plots (the pages say how long to train; the test checks
that the code is right, not how well it learns). A Python block followed directly by a ``text``
block must print exactly that text (the error catalogue's messages are checked this way); other
text blocks are illustrations, listed below. ``sh`` lines run through the CLI on the files the
page made or ships; the few that cannot run here are listed with the reason. A ``matlab``
block that names its file (``% model.m: …``) is written as that file for the blocks after it
(and equals the file shipped beside the page); any other runs through ``run_code``. How a page
is read: tests/doc_blocks.py.
"""
from __future__ import annotations

import contextlib
import io
from pathlib import Path

import matplotlib
import pytest

import attnlab as al
from doc_blocks import fences, lines, matlab_file, run_shell_line, ship, shell_commands, \
    unexplained_text_blocks

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts)

# shell lines that do not run in the tests, and why
NOT_RUN = {
    "make demo": "trains the digits demo for about a minute (tests/docs/test_demos.py runs every demo "
                 "for one epoch)",
    "make test": "runs this suite",
    "attnlab view model.attnlab --serve": "serves the page until Ctrl-C (tests/viz/test_view.py "
                                          "serves one with a timeout)",
    "torchrun": "starts several training processes, on GPUs or several machines "
                "(tests/training/test_fsdp.py runs two under torch.distributed.run)",
}

# text blocks that are no code's output: (page, first words) → what they are
ILLUSTRATIONS = {
    ("attention.md", "E = mha.embed_dim"): "the assignments to and from nn.MultiheadAttention "
                                           "(tests/functional/test_functional_attention.py does them)",
    ("attention.md", "top-left"): "the two causal masks for Tq=2, Tk=4 "
                                  "(tests/functional/test_functional_attention.py checks both alignments)",
    ("tutorials/fine-tuning.md", "rank 1: loss"): "what two processes under torchrun printed "
                                                "(tests/training/test_fsdp.py runs two)",
}


def blocks(page: Path) -> list[tuple[str, str, str | None]]:
    """(language, code, expected output) for each fenced block of a page, in order."""
    return [(b.lang, b.code, b.expected) for b in fences(page.read_text(encoding="utf-8"))]


def _roman_demo_folder(folder: Path) -> None:
    """What `attnlab demo roman --out demo-out` leaves for `attnlab view` (model.attnlab and
    sample.npz), with an untrained network of the demo's architecture: training takes a minute."""
    from attnlab.cli.demos import roman
    data = al.datasets.roman_numerals()
    vocab = roman.Vocab(data)
    folder.mkdir(parents=True)
    net = roman.build_network(source_vocab=len(vocab.source), target_vocab=len(vocab.target_chars))
    net.initialize()
    net.save(folder / "model.attnlab")
    roman.save_sample(folder, vocab, data)


# what a page's commands read that only a long run makes
SETUP = {"view.md": lambda: _roman_demo_folder(Path("demo-out") / "roman")}


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
                 "porting-trax.md", "saving.md", "attention.md", "tutorials/forecasting.md",
                 "matlab.md", "view.md"):
        assert page in names


@pytest.fixture
def own_layer_types():
    """A page may define layer types of its own (docs/writing-layers.md does): they leave the
    layer registry with the page, as they would with the reader's program."""
    from attnlab.layers.base import LAYER_TYPES
    before = dict(LAYER_TYPES)
    yield
    LAYER_TYPES.clear()
    LAYER_TYPES.update(before)


@pytest.fixture
def own_families():
    """A page may register model families (docs/transformers.md registers one): they leave
    with the page, as they would with the reader's program."""
    from attnlab.pretrained import FAMILIES
    before = dict(FAMILIES)
    yield
    FAMILIES.clear()
    FAMILIES.update(before)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(DOCS).as_posix())
def test_page_code_runs(page, quick_training, own_layer_types, own_families):
    rel = page.relative_to(DOCS).as_posix()
    if rel in SETUP:
        SETUP[rel]()
    namespace: dict = {"__name__": "__docs__"}
    page_blocks = fences(page.read_text(encoding="utf-8"))
    for n, b in enumerate(page_blocks):
        where = f"{rel} line {b.line}"
        if b.lang == "python":
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                exec(compile(b.code, where, "exec"), namespace)
            if b.expected is not None:
                assert lines(printed.getvalue()) == lines(b.expected), where
        elif b.lang == "matlab":
            name = matlab_file(b.code)
            if name is not None:                 # the page's file: the blocks after it use it
                ship(Path(name), b.code, page.parent)
                assert any(name in later.code for later in page_blocks[n + 1:]), (
                    f"{where}: the page shows {name} but no block after it uses it")
            else:
                from attnlab.matlab import run_code
                run_code(b.code, out=lambda s: None)
        elif b.lang == "sh":
            for line in shell_commands(b.code):
                result = run_shell_line(line, NOT_RUN)
                if result is not None:
                    status, output = result
                    assert status == 0, f"{where}: {line} exited {status}\n{output}"
        else:
            assert b.lang in ("text", "directive"), (
                f"{where}: label the block (python, text, sh or matlab)")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(DOCS).as_posix())
def test_every_text_block_is_an_output_or_an_illustration(page):
    rel = page.relative_to(DOCS).as_posix()
    listed = [start for (name, start) in ILLUSTRATIONS if name == rel]
    unchecked = unexplained_text_blocks(fences(page.read_text(encoding="utf-8")),
                                        lambda code: any(code.startswith(s) for s in listed))
    assert not unchecked, (f"{rel} lines {unchecked}: a text block that is no Python block's "
                           "output; put it right after the code that prints it, or list it in "
                           "ILLUSTRATIONS with what it is")


def test_the_errors_page_names_its_one_torch_error():
    # docs/errors.md: load_state_dict with another network's keys is torch's RuntimeError;
    # sizes that do not fit are attnlab's SizeError
    import torch
    from attnlab import layers as L
    net = al.Network([L.FeatureInput(3), L.Dense(2, name="fc")])
    net.initialize()
    with pytest.raises(RuntimeError, match="Missing key") as e:
        net.load_state_dict({"other.weight": torch.zeros(2, 3)})
    assert not isinstance(e.value, al.AttnlabError)
    state = net.state_dict()
    state[next(iter(state))] = torch.zeros(5, 5)
    with pytest.raises(al.SizeError, match="fc"):
        net.load_state_dict(state)


def test_output_check_catches_a_wrong_message(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("```python\nprint('a')\n```\n\n```text\nb\n```\n")
    [(lang, code, expected), _] = blocks(page)
    assert (lang, expected) == ("python", "b\n")


def test_shell_lines_outside_attnlab_are_listed_or_fail():
    with pytest.raises(AssertionError, match="NOT_RUN"):
        run_shell_line("rm -rf build", NOT_RUN)
    assert run_shell_line("make demo   # trains", NOT_RUN) is None


def test_the_shipped_matlab_script_is_the_one_the_page_shows(tmp_path):
    [shown] = [b.code for b in fences((DOCS / "matlab.md").read_text(encoding="utf-8"))
               if b.lang == "matlab" and matlab_file(b.code) == "model.m"]
    ship(tmp_path / "model.m", shown, DOCS)        # raises when docs/model.m differs
    with pytest.raises(AssertionError, match="differs"):
        ship(tmp_path / "model.m", shown + "% changed\n", DOCS)


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
