"""The graph walk of rollout and relevance over given attention weights, layer kind by kind."""
import pytest
import torch

import attnlab as al
from attnlab import layers as L
from attnlab.explain.mixing import Mix, Walk, attention_layers, combine


def _weights(b, t, seed=0):
    w = torch.rand(b, t, t, generator=torch.Generator().manual_seed(seed))
    return w / w.sum(-1, keepdim=True)


def _residual_attention(extra=()):
    net = al.Network()
    net.add([L.SequenceInput(4, name="x"), *extra, L.SelfAttention(2, 4, name="sa")])
    net.add(L.Addition(2, name="add"))
    src = extra[-1].name if extra else "x"
    net.connect(src, "add/in1")
    net.connect("sa", "add/in2")
    net.add([L.Dense(4, name="mlp")])
    net.connect("add", "mlp")
    net.add(L.Addition(2, name="add2"))
    net.connect("add", "add2/in1")
    net.connect("mlp", "add2/in2")
    return net


def test_a_residual_attention_is_abnars_half_and_half_and_an_mlp_residual_keeps_it():
    a = _weights(2, 5)
    walk = Walk({"sa": a}.__getitem__, mean=True)
    walk.run(_residual_attention(), {})
    assert walk.attention == ["sa"]
    assert torch.allclose(walk.last.terms["x"], 0.5 * a + 0.5 * torch.eye(5))


def test_relevance_sums_the_residual_to_i_plus_a():
    a = _weights(1, 4)
    walk = Walk({"sa": a}.__getitem__, mean=False)
    walk.run(_residual_attention(), {})
    assert torch.allclose(walk.last.terms["x"], torch.eye(4) + a)


def test_two_layers_chain_in_graph_order():
    net = al.Network()
    net.add([L.SequenceInput(3, name="x"), L.SelfAttention(1, 3, name="a1"),
             L.LayerNorm(name="ln"), L.SelfAttention(1, 3, name="a2")])
    w1, w2 = _weights(2, 6, 1), _weights(2, 6, 2)
    walk = Walk({"a1": w1, "a2": w2}.__getitem__, mean=True)
    walk.run(net, {})
    assert torch.allclose(walk.last.terms["x"], w2 @ w1)
    assert attention_layers(net) == ["a1", "a2"]


def test_an_addition_of_unmixed_embeddings_and_a_position_term_stays_the_identity():
    # token + position embedding: the position term carries no token, the sum is the tokens
    ident = Mix.identity("ids")
    assert combine([ident, None], mean=True) is ident
    assert combine([ident, Mix.identity("types")], mean=True) is ident
    assert combine([None, None], mean=True) is None


def test_a_recurrent_layer_passes_each_step_on_and_a_convolution_after_attention_is_refused():
    net = al.Network()
    net.add([L.SequenceInput(3, name="x"), L.SelfAttention(1, 3, name="sa"),
             L.LSTM(3, name="lstm")])
    w = _weights(1, 4)
    walk = Walk({"sa": w}.__getitem__, mean=True)
    walk.run(net, {})
    assert torch.equal(walk.last.terms["x"], w)
    net.add(L.Conv1d(3, 3, name="conv"))
    net.connect("lstm", "conv")
    with pytest.raises(al.NetworkError, match=r"layer 'conv' \(Conv1d\) mixes time steps.*"
                                              r"no attention weights"):
        Walk({"sa": w}.__getitem__, mean=True).run(net, {})


def test_a_convolution_before_the_first_attention_starts_new_positions():
    net = al.Network()
    net.add([L.SequenceInput(3, name="x"), L.Conv1d(3, 3, name="conv"),
             L.SelfAttention(1, 3, name="sa")])
    w = _weights(1, 4)
    walk = Walk({"sa": w}.__getitem__, mean=True)
    walk.run(net, {})
    assert list(walk.last.terms) == ["conv"] and torch.equal(walk.last.terms["conv"], w)


def test_cross_attention_carries_the_encoders_positions():
    net = al.Network()
    net.add([L.SequenceInput(2, name="dec"), L.Attention(1, name="cross")])
    net.add(L.SequenceInput(2, name="enc"))
    net.connect("enc", "cross/key")
    net.connect("enc", "cross/value")
    net.add(L.Addition(2, name="add"))
    net.connect("dec", "add/in1")
    net.connect("cross", "add/in2")
    w = torch.rand(1, 3, 5)                       # 3 decoder steps over 5 encoder steps
    walk = Walk({"cross": w}.__getitem__, mean=True)
    walk.run(net, {})
    assert torch.allclose(walk.last.terms["dec"], 0.5 * torch.eye(3).expand(1, 3, 3))
    assert torch.allclose(walk.last.terms["enc"], 0.5 * w)


def test_a_nested_network_is_walked_inside_by_its_full_names():
    inner = al.Residual(L.SelfAttention(1, 3, name="sa"), name="block")
    net = al.Network()
    net.add([L.SequenceInput(3, name="x"), inner])
    names = attention_layers(net)
    assert names == ["block/sa"]
    w = _weights(1, 4)
    walk = Walk({"block/sa": w}.__getitem__, mean=True)
    walk.run(net, {})
    assert torch.allclose(walk.last.terms["x"], 0.5 * w + 0.5 * torch.eye(4))
