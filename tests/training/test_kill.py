"""SIGKILL at random moments during `net.save` and during checkpointed training.

Every kill leaves either the old file or the new one (0 corrupt or unreadable files); a resumed
run ends bit-equal to an uninterrupted one; and once a later save or resume has run, no
temporary is left. CI runs a small version (20 kills of an ~8 MB save, 3 of training);
ATTNLAB_SLOW=1 runs the full one (20 kills of a ≥ 50 MB save, 20 of training).
"""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch
from safetensors.torch import load_file

import attnlab as al
from attnlab import layers as L
from attnlab.core.files import remove_stale, stale_temporaries
from attnlab.training import checkpoint as ck

HERE = Path(__file__).resolve()
SLOW = os.environ.get("ATTNLAB_SLOW") == "1"


def _temporaries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".partial"))


def _big_net(mb: float) -> al.Network:
    width = int((mb * 2**20 / 4 / 2) ** 0.5)               # two width×width Dense layers
    torch.manual_seed(0)
    net = al.Network([L.FeatureInput(width, name="in"), L.Dense(width, name="a"),
                      L.Dense(width, name="b")])
    return net.initialize()


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_sigkill_during_save_leaves_the_old_or_the_new_file_and_no_temporaries(tmp_path):
    net = _big_net(56 if SLOW else 8)
    size = sum(t.numel() * t.element_size() for t in net.state_dict().values())
    path = tmp_path / "net.attnlab"
    net.save(path)
    t0 = time.perf_counter()
    net.save(path)
    save_s = time.perf_counter() - t0
    want = net.state_dict()
    rng = random.Random(0)
    left, kills = [], 0
    for i in range(20):
        pid = os.fork()
        if pid == 0:                                     # the child saves until it is killed
            try:
                with torch.no_grad():
                    net.layer_modules["a"].bias.fill_(float(i))   # a new file each time
                while True:
                    net.save(path)
            finally:
                os._exit(1)
        time.sleep(rng.uniform(0, 2.5 * save_s))
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        kills += os.WIFSIGNALED(status)
        left.append(len(_temporaries(tmp_path)))
        got = al.load(path).state_dict()                   # old or new, never torn
        for k in want:
            if k != "layer_modules.a.bias":
                assert torch.equal(got[k], want[k]), f"kill {i}: {k} differs"
    assert kills == 20
    print(f"save of {size / 2**20:.0f} MB ({save_s:.2f} s): 20 kills, 0 corrupt files, "
          f"temporaries left after each kill: {left}")
    net.save(path)                                       # the next save removes the leftovers
    assert _temporaries(tmp_path) == []


def test_a_live_writers_temporary_is_never_removed(tmp_path):
    live = tmp_path / f".f.bin.{os.getpid()}-0123abcd.partial"     # ours: we are alive
    live.write_bytes(b"x")
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    dead = tmp_path / f".f.bin.{pid}-0123abcd.partial"             # a reaped child's: gone
    dead.write_bytes(b"x")
    other = tmp_path / ".g.bin.999999999-0123abcd.partial"         # another file's
    other.write_bytes(b"x")
    assert stale_temporaries(tmp_path, "f.bin") == [dead]
    import fcntl
    with open(dead, "rb") as f:                 # locked: a writer in another pid namespace
        fcntl.flock(f, fcntl.LOCK_EX)
        assert remove_stale(tmp_path, "f.bin") == 0
    assert remove_stale(tmp_path, "f.bin") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, other.name])


# ----------------------------------------------------------------------- training ---

def _env():
    return dict(os.environ, PYTHONPATH=str(HERE.parents[2]), OMP_NUM_THREADS="1",
                MKL_NUM_THREADS="1")


def _train(mode, out, epochs):
    return subprocess.Popen([sys.executable, str(HERE), mode, str(out), str(epochs)], env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_sigkill_during_checkpointed_training_resumes_bit_equal(tmp_path):
    kills_wanted, epochs = (20, 12) if SLOW else (3, 4)
    full = _train("full", tmp_path / "full", epochs)
    out, err = full.communicate(timeout=300)
    assert full.returncode == 0, err
    train_s = float(out.split("TRAINED")[1].split()[0])
    ckdir = tmp_path / "part" / "ckpt"
    rng = random.Random(1)
    kills, attempts, left = 0, 0, []
    while kills < kills_wanted and attempts < 4 * kills_wanted:
        attempts += 1
        proc = _train("resume", tmp_path / "part", epochs)
        assert proc.stdout.readline().startswith("STARTED")
        time.sleep(rng.uniform(0, 2.0 * train_s / kills_wanted))
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=300)
        if proc.returncode != -signal.SIGKILL:
            break                                         # it finished before the kill
        kills += 1
        left.append(len(_temporaries(ckdir)) if ckdir.exists() else 0)
        for p in ck.checkpoints(ckdir):                   # every checkpoint file is readable
            ck.load(p)
    done = _train("resume", tmp_path / "part", epochs)
    _, err = done.communicate(timeout=300)
    assert done.returncode == 0, err
    print(f"training ({train_s:.1f} s): {kills} kills, temporaries after each: {left}")
    assert kills >= min(kills_wanted, 3)
    assert _same(load_file(str(tmp_path / "part" / "weights.safetensors")),
                 load_file(str(tmp_path / "full" / "weights.safetensors")))
    assert _temporaries(ckdir) == []


def _train_main(mode, out, epochs):
    sys.path.insert(0, str(HERE.parents[1]))
    from safetensors.torch import save_file
    from train_worker import resume_case
    print("STARTED", flush=True)
    t0 = time.perf_counter()
    net, _ = resume_case(out, resume=(mode == "resume"), max_epochs=epochs,
                         checkpoint_frequency=2)
    save_file({k: v.contiguous() for k, v in net.state_dict().items()},
              str(Path(out) / "weights.safetensors"))
    print(f"TRAINED {time.perf_counter() - t0:.3f}", flush=True)


if __name__ == "__main__":
    _train_main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
