"""T5 checkpoints: the encoder–decoder with its shared relative position bias, equal to
transformers in float32 (relu and gated-gelu, tied and untied heads, padded batches),
generating the same tokens with the encoder input static, saved back."""
import json

import pytest
import torch

import attnlab as al
from pretrained_helpers import layout, quiet_transformers, relative_difference, valid_steps

transformers = pytest.importorskip("transformers")
quiet_transformers()

VOCAB = 64


def checkpoint(folder, **over):
    kw = dict(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=48, num_layers=2,
              num_decoder_layers=2, num_heads=4, relative_attention_num_buckets=8,
              relative_attention_max_distance=16, decoder_start_token_id=0, pad_token_id=0,
              eos_token_id=1)
    kw.update(over)
    torch.manual_seed(0)
    model = transformers.T5ForConditionalGeneration(transformers.T5Config(**kw)).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "layer_norm" in name:
                p.add_(0.3 * torch.randn_like(p))
            if "relative_attention_bias" in name:
                p.mul_(5.0)                    # a bias large enough to matter
    model.save_pretrained(folder)
    return model


def hf_logits(model, ids, dec, mask=None, dec_mask=None):
    with torch.no_grad():
        return model(input_ids=ids, decoder_input_ids=dec, attention_mask=mask,
                     decoder_attention_mask=dec_mask).logits


def padded(seqs):
    """Right-padded ids and their attention mask, as transformers takes them."""
    ids = torch.zeros(len(seqs), max(map(len, seqs)), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, s in enumerate(seqs):
        ids[i, :len(s)], mask[i, :len(s)] = s, 1
    return ids, mask


@pytest.fixture(scope="module")
def t5(tmp_path_factory):
    folder = tmp_path_factory.mktemp("t5")
    return folder, checkpoint(folder)


def test_logits_equal_transformers(t5):
    folder, model = t5
    net = al.from_pretrained(folder)
    assert set(net.input_names) == {"input_ids", "decoder_input_ids"}
    assert net.output_names == ["logits"]
    ids, dec = torch.randint(2, VOCAB, (2, 9)), torch.randint(2, VOCAB, (2, 6))
    ours = net({"input_ids": ids, "decoder_input_ids": dec})
    assert relative_difference(ours, hf_logits(model, ids, dec)) <= 1e-4


def test_one_relative_bias_per_stack_feeds_every_self_attention(t5):
    folder, _ = t5
    net = al.from_pretrained(folder)
    biases = [l.name for l in net.layers if l.type_name == "RelativePositionBias"]
    assert biases == ["encoder.block.0.layer.0.relative_attention_bias",
                      "decoder.block.0.layer.0.relative_attention_bias"]
    fed = [c.destination for c in net.connections if c.source.startswith(biases[1])]
    assert sorted(fed) == [f"decoder.block.{i}.layer.0.SelfAttention/bias" for i in range(2)]


def test_learnables_count_as_transformers(t5):
    folder, model = t5
    assert al.from_pretrained(folder).analyze().total_learnables == model.num_parameters()


def test_padded_batches_equal_transformers(t5):
    folder, model = t5
    net = al.from_pretrained(folder)
    enc_len, dec_len = [9, 3, 6], [5, 6, 2]
    enc = [torch.randint(2, VOCAB, (t,)) for t in enc_len]
    dec = [torch.randint(2, VOCAB, (t,)) for t in dec_len]
    ours = net({"input_ids": enc, "decoder_input_ids": dec})
    ids, mask = padded(enc)
    dids, dmask = padded(dec)
    want = hf_logits(model, ids, dids, mask, dmask)
    assert relative_difference(valid_steps(ours, dec_len), valid_steps(want, dec_len)) <= 1e-4


@pytest.mark.parametrize("over", [
    {"feed_forward_proj": "gated-gelu", "tie_word_embeddings": False},     # T5 v1.1
    {"feed_forward_proj": "gated-gelu"},
    {"num_decoder_layers": 3, "dropout_rate": 0.0},          # a deeper decoder
])
def test_variants_equal_transformers(tmp_path, over):
    model = checkpoint(tmp_path, **over)
    net = al.from_pretrained(tmp_path)
    ids, dec = torch.randint(2, VOCAB, (2, 7)), torch.randint(2, VOCAB, (2, 5))
    ours = net({"input_ids": ids, "decoder_input_ids": dec})
    assert relative_difference(ours, hf_logits(model, ids, dec)) <= 1e-4
    assert net.analyze().total_learnables == model.num_parameters()


def test_a_4x_untied_head_keeps_its_own_weight(tmp_path, t5):
    """T5 v1.1 as transformers 4.x wrote it: tie_word_embeddings false, lm_head.weight apart,
    no scaling of the decoder's output."""
    folder, model = t5
    from safetensors.torch import load_file, save_file
    tensors = load_file(str(folder / "model.safetensors"))
    torch.manual_seed(3)
    tensors["lm_head.weight"] = torch.randn(VOCAB, 32)
    save_file(tensors, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    cfg = json.loads((folder / "config.json").read_text())
    cfg.pop("scale_decoder_outputs")
    cfg["tie_word_embeddings"] = False
    cfg["torch_dtype"] = cfg.pop("dtype")
    cfg["transformers_version"] = "4.46.0"
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    theirs = transformers.T5ForConditionalGeneration.from_pretrained(tmp_path).eval()
    net = al.from_pretrained(tmp_path)
    assert "scale_decoder_outputs" not in [l.name for l in net.layers]
    ids, dec = torch.randint(2, VOCAB, (1, 7)), torch.randint(2, VOCAB, (1, 4))
    ours = net({"input_ids": ids, "decoder_input_ids": dec})
    assert relative_difference(ours, hf_logits(theirs, ids, dec)) <= 1e-4
    assert net.analyze().total_learnables == theirs.num_parameters()
    net.save_pretrained(tmp_path / "back")                  # its own head goes back too
    assert layout(tmp_path / "back") == layout(tmp_path)
    assert json.loads((tmp_path / "back" / "config.json").read_text())["tie_word_embeddings"] \
        is False


def test_greedy_generate_equals_transformers(tmp_path):
    """T5 v1.1-style weights large enough to give varied tokens; the encoder input a padded
    batch given whole, the decoder started from the start id."""
    model = checkpoint(tmp_path, initializer_factor=5.0, feed_forward_proj="gated-gelu",
                       tie_word_embeddings=False)
    net = al.from_pretrained(tmp_path)
    enc = [torch.randint(2, VOCAB, (t,)) for t in (8, 3, 5)]
    ids, mask = padded(enc)
    ours = al.generate(net, static_inputs={"input_ids": enc}, start=0, stop=None,
                       max_new_tokens=10).tokens
    with torch.no_grad():
        theirs = model.generate(ids, attention_mask=mask, max_new_tokens=10, do_sample=False,
                                eos_token_id=None, decoder_start_token_id=0)
    assert ours.tolist() == theirs[:, 1:].tolist()          # theirs starts with the start id
    assert len(set(ours.flatten().tolist())) > 4            # not one token over and over


def test_streaming_the_decoder_equals_the_forward_pass(t5):
    folder, _ = t5
    net = al.from_pretrained(folder)
    ids, dec = torch.randint(2, VOCAB, (2, 8)), torch.randint(2, VOCAB, (2, 7))
    full = net({"input_ids": ids, "decoder_input_ids": dec})
    s = net.stream(static_inputs={"input_ids": ids})
    steps = [s.step(dec[:, :3])] + [s.step(dec[:, t:t + 1]) for t in range(3, 7)]
    assert relative_difference(torch.cat(steps, 1), full) <= 1e-4


def test_save_pretrained_round_trip(tmp_path, t5):
    folder, model = t5
    net = al.from_pretrained(folder)
    net.save_pretrained(tmp_path / "back")
    assert layout(tmp_path / "back") == layout(folder)
    again = transformers.T5ForConditionalGeneration.from_pretrained(tmp_path / "back").eval()
    ids, dec = torch.randint(2, VOCAB, (1, 7)), torch.randint(2, VOCAB, (1, 4))
    assert torch.equal(hf_logits(again, ids, dec), hf_logits(model, ids, dec))


@pytest.mark.parametrize("proj", ["gated", "tanh", "gated-gelu-x"])
def test_an_unknown_feed_forward_is_named(tmp_path, t5, proj):
    folder, _ = t5
    cfg = json.loads((folder / "config.json").read_text())
    cfg["feed_forward_proj"] = proj
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "model.safetensors").write_bytes((folder / "model.safetensors").read_bytes())
    with pytest.raises(al.NetworkError) as e:
        al.from_pretrained(tmp_path)
    assert "feed_forward_proj" in str(e.value) and "gated-gelu" in str(e.value)


def test_transformers_4_layout_of_a_tied_t5_loads_the_same(tmp_path, t5):
    folder, model = t5
    cfg = json.loads((folder / "config.json").read_text())
    cfg.pop("scale_decoder_outputs")                 # 4.x: the tied head implies the scaling
    cfg["torch_dtype"] = cfg.pop("dtype")
    cfg.update(n_positions=512, output_past=True, transformers_version="4.46.0")
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "model.safetensors").write_bytes((folder / "model.safetensors").read_bytes())
    net = al.from_pretrained(tmp_path)
    assert "scale_decoder_outputs" in [l.name for l in net.layers]
    ids, dec = torch.randint(2, VOCAB, (1, 7)), torch.randint(2, VOCAB, (1, 4))
    ours = net({"input_ids": ids, "decoder_input_ids": dec})
    assert relative_difference(ours, hf_logits(model, ids, dec)) <= 1e-4


def test_dropout_follows_the_config_in_training(t5):
    folder, _ = t5
    net = al.from_pretrained(folder)
    drops = [l for l in net.layers if l.type_name == "Dropout"]
    assert drops and all(l.p == 0.1 for l in drops)
    ids, dec = torch.randint(2, VOCAB, (2, 7)), torch.randint(2, VOCAB, (2, 4))
    x = {"input_ids": ids, "decoder_input_ids": dec}
    net.train()
    torch.manual_seed(0)
    a = net(x)
    assert not torch.allclose(a, net(x))            # dropout draws anew
    a.sum().backward()
    assert net.learnables["shared/weight"].grad.abs().sum() > 0


def test_export_onnx_runs_in_onnxruntime_at_two_lengths(tmp_path, t5):
    ort = pytest.importorskip("onnxruntime")
    folder, _ = t5
    net = al.from_pretrained(folder)
    assert net.export_onnx(tmp_path / "t5.onnx").max_error < 1e-4
    session = ort.InferenceSession(str(tmp_path / "t5.onnx"))
    for te, td in ((3, 2), (9, 6)):
        ids, dec = torch.randint(2, VOCAB, (2, te)), torch.randint(2, VOCAB, (2, td))
        feeds = {"input_ids": ids.numpy(), "decoder_input_ids": dec.numpy(),
                 "input_ids_mask": torch.ones(2, te, dtype=torch.bool).numpy(),
                 "decoder_input_ids_mask": torch.ones(2, td, dtype=torch.bool).numpy()}
        got = torch.from_numpy(session.run(["logits"], feeds)[0])
        with torch.no_grad():
            want = net({"input_ids": ids, "decoder_input_ids": dec})
        assert relative_difference(got, want) <= 1e-4
