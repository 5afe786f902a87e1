"""Save and load: one zip file (graph JSON + safetensors), no pickle, bit-identical outputs."""
import copy
import io
import json
import os
import pickle
import zipfile

import numpy as np
import pytest
import torch
from torch import nn

import attnlab as al
from attnlab import layers as L
from attnlab.cli.demos.seed1 import answer_network, question_network
from attnlab.layers.base import LAYER_TYPES, Layer
from attnlab.core.spec import Spec

from helpers import ID_LAYERS, data_for, single_layer_net
from layers.test_layer_contract import ALL   # the shared table of layer cases


def _inputs(net, in_specs, type_name, padded):
    """Data for every input port; sequences as a padded batch with one shorter sequence."""
    xs = {}
    for port, spec in in_specs.items():
        x = data_for(spec, ints=10 if type_name in ID_LAYERS else None)
        if padded and spec.is_sequence:
            mask = torch.ones(x.shape[:2], dtype=torch.bool)
            mask[-1, 3:] = False
            x = al.Padded(x, mask)
        xs[f"x_{port}"] = x
    return xs


def _outputs(net, xs):
    with torch.no_grad():
        out = net(xs)
    return out if isinstance(out, dict) else {"": out}


def _modules_of(net):
    """Factories for the Module layers of `net`: fresh modules with other weights."""
    out = {}
    for layer in net.layers:
        if isinstance(layer, L.Module):
            def make(m=layer.module):
                fresh = copy.deepcopy(m)
                for p in fresh.parameters():
                    nn.init.normal_(p)
                return fresh
            out[type(layer.module).__name__] = make
    return out


@pytest.mark.parametrize("type_name,i,case", ALL, ids=[f"{t}-{i}" for t, i, _ in ALL])
def test_round_trip_is_bit_identical_for_every_layer_type(tmp_path, type_name, i, case):
    factory, in_specs, _ = case
    net = single_layer_net(factory(), in_specs)
    net.initialize()
    with torch.no_grad():
        for p in net.parameters():
            p.add_(torch.randn_like(p) * 0.1)              # not the initial values
    net.train()
    net(_inputs(net, in_specs, type_name, padded=False))   # moves BatchNorm's running stats
    net.eval()
    path = tmp_path / "net.attnlab"
    from attnlab.io import _MODULE_FACTORIES
    factories = _modules_of(net)
    before = dict(_MODULE_FACTORIES)
    _MODULE_FACTORIES.update(factories)                # saving needs Module classes registered
    try:
        net.save(path)
    finally:
        _MODULE_FACTORIES.clear()
        _MODULE_FACTORIES.update(before)
    twin = al.load(path, modules=factories).eval()
    assert [l.type_name for l in twin.layers] == [l.type_name for l in net.layers]
    assert [repr(l) for l in twin.layers] == [repr(l) for l in net.layers]
    assert twin.connections == net.connections
    for padded in (False, True):
        xs = _inputs(net, in_specs, type_name, padded)
        a, b = _outputs(net, xs), _outputs(twin, xs)
        assert a.keys() == b.keys()
        for k in a:
            assert torch.equal(a[k], b[k]), (k, padded)
    mine, theirs = net.state_dict(), twin.state_dict()
    assert mine.keys() == theirs.keys()
    for k in mine:
        assert mine[k].dtype == theirs[k].dtype and torch.equal(mine[k], theirs[k]), k
    _MODULE_FACTORIES.update(factories)
    try:
        twin.save(tmp_path / "again.attnlab")              # saving is stable
    finally:
        _MODULE_FACTORIES.clear()
        _MODULE_FACTORIES.update(before)
    assert _graph(tmp_path / "again.attnlab")["network"] == _graph(path)["network"]


def _graph(path):
    with zipfile.ZipFile(path) as z:
        return json.loads(z.read("network.json"))


def test_seed1_answer_round_trip_keeps_metadata_and_outputs(tmp_path):
    net = answer_network(channels=16, heads=2)
    net.metadata["class_labels"] = np.array(["up", "down"])
    net.metadata["note"] = {"epochs": np.int64(3), "lr": 1e-3}
    dec = [torch.randn(n, 1) for n in (7, 3, 5)]
    enc = [torch.randn(n, 1) for n in (4, 11, 9)]
    net.eval()
    y = net({"decoder-input": dec, "encoder-input": enc})
    path = tmp_path / "seed1.attnlab"
    net.save(path)
    state = torch.random.get_rng_state()
    twin = al.load(path).eval()
    assert torch.equal(torch.random.get_rng_state(), state)        # loading leaves the RNG alone
    assert twin.metadata == {"class_labels": ["up", "down"], "note": {"epochs": 3, "lr": 1e-3}}
    assert torch.equal(twin({"decoder-input": dec, "encoder-input": enc}), y)
    assert twin.input_names == net.input_names and twin.output_names == net.output_names
    with zipfile.ZipFile(path) as z:
        assert sorted(z.namelist()) == ["network.json", "weights.safetensors"]
        doc = json.loads(z.read("network.json"))
    assert doc["format"] == "attnlab.network" and doc["version"] == 1
    assert {"source": "fc-key/out", "destination": "cross-attention/key"} in doc["network"]["connections"]


def test_nested_networks_and_networks_without_input_layers(tmp_path):
    inner = al.Network([L.Dense(6, name="fc"), L.GELU(), L.LayerNorm()], name="block")
    inner.metadata["role"] = "mlp"
    deeper = al.Network([L.Dense(6, name="fc2"), inner], name="outer-block")
    net = al.Network([L.Dense(8, name="embed"), deeper, L.LSTM(5, name="lstm"),
                      L.BatchNorm(name="bn"), L.Dense(2, name="head")])   # no input layers
    x = torch.randn(3, 7, 4)
    net.train()
    net(x)
    net.eval()
    y = net(x)
    path = tmp_path / "nested.attnlab"
    net.save(path)
    twin = al.load(path).eval()
    assert twin.initialized
    assert torch.equal(twin(x), y)
    assert twin.layers["outer-block"].layers["block"].metadata == {"role": "mlp"}
    assert list(twin.learnables) == list(net.learnables)
    assert "outer-block/block/fc/weight" in twin.learnables
    assert torch.equal(twin.layer_modules["bn"].running_var, net.layer_modules["bn"].running_var)


def test_float64_network_stays_float64(tmp_path):
    net = al.Network([L.SequenceInput(3), L.LSTM(4), L.Dense(2)]).initialize().double().eval()
    x = torch.randn(2, 5, 3, dtype=torch.float64)
    path = tmp_path / "f64.attnlab"
    net.save(path)
    twin = al.load(path).eval()
    assert all(p.dtype == torch.float64 for p in twin.parameters())
    assert torch.equal(twin(x), net(x))


def test_graph_only_files_for_networks_without_weights(tmp_path):
    q = question_network()                           # has a cycle: cannot be initialised
    path = tmp_path / "question.attnlab"
    q.save(path)
    with zipfile.ZipFile(path) as z:
        assert z.namelist() == ["network.json"]
    twin = al.load(path)
    assert not twin.initialized
    assert twin.analyze().cycles == q.analyze().cycles
    assert twin.connections == q.connections

    fresh = answer_network(channels=8, heads=2)      # never run, but its sizes are known:
    fresh.save(path)                                 # it has its weights, and saves them
    twin = al.load(path)
    assert {k: v.shape for k, v in twin.state_dict().items()} == \
        {k: v.shape for k, v in fresh.state_dict().items()}
    assert all(torch.equal(v, fresh.state_dict()[k]) for k, v in twin.state_dict().items())


def test_edited_after_initialisation_saves_what_the_next_call_would_run(tmp_path):
    net = al.Network([L.SequenceInput(3, name="x"), L.Dense(4, name="a"), L.Dense(2, name="b")])
    x = torch.randn(2, 5, 3)
    net(x)
    net.replace("b", L.Dense(5, name="b"))
    path = tmp_path / "edited.attnlab"
    net.save(path)
    assert torch.equal(al.load(path)(x), net(x))

    net.add(L.Dense(3, name="dangling-input-free"))   # a second output is fine
    net.connect("a", "dangling-input-free")
    net.save(path)
    net.disconnect("a", "dangling-input-free")
    net.remove("dangling-input-free")
    net.add(L.Attention(2, name="att"))
    net.connect("a", "att/query")                     # key and value unconnected: invalid
    with pytest.raises(al.NetworkError, match="edited after initialisation"):
        net.save(path)


def test_file_objects(tmp_path):
    net = al.Network([L.FeatureInput(3), L.Dense(2)]).initialize().eval()
    buf = io.BytesIO()
    net.save(buf)
    buf.seek(0)
    x = torch.randn(4, 3)
    assert torch.equal(al.load(buf)(x), net(x))


# --------------------------------------------------------------------------- Module layers ---

class Scale(nn.Module):
    def __init__(self, n=3):
        super().__init__()
        self.gain = nn.Parameter(torch.randn(n))

    def forward(self, x):
        return x * self.gain


def test_module_layers_need_a_registered_factory(tmp_path):
    from attnlab.io import _MODULE_FACTORIES
    net = al.Network([L.SequenceInput(3), L.Module(Scale(), name="scale"), L.Dense(2)]).initialize()
    path = tmp_path / "module.attnlab"
    with pytest.raises(al.NetworkError, match=r"layer 'scale'.*class 'Scale'.*al.register_module\(Scale\)"):
        net.save(path)                                  # refused at save, not only at load
    assert not path.exists()
    al.register_module(Scale)
    net.save(path)
    _MODULE_FACTORIES.pop("Scale")
    with pytest.raises(al.NetworkError, match=r"al.register_module\('Scale'"):
        al.load(path)
    x = torch.randn(2, 4, 3)
    assert torch.equal(al.load(path, modules={"Scale": Scale})(x), net(x))
    try:
        al.register_module(Scale)
        twin = al.load(path)
        assert torch.equal(twin(x), net(x))
        assert twin.layers["scale"].module is not net.layers["scale"].module
    finally:
        from attnlab.io import _MODULE_FACTORIES
        _MODULE_FACTORIES.pop("Scale", None)
    with pytest.raises(al.NetworkError, match="wrapped Scale failed"):   # a factory of another size
        al.load(path, modules={"Scale": lambda: Scale(5)})


def test_module_output_specs_survive(tmp_path):
    from attnlab.io import _MODULE_FACTORIES
    layer = L.Module(Scale(), output_specs=[Spec.sequence(3)], name="scale")
    net = al.Network([L.SequenceInput(3), layer]).initialize()
    al.register_module(Scale)
    try:
        net.save(tmp_path / "m.attnlab")
    finally:
        _MODULE_FACTORIES.pop("Scale", None)
    twin = al.load(tmp_path / "m.attnlab", modules={"Scale": Scale})
    assert twin.layers["scale"].output_specs == [Spec.sequence(3)]


# ------------------------------------------------------------------------------- refusals ---

def test_pickle_files_are_refused_without_being_opened(tmp_path):
    flag = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (open, (str(flag), "w"))

    path = tmp_path / "evil.attnlab"
    path.write_bytes(pickle.dumps(Evil()))
    with pytest.raises(al.NetworkError, match="pickle"):
        al.load(path)
    assert not flag.exists()

    net = al.Network([L.FeatureInput(3), L.Dense(2)]).initialize()
    path.write_bytes(pickle.dumps(net))
    with pytest.raises(al.NetworkError, match="never unpickles"):
        al.load(path)
    torch.save(net.state_dict(), path)                # a zip with data.pkl inside
    with pytest.raises(al.NetworkError, match="torch.save"):
        al.load(path)


def test_garbage_and_damaged_files_are_refused(tmp_path):
    net = al.Network([L.FeatureInput(3), L.Dense(2)]).initialize()
    good = tmp_path / "good.attnlab"
    net.save(good)
    raw = good.read_bytes()
    bad = tmp_path / "bad.attnlab"
    for content, match in [(b"", "empty"),
                           (os.urandom(300), "not an attnlab network file"),
                           (raw[: len(raw) // 2], "not an attnlab network file|damaged")]:
        bad.write_bytes(content)
        with pytest.raises(al.NetworkError, match=match):
            al.load(bad)

    def rewrite(graph=None, weights=None, drop_weights=False):
        with zipfile.ZipFile(good) as z:
            g, w = z.read("network.json"), z.read("weights.safetensors")
        with zipfile.ZipFile(bad, "w") as z:
            z.writestr("network.json", g if graph is None else graph)
            if not drop_weights:
                z.writestr("weights.safetensors", w if weights is None else weights)

    rewrite(graph=b"{not json")
    with pytest.raises(al.NetworkError, match="not valid JSON"):
        al.load(bad)
    rewrite(weights=pickle.dumps(net.state_dict()))
    with pytest.raises(al.NetworkError, match="not a valid safetensors"):
        al.load(bad)
    rewrite(drop_weights=True)
    with pytest.raises(al.NetworkError, match="does not contain it"):
        al.load(bad)
    doc = _graph(good)
    doc["version"] = 99
    rewrite(graph=json.dumps(doc))
    with pytest.raises(al.NetworkError, match="Upgrade attnlab"):
        al.load(bad)
    doc = _graph(good)
    doc["network"]["layers"][1]["config"]["bogus"] = 1
    rewrite(graph=json.dumps(doc))
    with pytest.raises(al.NetworkError, match="'fc' \\(Dense\\) has no argument 'bogus'"):
        al.load(bad)
    doc = _graph(good)
    doc["network"]["connections"] = [{"source": "input/out", "destination": "nowhere/in"}]
    rewrite(graph=json.dumps(doc))
    with pytest.raises(al.NetworkError, match="unknown layer 'nowhere'"):
        al.load(bad)


def test_unknown_layer_types_are_refused(tmp_path):
    net = al.Network([L.SequenceInput(3), L.Dense(2, name="fc")])
    path = tmp_path / "net.attnlab"
    net.save(path)
    doc = _graph(path)
    doc["network"]["layers"][1]["type"] = "Dense3000"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("network.json", json.dumps(doc))
    with pytest.raises(al.NetworkError, match="layer 'fc' has unknown type 'Dense3000'. "
                                               "Did you mean 'Dense'"):
        al.load(path)


def test_weights_that_do_not_fit_are_refused(tmp_path):
    from safetensors.torch import save as st_save
    a = al.Network([L.SequenceInput(3), L.Dense(4, name="fc")]).initialize()
    b = al.Network([L.SequenceInput(3), L.Dense(5, name="fc"), L.Dense(2, name="extra")]).initialize()
    path = tmp_path / "a.attnlab"
    a.save(path)
    with zipfile.ZipFile(path) as z:
        g = z.read("network.json")
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("network.json", g)
        z.writestr("weights.safetensors", st_save({k: v.contiguous() for k, v in b.state_dict().items()}))
    with pytest.raises(al.NetworkError) as info:
        al.load(path)
    msg = str(info.value)
    assert "different sizes: fc/weight: file 5×3, network 4×3, fc/bias: file 5, network 4" in msg
    assert "in the file but not in the network: extra/bias, extra/weight" in msg, msg


def test_layers_that_cannot_be_saved_say_why(tmp_path):
    class NoConfig(Layer):           # keeps its argument under another name: config() breaks
        def __init__(self, width: int, name=None):
            super().__init__(name)
            self.w = width

        def infer(self, specs):
            return specs["in"]

        def build(self, specs):
            return nn.Identity()

    try:
        net = al.Network([L.SequenceInput(3), NoConfig(3, name="odd")])
        with pytest.raises(al.NetworkError, match="layer 'odd' \\(NoConfig\\): its config\\(\\) cannot "
                                                  "read its argument 'width'"):
            net.save(tmp_path / "x.attnlab")
    finally:
        LAYER_TYPES.pop("NoConfig", None)
    net = al.Network([L.SequenceInput(3)])
    net.metadata["f"] = lambda: 0
    with pytest.raises(al.NetworkError, match="network metadata"):
        net.save(tmp_path / "x.attnlab")
    assert not (tmp_path / "x.attnlab").exists()


def test_combinators_round_trip(tmp_path):
    d = 8
    attention_qkv = al.Serial(al.Select([0, 0, 0]), al.Parallel(L.Dense(d), L.Dense(d), L.Dense(d)),
                              L.Attention(2), L.Dense(d))
    net = al.Network([L.SequenceInput(d, name="x"), al.Residual(L.LayerNorm(), attention_qkv),
                      al.Residual(L.LayerNorm(), L.Dense(16), L.GELU(), L.Dense(d))]).eval()
    x = [torch.randn(5, d), torch.randn(3, d)]
    y = net(x)
    net.save(tmp_path / "blocks.attnlab")
    twin = al.load(tmp_path / "blocks.attnlab").eval()
    assert torch.equal(twin(x), y)
    assert list(twin.learnables) == list(net.learnables)
