"""Gemma 2 checkpoints: soft-capped attention scores and logits, sandwich norms, alternating
sliding-window and full layers, scores scaled by query_pre_attn_scalar; equal to transformers
in float32 past the window, padded, streaming, generating the same tokens, saved back, ONNX."""
import pytest
import torch

import attnlab as al
import attnlab.functional as AF
from decoder_checks import (close, edited_copy, generate_equal, hf_logits, logits_equal,
                            onnx_equal, padded_equal, randomized_norms, saved_back_equal,
                            stream_equal)
from pretrained_helpers import quiet_transformers, relative_difference

transformers = pytest.importorskip("transformers")
quiet_transformers()

VOCAB, WINDOW = 64, 4


def checkpoint(folder, **over):
    kw = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=3,
              num_attention_heads=4, num_key_value_heads=2, head_dim=16,
              max_position_embeddings=128, initializer_range=0.4, sliding_window=WINDOW,
              query_pre_attn_scalar=12, attn_logit_softcapping=2.0,
              final_logit_softcapping=3.0, tie_word_embeddings=False,
              rope_parameters={"rope_type": "default", "rope_theta": 500.0},
              pad_token_id=0, bos_token_id=1, eos_token_id=2)
    kw.update(over)
    torch.manual_seed(0)
    model = randomized_norms(
        transformers.Gemma2ForCausalLM(transformers.Gemma2Config(**kw)).eval())
    model.save_pretrained(folder)
    return model


@pytest.fixture(scope="module")
def gemma2(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gemma2")
    return folder, checkpoint(folder)


def test_logits_past_the_window_equal_transformers(gemma2):
    folder, model = gemma2
    net = al.from_pretrained(folder)
    layers = [net.layers[f"layers.{i}.self_attn"] for i in range(3)]
    assert [a.window for a in layers] == [WINDOW, None, WINDOW]
    assert layers[0].softcap == 2.0 and layers[0].scale == 12 ** -0.5
    assert net.layers["layers.0.post_feedforward_layernorm"].unit_offset
    logits_equal(net, model, VOCAB, t=3 * WINDOW - 1)
    assert net.analyze().total_learnables == model.num_parameters()


@pytest.mark.parametrize("change", ["attn_logit_softcapping", "final_logit_softcapping"])
def test_each_soft_cap_matters(tmp_path, gemma2, change):
    # the same weights without one of the caps give other logits
    folder, model = gemma2
    net = al.from_pretrained(edited_copy(folder, tmp_path / "uncapped", **{change: None}))
    ids = torch.randint(0, VOCAB, (2, 9))
    assert relative_difference(net(ids), hf_logits(model, ids)) > 1e-3


def test_capped_scores_are_computed_explicitly():
    q, k, v = torch.randn(3, 2, 5, 8, dtype=torch.float64).unbind(0)
    got = AF.attention(q, k, v, 2, attention_mask="causal", softcap=0.5)
    want = AF.naive_attention(q, k, v, 2, attention_mask="causal", softcap=0.5)
    assert torch.allclose(got, want, atol=1e-12)
    assert not torch.allclose(got, AF.attention(q, k, v, 2, attention_mask="causal"))
    with pytest.raises(al.ArgumentError, match="softcap"):
        AF.attention(q, k, v, 2, softcap=0.0)


def test_padded_batch_equals_transformers(gemma2):
    folder, model = gemma2
    padded_equal(al.from_pretrained(folder), model, VOCAB, lengths=(11, 4, 7))


def test_greedy_generate_and_streaming_past_the_window_equal(gemma2):
    folder, model = gemma2
    net = al.from_pretrained(folder)
    generate_equal(net, model, VOCAB, prompt_length=5, n=3 * WINDOW)
    stream_equal(net, VOCAB, t=3 * WINDOW)


def test_save_pretrained_round_trip(tmp_path, gemma2):
    folder, model = gemma2
    saved_back_equal(al.from_pretrained(folder), model, folder, tmp_path / "back",
                     transformers.Gemma2ForCausalLM, VOCAB)


def test_export_onnx_runs_in_onnxruntime(tmp_path, gemma2):
    pytest.importorskip("onnxruntime")
    folder, _ = gemma2
    onnx_equal(al.from_pretrained(folder), tmp_path / "gemma2.onnx", VOCAB)


def test_the_base_model_gives_the_last_hidden_state(tmp_path):
    torch.manual_seed(0)
    model = transformers.Gemma2Model(transformers.Gemma2Config(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, sliding_window=WINDOW)).eval()
    model.save_pretrained(tmp_path)
    net = al.from_pretrained(tmp_path)
    ids = torch.randint(0, VOCAB, (2, 9))
    with torch.no_grad():
        close(net(ids), model(input_ids=ids).last_hidden_state)


@pytest.mark.parametrize("changes,words", [
    ({"layer_types": ["full_attention", "chunked_attention", "full_attention"]},
     ["layer_types", "chunked_attention"]),
    ({"attn_logit_softcapping": -1.0}, ["attn_logit_softcapping", "-1.0"]),
    ({"use_bidirectional_attention": True}, ["use_bidirectional_attention"]),
    ({"rope_parameters": {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 500.0}},
     ["rope_parameters", "dynamic", "\"default\""]),
])
def test_what_is_not_built_is_refused_by_name(tmp_path, gemma2, changes, words):
    folder, _ = gemma2
    with pytest.raises(al.NetworkError) as e:
        al.from_pretrained(edited_copy(folder, tmp_path / "edited", **changes))
    for w in words:
        assert w in str(e.value)
