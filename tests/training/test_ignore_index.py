"""Hugging Face's label convention: class targets equal to ignore_index (-100 by default) count
in neither the crossentropy loss nor the metrics, are never a class, and with ignore_index=None
are refused."""
import math

import numpy as np
import pytest
import torch
from torch.nn import functional as F
from torch.utils.data import TensorDataset

import attnlab as al
from attnlab import layers as L

QUIET = dict(verbose=False)
ONE_STEP = dict(solver="sgdm", momentum=0.0, learning_rate=1.0, max_epochs=1, shuffle="never",
                **QUIET)


pytestmark = pytest.mark.usefixtures("one_thread")


def _classifier(channels=3, classes=4, seed=0):
    torch.manual_seed(seed)
    return al.Network([L.FeatureInput(channels, name="x"), L.Dense(classes, name="fc")]).initialize()


def _tagger(channels=2, classes=3, seed=0):
    torch.manual_seed(seed)
    return al.Network([L.SequenceInput(channels, name="x"), L.Dense(classes, name="fc")]).initialize()


def _causal_lm(vocab=11, d=8, seed=0):
    torch.manual_seed(seed)
    return al.Network([L.TokenInput(name="ids"), L.Embedding(vocab, d, name="embed"),
                       L.SelfAttention(2, d, attention_mask="causal", name="attn"),
                       L.Dense(vocab, name="lm_head")]).initialize()


def _twin(net, make):
    twin = make()
    twin.load_state_dict(net.state_dict())
    return twin


def _gradient_step(net, x, y, **kw):
    """One full-batch SGD step (lr 1, no momentum): (info, -gradient by learnable)."""
    before = {k: v.detach().clone() for k, v in net.learnables.items()}
    info = al.train(net, x, y, batch_size=len(x), **{**ONE_STEP, **kw})
    return info, {k: before[k] - v.detach() for k, v in net.learnables.items()}


def _torch_gradient(net, loss):
    net.zero_grad()
    loss.backward()
    return {k: p.grad.detach().clone() for k, p in net.learnables.items()}


# ----------------------------------------------------------------- the loss, as torch's ---

def test_per_sequence_targets_loss_and_gradient_equal_torch_ignore_index():
    net = _classifier()
    ref = _twin(net, _classifier)
    x = torch.randn(6, 3, generator=torch.Generator().manual_seed(1))
    y = torch.tensor([0, -100, 3, 2, -100, 1])
    expected = F.cross_entropy(ref(x), y, ignore_index=-100)         # mean over the 4 others
    grads = _torch_gradient(ref, expected)
    info, step = _gradient_step(net, x, y)
    assert info.iterations["loss"][0] == pytest.approx(float(expected.detach()), rel=1e-6)
    for k in grads:
        torch.testing.assert_close(step[k], grads[k], rtol=1e-5, atol=1e-6)
    assert "class_labels" not in net.metadata                       # indices, as given


def test_per_time_step_targets_equal_torch_ignore_index():
    net = _tagger()
    ref = _twin(net, _tagger)
    x = torch.randn(4, 5, 2, generator=torch.Generator().manual_seed(2))
    y = torch.tensor([[0, 1, 2, -100, -100], [2, 2, -100, 0, 1],
                      [-100, -100, -100, -100, -100], [1, 0, 0, 2, -100]])
    out = ref(x)
    expected = F.cross_entropy(out.reshape(-1, 3), y.reshape(-1), ignore_index=-100)
    grads = _torch_gradient(ref, expected)
    info, step = _gradient_step(net, x, y, metrics=["accuracy"])
    assert info.iterations["loss"][0] == pytest.approx(float(expected.detach()), rel=1e-6)
    for k in grads:
        torch.testing.assert_close(step[k], grads[k], rtol=1e-5, atol=1e-6)
    keep = y != -100
    accuracy = (out.argmax(-1)[keep] == y[keep]).float().mean()
    assert info.iterations["accuracy"][0] == pytest.approx(float(accuracy))


def test_padded_batches_ignore_both_padding_and_ignore_index():
    """Variable-length sequences (padded per batch) with -100 inside some: the mean is over
    the real steps whose target is not -100."""
    net = _tagger()
    ref = _twin(net, _tagger)
    g = torch.Generator().manual_seed(3)
    xs = [torch.randn(n, 2, generator=g) for n in (5, 2, 4, 3)]
    ys = [torch.tensor([0, -100, 2, 1, -100]), torch.tensor([-100, 1]),
          torch.tensor([2, 2, 0, -100]), torch.tensor([1, 1, 0])]
    outs = torch.cat([ref(x.unsqueeze(0))[0] for x in xs])
    target = torch.cat(ys)
    expected = F.cross_entropy(outs, target, ignore_index=-100)
    grads = _torch_gradient(ref, expected)
    info, step = _gradient_step(net, xs, ys)
    assert info.iterations["loss"][0] == pytest.approx(float(expected.detach()), rel=1e-6)
    for k in grads:
        torch.testing.assert_close(step[k], grads[k], rtol=1e-5, atol=1e-6)
    keep = target != -100
    accuracy = (outs.argmax(-1)[keep] == target[keep]).float().mean()
    assert info.iterations["accuracy"][0] == pytest.approx(float(accuracy))


def test_a_dataset_ignores_minus_100_as_memory_data_does():
    x = torch.randn(6, 3, generator=torch.Generator().manual_seed(4))
    y = torch.tensor([0, -100, 3, 2, -100, 1])
    a, b = _classifier(), _classifier()
    info_a, step_a = _gradient_step(a, x, y)
    info_b, step_b = _gradient_step(b, TensorDataset(x, y), None)
    assert info_b.iterations["loss"][0] == pytest.approx(info_a.iterations["loss"][0], rel=1e-6)
    assert info_b.iterations["accuracy"][0] == pytest.approx(info_a.iterations["accuracy"][0])
    for k in step_a:
        torch.testing.assert_close(step_b[k], step_a[k], rtol=1e-5, atol=1e-6)


def test_another_ignore_index_value():
    net = _classifier()
    ref = _twin(net, _classifier)
    x = torch.randn(5, 3, generator=torch.Generator().manual_seed(5))
    y = torch.tensor([0, 3, 2, 3, 1])
    expected = F.cross_entropy(ref(x), y, ignore_index=3)
    info, _ = _gradient_step(net, x, y, ignore_index=3)
    assert info.iterations["loss"][0] == pytest.approx(float(expected.detach()), rel=1e-6)


def test_validation_loss_and_accuracy_leave_ignored_targets_out():
    net = _classifier()
    g = torch.Generator().manual_seed(6)
    x, xv = torch.randn(8, 3, generator=g), torch.randn(6, 3, generator=g)
    y = torch.tensor([0, 1, 2, 3, 0, 1, 2, 3])
    yv = torch.tensor([1, -100, 2, -100, 0, 3])
    info = al.train(net, x, y, batch_size=8, validation_data=(xv, yv), **ONE_STEP)
    out = net.predict(xv)
    keep = yv != -100
    assert info.validation["loss"][-1] == pytest.approx(
        float(F.cross_entropy(out, yv, ignore_index=-100)), rel=1e-6)
    assert info.validation["accuracy"][-1] == pytest.approx(
        float((out.argmax(-1)[keep] == yv[keep]).float().mean()))


def test_a_batch_whose_every_target_is_ignored_gives_loss_zero():
    net = _classifier()
    x = torch.randn(6, 3, generator=torch.Generator().manual_seed(7))
    y = torch.tensor([0, 1, -100, -100, 2, 3])
    before = {k: v.detach().clone() for k, v in net.learnables.items()}
    info = al.train(net, x, y, batch_size=2, solver="sgdm", momentum=0.0, max_epochs=1,
                    shuffle="never", verbose_frequency=1, **QUIET)
    losses = info.iterations["loss"]
    assert losses[1] == 0.0 and all(math.isfinite(v) for v in losses)
    assert math.isfinite(info.epochs["loss"][0])
    assert math.isnan(info.iterations["accuracy"][1])             # no target: no accuracy
    assert all(torch.isfinite(v).all() for v in net.learnables.values())
    assert any(not torch.equal(before[k], v) for k, v in net.learnables.items())


def test_a_validation_set_whose_every_target_is_ignored_has_loss_zero():
    net = _classifier()
    x = torch.randn(4, 3, generator=torch.Generator().manual_seed(8))
    y = torch.tensor([0, 1, 2, 3])
    info = al.train(net, x, y, batch_size=4, validation_data=(x, torch.full((4,), -100)),
                    **ONE_STEP)
    assert info.validation["loss"][-1] == 0.0


def test_every_training_target_ignored_is_a_data_error():
    x = torch.randn(3, 3)
    with pytest.raises(al.DataError) as e:
        al.train(_classifier(), x, torch.full((3,), -100), **ONE_STEP)
    text = str(e.value)
    assert "every target equals ignore_index (-100)" in text and "'fc'" in text


# ------------------------------------------------------------------- label discovery ---

def test_minus_100_is_never_a_class_of_label_values():
    """Label values that are not indices are numbered without -100 (it was a class, which
    renumbered every target and made one class too many)."""
    net = _classifier(classes=3)
    ref = _twin(net, lambda: _classifier(classes=3))
    x = torch.randn(6, 3, generator=torch.Generator().manual_seed(9))
    y = np.array([10, 30, -100, 20, 10, -100])
    info, _ = _gradient_step(net, x, y)
    assert net.metadata["class_labels"] == [10, 20, 30]
    idx = torch.tensor([0, 2, -100, 1, 0, -100])
    assert info.iterations["loss"][0] == pytest.approx(
        float(F.cross_entropy(ref(x), idx, ignore_index=-100)), rel=1e-6)
    assert set(al.classify(net, x).tolist()) <= {10, 20, 30}


def test_minus_100_among_string_labels_is_ignored():
    net = _classifier(classes=2)
    x = torch.randn(4, 3)
    al.train(net, x, np.array(["cat", -100, "dog", "cat"], dtype=object), **ONE_STEP)
    assert net.metadata["class_labels"] == ["cat", "dog"]


def test_token_ids_with_minus_100_stay_indices():
    net = _causal_lm()
    ids = torch.randint(0, 11, (3, 6), generator=torch.Generator().manual_seed(10))
    labels = ids[:, 1:].clone()
    labels[0, 3:] = -100
    al.train(net, ids[:, :-1], labels, **ONE_STEP)
    assert "class_labels" not in net.metadata           # was [-100, …]: every id shifted


# ------------------------------------------------------------------ ignore_index=None ---

@pytest.mark.parametrize("setting", [None, 0])
def test_minus_100_without_ignore_index_minus_100_is_a_data_error(setting):
    x = torch.randn(4, 3)
    y = torch.tensor([0, 1, -100, 2])
    with pytest.raises(al.DataError) as e:
        al.train(_classifier(), x, y, ignore_index=setting, **ONE_STEP)
    text = str(e.value)
    assert "-100" in text and f"ignore_index is {setting}" in text
    assert "ignore_index=-100" in text and "'fc'" in text


def test_minus_100_in_a_dataset_without_ignore_index_is_a_data_error():
    x = torch.randn(4, 3)
    y = torch.tensor([0, 1, -100, 2])
    with pytest.raises(al.DataError, match=r"equal -100.*ignore_index is None"):
        al.train(_classifier(), TensorDataset(x, y), ignore_index=None, **ONE_STEP)


def test_a_dataset_class_index_outside_the_output_is_a_data_error():
    x = torch.randn(4, 3)
    y = torch.tensor([0, 1, 7, 2])
    with pytest.raises(al.DataError) as e:
        al.train(_classifier(), TensorDataset(x, y), **ONE_STEP)
    text = str(e.value)
    assert "class index 7" in text and "4 classes (0…3)" in text


def test_ignore_index_none_trains_other_negative_labels_as_before():
    net = _classifier(classes=2)
    al.train(net, torch.randn(4, 3), np.array([-1, 1, 1, -1]), ignore_index=None, **ONE_STEP)
    assert net.metadata["class_labels"] == [-1, 1]


@pytest.mark.parametrize("bad", [True, False, 1.5, "-100", [-100]])
def test_ignore_index_is_validated(bad):
    with pytest.raises(al.ArgumentError) as e:
        al.TrainingOptions(ignore_index=bad)
    assert "ignore_index must be an int" in str(e.value) and "None" in str(e.value)


def test_ignore_index_defaults_to_minus_100_and_takes_numpy_ints():
    assert al.TrainingOptions().ignore_index == -100
    assert al.TrainingOptions(ignore_index=None).ignore_index is None
    o = al.TrainingOptions(ignore_index=np.int64(-1))
    assert o.ignore_index == -1 and type(o.ignore_index) is int


# ------------------------------------------------------------------------- metrics ---

def test_a_metric_callable_over_classes_sees_only_the_counted_targets():
    seen = []

    def hits(outputs, targets):
        seen.append((tuple(outputs.shape), targets.tolist()))
        return (outputs.argmax(-1) == targets).float().mean()

    net = _tagger()
    x = torch.randn(2, 3, 2)
    y = torch.tensor([[0, -100, 2], [-100, 1, 1]])
    al.train(net, x, y, batch_size=2, metrics=[hits], **ONE_STEP)
    assert seen[0] == ((4, 3), [0, 2, 1, 1])


# ---------------------------------------------------------------- the causal LM case ---

def _lm_data(n=5, t=7, vocab=11, pad=0):
    """Right-padded token ids and Hugging Face labels: -100 at the padded positions."""
    g = torch.Generator().manual_seed(11)
    ids = torch.randint(1, vocab, (n, t), generator=g)
    lengths = [7, 4, 6, 3, 5][:n]
    for i, k in enumerate(lengths):
        ids[i, k:] = pad
    labels = ids[:, 1:].clone()
    for i, k in enumerate(lengths):
        labels[i, k - 1:] = -100
    return ids, labels


def test_a_causal_lm_trained_on_hugging_face_labels_equals_a_manual_ignoring_loop():
    ids, labels = _lm_data()
    net = _causal_lm()
    manual = _twin(net, _causal_lm)
    al.train(net, ids[:, :-1], labels, solver="sgdm", learning_rate=0.1, momentum=0.9,
             max_epochs=4, batch_size=len(ids), shuffle="never", seed=3, **QUIET)
    opt = torch.optim.SGD(manual.parameters(), lr=0.1, momentum=0.9)
    for _ in range(4):
        logits = manual(ids[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, 11), labels.reshape(-1), ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        opt.step()
    for k, p in manual.learnables.items():
        torch.testing.assert_close(net.learnables[k], p, rtol=1e-5, atol=1e-6)
    predicted = al.classify(net, ids[:, :-1])
    assert predicted.shape == (5, 6)
    assert np.array_equal(predicted, net.predict(ids[:, :-1]).argmax(-1).numpy())


def test_a_causal_lm_from_a_dataset_equals_the_in_memory_run():
    ids, labels = _lm_data()
    a, b = _causal_lm(), _causal_lm()
    opts = dict(solver="adam", max_epochs=2, batch_size=2, shuffle="never", **QUIET)
    ia = al.train(a, ids[:, :-1], labels, **opts)
    ib = al.train(b, TensorDataset(ids[:, :-1], labels), **opts)
    assert ib.iterations["loss"] == pytest.approx(ia.iterations["loss"], rel=1e-5)
    for k, p in a.learnables.items():
        torch.testing.assert_close(b.learnables[k], p, rtol=1e-5, atol=1e-6)
