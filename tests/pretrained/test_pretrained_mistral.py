"""Mistral checkpoints: Llama's graph with a sliding window, equal to transformers on
sequences longer than the window, padded, generating the same tokens, saved back."""
import json

import pytest
import torch

import attnlab as al
from pretrained_helpers import (hf_greedy, layout, quiet_transformers, relative_difference,
                                valid_steps)

transformers = pytest.importorskip("transformers")
quiet_transformers()

VOCAB, WINDOW = 64, 4


def checkpoint(folder, **over):
    kw = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
              initializer_range=0.1, sliding_window=WINDOW, tie_word_embeddings=False,
              rope_parameters={"rope_type": "default", "rope_theta": 1000.0},
              pad_token_id=0, bos_token_id=1, eos_token_id=2)
    kw.update(over)
    torch.manual_seed(0)
    model = transformers.MistralForCausalLM(transformers.MistralConfig(**kw)).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(0.3 * torch.randn_like(p))
    model.save_pretrained(folder)
    return model


def hf_logits(model, ids, mask=None):
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=mask).logits


@pytest.fixture(scope="module")
def mistral(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mistral")
    return folder, checkpoint(folder)


def test_longer_than_the_window_equals_transformers(mistral):
    folder, model = mistral
    net = al.from_pretrained(folder)
    assert net.layers["layers.0.self_attn"].window == WINDOW
    ids = torch.randint(0, VOCAB, (2, 3 * WINDOW - 1))
    assert relative_difference(net(ids), hf_logits(model, ids)) <= 1e-4
    # the window matters: the same weights with full causal attention give other logits
    full = transformers.MistralForCausalLM(
        transformers.MistralConfig(**{**model.config.to_dict(), "sliding_window": None})).eval()
    full.load_state_dict(model.state_dict())
    assert relative_difference(net(ids), hf_logits(full, ids)) > 1e-3


def test_padded_batch_equals_transformers(mistral):
    folder, model = mistral
    net = al.from_pretrained(folder)
    lengths = [11, 5, 8]
    seqs = [torch.randint(3, VOCAB, (t,)) for t in lengths]
    ids = torch.zeros(3, 11, dtype=torch.long)
    mask = torch.zeros(3, 11, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, :len(s)], mask[i, :len(s)] = s, 1
    want = valid_steps(hf_logits(model, ids, mask), lengths)
    assert relative_difference(valid_steps(net(seqs), lengths), want) <= 1e-4


def test_learnables_count_as_transformers(mistral):
    folder, model = mistral
    assert al.from_pretrained(folder).analyze().total_learnables == model.num_parameters()


def test_streaming_past_the_window_equals_the_forward_pass(mistral):
    folder, _ = mistral
    net = al.from_pretrained(folder)
    ids = torch.randint(0, VOCAB, (2, 13))
    full = net(ids)
    s = net.stream()
    steps = [s.step(ids[:, :6])] + [s.step(ids[:, t:t + 1]) for t in range(6, 13)]
    assert relative_difference(torch.cat(steps, 1), full) <= 1e-4


def test_greedy_generate_past_the_window_equals_transformers(mistral):
    folder, model = mistral
    net = al.from_pretrained(folder)
    prompt = torch.randint(3, VOCAB, (2, 6))
    ours = al.generate(net, start=prompt, stop=None, max_new_tokens=14).tokens
    assert ours.tolist() == hf_greedy(model, prompt, 14).tolist()
    assert len(set(ours.flatten().tolist())) > 4            # not one token over and over


def test_no_window_is_full_causal_attention(tmp_path):
    model = checkpoint(tmp_path, sliding_window=None, tie_word_embeddings=True)
    net = al.from_pretrained(tmp_path)
    assert net.layers["layers.0.self_attn"].window is None
    ids = torch.randint(0, VOCAB, (1, 10))
    assert relative_difference(net(ids), hf_logits(model, ids)) <= 1e-4
    assert net.analyze().total_learnables == model.num_parameters()


def test_transformers_4_layout_loads_the_same(tmp_path, mistral):
    folder, model = mistral
    cfg = json.loads((folder / "config.json").read_text())
    cfg["rope_theta"] = cfg.pop("rope_parameters")["rope_theta"]
    cfg["torch_dtype"] = cfg.pop("dtype")
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "model.safetensors").write_bytes((folder / "model.safetensors").read_bytes())
    ids = torch.randint(0, VOCAB, (1, 9))
    assert relative_difference(al.from_pretrained(tmp_path)(ids), hf_logits(model, ids)) <= 1e-4


def test_save_pretrained_round_trip(tmp_path, mistral):
    folder, model = mistral
    net = al.from_pretrained(folder)
    net.save_pretrained(tmp_path / "back")
    assert layout(tmp_path / "back") == layout(folder)
    again = transformers.MistralForCausalLM.from_pretrained(tmp_path / "back").eval()
    ids = torch.randint(0, VOCAB, (1, 9))
    assert torch.equal(hf_logits(again, ids), hf_logits(model, ids))


def test_a_bad_window_is_named(tmp_path, mistral):
    folder, _ = mistral
    cfg = json.loads((folder / "config.json").read_text())
    cfg["sliding_window"] = 0
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "model.safetensors").write_bytes((folder / "model.safetensors").read_bytes())
    with pytest.raises(al.NetworkError, match="sliding_window"):
        al.from_pretrained(tmp_path)


def test_the_base_model_gives_the_last_hidden_state(tmp_path, mistral):
    _, causal = mistral
    model = transformers.MistralModel(causal.config).eval()
    model.load_state_dict(causal.model.state_dict())
    model.save_pretrained(tmp_path)
    net = al.from_pretrained(tmp_path)
    assert net.output_names == ["last_hidden_state"]
    ids = torch.randint(0, VOCAB, (2, 10))
    with torch.no_grad():
        want = model(input_ids=ids).last_hidden_state
    assert relative_difference(net(ids), want) <= 1e-4


def test_export_onnx_past_the_window_runs_in_onnxruntime(tmp_path, mistral):
    ort = pytest.importorskip("onnxruntime")
    folder, _ = mistral
    net = al.from_pretrained(folder)
    assert net.export_onnx(tmp_path / "mistral.onnx").max_error < 1e-4
    session = ort.InferenceSession(str(tmp_path / "mistral.onnx"))
    for t in (3, 3 * WINDOW):
        ids = torch.randint(0, VOCAB, (2, t))
        feeds = {"input_ids": ids.numpy(), "input_ids_mask": torch.ones(2, t, dtype=torch.bool).numpy()}
        got = torch.from_numpy(session.run(["logits"], feeds)[0])
        with torch.no_grad():
            assert relative_difference(got, net(ids)) <= 1e-4
