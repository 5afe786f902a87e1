"""Scaled rotary positions (`rope_scaling` / `rope_parameters` of rope_type linear, dynamic,
llama3, yarn) in Llama, Mistral and Qwen2 checkpoints, equal to transformers past the
positions the model was trained on: the full pass, a right-padded batch, step-by-step decoding
against transformers' cache, greedy generation, save_pretrained, ONNX.

"dynamic" grows its base with the sequence's length past `max_position_embeddings`: a full pass
turns every step by the frequencies of its whole length, while decoding (here as in
transformers) turns each new step by those of the length so far, so past the original length
the two differ, in transformers as here."""
import json

import pytest
import torch

import attnlab as al
from decoder_checks import (close, edited_copy, generate_equal, hf_logits, onnx_equal,
                            padded_equal, randomized_norms, saved_back_equal)
from pretrained_helpers import quiet_transformers, relative_difference

transformers = pytest.importorskip("transformers")
quiet_transformers()

VOCAB, POSITIONS, ORIGINAL, LONG = 64, 16, 8, 28       # LONG: past both trained lengths

SCALINGS = {
    "linear": {"rope_type": "linear", "factor": 3.0},
    "dynamic": {"rope_type": "dynamic", "factor": 2.5},
    "llama3": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": ORIGINAL},
    "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": ORIGINAL},
}
FAMILIES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", {}),
    "mistral": ("MistralConfig", "MistralForCausalLM", {"sliding_window": 12}),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {}),
}


def checkpoint(folder, family, kind, **over):
    config, cls, extra = FAMILIES[family]
    kw = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=POSITIONS,
              initializer_range=0.4, tie_word_embeddings=False,
              rope_parameters={**SCALINGS[kind], "rope_theta": 100.0},
              pad_token_id=0, bos_token_id=1, eos_token_id=2, **extra)
    kw.update(over)
    torch.manual_seed(0)
    model = getattr(transformers, cls)(getattr(transformers, config)(**kw)).eval()
    randomized_norms(model).save_pretrained(folder)
    return fresh(folder, family)


def fresh(folder, family):
    """transformers' model of the folder, as loaded: its dynamic rotary embedding keeps the
    longest length it has seen, so each comparison starts from a new one."""
    return getattr(transformers, FAMILIES[family][1]).from_pretrained(folder).eval()


def hf_decoded(model, ids, prefill):
    """transformers' logits for a prefill, then one step at a time through its cache."""
    with torch.no_grad():
        out = model(input_ids=ids[:, :prefill], use_cache=True)
        logits, past = [out.logits], out.past_key_values
        for t in range(prefill, ids.shape[1]):
            out = model(input_ids=ids[:, t:t + 1], cache=past, use_cache=True)
            logits.append(out.logits)
            past = out.past_key_values
    return torch.cat(logits, 1)


def streamed(net, ids, prefill):
    s = net.stream()
    return torch.cat([s.step(ids[:, :prefill])] +
                     [s.step(ids[:, t:t + 1]) for t in range(prefill, ids.shape[1])], 1)


CASES = [(f, k) for f in FAMILIES for k in SCALINGS]


@pytest.fixture(scope="module", params=CASES, ids=[f"{f}-{k}" for f, k in CASES])
def scaled(request, tmp_path_factory):
    family, kind = request.param
    folder = tmp_path_factory.mktemp(f"{family}-{kind}")
    checkpoint(folder, family, kind)
    return folder, family, kind


def test_long_sequences_equal_transformers(scaled):
    folder, family, kind = scaled
    net = al.from_pretrained(folder)
    assert net.layers["layers.0.self_attn"].rotary["scaling"]["rope_type"] == kind
    ids = torch.randint(0, VOCAB, (2, LONG))
    close(net(ids), hf_logits(fresh(folder, family), ids))
    short = ids[:, :ORIGINAL - 2]                  # within both trained lengths too
    close(net(short), hf_logits(fresh(folder, family), short))


def test_the_scaling_matters(scaled):
    # the same weights with the original rotary embedding give other logits past the
    # trained length (dynamic: past max_position_embeddings only)
    folder, family, kind = scaled
    cfg = json.loads((folder / "config.json").read_text())
    plain = edited_copy(folder, folder.parent / f"{folder.name}-plain", rope_parameters={
        "rope_type": "default", "rope_theta": cfg["rope_parameters"]["rope_theta"]})
    ids = torch.randint(0, VOCAB, (1, LONG))
    assert relative_difference(al.from_pretrained(plain)(ids),
                               hf_logits(fresh(folder, family), ids)) > 1e-3


def test_padded_batch_equals_transformers(scaled):
    folder, family, _ = scaled
    padded_equal(al.from_pretrained(folder), fresh(folder, family), VOCAB,
                 lengths=(LONG, 11, 20))


def test_decoding_step_by_step_equals_transformers_cache(scaled):
    folder, family, kind = scaled
    net = al.from_pretrained(folder)
    ids = torch.randint(0, VOCAB, (2, LONG))
    ours = streamed(net, ids, 5)
    close(ours, hf_decoded(fresh(folder, family), ids, 5))
    if kind == "dynamic":       # past max_position_embeddings, the full pass turns otherwise
        assert relative_difference(ours, net(ids)) > 1e-3
    else:
        close(ours, net(ids))


def test_greedy_generate_past_the_trained_length_equals_transformers(scaled):
    folder, family, _ = scaled
    generate_equal(al.from_pretrained(folder), fresh(folder, family), VOCAB, prompt_length=6,
                   n=LONG - 6)


def test_save_pretrained_writes_the_scaling_back(tmp_path, scaled):
    folder, family, _ = scaled
    net = al.from_pretrained(folder)
    saved_back_equal(net, fresh(folder, family), folder, tmp_path / "back",
                     getattr(transformers, FAMILIES[family][1]), VOCAB)
    written = json.loads((tmp_path / "back" / "config.json").read_text())["rope_parameters"]
    assert written == json.loads((folder / "config.json").read_text())["rope_parameters"]


@pytest.mark.parametrize("kind", list(SCALINGS))
def test_export_onnx_past_the_trained_length(tmp_path, kind):
    pytest.importorskip("onnxruntime")
    checkpoint(tmp_path, "llama", kind)
    onnx_equal(al.from_pretrained(tmp_path), tmp_path / "scaled.onnx", VOCAB,
               lengths=(5, LONG))


def test_transformers_4_layout_loads_the_same(tmp_path):
    checkpoint(tmp_path, "llama", "yarn")
    cfg = json.loads((tmp_path / "config.json").read_text())
    rope = cfg.pop("rope_parameters")
    cfg["rope_theta"] = rope.pop("rope_theta")
    cfg["rope_scaling"] = {"type": rope.pop("rope_type"), **rope}     # early 4.x spelling
    cfg["torch_dtype"], cfg["transformers_version"] = cfg.pop("dtype"), "4.46.0"
    old = tmp_path / "4x"
    old.mkdir()
    (old / "config.json").write_text(json.dumps(cfg))
    (old / "model.safetensors").write_bytes((tmp_path / "model.safetensors").read_bytes())
    ids = torch.randint(0, VOCAB, (2, LONG))
    close(al.from_pretrained(old)(ids), hf_logits(fresh(tmp_path, "llama"), ids))


def test_yarn_attention_factor_from_mscale_equals_transformers(tmp_path):
    model = checkpoint(tmp_path, "qwen2", "yarn", rope_parameters={
        **SCALINGS["yarn"], "rope_theta": 100.0, "mscale": 0.8, "mscale_all_dim": 0.5,
        "beta_fast": 16, "beta_slow": 2})
    ids = torch.randint(0, VOCAB, (2, LONG))
    close(al.from_pretrained(tmp_path)(ids), hf_logits(model, ids))


@pytest.mark.parametrize("rope,words", [
    ({"rope_type": "longrope", "short_factor": [1.0] * 4, "long_factor": [2.0] * 4,
      "original_max_position_embeddings": ORIGINAL},
     ["rope_parameters", "longrope", "\"default\"", "'yarn'"]),
    ({"rope_type": "linear", "factor": 2.0, "partial_rotary_factor": 0.5},
     ["rope_parameters", "partial_rotary_factor", "whole heads"]),
    ({"rope_type": "linear", "factor": -2.0}, ["rope_parameters", "\"factor\"", "positive"]),
    ({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0, "high_freq_factor": 1.0},
     ["rope_parameters", "high_freq_factor greater than low_freq_factor"]),
])
def test_what_is_not_built_is_refused_by_name(tmp_path, rope, words):
    checkpoint(tmp_path / "linear", "llama", "linear")
    with pytest.raises(al.NetworkError) as e:
        al.from_pretrained(edited_copy(tmp_path / "linear", tmp_path / "edited",
                                       rope_parameters={**rope, "rope_theta": 100.0}))
    for w in words:
        assert w in str(e.value), str(e.value)
