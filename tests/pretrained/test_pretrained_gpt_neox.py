"""GPT-NeoX (Pythia) checkpoints: built by transformers (random, offline), loaded as attnlab
networks with the parallel residual and partial rotary positions, equal to transformers in
float32, padded, streaming, generating the same tokens, saved back and exported."""
import json

import pytest
import torch

import attnlab as al
from pretrained_helpers import hf_greedy, layout, quiet_transformers, relative_difference, \
    valid_steps

transformers = pytest.importorskip("transformers")
quiet_transformers()

VOCAB, HEADS, WIDTH = 64, 4, 32


def checkpoint(folder, **over):
    kw = dict(vocab_size=VOCAB, hidden_size=WIDTH, num_hidden_layers=2, num_attention_heads=HEADS,
              intermediate_size=48, max_position_embeddings=64, initializer_range=0.02,
              rotary_pct=0.5, rotary_emb_base=500.0, pad_token_id=0, bos_token_id=1,
              eos_token_id=2)
    kw.update(over)
    torch.manual_seed(0)
    model = transformers.GPTNeoXForCausalLM(transformers.GPTNeoXConfig(**kw)).eval()
    with torch.no_grad():                      # norms other than 1 and 0, so that they are tested
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(0.3 * torch.randn_like(p))
    model.save_pretrained(folder)
    return model


def hf_logits(model, ids, mask=None):
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=mask).logits


@pytest.fixture(scope="module")
def neox(tmp_path_factory):
    folder = tmp_path_factory.mktemp("neox")
    return folder, checkpoint(folder)


def test_parallel_residual_logits_equal_transformers(neox):
    folder, model = neox
    net = al.from_pretrained(folder)
    assert net.input_names == ["input_ids"] and net.output_names == ["logits"]
    ids = torch.randint(0, VOCAB, (2, 9))
    assert relative_difference(net(ids), hf_logits(model, ids)) <= 1e-4
    assert net.analyze().total_learnables == model.num_parameters()
    # both sublayers read the block's input: the MLP's norm is fed from the block's start
    assert net.source("layers.1.post_attention_layernorm", "in")[0] == "layers.0.add_2"
    rotary = net.layers["layers.0.attention"].rotary
    assert rotary["base"] == 500.0 and rotary["fraction"] == 0.5


def test_fused_query_key_value_is_split_per_head(neox):
    folder, model = neox
    net = al.from_pretrained(folder)
    fused = model.gpt_neox.layers[0].attention.query_key_value
    d = WIDTH // HEADS
    w = fused.weight.detach().view(HEADS, 3, d, WIDTH)          # [heads, 3, head size]
    b = fused.bias.detach().view(HEADS, 3, d)
    for i, part in enumerate(("query", "key", "value")):
        assert torch.equal(net.learnables[f"layers.0.attention/{part}.weight"],
                           w[:, i].reshape(WIDTH, WIDTH))
        assert torch.equal(net.learnables[f"layers.0.attention/{part}.bias"],
                           b[:, i].reshape(WIDTH))


def test_padded_batch_equals_transformers(neox):
    folder, model = neox
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


def test_streaming_equals_the_forward_pass(neox):
    folder, _ = neox
    net = al.from_pretrained(folder)
    ids = torch.randint(0, VOCAB, (2, 8))
    full = net(ids)
    s = net.stream()
    steps = torch.cat([s.step(ids[:, :3])] + [s.step(ids[:, t:t + 1]) for t in range(3, 8)], 1)
    assert relative_difference(steps, full) <= 1e-4


def test_greedy_generate_equals_transformers(neox):
    folder, model = neox
    net = al.from_pretrained(folder)
    torch.manual_seed(1)
    prompt = torch.randint(3, VOCAB, (2, 5))
    ours = al.generate(net, start=prompt, stop=None, max_new_tokens=12).tokens
    assert ours.tolist() == hf_greedy(model, prompt, 12).tolist()
    assert len(set(ours.flatten().tolist())) > 4            # not one token over and over


@pytest.mark.parametrize("over", [
    {"use_parallel_residual": False},
    {"tie_word_embeddings": True},
    {"attention_bias": False},
    {"rotary_pct": 1.0, "hidden_act": "gelu_new"},
    {"rotary_pct": 0.25},
])
def test_variants_equal_transformers(tmp_path, over):
    model = checkpoint(tmp_path, **over)
    net = al.from_pretrained(tmp_path)
    ids = torch.randint(0, VOCAB, (2, 7))
    assert relative_difference(net(ids), hf_logits(model, ids)) <= 1e-4
    assert net.analyze().total_learnables == model.num_parameters()


def test_sequential_blocks_are_built_without_the_parallel_residual(tmp_path):
    checkpoint(tmp_path, use_parallel_residual=False)
    net = al.from_pretrained(tmp_path)
    assert net.source("layers.0.post_attention_layernorm", "in")[0] == "layers.0.add_1"


def test_transformers_4_layout_loads_the_same(tmp_path, neox):
    folder, model = neox
    cfg = json.loads((folder / "config.json").read_text())
    rope = cfg.pop("rope_parameters")
    cfg["rotary_pct"], cfg["rotary_emb_base"] = rope["partial_rotary_factor"], rope["rope_theta"]
    cfg["torch_dtype"] = cfg.pop("dtype")
    cfg["transformers_version"] = "4.44.0"
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "model.safetensors").write_bytes((folder / "model.safetensors").read_bytes())
    net = al.from_pretrained(tmp_path)
    assert net.layers["layers.0.attention"].rotary["fraction"] == 0.5
    ids = torch.randint(0, VOCAB, (1, 6))
    assert relative_difference(net(ids), hf_logits(model, ids)) <= 1e-4


def edited_copy(tmp_path, folder, **changes):
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(changes)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "model.safetensors").write_bytes((folder / "model.safetensors").read_bytes())
    return tmp_path


@pytest.mark.parametrize("changes,words", [
    ({"rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 500.0,
                          "partial_rotary_factor": 0.5}},
     ["rope_parameters", "linear", "default"]),
    ({"num_attention_heads": 3}, ["num_attention_heads", "divisor of hidden_size (32)"]),
    ({"hidden_act": "mish"}, ["hidden_act", "mish"]),
    ({"is_decoder": True}, ["is_decoder"]),
])
def test_options_not_built_are_refused_by_name(tmp_path, neox, changes, words):
    folder, _ = neox
    with pytest.raises(al.NetworkError) as e:
        al.from_pretrained(edited_copy(tmp_path, folder, **changes))
    for w in words:
        assert w in str(e.value)


def test_4_x_rope_scaling_is_refused_by_name(tmp_path, neox):
    folder, _ = neox
    cfg = json.loads((folder / "config.json").read_text())
    del cfg["rope_parameters"]
    cfg.update(rotary_pct=0.5, rotary_emb_base=500.0,
               rope_scaling={"type": "dynamic", "factor": 2.0})
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "model.safetensors").write_bytes((folder / "model.safetensors").read_bytes())
    with pytest.raises(al.NetworkError, match="rope_scaling.*dynamic"):
        al.from_pretrained(tmp_path)


def test_save_pretrained_round_trip(tmp_path, neox):
    folder, model = neox
    net = al.from_pretrained(folder)
    net.save_pretrained(tmp_path / "back")
    assert layout(tmp_path / "back") == layout(folder)
    from safetensors import safe_open
    with safe_open(str(folder / "model.safetensors"), "pt") as a, \
            safe_open(str(tmp_path / "back" / "model.safetensors"), "pt") as b:
        for k in a.keys():
            assert torch.equal(a.get_tensor(k), b.get_tensor(k)), k
    again = transformers.GPTNeoXForCausalLM.from_pretrained(tmp_path / "back").eval()
    ids = torch.randint(0, VOCAB, (1, 6))
    assert torch.equal(hf_logits(again, ids), hf_logits(model, ids))


def test_trained_weights_are_fused_back_per_head(tmp_path, neox):
    folder, _ = neox
    net = al.from_pretrained(folder)
    with torch.no_grad():
        net.learnables["layers.1.attention/key.weight"].add_(0.01)
        net.learnables["layers.1.attention/value.bias"].sub_(0.02)
    net.save_pretrained(tmp_path / "tuned")
    tuned = transformers.GPTNeoXForCausalLM.from_pretrained(tmp_path / "tuned").eval()
    ids = torch.randint(0, VOCAB, (2, 7))
    assert relative_difference(net(ids), hf_logits(tuned, ids)) <= 1e-4


def test_the_base_model_gives_the_last_hidden_state(tmp_path, neox):
    _, causal = neox
    model = transformers.GPTNeoXModel(causal.config).eval()
    model.load_state_dict(causal.gpt_neox.state_dict())
    model.save_pretrained(tmp_path)
    net = al.from_pretrained(tmp_path)
    assert net.output_names == ["last_hidden_state"]
    ids = torch.randint(0, VOCAB, (2, 6))
    with torch.no_grad():
        want = model(input_ids=ids).last_hidden_state
    assert relative_difference(net(ids), want) <= 1e-4


def test_attnlab_file_keeps_the_checkpoint_and_its_layout(tmp_path, neox):
    folder, model = neox
    net = al.from_pretrained(folder)
    net.save(tmp_path / "neox.attnlab")
    back = al.load(tmp_path / "neox.attnlab")
    ids = torch.randint(0, VOCAB, (2, 6))
    assert torch.equal(back.eval()(ids), net(ids))
    back.save_pretrained(tmp_path / "hf")
    again = transformers.GPTNeoXForCausalLM.from_pretrained(tmp_path / "hf").eval()
    assert torch.equal(hf_logits(again, ids), hf_logits(model, ids))


def test_export_onnx_runs_in_onnxruntime_at_two_lengths(tmp_path, neox):
    ort = pytest.importorskip("onnxruntime")
    folder, _ = neox
    net = al.from_pretrained(folder)
    assert net.export_onnx(tmp_path / "neox.onnx").max_error < 1e-4
    session = ort.InferenceSession(str(tmp_path / "neox.onnx"))
    for t in (3, 10):
        ids = torch.randint(0, VOCAB, (2, t))
        feeds = {"input_ids": ids.numpy(), "input_ids_mask": torch.ones(2, t, dtype=torch.bool).numpy()}
        got = torch.from_numpy(session.run(["logits"], feeds)[0])
        with torch.no_grad():
            assert relative_difference(got, net(ids)) <= 1e-4
