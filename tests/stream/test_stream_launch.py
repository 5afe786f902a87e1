"""`attnlab.training.distributed.launch`: a script re-runs itself under torchrun (MATLAB's
ExecutionEnvironment="multi-gpu"/"parallel"); the DDP equivalence of training itself is tested in
test_train_checkpoint.py."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from attnlab.core.errors import ArgumentError, TrainingError
from attnlab.training.distributed import launch

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import json, os, sys
sys.path.insert(0, {root!r})
import torch
from attnlab.training.distributed import launch, setup
launch(2)
d = setup()
t = torch.tensor([d.rank + 1.0])
d.sum_(t)
open(os.path.join({out!r}, f"rank{{d.rank}}.json"), "w").write(json.dumps(
    {{"world": d.world, "sum": float(t[0]), "args": sys.argv[1:]}}))
"""


def test_launch_reruns_the_script_under_torchrun_with_gloo(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(SCRIPT.format(root=str(ROOT), out=str(tmp_path)))
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "TORCHELASTIC_RUN_ID")}
    env["OMP_NUM_THREADS"] = "1"
    run = subprocess.run([sys.executable, str(script), "--flag", "x"], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    for rank in (0, 1):
        got = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert got == {"world": 2, "sum": 3.0, "args": ["--flag", "x"]}   # all-reduced


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "cpu"])
def test_launch_nproc_is_checked(bad, monkeypatch):
    with pytest.raises(ArgumentError, match="launch nproc") as e:
        launch(bad)
    assert repr(bad) in str(e.value)


def test_launch_gpu_without_gpus_and_from_no_script_are_attnlab_errors(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    monkeypatch.setattr("torch.cuda.device_count", lambda: 0)
    with pytest.raises(TrainingError, match="no CUDA GPU.*launch\\(2\\)"):
        launch("gpu")
    with pytest.raises(TrainingError, match="'-c'.*torch.distributed.run"):
        launch(2, ["-c"])
    assert launch(1) is None                               # one process: nothing to launch
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert launch(2) is None                               # inside a worker: go on
