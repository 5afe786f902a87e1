"""A refused step changes nothing: whatever refuses a step (a position past a PositionEmbedding's
length, a layer failing on the data, a wrong channel count, dtype or batch size), every
stepper is as before it, the error says so, and the next valid steps equal the full forward
pass, for every kind of stepper."""
from __future__ import annotations

import pytest
import torch
from torch import nn

import attnlab as al
from attnlab.stream import Stepper, register_stepper
from attnlab import layers as L

C, LENGTH, B = 8, 9, 2


class _Guard(nn.Module):
    """Passes its first input on; fails (as torch does) when the raw input is out of range,
    which refuses a step inside the network, after the layers before it have run."""

    def forward(self, h, x):
        if not x.is_meta and bool((x.abs() > 1e3).any()):     # sizes are inferred on meta
            raise RuntimeError("value out of range")
        return h


def _attention(**kw):
    return lambda net: _chain(net, L.SelfAttention(2, C, attention_mask="causal", name="kind",
                                                   **kw))


def _chain(net, *layers):
    net.add(list(layers))
    net.connect("fc", layers[0].name)
    return layers[-1].name


def _multi_head(net):
    net.add(L.MultiHeadAttention(2, C, attention_mask="causal", name="kind"))
    for port in ("query", "key", "value"):
        net.connect("fc", f"kind/{port}")
    return "kind"


def _cross(net):
    net.add([L.SequenceInput(C, name="mem"),
             L.MultiHeadAttention(2, C, attention_mask="causal", name="kind")])
    net.disconnect("mem", "kind/query")
    net.connect("fc", "kind/query")
    net.connect("mem", "kind/key")
    net.connect("mem", "kind/value")
    return "kind"


def _added(position):
    def make(net):
        net.add([position, L.Addition(2, name="kind")])
        net.connect("fc", position.name)
        net.connect("fc", "kind/in2")
        return "kind"
    return make


def _nested(net):
    inner = al.Serial(L.SelfAttention(2, C, attention_mask="causal"), L.LSTM(C),
                      L.Conv1d(2, C, padding="causal"))
    inner.name = "kind"
    net.add(inner)
    net.connect("fc", "kind")
    return "kind"


KINDS = {
    "attention": _attention(),
    "attention-window": _attention(window=2),
    "attention-rotary": _attention(rotary=True),
    "attention-alibi": _attention(alibi=True),
    "attention-grouped": _attention(num_kv_heads=1),
    "multi-head-attention": _multi_head,
    "cross-attention": _cross,
    "lstm": lambda net: _chain(net, L.LSTM(C, name="kind")),
    "gru": lambda net: _chain(net, L.GRU(C, name="kind")),
    "conv-causal": lambda net: _chain(net, L.Conv1d(3, C, padding="causal", name="kind")),
    "conv-dilated": lambda net: _chain(net, L.Conv1d(2, C, padding="causal", dilation=2,
                                                     name="kind")),
    "position-embedding": _added(L.PositionEmbedding(LENGTH + 4, name="pos")),
    "sinusoidal": _added(L.SinusoidalPositionEncoding(C, name="pos")),
    "time-local": lambda net: _chain(net, L.LayerNorm(name="norm"), L.GELU(name="gelu"),
                                     L.Dense(C, name="kind")),
    "nested-network": _nested,
}


def _network(kind):
    """x → fc → the layers of `kind` → body; a PositionEmbedding of LENGTH positions and a
    guard read the body (so they run after it), and their sum goes out."""
    torch.manual_seed(0)
    net = al.Network([L.SequenceInput(4, name="x"), L.Dense(C, name="fc")])
    body = KINDS[kind](net)
    net.add([L.PositionEmbedding(LENGTH, name="pe"),
             L.Addition(2, name="add"), L.Dense(3, name="out")])
    net.connect(body, "pe")
    net.add(L.Module(_Guard(), num_inputs=2, name="guard"))
    net.connect(body, "guard/in1")
    net.connect("x", "guard/in2")
    net.disconnect("pe", "add/in1")
    net.connect("guard", "add/in1")
    net.connect("pe", "add/in2")
    return net.eval()


def _data(net):
    x = torch.randn(B, LENGTH, 4)
    static = {"mem": torch.randn(B, 5, C)} if "mem" in net.input_names else None
    full = net({"x": x, **static}) if static else net(x)
    return x, static, full


def _too_long(x, pos):             # reaches past the PositionEmbedding's LENGTH positions
    return x[:, pos:pos + 1].repeat(1, LENGTH - pos + 1, 1)


def _out_of_range(x, pos):         # the guard, inside the network, fails on it
    bad = x[:, pos:pos + 2].clone()
    bad[0, -1, 0] = 1e6
    return bad


def _wrong_channels(x, pos):
    return torch.randn(B, 2, 5)


def _wrong_dtype(x, pos):
    return x[:, pos:pos + 2].to(torch.complex64)


def _wrong_batch(x, pos):
    return x[:1, pos:pos + 2]


REFUSALS = {"too-long": (_too_long, "reach past max_length"),
            "failing-layer": (_out_of_range, "layer 'guard'"),
            "wrong-channels": (_wrong_channels, "expected B×t×4"),
            "wrong-dtype": (_wrong_dtype, "complex"),
            "wrong-batch": (_wrong_batch, "expected batch size 2")}


@pytest.mark.parametrize("refusal", REFUSALS)
@pytest.mark.parametrize("kind", KINDS)
def test_a_refused_step_changes_nothing(kind, refusal):
    net = _network(kind)
    x, static, full = _data(net)
    s = net.stream(static, capacity=2)          # small caches: they grow during the steps
    make, says = REFUSALS[refusal]
    ys = [s.step(x[:, :3])]
    with pytest.raises(al.DataError) as e:
        s.step(make(x, 3))
    msg = str(e.value)
    assert says in msg and "The stream is unchanged" in msg
    assert s.position == 3
    ys += [s.step(x[:, 3:4]), s.step(x[:, 4:7])]
    ys += [s.step(x[:, t:t + 1]) for t in range(7, LENGTH)]
    torch.testing.assert_close(torch.cat(ys, 1), full, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("kind", ["attention", "lstm", "conv-causal", "position-embedding"])
def test_a_refused_first_step_fixes_no_batch_size(kind):
    net = _network(kind)
    x, static, full = _data(net)
    s = net.stream(static)
    with pytest.raises(al.DataError, match="The stream is unchanged"):
        s.step(_too_long(torch.randn(B + 1, LENGTH, 4), 0))
    assert s.position == 0 and s.batch_size is None
    torch.testing.assert_close(torch.cat([s.step(x[:, :4]), s.step(x[:, 4:])], 1), full,
                               atol=1e-5, rtol=1e-4)


def test_a_refused_step_that_compacted_a_windowed_cache():
    # window 2, capacity 4: the fifth single step finds the buffers full and moves the one
    # step a later query still sees to the front, then the guard refuses the step
    net = _network("attention-window")
    x, _, full = _data(net)
    s = net.stream(capacity=4)
    ys = [s.step(x[:, t:t + 1]) for t in range(4)]
    cache = s.steppers["kind"].cache
    assert cache.start == 0
    with pytest.raises(al.DataError, match="layer 'guard'"):
        s.step(_out_of_range(x, 4)[:, 1:])
    assert cache.start > 0 and cache.pos == 4 == s.position     # compacted, and rewound
    ys += [s.step(x[:, t:t + 1]) for t in range(4, LENGTH)]
    torch.testing.assert_close(torch.cat(ys, 1), full, atol=1e-5, rtol=1e-4)


def test_an_interrupted_step_changes_nothing():
    net = _network("lstm")
    x, _, full = _data(net)
    interrupt = {"now": False}

    def hook(module, inputs):
        if interrupt["now"]:
            raise KeyboardInterrupt
    handle = net.layer_modules["guard"].register_forward_pre_hook(hook)
    try:
        s = net.stream()                          # made after the hook, so it calls it
        first = s.step(x[:, :3])
        state = s.steppers["kind"].state
        interrupt["now"] = True
        with pytest.raises(KeyboardInterrupt):
            s.step(x[:, 3:5])
        interrupt["now"] = False
    finally:
        handle.remove()
    assert s.position == 3 and s.steppers["kind"].state is state
    torch.testing.assert_close(torch.cat([first, s.step(x[:, 3:])], 1), full, atol=1e-5,
                               rtol=1e-4)


def test_a_compiled_stream_refuses_a_step_without_moving():
    net = _network("attention")
    x, _, full = _data(net)
    s = net.stream(compile={"backend": "eager"})
    ys = [s.step(x[:, :3])]
    with pytest.raises(al.DataError, match="The stream is unchanged"):
        s.step(_too_long(x, 3))
    ys += [s.step(x[:, t:t + 1]) for t in range(3, LENGTH)]
    torch.testing.assert_close(torch.cat(ys, 1), full, atol=1e-5, rtol=1e-4)


class _Total(Stepper):
    """A stepper written as docs/writing-layers.md writes one: state in attributes."""

    def __init__(self):
        self.total = 0.0

    def reset(self):
        self.total = 0.0

    def step(self, x):
        sums = self.total + x.cumsum(1)
        self.total = sums[:, -1:]
        return sums


def test_a_stepper_from_outside_is_restored_by_its_attributes():
    class CumSum(L.Layer):
        def infer(self, specs):
            return specs["in"]

        def build(self, specs):
            return _CumSum()

    class _CumSum(nn.Module):
        def forward(self, x):
            return x.cumsum(1)

    from attnlab.layers.base import LAYER_TYPES
    register_stepper(CumSum)(lambda ctx: _Total())
    try:
        net = _network("time-local")
        net.replace("norm", CumSum(name="norm"))
        x, _, full = _data(net)
        s = net.stream()
        ys = [s.step(x[:, :3])]
        with pytest.raises(al.DataError, match="The stream is unchanged"):
            s.step(_too_long(x, 3))
        ys.append(s.step(x[:, 3:]))
        torch.testing.assert_close(torch.cat(ys, 1), full, atol=1e-5, rtol=1e-4)
    finally:
        LAYER_TYPES.pop("CumSum", None)
