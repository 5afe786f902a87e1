"""Sizes that only data reveals (a network's time and batch sizes are symbolic) are reported in
the layer's words when they reach an attention layer: `layer 'NAME' port 'PORT': expected …,
received ….` and the fix, with `.layer` and `.port` set, in the forward pass and in a stream."""
import pytest
import torch

import attnlab as al
from attnlab import layers as L
from attnlab.functional import attention


def _raises(cls, fn, start, *parts):
    with pytest.raises(cls) as info:
        fn()
    msg = str(info.value)
    assert msg.startswith(start), msg
    for part in parts:
        assert part in msg, msg
    return info.value


def _with_bias(bias_size):
    """Self-attention 'sa' whose bias port is a network input of fixed size."""
    net = al.Network([L.SequenceInput(8, name="x"),
                      L.SelfAttention(2, 8, attention_mask="causal", has_bias_input=True,
                                      name="sa")])
    net.add(L.ImageInput(bias_size, name="b"))
    net.connect("b", "sa/bias")
    return net


def _cross(**opts):
    """Multi-head attention 'mha' with query 'q', key 'k', value 'v' inputs."""
    net = al.Network([L.SequenceInput(8, name="q"), L.MultiHeadAttention(2, 8, name="mha",
                                                                          **opts)])
    net.add(L.SequenceInput(8, name="k"))
    net.add(L.SequenceInput(8, name="v"))
    net.connect("k", "mha/key")
    net.connect("v", "mha/value")
    return net


def test_a_bias_of_the_wrong_size_names_the_layer_and_port():
    net = _with_bias((2, 5, 5))
    x, b = torch.randn(1, 5, 8), torch.randn(1, 2, 5, 5)
    assert net({"x": x, "b": b}).shape == (1, 5, 8)
    err = _raises(al.SizeError, lambda: net({"x": x[:, :4], "b": b}),
                  "layer 'sa' port 'bias': expected a tensor broadcastable to B×H×Tq×Tk = "
                  "1×2×4×4, received 1×2×5×5.", "Give it sizes 1 or B, 1 or H, Tq and Tk")
    assert (err.layer, err.port) == ("sa", "bias")


def test_key_and_value_of_different_lengths_name_the_value_port():
    net = _cross()
    err = _raises(al.SizeError, lambda: net({"q": torch.randn(1, 3, 8), "k": torch.randn(1, 4, 8),
                                             "v": torch.randn(1, 5, 8)}),
                  "layer 'mha' port 'value': expected 4 time steps (as the key), received 5.",
                  "give them the same length")
    assert (err.layer, err.port) == ("mha", "value")


def test_inputs_of_different_batch_sizes_name_the_port():
    net = _cross()
    _raises(al.SizeError, lambda: net({"q": torch.randn(2, 3, 8), "k": torch.randn(1, 4, 8),
                                       "v": torch.randn(1, 4, 8)}),
            "layer 'mha' port 'key': expected 2 observations (the query's batch size), "
            "received 1.", "same number of observations")


@pytest.mark.parametrize("mask_size", [(1, 3), (1, 1), (2, 4)])
def test_a_padding_mask_of_the_wrong_size_names_the_mask_port(mask_size):
    """One entry per key step: a B×1 mask must not broadcast over the keys."""
    net = _cross(has_padding_mask_input=True)
    net.add(L.SequenceInput(1, name="m"))
    net.connect("m", "mha/mask")
    inputs = {"q": torch.randn(1, 3, 8), "k": torch.randn(1, 4, 8), "v": torch.randn(1, 4, 8),
              "m": torch.ones(*mask_size, 1)}
    _raises(al.SizeError, lambda: net(inputs),
            "layer 'mha' port 'mask': expected B×Tk = 1×4 (or B×Tk×C), received "
            f"{mask_size[0]}×{mask_size[1]}×1.", "one entry per key step")


def test_a_one_step_mask_does_not_broadcast_over_padded_keys():
    net = _cross(has_padding_mask_input=True)
    net.add(L.SequenceInput(1, name="m"))
    net.connect("m", "mha/mask")
    kv = [torch.randn(4, 8), torch.randn(3, 8)]                 # padded to 4 steps
    inputs = {"q": torch.randn(2, 3, 8), "k": kv, "v": kv, "m": torch.ones(2, 1, 1)}
    _raises(al.SizeError, lambda: net(inputs),
            "layer 'mha' port 'mask': expected B×Tk = 2×4 (or B×Tk×C), received 2×1×1.")


def test_a_self_attention_mask_port_of_the_wrong_length_names_the_layer():
    net = al.Network([L.SequenceInput(8, name="x"),
                      L.SelfAttention(2, 8, has_padding_mask_input=True, name="sa")])
    net.add(L.SequenceInput(1, name="m"))
    net.connect("m", "sa/mask")
    _raises(al.SizeError, lambda: net({"x": torch.randn(1, 4, 8), "m": torch.ones(1, 3, 1)}),
            "layer 'sa' port 'mask': expected B×Tk = 1×4 (or B×Tk×C), received 1×3×1.")


def test_a_static_bias_that_a_stream_outgrows_names_the_layer():
    net = _with_bias((2, 3, 3))
    x = torch.randn(1, 5, 8)
    s = net.stream({"b": torch.randn(1, 2, 3, 3)})
    s.step(x[:, :2])
    s.step(x[:, 2:3])
    err = _raises(al.SizeError, lambda: s.step(x[:, 3:4]),
                  "layer 'sa' port 'bias': expected B×2×Tq×Tk with Tq ≥ 4 and Tk ≥ 4",
                  "received 1×2×3×3", "give it B×heads×T×T for the longest stream")
    assert (err.layer, err.port) == ("sa", "bias")


def test_a_static_bias_of_cross_attention_that_a_stream_outgrows_names_the_layer():
    net = al.Network([L.SequenceInput(8, name="q"),
                      L.MultiHeadAttention(2, 8, has_bias_input=True, name="mha")])
    net.add(L.SequenceInput(8, name="kv"))
    net.connect("kv", "mha/key")
    net.connect("kv", "mha/value")
    net.add(L.ImageInput((2, 2, 4), name="b"))
    net.connect("b", "mha/bias")
    s = net.stream({"kv": torch.randn(1, 4, 8), "b": torch.randn(1, 2, 2, 4)})
    q = torch.randn(1, 3, 8)
    s.step(q[:, :2])
    _raises(al.SizeError, lambda: s.step(q[:, 2:3]),
            "layer 'mha' port 'bias': expected B×2×Tq×Tk with Tq ≥ 3", "received 1×2×2×4")


def test_al_attention_keeps_its_own_words():
    """The function has no layer: its messages start with 'attention: '."""
    q = torch.randn(2, 3, 8)
    _raises(al.SizeError, lambda: attention(q, q, q, 2, bias=torch.zeros(2, 3, 3, 3)),
            "attention: bias must be broadcastable to B×H×Tq×Tk = 2×2×3×3, received 2×3×3×3")
    _raises(al.SizeError, lambda: attention(q, q, q[:, :2], 2),
            "attention: key has 3 time steps (Tk) but value has 2")
