"""Phi-3 checkpoints: built by transformers (random, offline), loaded as attnlab networks with the
fused qkv_proj and gate_up_proj split, and longrope rotary scaling; equal to transformers in
float32 on both sides of original_max_position_embeddings, padded, streaming, generating the
same tokens, saved back and exported."""
import json

import pytest
import torch

import attnlab as al
from decoder_checks import (edited_copy, generate_equal, hf_logits, onnx_equal, padded_equal,
                            randomized_norms, saved_back_equal, stream_equal)
from pretrained_helpers import hf_greedy, quiet_transformers, relative_difference

transformers = pytest.importorskip("transformers")
quiet_transformers()

VOCAB, WIDTH, HEADS, KV_HEADS, ORIGINAL = 64, 32, 4, 2, 16
LONGROPE = {"rope_type": "longrope", "short_factor": [1.0, 1.1, 1.3, 1.5],
            "long_factor": [1.0, 2.0, 4.0, 8.0]}


def checkpoint(folder, **over):
    kw = dict(vocab_size=VOCAB, hidden_size=WIDTH, intermediate_size=48, num_hidden_layers=2,
              num_attention_heads=HEADS, num_key_value_heads=KV_HEADS, initializer_range=0.1,
              max_position_embeddings=4 * ORIGINAL, original_max_position_embeddings=ORIGINAL,
              rope_theta=500.0, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    kw.update(over)
    torch.manual_seed(0)
    model = transformers.Phi3ForCausalLM(transformers.Phi3Config(**kw)).eval()
    randomized_norms(model)                    # norms other than 1 and 0: tested
    model.save_pretrained(folder)
    return model


@pytest.fixture(scope="module")
def phi3(tmp_path_factory):
    folder = tmp_path_factory.mktemp("phi3")
    return folder, checkpoint(folder)


@pytest.fixture(scope="module")
def longrope(tmp_path_factory):
    folder = tmp_path_factory.mktemp("phi3_longrope")
    return folder, checkpoint(folder, rope_scaling=dict(LONGROPE))


def test_logits_equal_transformers(phi3):
    folder, model = phi3
    net = al.from_pretrained(folder)
    assert net.input_names == ["input_ids"] and net.output_names == ["logits"]
    ids = torch.randint(0, VOCAB, (2, 9))
    assert relative_difference(net(ids), hf_logits(model, ids)) <= 1e-4
    assert net.analyze().total_learnables == model.num_parameters()


def test_fused_projections_are_split(phi3):
    folder, model = phi3
    net = al.from_pretrained(folder)
    layer = model.model.layers[0]
    qkv, gate_up = layer.self_attn.qkv_proj.weight.detach(), layer.mlp.gate_up_proj.weight.detach()
    q, kv = WIDTH, WIDTH // HEADS * KV_HEADS
    assert torch.equal(net.learnables["layers.0.self_attn/query.weight"], qkv[:q])
    assert torch.equal(net.learnables["layers.0.self_attn/key.weight"], qkv[q:q + kv])
    assert torch.equal(net.learnables["layers.0.self_attn/value.weight"], qkv[q + kv:])
    assert torch.equal(net.learnables["layers.0.mlp.gate_up_proj/gate.weight"], gate_up[:48])
    assert torch.equal(net.learnables["layers.0.mlp.gate_up_proj/up.weight"], gate_up[48:])


def test_padded_batch_equals_transformers(phi3, longrope):
    for folder, model in (phi3, longrope):
        padded_equal(al.from_pretrained(folder), model, VOCAB)


def test_streaming_equals_the_forward_pass(phi3):
    folder, _ = phi3
    net = al.from_pretrained(folder)
    stream_equal(net, VOCAB)


def test_greedy_generate_equals_transformers(phi3):
    folder, model = phi3
    net = al.from_pretrained(folder)
    torch.manual_seed(1)
    ours = generate_equal(net, model, VOCAB, n=12)
    assert len(set(ours.flatten().tolist())) > 4            # not one token over and over


@pytest.mark.parametrize("length", [9, ORIGINAL, ORIGINAL + 1, 3 * ORIGINAL])
def test_longrope_equals_transformers_on_both_sides(longrope, length):
    folder, model = longrope
    net = al.from_pretrained(folder)
    scaling = net.layers["layers.0.self_attn"].rotary["scaling"]
    assert scaling["rope_type"] == "longrope" and scaling["long_factor"] == LONGROPE["long_factor"]
    assert scaling["original_max_position_embeddings"] == ORIGINAL
    assert abs(scaling["attention_factor"] - 1.5 ** 0.5) < 1e-12       # sqrt(1 + ln 4 / ln 16)
    ids = torch.randint(0, VOCAB, (2, length))
    assert relative_difference(net(ids), hf_logits(model, ids)) <= 1e-4


def test_a_longer_sequence_turns_every_position_by_the_long_factors(longrope):
    folder, model = longrope
    net = al.from_pretrained(folder)
    ids = torch.randint(0, VOCAB, (1, ORIGINAL + 1))
    short, long = net(ids[:, :ORIGINAL]), net(ids)[:, :ORIGINAL]
    assert relative_difference(short, long) > 1e-3                  # the same prefix, turned anew
    assert relative_difference(long, hf_logits(model, ids)[:, :ORIGINAL]) <= 1e-4


def test_longrope_streams_within_each_side(longrope):
    folder, _ = longrope
    net = al.from_pretrained(folder)
    ids = torch.randint(0, VOCAB, (2, 2 * ORIGINAL))
    short = ids[:, :ORIGINAL]
    s = net.stream()
    steps = [s.step(short[:, :5])] + [s.step(short[:, t:t + 1]) for t in range(5, ORIGINAL)]
    assert relative_difference(torch.cat(steps, 1), net(short)) <= 1e-4
    s = net.stream()                  # a first step past the switch: long factors throughout
    steps = [s.step(ids[:, :ORIGINAL + 3])] + \
        [s.step(ids[:, t:t + 1]) for t in range(ORIGINAL + 3, 2 * ORIGINAL)]
    assert relative_difference(torch.cat(steps, 1), net(ids)) <= 1e-4


def test_a_stream_crossing_original_max_position_embeddings_is_refused(longrope):
    folder, _ = longrope
    net = al.from_pretrained(folder)
    ids = torch.randint(0, VOCAB, (1, ORIGINAL + 1))
    s = net.stream()
    first = s.step(ids[:, :ORIGINAL])
    with pytest.raises(al.DataError, match=f"original_max_position_embeddings \\({ORIGINAL}\\)"):
        s.step(ids[:, ORIGINAL:])
    assert relative_difference(first, net(ids[:, :ORIGINAL])) <= 1e-4


@pytest.mark.parametrize("prompt_length,new", [(6, ORIGINAL - 6), (ORIGINAL + 2, 8),
                                               (ORIGINAL - 2, 5), (6, 2 * ORIGINAL)])
def test_longrope_greedy_generate_equals_transformers(longrope, prompt_length, new):
    folder, model = longrope
    net = al.from_pretrained(folder)
    torch.manual_seed(2)
    prompt = torch.randint(3, VOCAB, (2, prompt_length))
    ours = al.generate(net, start=prompt, stop=None, max_new_tokens=new).tokens
    assert ours.tolist() == hf_greedy(model, prompt, new).tolist()


@pytest.mark.parametrize("over", [
    {"tie_word_embeddings": True, "num_key_value_heads": HEADS},
    {"sliding_window": 4},
    {"partial_rotary_factor": 0.5, "rope_scaling": {
        "rope_type": "longrope", "short_factor": [1.0, 1.2], "long_factor": [2.0, 5.0]}},
    {"rope_scaling": {**LONGROPE, "attention_factor": 1.1, "factor": 8.0}},
])
def test_variants_equal_transformers(tmp_path, over):
    model = checkpoint(tmp_path, **over)
    net = al.from_pretrained(tmp_path)
    for length in (11, 2 * ORIGINAL):
        ids = torch.randint(0, VOCAB, (2, length))
        assert relative_difference(net(ids), hf_logits(model, ids)) <= 1e-4
    assert net.analyze().total_learnables == model.num_parameters()


def test_transformers_4_layout_loads_the_same(tmp_path, longrope):
    folder, model = longrope
    cfg = json.loads((folder / "config.json").read_text())
    rope = cfg.pop("rope_parameters")
    cfg["rope_theta"] = rope["rope_theta"]
    cfg["rope_scaling"] = {"type": "su", "short_factor": rope["short_factor"],
                           "long_factor": rope["long_factor"]}
    cfg["torch_dtype"] = cfg.pop("dtype")
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "model.safetensors").write_bytes((folder / "model.safetensors").read_bytes())
    net = al.from_pretrained(tmp_path)
    for length in (7, ORIGINAL + 4):
        ids = torch.randint(0, VOCAB, (1, length))
        assert relative_difference(net(ids), hf_logits(model, ids)) <= 1e-4


@pytest.mark.parametrize("changes,words", [
    ({"rope_parameters": {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 500.0}},
     ["rope_parameters", "dynamic", "longrope"]),
    ({"rope_parameters": {**LONGROPE, "short_factor": [1.0, 1.0], "rope_theta": 500.0}},
     ["rope_parameters", "short_factor of 4 numbers"]),
    ({"attention_bias": True}, ["attention_bias", "true"]),
    ({"hidden_act": "mish"}, ["hidden_act", "mish"]),
])
def test_options_not_built_are_refused_by_name(tmp_path, phi3, changes, words):
    folder, _ = phi3
    with pytest.raises(al.NetworkError) as e:
        al.from_pretrained(edited_copy(folder, tmp_path, **changes))
    for w in words:
        assert w in str(e.value)


def test_save_pretrained_round_trip(tmp_path, phi3, longrope):
    for i, (folder, model) in enumerate((phi3, longrope)):
        saved_back_equal(al.from_pretrained(folder), model, folder, tmp_path / f"back{i}",
                         transformers.Phi3ForCausalLM, VOCAB, t=ORIGINAL + 2)


def test_the_base_model_gives_the_last_hidden_state(tmp_path, longrope):
    _, causal = longrope
    model = transformers.Phi3Model(causal.config).eval()
    model.load_state_dict(causal.model.state_dict())
    model.save_pretrained(tmp_path)
    net = al.from_pretrained(tmp_path)
    assert net.output_names == ["last_hidden_state"]
    ids = torch.randint(0, VOCAB, (2, ORIGINAL + 3))
    with torch.no_grad():
        want = model(input_ids=ids).last_hidden_state
    assert relative_difference(net(ids), want) <= 1e-4


def test_attnlab_file_keeps_the_checkpoint_and_its_layout(tmp_path, longrope):
    folder, model = longrope
    net = al.from_pretrained(folder)
    net.save(tmp_path / "phi3.attnlab")
    back = al.load(tmp_path / "phi3.attnlab")
    assert back.layers["layers.1.self_attn"].rotary["scaling"]["rope_type"] == "longrope"
    ids = torch.randint(0, VOCAB, (2, ORIGINAL + 2))
    assert torch.equal(back.eval()(ids), net(ids))
    back.save_pretrained(tmp_path / "hf")
    again = transformers.Phi3ForCausalLM.from_pretrained(tmp_path / "hf").eval()
    assert torch.equal(hf_logits(again, ids), hf_logits(model, ids))


@pytest.mark.parametrize("which", ["phi3", "longrope"])
def test_export_onnx_runs_in_onnxruntime_at_two_lengths(tmp_path, phi3, longrope, which):
    pytest.importorskip("onnxruntime")
    folder, _ = phi3 if which == "phi3" else longrope
    # longrope: the short factors, then the long ones
    onnx_equal(al.from_pretrained(folder), tmp_path / "phi3.onnx", VOCAB, (3, ORIGINAL + 4))
