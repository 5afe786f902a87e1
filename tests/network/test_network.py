"""Network editing, views, the compiled forward, nesting, and the seed-1 answer."""
import copy
import pickle

import pytest
import torch
from torch import nn

import attnlab as al
from attnlab import layers as L

from attnlab.cli.demos.seed1 import answer_network as seed1_answer
from attnlab.cli.demos.seed1 import question_network as seed1_question


def test_seed1_question_reports_the_cycle_in_order_with_the_fix():
    net = seed1_question()
    a = net.analyze()
    assert not a.ok
    (cycle,) = [i for i in a.errors if i.kind == "cycle"]
    assert "cross-attention → layernorm → lstm_decoder → query → cross-attention" in cycle.message
    assert "net.add(L.SequenceInput(C, name='decoder-input'))" in cycle.message
    assert a.cycles == [["cross-attention", "layernorm", "lstm_decoder", "query"]]
    assert "cycle" in str(a)
    with pytest.raises(al.NetworkError) as info:
        net(torch.randn(2, 5, 1))
    assert cycle.message in str(info.value)


def test_seed1_question_fixed_as_the_message_says_runs():
    net = seed1_question()
    net.disconnect("layernorm", "lstm_decoder")
    net.add(L.SequenceInput(1, name="decoder-input"))
    net.connect("decoder-input", "lstm_decoder")
    net.add(L.Concatenation(2, name="context"))
    net.disconnect("lstm_decoder", "dropout_2")
    net.connect("lstm_decoder", "context/in1")
    net.connect("layernorm", "context/in2")
    net.connect("context", "dropout_2")
    a = net.analyze()
    assert a.ok and not a.issues, a
    out = net({"input": torch.randn(2, 9, 1), "decoder-input": torch.randn(2, 4, 1)})
    assert net.output_names == ["fc_out"] and out.shape == (2, 4, 1)   # one output: no dead end


def test_seed1_answer_runs_with_gradients_to_both_lstms(tmp_path):
    net = seed1_answer()
    a = net.analyze()
    assert a.ok and not a.issues, a
    assert net.input_names == ["decoder-input", "encoder-input"]
    assert net.output_names == ["cross-attention"]
    assert str(a.out_specs["cross-attention"]["out"]) == "B×T×256"
    xd, xe = torch.randn(4, 7, 1), torch.randn(4, 11, 1)
    y = net({"decoder-input": xd, "encoder-input": xe})
    assert y.shape == (4, 7, 256)
    assert torch.equal(net(xd, xe), y)                        # positional = by name
    y.square().mean().backward()
    for lstm in ("lstm-decoder", "lstm-encoder"):
        g = net.learnables[f"{lstm}/weight_ih_l0"].grad
        assert g is not None and g.abs().sum() > 0
    path = tmp_path / "net.png"
    net.plot(path)
    assert path.stat().st_size > 10_000
    assert '"fc-key" -> "cross-attention" [label="key"]' in net.to_dot()


def test_add_list_connects_first_output_to_first_input_and_auto_names():
    net = al.Network([L.SequenceInput(2), L.LSTM(3), L.LSTM(3), L.Dense(4), L.Attention(1)])
    assert [l.name for l in net.layers] == ["input", "lstm", "lstm_1", "fc", "attention"]
    assert [str(c) for c in net.connections] == [
        "input → lstm", "lstm → lstm_1", "lstm_1 → fc", "fc → attention/query"]
    assert net.layers["fc"].out == 4


def test_learnables_named_layer_slash_param():
    net = seed1_answer(channels=16, heads=2).initialize()
    names = list(net.learnables)
    assert "query/weight" in names and "fc-value/bias" in names
    assert net.learnables["query/weight"].shape == (16, 64)
    assert sum(p.numel() for p in net.learnables.values()) == net.analyze().total_learnables


def test_compiled_plan_is_made_once_per_edit_and_keeps_unchanged_weights():
    net = al.Network([L.SequenceInput(3, name="x"), L.Dense(4, name="a"), L.ReLU(), L.Dense(2, name="b")])
    x = torch.randn(2, 5, 3)
    net(x)
    plan = net._plan
    net(x)
    assert net._plan is plan
    assert "for " not in plan.source and "while " not in plan.source
    w = net.learnables["a/weight"].detach().clone()
    net.replace("b", [L.Dense(6, name="b"), L.Tanh()])
    assert net._plan is None
    assert net(x).shape == (2, 5, 6)
    assert torch.equal(net.learnables["a/weight"], w)
    assert net.learnables["b/weight"].shape == (6, 4)
    net.remove("tanh")
    assert net.output_names == ["b"]
    net.replace("a", L.Dense(7, name="a"))                     # a new layer: rebuilt, and 'b' too
    assert net(x).shape == (2, 5, 6)
    assert net.learnables["b/weight"].shape == (6, 7)


def test_replace_keeps_connections_on_named_ports():
    net = seed1_answer(channels=16, heads=2)
    net.replace("fc-key", L.Dense(16, name="fc-key2"))
    assert ("fc-key2", "cross-attention/key") in [tuple(c) for c in net.connections]
    assert [l.name for l in net.layers].index("fc-key2") == 8  # kept its place
    assert net.analyze().ok


def test_disconnect_then_reconnect():
    net = seed1_answer(channels=16, heads=2)
    net.disconnect("fc-key", "cross-attention/key")
    assert not net.analyze().ok
    net.connect("fc-key", "cross-attention/key")
    assert net.analyze().ok


def test_multiple_outputs_come_back_as_a_dict():
    net = al.Network([L.SequenceInput(3, name="x"), L.LSTM(4, has_state_outputs=True, name="lstm")])
    out = net(torch.randn(2, 5, 3))
    assert set(out) == {"lstm/out", "lstm/hidden", "lstm/cell"}
    assert torch.allclose(out["lstm/out"][:, -1], out["lstm/hidden"])


def test_network_without_input_layers_takes_sizes_from_the_first_call():
    net = al.Network([L.Dense(8, name="fc"), L.ReLU(), L.Dense(2)])
    assert net.input_names == ["fc"]
    a = net.analyze()
    assert a.ok and a.out_specs["fc"] is None                 # unknown until data arrives
    with pytest.raises(al.NetworkError, match="example inputs"):
        net.initialize()
    assert str(net.analyze(torch.randn(2, 5, 3)).out_specs["fc_1"]["out"]) == "B×T×2"
    y = net(torch.randn(2, 5, 3))
    assert y.shape == (2, 5, 2)
    with pytest.raises(al.DataError, match="expected B×T×3"):
        net(torch.randn(2, 5, 4))


def test_network_as_a_layer():
    inner = al.Network([L.Dense(6, name="fc"), L.GELU()], name="block")
    outer = al.Network([L.SequenceInput(3, name="x"), inner, L.Dense(2, name="head")])
    a = outer.analyze()
    assert a.ok, a
    assert str(a.out_specs["block"]["gelu"]) == "B×T×6"
    x = [torch.randn(5, 3), torch.randn(2, 3)]
    y = outer(x)
    assert y.shape == (2, 5, 2)
    assert "block/fc/weight" in outer.learnables
    ref = outer.layer_modules["head"](torch.nn.functional.gelu(
        torch.nn.functional.linear(al.pad_sequences(x).data, inner.learnables["fc/weight"],
                                   inner.learnables["fc/bias"])))
    assert torch.allclose(y, ref, atol=1e-6)


def test_module_layer_wraps_any_torch_module():
    lin = nn.Linear(3, 5)
    net = al.Network([L.SequenceInput(3, name="x"), L.Module(lin, name="lin")])
    assert str(net.analyze().out_specs["lin"]["out"]) == "B×T×5"
    x = torch.randn(2, 4, 3)
    assert torch.equal(net(x), lin(x))
    assert net.learnables["lin/weight"] is lin.weight


def test_deepcopy_and_pickle_give_independent_equal_networks():
    net = seed1_answer(channels=16, heads=2)
    xd, xe = torch.randn(2, 4, 1), torch.randn(2, 6, 1)
    y = net(xd, xe)
    for twin in (copy.deepcopy(net), pickle.loads(pickle.dumps(net))):
        assert torch.equal(twin(xd, xe), y)
        with torch.no_grad():
            twin.learnables["query/bias"].add_(1.0)
        assert torch.equal(net(xd, xe), y)


def test_dtype_and_numpy_inputs():
    net = al.Network([L.SequenceInput(3, name="x"), L.Dense(2)])
    y = net(torch.randn(2, 4, 3).numpy().astype("float64"))
    assert y.dtype == torch.float32
    net.double()
    assert net(torch.randn(2, 4, 3)).dtype == torch.float64


def test_summary_prints_the_table(capsys):
    seed1_answer(channels=16, heads=2).summary()
    out = capsys.readouterr().out
    assert "cross-attention" in out and "B×T×16" in out and "total learnables" in out


def test_cli_demo_seed1(tmp_path, capsys):
    from attnlab.cli import main
    assert main(["demo", "seed1", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "4×7×256" in out and "cross-attention → layernorm → lstm_decoder → query" in out
    assert (tmp_path / "seed1" / "seed1-answer.png").stat().st_size > 10_000


def test_replace_a_layer_connected_to_itself_moves_both_ends():
    # found by the random-edit property test: the self-loop's destination port must move too
    net = al.Network([L.SequenceInput(4, name="x"), L.Addition(2, name="add")])
    net.connect("add", "add/in2")
    net.replace("add", L.Multiplication(2, name="mul"))
    assert sorted(map(str, net.connections)) == ["mul → mul/in2", "x → mul/in1"]
    with pytest.raises(al.NetworkError, match="its input 'in2' is connected"):
        net.replace("mul", L.Dense(4, name="fc"))             # one input cannot take two
    assert sorted(map(str, net.connections)) == ["mul → mul/in2", "x → mul/in1"]
