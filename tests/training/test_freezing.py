"""net.freeze / net.unfreeze: patterns over learnable and layer names, ties, near-miss errors,
and al.train updating only what is trainable and saying so."""
import io

import pytest
import torch

import attnlab as al
from attnlab import layers as L
from attnlab.training import progress


def _lm(vocab=12, d=8):
    torch.manual_seed(0)
    block = al.Serial(L.Dense(d, name="fc1"), L.ReLU(name="act"), L.Dense(d, name="fc2"))
    block.name = "blk"
    return al.Network([L.TokenInput(name="ids"), L.Embedding(vocab, d, name="wte"),
                       L.SelfAttention(2, d, name="h.0.attn"),
                       L.SelfAttention(2, d, name="h.1.attn"), block,
                       L.LayerNorm(name="ln_f"),
                       L.Dense(vocab, bias=False, tied_to="wte", name="head")])


def test_freeze_by_learnable_pattern_returns_sorted_names():
    net = _lm()
    got = net.freeze("h.*.attn/query.*")
    assert got == ["h.0.attn/query.bias", "h.0.attn/query.weight",
                   "h.1.attn/query.bias", "h.1.attn/query.weight"]
    frozen = sorted(n for n, p in net.learnables.items() if not p.requires_grad)
    assert frozen == got


def test_a_layer_name_alone_means_all_its_learnables_nested_too():
    net = _lm()
    assert net.freeze("h.0.attn") == sorted(n for n in net.learnables if n.startswith("h.0.attn/"))
    nested = net.freeze("blk")
    assert nested == sorted(n for n in net.learnables if n.startswith("blk/"))
    assert "blk/fc1/weight" in nested


def test_unfreeze_reverses_freeze():
    net = _lm()
    net.freeze("*")
    assert not any(p.requires_grad for p in net.parameters())
    back = net.unfreeze("ln_f/*", "h.1.attn")
    assert all(net.learnables[n].requires_grad for n in back)
    assert sorted(n for n, p in net.learnables.items() if p.requires_grad) == back


def test_tied_learnables_follow_their_tie():
    net = _lm()
    got = net.freeze("wte/weight")
    assert got == ["head/weight", "wte/weight"]
    assert not net.learnables["head/weight"].requires_grad


def test_a_pattern_matching_nothing_names_close_names():
    net = _lm()
    with pytest.raises(al.ArgumentError) as e:
        net.freeze("h.0.atn/query.weight")
    msg = str(e.value)
    assert "'h.0.atn/query.weight' matches no learnable" in msg
    assert "Did you mean" in msg and "h.0.attn/query.weight" in msg
    # nothing was frozen by the failed call
    assert all(p.requires_grad for p in net.parameters())


def test_bad_arguments_are_refused():
    net = _lm()
    with pytest.raises(al.ArgumentError, match="no pattern given"):
        net.freeze()
    with pytest.raises(al.ArgumentError, match="non-empty string"):
        net.unfreeze(3)
    lazy = al.Network([L.Dense(4, name="fc")])
    with pytest.raises(al.NetworkError, match="no learnables yet"):
        lazy.freeze("fc")


def _data(n=16, T=5, vocab=12):
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, vocab, (n, T), generator=g)
    return x, torch.roll(x, -1, dims=1)


def test_train_updates_only_trainable_learnables_and_says_so(capsys):
    net = _lm()
    frozen = net.freeze("*")
    trained = net.unfreeze("ln_f", "h.1.attn/output.*")
    before = {n: p.detach().clone() for n, p in net.learnables.items()}
    x, y = _data()
    o = al.TrainingOptions(solver="adam", max_epochs=2, batch_size=8, verbose=True)
    al.train(net, x, y, "crossentropy", o)
    for n, p in net.learnables.items():
        changed = not torch.equal(before[n], p.detach())
        assert changed == (n in trained), n
    assert len(frozen) > len(trained)
    first = capsys.readouterr().out.splitlines()[0]
    total = len(list(net.parameters()))
    count = sum(p.numel() for p in net.parameters())
    assert first.startswith(f"training 4 of {total} learnables (") and "parameters)" in first
    assert f"of {count} parameters" in first or f"of {count / 1e3:.3g} k parameters" in first


def test_train_with_every_learnable_frozen_is_refused():
    net = _lm()
    net.freeze("*")
    x, y = _data()
    with pytest.raises(al.TrainingError, match="nothing to train"):
        al.train(net, x, y, "crossentropy", al.TrainingOptions(max_epochs=1, verbose=False))


def test_parameter_counts_read_in_thousands_and_millions():
    assert progress._count(999) == "999"
    assert progress._count(1234) == "1.23 k"
    assert progress._count(124_439_808) == "124 M"
    stream = io.StringIO()
    progress.Lines(stream).start(10, 2, 0, "3 of 5 learnables (12 of 40 parameters)")
    assert stream.getvalue().startswith("training 3 of 5 learnables (12 of 40 parameters): 2 epoch(s)")
