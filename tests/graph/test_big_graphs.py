"""Big and strange graphs: long chains, deep nesting, any cycle; and generated code that
holds nothing a user or a file supplied."""
import os
import pytest

import torch
from hypothesis import HealthCheck, given, settings, strategies as st

import attnlab as al
from attnlab import layers as L
from attnlab.viz.graph import compute_layout

MANY = int(os.environ.get("ATTNLAB_GRAPH_EXAMPLES", "150"))    # ATTNLAB_GRAPH_EXAMPLES=3000 once by hand


def test_a_5000_layer_chain_analyses_runs_saves_and_loads(tmp_path):
    net = al.Network([L.FeatureInput(4, name="x")] + [L.ReLU() for _ in range(2500)]
                     + [L.Dense(4) for _ in range(2500)])
    analysis = net.analyze()
    assert analysis.ok and len(analysis.order) == 5001
    x = torch.randn(2, 4)
    y = net(x)
    path = tmp_path / "chain.attnlab"
    net.save(path)
    twin = al.load(path)
    assert torch.equal(twin(x), y)
    assert "digraph" in net.to_dot()


def test_a_5000_layer_cycle_is_found_and_named():
    net = al.Network([L.SequenceInput(3, name="x"), L.Addition(2, name="join")]
                     + [L.ReLU() for _ in range(4998)])
    net.connect(net.layers[-1].name, "join/in2")
    analysis = net.analyze()
    assert len(analysis.cycles) == 1 and len(analysis.cycles[0]) == 4999
    assert analysis.cycles[0][0] == "join"
    compute_layout(net)                                  # the picture's layout too


def test_twenty_levels_of_nested_serial_analyse_each_level_once(monkeypatch):
    import attnlab.network as network_module
    inner = al.Serial(L.Dense(4), L.ReLU())
    for _ in range(19):
        inner = al.Serial(inner, L.ReLU())
    net = al.Network([L.FeatureInput(4), inner])
    calls = []
    real = network_module._analyze
    monkeypatch.setattr(network_module, "_analyze", lambda *a, **k: calls.append(1) or real(*a, **k))
    analysis = net.analyze()
    assert analysis.ok and analysis.total_learnables == 20
    assert 0 < len(calls) <= 2 * 21, len(calls)      # linear in the depth (it was 2^depth)
    assert net(torch.randn(2, 4)).shape == (2, 4)


def test_the_cyclic_graph_that_broke_the_picture():
    net = al.Network()
    net.add(L.GlobalAvgPool2d(name="l1"))
    net.add(L.SinusoidalPositionEncoding(2, name="l2"))
    net.connect("l1", "l2")
    net.add(L.Module(torch.nn.Linear(4, 8), name="l5"))
    net.connect("l2", "l5")
    net.add(L.MultiHeadAttention(3, 6, name="l6"))
    net.connect("l5", "l6/query")
    net.connect("l2", "l6/value")
    net.add(L.GlobalMaxPool2d(name="l7"))
    net.connect("l6", "l7")
    net.connect("l7", "l1")
    assert net.analyze().cycles
    assert "l6" in net.to_dot()
    compute_layout(net)
    net.plot(None)


# -- names and specs never become code -----------------------------------------------------

EVIL = ["x\nimport os; os.system('echo pwned')", "a'); print('pwned'); ('",
        "b\"\"\"; raise SystemExit", "c # \\", "fc.1", "{0}", "__import__('os')"]


def _source_of(net):
    net.initialize() if any(l.is_input for l in net.layers) else None
    return net._plan.source


def test_layer_names_never_enter_the_generated_forward():
    ok = [n for n in EVIL if n.isprintable()]
    net = al.Network([L.SequenceInput(3, name="in")] + [L.Dense(3, name=n) for n in ok])
    src = _source_of(net)
    for n in ok:
        assert n not in src
    assert all(c.isascii() for c in src)
    y = net(torch.randn(2, 4, 3))
    assert y.shape == (2, 4, 3)


def test_a_name_with_a_dot_works_as_a_module_key():
    net = al.Network([L.FeatureInput(3, name="in.put"), L.Dense(4, name="fc.1"), L.Dense(2, name="fc.2")])
    assert set(net.learnables) == {"fc.1/weight", "fc.1/bias", "fc.2/weight", "fc.2/bias"}
    assert net.layer_modules["fc.1"].weight.shape == (4, 3)
    assert net(torch.randn(5, 3)).shape == (5, 2)


def test_a_name_with_a_look_alike_dot_is_a_name_of_its_own():
    net = al.Network([L.FeatureInput(3, name="x"), L.Dense(4, name="fc.1")])
    net.add(L.Dense(4, name="fc\u20241"))           # ONE DOT LEADER: no '.', so no nesting
    net.connect("x", "fc\u20241")
    assert net.layer_modules["fc.1"] is net.get_submodule("layer_modules.fc.1")
    assert net.layer_modules["fc\u20241"] is net.get_submodule("layer_modules.fc\u20241")
    assert net.layer_modules["fc.1"] is not net.layer_modules["fc\u20241"]


def test_stream_code_holds_no_names():
    name = "dec'); print('pwned'); ('"
    net = al.Network([L.SequenceInput(2, name="x"), L.Dense(4, name=name),
                      L.SelfAttention(2, 4, attention_mask="causal", name="att 'quoted'")])
    s = net.stream()
    y = s.step(torch.randn(1, 3, 2))
    assert y.shape == (1, 3, 4)
    src = s._program.source if hasattr(s, "_program") else ""
    assert name not in src and "quoted" not in src


# -- any graph: analysis and pictures never raise --------------------------------------------

FACTORIES = [
    lambda: L.Dense(4), lambda: L.ReLU(), lambda: L.LSTM(4), lambda: L.Addition(2),
    lambda: L.Concatenation(2), lambda: L.Attention(2), lambda: L.MultiHeadAttention(2, 4),
    lambda: L.SelfAttention(2, 4), lambda: L.GlobalAvgPool1d(), lambda: L.GlobalAvgPool2d(),
    lambda: L.GlobalMaxPool2d(), lambda: L.SinusoidalPositionEncoding(2), lambda: L.Flatten(),
    lambda: L.Module(torch.nn.Linear(4, 8)), lambda: L.Conv2d(3, 4), lambda: L.Index1d("last"),
    lambda: L.SequenceInput(4), lambda: L.ImageInput((3, 8, 8)), lambda: L.FeatureInput(4),
    lambda: al.Serial(L.Dense(4), L.ReLU()),
]

edit = st.tuples(st.sampled_from(["add", "connect", "connect", "disconnect", "remove", "replace"]),
                 st.integers(0, len(FACTORIES) - 1), st.integers(0, 10 ** 6), st.integers(0, 10 ** 6))


def _apply(net, kind, f, a, b):
    names = [l.name for l in net.layers]
    try:
        if kind == "add":
            net.add(FACTORIES[f]())
        elif kind == "connect" and names:
            src, dst = net.layers[names[a % len(names)]], net.layers[names[b % len(names)]]
            if src.output_ports and dst.input_ports:
                net.connect(f"{src.name}/{src.output_ports[a % len(src.output_ports)]}",
                            f"{dst.name}/{dst.input_ports[b % len(dst.input_ports)]}")
        elif kind == "disconnect" and net.connections:
            c = net.connections[a % len(net.connections)]
            net.disconnect(c.source, c.destination)
        elif kind == "remove" and names:
            net.remove(names[a % len(names)])
        elif kind == "replace" and names:
            net.replace(names[a % len(names)], FACTORIES[f]())
    except al.NetworkError:
        pass                      # a refused edit leaves the graph as it was


@settings(max_examples=MANY, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(edit, min_size=1, max_size=25))
def test_analysis_and_pictures_never_raise_on_any_graph(edits):
    net = al.Network()
    for e in edits:
        _apply(net, *e)
    analysis = net.analyze()
    str(analysis)
    analysis._repr_html_()
    net.to_dot()
    compute_layout(net)


@settings(max_examples=max(10, MANY // 15), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(edit, min_size=1, max_size=12))
def test_rendered_pictures_never_raise_on_any_graph(edits):
    net = al.Network()
    for e in edits:
        _apply(net, *e)
    net.plot(None)
    net._repr_svg_()


def test_nesting_is_bounded_and_a_network_cannot_contain_itself(tmp_path):
    from attnlab.graph import MAX_NESTING
    inner = L.Dense(4)
    for _ in range(MAX_NESTING - 1):
        inner = al.Serial(inner)
    net = al.Network([L.FeatureInput(4), inner, L.Dense(2)])   # MAX_NESTING levels: works
    x = torch.randn(2, 4)
    net.save(tmp_path / "deep.attnlab")
    assert torch.allclose(al.load(tmp_path / "deep.attnlab")(x), net(x))
    with pytest.raises(al.NetworkError) as e:
        al.Serial(al.Network([L.FeatureInput(4), inner]))
    assert f"more than {MAX_NESTING} levels" in str(e.value) and "al.Serial(*layers)" in str(e.value)
    for outer, make in [(net, lambda: net), (inner, lambda: al.Serial(inner))]:
        with pytest.raises(al.NetworkError) as e:
            outer.add(make())
        assert "would contain itself" in str(e.value) and "copy.deepcopy" in str(e.value)
