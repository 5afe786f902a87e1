"""Persistence and PyTorch habits: tied weights through save/load, state dicts and ONNX; Module
layers refused at save when unregistered; lazy networks inside parent modules; clear errors for
the PyTorch calls that cannot work (a device torch lacks, TorchScript, sizes that do not fit)."""
import io
import json
import zipfile

import pytest
import torch
from torch import nn

import attnlab as al
from attnlab import layers as L
from attnlab.io import _MODULE_FACTORIES


def _tied():
    """Token ids → Embedding(10, 4) → a Dense head whose weight is the embedding's."""
    torch.manual_seed(0)
    net = al.Network([L.SequenceInput(1, name="ids"), L.Embedding(10, 4, name="emb"),
                      L.Dense(10, bias=False, name="head")])
    net.initialize()
    net.layer_modules["head"].weight = net.layer_modules["emb"].weight
    return net


def _ids(b=2, t=5):
    return torch.randint(0, 10, (b, t, 1)).float()


def _member(path, name):
    with zipfile.ZipFile(path) as z:
        return z.read(name)


def _safetensors_keys(path):
    from safetensors.torch import load
    return sorted(load(_member(path, "weights.safetensors")))


@pytest.fixture
def registered():
    """Module factories registered for one test, the registry restored after it."""
    before = dict(_MODULE_FACTORIES)
    yield al.register_module
    _MODULE_FACTORIES.clear()
    _MODULE_FACTORIES.update(before)


# ------------------------------------------------------------------------ tied weights ---

def test_tied_weights_stay_one_parameter_through_save_and_load(tmp_path):
    net = _tied()
    x = _ids()
    path = tmp_path / "tied.attnlab"
    net.save(path)
    assert _safetensors_keys(path) == ["layer_modules.emb.weight"]          # stored once
    doc = json.loads(_member(path, "network.json"))
    assert doc["shared_weights"] == {"layer_modules.head.weight": "layer_modules.emb.weight"}
    twin = al.load(path)
    emb, head = twin.layer_modules["emb"], twin.layer_modules["head"]
    assert head.weight is emb.weight
    assert torch.equal(twin(x), net(x))
    opt = torch.optim.SGD(twin.parameters(), lr=0.5)
    twin(x).square().mean().backward()
    opt.step()
    assert head.weight is emb.weight and not torch.equal(emb.weight, net.learnables["emb/weight"])
    twin.save(tmp_path / "again.attnlab")                                   # and stays so
    again = al.load(tmp_path / "again.attnlab")
    assert again.learnables["head/weight"] is again.learnables["emb/weight"]
    assert torch.equal(again(x), twin(x))


def test_a_file_without_ties_keeps_format_version_1(tmp_path):
    net = al.Network([L.FeatureInput(3), L.Dense(2)]).initialize()
    net.save(tmp_path / "plain.attnlab")
    doc = json.loads(_member(tmp_path / "plain.attnlab", "network.json"))
    assert doc["version"] == 1 and "shared_weights" not in doc
    net = _tied()
    net.save(tmp_path / "tied.attnlab")
    assert json.loads(_member(tmp_path / "tied.attnlab", "network.json"))["version"] == 2


def test_analyze_counts_a_shared_learnable_once():
    net = _tied()
    analysis = net.analyze()
    assert analysis.total_learnables == 40                 # 10×4 once, not twice
    assert analysis.shared == {"head/weight": "emb/weight"}
    assert "(= emb/weight)" in analysis.table()
    assert sum(p.numel() for p in net.parameters()) == 40


def test_a_module_shared_by_two_layers_stays_shared(tmp_path, registered):
    lin = nn.Linear(4, 4)
    net = al.Network([L.SequenceInput(4, name="x"), L.Module(lin, name="a"),
                      L.Module(lin, name="b")]).initialize()
    assert net.analyze().total_learnables == 20
    registered("Linear", lambda: nn.Linear(4, 4))
    net.save(tmp_path / "shared.attnlab")
    assert _safetensors_keys(tmp_path / "shared.attnlab") == ["layer_modules.a.bias",
                                                             "layer_modules.a.weight"]
    doc = json.loads(_member(tmp_path / "shared.attnlab", "network.json"))
    assert [e.get("same_module_as") for e in doc["network"]["layers"]] == [None, None, "a"]
    twin = al.load(tmp_path / "shared.attnlab")
    a, b = twin.layer_modules["a"], twin.layer_modules["b"]
    assert a is b and twin.layers["a"].module is twin.layers["b"].module    # one module again
    assert a.weight is b.weight and a.bias is b.bias
    x = torch.randn(2, 3, 4)
    assert torch.equal(twin(x), net(x))
    assert twin.analyze().total_learnables == 20


@pytest.mark.parametrize("other,words", [("nope", "'nope' is not a Module layer before this one"),
                                         ("x", "'x' is not a Module layer before this one")])
def test_a_forged_same_module_entry_is_refused(tmp_path, registered, other, words):
    lin = nn.Linear(4, 4)
    net = al.Network([L.SequenceInput(4, name="x"), L.Module(lin, name="a"),
                      L.Module(lin, name="b")]).initialize()
    registered("Linear", lambda: nn.Linear(4, 4))
    net.save(tmp_path / "shared.attnlab")
    bad = _rewrite(tmp_path / "shared.attnlab", tmp_path / "bad.attnlab",
                   lambda d: d["network"]["layers"][2].__setitem__("same_module_as", other))
    with pytest.raises(al.NetworkError, match="same_module_as") as e:
        al.load(bad)
    assert words in str(e.value)


def test_state_dict_lists_both_names_and_loading_keeps_the_tie():
    net = _tied()
    with torch.no_grad():
        net.layer_modules["emb"].weight.add_(1.0)
    state = net.state_dict()
    assert {"layer_modules.emb.weight", "layer_modules.head.weight"} <= state.keys()
    other = _tied()
    assert other.load_state_dict(state).missing_keys == []
    emb, head = other.layer_modules["emb"], other.layer_modules["head"]
    assert head.weight is emb.weight and torch.equal(emb.weight, net.layer_modules["emb"].weight)
    x = _ids()
    assert torch.equal(other(x), net(x))


def _rewrite(path, out, edit):
    """A copy of the file at `path` whose network.json went through `edit(doc)`."""
    doc = json.loads(_member(path, "network.json"))
    edit(doc)
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("network.json", json.dumps(doc))
        z.writestr("weights.safetensors", _member(path, "weights.safetensors"))
    return out


@pytest.mark.parametrize("table,words", [
    ({"layer_modules.head.weight": "layer_modules.nope.weight"}, "which the weights do not hold"),
    ({"layer_modules.nope.weight": "layer_modules.emb.weight"}, "names no tensor of the network"),
    ({"layer_modules.head.weight": "layer_modules.fc.bias"}, "the shapes differ"),
    ({"layer_modules.fc.weight": "layer_modules.emb.weight"}, "also stored in the weights"),
    (["layer_modules.head.weight"], "expected a JSON object"),
    ({"layer_modules.head.weight": 3}, "expected a string"),
])
def test_a_hostile_alias_table_is_refused_by_name(tmp_path, table, words):
    torch.manual_seed(0)
    net = al.Network([L.SequenceInput(1, name="ids"), L.Embedding(10, 4, name="emb"),
                      L.Dense(10, bias=False, name="head"), L.Dense(4, name="fc")]).initialize()
    net.layer_modules["head"].weight = net.layer_modules["emb"].weight
    net.save(tmp_path / "tied.attnlab")
    bad = _rewrite(tmp_path / "tied.attnlab", tmp_path / "bad.attnlab",
                   lambda d: d.__setitem__("shared_weights", table))
    with pytest.raises(al.NetworkError, match="shared_weights") as e:
        al.load(bad)
    assert words in str(e.value)


def test_an_alias_may_not_turn_a_buffer_into_a_parameter(tmp_path):
    from safetensors.torch import load, save
    net = al.Network([L.SequenceInput(3), L.Dense(4, name="fc"), L.BatchNorm(name="bn")])
    net.initialize().save(tmp_path / "bn.attnlab")
    weights = load(_member(tmp_path / "bn.attnlab", "weights.safetensors"))
    del weights["layer_modules.bn.running_mean"]              # a buffer, "tied" to a bias
    doc = json.loads(_member(tmp_path / "bn.attnlab", "network.json"))
    doc["version"] = 2
    doc["shared_weights"] = {"layer_modules.bn.running_mean": "layer_modules.fc.bias"}
    with zipfile.ZipFile(tmp_path / "bad.attnlab", "w") as z:
        z.writestr("network.json", json.dumps(doc))
        z.writestr("weights.safetensors", save(weights))
    with pytest.raises(al.NetworkError, match=r"shared_weights.*bn/running_mean.*fc/bias.*"
                                              r"another kind of tensor"):
        al.load(tmp_path / "bad.attnlab")


def test_an_alias_table_in_a_version_1_file_is_refused(tmp_path):
    _tied().save(tmp_path / "tied.attnlab")
    bad = _rewrite(tmp_path / "tied.attnlab", tmp_path / "v1.attnlab",
                   lambda d: d.__setitem__("version", 1))
    with pytest.raises(al.NetworkError, match="unknown entry 'shared_weights'"):
        al.load(bad)


def test_tied_weights_export_to_onnx_once_and_run_in_onnxruntime(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    onnx = pytest.importorskip("onnx")
    net = _tied().eval()
    result = net.export_onnx(tmp_path / "tied.onnx")
    model = onnx.load(str(tmp_path / "tied.onnx"))
    sizes = sorted(tuple(i.dims) for i in model.graph.initializer if len(i.dims) == 2)
    assert sizes == [(10, 4)]                               # the tied matrix, stored once
    x = torch.tensor([[[1.0], [7.0], [3.0]], [[9.0], [0.0], [2.0]]])
    sess = ort.InferenceSession(str(tmp_path / "tied.onnx"), providers=["CPUExecutionProvider"])
    (got,) = sess.run(None, result.feeds(x))
    torch.testing.assert_close(torch.from_numpy(got), net(x).detach(), atol=1e-5, rtol=1e-5)


# ----------------------------------------------------------------------- Module layers ---

class Gain(nn.Module):
    def __init__(self):
        super().__init__()
        self.g = nn.Parameter(torch.randn(3))

    def forward(self, x):
        return x * self.g


def test_saving_an_unregistered_module_class_says_how_to_register_it(tmp_path, registered):
    net = al.Network([L.SequenceInput(3), L.Module(Gain(), name="gain")]).initialize()
    path = tmp_path / "gain.attnlab"
    with pytest.raises(al.NetworkError) as e:
        net.save(path)
    text = str(e.value)
    assert "layer 'gain'" in text and "class 'Gain'" in text
    assert "al.register_module(Gain)" in text and "lambda: Gain(...)" in text
    assert not path.exists()
    registered(Gain)
    net.save(path)
    x = torch.randn(2, 4, 3)
    assert torch.equal(al.load(path)(x), net(x))


# ------------------------------------------------------- lazy networks in parent modules ---

class Parent(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.net = al.Network(layers)

    def forward(self, x):
        return self.net(x)


def _mlp():
    return [L.Dense(8, name="fc"), L.ReLU(), L.Dense(2, name="out")]


def test_a_parent_module_loads_a_lazy_network_from_a_torch_file():
    torch.manual_seed(0)
    trained = Parent(_mlp())
    trained(torch.randn(1, 5, 3))
    buf = io.BytesIO()
    torch.save(trained.state_dict(), buf)
    fresh = Parent(_mlp())
    buf.seek(0)
    result = fresh.load_state_dict(torch.load(buf))
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert [n for n, _ in fresh.named_parameters()] == [n for n, _ in trained.named_parameters()]
    opt = torch.optim.Adam(fresh.parameters())           # the optimizer gets the real parameters
    assert len(opt.param_groups[0]["params"]) == 4
    x = torch.randn(2, 5, 3)
    assert torch.equal(fresh(x), trained(x))
    other = Parent(_mlp())
    other.load_state_dict(trained.state_dict())
    f = torch.randn(4, 3)                                 # Dense takes B×C as well as B×T×C
    assert torch.allclose(other(f), trained(f.unsqueeze(1)).squeeze(1))


def test_a_lazy_network_with_a_nested_block_loads_and_takes_either_layout():
    def layers():
        return [L.Dense(4, name="fc"), al.Serial(L.Dense(3), L.ReLU(), name="block"),
                L.Dense(2, name="out")]
    trained = Parent(layers())
    trained(torch.randn(1, 5, 3))
    for x in (torch.randn(2, 5, 3), torch.randn(2, 3)):
        fresh = Parent(layers())
        fresh.load_state_dict(trained.state_dict())
        want = trained(x) if x.dim() == 3 else trained(x.unsqueeze(1)).squeeze(1)
        torch.testing.assert_close(fresh(x), want)
        assert fresh.net.learnables["block/fc/weight"].shape == (3, 4)


def test_a_lazy_network_loaded_from_a_state_dict_refuses_data_of_other_sizes():
    trained = Parent(_mlp())
    trained(torch.randn(1, 5, 3))
    fresh = Parent(_mlp())
    fresh.load_state_dict(trained.state_dict())
    before = fresh.net.learnables["fc/weight"]
    with pytest.raises(al.NetworkError, match=r"layer 'fc'.*loaded from a state dict.*B×T×4"):
        fresh(torch.randn(2, 5, 4))
    assert fresh.net.learnables["fc/weight"] is before       # the loaded weights stay


def test_a_lazy_sequence_network_is_built_from_the_state_dict_shapes():
    trained = Parent([L.LSTM(4, name="lstm"), L.Dense(2, name="out")])
    trained(torch.randn(1, 5, 3))
    fresh = Parent([L.LSTM(4, name="lstm"), L.Dense(2, name="out")])
    fresh.load_state_dict(trained.state_dict())
    assert fresh.net.initialized                        # only B×T×3 fits an LSTM of these weights
    x = torch.randn(2, 6, 3)
    assert torch.equal(fresh(x), trained(x))


def test_a_state_dict_no_input_size_fits_says_to_initialize_first():
    fresh = Parent([L.LSTM(4, name="lstm")])
    with pytest.raises(al.NetworkError, match=r"net.initialize\(example_inputs\) first"):
        fresh.load_state_dict({"net.layer_modules.lstm.weight_ih_l0": torch.zeros(5, 3)})


# ---------------------------------------------------------- PyTorch calls that cannot work ---

@pytest.mark.skipif(torch.cuda.is_available(), reason="this torch build has CUDA")
def test_moving_to_cuda_on_a_cpu_build_names_the_device_and_the_choices():
    net = al.Network([L.FeatureInput(3), L.Dense(2, name="fc")])
    for move in (lambda: net.to("cuda"), lambda: net.cuda(), lambda: net.to(torch.device("cuda", 1))):
        with pytest.raises(al.ArgumentError) as e:
            move()
        text = str(e.value)
        assert "device 'cuda" in text and "has no CUDA" in text and "net.to('cpu')" in text
        assert "'auto', 'cpu', 'cuda', 'cuda:N', 'mps'" in text
    assert net.learnables["fc/weight"].device.type == "cpu"
    assert net.to("cpu") is net and net(torch.randn(2, 3)).shape == (2, 2)


def test_torchscript_is_refused_with_what_to_use_instead():
    net = al.Network([L.FeatureInput(3), L.Dense(2)])
    with pytest.raises(al.NetworkError) as e:
        torch.jit.script(net)
    text = str(e.value)
    assert "TorchScript" in text and "torch.compile(net)" in text and "export_onnx" in text
    with pytest.raises(al.NetworkError, match="TorchScript"):
        torch.jit.script(Parent([L.FeatureInput(3), L.Dense(2)]))     # inside a parent too


def test_load_state_dict_of_other_sizes_names_the_layer_learnable_and_shapes():
    net = al.Network([L.FeatureInput(3), L.Dense(2, name="fc")]).initialize()
    before = net.learnables["fc/weight"].clone()
    other = al.Network([L.FeatureInput(4), L.Dense(2, name="fc")]).initialize()
    with pytest.raises(al.SizeError) as e:
        net.load_state_dict(other.state_dict())
    text = str(e.value)
    assert "layer 'fc' learnable 'weight'" in text
    assert "expected 2×3 (the network's), received 2×4 (the state dict's)" in text
    assert "strict=False" in text and e.value.layer == "fc"
    assert torch.equal(net.learnables["fc/weight"], before)


def test_an_optimizer_over_a_lazy_network_is_warned_about():
    net = al.Network([L.Dense(3, name="fc")])
    with pytest.warns(UserWarning, match=r"no input layers.*net.initialize\(example_inputs\)"):
        assert list(net.parameters()) == []            # the parameters known so far: none
    assert dict(net.named_parameters()) == {} and net.state_dict() == {}
    net.to(torch.float64).train()
    net.initialize(torch.zeros(1, 4))
    opt = torch.optim.Adam(net.parameters())
    assert [tuple(p.shape) for p in opt.param_groups[0]["params"]] == [(3, 4), (3,)]


@pytest.mark.parametrize("opset", [5, 13, 99, True, "17", 17.0])
def test_export_onnx_validates_the_opset(tmp_path, opset):
    pytest.importorskip("onnx")
    net = al.Network([L.FeatureInput(3), L.Dense(2)])
    with pytest.raises(al.ArgumentError) as e:
        net.export_onnx(tmp_path / "net.onnx", opset=opset)
    text = str(e.value)
    assert "'opset'" in text and "from 14 to" in text and repr(opset) in text
    assert not (tmp_path / "net.onnx").exists()
