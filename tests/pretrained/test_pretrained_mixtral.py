"""Mixtral checkpoints: built by transformers (random, offline), loaded as attnlab networks whose
feed-forward is L.MixtureOfExperts, equal to transformers in float32, padded, streaming,
generating the same tokens, saved back (one tensor per expert, as the file has them) and
exported."""
import json

import pytest
import torch

import attnlab as al
from attnlab import layers as L
from pretrained_helpers import hf_greedy, layout, quiet_transformers, relative_difference, \
    valid_steps

transformers = pytest.importorskip("transformers")
quiet_transformers()

VOCAB, EXPERTS = 64, 4


def checkpoint(folder, model_class=None, **over):
    kw = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, num_local_experts=EXPERTS,
              num_experts_per_tok=2, max_position_embeddings=128, initializer_range=0.1,
              rope_parameters={"rope_type": "default", "rope_theta": 1000.0},
              tie_word_embeddings=False, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    kw.update(over)
    torch.manual_seed(0)
    model = (model_class or transformers.MixtralForCausalLM)(transformers.MixtralConfig(**kw))
    model.eval()
    with torch.no_grad():                      # norms other than 1, so that they are tested
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(0.3 * torch.randn_like(p))
    model.save_pretrained(folder)
    return model


def hf_logits(model, ids, mask=None):
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=mask).logits


@pytest.fixture(scope="module")
def mixtral(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mixtral")
    return folder, checkpoint(folder)


def test_logits_equal_transformers(mixtral):
    folder, model = mixtral
    net = al.from_pretrained(folder)
    assert net.input_names == ["input_ids"] and net.output_names == ["logits"]
    moe = net.layers["layers.0.block_sparse_moe"]
    assert isinstance(moe, L.MixtureOfExperts)
    assert (moe.num_experts, moe.units, moe.top_k, moe.activation) == (EXPERTS, 48, 2, "silu")
    ids = torch.randint(0, VOCAB, (2, 9))
    assert relative_difference(net(ids), hf_logits(model, ids)) <= 1e-4
    assert net.analyze().total_learnables == model.num_parameters()


def test_each_expert_is_loaded_from_its_tensors(mixtral):
    folder, model = mixtral
    net = al.from_pretrained(folder)
    experts = model.model.layers[1].mlp.experts                 # transformers stacks them
    for e in range(EXPERTS):
        gate, up = experts.gate_up_proj[e].detach().chunk(2)
        assert torch.equal(net.learnables[f"layers.1.block_sparse_moe/experts.{e}.gate.weight"], gate)
        assert torch.equal(net.learnables[f"layers.1.block_sparse_moe/experts.{e}.up.weight"], up)
        assert torch.equal(net.learnables[f"layers.1.block_sparse_moe/experts.{e}.down.weight"],
                           experts.down_proj[e].detach())


def test_padded_batch_equals_transformers(mixtral):
    folder, model = mixtral
    net = al.from_pretrained(folder)
    lengths = [9, 4, 6]
    seqs = [torch.randint(3, VOCAB, (t,)) for t in lengths]
    ids = torch.zeros(3, 9, dtype=torch.long)
    mask = torch.zeros(3, 9, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, :len(s)], mask[i, :len(s)] = s, 1
    want = valid_steps(hf_logits(model, ids, mask), lengths)
    assert relative_difference(valid_steps(net(seqs), lengths), want) <= 1e-4
    padded = net(al.Padded(ids, mask.bool()))
    assert relative_difference(valid_steps(padded, lengths), want) <= 1e-4


def test_streaming_equals_the_forward_pass(mixtral):
    folder, _ = mixtral
    net = al.from_pretrained(folder)
    ids = torch.randint(0, VOCAB, (2, 8))
    full = net(ids)
    s = net.stream()
    steps = torch.cat([s.step(ids[:, :3])] + [s.step(ids[:, t:t + 1]) for t in range(3, 8)], 1)
    assert relative_difference(steps, full) <= 1e-4


def test_greedy_generate_equals_transformers(mixtral):
    folder, model = mixtral
    net = al.from_pretrained(folder)
    torch.manual_seed(1)
    prompt = torch.randint(3, VOCAB, (2, 5))
    ours = al.generate(net, start=prompt, stop=None, max_new_tokens=12).tokens
    assert ours.tolist() == hf_greedy(model, prompt, 12).tolist()
    assert len(set(ours.flatten().tolist())) > 4            # not one token over and over


@pytest.mark.parametrize("over", [
    {"num_experts_per_tok": 1, "tie_word_embeddings": True},
    {"num_local_experts": 3, "num_experts_per_tok": 3},
    {"sliding_window": 4},
    {"head_dim": 16, "num_key_value_heads": 1},
])
def test_variants_equal_transformers(tmp_path, over):
    model = checkpoint(tmp_path, **over)
    net = al.from_pretrained(tmp_path)
    ids = torch.randint(0, VOCAB, (2, 11))
    assert relative_difference(net(ids), hf_logits(model, ids)) <= 1e-4
    assert net.analyze().total_learnables == model.num_parameters()


def test_transformers_4_layout_loads_the_same(tmp_path, mixtral):
    folder, model = mixtral
    cfg = json.loads((folder / "config.json").read_text())
    cfg["rope_theta"] = cfg.pop("rope_parameters")["rope_theta"]
    cfg["torch_dtype"] = cfg.pop("dtype")
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "model.safetensors").write_bytes((folder / "model.safetensors").read_bytes())
    ids = torch.randint(0, VOCAB, (1, 9))
    assert relative_difference(al.from_pretrained(tmp_path)(ids), hf_logits(model, ids)) <= 1e-4


def edited_copy(tmp_path, folder, **changes):
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(changes)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "model.safetensors").write_bytes((folder / "model.safetensors").read_bytes())
    return tmp_path


@pytest.mark.parametrize("changes,words", [
    ({"router_jitter_noise": 0.1}, ["router_jitter_noise", "0.1"]),
    ({"num_experts_per_tok": 5}, ["num_experts_per_tok", f"at most num_local_experts ({EXPERTS})"]),
    ({"num_local_experts": 6}, ["block_sparse_moe.experts.4.w1.weight", "missing"]),
    ({"hidden_act": "mish"}, ["hidden_act", "mish"]),
])
def test_options_not_built_are_refused_by_name(tmp_path, mixtral, changes, words):
    folder, _ = mixtral
    with pytest.raises(al.NetworkError) as e:
        al.from_pretrained(edited_copy(tmp_path, folder, **changes))
    for w in words:
        assert w in str(e.value)


def test_save_pretrained_round_trip(tmp_path, mixtral):
    folder, model = mixtral
    net = al.from_pretrained(folder)
    net.save_pretrained(tmp_path / "back")
    assert layout(tmp_path / "back") == layout(folder)
    from safetensors import safe_open
    with safe_open(str(folder / "model.safetensors"), "pt") as a, \
            safe_open(str(tmp_path / "back" / "model.safetensors"), "pt") as b:
        for k in a.keys():
            assert torch.equal(a.get_tensor(k), b.get_tensor(k)), k
    again = transformers.MixtralForCausalLM.from_pretrained(tmp_path / "back").eval()
    ids = torch.randint(0, VOCAB, (1, 6))
    assert torch.equal(hf_logits(again, ids), hf_logits(model, ids))


def test_a_trained_expert_is_saved_back(tmp_path, mixtral):
    folder, _ = mixtral
    net = al.from_pretrained(folder)
    with torch.no_grad():
        net.learnables["layers.0.block_sparse_moe/experts.2.down.weight"].mul_(1.5)
        net.learnables["layers.1.block_sparse_moe/router.weight"].add_(0.05)
    net.save_pretrained(tmp_path / "tuned")
    tuned = transformers.MixtralForCausalLM.from_pretrained(tmp_path / "tuned").eval()
    ids = torch.randint(0, VOCAB, (2, 7))
    assert relative_difference(net(ids), hf_logits(tuned, ids)) <= 1e-4


def test_the_base_model_gives_the_last_hidden_state(tmp_path):
    model = checkpoint(tmp_path, transformers.MixtralModel)
    net = al.from_pretrained(tmp_path)
    assert net.output_names == ["last_hidden_state"]
    ids = torch.randint(0, VOCAB, (2, 6))
    with torch.no_grad():
        want = model(input_ids=ids).last_hidden_state
    assert relative_difference(net(ids), want) <= 1e-4


def test_attnlab_file_keeps_the_checkpoint_and_its_layout(tmp_path, mixtral):
    folder, model = mixtral
    net = al.from_pretrained(folder)
    net.save(tmp_path / "mixtral.attnlab")
    back = al.load(tmp_path / "mixtral.attnlab")
    ids = torch.randint(0, VOCAB, (2, 6))
    # equal up to the rounding of one matmul against three (q, k, v packed or mapped apart)
    torch.testing.assert_close(back.eval()(ids), net(ids), rtol=1e-6, atol=1e-6)
    back.save_pretrained(tmp_path / "hf")
    again = transformers.MixtralForCausalLM.from_pretrained(tmp_path / "hf").eval()
    assert torch.equal(hf_logits(again, ids), hf_logits(model, ids))


def test_export_onnx_runs_in_onnxruntime_at_two_lengths(tmp_path, mixtral):
    ort = pytest.importorskip("onnxruntime")
    folder, _ = mixtral
    net = al.from_pretrained(folder)
    assert net.export_onnx(tmp_path / "mixtral.onnx").max_error < 1e-4
    session = ort.InferenceSession(str(tmp_path / "mixtral.onnx"))
    for t in (3, 10):
        ids = torch.randint(0, VOCAB, (2, t))
        feeds = {"input_ids": ids.numpy(), "input_ids_mask": torch.ones(2, t, dtype=torch.bool).numpy()}
        got = torch.from_numpy(session.run(["logits"], feeds)[0])
        with torch.no_grad():
            assert relative_difference(got, net(ids)) <= 1e-4
