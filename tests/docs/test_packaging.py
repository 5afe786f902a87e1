"""The package as a user gets it: the wheel and sdist build and pass `twine check`, and the wheel
installed into a fresh virtual environment runs `attnlab --help`, imports, trains, saves, loads.

Offline and fast: the build uses the setuptools already installed (`--no-isolation`), the wheel is
installed with `--no-index`, and the fresh environment sees this environment's torch, numpy, …
through a .pth file (their directory is appended to its path, its own site-packages comes first,
so `attnlab` is the wheel's, never this checkout's editable install). About 15 s on 2 cores.
"""
from __future__ import annotations

import email
import importlib.util
import os
import re
import subprocess
import sys
import sysconfig
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

import attnlab

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(importlib.util.find_spec("build") is None
                                or importlib.util.find_spec("twine") is None,
                                reason="needs the dev extra (build, twine)")

TINY = r"""
import sys, torch, attnlab as al
from attnlab import layers as L
assert "site-packages" in al.__file__ and sys.prefix in al.__file__, al.__file__
net = al.Network([L.SequenceInput(3), L.SelfAttention(1, 4), L.GlobalAvgPool1d(), L.Dense(2)])
X, Y = torch.randn(8, 5, 3), torch.arange(8) % 2
al.train(net, X, Y, loss="crossentropy", max_epochs=1, batch_size=4, verbose=False)
net.save("tiny.attnlab")
net.eval()
again = al.load("tiny.attnlab")
again.eval()
assert torch.allclose(again(X), net(X))
print("ok", al.__version__)
"""


def run(*args, cwd=None, env=None):
    done = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, f"{args}\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    run(sys.executable, "-m", "build", "--no-isolation", "--outdir", out, ROOT)
    return out


def test_wheel_and_sdist_pass_twine_check(dist):
    wheel, = dist.glob("*.whl")
    sdist, = dist.glob("*.tar.gz")
    assert wheel.name == f"attnlab-{attnlab.__version__}-py3-none-any.whl"
    run(sys.executable, "-m", "twine", "check", "--strict", wheel, sdist)
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        meta = email.message_from_bytes(z.read(f"attnlab-{attnlab.__version__}.dist-info/METADATA"))
    assert {"attnlab/py.typed", "attnlab/viz/assets/view.js", "attnlab/io/__init__.py",
            "attnlab/io/loading.py", "attnlab/viz/layout.py"} <= names
    # the repository's tools stay out of the installed package
    assert not [n for n in names if n.startswith("tools/") or n.endswith("/gallery.py")]
    assert any(n.endswith("licenses/LICENSE") for n in names)
    assert meta["Version"] == attnlab.__version__
    assert meta["License-Expression"] == "MIT"
    assert "Typing :: Typed" in meta.get_all("Classifier")
    # no Project-URL: the project has no public address to name (an invented one would mislead);
    # the README points into the sdist instead (next test)
    assert meta.get_all("Project-URL") is None


def test_readme_links_point_into_the_sdist(dist):
    # The README (also the package's long description) links the documentation, changelog and
    # licence by relative paths: each must be a file the source distribution ships.
    sdist, = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as t:
        prefix = f"attnlab-{attnlab.__version__}/"
        shipped = {n[len(prefix):] for n in t.getnames() if n.startswith(prefix)}
    links = {m.split("#")[0] for m in re.findall(r"\]\(([^)\s]+)\)", (ROOT / "README.md").read_text())
             if not re.match(r"[a-z]+:|#", m)}
    assert {"CHANGELOG.md", "LICENSE", "docs/getting-started.md"} <= links
    assert sorted(links - shipped) == []
    assert {"docs/conf.py", "docs/index.md", "docs/api/layers.rst", "Makefile",
            "tools/gallery.py"} <= shipped


def test_wheel_installs_into_a_fresh_venv_and_works(dist, tmp_path):
    wheel, = dist.glob("*.whl")
    env_dir = tmp_path / "fresh"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    site = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip())
    (site / "_attnlab_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    # --ignore-installed: the checkout's editable attnlab is visible through the .pth file; it
    # must be neither taken as "already satisfied" nor uninstalled. The dependencies are there.
    run(sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-index",
        "--disable-pip-version-check", "--no-deps", "--ignore-installed", wheel)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    help_text = run(env_dir / "bin" / "attnlab", "--help", env=env, cwd=tmp_path)
    assert "demo" in help_text and "analyze" in help_text
    assert run(python, "-c", TINY, env=env, cwd=tmp_path).split() == ["ok", attnlab.__version__]
