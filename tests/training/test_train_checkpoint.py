"""Checkpoints (atomic, no pickle), exact resume — in process and after SIGKILL — and
DistributedDataParallel under torchrun."""
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file

import attnlab as al
from attnlab.training import checkpoint as ck
from helpers import run_in_group, worker_env
from train_worker import ddp_case, ddp_dataset_case, lstm_classifier, resume_case, separable

WORKER = Path(__file__).resolve().parents[1] / "train_worker.py"


def _same(a: dict, b: dict):
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


# ------------------------------------------------------------------------ files ---

def test_atomic_write_leaves_old_files_intact_on_a_crash(tmp_path, monkeypatch):
    ck.atomic_write(tmp_path / "f.bin", b"old")

    def crash(src, dst):
        raise OSError("disk full")
    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        ck.atomic_write(tmp_path / "f.bin", b"new")
    assert (tmp_path / "f.bin").read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.bin"]        # no partial file left


def test_checkpoints_are_safetensors_with_json_and_keep_the_newest(tmp_path, one_thread):
    x, y = separable(40)
    info = al.train(lstm_classifier(), x, list(map(str, y.tolist())), solver="adam", max_epochs=4,
                    batch_size=10, checkpoint_dir=str(tmp_path), verbose=False)
    files = ck.checkpoints(tmp_path)
    assert [f.name for f in files] == ["checkpoint-000000012.safetensors",
                                       "checkpoint-000000016.safetensors"]
    assert info.checkpoint == str(files[-1])
    with safe_open(str(files[-1]), framework="pt") as f:           # plain safetensors, no pickle
        keys = set(f.keys())
        meta = json.loads(f.metadata()[ck.META_KEY])
    assert {"rng/torch", "rng/data", "epoch/order", "epoch/starts"} <= keys
    assert any(k.startswith("optimizer/") and k.endswith("exp_avg") for k in keys)
    assert any(k.startswith("net/") for k in keys)
    assert meta["position"] == {"epoch": 4, "batch": 0, "iteration": 16, "stop_reason": ""}
    assert meta["metadata"]["class_labels"] == ["0", "1", "2"]
    assert meta["optimizer"]["param_groups"][0]["lr"] == 0.001
    assert b"pickle" not in files[-1].read_bytes()[:200]


def test_an_unreadable_newest_checkpoint_falls_back_to_the_previous(tmp_path):
    ck.save(tmp_path, 1, {"a": torch.ones(2)}, {"version": 1})
    ck.save(tmp_path, 2, {"a": torch.zeros(2)}, {"version": 1})
    ck.path_for(tmp_path, 2).write_bytes(b"\x00garbage")
    tensors, meta, path = ck.load_latest(tmp_path)
    assert path.name == "checkpoint-000000001.safetensors" and tensors["a"].tolist() == [1, 1]


def test_resume_with_another_network_is_refused(tmp_path, one_thread):
    x, y = separable(20)
    al.train(lstm_classifier(), x, y, max_epochs=1, batch_size=10, checkpoint_dir=str(tmp_path),
             verbose=False)
    other = al.Network([al.layers.SequenceInput(6), al.layers.LSTM(5, output_mode="last"),
                        al.layers.Dense(3)])
    with pytest.raises(al.TrainingError, match="another network.*lstm"):
        al.train(other, x, y, max_epochs=2, batch_size=10, checkpoint_dir=str(tmp_path),
                 resume=True, verbose=False)


# ----------------------------------------------------------------------- resume ---

def test_stop_and_resume_in_process_continues_exactly(tmp_path, one_thread):
    full, full_info = resume_case(tmp_path / "full")
    stopped, info = resume_case(tmp_path / "part", output_fn=lambda s: s.iteration == 7)
    assert info.stop_reason == "output-function" and info.iterations["iteration"][-1] == 7
    resumed, info2 = resume_case(tmp_path / "part", resume=True)
    _same(resumed.state_dict(), full.state_dict())
    assert info2.iterations == full_info.iterations                 # the history continues too
    assert info2.validation == full_info.validation
    # resuming a finished run does nothing more
    again, info3 = resume_case(tmp_path / "part", resume=True)
    _same(again.state_dict(), full.state_dict())
    assert info3.iterations == full_info.iterations


def test_sigkill_mid_training_then_resume_is_bit_identical(tmp_path, one_thread):
    killed = subprocess.run([sys.executable, str(WORKER), "kill", str(tmp_path)], env=worker_env(),
                            capture_output=True, text=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    names = [p.name for p in ck.checkpoints(tmp_path / "ckpt")]
    assert names == ["checkpoint-000000004.safetensors", "checkpoint-000000008.safetensors"]
    resumed = subprocess.run([sys.executable, str(WORKER), "resume", str(tmp_path)], env=worker_env(),
                             capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    full, _ = resume_case(tmp_path / "uninterrupted")              # here, same seed, one thread
    _same(load_file(str(tmp_path / "weights-resume.safetensors")), dict(full.state_dict()))


# -------------------------------------------------------------------------- DDP ---

def test_torchrun_two_processes_match_one_process(tmp_path, one_thread):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           str(WORKER), "ddp", str(tmp_path)]
    run = run_in_group(cmd, timeout=240)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    ddp = load_file(str(tmp_path / "weights-ddp.safetensors"))
    net, info = ddp_case()
    one = net.state_dict()
    assert ddp.keys() == one.keys()
    for k in one:
        torch.testing.assert_close(ddp[k], one[k], atol=1e-5, rtol=0)
    ddp_loss = json.loads((tmp_path / "ddp-loss.json").read_text())  # reduced across processes
    assert ddp_loss == pytest.approx(info.iterations["loss"], abs=1e-5)
    # the Dataset path: per-process batches collated apart, validation parts of unequal size
    ddp = load_file(str(tmp_path / "weights-ddp-dataset.safetensors"))
    net, info = ddp_dataset_case()
    for k, v in net.state_dict().items():
        torch.testing.assert_close(ddp[k], v, atol=1e-5, rtol=0)
    val = json.loads((tmp_path / "ddp-validation.json").read_text())
    assert val["iteration"] == info.validation["iteration"]
    assert val["loss"] == pytest.approx(info.validation["loss"], abs=1e-5)
    assert val["accuracy"] == pytest.approx(info.validation["accuracy"], abs=1e-6)


def test_resume_with_another_solver_names_the_option(tmp_path):
    import attnlab as al
    from attnlab import layers as L
    X, Y = torch.randn(32, 3), torch.randint(0, 2, (32,))
    def opts(**k):
        return al.TrainingOptions(max_epochs=2, plots=None, verbose=False, seed=1,
                                  checkpoint_dir=tmp_path / "ck", **k)
    al.train(al.Network([L.FeatureInput(3), L.Dense(2)]), X, Y, options=opts())
    with pytest.raises(al.TrainingError) as e:
        al.train(al.Network([L.FeatureInput(3), L.Dense(2)]), X, Y,
                 options=opts(solver="adam", resume=True))
    assert "solver 'sgdm' then, 'adam' now" in str(e.value) and "max_epochs may grow" in str(e.value)


def test_a_checkpoint_folder_that_cannot_be_made_stops_before_training(tmp_path):
    import attnlab as al
    from attnlab import layers as L
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(al.ArgumentError) as e:
        al.train(al.Network([L.FeatureInput(3), L.Dense(2)]), torch.randn(8, 3),
                 torch.randint(0, 2, (8,)),
                 options=al.TrainingOptions(max_epochs=1, plots=None, verbose=False,
                                            checkpoint_dir=blocker / "ck"))
    assert "checkpoint_dir" in str(e.value) and "cannot create the folder" in str(e.value)
