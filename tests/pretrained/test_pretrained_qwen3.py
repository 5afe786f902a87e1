"""Qwen3 checkpoints: Qwen2's graph with QK-norm (each head's query and key RMS-normalised
before the rotary embedding, in the attention module's transform_qk hook); equal to
transformers in float32, padded, streaming, generating the same tokens, saved back, ONNX."""
import pytest
import torch

import attnlab as al
from decoder_checks import (edited_copy, generate_equal, hf_logits, logits_equal,
                            onnx_equal, padded_equal, randomized_norms, saved_back_equal,
                            stream_equal)
from pretrained_helpers import quiet_transformers, relative_difference

transformers = pytest.importorskip("transformers")
quiet_transformers()

VOCAB = 64


def checkpoint(folder, **over):
    kw = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, head_dim=16,
              max_position_embeddings=128, initializer_range=0.4, tie_word_embeddings=False,
              rms_norm_eps=1e-5, rope_parameters={"rope_type": "default", "rope_theta": 500.0},
              pad_token_id=0, bos_token_id=1, eos_token_id=2)
    kw.update(over)
    torch.manual_seed(0)
    model = randomized_norms(transformers.Qwen3ForCausalLM(transformers.Qwen3Config(**kw)).eval())
    model.save_pretrained(folder)
    return model


@pytest.fixture(scope="module")
def qwen3(tmp_path_factory):
    folder = tmp_path_factory.mktemp("qwen3")
    return folder, checkpoint(folder)


def test_logits_equal_transformers(qwen3):
    folder, model = qwen3
    net = al.from_pretrained(folder)
    attn = net.layers["layers.0.self_attn"]
    assert attn.qk_norm == 1e-5 and attn.key_channels == 4 * 16
    assert "layers.0.self_attn/q_norm.weight" in net.learnables
    logits_equal(net, model, VOCAB)
    assert net.analyze().total_learnables == model.num_parameters()


def test_the_qk_norm_matters(qwen3):
    # the same network with the gains of q_norm set to others gives other logits
    folder, model = qwen3
    net = al.from_pretrained(folder)
    ids = torch.randint(0, VOCAB, (2, 7))
    with torch.no_grad():
        net.learnables["layers.0.self_attn/q_norm.weight"].mul_(3.0)
    assert relative_difference(net(ids), hf_logits(model, ids)) > 1e-3


def test_padded_batch_equals_transformers(qwen3):
    folder, model = qwen3
    padded_equal(al.from_pretrained(folder), model, VOCAB)


def test_greedy_generate_and_streaming_equal(qwen3):
    folder, model = qwen3
    net = al.from_pretrained(folder)
    generate_equal(net, model, VOCAB)
    stream_equal(net, VOCAB)


def test_save_pretrained_round_trip(tmp_path, qwen3):
    folder, model = qwen3
    saved_back_equal(al.from_pretrained(folder), model, folder, tmp_path / "back",
                     transformers.Qwen3ForCausalLM, VOCAB)


def test_attnlab_file_keeps_the_qk_norm(tmp_path, qwen3):
    folder, _ = qwen3
    net = al.from_pretrained(folder)
    net.save(tmp_path / "qwen3.attnlab")
    back = al.load(tmp_path / "qwen3.attnlab").eval()
    ids = torch.randint(0, VOCAB, (2, 6))
    assert torch.equal(back(ids), net(ids))


def test_export_onnx_runs_in_onnxruntime(tmp_path, qwen3):
    pytest.importorskip("onnxruntime")
    folder, _ = qwen3
    onnx_equal(al.from_pretrained(folder), tmp_path / "qwen3.onnx", VOCAB)


@pytest.mark.parametrize("over", [
    {"tie_word_embeddings": True, "attention_bias": True},
    {"use_sliding_window": True, "sliding_window": 4, "max_window_layers": 1},
])
def test_variants_equal_transformers(tmp_path, over):
    model = checkpoint(tmp_path, **over)
    net = al.from_pretrained(tmp_path)
    logits_equal(net, model, VOCAB, t=11)
    stream_equal(net, VOCAB, t=11)
    assert net.analyze().total_learnables == model.num_parameters()


@pytest.mark.parametrize("changes,words", [
    ({"rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 500.0}},
     ["rope_parameters", "linear", "\"default\"", "qwen3"]),
    ({"layer_types": ["full_attention", "chunked_attention"]},
     ["layer_types", "chunked_attention"]),
    ({"hidden_act": "mish"}, ["hidden_act", "mish"]),
])
def test_what_is_not_built_is_refused_by_name(tmp_path, qwen3, changes, words):
    folder, _ = qwen3
    with pytest.raises(al.NetworkError) as e:
        al.from_pretrained(edited_copy(folder, tmp_path / "edited", **changes))
    for w in words:
        assert w in str(e.value)
