"""Japanese Vowels: self-attention over variable-length sequences, sequence to label.

UCI Japanese Vowels (sktime's copy): who of nine speakers said /ae/, from 12 LPC cepstrum
channels over 7–29 steps. The official split, 270 training and 370 test utterances, lengths
kept: a padding mask travels with each batch and attention ignores padded steps.

The model (`build_network`): the 12 cepstrum channels and their differences over the steps
(delta cepstra, 24 channels) → dropout 0.05 on the input values → `Dense(64)` + sinusoidal
position encoding → `SelfAttention` (4 heads) with a residual connection and LayerNorm →
`AttentionPool1d` (a learned query attends over time) → `Dense(9)`. Eight such networks,
trained with different seeds, vote by their mean probability.

Training (`train_network`): AdamW, learning rate 3e-3 with warm-up and cosine decay, weight
decay 0.01, batches of 16, 150 epochs, dropout 0.3 after attention, on utterances that change
at every draw (`Augmented`): time-warped ±15 %, every channel scaled ±20 %, offset by a draw
from the spread of a speaker's recordings around its mean and by another recording's departure
from its speaker's mean curve, and jittered; the deltas are computed from the changed
utterance. The members train in two processes at once where two cores are free.

Every choice was made by cross-validation on the training utterances only, never by the test
split: docs/demos/vowels.md records the runs, and tools/vowels_cv.py is the harness that made
them. With every choice made, the members learn from all 270 training utterances, as the
baseline does. Baseline: logistic regression on the utterances resampled to 20 steps."""
from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import torch

import attnlab as al
from attnlab import layers as L

from attnlab.cli.demos import _common as C
from attnlab.core.errors import ArgumentError
from attnlab.cli.demos.baselines import logistic_sequences, resample
from attnlab.cli.demos.report import write_report

EPOCHS = 150
SEED = 0
MEMBERS = 8
CEPSTRUM = 12                    # channels of an utterance; its deltas follow them
CHANNELS, HEADS = 64, 4
# the augmentation: time warp, channel scale, jitter (sd), share of the speaker spread (drift)
# and of another recording's departure from its speaker (transfer)
AUGMENT = {"warp": 0.15, "scale": 0.2, "jitter": 0.05, "drift": 1.0, "transfer": 1.0}
# the chosen ensemble's blocked 5-fold CV accuracy on the training utterances, and logistic
# regression's on the same folds (recorded in metrics.json and the report)
CV: dict = {"folds": 5, "split": "blocked", "ensemble": 267 / 270, "logistic": 261 / 270}
CHOICES = ("by blocked 5-fold and 3-fold cross-validation on the training utterances (six, "
           "or ten, consecutive utterances of every speaker held out); the candidates tried "
           "and their figures are in docs/demos/vowels.md")


def build_network(scores: bool = False) -> al.Network:
    """The member network; with `scores`, the self-attention also outputs its weights."""
    net = al.Network()
    net.add([L.SequenceInput(2 * CEPSTRUM, name="cepstrum"),
             L.Dropout(0.05, name="input-dropout"),
             L.Dense(CHANNELS, name="embed"),
             L.Addition(2, name="add-position"),
             L.SelfAttention(HEADS, CHANNELS, name="self-attention", has_scores_output=scores),
             L.Dropout(0.3, name="dropout"),
             L.Addition(2, name="residual"), L.LayerNorm(name="layernorm"),
             L.AttentionPool1d(HEADS, name="attention-pool"),
             L.Dense(9, name="fc")])
    net.add(L.SinusoidalPositionEncoding(CHANNELS, name="position"))
    net.connect("embed", "position")
    net.connect("position", "add-position/in2")
    net.connect("add-position", "residual/in2")
    return net


def with_deltas(s) -> np.ndarray:
    """`s` (T×12) followed by its differences over the steps (numpy.gradient's numbers:
    central, one-sided at the ends; zeros for one step), as speech front ends append delta
    cepstra: T×24."""
    s = np.asarray(s)
    d = np.zeros_like(s)
    if len(s) > 1:
        d[1:-1] = (s[2:] - s[:-2]) / 2.0
        d[0] = (s[1] - s[0]) / 1.0
        d[-1] = (s[-1] - s[-2]) / 1.0
    return np.concatenate([s, d], 1).astype(np.float32)


def standardizer(X):
    """Standardises with the statistics of the steps of `X`, then appends the deltas."""
    steps = np.concatenate(X)
    mean, std = steps.mean(0), steps.std(0) + 1e-6
    return lambda seqs: [with_deltas(((s - mean) / std).astype(np.float32)) for s in seqs]


def deviations(X, y, length: int = 20) -> np.ndarray:
    """Each utterance's departure from its speaker's mean curve (N×`length`×12): the
    utterances resampled to `length` steps, less the mean of their speaker's."""
    curves = np.stack([resample(s[:, :CEPSTRUM], length) for s in X])          # N×length×C
    y = np.asarray(y)
    means = {c: curves[y == c].mean(0) for c in np.unique(y)}
    return np.stack([curve - means[c] for curve, c in zip(curves, y)]).astype(np.float32)


def within_speaker_covariance(X, y) -> np.ndarray:
    """The covariance (C×C) of the utterances' mean steps around the mean of their speaker's
    utterance means: the way one speaker's recordings differ from one another."""
    means = np.stack([s[:, :CEPSTRUM].mean(0) for s in X])                        # N×C
    centred = np.concatenate([means[y == c] - means[y == c].mean(0) for c in np.unique(y)])
    return centred.T @ centred / max(1, len(centred) - len(np.unique(y)))


class Augmented(torch.utils.data.Dataset):
    """Training utterances (standardised, with their deltas), each changed a little every time
    it is drawn (`AUGMENT`), from the generator of `seed`: its time axis stretched by a factor
    within 1 ± warp (linear resampling, at least 4 steps); every cepstrum channel multiplied by
    a factor within 1 ± scale; every step offset by one draw from N(0, drift·S), S the
    covariance of the utterance means around their speaker's mean (over `X`); offset by
    transfer times another training utterance's departure from its speaker's mean curve (drawn
    uniformly, resampled to the utterance's length); Gaussian noise of `jitter` standard
    deviations added to every value; the deltas computed afresh from the changed cepstrum."""

    def __init__(self, X, y, seed: int = 0, warp: float = 0.15, scale: float = 0.2,
                 jitter: float = 0.05, drift: float = 1.0, transfer: float = 1.0):
        for name, value in (("drift", drift), ("transfer", transfer)):
            if not value >= 0:                  # a negative spread would be taken as positive
                raise ArgumentError(f"Augmented {name}: expected a number ≥ 0 (the share of the "
                                    f"spread to draw from), received {value!r}. Use 0 for none, "
                                    "1 for the spread itself.")
        self.X = [np.asarray(s, dtype=np.float32)[:, :CEPSTRUM] for s in X]
        self.y = np.asarray(y)
        self.rng = np.random.default_rng(seed)
        self.warp, self.scale, self.jitter, self.transfer = warp, scale, jitter, transfer
        # z @ factor ~ N(0, drift·S) for z standard normal: the SVD taken once, not per draw
        u, sv, _ = np.linalg.svd(drift * within_speaker_covariance(self.X, self.y)
                                 .astype(np.float64))
        self.factor = (u * np.sqrt(sv)).T
        self.deviations = deviations(self.X, self.y)
        self._transferred: dict = {}      # a deviation at a length: computed once

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return torch.as_tensor(self.change(self.X[i]), dtype=torch.float32), int(self.y[i])

    def change(self, s) -> np.ndarray:
        """`s` (T×12, or T×24 with its deltas) changed once, as a draw of it would be: T'×24."""
        r, c = self.rng, CEPSTRUM
        s = np.asarray(s)[:, :c]
        s = resample(s, max(4, int(round(len(s) * r.uniform(1 - self.warp, 1 + self.warp)))))
        s *= r.uniform(1 - self.scale, 1 + self.scale, (1, c))              # T'×12, float64
        s += r.standard_normal(len(self.factor)) @ self.factor              # the same at every step
        key = (int(r.integers(len(self.deviations))), len(s))
        if key not in self._transferred:
            self._transferred[key] = self.transfer * resample(self.deviations[key[0]], len(s))
        s += self._transferred[key]
        s += r.normal(0.0, self.jitter, (len(s), c))
        return with_deltas(s)


def train_network(X, y, epochs: int = EPOCHS, out: Path | None = None, seed: int = SEED,
                  verbose: bool = True, augment: dict | None = None):
    """One member, on `X` standardised by `standardizer`; it depends on `seed` alone
    (`al.train` draws the weights, the batch order and dropout from it, `Augmented` the
    changes). `augment` replaces `AUGMENT`'s values it names."""
    net = build_network()
    opts = al.TrainingOptions(solver="adamw", learning_rate=3e-3, l2=1e-2, max_epochs=epochs,
                              batch_size=16, learning_rate_schedule="warmup-cosine",
                              warmup_iterations=50, validation_frequency=max(1, len(y) // 16),
                              seed=seed, verbose=verbose, verbose_frequency=200,
                              plots="training-progress" if out else None,
                              plots_file=str(out / "training-progress.png") if out else None)
    data = Augmented(X, y, seed, **{**AUGMENT, **(augment or {})})
    info = al.train(net, data, loss="crossentropy", options=opts)
    return net, info


def _train_member(X, y, epochs, out, k, seed):
    """Member k (a module-level function: members may train in other processes)."""
    return train_network(X, y, epochs, out if k == 0 else None, seed=seed, verbose=k == 0)


def run(out: Path, epochs: int | None = None, seed: int = SEED) -> dict:
    """Trains with `seed` (initialisation, batch order, dropout, augmentation); the data split
    stays the demo's own."""
    with C.demo_threads():
        return _run(out, epochs or EPOCHS, seed)


def _run(out: Path, epochs: int, seed: int) -> dict:
    workers = min(C.demo_workers(), MEMBERS)     # first: a bad ATTNLAB_DEMO_WORKERS fails at once
    out = C.prepare(out)
    watch = C.Stopwatch()
    data = al.datasets.japanese_vowels()
    std = standardizer(data.X_train)                                    # training statistics
    Xtr, Xte, ytr = std(data.X_train), std(data.X_test), data.y_train
    lengths = [len(s) for s in data.X_train + data.X_test]
    print(f"japanese vowels: {len(ytr)} training, {len(data.y_test)} test utterances of "
          f"{min(lengths)}–{max(lengths)} steps × 12 channels, 9 speakers")

    base_watch = C.Stopwatch()
    base = logistic_sequences(data.X_train, data.y_train, data.X_test, data.y_test, length=20)
    base_s = base_watch.seconds
    print(f"baseline {base['name']}: test accuracy {C.percent(base['accuracy'])} ({base_s:.1f} s)")

    net_watch = C.Stopwatch()
    train = functools.partial(_train_member, Xtr, ytr, epochs, out)
    nets, infos = C.train_members(train, MEMBERS, seed, workers)
    net, info = nets[0], infos[0]
    train_s = net_watch.seconds
    print(net.analyze())
    pred = C.ensemble_classify(nets, Xte)
    acc = float(np.mean(pred == data.y_test))
    print(f"attention network ({MEMBERS} members): test accuracy {C.percent(acc)} (trained in "
          f"{train_s:.1f} s; {CV['folds']}-fold {CV['split']} CV on the training utterances, "
          f"when chosen: {C.percent(CV['ensemble'])}, logistic regression "
          f"{C.percent(CV['logistic'])})")

    files = C.save_outputs(net, out, info) + C.save_members(nets, out)
    i = int(np.argmax([len(s) for s in data.X_test]))                  # the longest
    twin = C.with_scores(build_network, net, "self-attention")
    scores = twin.predict([Xte[i]])["self-attention/scores"][:1]             # 1×H×T×T
    al.plot_attention(scores, path=out / "attention.png", title=f"test utterance {i}: speaker "
                      f"{data.class_names[data.y_test[i]]}, predicted "
                      f"{data.class_names[pred[i]]} ({len(data.X_test[i])} steps)")
    files += ["attention.png", save_sample(out, data, Xte), "metrics.json", "report.html"]

    metrics = C.classification_metrics(net, pred, data, base, len(ytr), 0, None, epochs,
                                       train_s, base_s)
    metrics.update(seed=seed, members=MEMBERS, choices=CHOICES, cv_accuracy=CV["ensemble"],
                   cv_baseline_accuracy=CV["logistic"], cv_folds=CV["folds"],
                   cv_split=CV["split"], workers=workers)
    metrics["seconds"] = round(watch.seconds, 1)
    C.write_metrics(out, metrics)
    write_report(
        out, "attnlab demo: Japanese Vowels (self-attention over variable-length sequences)",
        "UCI Japanese Vowels: who of nine speakers said /ae/, from 12 LPC cepstrum channels over "
        "7–29 steps. Official split, 270 training and 370 test utterances, lengths kept: a "
        "padding mask travels with every batch and attention ignores padded steps. The cepstrum "
        "and its differences over the steps (delta cepstra, computed afresh after each change "
        "of an utterance) → input dropout 0.05 → <code>Dense</code> + sinusoidal position → "
        "<code>SelfAttention</code> → <code>AttentionPool1d</code> → <code>Dense(9)</code>; "
        f"{MEMBERS} of them (different seeds, training utterances time-warped ±15 %, "
        "channel-scaled ±20 %, offset by a draw from their speaker's spread between recordings "
        "and by another recording's departure from its speaker's mean curve, and jittered "
        "(0.05 sd) afresh at every draw) vote by their mean probability. Against logistic "
        f"regression on the utterances resampled to 20 steps. Every choice was made {CHOICES}.",
        C.classification_rows(metrics),
        [("network.png", "the layer graph, with activation sizes"),
         ("training-progress.png", "loss and accuracy of the first member on its training "
                                   "utterances (none is held out: the choices were made by "
                                   "cross-validation)"),
         ("attention.png", "self-attention weights (query step × key step) of a test utterance, "
                           "per head; the padded steps of shorter utterances get no weight")],
        {k: v for k, v in metrics.items() if k != "baseline"},
        "attnlab demo vowels --out demo-out")
    print(f"wrote {', '.join(files)} to {out}")
    return metrics


def save_sample(out: Path, data, Xte) -> str:
    """sample.npz: the longest test utterance as model.attnlab sees it (`Xte`: the test
    utterances standardised, with their deltas), for `attnlab view DIR`."""
    i = int(np.argmax([len(s) for s in data.X_test]))
    return C.save_sample(out, {"cepstrum": Xte[i]})
