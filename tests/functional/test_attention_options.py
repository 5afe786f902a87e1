"""The attention options of today's transformers: rotary positions, grouped heads, projections
without biases, sliding windows, ALiBi and an additive bias input. Each is checked against a
naive reference (values and gradients), against transformers' own functions on random inputs,
streamed step by step against the full pass, exported to ONNX, and refused with a clear error
when its arguments do not fit."""
import math

import pytest
import torch

import attnlab as al
from attnlab import layers as L
from attnlab.functional.bias import alibi_slopes
from attnlab.functional import attention, naive_attention

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings, strategies as st  # noqa: E402

tf = pytest.importorskip("transformers")


# ------------------------------------------------------------------ naive references -------

def naive_rotary(x, heads, pos, base=10000.0, fraction=1.0, interleaved=False):
    """Channel pairs of each head turned one by one: pair i by angle p · base^(−2i/r)."""
    b, t, c = x.shape
    d = c // heads
    r = round(fraction * d)
    out = x.clone()
    for h in range(heads):
        for i in range(r // 2):
            a, b_ = (h * d + 2 * i, h * d + 2 * i + 1) if interleaved else \
                (h * d + i, h * d + i + r // 2)
            theta = (pos.to(torch.float64) * base ** (-2 * i / r)).to(x.dtype)   # t
            cos, sin = theta.cos(), theta.sin()
            out[:, :, a] = x[:, :, a] * cos - x[:, :, b_] * sin
            out[:, :, b_] = x[:, :, b_] * cos + x[:, :, a] * sin
    return out


def naive_self_attention(mod, x, heads, kv_heads, causal=True, rotary=None, window=None,
                         alibi=False, bias=None):
    """Projections, rotary, attention by the textbook formula, output map."""
    def lin(layer, x):
        return x @ layer.weight.T + (layer.bias if layer.bias is not None else 0)
    q, k, v = lin(mod.query, x), lin(mod.key, x), lin(mod.value, x)
    if rotary is not None:
        pos = torch.arange(x.shape[1])
        q, k = naive_rotary(q, heads, pos, **rotary), naive_rotary(k, kv_heads, pos, **rotary)
    y = naive_attention(q, k, v, heads, mod.scale, attention_mask="causal" if causal else None,
                        num_kv_heads=kv_heads, window=window, alibi=alibi, bias=bias)
    return lin(mod.output, y)


def _step_by_step(s, x, cuts):
    outs, start = [], 0
    for end in cuts:
        outs.append(s.step(x[:, start:end]))
        start = end
    return torch.cat(outs, 1)


def _net(heads=4, channels=16, **kw):
    net = al.Network([L.SequenceInput(12, name="x"),
                      L.SelfAttention(heads, channels, name="sa", **kw)])
    return net.initialize().eval()


# ------------------------------------------------------------------ rotary --------------

ROTARY = [{}, {"interleaved": True}, {"fraction": 0.5}, {"fraction": 0.5, "interleaved": True},
          {"base": 500.0}]


@pytest.mark.parametrize("rot", ROTARY)
@pytest.mark.parametrize("kv_heads", [None, 2, 1])
def test_rotary_self_attention_equals_the_naive_formula_with_gradients(rot, kv_heads):
    torch.manual_seed(0)
    net = _net(rotary=dict(rot) if rot else True, num_kv_heads=kv_heads,
               attention_mask="causal").double()
    mod = net.layer_modules["sa"]
    x = torch.randn(2, 7, 12, dtype=torch.float64, requires_grad=True)
    got = net(x)
    want = naive_self_attention(mod, x, 4, kv_heads or 4, rotary=rot)
    torch.testing.assert_close(got, want)
    g1, = torch.autograd.grad(got.pow(2).sum(), x)
    g2, = torch.autograd.grad(want.pow(2).sum(), x)
    torch.testing.assert_close(g1, g2)
    # parameters' gradients too
    w1 = torch.autograd.grad(net(x).sum(), mod.query.weight)[0]
    w2 = torch.autograd.grad(naive_self_attention(mod, x, 4, kv_heads or 4, rotary=rot).sum(),
                             mod.query.weight)[0]
    torch.testing.assert_close(w1, w2)


def test_rotary_equals_llama_rotary_embedding_and_apply_rotary_pos_emb():
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb
    torch.manual_seed(1)
    heads, kv_heads, d, t = 4, 2, 8, 9
    cfg = LlamaConfig(hidden_size=heads * d, num_attention_heads=heads,
                      num_key_value_heads=kv_heads, rope_theta=500.0)
    rope = LlamaRotaryEmbedding(cfg)
    mod = al.functional.SelfAttentionModule(heads * d, heads, heads * d, num_kv_heads=kv_heads,
                                            rotary={"base": 500.0})
    q, k = torch.randn(2, t, heads * d), torch.randn(2, t, kv_heads * d)
    for start in (0, 5, 1000):                         # the full pass, and a stream's steps
        pos = torch.arange(start, start + t)
        cos, sin = rope(q, pos[None])
        qh, kh = q.view(2, t, heads, d).transpose(1, 2), k.view(2, t, kv_heads, d).transpose(1, 2)
        want_q, want_k = apply_rotary_pos_emb(qh, kh, cos, sin)
        got_q, got_k = mod.transform_qk(q, k, start, start)
        torch.testing.assert_close(got_q, want_q.transpose(1, 2).reshape(2, t, -1), atol=1e-6,
                                   rtol=1e-6)
        torch.testing.assert_close(got_k, want_k.transpose(1, 2).reshape(2, t, -1), atol=1e-6,
                                   rtol=1e-6)
        # positions given as a tensor (the static-shape stream) give the same numbers
        got_q2, _ = mod.transform_qk(q, k, pos, pos)
        torch.testing.assert_close(got_q2, got_q)


def test_interleaved_rotary_equals_gptj():
    from transformers.models.gptj.modeling_gptj import apply_rotary_pos_emb, create_sinusoidal_positions
    torch.manual_seed(2)
    heads, d, t, rot = 2, 16, 6, 8                     # GPT-J rotates rotary_dim channels
    table = create_sinusoidal_positions(32, rot)
    mod = al.functional.SelfAttentionModule(heads * d, heads, heads * d,
                                            rotary={"fraction": rot / d, "interleaved": True})
    q = torch.randn(1, t, heads * d)
    pos = torch.arange(3, 3 + t)
    sin, cos = torch.split(table[pos[None]], rot // 2, dim=-1)          # 1×t×rot/2
    qh = q.view(1, t, heads, d)                                         # GPT-J: B×T×H×d
    want = torch.cat([apply_rotary_pos_emb(qh[..., :rot], sin, cos), qh[..., rot:]], -1)
    got, _ = mod.transform_qk(q, q, 3, 3)
    torch.testing.assert_close(got, want.reshape(1, t, -1), atol=1e-6, rtol=1e-6)


def test_partial_rotary_equals_gpt_neox():
    from transformers import GPTNeoXConfig
    from transformers.models.gpt_neox.modeling_gpt_neox import (GPTNeoXRotaryEmbedding,
                                                                apply_rotary_pos_emb)
    torch.manual_seed(3)
    heads, d, t = 2, 16, 5
    cfg = GPTNeoXConfig(hidden_size=heads * d, num_attention_heads=heads, rotary_pct=0.25)
    rope = GPTNeoXRotaryEmbedding(cfg)
    mod = al.functional.SelfAttentionModule(heads * d, heads, heads * d,
                                            rotary={"fraction": 0.25})
    q = torch.randn(1, t, heads * d)
    cos, sin = rope(q, torch.arange(t)[None])
    qh = q.view(1, t, heads, d).transpose(1, 2)
    want, _ = apply_rotary_pos_emb(qh, qh, cos, sin)
    got, _ = mod.transform_qk(q, q, 0, 0)
    torch.testing.assert_close(got, want.transpose(1, 2).reshape(1, t, -1), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("kw", [dict(rotary=True), dict(rotary=True, num_kv_heads=1),
                                dict(rotary={"fraction": 0.5, "interleaved": True},
                                     num_kv_heads=2, projection_bias=False)])
def test_rotary_streams_as_the_full_pass(kw):
    torch.manual_seed(4)
    net = _net(attention_mask="causal", **kw)
    x = torch.randn(2, 9, 12)
    full = net(x)
    s = net.stream()
    torch.testing.assert_close(_step_by_step(s, x, range(1, 10)), full, atol=1e-5, rtol=1e-5)
    s.reset()
    torch.testing.assert_close(_step_by_step(s, x, [4, 5, 9]), full, atol=1e-5, rtol=1e-5)


def test_rotary_cross_attention_turns_queries_by_their_stream_position():
    torch.manual_seed(5)
    net = al.Network([L.SequenceInput(8, name="x"),
                      L.MultiHeadAttention(2, 8, rotary=True, name="mha")])
    net.add(L.SequenceInput(8, name="mem")).connect("mem", "mha/key").connect("mem", "mha/value")
    net.initialize().eval()
    x, mem = torch.randn(2, 6, 8), torch.randn(2, 4, 8)
    full = net({"x": x, "mem": mem})
    s = net.stream({"mem": mem})
    torch.testing.assert_close(_step_by_step(s, x, [2, 3, 6]), full, atol=1e-5, rtol=1e-5)


def test_rotary_on_attention_without_learnables():
    torch.manual_seed(6)
    net = al.Network([L.SequenceInput(8, name="q"),
                      L.Attention(2, rotary=True, attention_mask="causal", name="a")])
    net.connect("q", "a/key").connect("q", "a/value").initialize().eval()
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    pos = torch.arange(5)
    qk = naive_rotary(x, 2, pos)
    want = naive_attention(qk, qk, x, 2, attention_mask="causal")
    torch.testing.assert_close(net.double()(x), want)
    torch.testing.assert_close(_step_by_step(net.stream(), x, [1, 3, 5]), want)


# ---------------------------------------------------- projection bias, grouped heads ----

def test_projection_bias_false_has_no_biases_anywhere():
    net = _net(projection_bias=False, num_kv_heads=2, rotary=True, attention_mask="causal")
    assert list(net.learnables) == ["sa/query.weight", "sa/key.weight", "sa/value.weight",
                                    "sa/output.weight"]
    assert net.analyze().total_learnables == 16 * 12 + 2 * 8 * 12 + 12 * 16
    mha = al.Network([L.SequenceInput(6, name="q"),
                      L.MultiHeadAttention(2, 8, projection_bias=False, name="m")])
    mha.add(L.SequenceInput(5, name="kv")).connect("kv", "m/key").connect("kv", "m/value")
    mha.initialize()
    assert all(not n.endswith("bias") for n in mha.learnables)
    assert mha.analyze().total_learnables == 8 * 6 + 8 * 5 * 2 + 6 * 8
    assert "projection_bias=False" in repr(mha.layers[1]) or \
        any("projection_bias=False" in repr(l) for l in mha.layers)


def test_projection_bias_false_streams_one_step_as_the_full_pass():
    torch.manual_seed(7)
    net = _net(projection_bias=False, attention_mask="causal")
    x = torch.randn(1, 6, 12)
    torch.testing.assert_close(_step_by_step(net.stream(), x, range(1, 7)), net(x), atol=1e-5,
                               rtol=1e-5)


@settings(max_examples=25, deadline=None)
@given(heads=st.sampled_from([1, 2, 4, 8]), group=st.sampled_from([1, 2, 4]),
       tq=st.integers(1, 6), tk=st.integers(1, 6), dk=st.sampled_from([2, 4]),
       causal=st.booleans(), align=st.sampled_from(["top-left", "bottom-right"]),
       window=st.one_of(st.none(), st.integers(1, 4)), alibi=st.booleans(),
       with_bias=st.booleans(), padded=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_every_option_with_grouped_heads_matches_the_reference(heads, group, tq, tk, dk, causal,
                                                               align, window, alibi, with_bias,
                                                               padded, seed):
    kv = max(1, heads // group)
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(2, tq, heads * dk, generator=g, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, tk, kv * dk, generator=g, dtype=torch.float64, requires_grad=True)
    v = torch.randn(2, tk, kv * 3, generator=g, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(1, heads, tq, tk, generator=g, dtype=torch.float64, requires_grad=True) \
        if with_bias else None
    kpm = torch.rand(2, tk, generator=g) > 0.3 if padded else None
    kw = dict(key_padding_mask=kpm, attention_mask="causal" if causal else None,
              causal_alignment=align, num_kv_heads=kv, window=window, alibi=alibi, bias=bias)
    inputs = [q, k, v] + ([bias] if with_bias else [])
    for need_weights in (False, True):                 # the fused kernel and the explicit path
        got = attention(q, k, v, heads, need_weights=need_weights, **kw)
        want = naive_attention(q, k, v, heads, need_weights=need_weights, **kw)
        if need_weights:
            torch.testing.assert_close(got[1], want[1])
            got, want = got[0], want[0]
        torch.testing.assert_close(got, want)
        for a, b in zip(torch.autograd.grad(got.sum(), inputs),
                        torch.autograd.grad(want.sum(), inputs)):
            torch.testing.assert_close(a, b)


# ------------------------------------------------------------------ errors ----------------

def _message(excinfo):
    return str(excinfo.value)


def test_rotary_on_an_odd_head_size_names_the_layer_the_head_size_and_the_fix():
    with pytest.raises(al.SizeError) as e:
        L.SelfAttention(2, 6, rotary=True, name="sa")
    msg = _message(e)
    assert "SelfAttention 'sa'" in msg and "head size 3" in msg and "even" in msg
    with pytest.raises(al.SizeError) as e:
        L.MultiHeadAttention(2, 16, rotary={"fraction": 0.3}, name="m")
    assert "head size 8 × fraction 0.3 = 2.4" in _message(e) and "fraction 1.0 or 0.5 or 0.25" \
        in _message(e)
    net = al.Network([L.SequenceInput(6, name="q"), L.Attention(2, rotary=True, name="a")])
    net.connect("q", "a/key").connect("q", "a/value")
    with pytest.raises(al.SizeError) as e:
        net.initialize()
    assert "Attention 'a'" in _message(e) and "head size 3" in _message(e)


@pytest.mark.parametrize("value,text", [
    ("yes", "expected False, True or a dict"),
    ({"theta": 1.0}, "Remove the key 'theta'"),
    ({"base": -1.0}, "rotary['base']': expected a finite number > 0"),
    ({"fraction": 0}, "rotary['fraction']': expected a fraction in (0, 1]"),
    ({"fraction": 1.5}, "rotary['fraction']': expected a fraction in (0, 1]"),
    ({"interleaved": "no"}, "rotary['interleaved']': expected True or False"),
])
def test_bad_rotary_settings_are_named(value, text):
    with pytest.raises(al.ArgumentError) as e:
        L.SelfAttention(2, 8, rotary=value, name="sa")
    assert text in _message(e) and "'sa'" in _message(e)


def test_num_heads_not_a_multiple_of_num_kv_heads():
    for make in (lambda: L.SelfAttention(4, 16, num_kv_heads=3, name="sa"),
                 lambda: L.MultiHeadAttention(6, 24, num_kv_heads=4, name="sa"),
                 lambda: L.Attention(4, num_kv_heads=3, name="sa")):
        with pytest.raises(al.ArgumentError) as e:
            make()
        assert "'sa' argument 'num_kv_heads'" in _message(e) and "does not divide" in _message(e)
    with pytest.raises(al.SizeError) as e:
        attention(torch.randn(1, 2, 8), torch.randn(1, 2, 8), torch.randn(1, 2, 8), 4,
                  num_kv_heads=3)
    assert "num_kv_heads" in _message(e)


def test_grouped_keys_of_the_wrong_width_on_attention_without_learnables():
    net = al.Network([L.SequenceInput(8, name="q"), L.Attention(4, num_kv_heads=2, name="a")])
    net.add(L.SequenceInput(8, name="kv")).connect("kv", "a/key").connect("kv", "a/value")
    with pytest.raises(al.SizeError) as e:
        net.initialize()
    assert "'a' port 'key'" in _message(e) and "Dense(4)" in _message(e)
    ok = al.Network([L.SequenceInput(8, name="q"), L.Attention(4, num_kv_heads=2, name="a")])
    ok.add(L.SequenceInput(4, name="kv")).connect("kv", "a/key").connect("kv", "a/value")
    ok.initialize()
    q, kv = torch.randn(2, 3, 8), torch.randn(2, 5, 4)
    out = ok({"q": q, "kv": kv})
    assert out.shape == (2, 3, 8)                        # 4 heads of the 2 value heads' 2 channels
    torch.testing.assert_close(out, naive_attention(q, kv, kv, 4, num_kv_heads=2))


# ------------------------------------------------------------------ ONNX ------------------

def _onnx_check(net, path, inputs_at):
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    import numpy as np
    net.export_onnx(path, inputs_at(2, 5))
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for b, t in [(2, 5), (1, 8)]:
        xs = inputs_at(b, t)
        xs = xs if isinstance(xs, dict) else {net.input_names[0]: xs}
        feeds = {}
        for i in sess.get_inputs():
            name = i.name[:-len("_mask")] if i.name.endswith("_mask") else None
            if name in xs:
                feeds[i.name] = np.ones(tuple(xs[name].shape[:2]), dtype=bool)
            else:
                feeds[i.name] = xs[i.name].numpy()
        got = sess.run(None, feeds)[0]
        with torch.no_grad():
            want = net(xs if len(xs) > 1 else next(iter(xs.values())))
        np.testing.assert_allclose(got, want.numpy(), atol=1e-4, rtol=0)


@pytest.mark.parametrize("kw", [dict(rotary=True, num_kv_heads=2, projection_bias=False),
                                dict(rotary={"fraction": 0.5, "interleaved": True})])
def test_onnx_export_of_rotary_at_two_lengths(tmp_path, kw):
    torch.manual_seed(8)
    net = _net(attention_mask="causal", **kw)
    _onnx_check(net, tmp_path / "rotary.onnx", lambda b, t: torch.randn(b, t, 12))


def test_alibi_slopes_are_blooms_for_any_head_count():
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor
    for heads in (1, 2, 3, 4, 5, 6, 8, 12, 16, 20):
        mask = torch.ones(1, 7)
        ref = build_alibi_tensor(mask, heads, torch.float32)        # H×1×T: slope_h · j
        slopes = torch.tensor(alibi_slopes(heads))
        torch.testing.assert_close(ref[:, 0, 1], slopes)            # position 1: the slope
        assert math.isclose(slopes[0].item(), 2 ** (-8 / 2 ** math.floor(math.log2(heads))),
                            rel_tol=1e-6)


# ------------------------------------------------------------------ sliding window --------

@pytest.mark.parametrize("window", [1, 3, 4, 20])
@pytest.mark.parametrize("tq,tk", [(6, 6), (2, 6)])
def test_window_mask_is_mistrals(window, tq, tk):
    from transformers.masking_utils import sliding_window_causal_mask_function
    rule = sliding_window_causal_mask_function(window)
    off = tk - tq                                      # a cache: the queries are the last tq
    q_idx = torch.arange(tq)[:, None] + off
    kv_idx = torch.arange(tk)[None, :]
    want = rule(torch.tensor(0), torch.tensor(0), q_idx, kv_idx)
    x = torch.randn(1, tq, 8)
    k = torch.randn(1, tk, 8)
    _, w = attention(x, k, k, 2, attention_mask="causal", causal_alignment="bottom-right",
                     window=window, need_weights=True)
    assert torch.equal(w[0, 0] > 0, want.expand(tq, tk))


@pytest.mark.parametrize("kw", [dict(window=3), dict(window=3, rotary=True, num_kv_heads=2),
                                dict(window=1), dict(window=4, alibi=True, num_kv_heads=1),
                                dict(window=2, projection_bias=False)])
def test_windowed_stream_equals_the_full_pass_past_the_window_with_bounded_memory(kw):
    torch.manual_seed(9)
    net = _net(attention_mask="causal", **kw)
    x = torch.randn(2, 40, 12)
    full = net(x)
    s = net.stream(capacity=8)
    torch.testing.assert_close(_step_by_step(s, x, range(1, 41)), full, atol=1e-5, rtol=1e-5)
    cache = s.steppers["sa"].cache
    assert cache.capacity <= 16 and cache.pos == 40            # 40 steps in at most 16 slots
    s.reset()
    torch.testing.assert_close(_step_by_step(s, x, [5, 6, 13, 14, 30, 40]), full, atol=1e-5,
                               rtol=1e-5)
    assert cache.capacity <= 64


def test_window_without_causal_is_a_band_and_cross_attention_windows_by_position():
    q = torch.randn(1, 6, 4, dtype=torch.float64)
    _, w = attention(q, q, q, 1, window=2, need_weights=True)
    i = torch.arange(6)
    assert torch.equal(w[0, 0] > 0, (i[:, None] - i[None]).abs() < 2)
    torch.manual_seed(10)
    net = al.Network([L.SequenceInput(8, name="x"),
                      L.MultiHeadAttention(2, 8, attention_mask="causal", window=2, alibi=True,
                                           name="mha")])
    net.add(L.SequenceInput(8, name="mem")).connect("mem", "mha/key").connect("mem", "mha/value")
    net.initialize().eval()
    x, mem = torch.randn(2, 6, 8), torch.randn(2, 7, 8)
    full = net({"x": x, "mem": mem})
    s = net.stream({"mem": mem})
    torch.testing.assert_close(_step_by_step(s, x, [1, 3, 6]), full, atol=1e-5, rtol=1e-5)


def test_window_static_shape_stream(monkeypatch):
    import attnlab.stream.core as core
    monkeypatch.setattr(core, "maybe_compile", lambda fn, *a, **k: fn)
    torch.manual_seed(11)
    net = _net(attention_mask="causal", window=3, alibi=True, rotary=True)
    x = torch.randn(2, 9, 12)
    full = net(x)
    s = net.stream(compile=True, capacity=4)
    torch.testing.assert_close(_step_by_step(s, x, [2, 3, 4, 9]), full, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("bad", [0, -2, 2.5, True, "4"])
def test_window_must_be_a_positive_int(bad):
    with pytest.raises(al.ArgumentError) as e:
        L.SelfAttention(2, 8, window=bad, name="sa")
    assert "SelfAttention 'sa' argument 'window': expected" in _message(e)
    with pytest.raises(al.ArgumentError) as e:
        attention(torch.randn(1, 2, 4), torch.randn(1, 2, 4), torch.randn(1, 2, 4), 1, window=bad)
    assert "argument 'window'" in _message(e)


# ------------------------------------------------------------------ ALiBi ------------------

@pytest.mark.parametrize("heads", [1, 3, 4, 6])
def test_alibi_weights_equal_blooms_scores(heads):
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor
    torch.manual_seed(12)
    t, d = 7, 4
    q, k, v = (torch.randn(2, t, heads * d) for _ in range(3))
    _, w = attention(q, k, v, heads, attention_mask="causal", alibi=True, need_weights=True)
    # BLOOM: softmax(alibi + q·k/sqrt(d)) under the causal mask, alibi = slope_h · key position
    alibi = build_alibi_tensor(torch.ones(2, t), heads, torch.float32).view(2, heads, 1, t)
    qh = q.view(2, t, heads, d).transpose(1, 2)
    kh = k.view(2, t, heads, d).transpose(1, 2)
    scores = alibi + qh @ kh.transpose(-1, -2) / math.sqrt(d)
    scores = scores.masked_fill(~torch.ones(t, t, dtype=torch.bool).tril(), float("-inf"))
    torch.testing.assert_close(w, scores.softmax(-1), atol=1e-6, rtol=1e-5)
    out = attention(q, k, v, heads, attention_mask="causal", alibi=True)      # fused kernel
    torch.testing.assert_close(out, (w @ v.view(2, t, heads, d).transpose(1, 2))
                               .transpose(1, 2).reshape(2, t, -1), atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("kw", [dict(alibi=True), dict(alibi=True, num_kv_heads=2),
                                dict(alibi=True, projection_bias=False)])
def test_alibi_streams_as_the_full_pass(kw):
    torch.manual_seed(13)
    net = _net(attention_mask="causal", **kw)
    x = torch.randn(2, 8, 12)
    full = net(x)
    s = net.stream()
    torch.testing.assert_close(_step_by_step(s, x, range(1, 9)), full, atol=1e-5, rtol=1e-5)
    s.reset()
    torch.testing.assert_close(_step_by_step(s, x, [3, 4, 8]), full, atol=1e-5, rtol=1e-5)


def test_alibi_layer_equals_the_naive_formula_with_gradients():
    torch.manual_seed(14)
    net = _net(attention_mask="causal", alibi=True, window=3, num_kv_heads=2).double()
    mod = net.layer_modules["sa"]
    x = torch.randn(2, 6, 12, dtype=torch.float64, requires_grad=True)
    got = net(x)
    want = naive_self_attention(mod, x, 4, 2, alibi=True, window=3)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(torch.autograd.grad(got.sum(), x)[0],
                               torch.autograd.grad(want.sum(), x)[0])


def test_alibi_must_be_a_flag():
    with pytest.raises(al.ArgumentError) as e:
        L.MultiHeadAttention(2, 8, alibi="bloom", name="m")
    assert "'m' argument 'alibi': expected True or False" in _message(e)
    with pytest.raises(al.ArgumentError) as e:
        L.SelfAttention(2, 8, has_bias_input=1, name="m")
    assert "'m' argument 'has_bias_input': expected True or False" in _message(e)
    with pytest.raises(al.ArgumentError) as e:
        L.SelfAttention(2, 8, projection_bias=None, name="m")
    assert "'m' argument 'projection_bias': expected True or False" in _message(e)


@pytest.mark.parametrize("kw", [dict(window=3, num_kv_heads=2), dict(alibi=True, rotary=True)])
def test_onnx_export_of_window_and_alibi_at_two_lengths(tmp_path, kw):
    torch.manual_seed(15)
    net = _net(attention_mask="causal", **kw)
    _onnx_check(net, tmp_path / "options.onnx", lambda b, t: torch.randn(b, t, 12))


def test_options_save_and_load(tmp_path):
    torch.manual_seed(16)
    net = _net(attention_mask="causal", rotary={"fraction": 0.5, "interleaved": True},
               window=3, alibi=True, num_kv_heads=2, projection_bias=False)
    x = torch.randn(1, 5, 12)
    net.save(tmp_path / "net")
    back = al.load(tmp_path / "net")
    layer = back.layers[-1]
    assert layer.rotary == {"base": 10000.0, "fraction": 0.5, "interleaved": True}
    assert (layer.window, layer.alibi, layer.projection_bias) == (3, True, False)
    torch.testing.assert_close(back.eval()(x), net(x))


@settings(max_examples=15, deadline=None)
@given(heads=st.sampled_from([1, 2, 4]), group=st.sampled_from([1, 2, 4]),
       rotary=st.sampled_from([False, True, {"fraction": 0.5}, {"interleaved": True}]),
       window=st.one_of(st.none(), st.integers(1, 5)), alibi=st.booleans(),
       projection_bias=st.booleans(), t=st.integers(1, 12),
       cuts=st.lists(st.integers(1, 11), max_size=4), seed=st.integers(0, 2 ** 16))
def test_any_combination_streams_as_the_full_pass(heads, group, rotary, window, alibi,
                                                  projection_bias, t, cuts, seed):
    torch.manual_seed(seed)
    kv = max(1, heads // group)
    net = al.Network([L.SequenceInput(6, name="x"),
                      L.SelfAttention(heads, 4 * heads, attention_mask="causal", rotary=rotary,
                                      num_kv_heads=kv, window=window, alibi=alibi,
                                      projection_bias=projection_bias, name="sa")])
    net.initialize().eval()
    x = torch.randn(2, t, 6)
    ends = sorted({c for c in cuts if c < t} | {t})
    torch.testing.assert_close(_step_by_step(net.stream(capacity=2), x, ends), net(x),
                               atol=1e-5, rtol=1e-5)


def test_grouped_attention_without_learnables_streams_over_its_own_sequence():
    torch.manual_seed(17)
    net = al.Network([L.SequenceInput(8, name="q"),
                      L.Attention(4, num_kv_heads=2, attention_mask="causal", rotary=True,
                                  window=3, name="a")])
    net.add(L.Dense(4, name="kv")).connect("q", "kv").connect("kv", "a/key")
    net.connect("kv", "a/value").initialize().eval()
    x = torch.randn(2, 7, 8)
    torch.testing.assert_close(_step_by_step(net.stream(), x, [1, 2, 5, 7]), net(x), atol=1e-5,
                               rtol=1e-5)


def test_module_options_are_checked_where_they_enter():
    from attnlab.functional.modules import AttentionModule
    with pytest.raises(al.ArgumentError) as e:
        AttentionModule(2, rotary=True)
    assert "argument 'head_size'" in _message(e) and "head_size=key channels / num_heads" \
        in _message(e)
    with pytest.raises(al.SizeError) as e:
        AttentionModule(2, rotary=True, head_size=5)
    assert "head size 5" in _message(e)
    with pytest.raises(al.ArgumentError) as e:
        AttentionModule(2, window=0)
    assert "argument 'window'" in _message(e)
    mod = AttentionModule(2, rotary={"fraction": 0.5}, head_size=4, window=2, alibi=True)
    assert mod.positional and repr(mod.rotary).startswith("Rotary(head_size=4, dims=2")


@pytest.mark.parametrize("family,window", [("llama", None), ("mistral", 3)])
def test_self_attention_equals_llama_and_mistral_attention(family, window):
    """The whole layer against transformers' attention module with the same weights: rotary,
    grouped heads, no projection biases and (Mistral) the sliding-window mask its model makes."""
    from transformers import LlamaConfig, MistralConfig
    from transformers.masking_utils import create_causal_mask, create_sliding_window_causal_mask
    from transformers.models.llama.modeling_llama import LlamaAttention, LlamaRotaryEmbedding
    from transformers.models.mistral.modeling_mistral import MistralAttention
    torch.manual_seed(18)
    kw = dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, rope_theta=1000.0)
    if family == "mistral":
        cfg, cls, make_mask = MistralConfig(sliding_window=window, **kw), MistralAttention, \
            create_sliding_window_causal_mask
    else:
        cfg, cls, make_mask = LlamaConfig(**kw), LlamaAttention, create_causal_mask
    cfg._attn_implementation = "eager"
    theirs = cls(cfg, layer_idx=0).eval()
    x = torch.randn(2, 9, 32)
    pos = torch.arange(9)[None].expand(2, -1)
    mask = make_mask(config=cfg, inputs_embeds=x, attention_mask=torch.ones(2, 9, dtype=torch.long),
                     cache=None, position_ids=pos)
    want = theirs(x, LlamaRotaryEmbedding(cfg)(x, pos), mask)[0]
    net = al.Network([L.SequenceInput(32, name="x"),
                      L.SelfAttention(4, 32, attention_mask="causal", rotary={"base": 1000.0},
                                      num_kv_heads=2, window=window, projection_bias=False,
                                      name="sa")]).initialize().eval()
    mod = net.layer_modules["sa"]
    for ours, lin in (("query", theirs.q_proj), ("key", theirs.k_proj), ("value", theirs.v_proj),
                      ("output", theirs.o_proj)):
        getattr(mod, ours).weight.data.copy_(lin.weight)
    torch.testing.assert_close(net(x), want, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(_step_by_step(net.stream(), x, range(1, 10)), want, atol=1e-5,
                               rtol=1e-5)
