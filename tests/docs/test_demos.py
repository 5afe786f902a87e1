"""The demos run end to end (one epoch) and write every file with the right metrics keys."""
import importlib.util
import json

import pytest

import attnlab as al
from attnlab.cli import DEMOS, main

NEEDS = {"digits": ["sklearn"], "vowels": ["sklearn", "sktime"],
         "forecast": ["statsmodels"], "roman": []}
COMMON = ["model.attnlab", "network.png", "training-progress.png", "attention.png", "sample.npz",
          "metrics.json", "report.html"]
EXTRA = {"digits": ["attention-map.png"], "forecast": ["forecast.png"]}
KEYS = {"digits": {"test_accuracy", "baseline_accuracy"},
        "vowels": {"test_accuracy", "baseline_accuracy"},
        "forecast": {"test_rmse", "seasonal_naive_rmse", "seasonal_naive_drift_rmse",
                     "holt_winters_rmse"},
        "roman": {"test_exact_match"}}


def _skip_without(name):
    missing = [p for p in NEEDS[name] if importlib.util.find_spec(p) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (pip install 'attnlab[data]')")


@pytest.mark.parametrize("name", sorted(NEEDS))
def test_demo_runs_and_writes_everything(name, tmp_path):
    _skip_without(name)
    assert name in DEMOS
    assert main(["demo", name, "--out", str(tmp_path), "--epochs", "1", "--seed", "3"]) == 0
    out = tmp_path / name
    for f in COMMON + EXTRA.get(name, []):
        assert (out / f).is_file() and (out / f).stat().st_size > 0, f
    metrics = json.loads((out / "metrics.json").read_text())
    assert KEYS[name] <= set(metrics)
    for k in KEYS[name]:
        assert isinstance(metrics[k], float)
    assert metrics["seed"] == 3 and metrics["machine"]["cpus"] >= 1
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") >= 3 and "src=\"http" not in html
    net = al.load(out / "model.attnlab")
    assert net.analyze().ok


def test_demo_baselines_on_the_issue_splits():
    """The classical baselines reproduce the numbers measured when the issue was filed."""
    from attnlab.demos import baselines as B
    pytest.importorskip("statsmodels")
    s = al.datasets.co2()
    f = B.seasonal_forecasts(s.train, 52, 52)
    assert B.rmse(f["seasonal_naive"], s.test) == pytest.approx(1.57, abs=0.005)
    assert B.rmse(f["seasonal_naive_drift"], s.test) == pytest.approx(0.60, abs=0.005)
    assert B.rmse(f["holt_winters"], s.test) == pytest.approx(0.52, abs=0.005)


def test_demo_seeds_write_each_run_and_their_mean_and_sd(tmp_path, capsys):
    assert main(["demo", "roman", "--out", str(tmp_path), "--epochs", "1", "--seed", "4",
                 "--seeds", "2"]) == 0
    out = tmp_path / "roman"
    runs = [json.loads((out / f"seed-{s}" / "metrics.json").read_text()) for s in (4, 5)]
    assert [r["seed"] for r in runs] == [4, 5]
    summary = json.loads((out / "metrics.json").read_text())
    assert summary["seeds"] == [4, 5] and summary["headline"] == "test_exact_match"
    values = [r["test_exact_match"] for r in runs]
    assert summary["mean"]["test_exact_match"] == pytest.approx(sum(values) / 2)
    assert summary["sd"]["test_exact_match"] == pytest.approx(abs(values[0] - values[1]) / 2 ** 0.5)
    assert "mean ± sd over seeds 4, 5" in capsys.readouterr().out


@pytest.mark.parametrize("seed, seeds, bad", [(-1, 1, "'seed'"), (0, 0, "'seeds'"),
                                              (0, 2.5, "'seeds'")])
def test_demo_seed_arguments_are_checked(seed, seeds, bad):
    from attnlab.demos import seeds as S
    with pytest.raises(al.ArgumentError) as e:
        S.check(seed, seeds)
    assert bad in str(e.value) and repr(seed if bad == "'seed'" else seeds) in str(e.value)


def test_training_prints_a_line_per_validation_outside_a_terminal(capsys):
    import torch
    from attnlab import layers as L
    torch.manual_seed(0)
    x, y = torch.randn(64, 4), torch.randint(0, 2, (64,))
    net = al.Network([L.FeatureInput(4), L.Dense(2)])
    al.train(net, x, y, max_epochs=6, batch_size=8, verbose_frequency=2,
             validation_data=(x, y), validation_frequency=8)
    lines = [l for l in capsys.readouterr().out.splitlines() if l.startswith("epoch ")]
    assert len(lines) == 4 + 6         # 48 iterations: logs at 2, 4, 6, 8, then 6 validations
    assert all("val_loss" in l and "  loss " in l for l in lines[4:])


@pytest.mark.parametrize("drift", [0, 5])
def test_forecast_features_turn_true_departures_back_into_the_levels(drift):
    """Departures from the local growth rate, fed through `levels`, give back the series: the
    closed loop's sum is the inverse of its features."""
    import numpy as np
    from attnlab.demos.forecast import Features

    t = np.arange(60, dtype=np.float64)
    values = 300 + 0.01 * t ** 2 + np.sin(t / 3)            # growth that speeds up, and a cycle
    dates = np.datetime64("2000-01-02") + 7 * t.astype("timedelta64[D]")
    feats = Features(values[:-10], drift)
    z = feats.inputs(values, dates)
    assert z.shape == (len(values) - 1 - drift, 3)
    np.testing.assert_allclose(feats.levels(values[:-10], z[-10:, 0]), values[-10:], atol=1e-4)


def test_vowels_label_smoothing_is_torchs():
    import torch
    import torch.nn.functional as F
    from attnlab.demos.vowels import SmoothedCrossEntropy
    out, target = torch.randn(5, 9), torch.tensor([0, 3, 8, 1, 1])
    loss = SmoothedCrossEntropy(0.1)
    expected = F.cross_entropy(out, target, reduction="sum", label_smoothing=0.1)
    assert torch.allclose(loss.sum(out, target, None), expected)
    assert torch.allclose(loss.terms(out, target).sum(), expected)


def test_vowels_weight_average_holds_the_mean_of_the_last_iterations():
    import torch
    from attnlab.demos.vowels import WeightAverage

    class Step:
        def __init__(self, iteration):
            self.iteration = iteration

    net = torch.nn.Linear(2, 1)
    avg = WeightAverage(net, iterations=4, swa=0.5)           # the mean of iterations 2 and 3
    seen = []
    for it in range(4):
        with torch.no_grad():
            net.weight.fill_(float(it))
        assert avg(Step(it)) is False                         # never stops training
        seen.append(float(it))
    avg.finish()
    assert torch.allclose(net.weight, torch.full((1, 2), 2.5))


def test_vowels_augmentation_keeps_channels_and_labels():
    import numpy as np
    from attnlab.demos.vowels import Augmented
    X = [np.ones((10, 12), np.float32), np.ones((7, 12), np.float32)]
    data = Augmented(X, [4, 2], seed=1, warp=0.2, jitter=0.0, scale=0.1)
    x, label = data[0]
    assert x.shape[1] == 12 and 8 <= x.shape[0] <= 12 and label == 4
    column = x[:, 0]
    assert torch_all_close(column, column[0]) and 0.9 <= float(column[0]) <= 1.1   # one factor per channel


def test_vowels_augmentation_at_a_fixed_length_and_mixed_within_the_speaker():
    import numpy as np
    from attnlab.demos.vowels import Augmented
    X = [np.zeros((10, 12), np.float32), np.ones((7, 12), np.float32),
         np.full((9, 12), 3.0, np.float32)]
    data = Augmented(X, [4, 2, 4], seed=0, warp=0.2, jitter=0.0, mix=0.5, length=20)
    x, label = data[0]                      # mixed with itself or with utterance 2 (speaker 4)
    assert x.shape == (20, 12) and label == 4
    assert 0.0 <= float(x.min()) and float(x.max()) <= 1.5
    x, label = data[1]                      # speaker 2 has one utterance: mixed with itself
    assert label == 2 and torch_all_close(x, 1.0)


@pytest.mark.parametrize("kw", [{"front": "conv"}, {"front": "lstm"}, {"front": "fcn"},
                                {"blocks": 2, "ffn": 16},
                                {"input_dropout": 0.1, "pool": "attention+mean"}])
def test_vowels_network_variants_build_and_run(kw):
    import numpy as np
    from attnlab.demos.vowels import build_network, standardizer
    X = [np.random.default_rng(k).normal(size=(n, 12)) for k, n in enumerate((9, 5))]
    fixed = standardizer(X, length=20)(X)
    assert [s.shape for s in fixed] == [(20, 12), (20, 12)]
    net = build_network(channels=16, heads=2, **kw)
    assert net.analyze().ok
    assert tuple(net.predict([s.astype(np.float32) for s in X]).shape) == (2, 9)


def test_vowels_augmentation_offsets_each_channel_by_one_constant():
    import numpy as np
    from attnlab.demos.vowels import Augmented
    data = Augmented([np.zeros((8, 12), np.float32)], [1], seed=2, warp=0.0, jitter=0.0,
                     shift=0.3)
    x, _ = data[0]
    assert torch_all_close(x - x[0], 0.0)                  # the same offset at every step
    assert float(x.abs().max()) <= 0.3 and float(x[0].std()) > 0   # one per channel


def test_vowels_within_speaker_covariance_against_a_naive_sum():
    import numpy as np
    from attnlab.demos.vowels import within_speaker_covariance
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(5, 9)), 12)) for _ in range(7)]
    y = np.array([0, 0, 1, 1, 1, 2, 2])
    means = [x.mean(0) for x in X]
    centre = {c: np.mean([m for m, k in zip(means, y) if k == c], 0) for c in (0, 1, 2)}
    naive = sum(np.outer(m - centre[k], m - centre[k]) for m, k in zip(means, y)) / (7 - 3)
    assert np.allclose(within_speaker_covariance(X, y), naive)


def test_vowels_drift_offsets_an_utterance_by_one_draw_of_the_within_speaker_spread():
    import numpy as np
    import torch
    from attnlab.demos.vowels import Augmented, within_speaker_covariance
    rng = np.random.default_rng(1)
    X = [rng.normal(size=(6, 12)).astype(np.float32) + k % 3 for k in range(12)]
    y = np.arange(12) % 3
    data = Augmented(X, y, seed=4, warp=0.0, jitter=0.0, drift=0.5)
    x, label = data[5]
    step = x - torch.as_tensor(X[5])
    assert label == 2 and float((step - step[0]).abs().max()) < 1e-5   # one offset a step
    # the draws are numpy's multivariate_normal's, from the same stream, with the factor kept
    cov = 0.5 * within_speaker_covariance(data.X, y).astype(np.float64)
    stream = np.random.default_rng(4)
    stream.uniform(1.0, 1.0)                                      # the (null) time warp's draw
    expected = stream.multivariate_normal(np.zeros(12), cov)
    assert np.allclose(step[0].numpy(), expected, atol=1e-5)
    draws = np.stack([(data[0][0] - torch.as_tensor(X[0]))[0].numpy() for _ in range(4000)])
    assert np.allclose(np.cov(draws.T), cov, atol=0.05)


@pytest.mark.parametrize("argument", ["drift", "transfer"])
@pytest.mark.parametrize("value", [-1.0, float("nan")])
def test_vowels_drift_and_transfer_must_not_be_negative(argument, value):
    import numpy as np
    from attnlab.demos.vowels import Augmented
    from attnlab.errors import ArgumentError
    with pytest.raises(ArgumentError,
                       match=rf"{argument}: expected a number ≥ 0 .* Use 0 for none"):
        Augmented([np.zeros((5, 12), np.float32)] * 2, [0, 1], **{argument: value})


def test_vowels_drift_shrinks_each_speakers_own_spread_towards_the_pooled_one():
    import numpy as np
    import torch
    from attnlab.demos.vowels import Augmented, within_speaker_covariance
    rng = np.random.default_rng(3)
    # speaker 1 varies three times as much between recordings as speaker 0
    X = [(rng.normal(size=(1, 12)) * (1 + 2 * (k % 2)) + rng.normal(size=(5, 12)) * 0.1)
         .astype(np.float32) for k in range(40)]
    y = np.arange(40) % 2
    data = Augmented(X, y, seed=5, warp=0.0, jitter=0.0, drift=1.0, pooled=0.25)
    pool = within_speaker_covariance(data.X, y).astype(np.float64)
    for k in (0, 1):
        own = within_speaker_covariance([x for x, c in zip(data.X, y) if c == k], y[y == k])
        draws = np.stack([(data[k][0] - torch.as_tensor(X[k]))[0].numpy() for _ in range(4000)])
        expected = 0.25 * pool + 0.75 * own
        assert np.allclose(np.cov(draws.T), expected, atol=0.1 * np.abs(expected).max())
    spread = [np.trace(f.T @ f) for f in (data.drift[0], data.drift[1])]
    assert spread[1] > 2 * spread[0]       # about 8 against 2 (one shared spread: level)


@pytest.mark.parametrize("pooled", [-0.5, 1.5, float("nan")])
def test_vowels_pooled_share_must_lie_in_0_1(pooled):
    import numpy as np
    from attnlab.demos.vowels import Augmented
    from attnlab.errors import ArgumentError
    with pytest.raises(ArgumentError, match=r"pooled: expected a share from 0 to 1 .* Use 1"):
        Augmented([np.zeros((5, 12), np.float32)] * 2, [0, 1], drift=1.0, pooled=pooled)


def test_vowels_drift_with_a_trend_adds_a_line_per_channel():
    import numpy as np
    from attnlab.demos.vowels import Augmented, _line, within_speaker_covariance
    rng = np.random.default_rng(2)
    X = [rng.normal(size=(int(rng.integers(6, 10)), 12)).astype(np.float32) for _ in range(12)]
    y = np.arange(12) % 3
    t = np.linspace(-1.0, 1.0, 7)
    fit = np.linalg.lstsq(np.c_[np.ones(7), t], X[0][:7], rcond=None)[0]      # 2×C
    assert np.allclose(_line(X[0][:7]), fit.ravel(), atol=1e-6)
    assert within_speaker_covariance(X, y, trend=True).shape == (24, 24)
    data = Augmented(X, y, seed=3, warp=0.0, jitter=0.0, drift=1.0, trend=True)
    x, _ = data[4]
    offset = x.numpy() - X[4]
    second = np.diff(offset, axis=0)                     # a straight line: equal steps
    assert np.allclose(second, second[0], atol=1e-5) and np.abs(second).max() > 1e-4


def test_vowels_crop_keeps_a_run_of_consecutive_steps():
    import numpy as np
    from attnlab.demos.vowels import Augmented
    X = [np.arange(20 * 12, dtype=np.float32).reshape(20, 12),
         np.arange(4 * 12, dtype=np.float32).reshape(4, 12)]
    data = Augmented(X, [0, 1], seed=3, warp=0.0, jitter=0.0, crop=0.3)
    lengths = set()
    for _ in range(200):
        x, _ = data[0]
        x = x.numpy()
        start = int(x[0, 0]) // 12
        assert np.array_equal(x, X[0][start:start + len(x)])      # consecutive steps, unchanged
        lengths.add(len(x))
    assert min(lengths) == 14 and max(lengths) == 20            # 70–100 % of 20 steps
    assert np.array_equal(data[1][0].numpy(), X[1])            # at least 4 steps: all of 4


@pytest.mark.parametrize("crop", [-0.1, 1.0, float("nan")])
def test_vowels_crop_share_must_lie_below_1(crop):
    import numpy as np
    from attnlab.demos.vowels import Augmented
    from attnlab.errors import ArgumentError
    with pytest.raises(ArgumentError, match=r"crop: expected a share from 0 to below 1 .* Use 0"):
        Augmented([np.zeros((5, 12), np.float32)] * 2, [0, 1], crop=crop)


def test_vowels_mask_sets_a_run_of_neighbouring_channels_to_the_mean():
    import numpy as np
    from attnlab.demos.vowels import Augmented
    X = [np.ones((9, 12), np.float32), np.ones((5, 12), np.float32)]
    data = Augmented(X, [0, 1], seed=2, warp=0.0, jitter=0.0, mask=2)
    widths, masked_channels = set(), set()
    for _ in range(400):
        x = data[0][0].numpy()
        masked = np.flatnonzero(x[0] == 0.0)
        assert np.all(x[:, masked] == 0.0) and np.all(x[:, np.setdiff1d(range(12), masked)] == 1)
        assert len(masked) <= 2 and (len(masked) < 2 or masked[1] == masked[0] + 1)
        widths.add(len(masked))
        masked_channels.update(masked.tolist())
    assert widths == {0, 1, 2} and masked_channels == set(range(12))   # the edges too


@pytest.mark.parametrize("mask", [-1, 13, 1.5, True])
def test_vowels_mask_must_be_a_whole_number_of_channels(mask):
    import numpy as np
    from attnlab.demos.vowels import Augmented
    from attnlab.errors import ArgumentError
    with pytest.raises(ArgumentError, match=r"mask: expected a whole number of channels from 0 "
                                            r"to 12, received .* Use 0 for no masking"):
        Augmented([np.zeros((5, 12), np.float32)] * 2, [0, 1], mask=mask)


def test_vowels_deltas_are_the_differences_over_the_steps_against_a_naive_loop():
    import numpy as np
    from attnlab.demos.vowels import with_deltas
    s = np.random.default_rng(0).normal(size=(7, 12))
    naive = np.empty_like(s)
    for t in range(7):                      # central inside, one-sided at the ends
        lo, hi = max(t - 1, 0), min(t + 1, 6)
        naive[t] = (s[hi] - s[lo]) / (hi - lo)
    out = with_deltas(s, 2)
    assert out.shape == (7, 36) and out.dtype == np.float32
    np.testing.assert_allclose(out[:, :12], s, rtol=1e-6)
    np.testing.assert_allclose(out[:, 12:24], naive, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out[:, 24:], np.gradient(naive, axis=0), rtol=1e-5, atol=1e-6)
    assert np.all(with_deltas(s[:1], 1)[:, 12:] == 0)           # one step: no change to measure
    from attnlab.demos.vowels import _gradient
    rng = np.random.default_rng(1)
    for steps in (2, 3, 29):                # numpy.gradient's very numbers, in both precisions
        for dtype in (np.float32, np.float64):
            f = rng.normal(size=(steps, 12)).astype(dtype)
            assert _gradient(f).dtype == dtype
            assert np.array_equal(_gradient(f), np.gradient(f, axis=0))


def test_vowels_augmented_deltas_follow_the_changed_cepstrum():
    import numpy as np
    from attnlab.demos.vowels import Augmented, build_network, standardizer, with_deltas
    X = [np.random.default_rng(k).normal(size=(n, 12)) for k, n in enumerate((9, 5, 12))]
    view = standardizer(X, delta=1)(X)
    assert [v.shape for v in view] == [(9, 24), (5, 24), (12, 24)]
    data = Augmented(view, [0, 1, 0], seed=3, warp=0.15, jitter=0.05, scale=0.2, delta=1)
    for i in range(3):
        x = data[i][0].numpy()
        assert x.shape[1] == 24
        np.testing.assert_allclose(x, with_deltas(x[:, :12], 1), rtol=1e-5, atol=1e-6)
        changed = data.change(view[i])          # a held-out utterance with its deltas
        np.testing.assert_allclose(changed, with_deltas(changed[:, :12], 1), atol=1e-6)
    net = build_network(channels=16, heads=2, delta=1)
    assert tuple(net.predict(view).shape) == (3, 9)


@pytest.mark.parametrize("kw, match", [
    ({"delta": 3}, r"delta: expected 0, 1 or 2 .* received 3\. Use 0 for none"),
    ({"delta": True}, r"delta: expected 0, 1 or 2 .* received True"),
    ({"delta": 1, "phase": True}, r"expected delta 0 with phase .* Use one of them")])
def test_vowels_delta_arguments_are_checked(kw, match):
    import numpy as np
    from attnlab.demos.vowels import standardizer
    from attnlab.errors import ArgumentError
    with pytest.raises(ArgumentError, match=match):
        standardizer([np.zeros((5, 12))], **kw)


def test_vowels_augmented_deltas_need_utterances_standardised_with_them():
    import numpy as np
    from attnlab.demos.vowels import Augmented
    from attnlab.errors import ArgumentError
    with pytest.raises(ArgumentError, match=r"delta 1: expected utterances of 24 channels .* "
                                            r"received \[12\]\. Standardise with the same"):
        Augmented([np.zeros((5, 12), np.float32)] * 2, [0, 1], delta=1)


def test_vowels_transfer_adds_another_recordings_departure_from_its_speaker():
    import numpy as np
    from attnlab.demos.baselines import resample
    from attnlab.demos.vowels import Augmented, deviations
    rng = np.random.default_rng(1)
    X = [rng.normal(size=(n, 12)).astype(np.float32) for n in (8, 11, 6, 9)]
    y = [0, 0, 1, 1]
    dev = deviations(X, y)
    assert dev.shape == (4, 20, 12)
    for i, c in enumerate(y):                   # naive: curve less its speaker's mean curve
        same = [resample(X[j], 20) for j in range(4) if y[j] == c]
        np.testing.assert_allclose(dev[i], resample(X[i], 20) - np.mean(same, 0), atol=1e-5)
    np.testing.assert_allclose(dev[0] + dev[1], 0, atol=1e-5)   # a speaker's departures cancel
    data = Augmented(X, y, seed=4, warp=0.0, jitter=0.0, transfer=0.5)
    added = [data.change(X[2]) - X[2] for _ in range(200)]
    candidates = [0.5 * resample(d, 6) for d in dev]
    hits = [int(np.argmin([np.abs(a - c).max() for c in candidates])) for a in added]
    assert all(np.abs(a - candidates[h]).max() < 1e-5 for a, h in zip(added, hits))
    assert set(hits) == {0, 1, 2, 3}            # from any speaker, its own included
    assert data._transferred and all(np.array_equal(v, 0.5 * resample(dev[i], n))
                                     for (i, n), v in data._transferred.items())   # cached alike


def test_vowels_transfer_within_draws_the_speakers_own_deviations():
    import numpy as np
    from attnlab.demos.baselines import resample
    from attnlab.demos.vowels import Augmented, deviations
    from attnlab.errors import ArgumentError
    rng = np.random.default_rng(2)
    X = [rng.normal(size=(n, 12)).astype(np.float32) for n in (8, 11, 6, 9, 7)]
    y = [0, 0, 1, 1, 1]
    dev = deviations(X, y)
    data = Augmented(X, y, seed=5, warp=0.0, jitter=0.0, transfer=1.0, transfer_within=True)
    hits = set()
    for _ in range(200):
        added = data.change(X[0], 0) - X[0]
        errors = [np.abs(added - resample(d, 8)).max() for d in dev]
        assert min(errors) < 1e-5
        hits.add(int(np.argmin(errors)))
    assert hits == {0, 1}                       # speaker 0's, its own among them
    with pytest.raises(ArgumentError, match=r"without a label: expected transfer_within False"):
        data.change(X[0])
    with pytest.raises(ArgumentError, match=r"transfer_within: expected transfer > 0"):
        Augmented(X, y, transfer_within=True)
    with pytest.raises(ArgumentError, match=r"transfer_within: expected True or False, received "
                                            r"'yes'"):
        Augmented(X, y, transfer=1.0, transfer_within="yes")


def test_vowels_mixup_mixes_two_draws_and_their_labels_alike():
    import numpy as np
    import torch
    from attnlab.demos.vowels import Augmented, train_network
    from attnlab.errors import ArgumentError
    # every utterance holds its speaker's number at every step: a mix then holds the mean
    # speaker number under its own target, whatever was drawn
    y = np.arange(18) % 9
    X = [np.full((5 + k % 4, 12), float(c), np.float32) for k, c in enumerate(y)]
    for delta in (0, 1):
        Xd = [np.c_[s, np.zeros_like(s)] for s in X] if delta else X
        data = Augmented(Xd, y, seed=3, warp=0.0, jitter=0.0, mixup=0.4, delta=delta)
        mixed = 0
        for i in range(len(y)):
            for _ in range(10):
                x, target = data[i]
                assert x.shape == (len(X[i]), 12 * (1 + delta))    # the first's steps
                assert target.dtype == torch.float32 and target.shape == (9,)
                assert torch.isclose(target.sum(), torch.tensor(1.0))
                assert (target > 0).sum() <= 2 and target[y[i]] > 0
                expected = float((target * torch.arange(9.0)).sum())
                assert torch.allclose(x[:, :12], torch.full_like(x[:, :12], expected), atol=1e-5)
                if delta:                               # deltas of the mix: a constant's are 0
                    assert torch.allclose(x[:, 12:], torch.zeros_like(x[:, 12:]), atol=1e-5)
                mixed += int((target > 0).sum() == 2)
        assert mixed > 100                              # most draws mix two speakers
    plain = Augmented(X, y, seed=3)[0]
    assert isinstance(plain[1], int) and plain[1] == y[0]   # without mixup: the label
    net, _ = train_network(X, y, None, None, 1, verbose=False, channels=8, heads=2,
                           augment={"mixup": 0.3})          # probability targets train
    assert all(torch.isfinite(p).all() for p in net.parameters())
    for bad in (-0.1, float("nan")):
        with pytest.raises(ArgumentError, match=r"mixup: expected a number ≥ 0 .* received"):
            Augmented(X, y, mixup=bad)


def test_vowels_test_time_augmentation_averages_the_utterance_and_its_changed_copies():
    import numpy as np
    import torch
    import attnlab.demos.vowels as V
    from attnlab.demos import _common as C
    from attnlab.errors import ArgumentError
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(6, 12)), 12)).astype(np.float32) for _ in range(18)]
    y = np.arange(18) % 9
    net = V.build_network(channels=8, heads=2)
    torch.manual_seed(0)
    net.initialize()
    keywords = {"warp": 0.15, "jitter": 0.05, "scale": 0.2, "drift": 1.0}
    assert torch.equal(V.augmented_scores([net], X[:4], V.Augmented(X, y, 5, **keywords), 0),
                       C.ensemble_scores([net], X[:4]))
    got = V.augmented_scores([net], X[:4], V.Augmented(X, y, 5, **keywords), 3)
    same = V.Augmented(X, y, 5, **keywords)           # the same stream, drawn by hand
    copies = [X[:4]] + [[same.change(s) for s in X[:4]] for _ in range(3)]
    expected = torch.stack([C.ensemble_scores([net], c) for c in copies]).mean(0)
    assert torch.allclose(got, expected)
    assert not torch.allclose(got, C.ensemble_scores([net], X[:4]))     # the copies count
    with pytest.raises(ArgumentError, match=r"without a label: expected pooled 1 .* Pass the"):
        V.Augmented(X, y, 5, drift=1.0, pooled=0.5).change(X[0])
    with pytest.raises(ArgumentError, match=r"without a label: expected mix 0 .* Pass the"):
        V.Augmented(X, y, 5, mix=0.3).change(X[0])
    for copies in (-1, 2.0, True):
        with pytest.raises(ArgumentError, match=r"copies: expected a whole number ≥ 0, received"):
            V.augmented_scores([net], X[:4], V.Augmented(X, y, 5), copies)


def test_vowels_report_names_each_augmentation_it_uses():
    from attnlab.demos.vowels import _augment_text
    text = _augment_text({"warp": 0.15, "jitter": 0.05, "scale": 0.2, "drift": 1.0})
    assert text == ("time-warped ±15 %, channel-scaled ±20 %, offset by a draw from their "
                    "speaker's spread between recordings and jittered (0.05 sd)")
    assert _augment_text({"warp": 0.25, "jitter": 0.1}) == "time-warped ±25 % and jittered (0.1 sd)"
    assert "(× 0.5)" in _augment_text({"drift": 0.5}) and "channel" not in _augment_text({})
    assert "(50 % each speaker's own, the rest shared by all)" in _augment_text(
        {"drift": 1.0, "pooled": 0.5})
    assert _augment_text({"crop": 0.2, "jitter": 0.1}) == (
        "cut to a random run of 80–100 % of their steps, time-warped ±15 % and jittered (0.1 sd)")
    assert _augment_text({"mask": 2, "jitter": 0.1}) == (
        "time-warped ±15 %, with a run of up to 2 neighbouring channels masked and jittered "
        "(0.1 sd)")
    assert _augment_text({"transfer": 1.0, "jitter": 0.1}) == (
        "time-warped ±15 %, offset by another recording's departure from its speaker's mean "
        "curve and jittered (0.1 sd)")
    assert _augment_text({"jitter": 0.1, "mixup": 0.3}) == (
        "time-warped ±15 %, jittered (0.1 sd) and mixed with another utterance (any speaker's), "
        "the target the same mix of the two labels (mixup, share ~ Beta(0.3, 0.3))")


def test_vowels_members_take_their_views_in_turn(monkeypatch):
    import numpy as np
    import attnlab.demos.vowels as V
    monkeypatch.setattr(V, "VIEWS", [{}, {"length": 20, "position": 20}])
    configs = V.member_configs(3)
    assert [c.get("length") for c in configs] == [None, 20, None]
    assert all(c["lr"] == V.TUNED["lr"] for c in configs)
    X = [np.random.default_rng(k).normal(size=(n, 12)) for k, n in enumerate((9, 5, 14))]
    views = [V.member_view(c, X[:2], X[2:]) for c in configs[:2]]
    channels = 12 * (1 + V.TUNED.get("delta", 0))          # the cepstrum (and its deltas)
    assert [s.shape for s in views[0][1]] == [(14, channels)]
    assert views[1][1][0].shape == (20, channels)
    nets = [V.build_network(channels=16, heads=2, **V._net_kw(c)) for c in configs[:2]]
    pred = V.multiview_classify(nets, [v[1] for v in views])
    import attnlab.demos._common as C
    mean = (C.ensemble_scores(nets[:1], views[0][1]) + C.ensemble_scores(nets[1:], views[1][1])) / 2
    assert pred.tolist() == mean.argmax(-1).tolist()


def torch_all_close(a, value):
    import torch
    return bool(torch.allclose(a, torch.full_like(a, float(value))))


def test_vowels_members_trained_in_two_processes_are_those_of_one():
    import functools
    import numpy as np
    import torch
    import attnlab.demos.vowels as V
    import attnlab.demos._common as C
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(n, 12)) for n in rng.integers(7, 15, 18)]
    y = np.arange(18) % 9
    configs = V.member_configs(3)
    views = [V.member_view(c, X)[0] for c in configs[:len(V.VIEWS)]]
    train = functools.partial(V._train_member, views, y, configs, 2, None)
    with C.demo_threads(1):                  # as the demo runs; the workers take 1 thread each
        alone, _ = C.train_members(train, 3, 1, workers=1)
        together, infos = C.train_members(train, 3, 1, workers=2)
    assert len(together) == len(infos) == 3
    for a, b in zip(alone, together):
        sa, sb = a.state_dict(), b.state_dict()
        assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_digits_members_trained_in_two_processes_are_those_of_one():
    import functools
    import numpy as np
    import torch
    import attnlab.demos.digits as D
    import attnlab.demos._common as C
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, size=(20, 1, 8, 8)).astype(np.float32)      # N×1×8×8, as the demo
    y = np.arange(20) % 10
    train = functools.partial(D._train_member, X, y, X[:10], y[:10], 1, None)
    with C.demo_threads(1):                  # as the demo runs; the workers take 1 thread each
        alone, _ = C.train_members(train, 2, 3, workers=1)
        together, _ = C.train_members(train, 2, 3, workers=2)
    for a, b in zip(alone, together):
        sa, sb = a.state_dict(), b.state_dict()
        assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_vowels_bootstrap_sample_keeps_each_speakers_count():
    import numpy as np
    import attnlab.demos.vowels as V
    y = np.repeat(np.arange(9), 30)
    a, b = V.bootstrap_sample(y, 0), V.bootstrap_sample(y, 1)
    assert np.array_equal(a, V.bootstrap_sample(y, 0)) and not np.array_equal(a, b)
    assert np.array_equal(np.bincount(y[a], minlength=9), np.full(9, 30))
    assert len(np.unique(a)) < len(y)                     # drawn with replacement


def test_resample_gives_np_interps_numbers_channel_by_channel():
    import numpy as np
    from attnlab.demos.baselines import resample
    rng = np.random.default_rng(0)
    for T in (1, 2, 3, 7, 20, 29):
        for length in (0, 1, 2, 4, 13, 20, 35):
            x = rng.normal(size=(T, 12)) * 10.0 ** rng.integers(-3, 4)
            old, new = np.linspace(0.0, 1.0, T), np.linspace(0.0, 1.0, length)
            want = np.stack([np.interp(new, old, x[:, c]) for c in range(12)], axis=1) \
                if length else np.zeros((0, 12))
            got = resample(x, length)
            assert got.shape == want.shape and np.array_equal(got, want)      # bit for bit
    x = rng.normal(size=(5, 2))
    resample(x, 9)[:] = 0.0                        # the result is the caller's to change…
    assert np.array_equal(resample(x, 9)[[0, -1]], x[[0, -1]])   # …not the cached plan


def test_demo_workers_come_from_the_environment(monkeypatch):
    import attnlab.demos._common as C
    monkeypatch.setenv("ATTNLAB_DEMO_WORKERS", "3")
    assert C.demo_workers() == 3
    monkeypatch.delenv("ATTNLAB_DEMO_WORKERS")
    assert 1 <= C.demo_workers() <= 2
    monkeypatch.setenv("ATTNLAB_DEMO_WORKERS", "two")
    from attnlab.errors import ArgumentError
    with pytest.raises(ArgumentError, match="ATTNLAB_DEMO_WORKERS: expected a whole number ≥ 1 of "
                                         "processes, received 'two'"):
        C.demo_workers()


def test_demo_threads_come_from_the_environment(monkeypatch):
    import attnlab.demos._common as C
    from attnlab.demos.seeds import machine
    from attnlab.errors import ArgumentError
    monkeypatch.setenv("ATTNLAB_DEMO_THREADS", "2")
    assert C.demo_thread_count() == 2 == machine()["demo_threads"]
    monkeypatch.setenv("ATTNLAB_DEMO_THREADS", "x")
    with pytest.raises(ArgumentError, match="ATTNLAB_DEMO_THREADS: expected a whole number ≥ 1 "
                                         "of torch threads, received 'x'. Unset it"):
        C.demo_threads()


@pytest.mark.parametrize("demo", ["digits", "vowels"])
def test_a_bad_worker_count_stops_a_demo_before_it_loads_anything(demo, tmp_path, monkeypatch):
    _skip_without(demo)
    import importlib
    from attnlab.errors import ArgumentError
    monkeypatch.setenv("ATTNLAB_DEMO_WORKERS", "0")
    module = importlib.import_module(f"attnlab.demos.{demo}")
    with pytest.raises(ArgumentError, match="ATTNLAB_DEMO_WORKERS: expected a whole number ≥ 1"):
        module.run(tmp_path / "out", epochs=1)
    assert not (tmp_path / "out").exists()


def test_vowels_cross_validation_scores_training_folds_only(capsys):
    _skip_without("vowels")
    from attnlab.demos import vowels_cv
    vowels_cv.main(['{"lr": 3e-3}', "--folds", "2", "--members", "1", "--epochs", "1"])
    line = capsys.readouterr().out
    assert "folds=2 members=1 epochs=1" in line and "ensemble" in line and "logistic" in line
    assert "log loss" in line


def test_vowels_cross_validation_of_members_with_two_views_saves_their_probabilities(tmp_path):
    _skip_without("vowels")
    import numpy as np
    from attnlab.demos import vowels_cv
    path = tmp_path / "p.npz"
    vowels_cv.main(['[{"lr": 3e-3}, {"lr": 3e-3, "length": 20}]', "--folds", "2",
                    "--members", "2", "--epochs", "1", "--save", str(path)])
    saved = np.load(path)
    p, y = saved["probabilities"], al.datasets.japanese_vowels().y_train
    assert p.shape == (2, 270, 9) and np.allclose(p.sum(-1), 1, atol=1e-5)
    r = vowels_cv.held_out_scores(p, y)                     # every utterance held out once
    assert r["errors_by_members"][-1] == int(np.sum(p.mean(0).argmax(-1) != y))
    line = vowels_cv.combine([f"{path}:1", str(path)])      # member 0 twice, then member 1
    errors = int(np.sum(p[[0, 0, 1]].mean(0).argmax(-1) != y))
    assert "split=0" in line and f"({errors} errors" in line


def test_vowels_cross_validation_with_test_time_augmentation_saves_both_scores(tmp_path, capsys):
    _skip_without("vowels")
    import numpy as np
    from attnlab.demos import vowels_cv
    path = tmp_path / "p.npz"
    vowels_cv.main(['{"lr": 3e-3, "augment": {"drift": 1.0, "scale": 0.2}}', "--folds", "2",
                    "--members", "1", "--epochs", "1", "--tta", "2", "--save", str(path)])
    out = capsys.readouterr().out
    assert "with test-time augmentation (2 copies): ensemble" in out
    plain, tta = np.load(path)["probabilities"], np.load(tmp_path / "p-tta.npz")["probabilities"]
    assert plain.shape == tta.shape == (1, 270, 9) and np.allclose(tta.sum(-1), 1, atol=1e-5)
    assert not np.allclose(plain, tta)             # the copies changed the scores
    assert "split=0" in vowels_cv.combine([str(tmp_path / "p-tta.npz")])
    with pytest.raises(SystemExit):
        vowels_cv.main(['{"lr": 3e-3}', "--tta", "-2"])
    assert "expected a whole number of copies ≥ 0, received '-2'" in capsys.readouterr().err


def test_vowels_test_time_augmentation_recomputes_the_deltas_of_each_copy(monkeypatch):
    _skip_without("vowels")
    import numpy as np
    from attnlab.demos import vowels as V
    from attnlab.demos import vowels_cv
    copies = []
    change = V.Augmented.change

    def recorded(self, s, label=None):
        copies.append(change(self, s, label))
        return copies[-1]
    monkeypatch.setattr(V.Augmented, "change", recorded)
    vowels_cv.cross_validate({"delta": 1, "augment": {"scale": 0.2}}, folds=2, members=1,
                             epochs=1, tta=1)
    assert len(copies) > 270 and all(c.shape[1] == 24 for c in copies)
    for c in copies[-5:]:                   # the held-out copies, changed after training
        np.testing.assert_allclose(c, V.with_deltas(c[:, :12], 1), atol=1e-6)


def test_vowels_blocked_folds_hold_runs_of_consecutive_utterances_of_each_speaker(capsys):
    import numpy as np
    from attnlab.demos import vowels_cv
    y = np.repeat(np.arange(9), 30)                  # the training file: 30 a speaker, in order
    splits = vowels_cv.fold_splits(y, 5, None)
    for k, (train, held_out) in enumerate(splits):
        for c in range(9):
            assert list(held_out[y[held_out] == c]) == list(range(30 * c + 6 * k, 30 * c + 6 * k + 6))
        assert len(set(train) | set(held_out)) == 270 and not set(train) & set(held_out)
    shuffled = vowels_cv.fold_splits(y, 5, 0)[0][1]
    assert sorted(shuffled) != list(splits[0][1])
    assert vowels_cv._split_seed("blocked") is None and vowels_cv._split_seed("3") == 3
    with pytest.raises(SystemExit):
        vowels_cv.main(['{"lr": 3e-3}', "--split-seed", "last"])
    assert "expected an integer seed or 'blocked', received 'last'" in capsys.readouterr().err


def test_vowels_cross_validation_explains_bad_arguments(tmp_path, capsys):
    import numpy as np
    from attnlab.demos import vowels_cv
    with pytest.raises(SystemExit, match="expected a file that `vowels_cv --save` wrote"):
        vowels_cv.main(["--combine", str(tmp_path / "missing.npz")])
    path = tmp_path / "p.npz"
    np.savez(path, probabilities=np.full((2, 270, 9), 1 / 9), config="{}", split_seed=0)
    with pytest.raises(SystemExit, match="expected N from 1 to 2"):
        vowels_cv.main(["--combine", f"{path}:3"])
    with pytest.raises(SystemExit):
        vowels_cv.main(["{lr: 3e-3}"])
    assert "config 1: expected a JSON dict" in capsys.readouterr().err
