"""The cases of tests/training/test_fsdp.py, and the torchrun worker that runs them.

As a script (under torchrun): `python tests/fsdp_worker.py MODE OUT_DIR [GPT2_FOLDER]`
  MODE "blocks": a network of 2 nested blocks trained with strategy="fsdp"; the share of the
                 parameters and optimizer state each process holds; after training, rank 0
                 alone saves (net.save, and safetensors of the state dict) and every process
                 predicts; the same with activation checkpointing and check_finite, and
                 with accumulation; then DDP with accumulation against one batch 2 times as
                 large.
  MODE "gpt2":   a tiny from_pretrained GPT-2 fine-tuned with fsdp; rank 0 alone writes
                 save_pretrained.
  MODE "kill":   the checkpointed fsdp run, killed (every process) after a checkpoint;
  MODE "resume": the same run resumed to its end, then the same run uninterrupted.
Rank 0 writes what it measured to OUT_DIR.
"""
from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import attnlab as al  # noqa: E402
from attnlab import layers as L  # noqa: E402
from train_worker import save_weights  # noqa: E402


def rank() -> int:
    return int(os.environ.get("RANK", "0"))


def blocks_net() -> al.Network:
    """Two nested transformer blocks (no dropout: its draws differ by process) between an embedding Dense and a classifier head."""
    torch.manual_seed(0)
    return al.Network([L.SequenceInput(6, name="in"), L.Dense(8, name="embed"),
                       al.blocks.transformer_encoder(8, 2, 16, dropout=0.0, name="enc0"),
                       al.blocks.transformer_encoder(8, 2, 16, dropout=0.0, name="enc1"),
                       L.GlobalAvgPool1d(name="pool"), L.Dense(3, name="fc")])


def blocks_data(n: int = 48):
    g = torch.Generator().manual_seed(1)
    y = torch.randint(0, 3, (n,), generator=g)
    x = 0.7 * torch.randn(n, 5, 6, generator=g)
    x[torch.arange(n), :, y] += 1.0
    return x, y


def blocks_options(**kw) -> al.TrainingOptions:
    # sgdm: Adam would turn the rounding noise of gradients that are 0 in exact arithmetic
    # (attention's key bias) into full-size steps, and one process would not be matched
    base = dict(solver="sgdm", learning_rate=0.1, max_epochs=2, batch_size=12, verbose=False,
                seed=4, strategy="fsdp", gradient_threshold=1.0)
    base.update(kw)
    return al.TrainingOptions(**base)


def blocks_case(**kw):
    net = blocks_net()
    x, y = blocks_data()
    info = al.train(net, x, y, options=blocks_options(validation_data=(x[:10], y[:10]),
                                                      validation_frequency=3, **kw))
    return net, info


def accumulation_case(batch_size: int, steps: int):
    """DDP: micro-batches of `batch_size` in groups of `steps` per optimizer step."""
    torch.manual_seed(0)
    net = al.Network([L.FeatureInput(4, name="x"), L.Dense(6, name="fc1"), L.Tanh(name="t"),
                      L.Dense(3, name="fc2")])
    g = torch.Generator().manual_seed(3)
    x, y = torch.randn(40, 4, generator=g), torch.randint(0, 3, (40,), generator=g)
    o = al.TrainingOptions(solver="sgdm", learning_rate=0.5, max_epochs=2, batch_size=batch_size,
                           shuffle="every-epoch", verbose=False, seed=1, strategy="ddp",
                           accumulation_steps=steps)
    al.train(net, x, y, options=o)
    return net


def gpt2_batches(n: int = 8):
    g = torch.Generator().manual_seed(2)
    ids = torch.randint(0, 32, (n, 6), generator=g)
    mask = torch.ones_like(ids)
    mask[::3, -2:] = 0                                         # some padding on the right
    return {"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, -100)}


def gpt2_case(folder, **kw):
    net = al.from_pretrained(folder)
    o = al.TrainingOptions(solver="sgdm", learning_rate=0.1, max_epochs=2, batch_size=4,
                           shuffle="never", verbose=False, seed=0, strategy="fsdp", **kw)
    info = al.train(net, gpt2_batches(), options=o)
    return net, info


def resume_options(out_dir, **kw) -> al.TrainingOptions:
    return blocks_options(solver="adam", learning_rate=0.01, max_epochs=3, checkpoint_dir=str(Path(out_dir) / "ckpt"),
                          checkpoint_frequency=3, checkpoint_frequency_unit="iteration",
                          validation_patience=50, validation_frequency=2,
                          learning_rate_schedule="warmup-cosine", warmup_iterations=2, **kw)


def resume_case(out_dir, **kw):
    net = blocks_net()
    x, y = blocks_data()
    info = al.train(net, x, y, options=resume_options(out_dir, validation_data=(x[:10], y[:10]),
                                                       **kw))
    return net, info


class Shares:
    """What each process holds while training: its shards' elements and bytes of the
    parameters and optimizer state, against the whole network's."""

    def __init__(self, make_optimizer):
        self.make_optimizer = make_optimizer
        self.opt = None
        self.row: dict = {}

    def make(self, params, o):
        self.opt = self.make_optimizer(params, o)
        return self.opt

    def measure(self, net):
        from torch.distributed.tensor import DTensor

        def local(t):
            return t.to_local() if isinstance(t, DTensor) else t
        params = list(net.parameters())
        state = [v for s in self.opt.state.values() for v in s.values()
                 if isinstance(v, torch.Tensor) and v.dim() > 0]
        self.row = {
            "dtensors": all(isinstance(p, DTensor) for p in params),
            "local_numel": sum(local(p).numel() for p in params),
            "full_numel": sum(p.numel() for p in params),
            "local_bytes": sum(local(t).numel() * t.element_size() for t in params + state),
            "full_bytes": sum(t.numel() * t.element_size() for t in params + state),
        }


def main(mode: str, out_dir: str, extra: str | None = None):
    torch.set_num_threads(1)
    out = Path(out_dir)
    if mode == "blocks":
        from attnlab.training import loop
        shares = Shares(loop.make_optimizer)
        loop.make_optimizer = shares.make                      # to see the optimizer's state

        def measure(state):
            if state.iteration == 2:
                shares.measure(net_ref[0])
            return False
        net_ref = [blocks_net()]
        x, y = blocks_data()
        info = al.train(net_ref[0], x, y, options=blocks_options(
            validation_data=(x[:10], y[:10]), validation_frequency=3, output_fn=measure))
        loop.make_optimizer = shares.make_optimizer
        net = net_ref[0]
        (out / f"shares-{rank()}.json").write_text(json.dumps(shares.row))
        (out / f"predict-{rank()}.json").write_text(json.dumps(net.predict(x[:4]).tolist()))
        if rank() == 0:                                         # rank 0 alone: no collective
            net.save(out / "blocks.attnlab")
            save_weights(net, out / "weights-blocks.safetensors")
            (out / "blocks-loss.json").write_text(json.dumps(info.iterations["loss"]))
            (out / "blocks-validation.json").write_text(json.dumps(info.validation["loss"]))
        again, _ = blocks_case(checkpoint_activations=True, check_finite=True)
        halves, _ = blocks_case(batch_size=6, accumulation_steps=2)
        thirds, _ = blocks_case(batch_size=6, accumulation_steps=3)   # groups of 3, 3, 2
        if rank() == 0:
            save_weights(again, out / "weights-blocks-recomputed.safetensors")
            save_weights(halves, out / "weights-blocks-acc2.safetensors")
            save_weights(thirds, out / "weights-blocks-acc3.safetensors")
        acc = accumulation_case(batch_size=10, steps=2)
        big = accumulation_case(batch_size=20, steps=1)
        if rank() == 0:
            save_weights(acc, out / "weights-acc.safetensors")
            save_weights(big, out / "weights-big.safetensors")
        return
    if mode == "gpt2":
        net, info = gpt2_case(extra)
        if rank() == 0:
            net.save_pretrained(out / "gpt2-fsdp")
            (out / "gpt2-loss.json").write_text(json.dumps(info.iterations["loss"]))
        return
    if mode == "kill":
        def killer(state):
            if state.iteration == 5:                  # after the checkpoint at 3, mid-epoch
                os.kill(os.getpid(), signal.SIGKILL)
            return False
        resume_case(out, output_fn=killer)
        raise SystemExit("not killed")
    if mode == "resume":
        seen: list[int] = []

        def record(state):
            seen.append(state.iteration)
            return False
        net, info = resume_case(out, resume=True, output_fn=record)
        if rank() == 0:
            save_weights(net, out / "weights-resume.safetensors")
            (out / "resume-loss.json").write_text(json.dumps(info.iterations["loss"]))
            (out / "resume-iterations.json").write_text(json.dumps(seen))
        full, info = resume_case(out / "full")
        if rank() == 0:
            save_weights(full, out / "weights-full.safetensors")
            (out / "full-loss.json").write_text(json.dumps(info.iterations["loss"]))
        return
    raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    import faulthandler
    faulthandler.dump_traceback_later(float(os.environ.get("FSDP_WORKER_STACKS_AFTER", "100")),
                                      exit=True)              # a hang shows where, then ends
    main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
