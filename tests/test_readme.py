"""The README's Python blocks run as written (training shortened to one epoch)."""
import re
from pathlib import Path

import matplotlib
import pytest

import attnlab as al

README = Path(__file__).resolve().parents[1] / "README.md"


def blocks():
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_python_blocks_run(tmp_path, monkeypatch):
    matplotlib.use("Agg")
    monkeypatch.chdir(tmp_path)
    real_train = al.train

    def one_epoch(net, X, Y=None, loss="crossentropy", options=None, **kw):
        if options is not None:
            options = options.replace(max_epochs=1, plots="none")
        kw.update(max_epochs=1, verbose=False)
        return real_train(net, X, Y, loss=loss, options=options, **kw)

    monkeypatch.setattr(al, "train", one_epoch)
    code = blocks()
    assert len(code) >= 6
    namespace = {}
    for block in code:
        exec(compile(block, str(README), "exec"), namespace)
    assert namespace["level"].shape == (52,)          # the forecast block ran to the end
