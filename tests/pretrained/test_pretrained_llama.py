"""Llama checkpoints: built by transformers (random, offline), loaded as attnlab networks, equal
to transformers in float32, padded, generating the same tokens, saved back."""
import json
import warnings

import pytest
import torch

import attnlab as al
from pretrained_helpers import hf_greedy, quiet_transformers

transformers = pytest.importorskip("transformers")
quiet_transformers()

VOCAB = 64


def small_config(**over):
    kw = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
              initializer_range=0.4, rope_theta=500.0, tie_word_embeddings=False,
              pad_token_id=0, bos_token_id=1, eos_token_id=2)
    kw.update(over)
    rope = kw.pop("rope_theta")
    kw["rope_parameters"] = {"rope_type": "default", "rope_theta": rope}
    return transformers.LlamaConfig(**kw)


def checkpoint(folder, **over):
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(small_config(**over)).eval()
    with torch.no_grad():                      # norms other than 1, so that they are tested
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(0.3 * torch.randn_like(p))
    model.save_pretrained(folder)
    return model


def hf_logits(model, ids, mask=None):
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=mask).logits


def assert_close_rel(a, b, rel=1e-4):
    scale = b.abs().max().item()
    diff = (a - b).abs().max().item()
    assert diff <= rel * scale, f"max abs diff {diff:.3g} > {rel} × {scale:.3g}"
    return diff / scale


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    folder = tmp_path_factory.mktemp("llama")
    model = checkpoint(folder)
    return folder, model


def test_logits_equal_transformers(llama):
    folder, model = llama
    net = al.from_pretrained(folder)
    assert net.input_names == ["input_ids"] and net.output_names == ["logits"]
    ids = torch.randint(0, VOCAB, (2, 9))
    assert_close_rel(net(ids), hf_logits(model, ids))


def test_learnables_count_as_transformers(llama):
    folder, model = llama
    net = al.from_pretrained(folder)
    assert net.analyze().total_learnables == model.num_parameters()


def test_padded_batch_equals_transformers(llama):
    folder, model = llama
    net = al.from_pretrained(folder)
    lengths = [9, 4, 6]
    seqs = [torch.randint(3, VOCAB, (t,)) for t in lengths]
    out = net(seqs)
    ids = torch.zeros(3, 9, dtype=torch.long)
    mask = torch.zeros(3, 9, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, :len(s)], mask[i, :len(s)] = s, 1
    want = hf_logits(model, ids, mask)
    for i, t in enumerate(lengths):
        assert_close_rel(out[i, :t], want[i, :t])
    padded = net(al.Padded(ids, mask.bool()))
    for i, t in enumerate(lengths):
        assert_close_rel(padded[i, :t], want[i, :t])


def test_greedy_generate_equals_transformers(llama):
    folder, model = llama
    net = al.from_pretrained(folder)
    prompt = torch.randint(3, VOCAB, (2, 5))
    ours = al.generate(net, start=prompt, stop=None, max_new_tokens=12).tokens
    assert ours.tolist() == hf_greedy(model, prompt, 12).tolist()
    assert len(set(ours.flatten().tolist())) > 4            # not one token over and over


def test_streaming_equals_the_forward_pass(llama):
    folder, _ = llama
    net = al.from_pretrained(folder)
    ids = torch.randint(0, VOCAB, (2, 8))
    full = net(ids)
    s = net.stream()
    steps = torch.cat([s.step(ids[:, :3])] + [s.step(ids[:, t:t + 1]) for t in range(3, 8)], 1)
    assert_close_rel(steps, full)


@pytest.mark.parametrize("over", [
    {"tie_word_embeddings": True},
    {"attention_bias": True, "mlp_bias": True},
    {"head_dim": 16, "num_key_value_heads": 1},            # multi-query, wider heads
    {"hidden_act": "gelu_pytorch_tanh"},
])
def test_variants_equal_transformers(tmp_path, over):
    model = checkpoint(tmp_path, **over)
    net = al.from_pretrained(tmp_path)
    ids = torch.randint(0, VOCAB, (2, 7))
    assert_close_rel(net(ids), hf_logits(model, ids))
    assert net.analyze().total_learnables == model.num_parameters()


def test_transformers_4_layout_loads_the_same(tmp_path, llama):
    folder, model = llama
    cfg = json.loads((folder / "config.json").read_text())
    rope = cfg.pop("rope_parameters")
    cfg["rope_theta"] = rope["rope_theta"]
    cfg["rope_scaling"] = None
    cfg["torch_dtype"] = cfg.pop("dtype")
    cfg["transformers_version"] = "4.46.0"
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "model.safetensors").write_bytes((folder / "model.safetensors").read_bytes())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        net = al.from_pretrained(tmp_path)
    ids = torch.randint(0, VOCAB, (1, 6))
    assert_close_rel(net(ids), hf_logits(model, ids))


@pytest.mark.parametrize("layout", ["4.x", "5.x"])
def test_scaled_rotary_is_refused_naming_the_key(tmp_path, llama, layout):
    folder, _ = llama
    cfg = json.loads((folder / "config.json").read_text())
    scaling = {"rope_type": "longrope", "short_factor": [1.0] * 4, "long_factor": [2.0] * 4,
               "original_max_position_embeddings": 64}
    if layout == "4.x":
        del cfg["rope_parameters"]
        cfg["rope_theta"], cfg["rope_scaling"] = 500.0, scaling
        key = "rope_scaling"
    else:
        cfg["rope_parameters"] = {**scaling, "rope_theta": 500.0}
        key = "rope_parameters"
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "model.safetensors").write_bytes((folder / "model.safetensors").read_bytes())
    with pytest.raises(al.NetworkError) as e:
        al.from_pretrained(tmp_path)
    assert key in str(e.value) and "longrope" in str(e.value) and "default" in str(e.value)


def test_save_pretrained_round_trip(tmp_path, llama):
    folder, model = llama
    net = al.from_pretrained(folder)
    out = tmp_path / "back"
    net.save_pretrained(out)
    from safetensors import safe_open
    with safe_open(str(folder / "model.safetensors"), "pt") as a, \
            safe_open(str(out / "model.safetensors"), "pt") as b:
        assert sorted(a.keys()) == sorted(b.keys())
        for k in a.keys():
            ta, tb = a.get_tensor(k), b.get_tensor(k)
            assert ta.dtype == tb.dtype and ta.shape == tb.shape
            assert torch.equal(ta, tb), k
    again = transformers.LlamaForCausalLM.from_pretrained(out).eval()
    ids = torch.randint(0, VOCAB, (1, 6))
    assert torch.equal(hf_logits(again, ids), hf_logits(model, ids))


def test_bfloat16_keeps_ids_and_follows_transformers(llama):
    folder, model = llama
    net = al.from_pretrained(folder, dtype=torch.bfloat16)
    assert net.learnables["embed_tokens/weight"].dtype == torch.bfloat16
    ids = torch.randint(0, VOCAB, (1, 6))
    out = net(ids)
    assert out.dtype == torch.bfloat16
    assert (out.float() - hf_logits(model, ids)).abs().max() < 0.1 * hf_logits(model, ids).abs().max()


def edited_copy(tmp_path, folder, **changes):
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(changes)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "model.safetensors").write_bytes((folder / "model.safetensors").read_bytes())
    return tmp_path


@pytest.mark.parametrize("changes,words", [
    ({"num_key_value_heads": 3}, ["num_key_value_heads", "divisor of num_attention_heads (4)"]),
    ({"hidden_act": "mish"}, ["hidden_act", "mish", "silu"]),
    ({"intermediate_size": 40}, ["mlp.gate_proj.weight", "48×32", "40×32"]),
])
def test_bad_configs_are_named(tmp_path, llama, changes, words):
    folder, _ = llama
    with pytest.raises(al.NetworkError) as e:
        al.from_pretrained(edited_copy(tmp_path, folder, **changes))
    for w in words:
        assert w in str(e.value)


def test_the_base_model_gives_the_last_hidden_state(tmp_path):
    torch.manual_seed(0)
    model = transformers.LlamaModel(small_config()).eval()
    model.save_pretrained(tmp_path)
    net = al.from_pretrained(tmp_path)
    assert net.output_names == ["last_hidden_state"]
    ids = torch.randint(0, VOCAB, (2, 6))
    with torch.no_grad():
        want = model(input_ids=ids).last_hidden_state
    assert_close_rel(net(ids), want)
    assert net.analyze().total_learnables == model.num_parameters()


def test_export_onnx_runs_in_onnxruntime_at_two_lengths(tmp_path, llama):
    ort = pytest.importorskip("onnxruntime")
    folder, _ = llama
    net = al.from_pretrained(folder)
    assert net.export_onnx(tmp_path / "llama.onnx").max_error < 1e-4
    session = ort.InferenceSession(str(tmp_path / "llama.onnx"))
    for t in (3, 10):
        ids = torch.randint(0, VOCAB, (2, t))
        feeds = {"input_ids": ids.numpy(), "input_ids_mask": torch.ones(2, t, dtype=torch.bool).numpy()}
        got = torch.from_numpy(session.run(["logits"], feeds)[0])
        with torch.no_grad():
            assert_close_rel(got, net(ids))


def test_attnlab_file_keeps_the_checkpoint_and_its_layout(tmp_path, llama):
    folder, model = llama
    net = al.from_pretrained(folder)
    net.save(tmp_path / "llama.attnlab")
    back = al.load(tmp_path / "llama.attnlab")
    ids = torch.randint(0, VOCAB, (2, 6))
    assert torch.equal(back.eval()(ids), net(ids))
    back.save_pretrained(tmp_path / "hf")
    again = transformers.LlamaForCausalLM.from_pretrained(tmp_path / "hf").eval()
    assert torch.equal(hf_logits(again, ids), hf_logits(model, ids))


def test_sharded_checkpoint_loads_the_same(tmp_path, llama):
    _, model = llama
    model.save_pretrained(tmp_path, max_shard_size="20KB")
    assert (tmp_path / "model.safetensors.index.json").exists()
    net = al.from_pretrained(tmp_path)
    ids = torch.randint(0, VOCAB, (1, 6))
    assert_close_rel(net(ids), hf_logits(model, ids))
