"""The path from an attention layer to the math: the argument rules checked once, where a
layer is made or `al.attention` is called, the options handed on as one object, and a layer
kind that changes only its module class."""
import pytest
import torch

import attnlab as al
from attnlab import attention_math, attention_rules as rules, rotary
from attnlab import functional as AF
from attnlab import layers as L


def test_rotary_defaults_have_one_home():
    assert rules.ROTARY_DEFAULTS is rotary.DEFAULTS
    assert rules.rotary("SelfAttention", True) == rotary.DEFAULTS


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
