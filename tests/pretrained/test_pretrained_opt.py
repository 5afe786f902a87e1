"""OPT checkpoints: built by transformers (random, offline), loaded as attnlab networks with
positions at offset 2, pre- or post-norm blocks and the word_embed_proj_dim projections, equal
to transformers in float32, padded, streaming, generating the same tokens, saved back and
exported."""

import pytest
import torch

import attnlab as al
from decoder_checks import (edited_copy, generate_equal, hf_logits, onnx_equal, padded_equal,
                            randomized_norms, saved_back_equal, stream_equal)
from pretrained_helpers import hf_greedy, quiet_transformers, relative_difference

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
    randomized_norms(model)                    # norms other than 1 and 0: tested
    model.save_pretrained(folder)
    return model


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
        padded_equal(al.from_pretrained(folder), model, VOCAB)


def test_streaming_equals_the_forward_pass(opt, opt350):
    for folder, _ in (opt, opt350):
        stream_equal(al.from_pretrained(folder), VOCAB)


def test_greedy_generate_equals_transformers(opt, opt350):
    for folder, model in (opt, opt350):
        net = al.from_pretrained(folder)
        torch.manual_seed(1)
        ours = generate_equal(net, model, VOCAB, n=12)
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


@pytest.mark.parametrize("changes,words", [
    ({"layer_norm_elementwise_affine": False}, ["layer_norm_elementwise_affine", "false", "true"]),
    ({"layerdrop": 0.1}, ["layerdrop", "0.1"]),
    ({"activation_function": "mish"}, ["activation_function", "mish"]),
    ({"num_attention_heads": 5}, ["num_attention_heads", "divisor of hidden_size (32)"]),
])
def test_options_not_built_are_refused_by_name(tmp_path, opt, changes, words):
    folder, _ = opt
    with pytest.raises(al.NetworkError) as e:
        al.from_pretrained(edited_copy(folder, tmp_path, **changes))
    for w in words:
        assert w in str(e.value)


def test_save_pretrained_round_trip(tmp_path, opt, opt350):
    for i, (folder, model) in enumerate((opt, opt350)):
        saved_back_equal(al.from_pretrained(folder), model, folder, tmp_path / f"back{i}",
                         transformers.OPTForCausalLM, VOCAB)


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
    pytest.importorskip("onnxruntime")
    folder, _ = opt350
    onnx_equal(al.from_pretrained(folder), tmp_path / "opt.onnx", VOCAB)
