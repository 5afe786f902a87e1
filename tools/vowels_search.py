"""The vowels demo's search harness: the network and augmentation with every option that
was tried (attnlab/cli/demos/vowels.py holds only the chosen one), for tools/vowels_cv.py.

With `TUNED` (the chosen configuration) `train_network` trains the demo's members: the same
draws and the same weights for the same seed. The candidates tried and their figures are in
docs/demos/vowels.md."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

import attnlab as al
from attnlab import layers as L
from attnlab.cli.demos import _common as C
from attnlab.core.errors import ArgumentError
from attnlab.training.losses import CrossEntropy
from attnlab.cli.demos.baselines import resample

EPOCHS = 150
SEED = 0


def build_network(channels: int = 64, heads: int = 4, dropout: float = 0.1,
                  scores: bool = False, pool: str = "attention",
                  position: bool | int = True, phase: bool = False, ffn: int = 0,
                  front: str = "dense", blocks: int = 1, input_dropout: float = 0.0,
                  delta: int = 0) -> al.Network:
    """Dense projection + position → SelfAttention (+ residual, LayerNorm) → AttentionPool1d →
    Dense(9). `pool` "attention+mean" concatenates the mean over time to the attention pool;
    `position` False leaves the position encoding out (attention then sees a set of steps), an
    int n makes it a learned embedding of n positions (for utterances resampled to n steps);
    `ffn` > 0 adds a feed-forward block of that width (+ residual, LayerNorm) after attention;
    `front` "conv" replaces the Dense projection by two Conv1d branches (kernels 3 and 5, half
    the channels each, concatenated, GELU): each step then sees its neighbours before attention;
    "lstm" by a bidirectional LSTM (half the channels each way): each step then carries its
    context in both directions; "fcn" by three Conv1d layers in a row (kernels 7, 5 and 3,
    `channels` each, each followed by LayerNorm and GELU), the fully convolutional front of
    LSTM-FCN: each step then sees up to 13 of its neighbours;
    `blocks` stacks that many attention blocks; `input_dropout` drops input values; `delta` d
    takes 12·d more input channels, the utterances' differences (`with_deltas`)."""
    net = al.Network()
    if front == "conv":
        embed = [L.Concatenation(2, name="embed"), L.GELU(name="embed-gelu")]
    elif front == "lstm":
        embed = [L.LSTM(channels // 2, bidirectional=True, name="embed")]
    elif front == "fcn":
        embed = [layer for kernel in (7, 5, 3)
                 for layer in (L.Conv1d(kernel, channels, name=f"conv{kernel}"),
                               L.LayerNorm(name=f"conv{kernel}-layernorm"),
                               L.GELU(name="embed" if kernel == 3 else f"conv{kernel}-gelu"))]
    else:
        embed = [L.Dense(channels, name="embed")]
    last_embed = embed[-1].name

    def tag(k: int) -> str:               # block 1's layers keep the plain names
        return "" if k == 0 else f"-{k + 1}"

    def block_out(k: int) -> str:
        return ("ffn-layernorm" if ffn else "layernorm") + tag(k)

    def block(k: int) -> list:
        return [L.SelfAttention(heads, channels, name=f"self-attention{tag(k)}",
                                has_scores_output=scores and k == 0),
                L.Dropout(dropout, name=f"dropout{tag(k)}"),
                L.Addition(2, name=f"residual{tag(k)}"), L.LayerNorm(name=f"layernorm{tag(k)}"),
                *([L.Dense(ffn, name=f"ffn-in{tag(k)}"), L.GELU(name=f"gelu{tag(k)}"),
                   L.Dense(channels, name=f"ffn-out{tag(k)}"),
                   L.Dropout(dropout, name=f"ffn-dropout{tag(k)}"),
                   L.Addition(2, name=f"ffn-residual{tag(k)}"),
                   L.LayerNorm(name=f"ffn-layernorm{tag(k)}")] if ffn else [])]

    head = [L.SequenceInput(CEPSTRUM * (1 + _deltas(delta)) + phase, name="cepstrum"),
            *([L.Dropout(input_dropout, name="input-dropout")] if input_dropout else [])]
    net.add([*head, *embed,
             *([L.Addition(2, name="add-position")] if position else []),
             *[layer for k in range(blocks) for layer in block(k)],
             L.AttentionPool1d(heads, name="attention-pool"),
             *([L.Concatenation(2, name="pools")] if pool == "attention+mean" else []),
             L.Dense(9, name="fc")])
    if front == "conv":                  # the list fed the input into embed/in1: re-route it
        net.disconnect(head[-1].name, "embed/in1")
        for k, kernel in enumerate((3, 5), start=1):
            conv = f"conv{kernel}"
            net.add(L.Conv1d(kernel, channels // 2, name=conv))
            net.connect(head[-1].name, conv)
            net.connect(conv, f"embed/in{k}")
    if position:
        net.add(L.PositionEmbedding(position, name="position")
                if position is not True else L.SinusoidalPositionEncoding(channels, name="position"))
        net.connect(last_embed, "position")
        net.connect("position", "add-position/in2")
    for k in range(blocks):                # the residual paths around each block
        before = ("add-position" if position else last_embed) if k == 0 else block_out(k - 1)
        net.connect(before, f"residual{tag(k)}/in2")
        if ffn:
            net.connect(f"layernorm{tag(k)}", f"ffn-residual{tag(k)}/in2")
    final = block_out(blocks - 1)
    if pool == "attention+mean":
        net.add(L.GlobalAvgPool1d(name="meanpool"))
        net.connect(final, "meanpool")
        net.connect("meanpool", "pools/in2")
    return net


CEPSTRUM = 12          # channels of an utterance; a 13th, the phase, may follow


def _deltas(delta) -> int:
    """`delta` checked: 0 (none), 1 (deltas) or 2 (deltas and delta-deltas)."""
    if isinstance(delta, bool) or delta not in (0, 1, 2):
        raise ArgumentError(f"vowels delta: expected 0, 1 or 2 (orders of differences over the "
                            f"steps to add as channels), received {delta!r}. Use 0 for none, 1 "
                            "for deltas, 2 for deltas and delta-deltas.")
    return int(delta)


def with_deltas(s, delta: int) -> np.ndarray:
    """`s` (T×12) followed by its differences over the steps (numpy.gradient: central,
    one-sided at the ends), as speech front ends append delta cepstra: T×24 with `delta` 1,
    T×36 with 2 (the deltas' differences too)."""
    parts = [np.asarray(s)]
    for _ in range(_deltas(delta)):
        parts.append(_gradient(parts[-1]) if len(s) > 1 else np.zeros_like(parts[-1]))
    return np.concatenate(parts, 1).astype(np.float32)


def _gradient(f: np.ndarray) -> np.ndarray:
    """numpy.gradient(f, axis=0) for T ≥ 2 steps, the same operations on the same numbers
    (central differences halved, one-sided at the ends) without its generality, which costs
    more than the arithmetic at every draw of an utterance."""
    out = np.empty_like(f)
    out[1:-1] = (f[2:] - f[:-2]) / 2.0
    out[0] = (f[1] - f[0]) / 1.0
    out[-1] = (f[-1] - f[-2]) / 1.0
    return out


def standardizer(X, phase: bool = False, length: int | None = None, delta: int = 0):
    """Standardises with the statistics of the steps of `X`; with `phase`, each utterance gets
    a 13th channel, its relative time from −1 (first step) to 1 (last), which lines up
    utterances of different lengths as resampling to a fixed length does; with `length`, each
    utterance is resampled (linearly) to that many steps, as the baseline sees them; with
    `delta` d, each gets 12·d more channels, its differences over the steps (`with_deltas`)."""
    if _deltas(delta) and phase:
        raise ArgumentError("vowels standardizer: expected delta 0 with phase (the phase channel "
                            "comes last, after the cepstrum), received delta "
                            f"{delta!r} and phase. Use one of them.")
    steps = np.concatenate(X)
    mean, std = steps.mean(0), steps.std(0) + 1e-6

    def apply(seqs):
        out = [((s - mean) / std).astype(np.float32) for s in seqs]
        if length:
            out = [resample(s, length).astype(np.float32) for s in out]
        if phase:
            out = [np.c_[s, np.linspace(-1.0, 1.0, len(s))].astype(np.float32) for s in out]
        if delta:
            out = [with_deltas(s, delta) for s in out]
        return out
    return apply


class Augmented(torch.utils.data.Dataset):
    """Training utterances, each changed a little every time it is drawn: mixed (with `mix`)
    with another utterance of the same speaker, which takes a share within [0, `mix`] (its
    time axis resampled to the first's; the label stays); its time axis stretched by a factor
    within 1 ± `warp` (linear resampling, at least 4 steps) — or, when the utterances have a
    fixed `length`, its relative time shifted and stretched: the window from a to b, a and
    b − 1 each within ±`warp`/2, resampled to `length` steps (beyond the ends the edge values
    repeat); every (standardised) channel multiplied by a factor within 1 ± `scale` and
    offset by a constant within ± `shift` (a recording channel adds a constant to each cepstrum
    coefficient), and Gaussian noise of `jitter` standard deviations added to every value;
    with `drift` = k, every step of an utterance offset by one draw from N(0, k·S), S the
    covariance of the utterance means around their speaker's mean (over `X`): the way one
    speaker's recordings differ from one another; with `trend` as well, the draw is a mean and
    a slope over relative time per channel, from their covariance over `X`; with `pooled` = w
    below 1, each speaker's draws come from w·S + (1 − w)·S_c instead, S_c that speaker's own
    covariance (some speakers vary more between recordings than others); with `crop` = c, an
    utterance is first cut to a random run of consecutive steps, 1 − c to all of them (at
    least 4), before anything else changes it; with `mask` = m, a run of 0 to m neighbouring
    channels (the width drawn uniformly) is set to 0, the standardised mean, at every step
    (SpecAugment's frequency masking); with `transfer` = k, every step offset by k times the
    deviation of another utterance of `X` (drawn uniformly, from any speaker) from its own
    speaker's mean curve (both resampled to 20 steps, the deviation then to the drawn
    utterance's length): the session drift and trajectory differences of real recordings
    rather than a Gaussian of their means (with `transfer_within`, another of the same
    speaker's, itself among them: some speakers vary more than others); with `delta` d, `X`
    holds `with_deltas` channels after the cepstrum: they are left out while an utterance
    changes and computed afresh from the changed one; with `mixup` = a, every draw is mixed
    with a draw of another training utterance (any speaker's, drawn uniformly and changed the
    same way, resampled to the first's steps), the second taking a share λ ~ Beta(a, a), and
    its target is the same mix of the two speakers' one-hot labels (mixup, Zhang et al. 2018:
    probabilities, not a label)."""

    def __init__(self, X, y, seed: int = 0, warp: float = 0.15, jitter: float = 0.05,
                 scale: float = 0.0, mix: float = 0.0, length: int | None = None,
                 shift: float = 0.0, drift: float = 0.0, trend: bool = False,
                 pooled: float = 1.0, crop: float = 0.0, mask: int = 0,
                 transfer: float = 0.0, transfer_within: bool = False, delta: int = 0,
                 mixup: float = 0.0):
        self.delta = _deltas(delta)
        if self.delta and any(np.shape(s)[1] != CEPSTRUM * (1 + self.delta) for s in X):
            raise ArgumentError(f"Augmented delta {delta}: expected utterances of "
                                f"{CEPSTRUM * (1 + self.delta)} channels (the cepstrum and its "
                                "differences, from standardizer(..., delta)), received "
                                f"{sorted({np.shape(s)[1] for s in X})}. Standardise with the "
                                "same delta.")
        self.X = [np.asarray(s, dtype=np.float32)[:, :CEPSTRUM] if self.delta else
                  np.asarray(s, dtype=np.float32) for s in X]
        self.y = np.asarray(y)
        self.rng = np.random.default_rng(seed)
        self.warp, self.jitter, self.scale, self.mix = warp, jitter, scale, mix
        self.length, self.shift = length, shift
        self.same = {c: np.flatnonzero(self.y == c) for c in np.unique(self.y)}
        if not drift >= 0:                      # a negative spread would be taken as positive
            raise ArgumentError(f"Augmented drift: expected a number ≥ 0 (the share of the "
                                f"within-speaker spread), received {drift!r}. Use 0 for none, "
                                "1 for the spread itself.")
        if not 0 <= pooled <= 1:
            raise ArgumentError(f"Augmented pooled: expected a share from 0 to 1 (of the pooled "
                                f"within-speaker spread), received {pooled!r}. Use 1 for one "
                                "spread shared by all speakers.")
        if not 0 <= crop < 1:
            raise ArgumentError(f"Augmented crop: expected a share from 0 to below 1 (of an "
                                f"utterance's steps that a crop may leave out), received "
                                f"{crop!r}. Use 0 for no cropping, 0.2 to keep 80–100 %.")
        if isinstance(mask, bool) or not (isinstance(mask, int) and 0 <= mask <= CEPSTRUM):
            raise ArgumentError(f"Augmented mask: expected a whole number of channels from 0 to "
                                f"{CEPSTRUM}, received {mask!r}. Use 0 for no masking, 2 to mask "
                                "up to two neighbouring channels.")
        if not transfer >= 0:
            raise ArgumentError(f"Augmented transfer: expected a number ≥ 0 (the share of "
                                f"another recording's deviation to add), received {transfer!r}. "
                                "Use 0 for none, 1 for the deviation itself.")
        self.crop, self.mask, self.pooled, self.transfer = crop, mask, pooled, transfer
        self.deviations = deviations(self.X, self.y) if transfer else None
        self._transferred: dict = {}
        if not isinstance(transfer_within, bool):
            raise ArgumentError(f"Augmented transfer_within: expected True or False, received "
                                f"{transfer_within!r}. Use True to draw deviations of the "
                                "utterance's own speaker only.")
        self.transfer_within = transfer_within
        if not mixup >= 0:
            raise ArgumentError(f"Augmented mixup: expected a number ≥ 0 (Beta(a, a)'s a for the "
                                f"mixed-in share), received {mixup!r}. Use 0 for no mixup, 0.3 "
                                "for shares mostly near 0 or 1.")
        self.mixup = mixup
        self.classes = int(self.y.max()) + 1 if len(self.y) else 0
        if transfer_within and not transfer:
            raise ArgumentError("Augmented transfer_within: expected transfer > 0 (it says whose "
                                "deviations transfer adds), received transfer 0. Give transfer, "
                                "e.g. 1.0, or leave transfer_within out.")
        self.drift: dict | None = None
        self.trend = trend
        if drift:
            pool = within_speaker_covariance(self.X, self.y, trend).astype(np.float64)
            shared = _factor(drift * pool) if pooled == 1 else None     # one for all speakers
            self.drift = {c: shared if shared is not None else _factor(
                              drift * (pooled * pool + (1 - pooled) * self._own_covariance(idx)))
                          for c, idx in self.same.items()}

    def __len__(self):
        return len(self.y)

    def _own_covariance(self, idx) -> np.ndarray:
        """The within-speaker covariance of the utterances `idx` (one speaker's)."""
        return within_speaker_covariance([self.X[i] for i in idx], self.y[idx],
                                         self.trend).astype(np.float64)

    def __getitem__(self, i):
        if not self.mixup:
            changed = self.change(self.X[i], self.y[i])
            return torch.as_tensor(changed, dtype=torch.float32), int(self.y[i])
        j = int(self.rng.integers(len(self.y)))
        share = self.rng.beta(self.mixup, self.mixup)
        first = self._change(self.X[i], self.y[i])
        # T×12: mixed before the deltas, which then follow the mix
        mixed = (1 - share) * first + share * resample(self._change(self.X[j], self.y[j]),
                                                       len(first))
        target = np.zeros(self.classes, dtype=np.float32)
        target[self.y[i]] += 1 - share
        target[self.y[j]] += share
        changed = with_deltas(mixed, self.delta) if self.delta else mixed
        return torch.as_tensor(changed, dtype=torch.float32), torch.as_tensor(target)

    def change(self, s, label=None) -> np.ndarray:
        """`s` (T×C, standardised) changed once, as a draw of it would be; `label` picks the
        speaker's drift spread, None the one shared by all (`pooled` 1: for utterances of no
        known speaker, as at test time)."""
        s = self._change(s, label)
        return with_deltas(s, self.delta) if self.delta else s

    def _change(self, s, label=None) -> np.ndarray:
        """`change` before the deltas: the changed cepstrum (and phase), T×12 (T×13)."""
        r = self.rng
        if self.delta:                          # differences follow the changed cepstrum
            s = np.asarray(s)[:, :CEPSTRUM]
        if self.crop:                           # a run of consecutive steps
            keep = max(min(4, len(s)), int(round(len(s) * r.uniform(1 - self.crop, 1.0))))
            start = int(r.integers(0, len(s) - keep + 1))
            s = s[start:start + keep]
        if self.mix:
            if label is None:
                raise ArgumentError(f"Augmented.change without a label: expected mix 0 (mixing "
                                    f"takes another utterance of the same speaker), received mix "
                                    f"{self.mix!r}. Pass the utterance's label, or use mix 0.")
            other = self.X[r.choice(self.same[label])]
            share = r.uniform(0.0, self.mix)
            s = (1 - share) * s + share * resample(other, len(s))
        if self.length:
            a, b = r.uniform(-self.warp / 2, self.warp / 2, 2) + (0.0, 1.0)
            t = np.linspace(a, b, self.length) * (len(s) - 1)
            s = np.stack([np.interp(t, np.arange(len(s)), s[:, c]) for c in range(s.shape[1])], 1)
        else:
            n = max(4, int(round(len(s) * r.uniform(1 - self.warp, 1 + self.warp))))
            s = resample(s, n)
        c = CEPSTRUM                            # a phase channel stays as warping left it
        s = s.copy()
        if self.scale:
            s[:, :c] *= r.uniform(1 - self.scale, 1 + self.scale, (1, c))
        if self.shift:
            s[:, :c] += r.uniform(-self.shift, self.shift, (1, c))
        if self.drift is not None:              # one draw: a mean (and a slope) per channel
            factor = self.drift[label] if label is not None else self._shared(self.drift)
            z = r.standard_normal(len(factor)) @ factor
            s[:, :c] += z[:c] + np.linspace(-1.0, 1.0, len(s))[:, None] * z[c:] if self.trend else z
        if self.deviations is not None:         # a real recording's departure from its speaker
            if self.transfer_within and label is None:
                raise ArgumentError("Augmented.change without a label: expected transfer_within "
                                    "False (it draws a deviation of the utterance's own "
                                    "speaker), received True. Pass the utterance's label.")
            pick = (r.choice(self.same[label]) if self.transfer_within
                    else r.integers(len(self.deviations)))
            key = (int(pick), len(s))           # a deviation at a length: the same numbers
            if key not in self._transferred:    # at every draw, computed once
                self._transferred[key] = self.transfer * resample(self.deviations[key[0]], len(s))
            s[:, :c] += self._transferred[key]
        if self.mask:                           # a run of 0 to `mask` channels
            width = int(r.integers(0, self.mask + 1))
            start = int(r.integers(0, c - width + 1))
            s[:, start:start + width] = 0.0
        s[:, :c] += r.normal(0.0, self.jitter, (len(s), c))
        return s

    def _shared(self, drift: dict) -> np.ndarray:
        if self.pooled != 1:
            raise ArgumentError(f"Augmented.change without a label: expected pooled 1 (one drift "
                                f"spread shared by all speakers), received pooled {self.pooled!r}. "
                                "Pass the utterance's label, or use pooled 1.")
        return next(iter(drift.values()))


def augmented_scores(nets, X, augmented: "Augmented", copies: int) -> torch.Tensor:
    """Test-time augmentation: the members' mean probabilities (N×9) over each utterance of `X`
    itself and `copies` copies of it changed by `augmented` (drawn from its stream; drift from
    the spread shared by all speakers: a test utterance's speaker is not known)."""
    if isinstance(copies, bool) or not (isinstance(copies, int) and copies >= 0):
        raise ArgumentError(f"augmented_scores copies: expected a whole number ≥ 0, received "
                            f"{copies!r}. Use 0 for the utterances alone, 8 for eight copies.")
    changed = [X] + [[augmented.change(s) for s in X] for _ in range(copies)]
    return torch.stack([C.ensemble_scores(nets, x) for x in changed]).mean(0)


def deviations(X, y, length: int = 20) -> np.ndarray:
    """Each utterance's departure from its speaker's mean curve (N×`length`×12): the
    utterances resampled to `length` steps, less the mean of their speaker's."""
    curves = np.stack([resample(s[:, :CEPSTRUM], length) for s in X])          # N×length×C
    y = np.asarray(y)
    means = {c: curves[y == c].mean(0) for c in np.unique(y)}
    return np.stack([curve - means[c] for curve, c in zip(curves, y)]).astype(np.float32)


def within_speaker_covariance(X, y, trend: bool = False) -> np.ndarray:
    """The covariance (C×C, over the cepstrum channels) of the utterances' mean steps around
    the mean of their speaker's utterance means; with `trend`, 2C×2C, of each utterance's
    least-squares line per channel over its relative time t ∈ [−1, 1] (the means, then the
    slopes)."""
    means = np.stack([_line(s[:, :CEPSTRUM]) if trend else s[:, :CEPSTRUM].mean(0)
                      for s in X])                                             # N×C (N×2C)
    centred = np.concatenate([means[y == c] - means[y == c].mean(0) for c in np.unique(y)])
    return centred.T @ centred / max(1, len(centred) - len(np.unique(y)))


def _factor(cov) -> np.ndarray:
    """F with z @ F ~ N(0, `cov`) for z standard normal. numpy's multivariate_normal takes the
    same SVD at every call: factored once, the draws are the same numbers at a fraction of the
    cost."""
    u, sv, _ = np.linalg.svd(np.asarray(cov, dtype=np.float64))
    return (u * np.sqrt(sv)).T


def _line(s) -> np.ndarray:
    """The mean and the least-squares slope of each channel of `s` (T×C) over t from −1 to 1."""
    t = np.linspace(-1.0, 1.0, len(s))
    return np.concatenate([s.mean(0), t @ (s - s.mean(0)) / max(float(t @ t), 1e-12)])


def warped_classify(nets, X, warps=(1.0,)) -> np.ndarray:
    """Labels by the members' mean probability over copies of each utterance whose time axis is
    stretched by each factor in `warps` (linear resampling, as in training; 1.0 is the
    utterance itself)."""
    copies = [X if w == 1.0 else [resample(s, max(4, int(round(len(s) * w)))).astype(np.float32)
                                  for s in X] for w in warps]
    return C.most_probable(nets, torch.stack([C.ensemble_scores(nets, x) for x in copies]).mean(0))


class SmoothedCrossEntropy(CrossEntropy):
    """Cross-entropy against labels smoothed by `smoothing` (torch's label_smoothing)."""

    def __init__(self, smoothing: float):
        super().__init__()
        self.smoothing = smoothing

    def terms(self, out, target):
        return F.cross_entropy(out, target, reduction="none", label_smoothing=self.smoothing)

    def sum(self, out, target, mask, local_units=None):
        return F.cross_entropy(out, target, reduction="sum", label_smoothing=self.smoothing)


class WeightAverage:
    """An `output_fn` that keeps an average of the network's weights (torch.optim.swa_utils):
    an exponential moving average with decay `ema`, or, with `swa` = f, the plain mean of the
    weights after every iteration of the last fraction f of training. `finish()` copies the
    average into the network."""

    def __init__(self, net, iterations: int, ema: float | None = None, swa: float | None = None):
        from torch.optim import swa_utils
        self.net, self.start = net, (0 if swa is None else int(iterations * (1 - swa)))
        self.fn = swa_utils.get_ema_multi_avg_fn(ema) if ema is not None else None
        self.model: swa_utils.AveragedModel | None = None

    def __call__(self, state) -> bool:
        from torch.optim import swa_utils
        if state.iteration >= self.start:
            if self.model is None:              # the network is initialised by now
                self.model = swa_utils.AveragedModel(self.net, multi_avg_fn=self.fn)
            self.model.update_parameters(self.net)
        return False

    def finish(self):
        if self.model is not None:
            self.net.load_state_dict(self.model.module.state_dict())


def bootstrap_sample(y, seed: int) -> np.ndarray:
    """Indices of a bootstrap sample that keeps each class's count: each class's utterances
    drawn with replacement, as many as it has (from `seed`'s own stream)."""
    rng, y = np.random.default_rng([seed, 1]), np.asarray(y)
    return np.concatenate([rng.choice(np.flatnonzero(y == c), np.sum(y == c))
                           for c in np.unique(y)])


def train_network(X, y, Xv, yv, epochs: int, out: Path | None = None, seed: int = SEED,
                  verbose: bool = True, lr: float = 1e-3, batch_size: int = 16, l2: float = 1e-2,
                  augment: dict | None = None, smoothing: float = 0.0,
                  average: dict | None = None, length: int | None = None,
                  bootstrap: bool = False, delta: int = 0, **net_kw):
    """One member: `X` standardised (and, with `length`, resampled to that many steps) by
    `standardizer`; `augment` holds `Augmented`'s keywords, `net_kw` `build_network`'s;
    `bootstrap` trains on a bootstrap sample (each speaker's utterances drawn with replacement,
    as many as it has: bagging); `delta` d: `X` holds `with_deltas` channels. The member
    depends on `seed` alone: `build_network` leaves the weights undrawn (`net.initialized` is
    False), and `al.train` draws them from `seed`."""
    if bootstrap:
        pick = bootstrap_sample(y, seed)
        X, y = [X[i] for i in pick], np.asarray(y)[pick]
    net = build_network(delta=delta, **net_kw)
    per_epoch = -(-len(y) // batch_size)
    averager = WeightAverage(net, per_epoch * epochs, **average) if average else None
    opts = al.TrainingOptions(solver="adamw", learning_rate=lr, l2=l2, max_epochs=epochs,
                              batch_size=batch_size, learning_rate_schedule="warmup-cosine",
                              warmup_iterations=50,
                              validation_data=(Xv, yv) if Xv is not None else None,
                              validation_frequency=max(1, len(y) // batch_size), seed=seed,
                              verbose=verbose, verbose_frequency=200, output_fn=averager,
                              plots="training-progress" if out else None,
                              plots_file=str(out / "training-progress.png") if out else None)
    source = ((Augmented(X, y, seed, length=length, delta=delta, **augment),) if augment
              else (X, y))
    loss = SmoothedCrossEntropy(smoothing) if smoothing else "crossentropy"
    info = al.train(net, *source, loss=loss, options=opts)
    if averager is not None:
        averager.finish()
    return net, info


def _train_member(views, y, configs, epochs, out, k, seed):
    """Member k of the demo (a module-level function: members may train in other processes)."""
    return train_network(views[k % len(views)], y, None, None, epochs, out if k == 0 else None,
                         seed=seed, verbose=k == 0, **configs[k])


def member_configs(members: int | None = None) -> list[dict]:
    """The `train_network` keywords of each member: `TUNED` with the member's view
    (member k takes `VIEWS[k mod len(VIEWS)]`)."""
    return [{**TUNED, **VIEWS[k % len(VIEWS)]} for k in range(members or MEMBERS)]


def member_view(config: dict, X_train, *others):
    """`X_train` and `others` as a member of `config` sees them: standardised with the
    statistics of `X_train`, resampled to `config["length"]` steps if it has one, with its
    differences as channels if it has a `delta`."""
    std = standardizer(X_train, phase=bool(config.get("phase")), length=config.get("length"),
                       delta=config.get("delta", 0))
    return [std(X) for X in (X_train, *others)]


def multiview_classify(nets, Xs) -> np.ndarray:
    """Labels by the members' mean probability, member k scoring the utterances `Xs[k]` (its
    own view of them)."""
    return C.most_probable(
        nets, torch.stack([C.ensemble_scores([n], X) for n, X in zip(nets, Xs)]).mean(0))


# The chosen configuration: attnlab/cli/demos/vowels.py trains it; docs/demos/vowels.md records how
# each candidate scored.
TUNED: dict = {"lr": 3e-3, "dropout": 0.3, "input_dropout": 0.05, "delta": 1,
               "augment": {"warp": 0.15, "jitter": 0.05, "scale": 0.2, "drift": 1.0,
                           "transfer": 1.0}}
MEMBERS = 8
VIEWS: list[dict] = [{}]       # member k: TUNED with VIEWS[k mod len(VIEWS)]: the steps as recorded


def _net_kw(kw):
    return {k: v for k, v in kw.items()
            if k in ("channels", "heads", "dropout", "pool", "position", "phase", "ffn", "front",
                     "blocks", "input_dropout", "delta")}
