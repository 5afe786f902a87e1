"""L.MixtureOfExperts: equal to transformers' MixtralSparseMoeBlock on the same weights (values
and gradients) and to a step-by-step reference; every expert learns (a zero gradient where no
step chose it); it streams, takes padded batches, saves, loads and exports like any layer."""
import pytest
import torch
import torch.nn.functional as F

import attnlab as al
from attnlab import layers as L
from attnlab.core.spec import Spec

C, UNITS = 8, 12


def moe_net(num_experts=4, top_k=2, activation="silu", features=False, seed=0):
    torch.manual_seed(seed)
    first = L.FeatureInput(C, name="x") if features else L.SequenceInput(C, name="x")
    net = al.Network([first, L.MixtureOfExperts(num_experts, UNITS, top_k=top_k,
                                                activation=activation, name="moe")])
    with torch.no_grad():
        for p in net.parameters():
            p.normal_(0, 0.4)
    return net


def reference(net, x, num_experts, top_k, act=F.silu):
    """Each step on its own, in plain loops: softmax over the router's logits, the top_k
    experts, their probabilities renormalised, the SwiGLU experts' weighted sum."""
    w = net.learnables
    steps = x.reshape(-1, x.shape[-1])
    out = torch.zeros_like(steps)
    for n in range(steps.shape[0]):
        h = steps[n]
        probs = torch.softmax(w["moe/router.weight"] @ h, dim=-1)
        top = sorted(range(num_experts), key=lambda e: -probs[e].item())[:top_k]
        total = sum(probs[e] for e in top)
        for e in sorted(top):
            gate, up = w[f"moe/experts.{e}.gate.weight"], w[f"moe/experts.{e}.up.weight"]
            y = w[f"moe/experts.{e}.down.weight"] @ (act(gate @ h) * (up @ h))
            out[n] = out[n] + probs[e] / total * y
    return out.reshape(x.shape)


def mixtral_block(net, num_experts, top_k):
    """transformers' MixtralSparseMoeBlock holding the network's weights."""
    transformers = pytest.importorskip("transformers")
    from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock
    transformers.utils.logging.set_verbosity_error()
    config = transformers.MixtralConfig(hidden_size=C, intermediate_size=UNITS,
                                        num_local_experts=num_experts,
                                        num_experts_per_tok=top_k)
    config._experts_implementation = "eager"
    block = MixtralSparseMoeBlock(config)
    w = net.learnables
    with torch.no_grad():
        block.gate.weight.copy_(w["moe/router.weight"])
        for e in range(num_experts):
            block.experts.gate_up_proj[e].copy_(torch.cat(
                [w[f"moe/experts.{e}.gate.weight"], w[f"moe/experts.{e}.up.weight"]]))
            block.experts.down_proj[e].copy_(w[f"moe/experts.{e}.down.weight"])
    return block


@pytest.mark.parametrize("num_experts,top_k", [(4, 2), (4, 1), (3, 3), (8, 2)])
def test_equals_mixtrals_block_values_and_gradients(num_experts, top_k):
    net = moe_net(num_experts, top_k)
    block = mixtral_block(net, num_experts, top_k)
    x = torch.randn(3, 7, C, requires_grad=True)
    x_hf = x.detach().clone().requires_grad_()
    ours, theirs = net(x), block(x_hf)
    assert torch.allclose(ours, theirs, atol=1e-5)
    target = torch.randn_like(ours)
    (ours * target).sum().backward()
    (theirs * target).sum().backward()
    assert torch.allclose(x.grad, x_hf.grad, atol=1e-5)
    w = net.learnables
    assert torch.allclose(w["moe/router.weight"].grad, block.gate.weight.grad, atol=1e-5)
    for e in range(num_experts):
        gate_up = torch.cat([w[f"moe/experts.{e}.gate.weight"].grad,
                             w[f"moe/experts.{e}.up.weight"].grad])
        assert torch.allclose(gate_up, block.experts.gate_up_proj.grad[e], atol=1e-5)
        assert torch.allclose(w[f"moe/experts.{e}.down.weight"].grad,
                              block.experts.down_proj.grad[e], atol=1e-5)


@pytest.mark.parametrize("features", [False, True])
@pytest.mark.parametrize("activation,act", [("silu", F.silu), ("gelu", F.gelu)])
def test_equals_the_step_by_step_reference(features, activation, act):
    net = moe_net(5, 2, activation, features)
    x = torch.randn(4, C) if features else torch.randn(2, 6, C)
    with torch.no_grad():
        assert torch.allclose(net(x), reference(net, x, 5, 2, act), atol=1e-5)


def test_all_experts_is_the_softmax_weighted_sum():
    net = moe_net(3, 3)
    x = torch.randn(2, 4, C)
    w = net.learnables
    probs = torch.softmax(x @ w["moe/router.weight"].T, dim=-1)
    experts = [(F.silu(x @ w[f"moe/experts.{e}.gate.weight"].T) * (x @ w[f"moe/experts.{e}.up.weight"].T))
               @ w[f"moe/experts.{e}.down.weight"].T for e in range(3)]
    want = sum(probs[..., e:e + 1] * experts[e] for e in range(3))
    with torch.no_grad():
        assert torch.allclose(net(x), want, atol=1e-5)


def test_an_expert_no_step_chose_gets_a_zero_gradient():
    net = moe_net(4, 2)
    with torch.no_grad():
        net.learnables["moe/router.weight"][3] = -10.0           # never among the top 2 …
    x = torch.rand(2, 5, C) + 0.1                                # … for positive channels
    net(x).sum().backward()
    for part in ("gate", "up", "down"):
        grad = net.learnables[f"moe/experts.3.{part}.weight"].grad
        assert grad is not None and torch.count_nonzero(grad) == 0
        assert torch.count_nonzero(net.learnables[f"moe/experts.0.{part}.weight"].grad) > 0


def test_streams_and_takes_padded_batches():
    net = moe_net().eval()
    x = torch.randn(2, 6, C)
    s = net.stream()
    steps = torch.cat([s.step(x[:, :2])] + [s.step(x[:, t:t + 1]) for t in range(2, 6)], 1)
    assert torch.allclose(steps, net(x), atol=1e-6)
    seqs = [torch.randn(5, C), torch.randn(2, C)]
    together = net.predict(seqs)
    assert torch.allclose(together[1][:2], net.predict([seqs[1]])[0], atol=1e-6)


def test_saved_and_loaded(tmp_path):
    net = moe_net(4, 2, "gelu-tanh").eval()
    net.save(tmp_path / "moe.attnlab")
    back = al.load(tmp_path / "moe.attnlab").eval()
    layer = back.layers["moe"]
    assert (layer.num_experts, layer.units, layer.top_k, layer.activation) == (4, UNITS, 2, "gelu-tanh")
    x = torch.randn(2, 5, C)
    assert torch.equal(back(x), net(x))


def test_learnables_as_documented():
    net = moe_net(2, 1)
    shapes = {k: tuple(v.shape) for k, v in net.learnables.items()}
    assert shapes == {"moe/router.weight": (2, C),
                      **{f"moe/experts.{e}.{p}.weight": s for e in range(2)
                         for p, s in (("gate", (UNITS, C)), ("up", (UNITS, C)), ("down", (C, UNITS)))}}
    assert net.analyze().total_learnables == 2 * C + 2 * 3 * UNITS * C


def test_export_onnx_checked_by_onnxruntime(tmp_path):
    pytest.importorskip("onnxruntime")
    net = moe_net().eval()
    assert net.export_onnx(tmp_path / "moe.onnx").max_error < 1e-4


@pytest.mark.parametrize("kw,words", [
    (dict(num_experts=4, units=8, top_k=5), "'top_k': expected"),
    (dict(num_experts=0, units=8), "'num_experts'"),
    (dict(num_experts=4, units=8, activation="mish"), "'activation'"),
])
def test_bad_arguments_are_named(kw, words):
    with pytest.raises(al.ArgumentError, match=words):
        L.MixtureOfExperts(**kw)


def test_images_are_refused_naming_the_port():
    layer = L.MixtureOfExperts(4, 8, name="moe")
    with pytest.raises(al.AttnlabError, match="layer 'moe' port 'in'"):
        layer.infer({"in": Spec.image(3, 4, 4)})


def test_a_billion_experts_is_refused_when_made_naming_the_limit():
    # it used to be accepted and a module made per expert, for hours and tens of GB
    with pytest.raises(al.ArgumentError) as info:
        L.MixtureOfExperts(10**9, 8, name="moe")
    msg = str(info.value)
    assert "MixtureOfExperts 'moe' argument 'num_experts'" in msg
    assert "≤ 1024" in msg and "received 1000000000" in msg


def test_the_most_experts_still_build():
    layer = L.MixtureOfExperts(1024, 1, top_k=1, name="moe")
    analysis = al.Network([L.SequenceInput(2, name="x"), layer]).analyze()
    assert analysis.ok and analysis.total_learnables == 1024 * (2 + 3 * 2)


def test_experts_too_big_to_hold_are_refused_by_the_analysis():
    net = al.Network([L.SequenceInput(4096, name="x"), L.MixtureOfExperts(8, 10**9, name="moe")])
    analysis = net.analyze()
    assert not analysis.ok
    msg = str(analysis.issues[0])
    assert "'moe'" in msg and "8×3000000000×4096" in msg and "Use fewer experts or units" in msg
