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


# ------------------------------------------------------------------------------ TokenInput

def _token_net(vocab=60000, dim=4):
    return al.Network([L.TokenInput(name="ids"), L.Embedding(vocab, dim, name="emb")])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64])
def test_token_ids_are_never_cast_to_the_float_dtype(dtype):
    net = _token_net().to(dtype)
    w = net.learnables["emb/weight"]
    ids = torch.tensor([[50001, 3], [59999, 0]])
    y = net(ids)
    assert y.dtype == dtype
    torch.testing.assert_close(y, w[ids], rtol=0, atol=0)
    # int32 ids, whole-number floats and numpy arrays give the same rows
    for given in (ids.int(), ids.double(), ids.numpy()):
        torch.testing.assert_close(net(given), w[ids], rtol=0, atol=0)


@pytest.mark.parametrize("given", ["int", "float"])
def test_sequence_input_feeding_an_embedding_keeps_ids_exact_in_bfloat16(given):
    # the values of an input that only an Embedding reads are ids: not rounded to bfloat16
    net = al.Network([L.SequenceInput(1, name="x"), L.Embedding(60000, 4, name="emb")])
    net = net.to(torch.bfloat16)
    ids = torch.tensor([[[50001], [7]]])
    x = ids if given == "int" else ids.float()
    row = net(x)[0, 0]
    torch.testing.assert_close(row, net.learnables["emb/weight"][50001], rtol=0, atol=0)


def test_an_input_read_by_other_layers_too_is_cast_as_before():
    net = al.Network([L.SequenceInput(1, name="x"), L.Embedding(10, 4, name="emb")])
    net.add(L.Dense(4, name="fc"))
    net.connect("x", "fc")
    net.add(L.Addition(2, name="add"))
    net.connect("emb", "add/in1")
    net.connect("fc", "add/in2")
    assert net(torch.tensor([[[1], [2]]])).shape == (1, 2, 4)
    assert net._input_ids == [False]          # the Dense needs floats: cast, as before


def test_token_input_takes_padded_batches_and_lists_of_id_sequences():
    torch.manual_seed(0)
    net = al.Network([L.TokenInput(name="ids"), L.Embedding(10, 4, name="emb"),
                      L.GlobalAvgPool1d(name="pool")])
    seqs = [torch.tensor([1, 2, 3]), torch.tensor([4]), torch.tensor([5, 6])]
    w = net.learnables["emb/weight"]
    want = torch.stack([w[s].mean(0) for s in seqs])
    torch.testing.assert_close(net(seqs), want)
    torch.testing.assert_close(net([s.tolist() for s in seqs]), want)
    padded = al.pad_sequences(seqs)                       # B×T×1 data, B×T mask
    torch.testing.assert_close(net(padded), want)
    torch.testing.assert_close(net(al.Padded(padded.data[..., 0], padded.mask)), want)


def test_token_ids_outside_the_vocabulary_name_the_layer_the_id_and_the_size():
    net = _token_net(vocab=10)
    with pytest.raises(al.DataError) as e:
        net(torch.tensor([[1, 12, 3]]))
    msg = str(e.value)
    assert "layer 'emb'" in msg and "token id 12" in msg and "vocabulary of 10" in msg
    with pytest.raises(al.DataError, match="token id -1 at observation 0, step 0"):
        net(torch.tensor([[-1, 2]]))


def test_token_input_refuses_fractional_ids_and_missing_batch_dimensions():
    net = _token_net(vocab=10)
    with pytest.raises(al.DataError) as e:
        net(torch.tensor([[1.0, 2.5]]))
    assert "input 'ids'" in str(e.value) and "2.5" in str(e.value) and "whole number" in str(e.value)
    with pytest.raises(al.DataError, match=r"unsqueeze\(0\)"):
        net(torch.tensor([1, 2]))
    with pytest.raises(al.DataError, match="token ids B×T"):
        net("some text")


def test_token_input_feeds_only_layers_that_take_token_sequences():
    net = al.Network([L.TokenInput(name="ids"), L.Dense(4, name="fc")])
    analysis = net.analyze()
    assert not analysis.ok
    assert any("layer 'fc' port 'in'" in i.message and "B×T" in i.message for i in analysis.issues)


@pytest.mark.parametrize("kw,parts", [
    (dict(length=0), ["TokenInput", "'length'", "0"]),
    (dict(length=2.5), ["TokenInput", "'length'", "2.5"]),
])
def test_token_input_refuses_bad_lengths(kw, parts):
    with pytest.raises(al.ArgumentError) as e:
        L.TokenInput(**kw)
    assert all(p in str(e.value) for p in parts)


def test_token_input_given_a_name_positionally_says_to_use_the_keyword():
    with pytest.raises(al.ArgumentError, match=r"TokenInput\(name='input_ids'\)"):
        L.TokenInput("input_ids")


def test_token_input_with_a_known_length_checks_it():
    net = al.Network([L.TokenInput(length=3, name="ids"), L.Embedding(10, 4)])
    assert str(net.layers["ids"].spec) == "B×3"
    with pytest.raises(al.DataError, match="expected B×3"):
        net(torch.tensor([[1, 2]]))


def _lm(vocab=12, d=8):
    return al.Network([L.TokenInput(name="ids"), L.Embedding(vocab, d, name="wte"),
                       L.SelfAttention(2, d, attention_mask="causal", name="att"),
                       L.Dense(vocab, name="head")])


def test_token_input_network_saves_and_loads(tmp_path):
    torch.manual_seed(0)
    net = _lm().eval()
    net.save(tmp_path / "lm.attnlab")
    back = al.load(tmp_path / "lm.attnlab").eval()
    assert type(back.layers["ids"]) is L.TokenInput
    ids = torch.randint(0, 12, (2, 5))
    torch.testing.assert_close(back(ids), net(ids))


def test_training_a_token_input_network_on_integer_ids():
    torch.manual_seed(0)
    net = _lm()
    X = torch.randint(0, 12, (32, 6))
    Y = (X + 1) % 12
    opts = al.TrainingOptions(max_epochs=40, batch_size=8, learning_rate=1e-2, plots=None,
                              verbose=False)
    info = al.train(net, X, Y, loss="crossentropy", options=opts)
    assert info is not None
    acc = (net.predict(X).argmax(-1) == Y).float().mean()
    assert acc > 0.6
    # lists of id sequences of different lengths (padded, masked) train too
    seqs = [torch.randint(0, 12, (n,)) for n in (3, 5, 4, 2)]
    al.train(net, seqs, [(s + 1) % 12 for s in seqs], loss="crossentropy",
             options=al.TrainingOptions(max_epochs=1, batch_size=2, plots=None, verbose=False))


# ------------------------------------------------------------------------------ RMSNorm

def _naive_rms(x, w, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w


@pytest.mark.parametrize("channels_in", ["sequence", "features"])
def test_rms_norm_equals_torch_and_a_naive_reference(channels_in):
    torch.manual_seed(0)
    inp = L.SequenceInput(6, name="x") if channels_in == "sequence" else L.FeatureInput(6, name="x")
    net = al.Network([inp, L.RMSNorm(eps=1e-5, name="norm")])
    assert list(net.learnables) == ["norm/weight"]
    assert torch.equal(net.learnables["norm/weight"], torch.ones(6))
    with torch.no_grad():
        net.learnables["norm/weight"].copy_(torch.randn(6))
    ref = nn.RMSNorm(6, eps=1e-5)
    ref.load_state_dict({"weight": net.learnables["norm/weight"].detach()})
    x = torch.randn(2, 5, 6) if channels_in == "sequence" else torch.randn(3, 6)
    _same_with_grads(net, ref, x, atol=1e-5)
    _same_with_grads(net, lambda v: _naive_rms(v, net.learnables["norm/weight"], 1e-5), x, atol=1e-5)
    # the learnable's gradient too
    net.zero_grad()
    net(x).pow(2).sum().backward()
    w = net.learnables["norm/weight"].detach().clone().requires_grad_(True)
    _naive_rms(x, w, 1e-5).pow(2).sum().backward()
    torch.testing.assert_close(net.learnables["norm/weight"].grad, w.grad, atol=1e-5, rtol=1e-5)


def test_rms_norm_default_eps_and_float32_computation_in_bfloat16():
    assert L.RMSNorm().eps == 1e-6
    torch.manual_seed(0)
    net = al.Network([L.SequenceInput(64, name="x"), L.RMSNorm(name="norm")]).to(torch.bfloat16)
    x = (torch.randn(2, 3, 64) * 50).to(torch.bfloat16)
    # Llama's reference: the statistics in float32, cast back, then the scale
    h = x.float()
    want = net.learnables["norm/weight"] * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
                                            ).to(torch.bfloat16)
    got = net(x)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_rms_norm_streams_and_survives_save_and_load(tmp_path):
    torch.manual_seed(0)
    net = al.Network([L.SequenceInput(6, name="x"), L.RMSNorm(eps=1e-5, name="norm"),
                      L.Dense(3, name="fc")]).eval()
    with torch.no_grad():
        net.learnables["norm/weight"].copy_(torch.randn(6))
    assert L.RMSNorm.time_local
    x = torch.randn(2, 4, 6)
    s = net.stream()
    torch.testing.assert_close(torch.cat([s.step(x[:, :3]), s.step(x[:, 3:])], 1), net(x))
    net.save(tmp_path / "n.attnlab")
    back = al.load(tmp_path / "n.attnlab")
    assert back.layers["norm"].eps == 1e-5
    torch.testing.assert_close(back(x), net(x))


@pytest.mark.parametrize("kw,parts", [
    (dict(eps=0), ["RMSNorm", "'eps'", "> 0"]),
    (dict(eps=float("inf")), ["RMSNorm", "'eps'", "inf"]),
])
def test_rms_norm_refuses_bad_arguments(kw, parts):
    with pytest.raises(al.ArgumentError) as e:
        L.RMSNorm(**kw)
    assert all(p in str(e.value) for p in parts)


def test_rms_norm_refuses_images_with_a_fix():
    net = al.Network([L.ImageInput((3, 4, 4), name="x"), L.RMSNorm(name="norm")])
    analysis = net.analyze()
    assert not analysis.ok
    assert any("layer 'norm' port 'in'" in i.message and "B×3×4×4" in i.message
               for i in analysis.issues)


# ------------------------------------------------------------------------------ GLU

def _swiglu_by_hand(x, gate, up, act):
    return act(x @ gate.T) * (x @ up.T)


@pytest.mark.parametrize("activation,act", [
    ("silu", F.silu), ("gelu", F.gelu), ("gelu_tanh", lambda v: F.gelu(v, approximate="tanh")),
    ("relu", F.relu)])
def test_glu_equals_a_gated_feed_forward_written_by_hand(activation, act):
    torch.manual_seed(0)
    net = al.Network([L.SequenceInput(6, name="x"), L.GLU(10, activation=activation, name="mlp")])
    assert list(net.learnables) == ["mlp/gate.weight", "mlp/up.weight"]
    gate, up = net.learnables["mlp/gate.weight"], net.learnables["mlp/up.weight"]
    assert gate.shape == (10, 6) and up.shape == (10, 6)
    x = torch.randn(2, 5, 6)
    _same_with_grads(net, lambda v: _swiglu_by_hand(v, gate, up, act), x, atol=1e-5)
    # the learnables' gradients
    net.zero_grad()
    net(x).pow(2).sum().backward()
    g2, u2 = gate.detach().clone().requires_grad_(True), up.detach().clone().requires_grad_(True)
    _swiglu_by_hand(x, g2, u2, act).pow(2).sum().backward()
    torch.testing.assert_close(gate.grad, g2.grad, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(up.grad, u2.grad, atol=1e-5, rtol=1e-5)


def test_glu_then_dense_is_llamas_mlp():
    # transformers' LlamaMLP: down_proj(act_fn(gate_proj(x)) * up_proj(x))
    torch.manual_seed(0)
    net = al.Network([L.SequenceInput(6, name="x"), L.GLU(12, name="mlp"),
                      L.Dense(6, bias=False, name="down")])
    gate, up, down = (nn.Linear(6, 12, bias=False), nn.Linear(6, 12, bias=False),
                      nn.Linear(12, 6, bias=False))
    with torch.no_grad():
        net.learnables["mlp/gate.weight"].copy_(gate.weight)
        net.learnables["mlp/up.weight"].copy_(up.weight)
        net.learnables["down/weight"].copy_(down.weight)
    x = torch.randn(2, 4, 6)
    torch.testing.assert_close(net(x), down(F.silu(gate(x)) * up(x)), atol=1e-6, rtol=1e-5)


def test_glu_with_biases_has_four_learnables():
    torch.manual_seed(0)
    net = al.Network([L.FeatureInput(6, name="x"), L.GLU(4, activation="gelu", bias=True,
                                                          name="mlp")])
    assert list(net.learnables) == ["mlp/gate.weight", "mlp/gate.bias", "mlp/up.weight",
                                    "mlp/up.bias"]
    p = net.learnables
    x = torch.randn(3, 6)
    want = F.gelu(x @ p["mlp/gate.weight"].T + p["mlp/gate.bias"]) * \
        (x @ p["mlp/up.weight"].T + p["mlp/up.bias"])
    torch.testing.assert_close(net(x), want)
    assert net.analyze().total_learnables == 4 * 6 * 2 + 4 * 2


def test_glu_streams_and_survives_save_and_load(tmp_path):
    torch.manual_seed(0)
    net = al.Network([L.SequenceInput(6, name="x"), L.GLU(8, activation="gelu-tanh", name="mlp"),
                      L.Dense(6, name="down")]).eval()
    assert L.GLU.time_local
    x = torch.randn(2, 5, 6)
    s = net.stream()
    torch.testing.assert_close(torch.cat([s.step(x[:, :2]), s.step(x[:, 2:])], 1), net(x))
    net.save(tmp_path / "n.attnlab")
    back = al.load(tmp_path / "n.attnlab")
    assert back.layers["mlp"].activation == "gelu-tanh" and back.layers["mlp"].bias is False
    torch.testing.assert_close(back(x), net(x))


def test_glu_accepts_the_spellings_of_checkpoint_configs():
    assert L.GLU(4, activation="swish").activation == "silu"
    for name in ("gelu_tanh", "gelu_new", "gelu_pytorch_tanh"):
        assert L.GLU(4, activation=name).activation == "gelu-tanh"


@pytest.mark.parametrize("kw,parts", [
    (dict(units=0), ["GLU", "'units'", "positive int"]),
    (dict(units=4, activation="sliu"), ["GLU", "'activation'", "'silu'", "'sliu'"]),
    (dict(units=4, bias=1), ["GLU", "'bias'", "True or False"]),
])
def test_glu_refuses_bad_arguments(kw, parts):
    with pytest.raises(al.ArgumentError) as e:
        L.GLU(**kw)
    assert all(p in str(e.value) for p in parts), str(e.value)


# ------------------------------------------------------------------------------ tied weights

def _tied_lm(vocab=20, d=8, bias=False):
    return al.Network([L.TokenInput(name="ids"), L.Embedding(vocab, d, name="wte"),
                       L.LayerNorm(name="ln"),
                       L.Dense(vocab, bias=bias, tied_to="wte", name="head")])


def test_a_dense_tied_to_an_embedding_holds_its_weight_parameter():
    torch.manual_seed(0)
    net = _tied_lm()
    w = net.learnables["wte/weight"]
    assert net.learnables["head/weight"] is w
    ids = torch.tensor([[1, 5, 7]])
    ln = net.layer_modules["ln"]
    want = ln(w[ids]) @ w.T                       # logits against the embedding rows
    torch.testing.assert_close(net(ids), want)


def test_a_tied_weight_is_counted_once_and_shown_as_shared():
    net = _tied_lm()
    # before the modules exist the declaration says so; after, the shared Parameter does
    for _ in ("declared", "built"):
        analysis = net.analyze()
        assert analysis.ok
        assert analysis.total_learnables == 20 * 8 + 2 * 8
        assert analysis.shared == {"head/weight": "wte/weight"}
        assert "(= wte/weight)" in str(analysis)
        assert analysis.total_learnables == sum(p.numel() for p in net.parameters())


def test_training_updates_the_one_tied_tensor():
    torch.manual_seed(0)
    net = _tied_lm()
    X = torch.randint(0, 20, (8, 5))
    al.train(net, X, X, loss="crossentropy",
             options=al.TrainingOptions(max_epochs=2, batch_size=4, plots=None, verbose=False))
    assert net.learnables["head/weight"] is net.learnables["wte/weight"]
    assert sum(1 for _ in net.parameters()) == 3          # wte (= head), ln weight and bias


def test_a_tied_weight_is_stored_once_and_tied_again_by_load(tmp_path):
    import json
    import zipfile
    torch.manual_seed(0)
    net = _tied_lm(bias=True)
    path = tmp_path / "lm.attnlab"
    net.save(path)
    with zipfile.ZipFile(path) as z:
        doc = json.loads(z.read("network.json"))
        from safetensors.torch import load as st_load
        stored = st_load(z.read("weights.safetensors"))
    assert list(doc["shared_weights"].values()) == ["layer_modules.wte.weight"]
    assert "layer_modules.head.weight" not in stored and "layer_modules.head.bias" in stored
    back = al.load(path)
    assert back.layers["head"].tied_to == "wte"
    assert back.learnables["head/weight"] is back.learnables["wte/weight"]
    ids = torch.randint(0, 20, (2, 4))
    torch.testing.assert_close(back(ids), net(ids))


def test_a_tie_survives_dtype_moves_and_state_dict_loading():
    torch.manual_seed(0)
    net = _tied_lm().to(torch.bfloat16)
    assert net.learnables["head/weight"] is net.learnables["wte/weight"]
    assert net.learnables["wte/weight"].dtype == torch.bfloat16
    other = _tied_lm().to(torch.bfloat16)
    other.load_state_dict(net.state_dict())
    assert other.learnables["head/weight"] is other.learnables["wte/weight"]
    torch.testing.assert_close(other.learnables["wte/weight"], net.learnables["wte/weight"])


def test_an_embedding_tied_to_an_embedding_shares_its_table():
    # T5: the decoder's embedding is the encoder's
    net = al.Network([L.TokenInput(name="enc"), L.Embedding(20, 8, name="shared"),
                      L.GlobalAvgPool1d(name="p1")])
    net.add([L.TokenInput(name="dec"), L.Embedding(20, 8, tied_to="shared", name="dec_emb"),
             L.GlobalAvgPool1d(name="p2")])
    assert net.learnables["dec_emb/weight"] is net.learnables["shared/weight"]
    assert net.analyze().total_learnables == 20 * 8
    assert repr(net.layers["dec_emb"]) == "Embedding(vocab=20, dim=8, tied_to='shared', name='dec_emb')"
    assert "tied_to" not in net.layers["shared"].config()


def test_a_rebuilt_owner_is_tied_again():
    net = _tied_lm()
    net.replace("wte", L.Embedding(20, 8, name="wte"))
    net.initialize()
    assert net.learnables["head/weight"] is net.learnables["wte/weight"]


@pytest.mark.parametrize("make,parts,cls", [
    (lambda: al.Network([L.TokenInput(name="ids"), L.Embedding(20, 8, name="wte"),
                         L.Dense(19, tied_to="wte", name="head")]),
     ["layer 'head' (Dense) argument 'tied_to'", "19×8", "20×8"], al.SizeError),
    (lambda: al.Network([L.TokenInput(name="ids"), L.Embedding(20, 8, name="wte"),
                         L.Dense(20, tied_to="wtf", name="head")]),
     ["argument 'tied_to'", "no layer 'wtf'", "Did you mean 'wte'"], al.NetworkError),
    (lambda: al.Network([L.TokenInput(name="ids"), L.Embedding(20, 8, name="wte"),
                         L.LayerNorm(name="ln"), L.Dense(20, tied_to="ln", name="head")]),
     ["argument 'tied_to'", "8", "20×8"], al.SizeError),
    (lambda: al.Network([L.TokenInput(name="ids"), L.Embedding(20, 8, tied_to="head", name="wte"),
                         L.Dense(20, tied_to="wte", name="head")]),
     ["cycle", "wte → head → wte"], al.NetworkError),
])
def test_a_tie_that_cannot_be_made_is_an_analysis_error(make, parts, cls):
    net = make()
    analysis = net.analyze()
    assert not analysis.ok
    msg = " ".join(i.message for i in analysis.issues)
    assert all(p in msg for p in parts), msg
    with pytest.raises(al.AttnlabError) as e:
        net(torch.tensor([[1, 2]]))
    assert all(p in str(e.value) for p in parts)


@pytest.mark.parametrize("value", [3, "a/b", ""])
def test_tied_to_must_be_a_layer_name(value):
    with pytest.raises(al.ArgumentError) as e:
        L.Dense(4, tied_to=value)
    assert "Dense" in str(e.value) and "'tied_to'" in str(e.value)


# ------------------------------------------------------------------ against transformers' own

def test_the_blocks_equal_their_transformers_counterparts():
    pytest.importorskip("transformers")
    from transformers.activations import NewGELUActivation
    from transformers.models.llama.modeling_llama import LlamaConfig, LlamaMLP, LlamaRMSNorm
    from transformers.models.t5.modeling_t5 import T5LayerNorm
    torch.manual_seed(0)
    x = torch.randn(2, 5, 8) * 3
    # GPT-2's gelu_new
    torch.testing.assert_close(_net(L.GELU(approximate="tanh"), 8)(x), NewGELUActivation()(x))
    # Llama's and T5's RMS norms
    for ref in (LlamaRMSNorm(8, eps=1e-6), T5LayerNorm(8, eps=1e-6)):
        with torch.no_grad():
            ref.weight.copy_(torch.randn(8))
        net = _net(L.RMSNorm(1e-6, name="norm"), 8)
        net.layer_modules["norm"].load_state_dict(ref.state_dict())
        torch.testing.assert_close(net(x), ref(x), atol=1e-5, rtol=1e-5)
    # Llama's MLP: GLU (gate_proj, up_proj) then Dense (down_proj)
    mlp = LlamaMLP(LlamaConfig(hidden_size=8, intermediate_size=12, hidden_act="silu",
                               num_attention_heads=2, num_key_value_heads=2))
    net = al.Network([L.SequenceInput(8, name="x"), L.GLU(12, name="mlp"),
                      L.Dense(8, bias=False, name="down")])
    with torch.no_grad():
        net.learnables["mlp/gate.weight"].copy_(mlp.gate_proj.weight)
        net.learnables["mlp/up.weight"].copy_(mlp.up_proj.weight)
        net.learnables["down/weight"].copy_(mlp.down_proj.weight)
    torch.testing.assert_close(net(x), mlp(x), atol=1e-5, rtol=1e-5)


def test_a_token_input_network_exports_to_onnx_with_int64_ids(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    import numpy as np
    torch.manual_seed(0)
    # the Llama-style blocks export too: RMSNorm, GLU, SiLU, a tied head
    net = al.Network([L.TokenInput(name="ids"), L.Embedding(20, 8, name="wte"),
                      L.RMSNorm(name="norm"), L.GLU(16, name="mlp"), L.Dense(8, name="down"),
                      L.SiLU(name="act"), L.LayerNorm(bias=False, name="ln"),
                      L.Dense(20, bias=False, tied_to="wte", name="head")]).eval()
    ids = torch.randint(0, 20, (2, 5))
    net.export_onnx(tmp_path / "lm.onnx", ids)
    session = ort.InferenceSession(str(tmp_path / "lm.onnx"))
    first = session.get_inputs()[0]
    assert first.name == "ids" and first.type == "tensor(int64)"
    for t in (5, 3):
        x = torch.randint(0, 20, (2, t))
        feeds = {"ids": x.numpy()}
        feeds.update({i.name: np.ones((2, t), dtype=bool) for i in session.get_inputs()[1:]})
        got = session.run(None, feeds)[0]
        np.testing.assert_allclose(got, net(x).detach().numpy(), atol=1e-4, rtol=1e-4)
