"""The MATLAB scripts under tests/matlab/, each run by the reader and compared with the same network
built in Python: same layers and graph, same learnables, same outputs with copied weights."""
from pathlib import Path

import pytest
import torch

import attnlab as al
from attnlab import layers as L
from attnlab.matlab import run_file
from attnlab.matlab.mlayers import MatlabConcatenation

pytest.importorskip("tree_sitter_matlab")
HERE = Path(__file__).parent


def _net(*chains, connect=()):
    net = al.Network()
    for chain in chains:
        net.add(list(chain) if isinstance(chain, (list, tuple)) else chain)
    for s, d in connect:
        net.connect(s, d)
    return net


def py_m01():
    return _net([L.SequenceInput(12, name="sequence"), L.LSTM(16, "last", name="lstm"),
                 L.Dense(9, name="fc"), L.Softmax(name="softmax")])


def py_m02():
    return _net([L.SequenceInput(6, name="in"), L.Dense(16, name="embed"),
                 L.SelfAttention(4, 16, name="sa"), L.LayerNorm(name="ln"),
                 L.GlobalAvgPool1d(name="pool"), L.Dense(3, name="fc"), L.Softmax(name="sm")])


def py_m03():
    return _net([L.FeatureInput(8, name="input"), L.Dense(8, name="fc1"), L.ReLU(name="relu1"),
                 L.Addition(2, name="add"), L.Dense(2, name="out")],
                connect=[("input", "add/in2")])


def py_m04():
    return _net([L.SequenceInput(4, name="x"), L.Dense(8, name="proj"),
                 L.SelfAttention(2, 8, name="sa1"), L.LayerNorm(name="ln1"),
                 L.SelfAttention(2, 8, name="sa2"), L.LayerNorm(name="ln2"),
                 L.Index1d("last", name="last")])


def py_m05():
    return _net([L.SequenceInput(1, name="dec"), L.LSTM(8, name="lstm-dec"), L.Dense(8, name="q"),
                 L.Attention(2, name="attn")],
                [L.SequenceInput(1, name="enc"), L.LSTM(8, name="lstm-enc")],
                L.Dense(8, name="k"), L.Dense(8, name="v"),
                connect=[("lstm-enc", "k"), ("lstm-enc", "v"), ("k", "attn/key"),
                         ("v", "attn/value")])


def py_m06():
    return _net([L.ImageInput((1, 8, 8), name="img"), L.Conv2d(3, 4, padding="same", name="conv"),
                 L.BatchNorm(name="bn"), L.ReLU(name="relu"), L.MaxPool2d(2, stride=2, name="pool"),
                 L.Dense(2, name="fc"), L.Softmax(name="sm")])


def py_m07():
    return _net([L.SequenceInput(3, name="in"), L.SelfAttention(2, 8, name="sa"),
                 L.Dense(1, name="head")])


def py_m08():
    return _net([L.SequenceInput(4, name="in"), L.Dense(8, name="b1_fc"),
                 L.SelfAttention(2, 8, name="b1_sa"), L.ReLU(name="b1_relu"),
                 L.Dense(2, name="out")])


def py_m09():
    return _net([L.FeatureInput(5, name="f"), L.Dense(4, name="fc"), L.Tanh(name="t"),
                 L.Dense(1, name="y")])


def py_m10():
    return _net([L.SequenceInput(3, name="in"), L.Conv1d(3, 6, padding="causal", name="conv"),
                 L.GRU(8, "last", name="rnn"), L.Dropout(0.1, name="drop"), L.Dense(2, name="fc")])


def py_m11():
    return _net([L.SequenceInput(4, name="in"), L.LSTM(6, "last", name="lstm"),
                 MatlabConcatenation(2, 1, name="cat"), L.Dense(3, name="fc")],
                L.GlobalMaxPool1d(name="gmp"), connect=[("in", "gmp"), ("gmp", "cat/in2")])


def py_m12():
    return _net([L.SequenceInput(1, name="tokens"), L.Embedding(21, 8, name="emb"),
                 L.Addition(2, name="add"), L.SelfAttention(2, 8, attention_mask="causal", name="sa"),
                 L.Dense(20, name="logits")],
                L.PositionEmbedding(16, 8, name="pos"),
                connect=[("emb", "pos"), ("pos", "add/in2")])


def _inputs(net, batch=2, steps=5):
    g = torch.Generator().manual_seed(1)
    out = []
    for name in net.input_names:
        layer = next(l for l in net.layers if l.name == name)
        cfg = layer.config()
        if isinstance(layer, L.ImageInput):
            out.append(torch.randn(batch, *cfg["size"], generator=g))
        elif isinstance(layer, L.FeatureInput):
            out.append(torch.randn(batch, cfg["channels"], generator=g))
        elif any(isinstance(l, L.Embedding) for l in net.layers):
            out.append(torch.randint(1, 20, (batch, steps, 1), generator=g).float())
        else:
            out.append(torch.randn(batch, steps, cfg["channels"], generator=g))
    return out


def same_network(got: al.Network, want: al.Network):
    assert [(l.name, type(l).__name__, l.config()) for l in got.layers] == \
        [(l.name, type(l).__name__, l.config()) for l in want.layers]
    assert sorted(map(str, got.connections)) == sorted(map(str, want.connections))
    for net in (got, want):
        if not net.initialized:
            net.initialize()
    assert {k: tuple(v.shape) for k, v in got.learnables.items()} == \
        {k: tuple(v.shape) for k, v in want.learnables.items()}
    want.load_state_dict(got.state_dict())
    got.eval(), want.eval()
    x = _inputs(want)
    with torch.no_grad():
        torch.testing.assert_close(got(*x), want(*x))


def _data(kind, n=8):
    g = torch.Generator().manual_seed(0)
    if kind == "seq":
        return torch.randn(n, 5, 12, generator=g), torch.randint(0, 9, (n,), generator=g)
    return torch.randn(n, 1, 8, 8, generator=g), torch.randint(0, 2, (n,), generator=g)


FILES = {f"m{i:02d}": globals()[f"py_m{i:02d}"] for i in range(1, 13)}
WORKSPACES = {"m08": lambda: {"numHeads": 2}}


@pytest.mark.parametrize("stem", sorted(FILES))
def test_script_builds_the_python_network(stem, capsys, tmp_path):
    path = next(HERE.glob(f"{stem}_*.m"))
    ws = WORKSPACES.get(stem, dict)()
    if stem == "m01":
        ws.update(zip(("XTrain", "YTrain"), _data("seq")))
    if stem == "m06":
        ws.update(zip(("XTrain", "YTrain"), _data("img")))
        ws.update(zip(("XVal", "YVal"), _data("img", 4)))
    ws = run_file(path, ws, out_dir=tmp_path)          # m06 draws its training progress
    got = ws["lgraph"] if stem == "m03" else ws["net"]
    same_network(got, FILES[stem]())


@pytest.mark.parametrize("stem,kind", [("m01", "seq"), ("m06", "img")])
def test_two_scripts_train_one_epoch_with_the_output_layer_loss(stem, kind, tmp_path):
    X, Y = _data(kind)
    ws = {"XTrain": X, "YTrain": Y}
    if stem == "m06":
        ws.update(zip(("XVal", "YVal"), _data("img", 4)))
    net = run_file(next(HERE.glob(f"{stem}_*.m")), ws, out_dir=tmp_path)["net"]
    info = net.training_info
    assert info is not None and net.initialized
    assert "Softmax" in {type(l).__name__ for l in net.layers}          # classificationLayer dropped
    assert info.history if hasattr(info, "history") else True


def test_the_printed_side_effects(capsys):
    run_file(HERE / "m09_try_catch_rng.m")
    out = capsys.readouterr().out
    assert "could not build: lstmLayer: expected OutputMode" in out and "'middle'" in out
