"""Building a graph costs the same per layer however many layers it already has: editing work
is counted (lines of the graph's editing modules run), not timed, so the tests do not depend on
the machine."""
import sys

import pytest

import attnlab as al
import attnlab.graph as graph_module
import attnlab.graph.hints as hints_module
import attnlab.graph.names as names_module
from attnlab import layers as L


def _lines_run_in_graph(build) -> int:
    """How many lines of the graph's editing (attnlab/graph/__init__.py and the names and hints
    it calls) run while `build()` runs (every loop turn counts)."""
    targets = {m.__file__ for m in (graph_module, names_module, hints_module)}
    count = 0

    def local(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return local

    def calls(frame, event, arg):
        return local if frame.f_code.co_filename in targets else None

    old = sys.gettrace()
    sys.settrace(calls)
    try:
        build()
    finally:
        sys.settrace(old)
    return count


def _one_at_a_time(n: int, kind=L.Dense) -> al.Network:
    """n blocks added one call at a time, as the checkpoint builders do: a dotted name (whose
    module key must not clash with another's), an unnamed layer (which gets a default name)."""
    net = al.Network([L.FeatureInput(4, name="x")])
    x = "x"
    for i in range(n):
        net.add(kind(4, name=f"h.{i}.fc") if kind is L.Dense else kind(name=f"h.{i}.fc"))
        net.connect(x, f"h.{i}.fc")
        relu = L.ReLU()
        net.add(relu)
        net.connect(f"h.{i}.fc", relu.name)
        x = relu.name
    return net


def _in_one_list(n: int) -> al.Network:
    return al.Network([L.FeatureInput(4, name="x")] + [L.ReLU() for _ in range(n)])


def test_adding_a_layer_costs_the_same_in_a_big_graph():
    small = _lines_run_in_graph(lambda: _one_at_a_time(250))
    big = _lines_run_in_graph(lambda: _one_at_a_time(1000))
    assert big < 4.5 * small, (small, big)          # linear: 4×; it was quadratic (≈ 16×)


def test_default_names_in_one_long_list_cost_the_same_per_layer():
    small = _lines_run_in_graph(lambda: _in_one_list(500))
    big = _lines_run_in_graph(lambda: _in_one_list(2000))
    assert big < 4.5 * small, (small, big)


def test_a_10000_layer_graph_builds_and_analyses():
    net = _one_at_a_time(5000, L.Tanh)
    assert len(net.layer_map) == 10_001
    assert net.layers[-1].name == "relu_4999"       # default names still counted from 1
    analysis = net.analyze()
    assert analysis.ok and len(analysis.order) == 10_001


def test_default_names_fill_the_gaps_that_removals_leave():
    net = _in_one_list(5)                           # relu, relu_1 … relu_4
    net.remove("relu_2", "relu")
    net.add(L.ReLU())
    net.add(L.ReLU())
    net.add(L.ReLU())
    assert [l.name for l in net.layers][-3:] == ["relu", "relu_2", "relu_5"]


def test_a_failed_add_takes_no_default_name():
    net = _in_one_list(2)                           # relu, relu_1
    with pytest.raises(al.NetworkError, match="has no input"):
        net.add([L.ReLU(), L.FeatureInput(3)])      # an input cannot follow a layer
    net.add(L.ReLU())
    assert net.layers[-1].name == "relu_2"


def test_module_paths_still_clash_after_edits():
    net = al.Network([L.FeatureInput(4, name="x"), L.Dense(4, name="fc.1")])
    with pytest.raises(al.NetworkError, match="'fc' and 'fc.1' clash"):
        net.add(L.Dense(4, name="fc"))             # 'fc' holds fc.1's module
    net.remove("fc.1")
    net.add(L.Dense(4, name="fc"))                 # free again once the other is gone
    with pytest.raises(al.NetworkError, match="'fc' and 'fc.2' clash"):
        net.add(L.Dense(4, name="fc.2"))
    net.replace("fc", L.Dense(4, name="fc.3"))     # a container again
    assert "fc.3" in net.layer_map
