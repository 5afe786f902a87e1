"""Projections that are not bare `nn.Linear`s are called as modules: a subclass, a hook (on the
projection or on every module), a parametrization, peft's LoRA wrappers. The attention layers
fuse q, k and v into one matmul against their concatenated weights only while all three are
bare; everything else must compute what calling the modules computes, in the forward pass, in
a stream (prefill chunks and one-step decoding) and in training."""
import pytest
import torch
from torch import nn
from torch.nn.utils import parametrize

import attnlab as al
from attnlab import layers as L
from attnlab.functional import SelfAttentionModule, naive_attention

peft = pytest.importorskip("peft")

C = 8           # channels of the inputs
T = 6           # time steps
CUTS = (2, 3, 4, 6)   # a stream's chunks: 2 steps, then 1, 1, 2 (prefill, decoding, prefill)


# ------------------------------------------------------------------ networks and reference --

def _net(kind, heads=2, **opts):
    """A causal attention layer 'att' on input 'x' (and 'mem' for cross-attention)."""
    if kind == "self":
        return al.Network([L.SequenceInput(C, name="x"),
                           L.SelfAttention(heads, 8, attention_mask="causal", name="att",
                                           **opts)])
    causal = "causal" if kind == "mha" else None
    net = al.Network([L.SequenceInput(C, name="x"),
                      L.MultiHeadAttention(heads, 8, attention_mask=causal, name="att", **opts)])
    src = "x" if kind == "mha" else "mem"
    if kind == "cross":
        net.add(L.SequenceInput(C, name="mem"))
    net.connect(src, "att/key")
    net.connect(src, "att/value")
    return net


CASES = {
    "self": ("self", {}),
    "self-gqa": ("self", {"heads": 4, "num_kv_heads": 2}),
    "self-rotary": ("self", {"rotary": True}),
    "mha": ("mha", {}),
    "mha-gqa-rotary": ("mha", {"heads": 4, "num_kv_heads": 2, "rotary": True}),
    "cross": ("cross", {}),
}


def _make(case, seed=0):
    torch.manual_seed(seed)
    kind, opts = CASES[case]
    net = _net(kind, **opts).eval()
    x = torch.randn(2, T, C)
    inputs = {"x": x, "mem": torch.randn(2, 5, C)} if kind == "cross" else {"x": x}
    return net, inputs


def _att(net):
    """The attention module, wherever a peft wrapper put the network."""
    return net.layer_modules["att"]


def reference(net, inputs):
    """The layer by hand, each projection called as the module it is (hooks and wrappers
    run), then the textbook attention and the output module."""
    m = _att(net)
    xq = inputs["x"]
    xkv = inputs.get("mem", xq)
    q, k, v = m.query(xq), m.key(xkv), m.value(xkv)
    q, k = m.transform_qk(q, k, 0, 0)
    y = naive_attention(q, k, v, m.num_heads, m.scale,
                        attention_mask=m.attention_mask, num_kv_heads=m.num_kv_heads)
    return m.output(y)


def streamed(net, inputs, cuts=CUTS):
    """The output step by step, in the chunks `cuts`."""
    static = {"mem": inputs["mem"]} if "mem" in inputs else None
    s = net.stream(static)
    x, outs, start = inputs["x"], [], 0
    for end in cuts:
        outs.append(s.step(x[:, start:end]))
        start = end
    return torch.cat(outs, 1)


def check_everywhere(net, inputs, before):
    """Forward = reference ≠ the output before wrapping; stream = forward."""
    with torch.no_grad():
        y = net(inputs)
        ref = reference(net, inputs)
    torch.testing.assert_close(y, ref, atol=1e-5, rtol=1e-5)
    assert (y - before).abs().max() > 1e-3, "the wrapper changed nothing"
    torch.testing.assert_close(streamed(net, inputs), y, atol=1e-5, rtol=1e-5)


# ------------------------------------------------------------------ wrappers ------------------

class Shifted(nn.Linear):
    """A Linear subclass that adds a learned shift to its output."""

    def __init__(self, lin: nn.Linear):
        super().__init__(lin.in_features, lin.out_features, bias=lin.bias is not None)
        self.load_state_dict(lin.state_dict())
        self.shift = nn.Parameter(torch.full((lin.out_features,), 0.5))

    def forward(self, x):
        return super().forward(x) + self.shift


class Doubled(nn.Module):
    def forward(self, w):
        return 2 * w


def _subclass(net):
    m = _att(net)
    m.query = Shifted(m.query)


def _forward_hook(net):
    _att(net).value.register_forward_hook(lambda mod, args, out: out * 2 + 0.25)


def _pre_hook(net):
    _att(net).key.register_forward_pre_hook(lambda mod, args: (args[0] * 3,))


def _parametrized(net):
    parametrize.register_parametrization(_att(net).query, "weight", Doubled())


def _lora(net):
    peft.get_peft_model(net, peft.LoraConfig(target_modules=["query", "value"],
                                             init_lora_weights=False))


def _lora_all(net):
    peft.get_peft_model(net, peft.LoraConfig(r=2, target_modules=["query", "key", "value",
                                                                 "output"],
                                             init_lora_weights=False))


WRAPPERS = {"subclass": _subclass, "forward-hook": _forward_hook, "pre-hook": _pre_hook,
            "parametrize": _parametrized, "lora": _lora, "lora-all": _lora_all}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("wrap", list(WRAPPERS))
def test_wrapped_projections_are_called_in_forward_and_stream(case, wrap):
    net, inputs = _make(case)
    with torch.no_grad():
        before = net(inputs)
    WRAPPERS[wrap](net)
    check_everywhere(net, inputs, before)


def test_the_fused_matmul_serves_bare_linears_only(monkeypatch):
    """Bare projections: one matmul for q, k and v (forward and decoding); with one of them
    wrapped, the concatenated weights are never made."""
    net, inputs = _make("self")
    m = _att(net)
    calls = []
    real = SelfAttentionModule.qkv
    monkeypatch.setattr(SelfAttentionModule, "qkv",
                        lambda self, x, fused: calls.append(1) or real(self, x, fused))
    assert m.fusable() and m.fused_qkv() is not None
    net(inputs)
    streamed(net, inputs)
    assert len(calls) == 1 + len(CUTS)
    _lora(net)
    assert not m.fusable() and m.fused_qkv() is None
    calls.clear()
    net(inputs)
    streamed(net, inputs)
    assert calls == []


def test_a_hook_on_every_module_is_honoured():
    torch.manual_seed(1)
    m = SelfAttentionModule(C, 2, 8, attention_mask="causal").eval()
    x = torch.randn(2, T, C)
    with torch.no_grad():
        before = m(x)
    handle = nn.modules.module.register_module_forward_hook(
        lambda mod, args, out: out + 1.0 if type(mod) is nn.Linear else None)
    try:
        assert not m.fusable()
        with torch.no_grad():
            y = m(x)
            q, k, v = m.query(x), m.key(x), m.value(x)
            ref = m.output(naive_attention(q, k, v, 2, attention_mask="causal"))
    finally:
        handle.remove()
    torch.testing.assert_close(y, ref, atol=1e-5, rtol=1e-5)
    assert (y - before).abs().max() > 1e-3
    assert m.fusable()


def _query_hook(net):
    _att(net).query.register_forward_hook(lambda mod, args, out: out * 3)


def _query_lora(net):
    peft.get_peft_model(net, peft.LoraConfig(target_modules=["query"], init_lora_weights=False))


@pytest.mark.parametrize("wrap", [_query_hook, _parametrized, _query_lora])
def test_a_stream_sees_a_projection_wrapped_after_it_began(wrap):
    """Wrapping the query after the stream began: the next steps use it without reset()
    (queries leave the cache alone, so they equal the wrapped network's full pass there)."""
    net, inputs = _make("self")
    x = inputs["x"]
    with torch.no_grad():
        plain = net(x)
    s = net.stream()
    torch.testing.assert_close(s.step(x[:, :3]), plain[:, :3], atol=1e-5, rtol=1e-5)
    wrap(net)
    with torch.no_grad():
        wrapped = net(x)
    assert (wrapped[:, 3:] - plain[:, 3:]).abs().max() > 1e-3
    torch.testing.assert_close(s.step(x[:, 3:4]), wrapped[:, 3:4], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(s.step(x[:, 4:6]), wrapped[:, 4:6], atol=1e-5, rtol=1e-5)


# ------------------------------------------------------------------ peft, end to end ----------

@pytest.mark.parametrize("case", ["self", "self-gqa", "self-rotary", "mha", "mha-gqa-rotary"])
def test_peft_lora_changes_outputs_after_a_b_update_and_merges_exactly(case):
    net, inputs = _make(case)
    with torch.no_grad():
        before = net(inputs)
    model = peft.get_peft_model(net, peft.LoraConfig(target_modules=["query", "value"]))
    with torch.no_grad():
        torch.testing.assert_close(net(inputs), before)          # B starts at zero
        for name, p in net.named_parameters():
            if "lora_B" in name:
                p.normal_()
    check_everywhere(net, inputs, before)
    with torch.no_grad():
        lora = net(inputs)
        merged = model.merge_and_unload()
        assert merged is net and type(_att(net).query) is nn.Linear
        assert not isinstance(_att(net), SelfAttentionModule) or _att(net).fusable()
        torch.testing.assert_close(net(inputs), lora, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(streamed(net, inputs), lora, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("case", ["self", "self-gqa", "mha-gqa-rotary", "cross"])
def test_peft_lora_trains_with_al_train_and_only_lora_changes(case):
    net, inputs = _make(case)
    peft.get_peft_model(net, peft.LoraConfig(r=4, target_modules=["query", "value"],
                                             init_lora_weights=False))
    torch.manual_seed(2)
    target = torch.randn(2, T, C)
    start = {n: p.detach().clone() for n, p in net.named_parameters()}
    opts = al.TrainingOptions(solver="adam", learning_rate=1e-2, max_epochs=20, batch_size=2,
                              verbose=False, seed=0)
    info = al.train(net, inputs, target, loss="mse", options=opts)
    losses = info.history["loss"]
    assert losses[-1] < 0.9 * losses[0], losses
    changed = {n for n, p in net.named_parameters() if not torch.equal(p, start[n])}
    assert changed and all("lora_" in n for n in changed), changed
    assert any("query" in n for n in changed) and any("value" in n for n in changed)
    net.eval()
    with torch.no_grad():
        torch.testing.assert_close(net(inputs), reference(net, inputs), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(streamed(net, inputs), net(inputs).detach(), atol=1e-5,
                               rtol=1e-5)


def test_a_linear_subclass_trains_its_own_parameter():
    net, inputs = _make("self")
    _subclass(net)
    shift = _att(net).query.shift
    start = shift.detach().clone()
    opts = al.TrainingOptions(max_epochs=3, batch_size=2, verbose=False, seed=0)
    al.train(net, inputs, torch.randn(2, T, C), loss="mse", options=opts)
    assert not torch.equal(shift, start)
