"""TrainingOptions.accumulation_steps: N micro-batches per optimizer step equal one batch N
times as large; iterations and the schedule follow optimizer steps; a last, shorter group
still steps."""
import pytest
import torch

import attnlab as al
from attnlab import layers as L
from attnlab.training.accumulation import Accumulation, steps_per_epoch


pytestmark = pytest.mark.usefixtures("one_thread")


def _net():
    torch.manual_seed(0)
    return al.Network([L.FeatureInput(4, name="x"), L.Dense(6, name="fc1"), L.Tanh(name="t"),
                       L.Dense(3, name="fc2")])


def _data(n=24):
    g = torch.Generator().manual_seed(3)
    return torch.randn(n, 4, generator=g), torch.randint(0, 3, (n,), generator=g)


def _train(batch_size, steps, n=24, epochs=2, **kw):
    net = _net()
    x, y = _data(n)
    o = al.TrainingOptions(solver="sgdm", learning_rate=0.5, momentum=0.9, max_epochs=epochs,
                           batch_size=batch_size, shuffle="never", verbose=False,
                           accumulation_steps=steps, **kw)
    info = al.train(net, x, y, "crossentropy", o)
    return net, info


def _same_weights(a, b, tol=1e-6):
    for (n, p), q in zip(a.learnables.items(), b.learnables.values()):
        assert torch.allclose(p, q, atol=tol, rtol=0), (n, (p - q).abs().max())


def test_micro_batches_equal_one_big_batch_with_sgd():
    big, info_big = _train(batch_size=12, steps=1)
    acc, info_acc = _train(batch_size=4, steps=3)
    _same_weights(big, acc)
    # an iteration is an optimizer step: 2 per epoch either way
    assert info_acc.iterations["iteration"] == info_big.iterations["iteration"] == [1, 2, 3, 4]
    # the step's loss is the mean of its micro-batches' losses: the big batch's loss
    assert info_acc.iterations["loss"] == pytest.approx(info_big.iterations["loss"], abs=1e-6)


def test_one_micro_batch_per_step_is_unchanged_training():
    a, _ = _train(batch_size=4, steps=1)
    b, _ = _train(batch_size=4, steps=1)
    _same_weights(a, b, tol=0)


def test_the_last_shorter_group_of_an_epoch_still_steps_on_its_mean():
    # 20 observations in batches of 4: 5 micro-batches, groups of 3 and 2 → 2 steps an epoch;
    # one epoch equals two big batches of 12 and 8 (batch_size 12 on 20 observations)
    big, _ = _train(batch_size=12, steps=1, n=20, epochs=1)
    acc, info = _train(batch_size=4, steps=3, n=20, epochs=1)
    assert info.iterations["iteration"] == [1, 2]
    _same_weights(big, acc)


def test_the_schedule_steps_once_per_optimizer_step():
    _, info = _train(batch_size=4, steps=3, epochs=3, learning_rate_schedule="piecewise",
                     learning_rate_drop_period=1, learning_rate_drop_factor=0.5)
    rates = info.iterations["learning_rate"]
    assert rates == pytest.approx([0.5, 0.5, 0.25, 0.25, 0.125, 0.125])
    _, info = _train(batch_size=4, steps=3, epochs=1, learning_rate_schedule="warmup",
                     warmup_iterations=2, warmup_fraction=0.5)
    rates = info.iterations["learning_rate"]
    assert len(rates) == 2 and rates[0] < rates[1]


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_accumulation_steps_must_be_a_positive_int(bad):
    with pytest.raises(al.ArgumentError, match="accumulation_steps must be a positive int"):
        al.TrainingOptions(accumulation_steps=bad)


def test_steps_per_epoch_and_the_record_of_a_group():
    assert [steps_per_epoch(m, 3) for m in (1, 3, 4, 6, 7)] == [1, 1, 2, 2, 3]
    acc = Accumulation(3)
    acc.add(torch.tensor([1.0, 2.0]), [4.0], 4)
    acc.add(torch.tensor([3.0, 1.0]), [4.0], 4)
    assert acc.correction == 1.5 and not acc.full
    record, dens, units = acc.take()
    assert record.tolist() == [2.0, 3.0] and dens == [8.0] and units == 8
    assert acc.count == 0
