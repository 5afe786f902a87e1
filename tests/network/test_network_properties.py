"""Random edit sequences: analyze() never raises; whenever it says ok, the network initialises
and runs on inputs of the inferred sizes, and every output has its inferred size."""
import torch
from hypothesis import HealthCheck, event, given, settings, strategies as st

import attnlab as al
from attnlab import layers as L

C = 4

FACTORIES = [
    lambda: L.Dense(C), lambda: L.Dense(3), lambda: L.ReLU(), lambda: L.LayerNorm(),
    lambda: L.LSTM(C), lambda: L.LSTM(C, output_mode="last"), lambda: L.GRU(C),
    lambda: L.Addition(2), lambda: L.Concatenation(2), lambda: L.Attention(2),
    lambda: L.GlobalAvgPool1d(), lambda: L.Index1d("last"), lambda: L.Conv1d(3, C),
    lambda: L.Dropout(0.1), lambda: L.SequenceInput(C), lambda: L.FeatureInput(C),
]

op = st.tuples(st.sampled_from(["add", "add_list", "connect", "disconnect", "remove", "replace"]),
               st.integers(0, len(FACTORIES) - 1), st.integers(0, 10 ** 6), st.integers(0, 10 ** 6))


def apply(net, kind, f, a, b):
    layers = [l.name for l in net.layers]
    try:
        if kind == "add":
            net.add(FACTORIES[f]())
        elif kind == "add_list":
            net.add([FACTORIES[f](), FACTORIES[(f + a) % len(FACTORIES)]()])
        elif kind == "connect" and layers:
            src = net.layers[layers[a % len(layers)]]
            dst = net.layers[layers[b % len(layers)]]
            if src.output_ports and dst.input_ports:
                sp = src.output_ports[a % len(src.output_ports)]
                dp = dst.input_ports[b % len(dst.input_ports)]
                net.connect(f"{src.name}/{sp}", f"{dst.name}/{dp}")
        elif kind == "disconnect" and net.connections:
            c = net.connections[a % len(net.connections)]
            net.disconnect(c.source, c.destination)
        elif kind == "remove" and layers:
            net.remove(layers[a % len(layers)])
        elif kind == "replace" and layers:
            net.replace(layers[a % len(layers)], FACTORIES[f]())
    except al.NetworkError:
        pass  # an edit the network refuses, with an explanation: the graph stays as it was


def example(spec, batch=2, time=5):
    return torch.randn(spec.concrete(batch, time))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, min_size=1, max_size=14), st.booleans())
def test_random_edits(ops, start_with_input):
    net = al.Network([L.SequenceInput(C, name="x"), L.Dense(C)] if start_with_input else None)
    for o in ops:
        apply(net, *o)
    analysis = net.analyze()                      # never raises
    str(analysis)
    has_inputs = any(l.is_input for l in net.layers)
    if not analysis.ok or not net.layers:
        return
    if has_inputs:
        inputs = {n: example(net.layers[n].spec) for n in net.input_names}
    else:                                         # sizes come from data: give sequences
        inputs = {n: torch.randn(2, 5, C) for n in net.input_names}
        analysis = net.analyze(inputs)
        if not analysis.ok:
            return
    event("ran")
    out = net(inputs)
    outs = out if isinstance(out, dict) else {net.output_names[0]: out}
    for name, y in outs.items():
        layer, _, port = name.partition("/")
        spec = analysis.out_specs[layer][port or net.layers[layer].output_ports[0]]
        assert y.dim() == len(spec.labels)
        assert all(s is None or s == n for s, n in zip(spec.sizes, y.shape))
