"""The building blocks of today's transformers: LayerNorm without a bias, GELU's tanh form,
SiLU, RMSNorm, GLU. Each against a naive reference (values and gradients) and torch's own."""
import math

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import attnlab as al
from attnlab import layers as L


def _net(layer, channels=6):
    return al.Network([L.SequenceInput(channels, name="x"), layer])


def _same_with_grads(net, reference, x, atol=1e-6):
    """net(x) equals reference(x), and so do the gradients of the input and the learnables."""
    x1 = x.clone().requires_grad_(True)
    x2 = x.clone().requires_grad_(True)
    y1, y2 = net(x1), reference(x2)
    torch.testing.assert_close(y1, y2, atol=atol, rtol=1e-5)
    g = torch.randn_like(y1)
    (y1 * g).sum().backward()
    (y2 * g).sum().backward()
    torch.testing.assert_close(x1.grad, x2.grad, atol=atol, rtol=1e-5)


# ------------------------------------------------------------------------------ LayerNorm

def test_layer_norm_defaults_are_torchs():
    layer = L.LayerNorm()
    assert layer.eps == 1e-5 and layer.bias is True
    net = _net(layer)
    assert set(net.learnables) == {"layernorm/weight", "layernorm/bias"}


def test_layer_norm_without_bias_equals_torch_and_a_naive_reference():
    torch.manual_seed(0)
    net = _net(L.LayerNorm(eps=1e-3, bias=False, name="ln"))
    assert list(net.learnables) == ["ln/weight"]
    with torch.no_grad():
        net.learnables["ln/weight"].copy_(torch.randn(6))
    ref = nn.LayerNorm(6, eps=1e-3, bias=False)
    ref.load_state_dict({"weight": net.learnables["ln/weight"].detach()})
    x = torch.randn(2, 5, 6)
    _same_with_grads(net, ref, x)
    w = net.learnables["ln/weight"]

    def naive(v):
        mu = v.mean(-1, keepdim=True)
        var = ((v - mu) ** 2).mean(-1, keepdim=True)
        return (v - mu) / torch.sqrt(var + 1e-3) * w
    _same_with_grads(net, naive, x, atol=1e-5)


def test_layer_norm_of_images_without_bias_has_only_a_scale():
    net = al.Network([L.ImageInput((3, 4, 4), name="x"), L.LayerNorm(bias=False, name="ln")])
    assert list(net.learnables) == ["ln/weight"]
    x = torch.randn(2, 3, 4, 4)
    ref = F.group_norm(x, 1, net.learnables["ln/weight"].detach(), None, 1e-5)
    torch.testing.assert_close(net(x), ref)


def test_layer_norm_bias_option_survives_save_and_load(tmp_path):
    net = _net(L.LayerNorm(eps=1e-6, bias=False, name="ln"))
    net.save(tmp_path / "n.attnlab")
    back = al.load(tmp_path / "n.attnlab")
    assert back.layers["ln"].bias is False and back.layers["ln"].eps == 1e-6
    x = torch.randn(2, 3, 6)
    torch.testing.assert_close(back(x), net(x))


@pytest.mark.parametrize("kw,parts", [
    (dict(bias="no"), ["LayerNorm", "'bias'", "True or False"]),
    (dict(eps=0), ["LayerNorm", "'eps'", "> 0"]),
])
def test_layer_norm_refuses_bad_arguments(kw, parts):
    with pytest.raises(al.ArgumentError) as e:
        L.LayerNorm(**kw)
    for p in parts:
        assert p in str(e.value)


# ------------------------------------------------------------------------ activations

def _naive_gelu_tanh(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def _naive_gelu(x):
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))


@pytest.mark.parametrize("approximate,naive", [("none", _naive_gelu), ("tanh", _naive_gelu_tanh)])
def test_gelu_equals_torch_and_a_naive_reference(approximate, naive):
    torch.manual_seed(0)
    x = torch.randn(2, 5, 6) * 3
    net = _net(L.GELU(approximate=approximate))
    _same_with_grads(net, lambda v: F.gelu(v, approximate=approximate), x)
    _same_with_grads(net, naive, x, atol=1e-5)


def test_gelu_default_is_exact_and_tanh_gelu_is_the_tanh_form():
    assert L.GELU().approximate == "none"
    t = L.TanhGELU(name="g")
    assert t.approximate == "tanh" and t.config() == {} and isinstance(t, L.GELU)
    x = torch.randn(3, 4, 6)
    torch.testing.assert_close(_net(t)(x), F.gelu(x, approximate="tanh"))


def test_gelu_approximation_survives_save_and_load(tmp_path):
    net = _net(L.GELU(approximate="tanh", name="g"))
    net.save(tmp_path / "n.attnlab")
    back = al.load(tmp_path / "n.attnlab")
    assert back.layers["g"].approximate == "tanh"
    x = torch.randn(2, 3, 6)
    torch.testing.assert_close(back(x), F.gelu(x, approximate="tanh"))


def test_gelu_refuses_an_unknown_approximation_with_a_close_match():
    with pytest.raises(al.ArgumentError) as e:
        L.GELU(approximate="tahn")
    msg = str(e.value)
    assert "GELU" in msg and "'approximate'" in msg and "'tanh'" in msg and "'tahn'" in msg


def test_silu_equals_torch_and_a_naive_reference():
    torch.manual_seed(0)
    x = torch.randn(2, 5, 6) * 3
    net = _net(L.SiLU())
    assert net.layers["silu"].time_local
    _same_with_grads(net, F.silu, x)
    _same_with_grads(net, lambda v: v * torch.sigmoid(v), x)
