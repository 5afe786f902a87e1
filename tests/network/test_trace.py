"""`net.trace`: capturing and patching layer outputs and attention's inside by name, on
hand-built, nested, seed, MATLAB-built and pretrained networks."""
from unittest import mock

import pytest
import torch
import torch.nn.functional as F

import attnlab as al
from attnlab import layers as L
from attnlab.cli.demos.seed1 import answer_network
from attnlab.network.tracing import names


def _net(dropout=0.0):
    torch.manual_seed(0)
    return al.Network([L.SequenceInput(4, name="in"), L.Dense(8, name="fc"),
                       L.SelfAttention(2, 8, dropout=dropout, name="sa"), L.ReLU(name="relu"),
                       L.Dense(3, name="head")]).eval()


def _x(b=2, t=5):
    return torch.randn(b, t, 4, generator=torch.Generator().manual_seed(1))


def test_layer_outputs_equal_the_network_and_a_hand_built_forward():
    net = _net()
    x = _x()
    t = net.trace(x, capture=["fc", "sa/out", "head/out"])
    assert torch.equal(t.outputs, net(x))
    assert torch.equal(t["head"], t.outputs)
    mods = net.layer_modules
    assert torch.equal(t["fc/out"], mods["fc"](x))
    assert torch.equal(t["fc"], t["fc/out"])          # a single output: the layer's name alone
    assert torch.equal(t["sa/out"], mods["sa"](mods["fc"](x)))
    assert list(t) == ["fc/out", "sa/out", "head/out"] and len(t) == 3
    assert "fc" in t and "sa/scores" not in t


def test_scores_equal_the_explicit_weights_and_sum_to_one_over_real_keys():
    net = _net()
    seqs = [torch.randn(5, 4), torch.randn(3, 4)]
    t = net.trace(seqs, capture=["sa/scores", "fc"])
    s = t["sa/scores"]
    assert s.shape == (2, 2, 5, 5)
    assert torch.all(s[1, :, :, 3:] == 0)                      # padded keys weigh nothing
    torch.testing.assert_close(s[0].sum(-1), torch.ones(2, 5))
    torch.testing.assert_close(s[1, :, :3].sum(-1), torch.ones(2, 3))
    mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    _, weights = net.layer_modules["sa"](t["fc"], masks=(mask,), need_weights=True)
    torch.testing.assert_close(s, weights, rtol=0, atol=0)


def test_patching_a_layer_output_changes_downstream_as_a_hand_built_computation():
    net = _net()
    x = _x()
    patched = torch.randn(2, 5, 8)
    t = net.trace(x, patch={"sa": patched}, capture=["relu"])
    mods = net.layer_modules
    assert torch.equal(t["relu"], torch.relu(patched))
    assert torch.equal(t.outputs, mods["head"](torch.relu(patched)))
    doubled = net.trace(x, patch={"fc/out": lambda v: 2 * v})
    assert torch.equal(doubled.outputs, mods["head"](torch.relu(mods["sa"](2 * mods["fc"](x)))))


def test_identity_patches_leave_the_outputs_equal():
    net = _net()
    x = _x()
    same = lambda v: v  # noqa: E731
    t = net.trace(x, patch={"fc": same, "sa/heads": same, "head": same})
    assert torch.equal(t.outputs, net(x))
    t = net.trace(x, patch={"*": same})             # every value, the weights' path too
    torch.testing.assert_close(t.outputs, net(x))


def test_star_captures_every_name_and_the_repr_lists_them():
    net = _net()
    t = net.trace(_x(), capture="*")
    assert list(t) == names(net)
    assert set(t) >= {"in/out", "fc/out", "sa/query", "sa/key", "sa/scores", "sa/heads",
                      "relu/out", "head/out"}
    text = repr(t)
    assert "sa/scores" in text and "2×2×5×5" in text and "sa/heads" in text and "2×5×2×4" in text


def test_fused_kernel_unless_the_scores_are_asked_for():
    net = _net()
    x = _x()
    with mock.patch.object(F, "scaled_dot_product_attention",
                           wraps=F.scaled_dot_product_attention) as spy:
        net(x)
        net.trace(x, capture=["sa/heads", "sa/query", "fc"])
        assert spy.call_count == 2
        net.trace(x, capture=["sa/scores"])
        assert spy.call_count == 2
    assert net.layer_modules["sa"].probe is None           # the probe is gone after the call


def test_gradients_flow_through_a_trace_in_train_mode():
    net = _net(dropout=0.0).train()
    x = _x().requires_grad_()
    t = net.trace(x, capture=["fc", "sa/scores"])
    (g,) = torch.autograd.grad(t.outputs.sum(), t["fc"], retain_graph=True)
    assert g.shape == (2, 5, 8) and g.abs().sum() > 0
    t["sa/scores"][0, 0, 1, 2].backward()
    assert x.grad is not None and x.grad.abs().sum() > 0
    with torch.no_grad():
        assert not net.trace(x, capture=["fc"])["fc"].requires_grad


def test_nested_networks_name_their_layers_outer_inner_port():
    torch.manual_seed(0)
    inner = al.Serial(L.Dense(8, name="proj"), L.SelfAttention(2, 8, name="att"))
    inner.name = "block"
    net = al.Network([L.SequenceInput(4, name="in"), inner, L.Dense(2, name="out")])
    block = next(n for n in net.layer_map if n not in ("in", "out"))
    x = _x()
    t = net.trace(x, capture=[f"{block}/*"])
    assert f"{block}/proj/out" in t and f"{block}/att/scores" in t
    inner_mod = net.layer_modules[block]
    assert torch.equal(t[f"{block}/proj"], inner_mod.layer_modules["proj"](x))
    zero = torch.zeros(2, 5, 8)
    t = net.trace(x, patch={f"{block}/att/out": zero})
    assert torch.equal(t.outputs, net.layer_modules["out"](zero))
    t = net.trace(x, patch={f"{block}/att/heads": torch.zeros(2, 5, 2, 4)})
    expected = net.layer_modules["out"](inner_mod.layer_modules["att"].output(zero))
    torch.testing.assert_close(t.outputs, expected)


def test_seed_network_lstm_attention_with_two_inputs():
    torch.manual_seed(0)
    net = answer_network(channels=16, heads=2).eval()
    xd, xe = torch.randn(2, 6, 1), torch.randn(2, 4, 1)
    inputs = {"decoder-input": xd, "encoder-input": xe}
    t = net.trace(inputs, capture=["cross-attention/*", "query"])
    assert t["cross-attention/scores"].shape == (2, 2, 6, 4)
    assert t["cross-attention/key"].shape == (2, 2, 4, 8)
    torch.testing.assert_close(t["cross-attention/query"],
                               t["query"].view(2, 6, 2, 8).transpose(1, 2))
    torch.testing.assert_close(t.outputs, net(inputs))


def test_matlab_built_network():
    from attnlab import matlab as M
    torch.manual_seed(0)
    net = M.dlnetwork([M.sequenceInputLayer(3, Name="in"),
                       M.selfAttentionLayer(2, 8, Name="sa"),
                       M.fullyConnectedLayer(2, Name="fc")])
    x = torch.randn(1, 4, 3)
    t = net.trace(x, capture=["sa/scores", "fc"])
    assert t["sa/scores"].shape == (1, 2, 4, 4)
    torch.testing.assert_close(t["fc"], net(x))


def test_patching_a_head_to_zero_equals_zeroing_its_value_slice():
    net = _net()
    x = _x()
    sa = net.layer_modules["sa"]
    ablate = lambda h: torch.cat([h[:, :, :1], torch.zeros_like(h[:, :, 1:])], 2)  # noqa: E731
    t = net.trace(x, patch={"sa/heads": ablate})
    with torch.no_grad():
        sa.value.weight[4:] = 0
        sa.value.bias[4:] = 0
    sa.pack_qkv()
    torch.testing.assert_close(t.outputs, net(x))


# -- errors -----------------------------------------------------------------------------------

def test_a_pattern_matching_nothing_is_refused_with_close_names():
    net = _net()
    with pytest.raises(al.ArgumentError, match=r"capture pattern 'sa/score' matches no name of "
                                               r"the network\. Did you mean 'sa/scores'"):
        net.trace(_x(), capture=["sa/score"])
    with pytest.raises(al.ArgumentError, match=r"patch name 'fcc' matches no name.*'fc'"):
        net.trace(_x(), patch={"fcc": torch.zeros(1)})


def test_a_patch_of_the_wrong_size_names_the_port_expected_and_received():
    net = _net()
    with pytest.raises(al.SizeError, match=r"layer 'fc' port 'out': expected a patch of size "
                                           r"2×5×8, but the patch is a tensor of size 2×5×4"):
        net.trace(_x(), patch={"fc": torch.zeros(2, 5, 4)})
    with pytest.raises(al.SizeError, match=r"layer 'sa' port 'scores': expected a patch of size "
                                           r"2×2×5×5, but the patch function returned a tensor "
                                           r"of size 2×2×5×4"):
        net.trace(_x(), patch={"sa/scores": lambda s: s[..., :4]})
    assert net.layer_modules["sa"].probe is None            # removed after the error too


def test_a_patch_that_is_neither_tensor_nor_function_is_refused():
    with pytest.raises(al.ArgumentError, match=r"the patch of 'fc' must be a tensor or a "
                                               r"function.*received float"):
        _net().trace(_x(), patch={"fc": 0.0})


def test_an_unknown_name_in_a_trace_is_refused_with_close_names():
    t = _net().trace(_x(), capture=["sa/scores"])
    with pytest.raises(al.ArgumentError, match=r"nothing captured under 'sa/score'.*"
                                               r"Did you mean 'sa/scores'"):
        t["sa/score"]


def test_trace_is_exported():
    assert al.Trace is type(_net().trace(_x()))


# -- against transformers, on tiny random checkpoints ------------------------------------------

@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    from pretrained_helpers import quiet_transformers, save_checkpoint
    transformers = quiet_transformers()
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=60,
                                     n_positions=16)
    model = transformers.GPT2LMHeadModel(config)
    model.set_attn_implementation("eager")            # output_attentions
    folder = save_checkpoint(model, tmp_path_factory.mktemp("gpt2"))
    return model, al.from_pretrained(folder)


def _ids(b, t, vocab=60):
    return torch.randint(0, vocab, (b, t), generator=torch.Generator().manual_seed(2))


def test_gpt2_scores_and_block_outputs_equal_transformers(gpt2):
    hf, net = gpt2
    ids = _ids(2, 7)
    with torch.no_grad():
        theirs = hf(input_ids=ids, output_attentions=True, output_hidden_states=True)
        t = net.trace(input_ids=ids, capture=["h.*.attn/scores", "drop", "h.*.add_2", "ln_f"])
    for i, a in enumerate(theirs.attentions):
        torch.testing.assert_close(t[f"h.{i}.attn/scores"], a)
    # hidden_states: the embeddings, each block's output but the last, then the final norm's
    ours = [t["drop"], t["h.0.add_2"], t["ln_f"]]
    for o, h in zip(ours, theirs.hidden_states, strict=True):
        torch.testing.assert_close(o, h)
    torch.testing.assert_close(t.outputs, theirs.logits)


def test_gpt2_head_ablation_equals_zeroing_the_heads_value_columns(gpt2):
    import copy
    hf, net = gpt2
    ids = _ids(1, 6)
    h, d, c = 2, 8, 32                           # head 2 of 4, 8 channels each; v after q, k

    def ablate(x):
        x = x.clone()
        x[:, :, h] = 0
        return x
    with torch.no_grad():
        t = net.trace(input_ids=ids, patch={"h.1.attn/heads": ablate})
        cut = copy.deepcopy(hf)
        cols = slice(2 * c + h * d, 2 * c + (h + 1) * d)
        cut.transformer.h[1].attn.c_attn.weight[:, cols] = 0   # Conv1D: in × out
        cut.transformer.h[1].attn.c_attn.bias[cols] = 0
        theirs = cut(input_ids=ids).logits
        plain = hf(input_ids=ids).logits
    torch.testing.assert_close(t.outputs, theirs)
    assert not torch.allclose(theirs, plain)            # the head mattered


def test_bert_padded_batch_scores_equal_transformers_on_real_rows(tmp_path):
    from pretrained_helpers import quiet_transformers, save_checkpoint
    transformers = quiet_transformers()
    torch.manual_seed(0)
    config = transformers.BertConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=4,
                                     intermediate_size=48, vocab_size=50,
                                     max_position_embeddings=16)
    hf = transformers.BertModel(config)
    hf.set_attn_implementation("eager")
    net = al.from_pretrained(save_checkpoint(hf, tmp_path))
    lengths = [7, 4]
    ids = _ids(2, 7, 50)
    mask = (torch.arange(7)[None] < torch.tensor(lengths)[:, None]).long()
    with torch.no_grad():
        theirs = hf(input_ids=ids, attention_mask=mask, output_attentions=True)
        t = net.trace({"input_ids": ids, "attention_mask": mask}, capture=["*/scores"])
    assert len(t) == len(theirs.attentions) == 2
    for ours, a in zip(t.values(), theirs.attentions):
        assert torch.all(ours[1, :, :, 4:] == 0)               # padded keys
        for b, n in enumerate(lengths):
            torch.testing.assert_close(ours[b, :, :n, :n], a[b, :, :n, :n])


def test_vit_scores_equal_transformers(tmp_path):
    from pretrained_helpers import quiet_transformers, save_checkpoint
    transformers = quiet_transformers()
    torch.manual_seed(0)
    config = transformers.ViTConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=4,
                                    intermediate_size=48, image_size=8, patch_size=4,
                                    num_labels=3)
    hf = transformers.ViTForImageClassification(config)
    hf.set_attn_implementation("eager")
    net = al.from_pretrained(save_checkpoint(hf, tmp_path))
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        theirs = hf(pixel_values=x, output_attentions=True)
        t = net.trace(pixel_values=x, capture=["*/scores"])
    assert [v.shape for v in t.values()] == [(2, 4, 5, 5)] * 2
    for ours, a in zip(t.values(), theirs.attentions, strict=True):
        torch.testing.assert_close(ours, a)
    torch.testing.assert_close(t.outputs, theirs.logits)


def test_llama_query_and_key_after_rotary_equal_transformers(tmp_path):
    from pretrained_helpers import quiet_transformers
    transformers = quiet_transformers()
    from transformers.models.llama import modeling_llama
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=48,
                                      num_hidden_layers=1, num_attention_heads=4,
                                      num_key_value_heads=2, max_position_embeddings=32,
                                      tie_word_embeddings=False)
    hf = transformers.LlamaForCausalLM(config).eval()
    hf.set_attn_implementation("eager")
    hf.save_pretrained(tmp_path)
    net = al.from_pretrained(tmp_path)
    seen = []
    real = modeling_llama.apply_rotary_pos_emb

    def spy(*a, **kw):
        seen.append(real(*a, **kw))
        return seen[-1]
    ids = _ids(2, 6, 50)
    with torch.no_grad(), mock.patch.object(modeling_llama, "apply_rotary_pos_emb", spy):
        theirs = hf(input_ids=ids, output_attentions=True)
    (name,) = [n for n in names(net) if n.endswith("/scores")]
    layer = name[:-len("/scores")]
    with torch.no_grad():
        t = net.trace(input_ids=ids, capture=[f"{layer}/query", f"{layer}/key", name])
    (q, k), = seen
    assert t[f"{layer}/query"].shape == (2, 4, 6, 8) and t[f"{layer}/key"].shape == (2, 2, 6, 8)
    torch.testing.assert_close(t[f"{layer}/query"], q)
    torch.testing.assert_close(t[f"{layer}/key"], k)          # the key/value heads
    torch.testing.assert_close(t[name], theirs.attentions[0])  # one per query head


def test_trace_benchmark_smoke_compares_outputs_before_timing():
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "trace.py"
    spec = importlib.util.spec_from_file_location("trace_benchmark", path)
    bench = importlib.util.module_from_spec(spec)      # by path: the stdlib has a `trace`
    spec.loader.exec_module(bench)
    (row,) = bench.main(["--smoke"])
    assert row["diff"] <= 1e-5
    assert row["counts"]["scores"] == 2 and row["counts"]["all"] == len(names(bench.network(True)))
    assert all(len(v) == 1 and v[0] > 0 for v in row["samples"].values())
    assert row["diff_layer"] <= 1e-5 and set(row["layer"]) == {"forward", "scores"}


def test_a_traced_network_still_pickles_copies_and_edits():
    import copy
    import pickle
    net = _net()
    x = _x()
    net.trace(x, capture=["fc", "sa/scores"])
    again = pickle.loads(pickle.dumps(net))
    t = again.trace(x, capture=["fc"])
    assert torch.equal(t["fc"], net.layer_modules["fc"](x)) and torch.equal(t.outputs, net(x))
    twin = copy.deepcopy(net)
    assert torch.equal(twin.trace(x, capture=["head"])["head"], net(x))
    net.add(L.Dense(2, name="more"))
    net.connect("head", "more")
    t = net.trace(x, capture=["more"])                  # the edit's new layer has a name
    assert t["more"].shape == (2, 5, 2) and torch.equal(t.outputs, t["more"])


def test_a_patch_function_may_trace_the_same_network_again():
    net = _net()
    x = _x()
    inner = {}

    def from_another_run(v):
        inner["t"] = net.trace(x, capture=["fc", "sa/scores"])
        return inner["t"]["fc"] * 0
    t = net.trace(x, capture=["fc", "sa/scores"], patch={"fc": from_another_run})
    assert torch.equal(t["fc"], inner["t"]["fc"])              # both runs kept their values
    assert "sa/scores" in t and "sa/scores" in inner["t"]
    assert not torch.equal(t["sa/scores"], inner["t"]["sa/scores"])
