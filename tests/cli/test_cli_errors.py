"""Bad command-line arguments: every one is a single `error: …` line on stderr and exit status
2, never a Python traceback, and nothing is written."""
import os
import sys

import pytest

import attnlab as al
from attnlab import layers as L
from attnlab.cli import main

SCRIPT = """layers = [featureInputLayer(4, Name='in')
          fullyConnectedLayer(2, Name='fc')];
net = dlnetwork(layers);
"""


@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    net = tmp_path / "n.attnlab"
    al.Network([L.SequenceInput(3, name="in"), L.Dense(2, name="fc")]).save(net)
    script = tmp_path / "s.m"
    script.write_text(SCRIPT)
    (tmp_path / "plain.txt").write_text("not a folder")
    (tmp_path / "folder").mkdir()
    return tmp_path


def _error(capsys, argv, *words):
    """Runs the CLI in-process: exit 2, stderr one `error:` line naming `words`."""
    rc = main(argv)
    captured = capsys.readouterr()
    err = captured.err
    assert rc == 2, (argv, captured.out, err)
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    for word in words:
        assert word in err, (word, err)
    return err


@pytest.mark.parametrize("argv, words", [
    (["view", "n.attnlab", "--serve", "--port", "70000", "--no-browser"],
     ["--port", "0…65535", "70000"]),
    (["view", "n.attnlab", "--serve", "--port", "-1", "--no-browser"], ["--port", "-1"]),
    (["view", "n.attnlab", "--serve", "--timeout", "0", "--no-browser"],
     ["--timeout", "positive", "received 0"]),
    (["view", "n.attnlab", "--serve", "--timeout", "-5", "--no-browser"],
     ["--timeout", "received -5"]),
    (["view", "n.attnlab", "--serve", "--timeout", "nan", "--no-browser"], ["--timeout", "nan"]),
    (["analyze", "n.attnlab", "--width", "0"], ["--width", "received 0"]),
    (["plot", "n.attnlab", "--dpi", "0"], ["--dpi", "received 0"]),
    (["plot", "n.attnlab", "--dpi", "-3"], ["--dpi", "received -3"]),
])
def test_out_of_range_numbers(files, capsys, argv, words):
    _error(capsys, argv, *words)


@pytest.mark.parametrize("command", ["analyze", "plot", "view"])
def test_missing_files_folders_and_devices_as_FILE(files, capsys, command):
    _error(capsys, [command, "missing.attnlab"], "no such file", "missing.attnlab")
    _error(capsys, [command, "missing.m"], "no such file", "missing.m")
    _error(capsys, [command, "/dev/null"], "/dev/null", "not a regular file")
    if command == "view":                    # a folder is a demo's output folder, or refused
        _error(capsys, [command, "folder"], "folder", "not a demo output folder")
    else:
        _error(capsys, [command, "folder"], "'folder' is a folder", "net.save()")
    (files / "dir.m").mkdir()
    _error(capsys, [command, "dir.m"], "'dir.m' is a folder")
    (files / "garbage.attnlab").write_bytes(b"\x80\x04garbage")
    _error(capsys, [command, "garbage.attnlab"], "cannot load")


def test_view_output_that_cannot_be_written(files, capsys, monkeypatch):
    _error(capsys, ["view", "n.attnlab", "-o", "/dev/full"], "view -o", "/dev/full",
           "not a regular file")
    _error(capsys, ["view", "n.attnlab", "-o", "nodir/x.html"], "view -o", "nodir",
           "does not exist")
    _error(capsys, ["view", "n.attnlab", "-o", "folder"], "view -o", "'folder' is a folder")
    _error(capsys, ["view", "s.m", "-o", "x.txt"], "view -o", "'.txt'", ".html")

    import attnlab.core.files as F

    def full(path, data):
        raise OSError(28, "No space left on device", str(path))
    monkeypatch.setattr(F, "atomic_write", full)
    _error(capsys, ["view", "n.attnlab", "-o", "page.html"], "view -o", "page.html",
           "No space left on device")
    assert not (files / "page.html").exists()


@pytest.mark.parametrize("source", ["n.attnlab", "s.m"])
def test_plot_outputs(files, capsys, source):
    _error(capsys, ["plot", source, "-o", "nodir/x.png"], "plot -o", "nodir", "does not exist")
    _error(capsys, ["plot", source, "-o", "/dev/null"], "plot -o", "/dev/null",
           "not a regular file")
    _error(capsys, ["plot", source, "-o", "folder"], "plot -o", "'folder' is a folder",
           "folder/net.png")
    _error(capsys, ["plot", source, "-o", "x.bmpx"], "'.bmpx'", ".png")
    assert sorted(p.name for p in (files / "folder").iterdir()) == []
    assert not (files / "x.bmpx").exists() and not (files / "nodir").exists()


@pytest.mark.parametrize("source", ["n.attnlab", "s.m"])
def test_plot_without_an_extension_writes_the_png_it_reports(files, capsys, source):
    assert main(["plot", source, "-o", "picture"]) == 0
    out = capsys.readouterr().out
    assert out.strip().splitlines()[-1] == "wrote picture.png"
    assert (files / "picture.png").read_bytes()[:4] == b"\x89PNG"
    assert not (files / "picture").exists()


def test_demo_out_that_is_not_a_folder(files, capsys, monkeypatch):
    from attnlab.cli.demos import seeds

    def must_not_run(*a, **k):
        raise AssertionError("the demo ran despite a bad --out")
    monkeypatch.setattr(seeds, "run", must_not_run)
    _error(capsys, ["demo", "seed1", "--out", "/dev/full"], "--out", "/dev/full", "not a folder")
    _error(capsys, ["demo", "seed1", "--out", "plain.txt"], "--out", "plain.txt", "not a folder")
    _error(capsys, ["demo", "seed1", "--out", "plain.txt/deeper"], "--out", "plain.txt",
           "not a folder")
    assert (files / "plain.txt").read_text() == "not a folder"


def test_demo_that_cannot_write_its_outputs(files, capsys, monkeypatch):
    from attnlab.cli.demos import seeds

    def disk_full(module, name, out, **kw):
        raise OSError(28, "No space left on device", str(out / "model.attnlab"))
    monkeypatch.setattr(seeds, "run", disk_full)
    _error(capsys, ["demo", "seed1", "--out", "out"], "demo seed1", "No space left on device",
           "model.attnlab")


def test_bad_sample_and_import(files, capsys, monkeypatch):
    _error(capsys, ["view", "n.attnlab", "--input", "missing.npy"], "--input", "missing.npy")
    _error(capsys, ["view", "n.attnlab", "--input", "folder"], "--input", "'folder'",
           "not a regular file")
    (files / "broken_mod_xyz.py").write_text("raise RuntimeError('half-written module')\n")
    monkeypatch.syspath_prepend(str(files))
    for command in ("analyze", "plot", "view"):
        _error(capsys, [command, "n.attnlab", "--import", "broken_mod_xyz"],
               "--import broken_mod_xyz", "RuntimeError", "half-written module")
        _error(capsys, [command, "s.m", "--import", "no_such_module_xyz"],
               "--import no_such_module_xyz")
    sys.modules.pop("broken_mod_xyz", None)


def test_set_on_a_saved_network_is_refused_by_view_too(files, capsys):
    _error(capsys, ["view", "n.attnlab", "--set", "x=1"], "--set", "MATLAB script", "n.attnlab")
    err = _error(capsys, ["analyze", "s.m", "--set", "x"], "--set", "NAME=VALUE", "'x'")
    assert ":0:0:" not in err
    err = _error(capsys, ["view", "s.m", "--set", "a=[1 2"], "--set a:", "not a MATLAB value",
                 "--set a='\"adam\"'")
    assert ":0:0:" not in err


def test_unreadable_file(files, capsys):
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        pytest.skip("root reads every file")
    (files / "n.attnlab").chmod(0)
    try:
        _error(capsys, ["analyze", "n.attnlab"], "permission denied", "n.attnlab")
    finally:
        (files / "n.attnlab").chmod(0o644)


def test_broken_links_and_empty_names_as_outputs(files, capsys):
    (files / "gone.png").symlink_to(files / "nowhere" / "x.png")
    (files / "gone.html").symlink_to(files / "nowhere" / "x.html")
    _error(capsys, ["plot", "n.attnlab", "-o", "gone.png"], "plot -o", "gone.png",
           "broken symbolic link")
    _error(capsys, ["view", "n.attnlab", "-o", "gone.html"], "view -o", "gone.html",
           "broken symbolic link")
    _error(capsys, ["plot", "n.attnlab", "-o", ""], "plot -o", "'.' is a folder")
    _error(capsys, ["view", "n.attnlab", "-o", ""], "view -o", "'.' is a folder")
    assert not (files / "nowhere").exists()


def test_a_file_that_fails_while_read_is_named(files, capsys, monkeypatch):
    import attnlab.io as io

    def broken_disk(path, *a, **k):
        raise OSError(5, "Input/output error")
    monkeypatch.setattr(io, "load", broken_disk)
    _error(capsys, ["analyze", "n.attnlab"], "'n.attnlab'", "Input/output error")
