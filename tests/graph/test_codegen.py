"""Generated code and the module calling convention: one generator (attnlab.graph.codegen) writes the
forward plan and the stream's step; one convention (attnlab.graph.convention) says how every module
is called, by the plan, the stream and the ONNX exporter alike."""
import linecache
import re

import pytest
import torch

import attnlab as al
from attnlab.graph import codegen
from attnlab import layers as L
from attnlab.graph.convention import Convention, call, call_code, convention, passed_masks, targets_code

EVIL = "x'); import os; os.system('echo pwned'); ('"


# -- the convention -------------------------------------------------------------------------

def test_each_kind_of_layer_has_its_convention():
    inner = al.Network([L.Dense(3, name="d")])
    assert convention(L.Dense(3)) == Convention(None, False, False)
    assert convention(L.LSTM(3)) == Convention("masks", False, False)          # uses_mask
    assert convention(L.Concatenation(2)) == Convention("masks", True, False)  # returns_mask
    assert convention(inner) == Convention("_masks", True, True)               # nested network


def test_the_same_convention_as_code_and_as_a_call():
    plain, many = Convention(None, False, False), Convention(None, False, True)
    masked, graph = Convention("masks", True, False), Convention("_masks", True, True)
    assert call_code(plain, "m0", ["v0"], ["k0"]) == "m0(v0)"
    assert call_code(masked, "m1", ["v0", "v1"], ["k0", "None"]) == "m1(v0, v1, masks=(k0, None,))"
    assert targets_code(plain, ["v2"], None) == "v2"
    assert targets_code(many, ["v2", "v3"], None) == "v2, v3,"
    assert targets_code(masked, ["v2"], ["w2"]) == "v2, w2"
    assert targets_code(masked, ["v2"], None) == "v2, _"
    assert targets_code(graph, ["v2", "v3"], ["w2", "w3"]) == "(v2, v3,), (w2, w3,)"
    assert targets_code(graph, ["v2"], None) == "(v2,), _"


def test_call_runs_a_nested_network_as_its_plan_does():
    inner = al.Network([L.SequenceInput(2, name="x"), L.Dense(3, name="d")]).initialize()
    x = torch.randn(2, 4, 2)
    mask = torch.tensor([[True] * 4, [True, True, False, False]])
    outs, masks = call(inner, inner, [x], [mask])
    ref, ref_masks = inner.forward_with_masks(al.Padded(x, mask))
    torch.testing.assert_close(outs[0], ref["d"])
    assert torch.equal(masks[0], mask) and torch.equal(ref_masks["d"], mask)


def test_a_layer_without_masks_out_passes_its_first_sequence_mask_on():
    net = al.Network([L.SequenceInput(2, name="x"), L.Dense(3, name="d"),
                      L.GlobalAvgPool1d(name="pool")])
    a = net.analyze()
    mask = torch.ones(2, 4, dtype=torch.bool)
    assert passed_masks(net.layers["d"], [mask], a.in_specs["d"], a.out_specs["d"]) == [mask]
    assert passed_masks(net.layers["pool"], [mask], a.in_specs["pool"],
                        a.out_specs["pool"]) == [None]                   # a feature: no mask
    assert passed_masks(net.layers["d"], ["k0"], a.in_specs["d"], a.out_specs["d"],
                        none="None") == ["k0"]


def test_the_plan_and_the_stream_call_a_masked_module_alike():
    net = al.Network([L.SequenceInput(2, name="x"), L.Dense(2, name="a"),
                      L.Concatenation(2, name="cat")])
    net.connect("x", "cat/in2")
    net.eval()
    src = net._plan.source if net._plan is not None else net.initialize()._plan.source
    assert re.search(r"\n    v1, w1 = m1\(v0, x0, masks=\(k0, k0,\)\)  # layer 1\n", src), src
    s = net.stream()
    assert "masks=(None, None,))" in s.source and ", _ = " in s.source
    x = torch.randn(1, 3, 2)
    torch.testing.assert_close(torch.cat([s.step(x[:, i:i + 1]) for i in range(3)], 1), net(x))


# -- the generator ----------------------------------------------------------------------------

def _raising_source(layer_name):
    src = codegen.Source()
    src.line("def f(a):")
    src.line("b = a + 1", layer="ok", indent=4)
    src.line("return b[10]", layer=layer_name, indent=4)
    return src


def test_layer_names_stay_in_the_line_table_and_tracebacks_find_them():
    gen = codegen.define(_raising_source(EVIL), "test")
    assert EVIL not in gen.source and "pwned" not in gen.source
    assert gen.filename.startswith("<attnlab test ") and gen.line_layers == {2: "ok", 3: EVIL}
    assert linecache.getline(gen.filename, 3).strip() == "return b[10]"
    with pytest.raises(IndexError) as info:
        gen.namespace["f"](torch.zeros(2))
    assert codegen.layer_at(info.value.__traceback__) == EVIL
    assert codegen.layer_at(info.value.__traceback__, kind="plan") is None
    assert codegen.layer_at(info.value.__traceback__, files=("<elsewhere>",)) is None
    assert codegen.layer_at(info.value.__traceback__, files=(gen.filename,)) == EVIL


def test_shared_code_is_run_once_per_source_and_line_table():
    a = codegen.define(_raising_source("same"), "test", share=True)
    b = codegen.define(_raising_source("same"), "test", share=True)
    c = codegen.define(_raising_source("other"), "test", share=True)
    d = codegen.define(_raising_source("same"), "test")
    assert a is b and a.filename != c.filename != d.filename != a.filename
    assert a.source == c.source and c.line_layers[3] == "other"


def test_walk_names_the_inputs_of_unconnected_ports():
    net = al.Network([L.Dense(3, name="d"), L.Addition(2, name="add")])    # d → add/in1
    keys = {name: ks for name, _, ks in codegen.walk(net, ["d", "add"])}
    assert keys == {"d": [("<in>", "d")], "add": [("d", "out"), ("<in>", "add/in2")]}
    assert codegen.input_key(net, "add/in2") == ("<in>", "add/in2")
    assert [k for _, k in codegen.output_keys(net)] == [("add", "out")]


# -- errors name the layer ---------------------------------------------------------------------

def test_a_failure_inside_a_nested_network_names_the_nested_layer():
    inner = al.Network([L.Dense(3, name="d1"), L.Conv1d(3, 4, padding="valid", name="conv")],
                       name="inner")
    net = al.Network([L.SequenceInput(3, name="x"), L.Dense(3, name="a"), L.Dense(3, name="b"),
                      L.Dense(3, name="c"), inner])
    with pytest.raises(al.DataError) as info:
        net(torch.randn(2, 2, 3))                 # 2 steps, kernel 3: torch refuses
    msg = str(info.value)
    assert msg.startswith("layer 'inner' (Network): running it failed; torch says:")
    assert "print(net.analyze())" in msg


def test_the_plan_drops_each_activation_after_its_last_reader():
    # a hand-written forward lets its locals go as it goes: inference holds a few activations
    # at a time, not one per layer
    import weakref
    net = al.Network([L.SequenceInput(4), L.Dense(8, name="a"), L.ReLU(name="b"),
                      L.Dense(8, name="c"), L.ReLU(name="d"), L.Dense(3, name="e")])
    net.initialize()
    seen, alive = {}, {}
    net.layer_modules["a"].register_forward_hook(lambda m, i, o: seen.update(a=weakref.ref(o)))
    net.layer_modules["d"].register_forward_hook(
        lambda m, i, o: alive.update(a=seen["a"]() is not None))
    with torch.no_grad():
        y = net(torch.randn(2, 5, 4))
    assert y.shape == (2, 5, 3)
    assert alive == {"a": False}          # 'a's output was gone once 'b' had read it
