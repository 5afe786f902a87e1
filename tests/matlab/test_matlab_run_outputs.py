"""A MATLAB script's training writes only inside its folder and never launches processes;
`attnlab analyze/plot/view FILE.m` never train."""
import os
import subprocess
from pathlib import Path

import pytest

import attnlab as al
from attnlab.cli import main
from attnlab.matlab import ScriptError, run_code, run_file

pytest.importorskip("tree_sitter_matlab")

TRAIN = """rng(0);
X = [randn(12, 2) + 2; randn(12, 2) - 2];
Y = categorical([ones(12, 1); 2 * ones(12, 1)], [1 2], {'up', 'down'});
layers = [featureInputLayer(2, Name='in')
          fullyConnectedLayer(2, Name='fc')
          softmaxLayer(Name='sm')];
net = dlnetwork(layers);
options = trainingOptions('adam', MaxEpochs=2, MiniBatchSize=8, Verbose=false, {options});
net = trainnet(X, Y, net, 'crossentropy', options);
"""


def _script(folder: Path, options: str, name: str = "train.m") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(TRAIN.replace("{options}", options))
    return path


def _files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}


@pytest.fixture
def no_launch(monkeypatch):
    """Fails the test if anything tries to start a process."""
    from attnlab.training import distributed

    def launched(*a, **k):
        raise AssertionError(f"a process was launched: {a!r}")
    for name in ("call", "run", "Popen", "check_call", "check_output"):
        monkeypatch.setattr(subprocess, name, launched)
    for name in ("execv", "execve", "execvp", "execvpe", "execl", "execlp", "fork", "spawnv"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, launched)
    monkeypatch.setattr(distributed, "launch", launched)


@pytest.fixture
def no_training(monkeypatch):
    import attnlab.training as T

    def trained(*a, **k):
        raise AssertionError("the script's network was trained")
    monkeypatch.setattr(T, "train", trained)


def test_a_checkpoint_path_outside_the_folder_is_refused_where_it_is_written(tmp_path):
    here = tmp_path / "work"
    path = _script(here, "CheckpointPath='../elsewhere'")
    with pytest.raises(ScriptError) as e:
        run_file(path)
    msg = str(e.value)
    assert msg.startswith("train.m:8:11: trainingOptions: CheckpointPath '../elsewhere' is "
                          "outside the folder this script may write to")
    assert f"'{here.resolve()}'" in msg and str((tmp_path / "elsewhere").resolve()) in msg
    assert "out_dir" in msg
    assert not (tmp_path / "elsewhere").exists() and _files(here) == {"train.m"}


def test_absolute_paths_and_symlinks_out_of_the_folder_are_refused(tmp_path):
    here, outside = tmp_path / "work", tmp_path / "outside"
    outside.mkdir()
    (here / "ok").mkdir(parents=True)
    (here / "link").symlink_to(outside, target_is_directory=True)
    for option in (f"CheckpointPath='{outside / 'ck'}'", "CheckpointPath='link/ck'",
                   "CheckpointPath='ok/../../outside'"):
        path = _script(here, option)
        with pytest.raises(ScriptError, match=r"train\.m:8:11: .*CheckpointPath .*outside the "
                                              r"folder"):
            run_file(path)
    assert list(outside.iterdir()) == []


def test_training_writes_inside_the_script_folder_by_default(tmp_path, monkeypatch, no_launch):
    here, cwd = tmp_path / "work", tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    path = _script(here, "CheckpointPath='ck', Plots='training-progress'")
    ws = run_file(path, out=lambda *a, **k: None)
    assert ws["net"].training_info is not None
    assert "ck/training-progress.png" in _files(here)
    assert any(f.startswith("ck/checkpoint-") for f in _files(here))
    assert _files(cwd) == set()
    # plots without a checkpoint folder: beside the script, not in the current folder
    path = _script(here, "Plots='training-progress'", name="plots.m")
    run_file(path, out=lambda *a, **k: None)
    assert (here / "training-progress.png").read_bytes()[:4] == b"\x89PNG"
    assert _files(cwd) == set()


def test_out_dir_chooses_the_folder(tmp_path, no_launch):
    here, results = tmp_path / "work", tmp_path / "results"
    path = _script(here, "CheckpointPath='ck', Plots='training-progress'")
    run_file(path, out_dir=results, out=lambda *a, **k: None)
    assert "ck/training-progress.png" in _files(results) and _files(here) == {"train.m"}
    with pytest.raises(ScriptError, match=r"CheckpointPath '.*results/ck' is outside the folder "
                       r"this script may write to, '.*work/x'"):
        run_file(_script(here, f"CheckpointPath='{results / 'ck'}'"), out_dir=here / "x")
    (tmp_path / "afile").write_text("")
    with pytest.raises(al.ArgumentError, match=r"run_file out_dir: '.*afile' is a file"):
        run_file(path, out_dir=tmp_path / "afile")


def test_run_code_writes_inside_the_current_folder(tmp_path, monkeypatch, no_launch):
    monkeypatch.chdir(tmp_path)
    code = TRAIN.replace("{options}", "CheckpointPath='../up'")
    with pytest.raises(ScriptError, match=r"<script>:8:11: trainingOptions: CheckpointPath "
                                          r"'\.\./up' is outside"):
        run_code(code)
    run_code(TRAIN.replace("{options}", "CheckpointPath='ck'"))
    assert any(f.startswith("ck/checkpoint-") for f in _files(tmp_path))


def test_options_made_in_python_are_checked_too(tmp_path, no_launch):
    here = tmp_path / "work"
    here.mkdir()
    path = here / "t.m"
    path.write_text(TRAIN.split("options =")[0] + "net = trainnet(X, Y, net, 'crossentropy', opts);\n")
    opts = al.TrainingOptions(solver="adam", max_epochs=1, verbose=False,
                              checkpoint_dir=str(tmp_path / "outside"))
    with pytest.raises(ScriptError, match=r"t\.m:8:7: trainnet: CheckpointPath .*outside"):
        run_file(path, {"opts": opts})
    assert not (tmp_path / "outside").exists()


@pytest.mark.parametrize("env", ["parallel", "multi-gpu"])
def test_parallel_trains_in_this_process_with_a_note(tmp_path, no_launch, env):
    import torch
    if env == "multi-gpu" and torch.cuda.device_count() == 0:
        path = _script(tmp_path, f"ExecutionEnvironment='{env}'")
        with pytest.raises(ScriptError, match="multi-gpu.* needs CUDA GPUs"):
            run_file(path, out=lambda *a, **k: None)
        return
    printed = []
    path = _script(tmp_path, f"ExecutionEnvironment='{env}'")
    ws = run_file(path, out=lambda *a, **k: printed.append(a[0]))
    assert ws["net"].training_info is not None
    note = [p for p in printed if p.startswith("note:")]
    assert len(note) == 1 and f'ExecutionEnvironment="{env}" trains in this process' in note[0]
    assert "run_file never starts processes" in note[0]


@pytest.mark.parametrize("command", ["analyze", "plot", "view"])
def test_the_cli_never_trains_a_script(tmp_path, capsys, monkeypatch, no_launch, no_training,
                                       command):
    here = tmp_path / "work"
    _script(here, "CheckpointPath='../elsewhere', Plots='training-progress', "
                  "ExecutionEnvironment='parallel'")
    monkeypatch.chdir(here)
    assert main([command, "train.m"]) == 0
    out = capsys.readouterr().out
    assert "train.m:9: skipped: trainnet" in out
    assert "CheckpointPath '../elsewhere' is outside" in out and "run_file would refuse it" in out
    written = {"analyze": set(), "plot": {"train.png"}, "view": {"train.html"}}[command]
    assert _files(here) == {"train.m"} | written
    assert not (tmp_path / "elsewhere").exists()
    if command == "view":                        # the page shows the network the script built
        page = (here / "train.html").read_text()
        assert "featureInputLayer" in page or "FeatureInput" in page
        assert '"fc"' in page and '"sm"' in page


def test_an_empty_checkpoint_path_means_none(tmp_path):
    ws = run_code("o = trainingOptions('adam', CheckpointPath='');", out_dir=tmp_path)
    assert ws["o"].checkpoint_dir is None
