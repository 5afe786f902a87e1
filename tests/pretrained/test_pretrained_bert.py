"""BERT checkpoints: `al.from_pretrained` against transformers on small random models."""
import json

import pytest
import torch

import attnlab as al
from attnlab.cli import main
from attnlab.pretrained import CheckpointError
from pretrained_helpers import (layout, quiet_transformers, relative_difference, save_checkpoint,
                                valid_steps)

transformers = pytest.importorskip("transformers")
quiet_transformers()

VOCAB = 120


def _config(**kw):
    base = dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=4, intermediate_size=48,
                vocab_size=VOCAB, max_position_embeddings=32, type_vocab_size=2)
    return transformers.BertConfig(**{**base, **kw})


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    torch.manual_seed(0)
    model = transformers.BertModel(_config())
    return save_checkpoint(model, tmp_path_factory.mktemp("bert")), model.eval()


@pytest.fixture(scope="module")
def loaded(base):
    return al.from_pretrained(base[0])


def _batch(lengths, seed=0):
    g = torch.Generator().manual_seed(seed)
    seqs = [torch.randint(0, VOCAB, (n,), generator=g) for n in lengths]
    types = [(torch.arange(n) >= n // 2).long() for n in lengths]      # sentence A, then B
    t = max(lengths)
    ids = torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True)
    tt = torch.nn.utils.rnn.pad_sequence(types, batch_first=True)
    mask = (torch.arange(t).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)).long()
    return seqs, types, ids, tt, mask


def test_hidden_states_and_pooler_equal_transformers(base, loaded):
    _, _, ids, tt, _ = _batch([10, 10, 10])
    with torch.no_grad():
        ours, theirs = loaded(input_ids=ids, token_type_ids=tt), base[1](input_ids=ids,
                                                                        token_type_ids=tt)
    assert loaded.input_names == ["input_ids", "token_type_ids"]
    assert set(ours) == {"last_hidden_state", "pooler_output"}
    assert relative_difference(ours["last_hidden_state"], theirs.last_hidden_state) <= 1e-4
    assert relative_difference(ours["pooler_output"], theirs.pooler_output) <= 1e-4


def test_padded_batch_equals_transformers_with_attention_mask(base, loaded):
    lengths = [12, 5, 8]
    seqs, types, ids, tt, mask = _batch(lengths, seed=1)
    with torch.no_grad():
        ours = loaded(input_ids=seqs, token_type_ids=types)
        theirs = base[1](input_ids=ids, token_type_ids=tt, attention_mask=mask)
    assert relative_difference(valid_steps(ours["last_hidden_state"], lengths),
                               valid_steps(theirs.last_hidden_state, lengths)) <= 1e-4
    assert relative_difference(ours["pooler_output"], theirs.pooler_output) <= 1e-4


def test_learnables_counted_as_transformers(base, loaded):
    assert loaded.analyze().total_learnables == base[1].num_parameters()


def test_masked_lm_head_tied_to_the_word_embeddings(tmp_path):
    torch.manual_seed(1)
    hf = transformers.BertForMaskedLM(_config()).eval()
    net = al.from_pretrained(save_checkpoint(hf, tmp_path / "in"))
    _, _, ids, tt, _ = _batch([9, 9])
    with torch.no_grad():
        ours, theirs = net(input_ids=ids, token_type_ids=tt), hf(input_ids=ids, token_type_ids=tt)
    assert net.output_names == ["logits"]
    assert relative_difference(ours, theirs.logits) <= 1e-4
    assert net.analyze().total_learnables == hf.num_parameters()
    net.save_pretrained(tmp_path / "out")
    assert layout(tmp_path / "out") == layout(tmp_path / "in")
    again = transformers.BertForMaskedLM.from_pretrained(tmp_path / "out").eval()
    with torch.no_grad():
        assert torch.equal(again(input_ids=ids, token_type_ids=tt).logits, theirs.logits)


@pytest.mark.parametrize("cls", ["BertForSequenceClassification", "BertForTokenClassification"])
def test_classification_heads(cls, tmp_path):
    torch.manual_seed(2)
    hf = getattr(transformers, cls)(_config(num_labels=3, hidden_act="gelu_new")).eval()
    net = al.from_pretrained(save_checkpoint(hf, tmp_path))
    lengths = [7, 4]
    seqs, types, ids, tt, mask = _batch(lengths, seed=2)
    with torch.no_grad():
        ours = net(input_ids=seqs, token_type_ids=types)
        theirs = hf(input_ids=ids, token_type_ids=tt, attention_mask=mask).logits
    if cls == "BertForTokenClassification":
        ours, theirs = valid_steps(ours, lengths), valid_steps(theirs, lengths)
    assert relative_difference(ours, theirs) <= 1e-4
    assert net.analyze().total_learnables == hf.num_parameters()


def test_save_and_load_round_trip(loaded, tmp_path):
    path = tmp_path / "bert.attnlab"
    loaded.save(path)
    back = al.load(path).eval()         # a loaded file starts in training mode, as torch modules do
    _, _, ids, tt, _ = _batch([6, 6])
    with torch.no_grad():
        a, b = back(input_ids=ids, token_type_ids=tt), loaded(input_ids=ids, token_type_ids=tt)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_save_pretrained_writes_the_original_layout(base, loaded, tmp_path):
    folder, hf = base
    loaded.save_pretrained(tmp_path / "out")
    assert layout(tmp_path / "out") == layout(folder)
    assert json.loads((tmp_path / "out" / "config.json").read_text()) == \
        json.loads((folder / "config.json").read_text())
    again = transformers.BertModel.from_pretrained(tmp_path / "out").eval()
    _, _, ids, tt, _ = _batch([6, 6])
    with torch.no_grad():
        assert torch.equal(again(input_ids=ids, token_type_ids=tt).last_hidden_state,
                           hf(input_ids=ids, token_type_ids=tt).last_hidden_state)


def test_bfloat16(base):
    net = al.from_pretrained(base[0], dtype=torch.bfloat16)
    assert {p.dtype for p in net.parameters()} == {torch.bfloat16}
    _, _, ids, tt, _ = _batch([6, 6])
    with torch.no_grad():
        ours = net(input_ids=ids, token_type_ids=tt)["last_hidden_state"]
        theirs = base[1](input_ids=ids, token_type_ids=tt).last_hidden_state
    assert ours.dtype == torch.bfloat16
    assert relative_difference(ours.float(), theirs) < 0.05


def test_relative_positions_of_4x_configs_are_refused(base, tmp_path):
    import shutil
    folder = shutil.copytree(base[0], tmp_path / "rel")
    cfg = json.loads((folder / "config.json").read_text())
    cfg["position_embedding_type"] = "absolute"                  # 4.x wrote the default
    (folder / "config.json").write_text(json.dumps(cfg))
    al.from_pretrained(folder)
    cfg["position_embedding_type"] = "relative_key"
    (folder / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match='"position_embedding_type" is "relative_key".*'
                                              'supported: "absolute"'):
        al.from_pretrained(folder)


def test_a_decoder_bert_is_refused(tmp_path):
    torch.manual_seed(3)
    folder = save_checkpoint(transformers.BertModel(_config(is_decoder=True)), tmp_path)
    with pytest.raises(CheckpointError, match='"is_decoder" is true'):
        al.from_pretrained(folder)


def test_cli_analyze_plot_view(loaded, tmp_path, capsys):
    path = tmp_path / "bert.attnlab"
    loaded.save(path)
    assert main(["analyze", str(path)]) == 0
    assert "encoder.layer.1.attention" in capsys.readouterr().out
    assert main(["plot", str(path), "-o", str(tmp_path / "bert.png")]) == 0
    assert main(["view", str(path), "-o", str(tmp_path / "bert.html")]) == 0
    assert (tmp_path / "bert.html").stat().st_size > 0


def test_early_files_with_layernorm_gamma_and_beta(base, tmp_path):
    import shutil
    from safetensors.torch import load_file, save_file
    folder = shutil.copytree(base[0], tmp_path / "old")
    tensors = load_file(folder / "model.safetensors")
    renamed = {k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias",
                                                                       "LayerNorm.beta"): v
               for k, v in tensors.items()}
    save_file(renamed, folder / "model.safetensors", metadata={"format": "pt"})
    net = al.from_pretrained(folder)
    _, _, ids, tt, _ = _batch([6, 6])
    with torch.no_grad():
        ours = net(input_ids=ids, token_type_ids=tt)["last_hidden_state"]
        theirs = base[1](input_ids=ids, token_type_ids=tt).last_hidden_state
    assert relative_difference(ours, theirs) <= 1e-4
    net.save_pretrained(tmp_path / "out")
    assert layout(tmp_path / "out") == layout(folder)              # the file's own names


def test_fine_tuned_with_al_train_and_taken_back(tmp_path):
    torch.manual_seed(4)
    hf = transformers.BertForSequenceClassification(_config(num_labels=2)).eval()
    net = al.from_pretrained(save_checkpoint(hf, tmp_path / "in"))
    lengths = [int(n) for n in torch.randint(3, 10, (16,))]
    seqs, types, ids, tt, mask = _batch(lengths, seed=4)
    labels = torch.tensor([int(s[0] > VOCAB // 2) for s in seqs])
    before = net.learnables["classifier/weight"].detach().clone()
    al.train(net, {"input_ids": seqs, "token_type_ids": types}, labels, loss="crossentropy",
             options=al.TrainingOptions(max_epochs=2, batch_size=8, plots="none"), verbose=False)
    assert not torch.equal(net.learnables["classifier/weight"], before)
    net.eval()
    net.save_pretrained(tmp_path / "tuned")
    tuned = transformers.BertForSequenceClassification.from_pretrained(tmp_path / "tuned").eval()
    with torch.no_grad():
        ours = net(input_ids=seqs, token_type_ids=types)
        theirs = tuned(input_ids=ids, token_type_ids=tt, attention_mask=mask).logits
    assert relative_difference(ours, theirs) <= 1e-4
