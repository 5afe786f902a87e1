"""Shared problems and networks for the training tests, and the subprocess worker they launch.

As a script: `python tests/train_worker.py MODE OUT_DIR`
  MODE "kill":   trains with iteration checkpoints and SIGKILLs itself mid-epoch;
  MODE "resume": trains with resume=True from the same checkpoint_dir to the end;
  MODE "full":   trains uninterrupted;
  MODE "ddp":    the torchrun case: trains on the global batch split across processes.
The final weights go to OUT_DIR/weights-<mode>.safetensors (rank 0).
"""
from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import attnlab as al  # noqa: E402
from attnlab import layers as L  # noqa: E402


def separable(n: int = 240, t: int = 12, c: int = 6, classes: int = 3, seed: int = 0):
    """Sequences N×T×C whose class k raises channel k: separable by a time average."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, classes, (n,), generator=g)
    x = 0.7 * torch.randn(n, t, c, generator=g)
    x[torch.arange(n), :, y] += 1.0
    return x, y


def attention_classifier(c: int = 6, classes: int = 3, width: int = 16) -> al.Network:
    """A self-attention classifier: Dense → SelfAttention → GlobalAvgPool1d → Dense → Softmax."""
    return al.Network([L.SequenceInput(c, name="in"), L.Dense(width, name="embed"),
                       L.SelfAttention(2, width, name="self-attention"),
                       L.GlobalAvgPool1d(name="pool"), L.Dense(classes, name="fc"),
                       L.Softmax(name="softmax")])


def lstm_classifier(c: int = 6, classes: int = 3) -> al.Network:
    return al.Network([L.SequenceInput(c, name="in"), L.LSTM(8, output_mode="last", name="lstm"),
                       L.Dense(classes, name="fc"), L.Softmax(name="softmax")])


def resume_options(out_dir, **kw) -> al.TrainingOptions:
    base = dict(solver="adam", learning_rate=0.01, max_epochs=3, batch_size=16, verbose=False,
                checkpoint_dir=str(Path(out_dir) / "ckpt"), checkpoint_frequency=4,
                checkpoint_frequency_unit="iteration", validation_frequency=5, seed=3)
    base.update(kw)
    return al.TrainingOptions(**base)


def resume_case(out_dir, **kw):
    """The run the kill/resume test repeats: an LSTM with dropout (RNG in every step), shuffled
    each epoch, Adam, a warmup-cosine schedule, validation."""
    torch.set_num_threads(1)
    x, y = separable(96, t=8)
    net = al.Network([L.SequenceInput(6, name="in"), L.LSTM(8, name="lstm"), L.Dropout(0.2),
                      L.SelfAttention(2, 8, name="attn"), L.GlobalAvgPool1d(), L.Dense(3, name="fc")])
    xs = [xi[: 4 + i % 5] for i, xi in enumerate(x)]             # variable lengths
    opts = resume_options(out_dir, validation_data=(xs[:16], y[:16]),
                          learning_rate_schedule="warmup-cosine", warmup_iterations=5, **kw)
    info = al.train(net, xs, y, options=opts)
    return net, info


def ddp_case(out_dir=None):
    """A small LSTM + attention net on variable-length data; global batch 16."""
    x, y = separable(69, t=7)               # the last batch of 5 splits 3 + 2
    xs = [xi[: 3 + i % 5] for i, xi in enumerate(x)]
    torch.manual_seed(0)
    net = al.Network([L.SequenceInput(6, name="in"), L.LSTM(8, name="lstm"),
                      L.SelfAttention(2, 8, name="attn"), L.GlobalAvgPool1d(), L.Dense(3, name="fc"),
                      L.Softmax()])
    opts = al.TrainingOptions(solver="sgdm", learning_rate=0.1, max_epochs=2, batch_size=16,
                              verbose=False, seed=5, validation_data=(xs[:20], y[:20]),
                              validation_frequency=3, gradient_threshold=1.0)
    info = al.train(net, xs, y, options=opts)
    return net, info


class Items(torch.utils.data.Dataset):
    """A map-style Dataset of (T_i×C sequence, label) items."""

    def __init__(self, xs, y):
        self.xs, self.y = xs, y

    def __len__(self):
        return len(self.xs)

    def __getitem__(self, i):
        return self.xs[i], self.y[i]


def ddp_dataset_case():
    """The Dataset path: variable lengths collated per batch, validation from a Dataset (whose
    parts differ in batch count across processes)."""
    x, y = separable(45, t=6)
    xs = [xi[: 2 + i % 5] for i, xi in enumerate(x)]
    torch.manual_seed(0)
    net = lstm_classifier()
    opts = al.TrainingOptions(solver="adam", learning_rate=0.01, max_epochs=2, batch_size=10,
                              verbose=False, seed=2, validation_data=Items(xs[:13], y[:13]),
                              validation_frequency=4)
    info = al.train(net, Items(xs, y), options=opts)
    return net, info


def save_weights(net, path):
    from safetensors.torch import save_file
    save_file({k: v.detach().contiguous().clone() for k, v in net.state_dict().items()}, str(path))


def main(mode: str, out_dir: str):
    out = Path(out_dir)
    if mode == "kill":
        def killer(state):
            if state.iteration == 10:                      # after the checkpoint at 8, mid-epoch
                os.kill(os.getpid(), signal.SIGKILL)
        resume_case(out, output_fn=killer)
        raise SystemExit("not killed")
    if mode in ("resume", "full"):
        net, _ = resume_case(out, resume=(mode == "resume"))
        save_weights(net, out / f"weights-{mode}.safetensors")
        return
    if mode == "ddp":
        torch.set_num_threads(1)
        net, info = ddp_case()
        net2, info2 = ddp_dataset_case()
        if int(os.environ.get("RANK", "0")) == 0:
            save_weights(net, out / "weights-ddp.safetensors")
            save_weights(net2, out / "weights-ddp-dataset.safetensors")
            (out / "ddp-loss.json").write_text(json.dumps(info.iterations["loss"]))
            (out / "ddp-validation.json").write_text(json.dumps(info2.validation))
        return
    raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    import faulthandler
    faulthandler.dump_traceback_later(float(os.environ.get("TRAIN_WORKER_STACKS_AFTER", "90")),
                                      exit=True)              # a hang shows where, then ends
    main(sys.argv[1], sys.argv[2])
