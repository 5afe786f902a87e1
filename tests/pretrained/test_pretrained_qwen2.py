"""Qwen2 checkpoints, a built-in family: Llama's graph with biases on the query, key and value
projections (none on the output), sliding-window layers as `layer_types` says; equal to
transformers in float32, padded, streaming, generating the same tokens, saved back."""
import pytest
import torch

import attnlab as al
from decoder_checks import (edited_copy, generate_equal, hf_logits, logits_equal, onnx_equal,
                            padded_equal, randomized_norms, saved_back_equal, stream_equal, close)
from pretrained_helpers import quiet_transformers, relative_difference

transformers = pytest.importorskip("transformers")
quiet_transformers()

VOCAB = 64


def checkpoint(folder, **over):
    kw = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
              initializer_range=0.4, tie_word_embeddings=False,
              rope_parameters={"rope_type": "default", "rope_theta": 500.0},
              pad_token_id=0, bos_token_id=1, eos_token_id=2)
    kw.update(over)
    torch.manual_seed(0)
    model = randomized_norms(transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**kw)).eval())
    model.save_pretrained(folder)
    return model


@pytest.fixture(scope="module")
def qwen2(tmp_path_factory):
    folder = tmp_path_factory.mktemp("qwen2")
    return folder, checkpoint(folder)


def test_logits_equal_transformers(qwen2):
    folder, model = qwen2
    net = al.from_pretrained(folder)
    assert net.input_names == ["input_ids"] and net.output_names == ["logits"]
    attn = net.layers["layers.0.self_attn"]
    assert attn.projection_bias and attn.output_bias is False
    logits_equal(net, model, VOCAB)
    assert net.analyze().total_learnables == model.num_parameters()


def test_no_output_bias_is_built_and_none_is_loaded(qwen2):
    folder, _ = qwen2
    names = list(al.from_pretrained(folder).learnables)
    assert "layers.0.self_attn/query.bias" in names and "layers.0.self_attn/value.bias" in names
    assert not any(n.endswith("self_attn/output.bias") for n in names)


def test_padded_batch_equals_transformers(qwen2):
    folder, model = qwen2
    padded_equal(al.from_pretrained(folder), model, VOCAB)


def test_greedy_generate_and_streaming_equal(qwen2):
    folder, model = qwen2
    net = al.from_pretrained(folder)
    generate_equal(net, model, VOCAB)
    stream_equal(net, VOCAB)


def test_save_pretrained_round_trip(tmp_path, qwen2):
    folder, model = qwen2
    saved_back_equal(al.from_pretrained(folder), model, folder, tmp_path / "back",
                     transformers.Qwen2ForCausalLM, VOCAB)


def test_export_onnx_runs_in_onnxruntime(tmp_path, qwen2):
    pytest.importorskip("onnxruntime")
    folder, _ = qwen2
    onnx_equal(al.from_pretrained(folder), tmp_path / "qwen2.onnx", VOCAB)


@pytest.mark.parametrize("over", [
    {"tie_word_embeddings": True},
    {"head_dim": 16, "num_key_value_heads": 1},
])
def test_variants_equal_transformers(tmp_path, over):
    model = checkpoint(tmp_path, **over)
    net = al.from_pretrained(tmp_path)
    logits_equal(net, model, VOCAB)
    assert net.analyze().total_learnables == model.num_parameters()


def test_sliding_window_layers_follow_layer_types(tmp_path):
    # layers from max_window_layers on slide: layer 0 full, layer 1 over the last 4 keys
    model = checkpoint(tmp_path, num_hidden_layers=3, use_sliding_window=True, sliding_window=4,
                       max_window_layers=1)
    assert model.config.layer_types == ["full_attention", "sliding_attention",
                                        "sliding_attention"]
    net = al.from_pretrained(tmp_path)
    assert [net.layers[f"layers.{i}.self_attn"].window for i in range(3)] == [None, 4, 4]
    ids = torch.randint(0, VOCAB, (2, 13))
    close(net(ids), hf_logits(model, ids))
    stream_equal(net, VOCAB, t=13)
    generate_equal(net, model, VOCAB, prompt_length=6, n=10)
    # the windows matter: the same weights without them give other logits
    full = al.from_pretrained(edited_copy(tmp_path, tmp_path / "full", use_sliding_window=False))
    assert relative_difference(full(ids), hf_logits(model, ids)) > 1e-3
    saved_back_equal(net, model, tmp_path, tmp_path / "back", transformers.Qwen2ForCausalLM,
                     VOCAB)


def test_the_base_model_gives_the_last_hidden_state(tmp_path):
    torch.manual_seed(0)
    model = transformers.Qwen2Model(transformers.Qwen2Config(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2)).eval()
    model.save_pretrained(tmp_path)
    net = al.from_pretrained(tmp_path)
    assert net.output_names == ["last_hidden_state"]
    ids = torch.randint(0, VOCAB, (2, 6))
    with torch.no_grad():
        close(net(ids), model(input_ids=ids).last_hidden_state)


@pytest.mark.parametrize("changes,words", [
    ({"layer_types": ["full_attention", "chunked_attention"]},
     ["layer_types", "chunked_attention", "sliding_attention"]),
    ({"hidden_act": "mish"}, ["hidden_act", "mish", "silu"]),
    ({"num_key_value_heads": 3}, ["num_key_value_heads", "divisor of num_attention_heads (4)"]),
])
def test_what_is_not_built_is_refused_by_name(tmp_path, qwen2, changes, words):
    folder, _ = qwen2
    with pytest.raises(al.NetworkError) as e:
        al.from_pretrained(edited_copy(folder, tmp_path / "edited", **changes))
    for w in words:
        assert w in str(e.value)
