"""LoRA adapters: `net.add_lora` (targets, freezing, every path) and `net.merge_lora`."""
import pytest
import torch

import attnlab as al
from attnlab import layers as L
from attnlab.network.lora import LoraLinear

D, V = 16, 11


def _net(seed=0):
    torch.manual_seed(seed)
    net = al.Network([L.TokenInput(name="ids"), L.Embedding(V, D, name="wte"),
                      L.SelfAttention(2, D, attention_mask="causal", name="h.0.attn"),
                      L.Dense(D, name="h.0.mlp.c_fc"), L.GELU(name="h.0.mlp.act"),
                      L.SelfAttention(2, D, attention_mask="causal", name="h.1.attn"),
                      L.Dense(V, name="lm_head")])
    return net.eval()


def _ids(b=2, t=7, seed=0):
    return torch.randint(0, V, (b, t), generator=torch.Generator().manual_seed(seed))


def _train_adapters(net, seed=1):
    """B made nonzero, as training would, so that the adapters change the outputs."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, LoraLinear):
                m.lora_B.copy_(torch.randn(m.lora_B.shape, generator=g) * 0.1)


def _reference(net, ids):
    """The same network with each adapter's update added to a copy of its weight."""
    ref = _net()
    ref.load_state_dict({k: v for k, v in net.state_dict().items() if "lora_" not in k})
    with torch.no_grad():
        for name, m in net.named_modules():
            if isinstance(m, LoraLinear):
                w = ref.get_submodule(name).weight
                w += m.scaling * m.lora_B @ m.lora_A
    return ref(ids)


def test_add_lora_returns_what_it_adapted_and_freezes_the_rest():
    net = _net()
    got = net.add_lora(["h.*.attn/query", "h.*.attn/value", "h.*.mlp.c_fc"], rank=4, alpha=8)
    assert got == [("h.0.attn", "query"), ("h.0.attn", "value"), ("h.0.mlp.c_fc", None),
                   ("h.1.attn", "query"), ("h.1.attn", "value")]
    trainable = sorted(n for n, p in net.learnables.items() if p.requires_grad)
    assert trainable == sorted(["h.0.attn/query.lora_A", "h.0.attn/query.lora_B",
                                "h.0.attn/value.lora_A", "h.0.attn/value.lora_B",
                                "h.0.mlp.c_fc/lora_A", "h.0.mlp.c_fc/lora_B",
                                "h.1.attn/query.lora_A", "h.1.attn/query.lora_B",
                                "h.1.attn/value.lora_A", "h.1.attn/value.lora_B"])
    a = net.learnables["h.0.attn/query.lora_A"]
    b = net.learnables["h.0.attn/query.lora_B"]
    assert a.shape == (4, D) and b.shape == (D, 4)
    assert torch.count_nonzero(b) == 0 and torch.count_nonzero(a) > 0
    assert net.layer_modules["h.0.attn"].query.scaling == 2.0


def test_outputs_unchanged_until_trained():
    net, ids = _net(), _ids()
    with torch.no_grad():
        before = net(ids)
        net.add_lora(["h.*.attn/query", "h.*.attn/value", "lm_head"])
        after = net(ids)
    torch.testing.assert_close(after, before, rtol=0, atol=1e-6)


def test_pattern_matching_nothing_is_refused_with_close_names_and_changes_nothing():
    net = _net()
    with pytest.raises(al.ArgumentError, match=r"'h\.\*\.atn/query' matches no layer.*"
                                               r"Did you mean .*'h\.0\.attn'"):
        net.add_lora(["h.*.attn/query", "h.*.atn/query"])
    assert not any(isinstance(m, LoraLinear) for m in net.modules())
    assert all(p.requires_grad for p in net.parameters())


@pytest.mark.parametrize("target, message", [
    ("h.*.attn/querry", r"projection 'querry'.*query, key, value, output.*Did you mean 'query'"),
    ("h.*.attn", r"matches 'h\.0\.attn' \(SelfAttention\).*name an attention layer's projection"),
    ("h.0.mlp.act", r"'h\.0\.mlp\.act' \(GELU\)"),
])
def test_targets_without_a_linear_map_are_refused(target, message):
    with pytest.raises(al.ArgumentError, match=message):
        _net().add_lora(target)


def test_a_dense_layer_that_flattens_images_is_refused():
    net = al.Network([L.ImageInput((2, 3, 3), name="img"), L.Dense(4, name="fc")])
    with pytest.raises(al.ArgumentError, match=r"'fc' \(Dense\), none of which has a plain "
                                               r"linear map.*B×C or B×T×C"):
        net.add_lora("fc")
    x = torch.randn(2, 2, 3, 3)
    assert net(x).shape == (2, 4)                           # untouched, still flattening


@pytest.mark.parametrize("kw, message", [
    (dict(rank=0), "rank must be a positive int, received 0"),
    (dict(alpha=float("nan")), "alpha must be a positive finite number"),
    (dict(dropout=1.0), r"dropout must be a number in \[0, 1\), received 1.0"),
])
def test_bad_numbers_are_refused(kw, message):
    with pytest.raises(al.ArgumentError, match=message):
        _net().add_lora("lm_head", **kw)


def test_adapting_twice_is_refused():
    net = _net()
    net.add_lora("h.0.attn/query")
    with pytest.raises(al.ArgumentError, match=r"'h\.0\.attn/query' already has a LoRA adapter"):
        net.add_lora("h.*.attn/query")


def test_analyze_lists_the_adapters():
    net = _net()
    net.add_lora(["h.0.attn/query", "lm_head"], rank=2)
    a = net.analyze()
    assert a.learnables["h.0.attn"]["query.lora_A"] == (2, D)
    assert a.learnables["lm_head"]["lora_B"] == (V, 2)
    assert "query.lora_A" in a.table()
    base = _net().analyze().total_learnables
    assert a.total_learnables == base + 2 * D * 2 + 2 * D + V * 2


def test_trained_adapters_change_the_output_as_w_plus_scaled_ba():
    net, ids = _net(), _ids()
    net.add_lora(["h.*.attn/query", "h.*.attn/value", "h.*.mlp.c_fc", "lm_head"], rank=3,
                 alpha=5)
    _train_adapters(net)
    with torch.no_grad():
        ours, theirs = net(ids), _reference(net, ids)
        plain = _net()(ids)
    assert (ours - plain).abs().max() > 1e-3             # the adapters are on the path
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-5)


def _attention_net(scores, seed=0):
    torch.manual_seed(seed)
    return al.Network([L.SequenceInput(D, name="x"),
                       L.SelfAttention(2, D, attention_mask="causal", has_scores_output=scores,
                                       name="att")]).eval()


def test_weights_path_agrees_with_the_fused_path():
    x = torch.randn(2, 5, D, generator=torch.Generator().manual_seed(0))
    fused_net, weights_net = _attention_net(False), _attention_net(True)
    for net in (fused_net, weights_net):
        net.add_lora(["att/key", "att/value", "att/output"], rank=2)
    _train_adapters(fused_net)
    weights_net.load_state_dict(fused_net.state_dict())
    with torch.no_grad():
        fused, weighted = fused_net(x), weights_net(x)
        plain = _attention_net(False)(x)
    assert set(weighted) == {"att/out", "att/scores"}
    assert (fused - plain).abs().max() > 1e-3
    torch.testing.assert_close(weighted["att/out"], fused, rtol=0, atol=1e-6)


def test_stream_equals_the_full_forward_with_adapters():
    net, ids = _net(), _ids(2, 6)
    net.add_lora(["h.*.attn/query", "h.*.attn/key", "h.*.attn/value", "h.*.attn/output",
                  "h.*.mlp.c_fc"], rank=2)
    _train_adapters(net)
    with torch.no_grad():
        full = net(ids)
        s = net.stream()
        steps = torch.cat([s.step(ids[:, i:i + 1]) for i in range(6)], dim=1)
    assert (full - _net()(ids)).abs().max() > 1e-3
    torch.testing.assert_close(steps, full, rtol=0, atol=1e-5)


def test_generate_reads_the_adapters():
    net = _net()
    net.add_lora(["h.*.attn/query", "h.*.attn/value"], rank=2)
    _train_adapters(net, seed=3)
    start = _ids(1, 3)
    out = al.generate(net, start, max_new_tokens=4)
    ids = start
    with torch.no_grad():                                   # greedy by the full forward
        for _ in range(4):
            ids = torch.cat([ids, net(ids)[:, -1:].argmax(-1)], dim=1)
    assert torch.equal(out.tokens, ids[:, 3:])


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_training_moves_only_the_adapters(precision):
    net, ids = _net(), _ids(4, 5)
    net.add_lora(["h.*.attn/query", "h.*.attn/value"], rank=2)
    frozen = {n: p.detach().clone() for n, p in net.learnables.items() if "lora_" not in n}
    before_b = net.learnables["h.0.attn/query.lora_B"].detach().clone()
    opts = al.TrainingOptions(solver="adam", learning_rate=1e-2, max_epochs=2, batch_size=4,
                              plots=None, precision=precision, device="cpu", verbose=False)
    al.train(net, ids, ids, loss="crossentropy", options=opts)
    after = net.learnables
    assert all(torch.equal(after[n], v) for n, v in frozen.items())
    assert not torch.equal(after["h.0.attn/query.lora_B"], before_b)
    assert after["h.0.attn/query.lora_A"].dtype == torch.float32


def test_half_precision_base_gets_float32_adapters_and_runs():
    net, ids = _net(), _ids()
    net.to(torch.bfloat16)
    net.add_lora("h.*.attn/value", rank=2)
    m = net.layer_modules["h.0.attn"].value
    assert m.weight.dtype == torch.bfloat16 and m.lora_A.dtype == torch.float32
    _train_adapters(net)
    with torch.no_grad():
        y = net(ids)
    assert y.dtype == torch.bfloat16 and torch.isfinite(y).all()


# -- merge_lora ------------------------------------------------------------------------------
def _adapted(seed=1):
    net = _net()
    net.add_lora(["h.*.attn/query", "h.*.attn/value", "h.*.mlp.c_fc", "lm_head"], rank=3,
                 alpha=6)
    _train_adapters(net, seed)
    return net


def test_merge_keeps_the_outputs_and_leaves_a_plain_network():
    net, ids = _adapted(), _ids()
    with torch.no_grad():
        before = net(ids)
        merged = net.merge_lora()
        after = net(ids)
    assert merged == [("h.0.attn", "query"), ("h.0.attn", "value"), ("h.0.mlp.c_fc", None),
                      ("h.1.attn", "query"), ("h.1.attn", "value"), ("lm_head", None)]
    torch.testing.assert_close(after, before, rtol=0, atol=1e-6)
    assert (after - _net()(ids)).abs().max() > 1e-3         # the updates are in the weights
    assert not any(isinstance(m, LoraLinear) for m in net.modules())
    assert type(net.layer_modules["lm_head"]) is torch.nn.Linear
    assert list(net.learnables) == list(_net().learnables)
    assert all(p.requires_grad for p in net.parameters())   # what add_lora froze is thawed
    assert net.layer_modules["h.0.attn"].fusable()          # one matmul for q|k|v again


def test_merged_network_saves_and_loads_as_a_plain_one(tmp_path):
    net, ids = _adapted(), _ids()
    net.merge_lora()
    net.save(tmp_path / "merged.attnlab")
    back = al.load(tmp_path / "merged.attnlab").eval()
    assert set(back.state_dict()) == set(_net().state_dict())
    with torch.no_grad():
        torch.testing.assert_close(back(ids), net(ids), rtol=0, atol=0)


def test_merged_network_streams_as_its_forward():
    net, ids = _adapted(), _ids(1, 5)
    net.merge_lora()
    with torch.no_grad():
        full = net(ids)
        s = net.stream()
        steps = torch.cat([s.step(ids[:, i:i + 1]) for i in range(5)], dim=1)
    torch.testing.assert_close(steps, full, rtol=0, atol=1e-5)


def test_merge_without_adapters_is_refused():
    with pytest.raises(al.NetworkError, match=r"no LoRA adapters.*add_lora"):
        _net().merge_lora()


def test_adapters_can_be_added_again_after_a_merge():
    net = _adapted()
    net.merge_lora()
    assert net.add_lora("h.0.attn/query") == [("h.0.attn", "query")]
    assert [n for n, p in net.learnables.items() if p.requires_grad] == \
        ["h.0.attn/query.lora_A", "h.0.attn/query.lora_B"]


def test_saving_with_adapters_is_refused_until_merged(tmp_path):
    net = _adapted()
    for save in (net.save, net.save_pretrained):
        with pytest.raises(al.NetworkError, match=r"has LoRA adapters \(h\.0\.attn/query, "
                                                  r"h\.0\.attn/value, h\.0\.mlp\.c_fc, h\.1\.attn/"
                                                  r"query and 2 more\).*net\.merge_lora\(\)"):
            save(tmp_path / "net.attnlab")
    assert not (tmp_path / "net.attnlab").exists()


def test_merge_of_a_bfloat16_base_keeps_its_dtype():
    net, ids = _net(), _ids()
    net.to(torch.bfloat16)
    net.add_lora(["h.*.attn/value", "lm_head"], rank=2)
    _train_adapters(net)
    with torch.no_grad():
        before = net(ids).float()
        net.merge_lora()
        after = net(ids).float()
    assert net.layer_modules["lm_head"].weight.dtype == torch.bfloat16
    assert (after - before).abs().max() <= 0.1 * before.abs().max()   # bf16 rounding of W+ΔW
