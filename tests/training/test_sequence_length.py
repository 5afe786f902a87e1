"""TrainingOptions(sequence_length=...): mini-batches cut to their shortest sequence, or split
into pieces trained in consecutive iterations with the LSTM/GRU state carried between them
(truncated backpropagation through time), each equal to a loop written by hand in torch."""
import copy

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import Dataset

import attnlab as al
from attnlab import layers as L

LENGTHS = (7, 9, 4, 5, 8, 3)          # padded in every mini-batch of 2 or 3


pytestmark = pytest.mark.usefixtures("one_thread")


def _data(seq2one: bool, c: int = 2, lengths=LENGTHS):
    rs = np.random.RandomState(0)
    X = [torch.tensor(rs.randn(t, c), dtype=torch.float32) for t in lengths]
    if seq2one:
        return X, [int(x[:, 0].sum() > 0) for x in X]
    return X, [x.sum(1, keepdim=True) for x in X]


def _net(kind, seq2one: bool, hidden=3):
    torch.manual_seed(0)
    rnn = getattr(L, kind)(hidden, output_mode="last" if seq2one else "sequence", name="rnn")
    return al.Network([L.SequenceInput(2), rnn, L.Dense(2 if seq2one else 1, name="fc")])


def _options(**kw):
    base = dict(solver="sgdm", learning_rate=0.1, momentum=0.9, max_epochs=2, batch_size=2,
                shuffle="never", verbose=False)
    return al.TrainingOptions(**{**base, **kw})


def _by_hand(net, X, Y, seq2one: bool, piece: int, epochs=2, batch=2, lr=0.1):
    """Truncated backpropagation through time written out: each sequence run alone on its own
    steps of each piece, the state handed on detached, one SGD step per piece that has a loss;
    a sequence-to-one target counts in the piece holding the sequence's last step."""
    rnn, fc = net.layer_modules["rnn"], net.layer_modules["fc"]
    run = nn.LSTM.forward if isinstance(rnn, nn.LSTM) else nn.GRU.forward
    opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9)
    for _ in range(epochs):
        for b in range(0, len(X), batch):
            xs, ys = X[b:b + batch], Y[b:b + batch]
            lens = [len(x) for x in xs]
            state = [None] * len(xs)
            for s in range(0, max(lens), piece):
                e = min(s + piece, max(lens))
                loss, units = 0.0, 0
                for i, x in enumerate(xs):
                    k = min(lens[i], e) - s
                    if k <= 0:
                        continue                          # ended: keeps its state
                    out, state[i] = run(rnn, x[s:s + k].unsqueeze(0), state[i])
                    if not seq2one:
                        loss = loss + (fc(out)[0] - ys[i][s:s + k]).square().sum()
                        units += k
                    elif lens[i] <= e:                    # its last step is in this piece
                        loss = loss + F.cross_entropy(fc(out[:, -1]), torch.tensor([ys[i]]),
                                                      reduction="sum")
                        units += 1
                    state[i] = tuple(t.detach() for t in state[i]) \
                        if isinstance(state[i], tuple) else state[i].detach()
                if units:
                    (loss / units).backward()
                    opt.step()
                    opt.zero_grad()
    return net


def _same_weights(a, b, tol=1e-6):
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.allclose(p, q, atol=tol), (name, float((p - q).abs().max()))


def _changed(before, after):
    return any(not torch.equal(p, q) for p, q in zip(before.state_dict().values(),
                                                     after.state_dict().values()))


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
@pytest.mark.parametrize("seq2one", [False, True], ids=["seq2seq", "seq2one"])
def test_split_training_equals_truncated_bptt_by_hand(kind, seq2one):
    X, Y = _data(seq2one)
    net = _net(kind, seq2one)
    ref = copy.deepcopy(net)
    start = copy.deepcopy(net)
    info = al.train(net, X, Y, loss="crossentropy" if seq2one else "mse",
                    options=_options(sequence_length=3))
    _by_hand(ref, X, Y, seq2one, piece=3)
    assert _changed(start, net)
    _same_weights(net, ref)
    # lengths (7, 9), (4, 5), (8, 3) in pieces of 3: seq2seq trains every piece, 3 + 2 + 3;
    # seq2one only the pieces where a sequence ends, by piece: (3, 3), (2, 2), (3, 1): 1 + 1 + 2
    per_epoch = 4 if seq2one else 8
    assert info.iterations["iteration"][-1] == 2 * per_epoch


def test_split_without_padding_and_with_adam():
    X, Y = _data(False, lengths=(6, 6, 6, 6))
    net = _net("LSTM", False)
    ref = copy.deepcopy(net)
    al.train(net, X, Y, loss="mse", options=_options(sequence_length=4, solver="adam",
                                                      learning_rate=0.01, batch_size=4))
    rnn, fc = ref.layer_modules["rnn"], ref.layer_modules["fc"]
    opt = torch.optim.Adam(ref.parameters(), lr=0.01, betas=(0.9, 0.999), eps=1e-8)
    x, y = torch.stack(X), torch.stack(Y)
    for _ in range(2):
        state = None
        for s in (0, 4):
            out, state = nn.LSTM.forward(rnn, x[:, s:s + 4], state)
            F.mse_loss(fc(out), y[:, s:s + 4]).backward()
            opt.step()
            opt.zero_grad()
            state = tuple(t.detach() for t in state)
    _same_weights(net, ref, tol=1e-5)        # torch's fused Adam rounds in another order


@pytest.mark.parametrize("seq2one", [False, True], ids=["seq2seq", "seq2one"])
def test_shortest_cuts_each_mini_batch_to_its_shortest_sequence(seq2one):
    X, Y = _data(seq2one)
    net = _net("LSTM", seq2one)
    ref = copy.deepcopy(net)
    info = al.train(net, X, Y, loss="crossentropy" if seq2one else "mse",
                    options=_options(sequence_length="shortest"))
    rnn, fc = ref.layer_modules["rnn"], ref.layer_modules["fc"]
    opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    for _ in range(2):
        for b in range(0, len(X), 2):
            m = min(len(x) for x in X[b:b + 2])
            x = torch.stack([x[:m] for x in X[b:b + 2]])
            out, _ = nn.LSTM.forward(rnn, x)
            if seq2one:
                loss = F.cross_entropy(fc(out[:, -1]), torch.tensor(Y[b:b + 2]))
            else:
                loss = F.mse_loss(fc(out), torch.stack([y[:m] for y in Y[b:b + 2]]))
            loss.backward()
            opt.step()
            opt.zero_grad()
    _same_weights(net, ref)
    assert info.iterations["iteration"][-1] == 6           # one iteration per mini-batch


def test_validation_runs_the_pieces_with_its_own_carried_state():
    # an LSTM's carried state makes the pieces give what the whole sequence gives: the
    # validation loss equals the loss of the trained network on whole sequences
    X, Y = _data(False)
    XV, YV = _data(False, lengths=(5, 10, 2))
    net = _net("LSTM", False)
    info = al.train(net, X, Y, loss="mse", options=_options(
        sequence_length=3, validation_data=(XV, YV), validation_frequency=1000))
    net.eval()
    with torch.no_grad():
        total = sum(float((net(x.unsqueeze(0))[0] - y).square().sum()) for x, y in zip(XV, YV))
    assert info.final_validation["loss"] == pytest.approx(total / 17, rel=1e-5)


def test_a_network_without_state_trains_the_pieces_in_consecutive_iterations():
    X, Y = _data(False)
    torch.manual_seed(0)
    net = al.Network([L.SequenceInput(2), L.Dense(1, name="fc")])
    ref = copy.deepcopy(net)
    info = al.train(net, X, Y, loss="mse", options=_options(sequence_length=4, max_epochs=1))
    fc = ref.layer_modules["fc"]
    opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    for b in range(0, len(X), 2):
        xs, ys = X[b:b + 2], Y[b:b + 2]
        for s in range(0, max(map(len, xs)), 4):
            pred = [fc(x[s:s + 4]) for x in xs]
            sq = sum((p - y[s:s + 4]).square().sum() for p, y in zip(pred, ys))
            (sq / sum(len(p) for p in pred)).backward()
            opt.step()
            opt.zero_grad()
    _same_weights(net, ref)
    assert info.iterations["iteration"][-1] == 3 + 2 + 2


class _Pairs(Dataset):
    def __init__(self, X, Y):
        self.X, self.Y = X, Y

    def __len__(self):
        return len(self.X)

    def __getitem__(self, i):
        return self.X[i], self.Y[i]


def test_a_dataset_is_split_as_arrays_are():
    X, Y = _data(False)
    net = _net("GRU", False)
    twin = copy.deepcopy(net)
    al.train(net, X, Y, loss="mse", options=_options(sequence_length=3))
    al.train(twin, _Pairs(X, Y), loss="mse", options=_options(sequence_length=3))
    _same_weights(net, twin)


# --------------------------------------------------------------------- refusals ---

def test_sequence_length_values_are_checked():
    assert al.TrainingOptions(sequence_length="longest").sequence_length is None
    assert al.TrainingOptions(sequence_length=np.int64(5)).sequence_length == 5
    for bad, words in ((0, "positive int"), ("shortes", "Did you mean 'shortest'"),
                       (2.5, "got 2.5"), (True, "got True")):
        with pytest.raises(al.ArgumentError, match=words):
            al.TrainingOptions(sequence_length=bad)


def _refused(net, words, X=None, Y=None, **kw):
    X, Y = (X, Y) if X is not None else _data(False)
    before = copy.deepcopy(net.state_dict())
    with pytest.raises(al.ArgumentError, match=words):
        al.train(net, X, Y, loss="mse", options=_options(**kw))
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())


def test_what_splitting_cannot_give_exactly_is_refused(tmp_path):
    lstm = _net("LSTM", False)
    _refused(al.Network([L.SequenceInput(2), L.LSTM(3, bidirectional=True, name="bi"),
                         L.Dense(1)]),
             r"sequence_length=3 \(MATLAB's SequenceLength=3\): 'bi' is a bidirectional LSTM",
             sequence_length=3)
    _refused(lstm, "checkpoint_frequency_unit=\"iteration\": a checkpoint could fall between",
             sequence_length=3, checkpoint_dir=str(tmp_path), checkpoint_frequency_unit="iteration")
    _refused(lstm, "learning_rate_schedule=\"cosine\": the schedule is laid out",
             sequence_length=3, learning_rate_schedule="cosine")
    state = al.Network()
    state.add([L.SequenceInput(2, name="x"), L.GRU(3, has_state_inputs=True, name="gru"),
               L.Dense(1, name="fc")])
    state.add(L.FeatureInput(3, name="h0"))
    state.connect("h0", "gru/hidden")
    X, Y = _data(False)
    h0 = torch.zeros(len(X), 3)
    _refused(state, "'gru' \\(GRU\\) takes its initial state from its state inputs",
             X={"x": X, "h0": h0}, Y=Y, sequence_length=3)
    # "shortest" does not split: the same networks train
    al.train(state, {"x": X, "h0": h0}, Y, loss="mse", options=_options(
        sequence_length="shortest", max_epochs=1))


class _TorchLSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(2, 3, batch_first=True)

    def forward(self, x):
        return self.rnn(x)[0]


def test_a_torch_rnn_wrapped_as_a_layer_is_refused_when_split():
    torch.manual_seed(0)
    net = al.Network([L.SequenceInput(2), L.Module(_TorchLSTM(), name="mine"), L.Dense(1)])
    X, Y = _data(False, lengths=(6, 6, 6, 6))
    _refused(net, "'.*mine.*' is a torch recurrent module of its own", X=X, Y=Y,
             sequence_length=3)


def test_an_output_that_changes_the_time_steps_is_refused_when_split():
    X, Y = _data(False, lengths=(8, 8, 8, 8))
    torch.manual_seed(0)
    net = al.Network([L.SequenceInput(2, name="in"), L.Conv1d(2, 1, stride=2, name="conv")])
    before = copy.deepcopy(net.state_dict())
    with pytest.raises(al.ArgumentError, match="output 'conv' has 4 time steps in a mini-batch "
                                               "whose input 'in' has 8"):
        al.train(net, _Pairs(X, [y[::2] for y in Y]), loss="mse",
                 options=_options(sequence_length=3))
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())
