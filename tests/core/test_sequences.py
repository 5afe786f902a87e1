"""Variable-length sequences: a padded batch gives each sequence the result it gets alone."""
import pytest
import torch

import attnlab as al
from attnlab import layers as L

LENGTHS = [7, 3, 5, 1]


def seqs(c=3):
    return [torch.randn(n, c) for n in LENGTHS]


def self_attention(c=8, heads=2):
    """q = k = v from one sequence: padded keys must be ignored."""
    net = al.Network([L.SequenceInput(3, name="x"), L.Dense(c, name="proj"),
                      L.Attention(heads, name="att")])
    net.connect("proj", "att/key")
    net.connect("proj", "att/value")
    return net


SEQUENCE_NETS = {
    "lstm": lambda: al.Network([L.SequenceInput(3), L.LSTM(5), L.Dense(2)]),
    "gru": lambda: al.Network([L.SequenceInput(3), L.GRU(5)]),
    "bilstm": lambda: al.Network([L.SequenceInput(3), L.LSTM(4, bidirectional=True)]),
    "conv1d-same": lambda: al.Network([L.SequenceInput(3), L.Conv1d(3, 4)]),
    "conv1d-causal": lambda: al.Network([L.SequenceInput(3), L.Conv1d(3, 4, padding="causal", dilation=2)]),
    "self-attention": self_attention,
    "concat-time": lambda: al.Network([L.SequenceInput(3, name="x"), L.Concatenation(2, dim="time", name="cat")])
    .connect("x", "cat/in2"),
}

REDUCING_NETS = {
    "lstm-last": lambda: al.Network([L.SequenceInput(3), L.LSTM(5, output_mode="last")]),
    "bilstm-last": lambda: al.Network([L.SequenceInput(3), L.LSTM(4, output_mode="last", bidirectional=True)]),
    "gru-state": lambda: al.Network([L.SequenceInput(3), L.GRU(4, output_mode="last", has_state_outputs=True, name="gru")]),
    "index-last": lambda: al.Network([L.SequenceInput(3), L.Dense(4), L.Index1d("last")]),
    "gap": lambda: al.Network([L.SequenceInput(3), L.Conv1d(3, 4), L.GlobalAvgPool1d()]),
    "gmp": lambda: al.Network([L.SequenceInput(3), L.Dense(4), L.GlobalMaxPool1d()]),
    "attention-gap": lambda: self_attention().add(L.GlobalAvgPool1d(name="gap")).connect("att", "gap"),
    "strided-conv-gap": lambda: al.Network([L.SequenceInput(3), L.Conv1d(3, 4, stride=2), L.GlobalAvgPool1d()]),
}


@pytest.mark.parametrize("make", SEQUENCE_NETS.values(), ids=SEQUENCE_NETS)
def test_sequence_outputs_equal_running_each_alone(make):
    net = make().eval()
    xs = seqs()
    batched = net.predict(xs)
    assert isinstance(batched, list) and len(batched) == len(xs)
    for x, y in zip(xs, batched):
        alone = net(x.unsqueeze(0))[0]
        assert y.shape == alone.shape
        torch.testing.assert_close(y, alone, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("make", REDUCING_NETS.values(), ids=REDUCING_NETS)
def test_reduced_outputs_equal_running_each_alone(make):
    net = make().eval()
    xs = seqs()
    batched = net(xs)
    for i, x in enumerate(xs):
        alone = net(x.unsqueeze(0))
        if isinstance(alone, dict):
            for k in alone:
                torch.testing.assert_close(batched[k][i], alone[k][0], atol=1e-5, rtol=1e-5)
        else:
            torch.testing.assert_close(batched[i], alone[0], atol=1e-5, rtol=1e-5)


def test_padded_input_object_and_mask_travel():
    net = self_attention()
    xs = seqs()
    p = al.pad_sequences(xs)
    assert p.data.shape == (4, 7, 3) and p.lengths.tolist() == LENGTHS
    outs, masks = net.forward_with_masks(p)
    assert torch.equal(masks["att"], p.mask)
    torch.testing.assert_close(outs["att"], net(xs))


def test_equal_lengths_carry_no_mask():
    net = self_attention()
    outs, masks = net.forward_with_masks([torch.randn(4, 3), torch.randn(4, 3)])
    assert masks["att"] is None


def test_padding_values_never_leak():
    """Whatever the padding holds, valid outputs do not change."""
    net = al.Network([L.SequenceInput(3), L.Conv1d(3, 4), L.LSTM(4), L.Dense(4, name="p")]).eval()
    p = al.pad_sequences(seqs())
    dirty = al.Padded(p.data.masked_fill(~p.mask.unsqueeze(-1), 1e3), p.mask)
    a, b = net.forward_with_masks(p)[0]["p"], net.forward_with_masks(dirty)[0]["p"]
    torch.testing.assert_close(a[p.mask], b[p.mask])
