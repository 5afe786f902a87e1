"""Mixtral checkpoints: built by transformers (random, offline), loaded as attnlab networks whose
feed-forward is L.MixtureOfExperts, equal to transformers in float32, padded, streaming,
generating the same tokens, saved back (one tensor per expert, as the file has them) and
exported."""
import json

import pytest
import torch

import attnlab as al
from attnlab import layers as L
from decoder_checks import (edited_copy, generate_equal, hf_logits, onnx_equal, padded_equal,
                            randomized_norms, saved_back_equal, stream_equal)
from pretrained_helpers import quiet_transformers, relative_difference

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
    randomized_norms(model)                    # norms other than 1 and 0: tested
    model.save_pretrained(folder)
    return model


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
    padded_equal(net, model, VOCAB)


def test_streaming_equals_the_forward_pass(mixtral):
    folder, _ = mixtral
    net = al.from_pretrained(folder)
    stream_equal(net, VOCAB)


def test_greedy_generate_equals_transformers(mixtral):
    folder, model = mixtral
    net = al.from_pretrained(folder)
    torch.manual_seed(1)
    ours = generate_equal(net, model, VOCAB, n=12)
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


@pytest.mark.parametrize("changes,words", [
    ({"router_jitter_noise": 0.1}, ["router_jitter_noise", "0.1"]),
    ({"num_experts_per_tok": 5}, ["num_experts_per_tok", f"at most num_local_experts ({EXPERTS})"]),
    ({"num_local_experts": 6}, ["block_sparse_moe.experts.4.w1.weight", "missing"]),
    ({"hidden_act": "mish"}, ["hidden_act", "mish"]),
])
def test_options_not_built_are_refused_by_name(tmp_path, mixtral, changes, words):
    folder, _ = mixtral
    with pytest.raises(al.NetworkError) as e:
        al.from_pretrained(edited_copy(folder, tmp_path, **changes))
    for w in words:
        assert w in str(e.value)


def test_save_pretrained_round_trip(tmp_path, mixtral):
    folder, model = mixtral
    net = al.from_pretrained(folder)
    saved_back_equal(net, model, folder, tmp_path / "back", transformers.MixtralForCausalLM, VOCAB)


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
    pytest.importorskip("onnxruntime")
    folder, _ = mixtral
    onnx_equal(al.from_pretrained(folder), tmp_path / "mixtral.onnx", VOCAB)
