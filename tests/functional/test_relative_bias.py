"""T5's relative position bias and the attention layers' `bias` input: buckets and biases equal
to transformers' T5Attention, one bias layer feeding many attention layers, a user's own bias
through a network input, streaming (a decoder's bias rows step by step), ONNX export, and the
errors of bad arguments and bad bias sizes."""
import pytest
import torch

import attnlab as al
from attnlab import layers as L
from attnlab.functional.bias import relative_position_bucket
from attnlab.functional import attention, naive_attention

tf = pytest.importorskip("transformers")
from transformers import T5Config  # noqa: E402
from transformers.models.t5.modeling_t5 import T5Attention  # noqa: E402


def _t5_attention(heads, d_kv, d_model, decoder=False, buckets=32, distance=128):
    cfg = T5Config(d_model=d_model, d_kv=d_kv, num_heads=heads, is_decoder=decoder,
                   relative_attention_num_buckets=buckets,
                   relative_attention_max_distance=distance, dropout_rate=0.0)
    cfg._attn_implementation = "eager"
    return T5Attention(cfg, has_relative_attention_bias=True, layer_idx=0).eval()


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("buckets,distance", [(32, 128), (8, 20), (6, 7), (4, 3)])
def test_buckets_equal_t5s(bidirectional, buckets, distance):
    if bidirectional and buckets // 4 >= distance:
        pytest.skip("not a valid T5 setting")
    rel = torch.randint(-400, 400, (50, 60))
    rel[0, :9] = torch.tensor([0, 1, -1, 2, -2, 127, -128, 129, -300])
    want = T5Attention._relative_position_bucket(rel, bidirectional, buckets, distance)
    torch.testing.assert_close(relative_position_bucket(rel, bidirectional, buckets, distance),
                               want, rtol=0, atol=0)


@pytest.mark.parametrize("decoder", [False, True])
@pytest.mark.parametrize("tq,tk", [(5, 5), (3, 7), (7, 2), (1, 140)])
def test_bias_equals_t5_compute_bias(decoder, tq, tk):
    torch.manual_seed(0)
    t5 = _t5_attention(3, 4, 12, decoder)
    net = al.Network([L.SequenceInput(2, name="q"),
                      L.RelativePositionBias(3, bidirectional=not decoder, name="rb")])
    net.add(L.SequenceInput(2, name="k")).connect("k", "rb/key").initialize()
    net.layer_modules["rb"].weight.data.copy_(t5.relative_attention_bias.weight)
    got = net({"q": torch.randn(2, tq, 2), "k": torch.randn(2, tk, 2)})
    want = t5.compute_bias(tq, tk)                                   # 1×H×Tq×Tk
    assert got.shape == (2, 3, tq, tk)
    torch.testing.assert_close(got, want.expand(2, -1, -1, -1))
    assert net.analyze().total_learnables == 32 * 3


def _t5_encoder_layer(heads=2, d_kv=4, d_model=8, decoder=False, layers=1):
    """Self-attention layers in T5's form: no projection biases, scale 1, one bias layer."""
    net = al.Network([L.SequenceInput(d_model, name="x")])
    net.add(L.RelativePositionBias(heads, bidirectional=not decoder, name="rb"))
    net.connect("x", "rb/query").connect("x", "rb/key")
    prev = "x"
    for i in range(layers):
        net.add(L.SelfAttention(heads, heads * d_kv, scale=1.0, projection_bias=False,
                                has_bias_input=True, name=f"sa{i}",
                                attention_mask="causal" if decoder else None))
        net.connect(prev, f"sa{i}/in").connect("rb", f"sa{i}/bias")
        prev = f"sa{i}"
    return net.initialize().eval()


def _copy_from_t5(net, name, t5):
    mod = net.layer_modules[name]
    for ours, theirs in (("query", t5.q), ("key", t5.k), ("value", t5.v), ("output", t5.o)):
        getattr(mod, ours).weight.data.copy_(theirs.weight)


def test_self_attention_with_the_bias_equals_t5_attention():
    torch.manual_seed(1)
    t5 = _t5_attention(2, 4, 8)
    net = _t5_encoder_layer()
    _copy_from_t5(net, "sa0", t5)
    net.layer_modules["rb"].weight.data.copy_(t5.relative_attention_bias.weight)
    x = torch.randn(2, 6, 8)
    want = t5(x)[0]
    torch.testing.assert_close(net(x), want, atol=1e-5, rtol=1e-5)


def test_one_bias_layer_feeds_many_attention_layers_counted_once_with_both_gradients():
    torch.manual_seed(2)
    net = _t5_encoder_layer(layers=2).double()
    assert net.analyze().total_learnables == 32 * 2 + 2 * 4 * 8 * 8
    # a graph edge from the bias layer to each attention layer
    assert {c.destination for c in net.connections if c.source == "rb"} == {"sa0/bias", "sa1/bias"}
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    rb = net.layer_modules["rb"]

    def naive(x):
        bias = rb(x, x)
        h = x
        for name in ("sa0", "sa1"):
            m = net.layer_modules[name]
            q, k, v = h @ m.query.weight.T, h @ m.key.weight.T, h @ m.value.weight.T
            h = naive_attention(q, k, v, 2, 1.0, bias=bias) @ m.output.weight.T
        return h

    got, want = net(x), naive(x)
    torch.testing.assert_close(got, want)
    g1, = torch.autograd.grad(got.pow(2).sum(), rb.weight)
    g2, = torch.autograd.grad(want.pow(2).sum(), rb.weight)
    torch.testing.assert_close(g1, g2)
    assert g1.abs().sum() > 0


def _step_by_step(s, x, cuts):
    outs, start = [], 0
    for end in cuts:
        outs.append(s.step(x[:, start:end]))
        start = end
    return torch.cat(outs, 1)


@pytest.mark.parametrize("cuts", [range(1, 8), [3, 4, 7]])
def test_decoder_bias_streams_its_rows_step_by_step(cuts):
    torch.manual_seed(3)
    net = _t5_encoder_layer(decoder=True, layers=2)
    x = torch.randn(2, 7, 8)
    full = net(x)
    torch.testing.assert_close(_step_by_step(net.stream(), x, cuts), full, atol=1e-5, rtol=1e-5)


def test_decoder_bias_on_the_static_shape_stream(monkeypatch):
    import attnlab.stream.core as core
    monkeypatch.setattr(core, "maybe_compile", lambda fn, *a, **k: fn)
    torch.manual_seed(4)
    net = _t5_encoder_layer(decoder=True)
    x = torch.randn(2, 6, 8)
    full = net(x)
    s = net.stream(compile=True, capacity=4)           # the buffers grow past the first width
    torch.testing.assert_close(_step_by_step(s, x, [2, 3, 6]), full, atol=1e-5, rtol=1e-5)


def _user_bias_net(**kw):
    """A user's own B×H×Tq×Tk bias through a network input connected to '<attention>/bias'."""
    net = al.Network([L.SequenceInput(8, name="x"),
                      L.SelfAttention(2, 8, has_bias_input=True, name="sa", **kw)])
    net.add(L.ImageInput((2, 5, 5), name="b")).connect("b", "sa/bias")
    return net.initialize().eval()


def test_a_network_input_feeds_the_bias_port():
    torch.manual_seed(5)
    net = _user_bias_net(attention_mask="causal").double()
    x, b = torch.randn(3, 5, 8, dtype=torch.float64), torch.randn(3, 2, 5, 5, dtype=torch.float64)
    m = net.layer_modules["sa"]
    q, k, v = m.query(x), m.key(x), m.value(x)
    want = m.output(naive_attention(q, k, v, 2, attention_mask="causal", bias=b))
    torch.testing.assert_close(net({"x": x, "b": b}), want)
    # a static bias streams: each step reads its rows
    s = net.stream({"b": b})
    torch.testing.assert_close(_step_by_step(s, x, [1, 3, 5]), want)
    # an additive mask is a bias too: -inf hides keys 0 and 1 from every query
    hide = torch.zeros(3, 2, 5, 5, dtype=torch.float64)
    hide[..., :2] = float("-inf")
    _, w = m(x, bias=hide, need_weights=True, attention_mask=None)
    assert (w[..., :2] == 0).all()


def test_cross_attention_bias_from_a_streamed_query_and_static_keys():
    torch.manual_seed(6)
    net = al.Network([L.SequenceInput(8, name="x"),
                      L.MultiHeadAttention(2, 8, has_bias_input=True, name="mha")])
    net.add(L.SequenceInput(8, name="mem")).connect("mem", "mha/key").connect("mem", "mha/value")
    net.add(L.RelativePositionBias(2, 8, 16, name="rb"))
    net.connect("x", "rb/query").connect("mem", "rb/key").connect("rb", "mha/bias")
    net.initialize().eval()
    x, mem = torch.randn(2, 6, 8), torch.randn(2, 4, 8)
    full = net({"x": x, "mem": mem})
    s = net.stream({"mem": mem})
    torch.testing.assert_close(_step_by_step(s, x, [2, 3, 6]), full, atol=1e-5, rtol=1e-5)


def test_onnx_export_of_the_bias_at_two_lengths(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    import numpy as np
    torch.manual_seed(7)
    net = _t5_encoder_layer(decoder=True, layers=2)
    path = tmp_path / "t5.onnx"
    net.export_onnx(path, torch.randn(2, 5, 8))
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for b, t in [(2, 5), (1, 9)]:
        x = torch.randn(b, t, 8)
        feeds = {i.name: (x.numpy() if i.name == "x" else np.ones((b, t), dtype=bool))
                 for i in sess.get_inputs()}
        np.testing.assert_allclose(sess.run(None, feeds)[0], net(x).detach().numpy(), atol=1e-4,
                                   rtol=0)


# ------------------------------------------------------------------ errors ----------------

@pytest.mark.parametrize("kw,text", [
    (dict(num_heads=0), "argument 'num_heads': expected"),
    (dict(num_heads=2, num_buckets=3), "argument 'num_buckets': expected"),
    (dict(num_heads=2, num_buckets=1, bidirectional=False), "argument 'num_buckets': expected"),
    (dict(num_heads=2, num_buckets=32, max_distance=8), "argument 'max_distance': expected"),
    (dict(num_heads=2, bidirectional="yes"), "argument 'bidirectional': expected True or False"),
])
def test_bad_relative_position_bias_arguments(kw, text):
    with pytest.raises(al.ArgumentError) as e:
        L.RelativePositionBias(**kw, name="rb")
    assert text in str(e.value) and "RelativePositionBias 'rb'" in str(e.value)


def test_a_bias_of_the_wrong_size_names_the_port_and_the_fix():
    net = al.Network([L.SequenceInput(8, name="x"),
                      L.SelfAttention(2, 8, has_bias_input=True, name="sa")])
    net.add(L.ImageInput((3, 5, 5), name="b")).connect("b", "sa/bias")
    with pytest.raises(al.SizeError) as e:
        net.initialize()
    assert "'sa' port 'bias'" in str(e.value) and "expected 2 (or 1) along heads" in str(e.value)
    assert "RelativePositionBias" in str(e.value)
    net = al.Network([L.SequenceInput(8, name="x", length=5),
                      L.SelfAttention(2, 8, has_bias_input=True, name="sa")])
    net.add(L.ImageInput((2, 5, 4), name="b")).connect("b", "sa/bias")
    with pytest.raises(al.SizeError) as e:
        net.initialize()
    assert "expected 5 (or 1) along Tk" in str(e.value)


def test_attention_bias_argument_errors():
    q = torch.randn(2, 3, 8)
    with pytest.raises(al.SizeError) as e:
        attention(q, q, q, 2, bias=torch.zeros(2, 3, 3, 3))
    assert "bias must be broadcastable to B×H×Tq×Tk = 2×2×3×3, received 2×3×3×3" in str(e.value)
    with pytest.raises(al.FormatError) as e:
        attention(q, q, q, 2, bias=torch.ones(3, 3, dtype=torch.bool))
    assert "a boolean mask goes to attention_mask" in str(e.value)
    with pytest.raises(al.FormatError) as e:
        attention(q, q, q, 2, bias=[[0.0]])
    assert "received list" in str(e.value)


def test_a_network_with_a_shared_bias_saves_and_loads(tmp_path):
    torch.manual_seed(8)
    net = _t5_encoder_layer(decoder=True, layers=2)
    x = torch.randn(1, 4, 8)
    net.save(tmp_path / "t5")
    back = al.load(tmp_path / "t5").eval()
    torch.testing.assert_close(back(x), net(x))
    assert back.analyze().total_learnables == net.analyze().total_learnables


@pytest.mark.parametrize("compiled", [False, True])
def test_a_static_bias_with_a_window_streams_on_both_stream_paths(compiled, monkeypatch):
    import attnlab.stream.core as core
    monkeypatch.setattr(core, "maybe_compile", lambda fn, *a, **k: fn)
    torch.manual_seed(9)
    net = al.Network([L.SequenceInput(8, name="x"),
                      L.SelfAttention(2, 8, has_bias_input=True, attention_mask="causal",
                                      window=3, name="sa")])
    net.add(L.ImageInput((2, 6, 6), name="b")).connect("b", "sa/bias")
    net.initialize().eval()
    x, b = torch.randn(2, 6, 8), torch.randn(2, 2, 6, 6)
    full = net({"x": x, "b": b})
    s = net.stream({"b": b}, compile=compiled, capacity=2)
    torch.testing.assert_close(_step_by_step(s, x, [2, 3, 6]), full, atol=1e-5, rtol=1e-5)
