"""TrainingOptions(strategy="fsdp"): torch's fully_shard under torchrun, one unit per block —
the same weights as one process, about 1/N of the parameters and optimizer state in each
process, sharded checkpoints that resume exactly, a plain network after training; and the
gradient sync of accumulation (DDP's no_sync)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import attnlab as al
from attnlab.training import distributed as dd
from attnlab.training import fsdp
from fsdp_worker import accumulation_case, blocks_case, blocks_data, blocks_net, gpt2_case
from helpers import run_in_group
from pretrained_helpers import tiny_gpt2

WORKER = Path(__file__).resolve().parents[1] / "fsdp_worker.py"

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    pytest.importorskip("transformers")
    return tiny_gpt2(tmp_path_factory.mktemp("gpt2"), 32, resid_pdrop=0.0, embd_pdrop=0.0,
                     attn_pdrop=0.0)[1]


def _torchrun(*args, timeout=120) -> subprocess.CompletedProcess:
    """2 processes of the worker, killed together on a timeout."""
    return run_in_group([sys.executable, "-m", "torch.distributed.run", "--standalone",
                         "--nproc_per_node=2", WORKER, *args], timeout)


def _close(a: dict, b: dict, tol: float):
    assert a.keys() == b.keys()
    for k in a:
        assert torch.allclose(a[k], b[k], atol=tol, rtol=0), (k, (a[k] - b[k]).abs().max())


# ----------------------------------------------------------------------- options ---

def test_a_strategy_other_than_ddp_or_fsdp_is_refused():
    with pytest.raises(al.ArgumentError, match="strategy must be one of 'ddp', 'fsdp'.*'fdsp'"):
        al.TrainingOptions(strategy="fdsp")
    with pytest.raises(al.ArgumentError, match="strategy must be one of"):
        al.TrainingOptions(strategy=None)
    assert al.TrainingOptions().strategy == "ddp"


def test_fsdp_in_one_process_trains_as_usual():
    ddp, info_ddp = blocks_case(strategy="ddp")
    one, info = blocks_case()
    assert info.iterations["loss"] == info_ddp.iterations["loss"]
    _close(one.state_dict(), ddp.state_dict(), 0)


def test_the_units_are_the_blocks(gpt2):
    net = blocks_net()
    mods = net.layer_modules
    assert fsdp.units(net) == [[mods["enc0"]], [mods["enc1"]]]
    lm = al.from_pretrained(gpt2)
    got = fsdp.units(lm)
    assert len(got) == 2
    names = {id(m): n for n, m in lm.layer_modules.items()}
    h0 = [names[id(m)] for m in got[0]]
    assert h0 and all(n.startswith("h.0.") for n in h0) and "h.0.attn" in h0
    # the tied embedding and head stay in the root, together
    inside = {id(p) for ms in got for m in ms for p in m.parameters()}
    assert id(lm.learnables["wte/weight"]) not in inside


def test_a_block_that_shares_a_learnable_is_left_to_the_root():
    net = blocks_net()
    mods = net.layer_modules
    # tie the second block's output projection to the first one's
    mods["enc1"].layer_modules["self_attn"].output.weight = \
        mods["enc0"].layer_modules["self_attn"].output.weight
    assert fsdp.units(net) == []


# ----------------------------------------------------------------- accumulation ---

def test_micro_batches_before_the_last_of_a_group_skip_the_gradient_sync(monkeypatch):
    flags = []
    real = dd.gradient_sync

    def spy(module, sync):
        flags.append(sync)
        return real(module, sync)
    monkeypatch.setattr(dd, "gradient_sync", spy)
    accumulation_case(batch_size=8, steps=2)        # 5 micro-batches an epoch: 2 + 2 + 1
    assert flags == [False, True, False, True, True] * 2


# ------------------------------------------------------------- two processes ---

def test_two_processes_match_one_and_hold_half_each(tmp_path):
    run = _torchrun("blocks", tmp_path)
    assert run.returncode == 0, run.stderr[-4000:]
    one, info = blocks_case()
    full = one.state_dict()
    _close(load_file(str(tmp_path / "weights-blocks.safetensors")), full, 1e-5)
    assert json.loads((tmp_path / "blocks-loss.json").read_text()) == \
        pytest.approx(info.iterations["loss"], abs=1e-5)
    assert json.loads((tmp_path / "blocks-validation.json").read_text()) == \
        pytest.approx(info.validation["loss"], abs=1e-5)
    # each process held its half of the parameters and of the optimizer state
    for r in (0, 1):
        share = json.loads((tmp_path / f"shares-{r}.json").read_text())
        assert share["dtensors"]
        assert share["full_numel"] == sum(p.numel() for p in one.parameters())
        assert share["local_numel"] <= 0.6 * share["full_numel"], share
        assert share["local_bytes"] <= 0.6 * share["full_bytes"], share
    # after training: a plain network in every process, saved by rank 0 alone
    x, _ = blocks_data()
    want = one.predict(x[:4])
    for r in (0, 1):
        got = torch.tensor(json.loads((tmp_path / f"predict-{r}.json").read_text()))
        assert torch.allclose(got, want, atol=1e-5, rtol=0)
    _close(al.load(tmp_path / "blocks.attnlab").state_dict(), full, 1e-5)
    # blocks recomputed in the backward pass (their units gathered again), every layer watched
    _close(load_file(str(tmp_path / "weights-blocks-recomputed.safetensors")), full, 1e-5)
    # fsdp with accumulation: 2 micro-batches of 6 step as one batch of 12; groups of 3, 3, 2
    # as in one process (the epoch's last, shorter group syncs at its last micro-batch)
    _close(load_file(str(tmp_path / "weights-blocks-acc2.safetensors")), full, 1e-5)
    thirds, _ = blocks_case(batch_size=6, accumulation_steps=3)
    _close(load_file(str(tmp_path / "weights-blocks-acc3.safetensors")), thirds.state_dict(), 1e-5)
    # DDP: 2 micro-batches of 10 per step equal one batch of 20
    _close(load_file(str(tmp_path / "weights-acc.safetensors")),
           load_file(str(tmp_path / "weights-big.safetensors")), 1e-6)
    _close(load_file(str(tmp_path / "weights-acc.safetensors")),
           accumulation_case(batch_size=20, steps=1).state_dict(), 1e-5)


def test_a_pretrained_gpt2_on_two_processes_saves_what_one_process_trains(tmp_path, gpt2):
    run = _torchrun("gpt2", tmp_path, gpt2)
    assert run.returncode == 0, run.stderr[-4000:]
    net, info = gpt2_case(gpt2)
    net.save_pretrained(tmp_path / "one")
    two = load_file(str(tmp_path / "gpt2-fsdp" / "model.safetensors"))
    _close(two, load_file(str(tmp_path / "one" / "model.safetensors")), 1e-5)
    assert json.loads((tmp_path / "gpt2-loss.json").read_text()) == \
        pytest.approx(info.iterations["loss"], abs=1e-5)


def test_a_killed_run_resumes_from_its_shards_to_the_uninterrupted_weights(tmp_path):
    killed = _torchrun("kill", tmp_path)
    assert killed.returncode != 0 and "not killed" not in killed.stderr
    ckpt = tmp_path / "ckpt"
    assert sorted(p.name for p in ckpt.iterdir()) == ["checkpoint-000000003.dcp",
                                                      "checkpoint-000000003.safetensors"]
    assert (ckpt / "checkpoint-000000003.dcp" / ".metadata").is_file()
    run = _torchrun("resume", tmp_path)
    assert run.returncode == 0, run.stderr[-4000:]
    # it went on from the checkpoint: iterations 4 … 12 ran
    assert json.loads((tmp_path / "resume-iterations.json").read_text()) == list(range(4, 13))
    _close(load_file(str(tmp_path / "weights-resume.safetensors")),
           load_file(str(tmp_path / "weights-full.safetensors")), 1e-6)
    assert json.loads((tmp_path / "resume-loss.json").read_text()) == \
        pytest.approx(json.loads((tmp_path / "full-loss.json").read_text()), abs=1e-6)
    # the shards of checkpoints no longer kept are gone with their files
    assert sorted(p.name for p in ckpt.iterdir()) == [
        "checkpoint-000000009.dcp", "checkpoint-000000009.safetensors",
        "checkpoint-000000012.dcp", "checkpoint-000000012.safetensors"]
    # a sharded checkpoint is not resumed without sharding (its file holds no weights)
    x, y = blocks_data()
    with pytest.raises(al.TrainingError, match="written sharded.*this run trains without"):
        al.train(blocks_net(), x, y, options=al.TrainingOptions(
            solver="adam", learning_rate=0.01, max_epochs=4, batch_size=12, verbose=False,
            seed=4, gradient_threshold=1.0, checkpoint_dir=str(ckpt), resume=True,
            strategy="fsdp", validation_patience=50, validation_data=(x[:10], y[:10]),
            validation_frequency=2, learning_rate_schedule="warmup-cosine",
            warmup_iterations=2, checkpoint_frequency=3,
            checkpoint_frequency_unit="iteration"))


# ----------------------------------------------------------- one process group ---

@pytest.fixture
def group(tmp_path):
    """A process group of one (gloo), as torchrun's would be, removed afterwards."""
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0,
                            world_size=1)
    yield
    dist.destroy_process_group()


def test_bf16_gathers_in_bf16_and_release_leaves_a_plain_network(group):
    from torch.distributed.fsdp import FSDPModule
    net = blocks_net()
    before = {k: v.clone() for k, v in net.state_dict().items()}
    own = list(net.parameters())
    sharded = fsdp.Sharded(dd.Forward(net), net, torch.device("cpu"), torch.bfloat16)
    policy = sharded.fwd._get_fsdp_state()._mp_policy
    assert (policy.param_dtype, policy.reduce_dtype) == (torch.bfloat16, torch.float32)
    assert isinstance(net.layer_modules["enc0"], FSDPModule)
    x, _ = blocks_data()
    sharded.fwd({"in": x[:2]})[0]["fc"].float().sum().backward()
    sharded.release()
    assert not any(isinstance(m, FSDPModule) for m in sharded.fwd.modules())
    assert list(net.parameters()) == own and all(type(p) is torch.nn.Parameter for p in own)
    assert all(not m._forward_pre_hooks and not m._forward_hooks for m in net.modules())
    _close(net.state_dict(), before, 0)            # nothing stepped: the same weights
    again = fsdp.Sharded(dd.Forward(net), net, torch.device("cpu"), None)   # a next al.train
    again.release()
    _close(net.state_dict(), before, 0)


def test_fp16_is_refused_under_fsdp():
    scaler = torch.amp.GradScaler("cpu")
    with pytest.raises(al.ArgumentError, match="strategy='fsdp' with precision 'fp16'.*bf16"):
        fsdp.check(al.TrainingOptions(strategy="fsdp"), scaler)
