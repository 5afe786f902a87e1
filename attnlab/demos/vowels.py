"""Japanese Vowels: the seed question "selfAttentionLayer on sequences (sequence-to-label)".

UCI Japanese Vowels (sktime's copy): nine speakers, 12 LPC cepstrum channels, 7–29 steps per
utterance, the official 270 training / 370 test split, variable lengths kept (a padding mask
travels with each batch; attention ignores padded steps). 10 % of the training utterances are
held out for validation. The network: `Dense` projection + sinusoidal position encoding →
`SelfAttention` with a residual connection and LayerNorm → `AttentionPool1d` (a learned query
attends over time) → `Dense(9)`; three such networks, trained with different seeds on
utterances time-warped and jittered afresh at every draw, vote by their mean probability.
Baseline: logistic regression on the utterances resampled to 20 steps."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

import attnlab as al
from attnlab import layers as L

from . import _common as C
from .baselines import logistic_sequences, resample
from .report import write_report

EPOCHS = 150
SEED = 0


def build_network(channels: int = 64, heads: int = 4, dropout: float = 0.1,
                  scores: bool = False) -> al.Network:
    """Dense projection + position → SelfAttention (+ residual, LayerNorm) → AttentionPool1d →
    Dense(9)."""
    net = al.Network()
    net.add([L.SequenceInput(12, name="cepstrum"),
             L.Dense(channels, name="embed"),
             L.Addition(2, name="add-position"),
             L.SelfAttention(heads, channels, name="self-attention", has_scores_output=scores),
             L.Dropout(dropout, name="dropout"),
             L.Addition(2, name="residual"), L.LayerNorm(name="layernorm"),
             L.AttentionPool1d(heads, name="attention-pool"),
             L.Dense(9, name="fc")])
    net.add(L.SinusoidalPositionEncoding(channels, name="position"))
    net.connect("embed", "position")
    net.connect("position", "add-position/in2")
    net.connect("add-position", "residual/in2")
    return net


def standardizer(X):
    steps = np.concatenate(X)
    mean, std = steps.mean(0), steps.std(0) + 1e-6
    return lambda seqs: [((s - mean) / std).astype(np.float32) for s in seqs]


class Augmented(torch.utils.data.Dataset):
    """Training utterances, each changed a little every time it is drawn: its time axis
    stretched by a factor within 1 ± `warp` (linear resampling, at least 4 steps) and
    Gaussian noise of `jitter` standard deviations added to every (standardised) channel."""

    def __init__(self, X, y, seed: int = 0, warp: float = 0.15, jitter: float = 0.05):
        self.X, self.y = [np.asarray(s, dtype=np.float32) for s in X], np.asarray(y)
        self.rng = np.random.default_rng(seed)
        self.warp, self.jitter = warp, jitter

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        s = self.X[i]
        n = max(4, int(round(len(s) * self.rng.uniform(1 - self.warp, 1 + self.warp))))
        s = resample(s, n)
        s = s + self.rng.normal(0.0, self.jitter, s.shape)
        return torch.as_tensor(s, dtype=torch.float32), int(self.y[i])


def train_network(X, y, Xv, yv, epochs: int, out: Path | None = None, seed: int = SEED,
                  verbose: bool = True, lr: float = 1e-3, batch_size: int = 16, l2: float = 1e-2,
                  augment: dict | None = None, **net_kw):
    net = build_network(**net_kw)
    opts = al.TrainingOptions(solver="adamw", learning_rate=lr, l2=l2, max_epochs=epochs,
                              batch_size=batch_size, learning_rate_schedule="warmup-cosine",
                              warmup_iterations=50, validation_data=(Xv, yv),
                              validation_frequency=max(1, len(y) // batch_size), seed=seed,
                              verbose=verbose, verbose_frequency=200,
                              plots="training-progress" if out else None,
                              plots_file=str(out / "training-progress.png") if out else None)
    source = (Augmented(X, y, seed, **augment),) if augment else (X, y)
    info = al.train(net, *source, loss="crossentropy", options=opts)
    return net, info


def run(out: Path, epochs: int | None = None, seed: int = SEED) -> dict:
    """Trains with `seed` (initialisation, batch order, dropout, augmentation); the data split
    stays the demo's own."""
    with C.demo_threads():
        return _run(out, epochs, seed)


def _run(out: Path, epochs: int | None, seed: int) -> dict:
    from sklearn.model_selection import train_test_split

    out = C.prepare(out)
    watch = C.Stopwatch()
    data = al.datasets.japanese_vowels()
    idx = np.arange(len(data.y_train))
    itr, iv = train_test_split(idx, test_size=0.1, stratify=data.y_train, random_state=SEED)
    std = standardizer([data.X_train[i] for i in itr])          # statistics of training steps
    Xtr, Xv = std([data.X_train[i] for i in itr]), std([data.X_train[i] for i in iv])
    Xte = std(data.X_test)
    ytr, yv = data.y_train[itr], data.y_train[iv]
    lengths = [len(s) for s in data.X_train + data.X_test]
    print(f"japanese vowels: {len(ytr)} training, {len(yv)} validation, {len(data.y_test)} test "
          f"utterances of {min(lengths)}–{max(lengths)} steps × 12 channels, 9 speakers")

    base_watch = C.Stopwatch()
    base = logistic_sequences(data.X_train, data.y_train, data.X_test, data.y_test, length=20)
    base_s = base_watch.seconds
    print(f"baseline {base['name']}: test accuracy {C.percent(base['accuracy'])} ({base_s:.1f} s)")

    net_watch = C.Stopwatch()
    nets, infos = C.train_members(
        lambda k, s: train_network(Xtr, ytr, Xv, yv, epochs or EPOCHS, out if k == 0 else None,
                                   seed=s, verbose=k == 0, **TUNED), MEMBERS, seed)
    net, info = nets[0], infos[0]
    train_s = net_watch.seconds
    print(net.analyze())
    pred = C.ensemble_classify(nets, Xte)
    acc = float(np.mean(pred == data.y_test))
    val_acc = float(np.mean(C.ensemble_classify(nets, Xv) == yv))
    print(f"attention network ({MEMBERS} members): test accuracy {C.percent(acc)} (validation "
          f"{C.percent(val_acc)}, trained in {train_s:.1f} s)")

    files = C.save_outputs(net, out, info) + C.save_members(nets, out)
    twin = C.with_scores(build_network, net, "self-attention", **_net_kw(TUNED))
    _attention_figure(twin, data, Xte, pred, out / "attention.png")
    files += ["attention.png", "metrics.json", "report.html"]

    metrics = C.classification_metrics(net, pred, data, base, len(ytr), len(yv), val_acc,
                                       epochs or EPOCHS, train_s, base_s)
    metrics.update(seed=seed, members=MEMBERS, choices=CHOICES)
    metrics["seconds"] = round(watch.seconds, 1)
    C.write_metrics(out, metrics)
    write_report(
        out, "attnlab demo: Japanese Vowels (self-attention over variable-length sequences)",
        "UCI Japanese Vowels: who of nine speakers said /ae/, from 12 LPC cepstrum channels over "
        "7–29 steps. Official split, 270 training (27 of them held out for validation) and 370 "
        "test utterances, lengths kept: a padding mask travels with every batch and attention "
        "ignores padded steps. <code>Dense</code> + sinusoidal position → "
        "<code>SelfAttention</code> → <code>AttentionPool1d</code> → <code>Dense(9)</code>; "
        f"{MEMBERS} of them (different seeds, training utterances time-warped ±15 % and "
        "jittered afresh at every draw) vote by their mean probability, against logistic "
        "regression on the utterances resampled to 20 steps. How each choice was made (on the "
        f"training utterances only): {CHOICES}.",
        C.classification_rows(metrics),
        [("network.png", "the layer graph, with activation sizes"),
         ("training-progress.png", "loss and accuracy of the first member, training and "
                                   "validation"),
         ("attention.png", "self-attention weights (query step × key step) of a test utterance, "
                           "per head; the padded steps of shorter utterances get no weight")],
        {k: v for k, v in metrics.items() if k != "baseline"},
        "attnlab demo vowels --out demo-out")
    print(f"wrote {', '.join(files)} to {out}")
    return metrics


# Every choice by cross-validation on the 270 training utterances, never the test split:
# lr 3e-3, dropout 0.3 by 5-fold CV (97.0 % against 96.7 % for lr 1e-3, dropout 0.1); then,
# in 3-fold stratified CV (150 epochs, member seeds 0–2 in every fold), time warping ±15 % with
# jitter 0.05 lifted a single network from 97.78 % to 98.89 % and a 3-member ensemble (mean
# of the members' probabilities) from 98.15 % to 99.26 %.
# Tried afterwards in the same 3-fold CV (folds shuffled, seed 0; member seeds 0–4), none better
# than this configuration's 3-member 99.26 %: 5 members 98.15 %; a 3-step Conv1d embedding
# instead of the Dense one 98.89 % (single networks 97.63 % against 98.22 %); 300 epochs
# 98.89 % (single 98.89 %); warping ±25 % with jitter 0.1 98.52 %, and with 300 epochs and 5
# members 98.52 %; 32 channels, 2 heads 97.78 %; 128 channels 97.78 %. One error of the 270 is
# 0.37 points: the ensembles' differences are within noise.
TUNED = {"lr": 3e-3, "dropout": 0.3, "augment": {"warp": 0.15, "jitter": 0.05}}
MEMBERS = 3
CHOICES = ("lr 3e-3 and dropout 0.3 by 5-fold CV on the training utterances (97.0 % against "
           "96.7 % for lr 1e-3, dropout 0.1); time warping ±15 % + jitter 0.05 and a 3-member "
           "ensemble by 3-fold CV on the training utterances: single network 97.78 % → 98.89 % "
           "with augmentation, ensemble 98.15 % → 99.26 %")


def _net_kw(kw):
    return {k: v for k, v in kw.items() if k in ("channels", "heads", "dropout")}


def _attention_figure(twin, data, Xte, pred, path):
    i = int(np.argmax([len(s) for s in data.X_test]))                    # the longest
    outs = twin.predict([Xte[i]])
    scores = outs["self-attention/scores"][:1]                             # 1×H×T×T
    al.plot_attention(scores, path=path, title=f"test utterance {i}: speaker "
                      f"{data.class_names[data.y_test[i]]}, predicted "
                      f"{data.class_names[pred[i]]} ({len(data.X_test[i])} steps)")
