"""PyTorch and Keras habits with layers and the public namespace: a layer called on tensors,
tab completion, unknown constructor arguments, any finite attention scale, edits and labels of
the wrong type. Each ends in a result or in an attnlab error that says what to do."""
import copy
import math

import numpy as np
import pytest
import torch
from torch import nn

import attnlab as al
from attnlab import layers as L
from attnlab.functional import attention, naive_attention
from attnlab.training.labels import encode

from helpers import ID_LAYERS, data_for, single_layer_net
from test_layer_contract import CASES

ALL = [(t, i, c) for t, cases in CASES.items() for i, c in enumerate(cases)]


# ------------------------------------------------------------------ a layer called on tensors

def _outputs_by_port(layer, out):
    if len(layer.output_ports) == 1:
        return {layer.output_ports[0]: out}
    assert isinstance(out, tuple) and len(out) == len(layer.output_ports)
    return dict(zip(layer.output_ports, out))


@pytest.mark.parametrize("type_name,i,case", ALL, ids=[f"{t}-{i}" for t, i, _ in ALL])
def test_a_called_layer_equals_the_same_layer_in_a_network(type_name, i, case):
    factory, in_specs, n_params = case
    torch.manual_seed(0)
    layer = factory()
    ints = 10 if type_name in ID_LAYERS else None
    xs = [data_for(in_specs[p], ints=ints) for p in layer.input_ports]
    got = _outputs_by_port(layer, layer(*xs, training=False))
    learnables = list(layer.module.parameters())
    assert sum(p.numel() for p in learnables) == n_params
    assert all(p.requires_grad for p in learnables)

    net = single_layer_net(layer, in_specs)
    net.initialize()
    net.layer_modules[layer.name].load_state_dict(layer.module.state_dict())
    net.eval()
    out = net({f"x_{p}": x for p, x in zip(layer.input_ports, xs)})
    outs = out if isinstance(out, dict) else {net.output_names[0]: out}
    for port, y in got.items():
        name = layer.name if len(layer.output_ports) == 1 else f"{layer.name}/{port}"
        assert y.shape == outs[name].shape
        torch.testing.assert_close(y, outs[name])


def test_multi_head_attention_called_on_tensors_builds_once_and_trains():
    torch.manual_seed(0)
    mha = L.MultiHeadAttention(8, 256)
    q, k, v = torch.randn(2, 5, 32), torch.randn(2, 7, 16), torch.randn(2, 7, 24)
    y = mha(q, k, v)
    assert y.shape == (2, 5, 32)
    module = mha.module
    assert mha.module.query.weight.shape == (256, 32) and mha.module.key.weight.shape == (256, 16)
    # by port name, and on another length: the same module, the same result
    torch.testing.assert_close(mha(q, key=k, value=v), y)
    torch.testing.assert_close(mha(query=q, key=k, value=v), y)
    assert mha(q, k[:, :3], v[:, :3]).shape == (2, 5, 32)
    assert mha.module is module
    # learnables are trainable: a step changes the output
    opt = torch.optim.SGD(mha.module.parameters(), lr=0.1)
    mha(q, k, v).pow(2).mean().backward()
    assert all(p.grad is not None for p in mha.module.parameters())
    opt.step()
    assert not torch.allclose(mha(q, k, v), y)


def test_a_called_layer_refuses_inputs_needing_other_learnables():
    fc = L.Dense(3, name="fc")
    fc(torch.randn(2, 5, 4))
    assert fc(torch.randn(1, 9, 4)).shape == (1, 9, 3)        # another batch and length: fine
    with pytest.raises(al.SizeError) as info:
        fc(torch.randn(2, 5, 6))
    msg = str(info.value)
    assert "layer 'fc' port 'in'" in msg and "B×T×4" in msg and "received B×T×6" in msg
    assert "make another layer" in msg
    conv = L.Conv2d(3, 4)
    conv(torch.randn(1, 2, 5, 5))
    assert conv(torch.randn(1, 2, 7, 9)).shape == (1, 4, 7, 9)  # the same kernels fit any image


def test_a_called_layer_module_follows_the_inputs_dtype_and_casts_later_ones():
    fc = L.Dense(2)
    y = fc(torch.randn(3, 4, dtype=torch.float64))
    assert y.dtype == torch.float64 and fc.module.weight.dtype == torch.float64
    assert fc(torch.randn(3, 4)).dtype == torch.float64


def test_a_called_layer_takes_token_ids_and_masks_as_two_dimensional_tensors():
    emb = L.Embedding(10, 4)
    assert emb(torch.randint(0, 10, (2, 5))).shape == (2, 5, 4)
    sa = L.SelfAttention(2, 8, has_padding_mask_input=True)
    x = torch.randn(2, 5, 4)
    mask = torch.ones(2, 5, dtype=torch.bool)
    mask[1, 3:] = False
    y = sa(x, mask=mask)
    assert y.shape == (2, 5, 4)
    # the padded keys do not count: changing them leaves the other rows' outputs as they were
    x2 = x.clone()
    x2[1, 3:] = 100.0
    torch.testing.assert_close(sa(x2, mask)[1, :3], y[1, :3])


def test_training_argument_sets_the_mode_for_one_call():
    drop = L.Dropout(0.5)
    x = torch.ones(4, 100)
    torch.testing.assert_close(drop(x, training=False), x)
    assert (drop(x, training=True) == 0).any()
    assert drop.module.training                            # torch's default mode is kept
    with pytest.raises(al.ArgumentError, match="training"):
        drop(x, training="no")


@pytest.mark.parametrize("call,cls,parts", [
    (lambda: L.Dense(3, name="fc")(torch.randn(2, 4), torch.randn(2, 4)), al.SignatureError,
     ["layer 'fc' (Dense)", "expected 1 input(s) (in), received 2"]),
    (lambda: L.Attention(2)(torch.randn(1, 3, 4), kee=torch.randn(1, 3, 4)), al.SignatureError,
     ["no input port 'kee'", "Did you mean 'key'", "query, key, value"]),
    (lambda: L.MultiHeadAttention(2, 8)(torch.randn(1, 3, 4), torch.randn(1, 3, 4)),
     al.SignatureError, ["missing input(s) value", "layer(q, kv, kv)"]),
    (lambda: L.SelfAttention(2, 8)(torch.randn(1, 3, 4), mask=torch.ones(1, 3, dtype=torch.bool)),
     al.SignatureError, ["no input port 'mask'", "has_padding_mask_input=True"]),
    (lambda: L.Dense(3)(torch.randn(2, 4), **{"in": torch.randn(2, 4)}), al.SignatureError,
     ["'in' given twice"]),
    (lambda: L.SequenceInput(4, name="x")(torch.randn(1, 2, 4)), al.SignatureError,
     ["layer 'x' (SequenceInput) is an input layer", "L.Dense(4)(x)"]),
    (lambda: L.Dense(3)([[1.0, 2.0]]), al.DataError, ["expected a torch.Tensor", "received list",
                                                      "torch.as_tensor"]),
    (lambda: L.Dense(3)(np.ones((2, 4))), al.DataError, ["numpy array", "torch.as_tensor"]),
    (lambda: L.Dense(3)(torch.randn(4)), al.DataError, ["received 4 (1 dimensions)", "unsqueeze(0)"]),
    (lambda: L.SelfAttention(2, 8, name="sa")(torch.randn(2, 4)), al.FormatError,
     ["layer 'sa' port 'in'", "B×T×C"]),
])
def test_calling_a_layer_wrongly_says_how(call, cls, parts):
    with pytest.raises(cls) as info:
        call()
    msg = str(info.value)
    for part in parts:
        assert part in msg, f"{part!r} not in:\n{msg}"


def test_the_module_of_an_uncalled_layer_is_an_attnlab_error_and_an_attribute_error():
    fc = L.Dense(3, name="fc")
    assert not hasattr(fc, "module")
    with pytest.raises(al.AttnlabError) as info:
        fc.module
    assert isinstance(info.value, AttributeError)
    assert "layer 'fc' (Dense) has no module yet" in str(info.value) and "layer(x)" in str(info.value)
    wrapped = nn.Linear(4, 2)
    assert L.Module(wrapped).module is wrapped                # a Module layer's own module


def test_a_deep_copy_of_a_called_layer_has_its_own_weights():
    fc = L.Dense(3)
    x = torch.randn(2, 4)
    y = fc(x)
    twin = copy.deepcopy(fc)
    torch.testing.assert_close(twin(x), y)
    assert twin.module is not fc.module
    with torch.no_grad():
        twin.module.weight.zero_()
    torch.testing.assert_close(fc(x), y)


# ------------------------------------------------------------------ tab completion

def test_dir_of_attnlab_is_its_public_api():
    names = dir(al)
    for public in ("train", "TrainingOptions", "Serial", "Parallel", "load", "generate",
                   "forecast", "classify", "attention", "Network", "layers", "matlab",
                   "datasets", "SignatureError", "__version__"):
        assert public in names
    for internal in ("importlib", "_LAZY", "_SUBMODULES", "network", "graph", "compile",
                     "batching", "annotations"):
        assert internal not in names
    assert set(al.__all__) <= set(names)
    assert len(set(al.__all__)) == len(al.__all__)
    for name in names:
        assert getattr(al, name) is not None                # every shown name resolves


def test_dir_of_the_layers_is_the_layers():
    assert dir(L) == sorted(L.__all__)
    assert "Dense" in dir(L) and "base" not in dir(L) and "_checks" not in dir(L)
    for name in L.__all__:
        getattr(L, name)


# ------------------------------------------------------------------ unknown constructor arguments

@pytest.mark.parametrize("make,parts", [
    (lambda: L.SelfAttention(4, 16, sliding_window=8),
     ["SelfAttention has no argument 'sliding_window'", "received sliding_window=8",
      "Did you mean 'window'", "SelfAttention(num_heads, key_channels"]),
    (lambda: L.SelfAttention(4, 16, rope=True), ["Did you mean 'rotary'", "rotary=True"]),
    (lambda: L.MultiHeadAttention(4, 16, num_key_value_heads=2),
     ["Did you mean 'num_kv_heads'", "num_kv_heads=2"]),
    (lambda: L.SelfAttention(4, 16, bias=False), ["Did you mean 'projection_bias'"]),
    (lambda: L.Dense(4, use_bias=False),
     ["Dense has no argument 'use_bias'", "Did you mean 'bias'", "Dense(out, bias=True, name=None, tied_to=None)"]),
    (lambda: L.SelfAttention(2, 8, causal_alignment="bottom-right"),
     ["SelfAttention has no argument 'causal_alignment'",
      "'causal_alignment' is an argument of L.Attention, L.MultiHeadAttention and al.attention"]),
    (lambda: L.Dropout(dropout=0.1), ["Dropout has no argument 'dropout'", "L.Attention"]),
    (lambda: L.LSTM(4, num_layer=2), ["LSTM has no argument 'num_layer'", "LSTM(hidden, "]),
    (lambda: L.SelfAttention(2, 8, is_causal=True), ["SelfAttention has no argument 'is_causal'",
                                                     "use attention_mask=\"causal\""]),
    (lambda: L.Dense(units=4), ["Dense has no argument 'units'", "Dense(64)"]),
    (lambda: L.Dense(), ["Dense: missing a required argument: 'out'", "Dense(out, bias=True"]),
    (lambda: L.Dense(4, True, "fc", 5), ["Dense: too many positional arguments"]),
    (lambda: al.Network(layer=[]), ["Network has no argument 'layer'", "Did you mean 'layers'"]),
])
def test_unknown_arguments_are_attnlab_errors_that_are_type_errors(make, parts):
    with pytest.raises(TypeError) as info:                   # existing `except TypeError` holds
        make()
    err = info.value
    assert isinstance(err, al.SignatureError) and isinstance(err, al.AttnlabError)
    for part in parts:
        assert part in str(err), f"{part!r} not in:\n{err}"


def test_every_layer_type_names_an_unknown_argument():
    from attnlab.matlab import mlayers, vit_layers  # noqa: F401  (their layers register)
    from attnlab.layers.base import LAYER_TYPES
    for name, cls in LAYER_TYPES.items():
        with pytest.raises(al.SignatureError) as info:
            cls(bogus_option=1)
        assert f"{name} has no argument 'bogus_option'" in str(info.value), name
        assert info.value.argument == "bogus_option" and info.value.value == 1


def test_signatures_and_errors_inside_a_constructor_are_kept():
    import inspect
    assert list(inspect.signature(L.Dense.__init__).parameters) == ["self", "out", "bias", "name",
                                                                "tied_to"]
    assert repr(L.Dense(4, bias=False)) == "Dense(out=4, bias=False)"

    class _Strict(L.ReLU):
        def __init__(self, n: int = 1, name=None):
            super().__init__(name)
            raise TypeError("a check of its own")

    with pytest.raises(TypeError) as info:
        _Strict(2)
    assert not isinstance(info.value, al.AttnlabError) and str(info.value) == "a check of its own"


# ------------------------------------------------------------------ any finite attention scale

def _qkv(dtype=torch.float64, b=2, tq=4, tk=5, c=8):
    g = torch.Generator().manual_seed(3)
    return [torch.randn(b, t, c, generator=g, dtype=dtype, requires_grad=True)
            for t in (tq, tk, tk)]


def _grads(out, xs):
    return torch.autograd.grad(out.pow(2).sum() + out.sum(), xs)


@pytest.mark.parametrize("scale", [-1e4, -0.7, 0.0, 0, 3.0])
@pytest.mark.parametrize("masking", ["none", "padding", "causal", "empty-rows"])
def test_negative_and_zero_scale_agree_on_every_path(scale, masking):
    q, k, v = _qkv()
    kpm = am = None
    if masking == "padding":
        kpm = torch.tensor([[True] * 5, [True, True, False, False, False]])
    elif masking == "causal":
        am = "causal"
    elif masking == "empty-rows":
        am = torch.ones(4, 5, dtype=torch.bool)
        am[1] = False                                    # query 1 sees no key at all
    kw = dict(scale=scale, key_padding_mask=kpm, attention_mask=am)
    fused = attention(q, k, v, 2, **kw)
    explicit, weights = attention(q, k, v, 2, need_weights=True, **kw)
    ref, ref_w = naive_attention(q, k, v, 2, need_weights=True, **kw)
    torch.testing.assert_close(fused, ref)
    torch.testing.assert_close(explicit, ref)
    torch.testing.assert_close(weights, ref_w)
    assert torch.isfinite(fused).all() and torch.isfinite(weights).all()
    for a, b, c in zip(_grads(fused, [q, k, v]), _grads(explicit, [q, k, v]), _grads(ref, [q, k, v])):
        assert torch.isfinite(a).all()
        torch.testing.assert_close(a, c)
        torch.testing.assert_close(b, c)
    if masking == "empty-rows":
        assert (fused[:, 1] == 0).all() and (weights[:, :, 1] == 0).all()


def test_zero_scale_is_uniform_attention_over_the_allowed_keys():
    q, k, v = _qkv()
    kpm = torch.tensor([[True] * 5, [True, False, True, False, False]])
    out = attention(q, k, v, 2, scale=0.0, key_padding_mask=kpm)
    torch.testing.assert_close(out[0], v[0].mean(0).expand(4, 8))
    torch.testing.assert_close(out[1], v[1, [0, 2]].mean(0).expand(4, 8))
    causal = attention(q, k, v, 1, scale=0, attention_mask="causal")
    torch.testing.assert_close(causal[0, 2], v[0, :3].mean(0))


def test_a_negative_scale_favours_the_least_similar_key():
    q = torch.tensor([[[1.0, 0.0]]])
    k = torch.tensor([[[1.0, 0.0], [-1.0, 0.0]]])
    v = torch.tensor([[[1.0], [2.0]]])
    assert attention(q, k, v, 1, scale=-50.0).item() == pytest.approx(2.0)
    assert attention(q, k, v, 1, scale=50.0).item() == pytest.approx(1.0)


@pytest.mark.parametrize("make", [
    lambda s: L.Attention(2, scale=s), lambda s: L.SelfAttention(2, 8, scale=s),
    lambda s: L.MultiHeadAttention(2, 8, scale=s)])
def test_layers_take_any_finite_scale(make):
    for s in (-2.0, 0, -1e4):
        layer = make(s)
        assert layer.scale == float(s)
        xs = [torch.randn(2, 3, 4) for _ in layer.input_ports]
        assert torch.isfinite(layer(*xs)).all()
    for bad in (float("nan"), float("inf"), float("-inf"), "0.5", True, None, [1.0]):
        with pytest.raises(al.ArgumentError) as info:
            make(bad)
        assert "argument 'scale'" in str(info.value) and "finite number" in str(info.value)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -math.inf, "half", True, None])
def test_attention_refuses_a_non_finite_or_non_numeric_scale(bad):
    q, k, v = _qkv()
    with pytest.raises(al.ArgumentError) as info:
        attention(q, k, v, 2, scale=bad)
    assert "attention: argument 'scale'" in str(info.value) and "finite number" in str(info.value)


# ------------------------------------------------------------------ edits of the wrong type

def _net():
    return al.Network([L.SequenceInput(4, name="x"), L.Dense(4, name="fc"), L.ReLU(name="relu")])


@pytest.mark.parametrize("edit,parts", [
    (lambda n: n.replace("fc", []), ["replace('fc')", "received an empty list",
                                     "net.remove('fc')"]),
    (lambda n: n.replace("fc", nn.ReLU()), ["replace('fc')", "received a torch module ReLU",
                                            "L.Module(torch.nn.ReLU())"]),
    (lambda n: n.replace("fc", [L.ReLU(), nn.GELU()]), ["at position 1", "L.Module(torch.nn.GELU"]),
    (lambda n: n.replace("fc", None), ["replace('fc')", "received None"]),
    (lambda n: n.replace(1, L.ReLU()), ["replace(): expected a layer name", "received 1 (int)",
                                        "layer 1 is 'fc'", "net.replace('fc')"]),
    (lambda n: n.remove(3), ["remove(): expected a layer name", "received 3 (int)",
                             "layers: x, fc, relu"]),
    (lambda n: n.remove(n.layers["fc"]), ["received layer 'fc' (Dense)", "net.remove('fc')"]),
    (lambda n: n.remove(None), ["remove()", "received None"]),
    (lambda n: n.add(None), ["add(): expected attnlab layers, received None", "L.Dense(4)"]),
    (lambda n: n.add(3), ["add()", "received 3 (int)"]),
    (lambda n: n.add(torch.zeros(2, 3)), ["add()", "received a tensor of size 2×3"]),
    (lambda n: n.add(nn.Linear(4, 2)), ["received a torch module Linear", "L.Module(torch.nn.Linear("]),
    (lambda n: n.add([L.ReLU(), nn.Tanh()]), ["at position 1 of the list", "L.Module(torch.nn.Tanh())"]),
    (lambda n: n.add(L.Dense), ["received <class", "Dense(...)"]),
    (lambda n: n.connect(3, "relu"), ["connect() argument 'source'", "received 3 (int)"]),
    (lambda n: n.connect("x", None), ["connect() argument 'destination'", "received None"]),
    (lambda n: n.connect(n.layers["x"], "relu"), ["received layer 'x' (SequenceInput)",
                                                  "by its name: 'x'"]),
    (lambda n: n.disconnect("x", torch.ones(1)), ["disconnect() argument 'destination'",
                                                  "received a tensor of size 1"]),
    (lambda n: n.disconnect(nn.ReLU(), "fc"), ["disconnect() argument 'source'", "torch module ReLU"]),
])
def test_edits_with_wrong_types_are_network_errors(edit, parts):
    net = _net()
    before = (list(net._layers), dict(net._conns))
    with pytest.raises(al.NetworkError) as info:
        edit(net)
    msg = str(info.value)
    for part in parts:
        assert part in msg, f"{part!r} not in:\n{msg}"
    assert (list(net._layers), dict(net._conns)) == before       # the network is unchanged


def test_the_same_layer_twice_in_one_add_is_named_with_both_positions():
    fc = L.Dense(4, name="fc2")
    with pytest.raises(al.NetworkError) as info:
        _net().add([fc, L.ReLU(), fc])
    msg = str(info.value)
    assert "layer 'fc2' (Dense)" in msg and "positions 0 and 2" in msg
    assert "another Dense(...)" in msg and "copy.deepcopy(layer) with a new name" in msg
    relu = L.ReLU()
    with pytest.raises(al.NetworkError, match="a ReLU layer, is at positions 1 and 2"):
        _net().add([L.Dense(2), relu, relu])
    net = _net().add([L.Dense(2), relu, copy.deepcopy(relu)])   # the fix works
    assert len(net.layers) == 6


# ------------------------------------------------------------------ labels that are not labels

@pytest.mark.parametrize("labels,parts", [
    (np.array([1 + 0j, 0j] * 3), ["dtype complex128", "y.real.astype(int)"]),
    (np.array([1 + 1j, 2] * 3, dtype=object), ["complex values in an object array", "(1+1j)"]),
    (np.array([None, 1] * 3, dtype=object), ["None values in an object array"]),
    (np.array([[1], [2], 3, 4, 5, 6], dtype=object), ["list values in an object array"]),
])
def test_labels_that_are_not_ints_strings_or_bools_are_refused(labels, parts):
    with pytest.raises(al.DataError) as info:
        encode(labels, 2, "softmax", None)
    msg = str(info.value)
    assert "targets for output 'softmax'" in msg and "expected class labels" in msg
    for part in parts:
        assert part in msg, f"{part!r} not in:\n{msg}"
    assert encode(np.array(["b", "a", "b"], dtype=object), 2, "o", None)[1] == ["a", "b"]


@pytest.mark.parametrize("labels", [torch.tensor([1 + 0j, 0j] * 4),
                                    np.array([1 + 1j, 2] * 4, dtype=object)])
def test_training_refuses_complex_labels_before_it_starts(labels):
    net = al.Network([L.FeatureInput(3), L.Dense(2), L.Softmax()])
    with pytest.raises(al.DataError) as info:
        al.train(net, np.zeros((8, 3), np.float32), labels, max_epochs=1, verbose=False)
    assert "complex" in str(info.value) and "class labels" in str(info.value)
    assert "class_labels" not in net.metadata


@pytest.mark.parametrize("kw,parts", [
    ({"is_causal": True}, ["al.attention has no argument 'is_causal'", "attention_mask=\"causal\""]),
    ({"dropout_p": 0.1}, ["no argument 'dropout_p'", "Use dropout=0.1"]),
    ({"attn_mask": None}, ["no argument 'attn_mask'", "Did you mean 'attention_mask'"]),
])
def test_attention_names_an_unknown_argument_with_the_attnlab_one(kw, parts):
    q, k, v = _qkv()
    with pytest.raises(TypeError) as info:
        attention(q, k, v, 2, **kw)
    assert isinstance(info.value, al.SignatureError)
    msg = str(info.value)
    for part in parts:
        assert part in msg, f"{part!r} not in:\n{msg}"
    assert "al.attention(q, k, v, num_heads, scale='auto'" in msg
    assert "Did you mean 'scale'" not in msg


def test_a_layer_named_twice_in_remove_is_removed_once():
    net = _net().remove("fc", "fc")
    assert [l.name for l in net.layers] == ["x", "relu"] and net.connections == ()


@pytest.mark.parametrize("scale", [-3.0, 0.0])
def test_the_fused_kernel_is_given_a_scale_it_handles(scale, monkeypatch):
    # kernels that mask before they scale, or take the row maximum before scaling, assume a
    # positive scale: a negative one arrives as |scale| on -Q, zero with an explicit causal mask
    seen = []
    real = torch.nn.functional.scaled_dot_product_attention

    def spy(*a, **kw):
        seen.append((kw["scale"], kw["is_causal"], kw["attn_mask"] is not None))
        return real(*a, **kw)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", spy)
    q, k, v = _qkv(tq=5)
    out = attention(q, k, v, 2, scale=scale, attention_mask="causal")
    torch.testing.assert_close(out, naive_attention(q, k, v, 2, scale=scale, attention_mask="causal"))
    assert seen == [(abs(scale), scale != 0, scale == 0)]
