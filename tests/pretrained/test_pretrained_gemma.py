"""Gemma checkpoints: RMSNorm scaling by 1 + weight, GeGLU with the tanh GELU, embeddings
times √hidden_size in the model's dtype, a tied head, a head size apart from hidden / heads;
equal to transformers in float32, padded, streaming, generating the same tokens, saved back."""
import pytest
import torch

import attnlab as al
from decoder_checks import (edited_copy, generate_equal, logits_equal, onnx_equal,
                            padded_equal, randomized_norms, saved_back_equal, stream_equal)
from pretrained_helpers import quiet_transformers

transformers = pytest.importorskip("transformers")
quiet_transformers()

VOCAB = 64


def checkpoint(folder, **over):
    kw = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, head_dim=16,
              max_position_embeddings=128, initializer_range=0.4,
              rope_parameters={"rope_type": "default", "rope_theta": 500.0},
              pad_token_id=0, bos_token_id=1, eos_token_id=2)
    kw.update(over)
    torch.manual_seed(0)
    model = randomized_norms(transformers.GemmaForCausalLM(transformers.GemmaConfig(**kw)).eval())
    model.save_pretrained(folder)
    return model


@pytest.fixture(scope="module")
def gemma(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gemma")
    return folder, checkpoint(folder)


def test_logits_equal_transformers(gemma):
    folder, model = gemma
    net = al.from_pretrained(folder)
    assert net.layers["norm"].unit_offset and net.layers["lm_head"].tied_to == "embed_tokens"
    assert net.layers["embed_scale"].scale == [32 ** 0.5]
    assert net.layers["layers.0.self_attn"].key_channels == 4 * 16      # not hidden_size
    logits_equal(net, model, VOCAB)
    assert net.analyze().total_learnables == model.num_parameters()


def test_padded_batch_equals_transformers(gemma):
    folder, model = gemma
    padded_equal(al.from_pretrained(folder), model, VOCAB)


def test_greedy_generate_and_streaming_equal(gemma):
    folder, model = gemma
    net = al.from_pretrained(folder)
    generate_equal(net, model, VOCAB)
    stream_equal(net, VOCAB)


def test_save_pretrained_round_trip(tmp_path, gemma):
    folder, model = gemma
    saved_back_equal(al.from_pretrained(folder), model, folder, tmp_path / "back",
                     transformers.GemmaForCausalLM, VOCAB)


def test_export_onnx_runs_in_onnxruntime(tmp_path, gemma):
    pytest.importorskip("onnxruntime")
    folder, _ = gemma
    onnx_equal(al.from_pretrained(folder), tmp_path / "gemma.onnx", VOCAB)


def test_bfloat16_scales_the_embeddings_in_bfloat16(gemma):
    folder, model = gemma
    net = al.from_pretrained(folder, dtype=torch.bfloat16)
    ids = torch.randint(0, VOCAB, (1, 6))
    want = model.to(torch.bfloat16)(ids).logits.float()
    model.float()
    got = net(ids).float()
    assert (got - want).abs().max() <= 0.05 * want.abs().max()


@pytest.mark.parametrize("over", [
    {"tie_word_embeddings": False, "attention_bias": True},
    {"hidden_act": "gelu"},                   # transformers reads it as the tanh GELU
])
def test_variants_equal_transformers(tmp_path, over):
    model = checkpoint(tmp_path, **over)
    net = al.from_pretrained(tmp_path)
    logits_equal(net, model, VOCAB)
    assert net.analyze().total_learnables == model.num_parameters()


@pytest.mark.parametrize("changes,words", [
    ({"use_bidirectional_attention": True}, ["use_bidirectional_attention", "false"]),
    ({"hidden_activation": "relu"}, ["hidden_activation", "relu", "hidden_act"]),
    ({"rope_parameters": {"rope_type": "yarn", "factor": 2.0, "rope_theta": 500.0}},
     ["rope_parameters", "yarn", "\"default\""]),
])
def test_what_is_not_built_is_refused_by_name(tmp_path, gemma, changes, words):
    folder, _ = gemma
    with pytest.raises(al.NetworkError) as e:
        al.from_pretrained(edited_copy(folder, tmp_path / "edited", **changes))
    for w in words:
        assert w in str(e.value)
