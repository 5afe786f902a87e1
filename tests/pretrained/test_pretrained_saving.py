"""`save_pretrained` writes exactly the network or refuses: each edit config.json can say is
written into it (transformers then computes what the network computes), every other
difference is named and nothing is written."""
import json

import pytest
import torch

import attnlab as al
from attnlab import layers as L
from attnlab.pretrained import CheckpointError
from pretrained_helpers import quiet_transformers, relative_difference, save_checkpoint

transformers = pytest.importorskip("transformers")
quiet_transformers()

V = 80


def _ids(b=2, t=7, low=1, high=V, seed=0):
    return torch.randint(low, high, (b, t), generator=torch.Generator().manual_seed(seed))


def _model(cls, config, seed=0):
    torch.manual_seed(seed)
    return getattr(transformers, cls)(config)


def _gpt2_config(**kw):
    return transformers.GPT2Config(**{**dict(n_layer=2, n_embd=32, n_head=4, vocab_size=V,
                                             n_positions=24, pad_token_id=0), **kw})


def _llama_config(**kw):
    return transformers.LlamaConfig(**{**dict(
        vocab_size=V, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64), **kw})


def _bert_config(**kw):
    return transformers.BertConfig(**{**dict(
        vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=48, max_position_embeddings=32), **kw})


def _t5_config(**kw):
    return transformers.T5Config(**{**dict(
        vocab_size=V, d_model=32, d_kv=8, d_ff=48, num_layers=2, num_decoder_layers=2,
        num_heads=4, relative_attention_num_buckets=8, relative_attention_max_distance=16,
        decoder_start_token_id=0), **kw})


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    return save_checkpoint(_model("GPT2LMHeadModel", _gpt2_config()),
                           tmp_path_factory.mktemp("gpt2"))


def _drop_block(net, prefix):
    """Removes the layers named `prefix…` and joins what they fed to what fed the block."""
    inside = [l.name for l in net.layers if l.name.startswith(prefix)]
    into = net.source(inside[0], net.layers[inside[0]].input_ports[0])[0]
    fed = [(d, p) for (d, p), (s, _) in net.sources.items() if s in inside and d not in inside]
    net.remove(*inside)
    for dst, port in fed:
        net.connect(into, f"{dst}/{port}")


def _own_weight(net, layer, like):
    """`layer` (tied to `like`) given a weight of its own, near the embedding's."""
    old = net.layers[layer]
    w = net.learnables[f"{like}/weight"].detach().clone()
    bias = net.learnables.get(f"{layer}/bias")
    bias = None if bias is None else bias.detach().clone()
    net.replace(layer, L.Dense(old.out, bias=old.bias, name=layer))
    net.initialize()
    torch.manual_seed(1)
    with torch.no_grad():
        net.learnables[f"{layer}/weight"].copy_(w + 0.05 * torch.randn_like(w))
        if bias is not None:
            net.learnables[f"{layer}/bias"].copy_(bias)


def _same_as_transformers(net, folder, arch, **inputs):
    """transformers' `arch` loaded from `folder` computes what `net` computes; so does
    al.from_pretrained(folder)."""
    hf = getattr(transformers, arch).from_pretrained(folder).eval()
    with torch.no_grad():
        ours, theirs = net(**inputs), hf(**inputs).logits
        again = al.from_pretrained(folder)(**inputs)
    assert relative_difference(ours, theirs) <= 1e-5
    assert relative_difference(again, ours) <= 1e-6
    return json.loads((folder / "config.json").read_text())


# -- refused: what config.json cannot say ----------------------------------------------------

def _relu(net):
    net.replace("h.0.mlp.act", L.ReLU(name="h.0.mlp.act"))


def _non_causal(net):
    net.replace("h.0.attn", L.SelfAttention(4, 32, dropout=0.1, name="h.0.attn"))


def _dense_before_head(net):
    net.replace("lm_head", [L.Dense(32, name="extra"),
                            L.Dense(V, bias=False, tied_to="wte", name="lm_head")])


def _first_block_removed(net):
    _drop_block(net, "h.0.")


def _dropout(net):
    net.replace("h.0.mlp.dropout", L.Dropout(0.3, name="h.0.mlp.dropout"))


def _renamed(net):
    net.replace("h.1.mlp.act", L.GELU(approximate="tanh", name="act"))


@pytest.mark.parametrize("edit, said", [
    (_relu, 'h.0.mlp.act is ReLU; gpt2\'s layout has GELU(approximate="tanh") '
            '(activation_function "gelu_new")'),
    (_non_causal, 'h.0.attn has attention_mask None; gpt2\'s layout has "causal"'),
    (_dense_before_head, "a layer 'extra' (Dense) between ln_f and lm_head that gpt2's layout "
                         "does not have"),
    (_first_block_removed, "no block h.0 (10 layers), which gpt2's layout has: config.json "
                           "counts blocks (n_layer), so only the last ones can be removed"),
    (_dropout, "h.0.mlp.dropout has p 0.3; gpt2's layout has 0.1 (resid_pdrop 0.1)"),
    (_renamed, "a layer 'act' (GELU(approximate=\"tanh\")) stands where gpt2's layout has "
               "'h.1.mlp.act'"),
], ids=["relu", "non-causal", "dense-before-head", "first-block-removed", "dropout", "renamed"])
def test_a_difference_config_json_cannot_say_is_refused_and_nothing_written(gpt2, tmp_path,
                                                                            edit, said):
    out = tmp_path / "out"
    al.from_pretrained(gpt2).save_pretrained(out)                # an earlier save, kept
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    net = al.from_pretrained(gpt2)
    edit(net)
    with pytest.raises(CheckpointError) as e:
        net.save_pretrained(out)
    assert isinstance(e.value, al.AttnlabError)
    assert said in str(e.value)
    assert "Nothing was written" in str(e.value) and "net.save(path)" in str(e.value)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]   # no temporary beside


def test_every_difference_is_listed(gpt2, tmp_path):
    net = al.from_pretrained(gpt2)
    _relu(net)
    _non_causal(net)
    _dense_before_head(net)
    with pytest.raises(CheckpointError) as e:
        net.save_pretrained(tmp_path / "out")
    lines = [x for x in str(e.value).splitlines() if x.startswith("  - ")]
    assert len(lines) == 3
    assert not (tmp_path / "out").exists()


def test_a_tie_the_family_cannot_undo_is_refused(tmp_path):
    folder = save_checkpoint(_model("T5ForConditionalGeneration", _t5_config()), tmp_path / "t5")
    net = al.from_pretrained(folder)
    net.replace("decoder.embed_tokens", L.Embedding(V, 32, name="decoder.embed_tokens"))
    with pytest.raises(CheckpointError, match="decoder.embed_tokens is not tied to shared; t5's "
                                              "layout ties it to shared"):
        net.save_pretrained(tmp_path / "out")


# -- written: what config.json can say --------------------------------------------------------

def test_gpt2_without_its_last_block(gpt2, tmp_path):
    net = al.from_pretrained(gpt2)
    _drop_block(net, "h.1.")
    net.save_pretrained(tmp_path / "out")
    cfg = _same_as_transformers(net, tmp_path / "out", "GPT2LMHeadModel", input_ids=_ids())
    assert cfg["n_layer"] == 1


def test_gpt2_with_an_untied_head(gpt2, tmp_path):
    net = al.from_pretrained(gpt2)
    _own_weight(net, "lm_head", "wte")
    net.save_pretrained(tmp_path / "out")
    cfg = _same_as_transformers(net, tmp_path / "out", "GPT2LMHeadModel", input_ids=_ids())
    assert cfg["tie_word_embeddings"] is False


def test_gpt2_with_a_larger_vocabulary(gpt2, tmp_path):
    net = al.from_pretrained(gpt2)
    old = net.learnables["wte/weight"].detach().clone()
    net.replace("wte", L.Embedding(V + 10, 32, name="wte"))
    net.replace("lm_head", L.Dense(V + 10, bias=False, tied_to="wte", name="lm_head"))
    net.initialize()
    with torch.no_grad():
        net.learnables["wte/weight"][:V].copy_(old)
    net.save_pretrained(tmp_path / "out")
    cfg = _same_as_transformers(net, tmp_path / "out", "GPT2LMHeadModel",
                                input_ids=_ids(high=V + 10))
    assert cfg["vocab_size"] == V + 10


def test_gpt2_classifier_with_new_labels_and_their_names(tmp_path):
    hf = _model("GPT2ForSequenceClassification", _gpt2_config(num_labels=3))
    net = al.from_pretrained(save_checkpoint(hf, tmp_path / "in"))
    net.replace("score", L.Dense(4, bias=False, name="score"))
    net.initialize()
    net.metadata["class_labels"] = ["neg", "neutral", "pos", "mixed"]
    net.save_pretrained(tmp_path / "out")
    cfg = _same_as_transformers(net, tmp_path / "out", "GPT2ForSequenceClassification",
                                input_ids=_ids())
    assert cfg["id2label"] == {"0": "neg", "1": "neutral", "2": "pos", "3": "mixed"}
    assert cfg["label2id"] == {"neg": 0, "neutral": 1, "pos": 2, "mixed": 3}


def test_llama_shorter_tied_and_with_another_vocabulary(tmp_path):
    folder = save_checkpoint(_model("LlamaForCausalLM", _llama_config()), tmp_path / "in")
    net = al.from_pretrained(folder)
    _drop_block(net, "layers.1.")
    net.replace("embed_tokens", L.Embedding(V - 16, 32, name="embed_tokens"))
    net.replace("lm_head", L.Dense(V - 16, bias=False, tied_to="embed_tokens", name="lm_head"))
    net.initialize()
    net.save_pretrained(tmp_path / "out")
    cfg = _same_as_transformers(net, tmp_path / "out", "LlamaForCausalLM",
                                input_ids=_ids(high=V - 16))
    assert (cfg["num_hidden_layers"], cfg["vocab_size"], cfg["tie_word_embeddings"]) == \
        (1, V - 16, True)


def test_bert_masked_lm_with_an_untied_decoder(tmp_path):
    folder = save_checkpoint(_model("BertForMaskedLM", _bert_config()), tmp_path / "in")
    net = al.from_pretrained(folder)
    _own_weight(net, "cls.predictions.decoder", "embeddings.word_embeddings")
    net.save_pretrained(tmp_path / "out")
    cfg = _same_as_transformers(net, tmp_path / "out", "BertForMaskedLM", input_ids=_ids(),
                                token_type_ids=torch.zeros(2, 7, dtype=torch.long))
    assert cfg["tie_word_embeddings"] is False


def test_bert_classifier_shorter_and_with_new_labels(tmp_path):
    folder = save_checkpoint(_model("BertForSequenceClassification", _bert_config()),
                             tmp_path / "in")
    net = al.from_pretrained(folder)
    _drop_block(net, "encoder.layer.1.")
    net.replace("classifier", L.Dense(3, name="classifier"))
    net.initialize()
    net.save_pretrained(tmp_path / "out")
    cfg = _same_as_transformers(net, tmp_path / "out", "BertForSequenceClassification",
                                input_ids=_ids(), token_type_ids=torch.zeros(2, 7, dtype=torch.long))
    assert cfg["num_hidden_layers"] == 1
    assert cfg["id2label"] == {str(i): f"LABEL_{i}" for i in range(3)}


def test_vit_classifier_with_new_labels(tmp_path):
    config = transformers.ViTConfig(num_hidden_layers=1, hidden_size=16, num_attention_heads=2,
                                    intermediate_size=24, image_size=8, patch_size=4,
                                    num_labels=2)
    net = al.from_pretrained(save_checkpoint(_model("ViTForImageClassification", config),
                                             tmp_path / "in"))
    net.replace("classifier", L.Dense(5, name="classifier"))
    net.initialize()
    net.save_pretrained(tmp_path / "out")
    x = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    cfg = _same_as_transformers(net, tmp_path / "out", "ViTForImageClassification",
                                pixel_values=x)
    assert len(cfg["id2label"]) == 5


def test_t5_with_a_shorter_decoder_and_its_own_head(tmp_path):
    folder = save_checkpoint(_model("T5ForConditionalGeneration", _t5_config()), tmp_path / "in")
    net = al.from_pretrained(folder)
    _drop_block(net, "decoder.block.1.")
    _own_weight(net, "lm_head", "shared")
    net.save_pretrained(tmp_path / "out")
    cfg = _same_as_transformers(net, tmp_path / "out", "T5ForConditionalGeneration",
                                input_ids=_ids(), decoder_input_ids=_ids(t=4, seed=1))
    assert (cfg["num_layers"], cfg["num_decoder_layers"]) == (2, 1)


def test_an_unedited_network_writes_the_original_config(gpt2, tmp_path):
    al.from_pretrained(gpt2).save_pretrained(tmp_path / "out")
    assert json.loads((tmp_path / "out" / "config.json").read_text()) == \
        json.loads((gpt2 / "config.json").read_text())
