"""The attention modules as one stack: the layers build the public modules, and the
`transform_qk` hook (queries and keys after projection, with their positions) is called by the
full forward and by every streaming path with the stream's absolute positions."""
import pytest
import torch

import attnlab as al
from attnlab import functional as AF
from attnlab import layers as L


def _positions(pos, t):
    return torch.arange(pos, pos + t) if isinstance(pos, int) else pos


def _rotate(x, pos):
    """A toy rotary map: channel pair i turned by pos · 0.3 · (i + 1)."""
    t, c = x.shape[1], x.shape[2]
    angle = _positions(pos, t).to(x.dtype)[:, None] * 0.3 * torch.arange(1, c // 2 + 1)
    cos, sin = angle.cos(), angle.sin()                                  # t×C/2
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), -1).flatten(-2)


class Rotated:
    seen: list

    def transform_qk(self, q, k, q_pos, k_pos):
        self.seen.append((_positions(q_pos, q.shape[1]).tolist(),
                          _positions(k_pos, k.shape[1]).tolist()))
        return _rotate(q, q_pos), _rotate(k, k_pos)


class RotatedSelfAttention(Rotated, AF.SelfAttentionModule):
    pass


class RotatedMultiHeadAttention(Rotated, AF.MultiHeadAttentionModule):
    pass


class RotatedSA(L.SelfAttention):
    module_class = RotatedSelfAttention


class RotatedMHA(L.MultiHeadAttention):
    module_class = RotatedMultiHeadAttention


_ROTATED = {L.SelfAttention: RotatedSA, L.MultiHeadAttention: RotatedMHA}


def _rotated(net, name):
    """`net` again with the layer `name` of a subclass whose module overrides the hook (the
    layer's `module_class`), the same parameters: (the new network, its module)."""
    layers = [_ROTATED.get(type(v), type(v))(**v.config(), name=k) for k, v in net.layer_map.items()]
    new = al.Network(layers[:1])
    for layer in layers[1:]:
        new.add(layer)
    for (dst_layer, dst_port), (src_layer, src_port) in net.sources.items():
        new.connect(new.port_name(src_layer, src_port, "output"),
                    new.port_name(dst_layer, dst_port, "input"))
    new.initialize()
    new.load_state_dict(net.state_dict())
    new.train(net.training)
    mod = new.layer_modules[name]
    assert type(mod) in (RotatedSelfAttention, RotatedMultiHeadAttention)
    mod.seen = []
    return new, mod


def _step_by_step(s, x, cuts):
    outs, start = [], 0
    for end in cuts:
        outs.append(s.step(x[:, start:end]))
        start = end
    return torch.cat(outs, 1)


def test_layers_build_the_public_modules_with_the_same_learnable_names():
    net = al.Network([L.SequenceInput(8), L.SelfAttention(2, 8, attention_mask="causal",
                                                          name="sa")]).initialize()
    mod = net.layer_modules["sa"]
    assert type(mod) is AF.SelfAttentionModule
    assert sorted(mod.state_dict()) == sorted(f"{p}.{w}" for p in ("query", "key", "value",
                                                                   "output")
                                              for w in ("weight", "bias"))
    x = torch.randn(2, 5, 8)
    # the layer's settings are the module's defaults; a call may still pass its own
    assert torch.allclose(mod(x, masks=(None,)), mod(x, attention_mask="causal"))
    assert not torch.allclose(mod(x), mod(x, attention_mask=None))      # None overrides
    att = al.Network([L.SequenceInput(8, name="q"), L.Attention(2, name="a")])
    att.add(L.SequenceInput(8, name="kv")).connect("kv", "a/key").connect("kv", "a/value")
    att.initialize()
    assert type(att.layer_modules["a"]) is AF.AttentionModule


def test_the_hook_is_the_identity_by_default():
    mod = AF.SelfAttentionModule(8, 2, 8)
    q, k = torch.randn(1, 3, 8), torch.randn(1, 3, 8)
    assert mod.transform_qk(q, k, 0, 0) == (q, k)


@pytest.mark.parametrize("kv_heads", [None, 1])
def test_rotated_causal_self_attention_streams_as_its_full_forward(kv_heads):
    net = al.Network([L.SequenceInput(8, name="x"),
                      L.SelfAttention(2, 8, attention_mask="causal", num_kv_heads=kv_heads,
                                      name="sa")]).initialize().eval()
    x = torch.randn(2, 6, 8)
    plain = net(x)
    net, mod = _rotated(net, "sa")
    full = net(x)
    assert mod.seen == [(list(range(6)), list(range(6)))]          # the full forward: 0…T−1
    assert not torch.allclose(full, plain, atol=1e-4)               # the hook matters
    s = net.stream()
    mod.seen.clear()
    torch.testing.assert_close(_step_by_step(s, x, range(1, 7)), full)  # one step at a time
    assert mod.seen == [([p], [p]) for p in range(6)]               # the stream's positions
    s.reset()
    mod.seen.clear()
    torch.testing.assert_close(_step_by_step(s, x, [3, 4, 6]), full)    # prefill, then chunks
    assert mod.seen == [([0, 1, 2], [0, 1, 2]), ([3], [3]), ([4, 5], [4, 5])]


def test_rotated_multi_head_attention_over_its_own_stream():
    net = al.Network([L.SequenceInput(8, name="x"),
                      L.MultiHeadAttention(2, 8, attention_mask="causal", name="mha")])
    net.connect("x", "mha/key").connect("x", "mha/value")
    net.initialize().eval()
    net, _ = _rotated(net, "mha")
    x = torch.randn(2, 5, 8)
    full = net(x)
    torch.testing.assert_close(_step_by_step(net.stream(), x, [1, 2, 5]), full)


def test_rotated_cross_attention_passes_the_query_positions():
    net = al.Network([L.SequenceInput(8, name="x"), L.MultiHeadAttention(2, 8, name="mha")])
    net.add(L.SequenceInput(8, name="mem")).connect("mem", "mha/key").connect("mem", "mha/value")
    net.initialize().eval()
    net, mod = _rotated(net, "mha")
    x, mem = torch.randn(2, 5, 8), torch.randn(2, 4, 8)
    full = net({"x": x, "mem": mem})
    s = net.stream({"mem": mem})
    mod.seen.clear()
    torch.testing.assert_close(_step_by_step(s, x, [2, 3, 5]), full)
    assert [q for q, _ in mod.seen] == [[0, 1], [2], [3, 4]]
    assert all(k == [0, 1, 2, 3] for _, k in mod.seen)


def test_rotated_self_attention_static_shape_stream(monkeypatch):
    # the static-shape path (used under torch.compile) run eagerly: the hook gets the
    # positions tensor of the new steps
    import attnlab.stream.core as core
    monkeypatch.setattr(core, "maybe_compile", lambda fn, *a, **k: fn)
    net = al.Network([L.SequenceInput(8, name="x"),
                      L.SelfAttention(2, 8, attention_mask="causal", name="sa")]).initialize().eval()
    net, mod = _rotated(net, "sa")
    x = torch.randn(2, 5, 8)
    full = net(x)
    s = net.stream(compile=True)
    mod.seen.clear()
    torch.testing.assert_close(_step_by_step(s, x, [2, 3, 5]), full)
    assert mod.seen == [([0, 1], [0, 1]), ([2], [2]), ([3, 4], [3, 4])]


@pytest.mark.parametrize("scores", [False, True])
def test_attention_capture_asks_for_weights_per_call(scores):
    from attnlab.viz.view import attention_maps
    net = al.Network([L.SequenceInput(8, name="x"),
                      L.SelfAttention(2, 8, has_scores_output=scores, name="sa")]).initialize()
    mod = net.layer_modules["sa"]
    x = torch.randn(1, 3, 8)
    (page,) = attention_maps(net, x)
    _, ref = mod(x, need_weights=True)
    assert (page["heads"], page["tq"], page["tk"]) == (2, 3, 3)
    torch.testing.assert_close(torch.tensor(page["weights"]), ref[0].detach(), atol=1e-4,
                               rtol=0)
    # nothing on the module changed: its setting, its hooks
    assert mod.scores is scores
    assert not mod._forward_hooks and not mod._forward_pre_hooks


class QuietRotatedSelfAttention(AF.SelfAttentionModule):
    def transform_qk(self, q, k, q_pos, k_pos):
        return _rotate(q, q_pos), _rotate(k, k_pos)


class QuietRotatedSA(L.SelfAttention):
    module_class = QuietRotatedSelfAttention


def test_onnx_export_traces_the_hook(tmp_path):
    pytest.importorskip("onnxruntime")
    import numpy as np
    import onnxruntime as ort
    torch.manual_seed(0)
    plain_net = al.Network([L.SequenceInput(8, name="x"), L.SelfAttention(
        2, 8, attention_mask="causal", name="sa")]).initialize().eval()
    torch.manual_seed(0)
    net = al.Network([L.SequenceInput(8, name="x"), QuietRotatedSA(
        2, 8, attention_mask="causal", name="sa")]).initialize().eval()
    assert type(net.layer_modules["sa"]) is QuietRotatedSelfAttention
    x = torch.randn(2, 5, 8)
    plain = plain_net(x)
    full = net(x)
    assert not torch.allclose(full, plain, atol=1e-4)
    path = tmp_path / "rotated.onnx"
    net.export_onnx(path, x)
    sess = ort.InferenceSession(str(path))
    feeds = {i.name: (x.numpy() if i.name == "x" else np.ones((2, 5), dtype=bool))
             for i in sess.get_inputs()}
    (got, *_) = sess.run(None, feeds)
    np.testing.assert_allclose(got, full.detach().numpy(), atol=1e-4)
    x3 = torch.randn(1, 3, 8)                       # another length: positions traced, not fixed
    feeds = {i.name: (x3.numpy() if i.name == "x" else np.ones((1, 3), dtype=bool))
             for i in sess.get_inputs()}
    (got, *_) = sess.run(None, feeds)
    np.testing.assert_allclose(got, net(x3).detach().numpy(), atol=1e-4)
