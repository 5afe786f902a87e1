"""Resuming a finished run with a larger max_epochs continues exactly as a run of that length
from the start (schedule, shuffled order, optimizer state); where a schedule is laid out over
max_epochs, resuming says that it cannot and how training goes on."""
import math
import warnings

import pytest
import torch

import attnlab as al
from attnlab import layers as L


def _net():
    return al.Network([L.FeatureInput(3, name="x"), L.Dense(8, name="fc"), L.Dropout(0.3, name="drop"),
                       L.ReLU(name="relu"), L.Dense(2, name="out")])


def _data():
    g = torch.Generator().manual_seed(0)
    return torch.randn(40, 3, generator=g), torch.randn(40, 2, generator=g)


def _options(schedule="piecewise", **kw):
    return dict(loss="mse", solver="adam", batch_size=8, shuffle="every-epoch",
                learning_rate_schedule=schedule, learning_rate_drop_period=1,
                learning_rate_drop_factor=0.5, verbose=False, seed=3, **kw)


def _same(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        assert torch.equal(sa[k], sb[k]), k                 # bitwise


@pytest.mark.parametrize("every", [("epoch", 1), ("iteration", 3)])
def test_resuming_a_finished_run_with_more_epochs_equals_the_longer_run(tmp_path, every):
    X, Y = _data()
    whole = _net()
    full = al.train(whole, X, Y, max_epochs=4, **_options())
    unit, frequency = every
    ck = dict(checkpoint_dir=str(tmp_path), checkpoint_frequency_unit=unit, checkpoint_frequency=frequency)
    first = _net()
    al.train(first, X, Y, max_epochs=2, **_options(**ck))
    resumed = _net()
    with warnings.catch_warnings():
        warnings.simplefilter("error")                      # nothing to warn about
        info = al.train(resumed, X, Y, max_epochs=4, resume=True, **_options(**ck))
    _same(whole, resumed)
    # the same steps at the same learning rates (the piecewise drops continue)
    assert info.iterations["iteration"] == full.iterations["iteration"] == list(range(1, 21))
    assert info.iterations["learning_rate"] == full.iterations["learning_rate"]
    assert info.iterations["learning_rate"][-1] == pytest.approx(1e-3 * 0.5 ** 3)
    assert info.iterations["loss"] == full.iterations["loss"]


def test_resuming_with_a_schedule_laid_out_over_max_epochs_warns_and_follows_the_new_one(tmp_path):
    X, Y = _data()
    ck = dict(checkpoint_dir=str(tmp_path))
    al.train(_net(), X, Y, max_epochs=2, **_options("cosine", **ck))
    with pytest.warns(UserWarning) as caught:
        info = al.train(_net(), X, Y, max_epochs=4, resume=True, **_options("cosine", **ck))
    (w,) = [str(c.message) for c in caught if "max_epochs" in str(c.message)]
    assert "resuming from" in w and "with max_epochs 4 (it was written by a run of 2)" in w
    assert "learning_rate_schedule 'cosine' is laid out over max_epochs" in w
    assert "from iteration 10 (learning rate 0.0005 now, 0 when the checkpoint was written)" in w
    assert "'piecewise'" in w
    # what it says: from iteration 11 on, the 4-epoch cosine (20 iterations) at its own step
    lrs = info.iterations["learning_rate"][10:]
    assert lrs == pytest.approx([0.5e-3 * (1 + math.cos(math.pi * k / 20)) for k in range(10, 20)])


def test_resuming_with_the_same_max_epochs_and_a_cosine_schedule_stays_exact(tmp_path):
    X, Y = _data()
    whole = _net()
    al.train(whole, X, Y, max_epochs=3, **_options("warmup-cosine", warmup_iterations=4))
    ck = dict(checkpoint_dir=str(tmp_path), checkpoint_frequency_unit="iteration", checkpoint_frequency=7)
    stop = _options("warmup-cosine", warmup_iterations=4, **ck)
    stop["output_fn"] = lambda s: s.iteration == 7                  # interrupted at iteration 7
    al.train(_net(), X, Y, max_epochs=3, **stop)
    resumed = _net()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        al.train(resumed, X, Y, max_epochs=3, resume=True, **_options("warmup-cosine", warmup_iterations=4, **ck))
    _same(whole, resumed)


def test_resuming_with_other_step_options_says_what_is_in_effect(tmp_path):
    X, Y = _data()
    ck = dict(checkpoint_dir=str(tmp_path))
    al.train(_net(), X, Y, max_epochs=2, **_options("none", **ck))
    with pytest.warns(UserWarning) as caught:
        info = al.train(_net(), X, Y, max_epochs=3, resume=True,
                        **_options("none", learning_rate=0.01, gradient_threshold=1.0, **ck))
    (w,) = [str(c.message) for c in caught if "other options" in str(c.message)]
    assert "learning_rate 0.001 then, 0.01 now; gradient_threshold None then, 1.0 now" in w
    assert "keeps the checkpoint's learning_rate; the others take effect from here" in w
    assert set(info.iterations["learning_rate"][10:]) == {0.001}        # what it says
    # the same options given another way (the solver's default learning rate) are no change
    other = dict(checkpoint_dir=str(tmp_path / "other"))
    al.train(_net(), X, Y, max_epochs=1, **_options("none", **other))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        al.train(_net(), X, Y, max_epochs=2, resume=True, **_options("none", learning_rate=0.001, **other))
