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
    from attnlab.cli.demos import baselines as B
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
    from attnlab.cli.demos import seeds as S
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
    from attnlab.cli.demos.forecast import Features

    t = np.arange(60, dtype=np.float64)
    values = 300 + 0.01 * t ** 2 + np.sin(t / 3)            # growth that speeds up, and a cycle
    dates = np.datetime64("2000-01-02") + 7 * t.astype("timedelta64[D]")
    feats = Features(values[:-10], drift)
    z = feats.inputs(values, dates)
    assert z.shape == (len(values) - 1 - drift, 3)
    np.testing.assert_allclose(feats.levels(values[:-10], z[-10:, 0]), values[-10:], atol=1e-4)


def test_vowels_augmentation_keeps_channels_and_labels():
    import numpy as np
    from attnlab.cli.demos.vowels import Augmented
    X = [np.ones((10, 12), np.float32), np.ones((7, 12), np.float32)]
    data = Augmented(X, [4, 2], seed=1, warp=0.2, jitter=0.0, scale=0.1, drift=0.0, transfer=0.0)
    x, label = data[0]
    assert x.shape[1] == 24 and 8 <= x.shape[0] <= 12 and label == 4   # the cepstrum, its deltas
    column = x[:, 0]
    assert torch_all_close(column, column[0]) and 0.9 <= float(column[0]) <= 1.1   # one factor per channel
    assert torch_all_close(x[:, 12:], 0.0)                  # a constant's deltas


def test_vowels_within_speaker_covariance_against_a_naive_sum():
    import numpy as np
    from attnlab.cli.demos.vowels import within_speaker_covariance
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
    from attnlab.cli.demos.vowels import Augmented, within_speaker_covariance
    rng = np.random.default_rng(1)
    X = [rng.normal(size=(6, 12)).astype(np.float32) + k % 3 for k in range(12)]
    y = np.arange(12) % 3
    data = Augmented(X, y, seed=4, warp=0.0, scale=0.0, jitter=0.0, drift=0.5, transfer=0.0)
    x, label = data[5]
    step = x[:, :12] - torch.as_tensor(X[5])
    assert label == 2 and float((step - step[0]).abs().max()) < 1e-5   # one offset a step
    # the draws are numpy's multivariate_normal's, from the same stream, with the factor kept
    cov = 0.5 * within_speaker_covariance(data.X, y).astype(np.float64)
    stream = np.random.default_rng(4)
    stream.uniform(1.0, 1.0)                                      # the (null) time warp's draw
    stream.uniform(1.0, 1.0, (1, 12))                             # the (null) channel scales
    expected = stream.multivariate_normal(np.zeros(12), cov)
    assert np.allclose(step[0].numpy(), expected, atol=1e-5)
    draws = np.stack([(data[0][0][:, :12] - torch.as_tensor(X[0]))[0].numpy() for _ in range(4000)])
    assert np.allclose(np.cov(draws.T), cov, atol=0.05)


@pytest.mark.parametrize("argument", ["drift", "transfer"])
@pytest.mark.parametrize("value", [-1.0, float("nan")])
def test_vowels_drift_and_transfer_must_not_be_negative(argument, value):
    import numpy as np
    from attnlab.cli.demos.vowels import Augmented
    from attnlab.core.errors import ArgumentError
    with pytest.raises(ArgumentError,
                       match=rf"{argument}: expected a number ≥ 0 .* Use 0 for none"):
        Augmented([np.zeros((5, 12), np.float32)] * 2, [0, 1], **{argument: value})


def test_vowels_deltas_are_the_differences_over_the_steps_against_a_naive_loop():
    import numpy as np
    from attnlab.cli.demos.vowels import with_deltas
    s = np.random.default_rng(0).normal(size=(7, 12))
    naive = np.empty_like(s)
    for t in range(7):                      # central inside, one-sided at the ends
        lo, hi = max(t - 1, 0), min(t + 1, 6)
        naive[t] = (s[hi] - s[lo]) / (hi - lo)
    out = with_deltas(s)
    assert out.shape == (7, 24) and out.dtype == np.float32
    np.testing.assert_allclose(out[:, :12], s, rtol=1e-6)
    np.testing.assert_allclose(out[:, 12:], naive, rtol=1e-5, atol=1e-6)
    assert np.all(with_deltas(s[:1])[:, 12:] == 0)              # one step: no change to measure
    rng = np.random.default_rng(1)
    for steps in (2, 3, 29):                # numpy.gradient's very numbers, in both precisions
        for dtype in (np.float32, np.float64):
            f = rng.normal(size=(steps, 12)).astype(dtype)
            assert np.array_equal(with_deltas(f)[:, 12:], np.gradient(f, axis=0).astype(np.float32))


def test_vowels_augmented_deltas_follow_the_changed_cepstrum():
    import numpy as np
    from attnlab.cli.demos.vowels import Augmented, build_network, standardizer, with_deltas
    X = [np.random.default_rng(k).normal(size=(n, 12)) for k, n in enumerate((9, 5, 12))]
    view = standardizer(X)(X)
    assert [v.shape for v in view] == [(9, 24), (5, 24), (12, 24)]
    data = Augmented(view, [0, 1, 0], seed=3)
    for i in range(3):
        x = data[i][0].numpy()
        assert x.shape[1] == 24
        np.testing.assert_allclose(x, with_deltas(x[:, :12]), rtol=1e-5, atol=1e-6)
    net = build_network()
    assert tuple(net.predict(view).shape) == (3, 9)


def test_vowels_transfer_adds_another_recordings_departure_from_its_speaker():
    import numpy as np
    from attnlab.cli.demos.baselines import resample
    from attnlab.cli.demos.vowels import Augmented, deviations
    rng = np.random.default_rng(1)
    X = [rng.normal(size=(n, 12)).astype(np.float32) for n in (8, 11, 6, 9)]
    y = [0, 0, 1, 1]
    dev = deviations(X, y)
    assert dev.shape == (4, 20, 12)
    for i, c in enumerate(y):                   # naive: curve less its speaker's mean curve
        same = [resample(X[j], 20) for j in range(4) if y[j] == c]
        np.testing.assert_allclose(dev[i], resample(X[i], 20) - np.mean(same, 0), atol=1e-5)
    np.testing.assert_allclose(dev[0] + dev[1], 0, atol=1e-5)   # a speaker's departures cancel
    data = Augmented(X, y, seed=4, warp=0.0, scale=0.0, jitter=0.0, drift=0.0, transfer=0.5)
    added = [data.change(X[2])[:, :12] - X[2] for _ in range(200)]
    candidates = [0.5 * resample(d, 6) for d in dev]
    hits = [int(np.argmin([np.abs(a - c).max() for c in candidates])) for a in added]
    assert all(np.abs(a - candidates[h]).max() < 1e-5 for a, h in zip(added, hits))
    assert set(hits) == {0, 1, 2, 3}            # from any speaker, its own included
    assert data._transferred and all(np.array_equal(v, 0.5 * resample(dev[i], n))
                                     for (i, n), v in data._transferred.items())   # cached alike


def torch_all_close(a, value):
    import torch
    return bool(torch.allclose(a, torch.full_like(a, float(value))))


def test_vowels_members_trained_in_two_processes_are_those_of_one():
    import functools
    import numpy as np
    import torch
    import attnlab.cli.demos.vowels as V
    import attnlab.cli.demos._common as C
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(n, 12)) for n in rng.integers(7, 15, 18)]
    y = np.arange(18) % 9
    train = functools.partial(V._train_member, V.standardizer(X)(X), y, 2, None)
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
    import attnlab.cli.demos.digits as D
    import attnlab.cli.demos._common as C
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


def test_resample_gives_np_interps_numbers_channel_by_channel():
    import numpy as np
    from attnlab.cli.demos.baselines import resample
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
    import attnlab.cli.demos._common as C
    monkeypatch.setenv("ATTNLAB_DEMO_WORKERS", "3")
    assert C.demo_workers() == 3
    monkeypatch.delenv("ATTNLAB_DEMO_WORKERS")
    assert 1 <= C.demo_workers() <= 2
    monkeypatch.setenv("ATTNLAB_DEMO_WORKERS", "two")
    from attnlab.core.errors import ArgumentError
    with pytest.raises(ArgumentError, match="ATTNLAB_DEMO_WORKERS: expected a whole number ≥ 1 of "
                                         "processes, received 'two'"):
        C.demo_workers()


def test_demo_threads_come_from_the_environment(monkeypatch):
    import attnlab.cli.demos._common as C
    from attnlab.cli.demos.seeds import machine
    from attnlab.core.errors import ArgumentError
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
    from attnlab.core.errors import ArgumentError
    monkeypatch.setenv("ATTNLAB_DEMO_WORKERS", "0")
    module = importlib.import_module(f"attnlab.cli.demos.{demo}")
    with pytest.raises(ArgumentError, match="ATTNLAB_DEMO_WORKERS: expected a whole number ≥ 1"):
        module.run(tmp_path / "out", epochs=1)
    assert not (tmp_path / "out").exists()


def test_demo_table_counts_one_error_in_the_singular():
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))   # the repository's tools
    import demo_table
    assert [demo_table.errors(n) for n in (0, 1, 3)] == ["0 errors", "1 error", "3 errors"]
    one = {"test_accuracy": 359 / 360, "test_errors": 1}
    assert demo_table._figure("digits", one) == "99.72 % (1 error)"


def test_demo_table_marks_the_times_of_the_demos_that_shared_the_machine():
    import copy
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))   # the repository's tools
    import demo_table
    results = json.loads(demo_table.RESULTS.read_text(encoding="utf-8"))
    quiet = copy.deepcopy(results)
    for x in quiet.values():
        for r in x["runs"]:
            r["machine"]["load_average_1min_at_start"], r["workers"] = 1.0, 2
    assert demo_table.shared(quiet) == [] and "shared" not in demo_table.demo_table(quiet)
    quiet["roman"]["runs"][1]["machine"]["load_average_1min_at_start"] = 4.0
    lines = demo_table.demo_table(quiet).splitlines()
    assert [l.startswith("| Roman") for l in lines if "(a shared machine) |" in l] == [True]
    assert "other jobs shared the machine during the roman runs" in lines[-1]
