"""OPT checkpoints: built by transformers (random, offline), loaded as attnlab networks with
positions at offset 2, pre- or post-norm blocks and the word_embed_proj_dim projections, equal
to transformers in float32, padded, streaming, generating the same tokens, saved back and
exported."""
import json

import pytest
import torch

import attnlab as al
from pretrained_helpers import hf_greedy, layout, quiet_transformers, relative_difference, \
    valid_steps

transformers = pytest.importorskip("transformers")
quiet_transformers()

VOCAB, POSITIONS = 64, 32
# OPT-350m's shape: norms after each residual, embeddings narrower than the blocks
SMALL_350M = {"do_layer_norm_before": False, "word_embed_proj_dim": 16}


def checkpoint(folder, model_class=None, **over):
    kw = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
              ffn_dim=48, max_position_embeddings=POSITIONS, init_std=0.05, pad_token_id=1,
              bos_token_id=2, eos_token_id=2)
    kw.update(over)
    torch.manual_seed(0)
    model = (model_class or transformers.OPTForCausalLM)(transformers.OPTConfig(**kw)).eval()
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
def opt(tmp_path_factory):
    folder = tmp_path_factory.mktemp("opt")
    # an untied head: a tied one this small repeats one token when generating
    return folder, checkpoint(folder, tie_word_embeddings=False)


@pytest.fixture(scope="module")
def opt350(tmp_path_factory):
    folder = tmp_path_factory.mktemp("opt350")
    return folder, checkpoint(folder, **SMALL_350M)


def test_logits_equal_transformers(opt):
    folder, model = opt
    net = al.from_pretrained(folder)
    assert net.input_names == ["input_ids"] and net.output_names == ["logits"]
    ids = torch.randint(0, VOCAB, (2, 9))
    assert relative_difference(net(ids), hf_logits(model, ids)) <= 1e-4
    assert net.analyze().total_learnables == model.num_parameters()
    positions = net.layers["decoder.embed_positions"]
    assert positions.offset == 2 and positions.max_length == POSITIONS + 2
    assert net.layers["lm_head"].tied_to is None


def test_the_positions_start_at_row_2(opt):
    folder, model = opt
    net = al.from_pretrained(folder)
    table = model.model.decoder.embed_positions.weight.detach()
    with torch.no_grad():
        net.learnables["decoder.embed_positions/weight"][:2] = 1e3    # rows no position reads
    ids = torch.randint(0, VOCAB, (1, 5))
    assert relative_difference(net(ids), hf_logits(model, ids)) <= 1e-4
    assert not torch.equal(net.learnables["decoder.embed_positions/weight"], table)


def test_post_norm_and_projections_equal_transformers(opt350):
    folder, model = opt350
    net = al.from_pretrained(folder)
    ids = torch.randint(0, VOCAB, (2, 9))
    assert relative_difference(net(ids), hf_logits(model, ids)) <= 1e-4
    assert net.analyze().total_learnables == model.num_parameters()
    assert "decoder.final_layer_norm" not in net.layers          # post-norm: no final norm
    assert net.layers["lm_head"].tied_to == "decoder.embed_tokens"
    assert net.source("decoder.layers.0.fc1", "in")[0] == "decoder.layers.0.self_attn_layer_norm"
    assert tuple(net.learnables["decoder.project_in/weight"].shape) == (32, 16)
    assert tuple(net.learnables["decoder.project_out/weight"].shape) == (16, 32)
    assert tuple(net.learnables["decoder.embed_positions/weight"].shape) == (POSITIONS + 2, 32)


def test_padded_batch_equals_transformers(opt, opt350):
    for folder, model in (opt, opt350):
        net = al.from_pretrained(folder)
        lengths = [9, 4, 6]
        seqs = [torch.randint(3, VOCAB, (t,)) for t in lengths]
        ids = torch.ones(3, 9, dtype=torch.long)                 # pad_token_id 1
        mask = torch.zeros(3, 9, dtype=torch.long)
        for i, s in enumerate(seqs):
            ids[i, :len(s)], mask[i, :len(s)] = s, 1
        want = valid_steps(hf_logits(model, ids, mask), lengths)
        assert relative_difference(valid_steps(net(seqs), lengths), want) <= 1e-4
        padded = net(al.Padded(ids, mask.bool()))
        assert relative_difference(valid_steps(padded, lengths), want) <= 1e-4


def test_streaming_equals_the_forward_pass(opt, opt350):
    for folder, _ in (opt, opt350):
        net = al.from_pretrained(folder)
        ids = torch.randint(0, VOCAB, (2, 8))
        full = net(ids)
        s = net.stream()
        steps = [s.step(ids[:, :3])] + [s.step(ids[:, t:t + 1]) for t in range(3, 8)]
        assert relative_difference(torch.cat(steps, 1), full) <= 1e-4


def test_greedy_generate_equals_transformers(opt, opt350):
    for folder, model in (opt, opt350):
        net = al.from_pretrained(folder)
        torch.manual_seed(1)
        prompt = torch.randint(3, VOCAB, (2, 5))
        ours = al.generate(net, start=prompt, stop=None, max_new_tokens=12).tokens
        assert ours.tolist() == hf_greedy(model, prompt, 12).tolist()
        assert len(set(ours.flatten().tolist())) > 4          # not one token over and over


def test_generate_counts_the_positions_not_the_rows(opt):
    folder, model = opt
    net = al.from_pretrained(folder)
    prompt = torch.randint(3, VOCAB, (1, POSITIONS - 4))
    ours = al.generate(net, start=prompt, stop=None, max_new_tokens=5).tokens      # the last position: 31
    assert ours.tolist() == hf_greedy(model, prompt, 5).tolist()
    with pytest.raises(al.DataError, match=f"past the {POSITIONS} positions"):
        al.generate(net, start=prompt, stop=None, max_new_tokens=6)
    with pytest.raises(al.DataError, match=f"max_length {POSITIONS}"):
        net(torch.randint(3, VOCAB, (1, POSITIONS + 1)))


@pytest.mark.parametrize("over", [
    {"word_embed_proj_dim": 16},
    {"enable_bias": False},
    {"_remove_final_layer_norm": True, "activation_function": "gelu"},
    {"do_layer_norm_before": False},
])
def test_variants_equal_transformers(tmp_path, over):
    model = checkpoint(tmp_path, **over)
    net = al.from_pretrained(tmp_path)
    ids = torch.randint(0, VOCAB, (2, 7))
    assert relative_difference(net(ids), hf_logits(model, ids)) <= 1e-4
    assert net.analyze().total_learnables == model.num_parameters()


def edited_copy(tmp_path, folder, **changes):
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(changes)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "model.safetensors").write_bytes((folder / "model.safetensors").read_bytes())
    return tmp_path


@pytest.mark.parametrize("changes,words", [
    ({"layer_norm_elementwise_affine": False}, ["layer_norm_elementwise_affine", "false", "true"]),
    ({"layerdrop": 0.1}, ["layerdrop", "0.1"]),
    ({"activation_function": "mish"}, ["activation_function", "mish"]),
    ({"num_attention_heads": 5}, ["num_attention_heads", "divisor of hidden_size (32)"]),
])
def test_options_not_built_are_refused_by_name(tmp_path, opt, changes, words):
    folder, _ = opt
    with pytest.raises(al.NetworkError) as e:
        al.from_pretrained(edited_copy(tmp_path, folder, **changes))
    for w in words:
        assert w in str(e.value)


def test_save_pretrained_round_trip(tmp_path, opt, opt350):
    for i, (folder, model) in enumerate((opt, opt350)):
        net = al.from_pretrained(folder)
        out = tmp_path / f"back{i}"
        net.save_pretrained(out)
        assert layout(out) == layout(folder)
        from safetensors import safe_open
        with safe_open(str(folder / "model.safetensors"), "pt") as a, \
                safe_open(str(out / "model.safetensors"), "pt") as b:
            for k in a.keys():
                assert torch.equal(a.get_tensor(k), b.get_tensor(k)), k
        again = transformers.OPTForCausalLM.from_pretrained(out).eval()
        ids = torch.randint(0, VOCAB, (1, 6))
        assert torch.equal(hf_logits(again, ids), hf_logits(model, ids))


def test_the_base_model_gives_the_projected_last_hidden_state(tmp_path):
    model = checkpoint(tmp_path, transformers.OPTModel, **SMALL_350M)
    net = al.from_pretrained(tmp_path)
    assert net.output_names == ["last_hidden_state"]
    ids = torch.randint(0, VOCAB, (2, 6))
    with torch.no_grad():
        want = model(input_ids=ids).last_hidden_state
    assert want.shape[-1] == 16
    assert relative_difference(net(ids), want) <= 1e-4
    assert net.analyze().total_learnables == model.num_parameters()


def test_attnlab_file_keeps_the_checkpoint_and_its_layout(tmp_path, opt350):
    folder, model = opt350
    net = al.from_pretrained(folder)
    net.save(tmp_path / "opt.attnlab")
    back = al.load(tmp_path / "opt.attnlab")
    assert back.layers["decoder.embed_positions"].offset == 2
    ids = torch.randint(0, VOCAB, (2, 6))
    assert torch.equal(back.eval()(ids), net(ids))
    back.save_pretrained(tmp_path / "hf")
    again = transformers.OPTForCausalLM.from_pretrained(tmp_path / "hf").eval()
    assert torch.equal(hf_logits(again, ids), hf_logits(model, ids))


def test_export_onnx_runs_in_onnxruntime_at_two_lengths(tmp_path, opt350):
    ort = pytest.importorskip("onnxruntime")
    folder, _ = opt350
    net = al.from_pretrained(folder)
    assert net.export_onnx(tmp_path / "opt.onnx").max_error < 1e-4
    session = ort.InferenceSession(str(tmp_path / "opt.onnx"))
    for t in (3, 10):
        ids = torch.randint(0, VOCAB, (2, t))
        feeds = {"input_ids": ids.numpy(), "input_ids_mask": torch.ones(2, t, dtype=torch.bool).numpy()}
        got = torch.from_numpy(session.run(["logits"], feeds)[0])
        with torch.no_grad():
            assert relative_difference(got, net(ids)) <= 1e-4
