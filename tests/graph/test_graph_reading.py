"""The graph's read API (what analysis, pictures, saving and streaming read) and what a
network shows in dir()."""
import pytest

import attnlab as al
from attnlab import layers as L
from attnlab.graph import LAYER_AUTHOR_HELPERS
from attnlab.graph.names import format_port, parse_port


def _net():
    net = al.Network([L.SequenceInput(3, name="x"), L.Dense(4, name="q"),
                      L.Attention(2, name="att")])
    net.add(L.Dense(4, name="kv"))
    net.connect("x", "kv")
    net.connect("kv", "att/key")
    net.connect("kv", "att/value")
    return net


def test_a_port_name_is_read_and_written_by_one_rule():
    assert parse_port("att/key") == ("att", "key")
    assert parse_port("fc") == ("fc", "")
    assert format_port("fc", "out", ("out",)) == "fc"
    assert format_port("att", "key", ("query", "key", "value")) == "att/key"
    assert format_port("fc", "out") == "fc/out"                  # no ports given: always named
    assert format_port(*parse_port("att/key")) == "att/key"


def test_the_graph_reads_its_layers_edges_and_ports():
    net = _net()
    assert list(net.layer_map) == ["x", "q", "att", "kv"]
    assert net.layer_map["att"] is net.layers["att"]
    assert net.source("att", "key") == ("kv", "out")
    assert net.source("att", "query") == ("q", "out")
    assert net.source("x", "in") is None
    assert dict(net.sources)[("kv", "in")] == ("x", "out")
    assert len(net.sources) == len(net.connections) == 5
    assert net.port_name("att", "key") == "att/key"
    assert net.port_name("q", "out", "output") == "q"
    assert net.port_of("q") == ("q", "in") and net.port_of("att/value") == ("att", "value")
    assert net.port_of("q", "output") == ("q", "out")
    assert net.open_outputs() == [("att", "out", "att")]
    assert net.data_specs is None                                 # it has an input layer


def test_the_read_views_cannot_edit_the_graph():
    net = _net()
    with pytest.raises(TypeError):
        net.layer_map["y"] = L.ReLU()             # type: ignore[index]
    with pytest.raises(TypeError):
        net.sources[("att", "key")] = ("q", "out")  # type: ignore[index]


def test_a_lazy_network_reads_its_data_specs_once_it_has_run():
    import torch
    net = al.Network([L.Dense(2, name="fc")])
    assert net.data_specs is None
    net(torch.zeros(1, 3))
    assert str(net.data_specs["fc"]) == "B×3"


def test_layer_author_helpers_leave_dir_but_keep_working():
    net = _net()
    names = dir(net)
    assert not LAYER_AUTHOR_HELPERS & set(names), sorted(LAYER_AUTHOR_HELPERS & set(names))
    for api in ("add", "connect", "analyze", "layers", "connections", "layer_map", "sources",
                "predict", "stream", "save", "parameters", "state_dict"):
        assert api in names, api
    assert net.stem == "network"                  # still there for naming a nested network
    outer = al.Network([L.SequenceInput(3, name="x"), _inner()])
    inner = outer.layers[1]
    assert inner.name == "network"
    out = inner.infer_all({inner.input_ports[0]: outer.analyze().out_specs["x"]["out"]})
    assert [str(s) for s in out.values()] == ["B×T×3"]
    assert callable(net.require) and callable(net.error) and callable(net.require_channels)


def _inner():
    return al.Network([L.Dense(3, name="a")])


def test_the_network_reads_its_compiled_inputs():
    import torch
    net = al.Network([L.TokenInput(name="ids"), L.Embedding(10, 4, name="emb")])
    net.add(L.SequenceInput(4, name="x"))
    assert [str(s) for s in net.input_specs.values()] == ["B×T", "B×T×4"]
    assert net.token_inputs == ("ids",)
    assert net.input_dtype == torch.float32
    assert net.double().input_dtype == torch.float64
