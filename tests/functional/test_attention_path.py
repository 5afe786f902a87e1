"""The path from an attention layer to the math: the argument rules checked once, where a
layer is made or `al.attention` is called, the options handed on as one object, and a layer
kind that changes only its module class."""
import dataclasses
import inspect

import pytest
import torch
from torch import nn

import attnlab as al
from attnlab.functional import math as attention_math, rules as rules, rotary
from attnlab import functional as AF
from attnlab import layers as L
from attnlab.functional import naive_attention


def test_rotary_defaults_have_one_home():
    assert rules.ROTARY_DEFAULTS is rotary.DEFAULTS
    defaults = {"base": 10000.0, "fraction": 1.0, "interleaved": False}
    assert rotary.DEFAULTS.as_dict() == defaults
    assert rules.rotary("SelfAttention", True) == defaults
    # a dict's missing keys are filled from them
    assert rules.rotary("SelfAttention", {"base": 500.0}) == dict(defaults, base=500.0)
    # and Rotary's keyword defaults are theirs, not values of its own
    params = inspect.signature(rotary.Rotary).parameters
    assert {k: params[k].default for k in rotary.RotarySettings.keys()} == defaults
    turn = rotary.Rotary(8)
    assert (turn.base, turn.dims, turn.interleaved) == (10000.0, 8, False)


def test_rotary_defaults_are_typed_and_cannot_change():
    assert [(f.name, f.type) for f in dataclasses.fields(rotary.DEFAULTS)] == \
        [("base", "float"), ("fraction", "float"), ("interleaved", "bool")]
    with pytest.raises(dataclasses.FrozenInstanceError):
        rotary.DEFAULTS.base = 1.0                          # type: ignore[misc]
    settings = rules.rotary("SelfAttention", True)
    settings["base"] = 1.0                                  # a copy: the defaults stay
    assert rules.rotary("SelfAttention", True)["base"] == 10000.0


def _counting(monkeypatch, module, name):
    calls = []
    real = getattr(module, name)

    def counted(*args, **kwargs):
        calls.append(args[0] if args else None)
        return real(*args, **kwargs)
    monkeypatch.setattr(module, name, counted)
    return calls


@pytest.mark.parametrize("make", [
    lambda: L.SelfAttention(2, 8, attention_mask="causal", rotary=True, name="att"),
    lambda: L.MultiHeadAttention(2, 8, num_kv_heads=1, window=3, name="att"),
    lambda: L.Attention(2, alibi=True, name="att"),
])
def test_the_rules_run_once_when_the_layer_is_made(monkeypatch, make):
    """Made: one pass of the rules. Built and run (forward, a stream): none; the module holds
    the layer's very options object."""
    checked = _counting(monkeypatch, rules, "options")
    called = _counting(monkeypatch, attention_math, "_check_arguments")
    layer = make()
    assert checked == [layer] and isinstance(layer.options, rules.AttentionOptions)
    net = al.Network([L.SequenceInput(8, name="x"), layer])
    if not isinstance(layer, L.SelfAttention):
        net.connect("x", "att/key").connect("x", "att/value")
    net.initialize().eval()
    mod = net.layer_modules["att"]
    assert mod.options is layer.options
    net(torch.randn(2, 5, 8))
    assert checked == [layer] and called == []
    torch.manual_seed(0)
    causal = al.Network([L.SequenceInput(8, name="x"),
                         L.SelfAttention(2, 8, attention_mask="causal", name="sa")])
    causal.initialize().eval()
    s = causal.stream()
    s.step(torch.randn(1, 3, 8))
    s.step(torch.randn(1, 1, 8))
    assert called == []


def test_al_attention_checks_its_arguments_once_per_call(monkeypatch):
    called = _counting(monkeypatch, attention_math, "_check_arguments")
    q = torch.randn(1, 3, 8)
    al.attention(q, q, q, 2)
    assert len(called) == 1
    with pytest.raises(al.ArgumentError, match="attention: argument 'dropout'"):
        al.attention(q, q, q, 2, dropout=1.5)


def test_loose_module_arguments_are_checked_by_the_same_rules(monkeypatch):
    checked = _counting(monkeypatch, rules, "options")
    AF.SelfAttentionModule(8, 2, 8)
    assert checked == ["SelfAttentionModule"]
    with pytest.raises(al.ArgumentError, match="SelfAttentionModule argument 'dropout'"):
        AF.SelfAttentionModule(8, 2, 8, dropout=2.0)


def test_an_option_changed_after_construction_is_checked_when_built():
    layer = L.SelfAttention(2, 8, name="sa")
    layer.dropout = 0.25
    assert layer.options.dropout == 0.25
    net = al.Network([L.SequenceInput(8), layer]).initialize()
    assert net.layer_modules["sa"].dropout == 0.25
    layer.dropout = 1.5
    with pytest.raises(al.ArgumentError, match="argument 'dropout'"):
        layer.options


# -- a layer kind that changes only its module class: QK-norm (Qwen3, Gemma 3) ---------------

class HeadRMSNorm(nn.Module):
    """RMS normalisation of each head's channels, with one learned gain per channel."""

    def __init__(self, head_size, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(head_size))

    def forward(self, x):                                      # B×T×(H·d)
        b, t, c = x.shape
        d = self.weight.shape[0]
        h = x.reshape(b, t, c // d, d)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight
        return h.reshape(b, t, c)


class PathQKNormModule(AF.SelfAttentionModule):
    def __init__(self, options, channels, layer_name=None):
        super().__init__(options, channels, layer_name=layer_name)
        self.q_norm = HeadRMSNorm(self.head_size)
        self.k_norm = HeadRMSNorm(self.head_size)

    def transform_qk(self, q, k, q_pos, k_pos):
        return super().transform_qk(self.q_norm(q), self.k_norm(k), q_pos, k_pos)


class PathQKNormSelfAttention(L.SelfAttention):
    module_class = PathQKNormModule


def _qk_net(**kw):
    torch.manual_seed(0)
    net = al.Network([L.SequenceInput(8, name="x"),
                      PathQKNormSelfAttention(2, 8, attention_mask="causal", name="sa", **kw)])
    net.initialize().eval()
    with torch.no_grad():                                     # gains away from 1
        for name, p in net.named_parameters():
            if "norm" in name:
                p.uniform_(0.5, 1.5)
    return net


def _rms(x, w, heads):
    h = x.unflatten(-1, (heads, -1))
    return (h / h.pow(2).mean(-1, keepdim=True).add(1e-6).sqrt() * w).flatten(-2)


@pytest.mark.parametrize("kw", [{}, {"rotary": True}, {"rotary": True, "num_kv_heads": 1}])
def test_a_subclass_that_sets_module_class_computes_through_it(kw):
    net = _qk_net(**kw)
    m = net.layer_modules["sa"]
    assert type(m) is PathQKNormModule and m.options is net.layers["sa"].options
    assert {"sa/q_norm.weight", "sa/k_norm.weight"} <= set(net.learnables)
    x = torch.randn(2, 6, 8)
    q = _rms(m.query(x), m.q_norm.weight, 2)
    k = _rms(m.key(x), m.k_norm.weight, m.num_kv_heads)
    if m.rotary is not None:
        q, k = m.rotary(q, 0), m.rotary(k, 0)
    want = m.output(naive_attention(q, k, m.value(x), 2, attention_mask="causal",
                                    num_kv_heads=kw.get("num_kv_heads")))
    torch.testing.assert_close(net(x), want, atol=1e-5, rtol=1e-5)


def test_a_qk_norm_subclass_streams_on_the_one_matmul_step(monkeypatch):
    from attnlab.stream.steppers.attention import CachedAttentionStepper
    fused, one = [], []
    real_fused, real_one = CachedAttentionStepper._step_fused, CachedAttentionStepper._step_one
    monkeypatch.setattr(CachedAttentionStepper, "_step_fused",
                        lambda self, *a: fused.append(1) or real_fused(self, *a))
    monkeypatch.setattr(CachedAttentionStepper, "_step_one",
                        lambda self, *a: one.append(1) or real_one(self, *a))
    net = _qk_net(rotary=True)
    x = torch.randn(2, 7, 8)
    s = net.stream()
    steps = [s.step(x[:, :3])] + [s.step(x[:, t:t + 1]) for t in range(3, 7)]
    torch.testing.assert_close(torch.cat(steps, 1), net(x), atol=1e-5, rtol=1e-5)
    assert len(fused) == 4 and not one                        # every decoding step: fused


def test_a_qk_norm_subclass_saves_loads_and_exports(tmp_path):
    net = _qk_net(rotary=True)
    x = torch.randn(2, 5, 8)
    net.save(tmp_path / "qk.attnlab")
    again = al.load(tmp_path / "qk.attnlab")
    assert type(again.layers["sa"]) is PathQKNormSelfAttention
    assert type(again.layer_modules["sa"]) is PathQKNormModule
    torch.testing.assert_close(again(x), net(x), atol=0, rtol=0)
    pytest.importorskip("onnxruntime")
    exported = net.export_onnx(tmp_path / "qk.onnx", x)       # checked against PyTorch
    assert exported.max_error < 1e-4


def test_a_query_that_heads_do_not_divide_at_run_time_names_the_layer():
    net = al.Network([L.SequenceInput(8, name="q"), L.Attention(2, name="att")])
    net.add(L.SequenceInput(8, name="kv")).connect("kv", "att/key").connect("kv", "att/value")
    net.initialize()
    mod = net.layer_modules["att"]
    q = torch.randn(1, 3, 7)
    with pytest.raises(al.SizeError) as e:
        mod(q, q, q)
    assert str(e.value).startswith("layer 'att' port 'query': expected channels that "
                                   "num_heads 2 divides, received 7.")
    with pytest.raises(al.SizeError, match="^attention: num_heads 2 does not divide key"):
        al.attention(q, q, q, 2)
