"""al.train's data: variable-length batches, Datasets, dicts, and the errors for data that does
not fit (by content)."""
import numpy as np
import pytest
import torch
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset, TensorDataset

import attnlab as al
from attnlab import layers as L
from attnlab.training.sampler import draw_epoch, shard
from train_worker import attention_classifier, lstm_classifier, separable

QUIET = dict(verbose=False)


pytestmark = pytest.mark.usefixtures("one_thread")


def _ragged(n=7, c=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(2 + (i * 3) % 6, c, generator=g) for i in range(n)]


def _step(net, x, y, loss="crossentropy", **kw):
    """One full-batch SGD step (momentum 0, lr 1): returns (info, weight change = -gradient)."""
    net.initialize()
    before = {k: v.detach().clone() for k, v in net.learnables.items()}
    opts = dict(solver="sgdm", momentum=0.0, learning_rate=1.0, max_epochs=1, batch_size=len(x),
                shuffle="never", **QUIET)
    opts.update(kw)
    info = al.train(net, x, y, loss=loss, **opts)
    return info, {k: before[k] - v.detach() for k, v in net.learnables.items()}


def _grads(net, loss_fn):
    net.zero_grad()
    loss = loss_fn()
    loss.backward()
    return loss.item(), {k: v.grad.clone() for k, v in net.learnables.items()}


# ---------------------------------------------------------- variable-length batches ---

def test_padded_batch_loss_and_gradient_equal_the_mean_over_sequences_alone():
    xs = _ragged()
    y = torch.tensor([0, 1, 1, 0, 1, 0, 0])
    net = al.Network([L.SequenceInput(3), L.LSTM(5, output_mode="last"), L.Dense(2, name="fc")])
    net.initialize()
    ref = al.Network([L.SequenceInput(3), L.LSTM(5, output_mode="last"), L.Dense(2, name="fc")])
    ref.initialize()
    ref.load_state_dict(net.state_dict())

    def alone():
        return torch.stack([F.cross_entropy(ref(x[None]), y[i:i + 1]) for i, x in enumerate(xs)]).mean()
    want_loss, want_grad = _grads(ref, alone)
    info, delta = _step(net, xs, y)
    assert info.iterations["loss"][0] == pytest.approx(want_loss, rel=1e-5)
    for k in want_grad:
        torch.testing.assert_close(delta[k], want_grad[k], atol=1e-5, rtol=1e-4)


def test_sequence_targets_are_masked_over_padding():
    xs = _ragged()
    ys = [torch.randint(0, 3, (len(x),)) for x in xs]             # one label per step
    make = lambda: al.Network([L.SequenceInput(3), L.LSTM(4), L.Dense(3, name="fc")])  # noqa: E731
    net, ref = make(), make()
    net.initialize()
    ref.initialize()
    ref.load_state_dict(net.state_dict())
    steps = sum(len(x) for x in xs)

    def alone():                                                  # Σ over every valid step / steps
        return sum(F.cross_entropy(ref(x[None])[0], t, reduction="sum") for x, t in zip(xs, ys)) / steps
    want_loss, want_grad = _grads(ref, alone)
    info, delta = _step(net, xs, ys, metrics=["accuracy"])
    assert info.iterations["loss"][0] == pytest.approx(want_loss, rel=1e-5)
    for k in want_grad:
        torch.testing.assert_close(delta[k], want_grad[k], atol=1e-5, rtol=1e-4)
    # regression per step: mse over valid elements only
    targets = [torch.randn(len(x), 3) for x in xs]
    net2 = make()
    net2.initialize()
    with torch.no_grad():
        want = sum(F.mse_loss(net2(x[None])[0], t, reduction="sum") for x, t in zip(xs, targets))
    info, _ = _step(net2, xs, targets, loss="mse", learning_rate=1e-12)
    assert info.iterations["loss"][0] == pytest.approx(want.item() / (steps * 3), rel=1e-5)


def test_label_values_per_time_step_with_padding():
    xs = _ragged()
    words = [np.array(["up", "down"])[(np.arange(len(x)) % 2)] for x in xs]
    net = al.Network([L.SequenceInput(3), L.LSTM(4), L.Dense(2, name="fc")])
    al.train(net, xs, words, max_epochs=1, batch_size=4, **QUIET)
    assert net.metadata["class_labels"] == ["down", "up"]              # no class for padding
    out = al.classify(net, xs)
    assert [len(o) for o in out] == [len(x) for x in xs] and set(np.concatenate(out)) <= {"up", "down"}
    ints = [torch.full((len(x),), 7 + i % 2) for i, x in enumerate(xs)]  # labels 7, 8 → 2 classes
    al.train(al.Network([L.SequenceInput(3), L.LSTM(4), L.Dense(2)]), xs, ints, max_epochs=1, **QUIET)


def test_every_sequence_gives_what_it_gives_alone_after_training():
    x, y = separable(60)
    xs = [xi[: 3 + i % 8] for i, xi in enumerate(x)]
    net = attention_classifier()
    al.train(net, xs, y, solver="adam", max_epochs=2, batch_size=16, sort_by_length=True, **QUIET)
    batched = net.predict(xs)
    alone = torch.cat([net.predict(s[None]) for s in xs])
    torch.testing.assert_close(batched, alone, atol=1e-5, rtol=1e-5)
    labels = al.classify(net, xs)
    assert len(labels) == 60


def test_sort_by_length_batches_similar_lengths():
    lengths = np.array([1, 9, 2, 8, 3, 7, 4, 6, 5, 10])
    g = torch.Generator().manual_seed(0)
    ep = draw_epoch(10, 2, "every-epoch", g, lengths=lengths, sort_by_length=True)
    spans = [np.ptp(lengths[ep.order[ep.starts[k]:ep.starts[k + 1]]]) for k in range(ep.batches)]
    assert max(spans) <= 1 and sorted(ep.order.tolist()) == list(range(10))
    assert draw_epoch(10, 2, "never", g).order.tolist() == list(range(10))


def test_shards_cover_the_global_batch():
    for n in range(1, 12):
        parts = [shard(3, 3 + n, r, 4) for r in range(4)]
        assert parts[0][0] == 3 and parts[-1][1] == 3 + n
        assert all(a[1] == b[0] for a, b in zip(parts, parts[1:]))


# ------------------------------------------------------------ datasets and dicts ---

class Ragged(Dataset):
    def __init__(self, xs, y):
        self.xs, self.y = xs, y

    def __len__(self):
        return len(self.xs)

    def __getitem__(self, i):
        return self.xs[i], self.y[i]


def test_dataset_and_dataloader_train_like_arrays():
    x, y = separable(64)
    xs = [xi[: 3 + i % 6] for i, xi in enumerate(x)]
    runs = []
    for data in ([xs, y], [Ragged(xs, y)], [DataLoader(Ragged(xs, y), batch_size=16)]):
        net = lstm_classifier()
        torch.manual_seed(0)
        net.initialize()
        info = al.train(net, *data, max_epochs=2, batch_size=16, **QUIET)
        runs.append(info.iterations["loss"])
    assert runs[0] == pytest.approx(runs[1], rel=1e-5) and runs[0] == pytest.approx(runs[2], rel=1e-5)
    net = lstm_classifier()
    info = al.train(net, TensorDataset(x, y), max_epochs=1, batch_size=32,
                    validation_data=TensorDataset(x, y), validation_frequency=1, **QUIET)
    assert len(info.validation["loss"]) == 2


def test_dict_inputs_and_several_outputs():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(40, 2, generator=g), torch.randn(40, 3, generator=g)
    net = al.Network([L.FeatureInput(2, name="a"), L.Concatenation(2, name="cat"), L.Dense(8, name="h"),
                      L.Dense(2, name="cls")])
    net.add(L.FeatureInput(3, name="b"))
    net.connect("b", "cat/in2")
    net.add(L.Dense(1, name="reg"))
    net.connect("h", "reg")
    labels = (a[:, 0] > 0).long()
    values = b.sum(1)
    info = al.train(net, {"a": a, "b": b}, {"cls": labels, "reg": values},
                    loss={"cls": "crossentropy", "reg": "mse"}, max_epochs=2, batch_size=10,
                    validation_data=({"a": a, "b": b}, {"cls": labels, "reg": values}), **QUIET)
    assert "cls/accuracy" in info.iterations and "reg/accuracy" not in info.iterations
    assert len(info.validation["loss"]) == 1
    with pytest.raises(al.DataError, match="dict by input name"):
        al.train(net, a, {"cls": labels, "reg": values}, **QUIET)
    with pytest.raises(al.DataError, match="missing 'b'"):
        al.train(net, {"a": a}, {"cls": labels, "reg": values}, **QUIET)


# ------------------------------------------------------------------- data errors ---

def test_counts_that_differ_name_both_counts():
    x, y = separable(30)
    with pytest.raises(al.DataError, match="X has 30 observations but Y has 29"):
        al.train(lstm_classifier(), x, y[:29], **QUIET)
    with pytest.raises(al.DataError, match="validation data.*has 30 observations but Y has 10"):
        al.train(lstm_classifier(), x, y, validation_data=(x, y[:10]), **QUIET)


def test_sizes_that_do_not_fit_the_input_layer():
    with pytest.raises(al.DataError, match=r"input 'in': expected B×T×6 \(sequence\), received "
                                           r"20×12×5.*SequenceInput\(5\)"):
        al.train(lstm_classifier(), torch.randn(20, 12, 5), torch.zeros(20, dtype=torch.long), **QUIET)
    with pytest.raises(al.DataError, match="N×T×C.*transpose"):
        al.train(lstm_classifier(), torch.randn(20, 6, 12), torch.zeros(20, dtype=torch.long), **QUIET)


def test_nan_and_inf_are_refused_with_the_observation():
    x, y = separable(20)
    x[3, 2, 1] = float("nan")
    with pytest.raises(al.DataError, match="input 'in'.*NaN.*observation 3"):
        al.train(lstm_classifier(), x, y, **QUIET)
    net = al.Network([L.FeatureInput(2), L.Dense(1)])
    v = torch.randn(10)
    v[7] = float("inf")
    with pytest.raises(al.DataError, match="targets.*Inf.*observation 7"):
        al.train(net, torch.randn(10, 2), v, loss="mse", **QUIET)


def test_unknown_label_values_at_validation():
    x, y = separable(30)
    names = np.array(["a", "b", "c"])[y.numpy()]
    val = names.copy()
    val[4] = "z"
    with pytest.raises(al.DataError, match=r"validation targets.*'z'.*not among the training classes "
                                           r"\('a', 'b', 'c'\)"):
        al.train(lstm_classifier(), x, names, validation_data=(x, val), **QUIET)


def test_more_classes_than_output_channels():
    x, _ = separable(30)
    with pytest.raises(al.DataError, match="5 distinct classes.*output 'softmax' has 3 channel"):
        al.train(lstm_classifier(), x, np.arange(30) % 5 + 10, **QUIET)


def test_seed2_sequence_output_with_one_label_per_observation():
    x, y = separable(30)
    # MATLAB's failing seed-2 network: selfAttentionLayer on sequences, no time reduction
    net = al.Network([L.SequenceInput(6, name="input"), L.LSTM(8, name="lstm"),
                      L.SelfAttention(2, 8, name="self-attention"), L.Dense(3, name="fc"),
                      L.Softmax(name="softmax")])
    with pytest.raises(al.FormatError) as e:
        al.train(net, x, y, **QUIET)
    msg = str(e.value)
    assert "output 'softmax' is a sequence B×T×3" in msg
    assert "one label per observation (30)" in msg
    for fix in ("GlobalAvgPool1d", "Index1d('last')", "AttentionPool1d",
                "after 'self-attention' (before 'fc')",
                "net.disconnect('self-attention', 'fc')"):
        assert fix in msg, fix
    assert e.value.layer == "softmax"
    # the suggested fix works
    net.disconnect("self-attention", "fc")
    net.add(L.GlobalAvgPool1d(name="pool"))
    net.connect("self-attention", "pool")
    net.connect("pool", "fc")
    al.train(net, x, y, max_epochs=1, **QUIET)
    # regression flavour: one value per observation for a B×T×1 output
    reg = al.Network([L.SequenceInput(6), L.LSTM(4, name="lstm"), L.Dense(1, name="out")])
    with pytest.raises(al.FormatError, match="output 'out' is a sequence.*one target per observation"):
        al.train(reg, x, torch.randn(30, 1), loss="mse", **QUIET)


def test_targets_with_a_time_axis_for_a_per_observation_output():
    x, _ = separable(10)
    with pytest.raises(al.FormatError, match="one prediction per observation.*output_mode='sequence'"):
        al.train(lstm_classifier(), x, torch.zeros(10, 12, dtype=torch.long), **QUIET)


def test_targets_missing_or_misplaced():
    x, y = separable(10)
    with pytest.raises(al.DataError, match="Y \\(the targets\\) is missing"):
        al.train(lstm_classifier(), x, **QUIET)
    with pytest.raises(al.DataError, match="omit Y"):
        al.train(lstm_classifier(), TensorDataset(x, y), y, **QUIET)
    with pytest.raises(al.DataError, match="2 channel\\(s\\).*the output has 1"):
        al.train(al.Network([L.FeatureInput(2), L.Dense(1)]), torch.randn(5, 2), torch.randn(5, 2),
                 loss="mse", **QUIET)
