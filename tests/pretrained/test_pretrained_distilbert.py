"""DistilBERT checkpoints: `al.from_pretrained` against transformers on small random models."""
import json
import shutil

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
    base = dict(n_layers=2, dim=32, n_heads=4, hidden_dim=48, vocab_size=VOCAB,
                max_position_embeddings=32)
    return transformers.DistilBertConfig(**{**base, **kw})


def _model(cls, seed, **kw):
    torch.manual_seed(seed)
    return getattr(transformers, cls)(_config(**kw)).eval()


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    model = _model("DistilBertModel", 0)
    return save_checkpoint(model, tmp_path_factory.mktemp("distilbert")), model


@pytest.fixture(scope="module")
def loaded(base):
    return al.from_pretrained(base[0])


def _batch(lengths, seed=0):
    g = torch.Generator().manual_seed(seed)
    seqs = [torch.randint(1, VOCAB, (n,), generator=g) for n in lengths]
    ids = torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True)         # pad_token_id 0
    mask = (torch.arange(max(lengths)).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)).long()
    return seqs, ids, mask


def test_hidden_states_equal_transformers(base, loaded):
    _, ids, _ = _batch([10, 10, 10])
    with torch.no_grad():
        ours, theirs = loaded(input_ids=ids), base[1](input_ids=ids).last_hidden_state
    assert loaded.input_names == ["input_ids"]                     # no token types
    assert loaded.output_names == ["last_hidden_state"]
    assert relative_difference(ours, theirs) <= 1e-4


def test_padded_batch_equals_transformers_with_attention_mask(base, loaded):
    lengths = [12, 5, 8]
    seqs, ids, mask = _batch(lengths, seed=1)
    with torch.no_grad():
        ours = loaded(input_ids=seqs)
        theirs = base[1](input_ids=ids, attention_mask=mask).last_hidden_state
    assert relative_difference(valid_steps(ours, lengths), valid_steps(theirs, lengths)) <= 1e-4


def test_learnables_counted_as_transformers(base, loaded):
    assert loaded.analyze().total_learnables == base[1].num_parameters()


def test_no_dropout_after_the_attention_projection_as_in_transformers(loaded):
    # DistilBERT drops out after the feed-forward only: the attention's branch goes
    # straight to its residual
    drops = {n for n, layer in loaded.layer_map.items() if layer.type_name == "Dropout"}
    assert "transformer.layer.0.ffn.dropout" in drops
    assert not any(n.startswith("transformer.layer.0.sa") for n in drops)
    assert loaded.source("transformer.layer.0.sa_add", "in2")[0] == "transformer.layer.0.attention"


HEADS = {"DistilBertForMaskedLM": ["logits"],
         "DistilBertForSequenceClassification": ["logits"],
         "DistilBertForTokenClassification": ["logits"],
         "DistilBertForQuestionAnswering": ["start_logits", "end_logits"]}


@pytest.mark.parametrize("cls", sorted(HEADS))
def test_heads_equal_transformers_on_a_padded_batch(cls, tmp_path):
    hf = _model(cls, 2, num_labels=2 if "Question" in cls else 3)
    net = al.from_pretrained(save_checkpoint(hf, tmp_path / "in"))
    assert net.output_names == HEADS[cls]
    lengths = [7, 4]
    seqs, ids, mask = _batch(lengths, seed=2)
    with torch.no_grad():
        ours = net(input_ids=seqs)
        theirs = hf(input_ids=ids, attention_mask=mask)
    ours = ours if isinstance(ours, dict) else {"logits": ours}
    for name in HEADS[cls]:
        a, b = ours[name], theirs[name]
        if cls != "DistilBertForSequenceClassification":       # scores per token
            assert a.shape == b.shape
            a, b = valid_steps(a, lengths), valid_steps(b, lengths)
        assert relative_difference(a, b) <= 1e-4, name
    assert net.analyze().total_learnables == hf.num_parameters()


def test_dropouts_of_the_heads_follow_their_keys(tmp_path):
    cfg = dict(dropout=0.05, seq_classif_dropout=0.3, qa_dropout=0.15)
    nets = {cls: al.from_pretrained(save_checkpoint(_model(cls, 3, **cfg), tmp_path / cls))
            for cls in HEADS if "MaskedLM" not in cls}
    assert nets["DistilBertForSequenceClassification"].layer_map["dropout"].p == 0.3
    assert nets["DistilBertForTokenClassification"].layer_map["dropout"].p == 0.05
    assert nets["DistilBertForQuestionAnswering"].layer_map["dropout"].p == 0.15


@pytest.mark.parametrize("cls", sorted(HEADS) + ["DistilBertModel"])
def test_save_pretrained_and_transformers_loads_it_back(cls, tmp_path):
    hf = _model(cls, 4)
    folder = save_checkpoint(hf, tmp_path / "in")
    net = al.from_pretrained(folder)
    net.save_pretrained(tmp_path / "out")
    assert layout(tmp_path / "out") == layout(folder)
    assert json.loads((tmp_path / "out" / "config.json").read_text()) == \
        json.loads((folder / "config.json").read_text())
    again = getattr(transformers, cls).from_pretrained(tmp_path / "out").eval()
    _, ids, _ = _batch([6, 6])
    with torch.no_grad():
        a, b = again(input_ids=ids), hf(input_ids=ids)
    for name in HEADS.get(cls, ["last_hidden_state"]):
        assert torch.equal(a[name], b[name])


def test_sinusoidal_positions_are_built_from_the_file(tmp_path):
    hf = _model("DistilBertModel", 5, sinusoidal_pos_embds=True)
    folder = save_checkpoint(hf, tmp_path / "in")
    net = al.from_pretrained(folder)
    table = net.learnables["embeddings.position_embeddings/weight"]
    assert torch.allclose(table[1, 0::2], torch.sin(1 / 10000 ** (torch.arange(0, 32, 2) / 32)))
    lengths = [9, 4]
    seqs, ids, mask = _batch(lengths, seed=5)
    with torch.no_grad():
        ours, theirs = net(input_ids=seqs), hf(input_ids=ids, attention_mask=mask)
    assert relative_difference(valid_steps(ours, lengths),
                               valid_steps(theirs.last_hidden_state, lengths)) <= 1e-4
    net.save_pretrained(tmp_path / "out")
    assert json.loads((tmp_path / "out" / "config.json").read_text())["sinusoidal_pos_embds"]


def test_classifier_fine_tuned_with_al_train_and_taken_back(tmp_path):
    hf = _model("DistilBertForSequenceClassification", 6, num_labels=2)
    net = al.from_pretrained(save_checkpoint(hf, tmp_path / "in"))
    lengths = [int(n) for n in torch.randint(3, 10, (16,))]
    seqs, ids, mask = _batch(lengths, seed=6)
    labels = torch.tensor([int(s[0] > VOCAB // 2) for s in seqs])
    before = net.learnables["classifier/weight"].detach().clone()
    al.train(net, {"input_ids": seqs}, labels, loss="crossentropy",
             options=al.TrainingOptions(max_epochs=2, batch_size=8, plots="none"), verbose=False)
    assert not torch.equal(net.learnables["classifier/weight"], before)
    net.eval()
    net.save_pretrained(tmp_path / "tuned")
    tuned = transformers.DistilBertForSequenceClassification.from_pretrained(
        tmp_path / "tuned").eval()
    with torch.no_grad():
        ours, theirs = net(input_ids=seqs), tuned(input_ids=ids, attention_mask=mask).logits
    assert relative_difference(ours, theirs) <= 1e-4


def test_export_onnx_checked_by_onnxruntime_at_two_lengths(loaded, tmp_path):
    ort = pytest.importorskip("onnxruntime")
    import numpy as np
    result = loaded.export_onnx(tmp_path / "net.onnx")
    assert result.max_error is not None and result.max_error < 1e-4
    session = ort.InferenceSession(str(tmp_path / "net.onnx"))
    names = [i.name for i in session.get_inputs()]
    for t in (3, 11):
        ids = torch.randint(1, VOCAB, (2, t))
        feeds = {"input_ids": ids.numpy()}
        feeds.update({n: np.ones((2, t), dtype=bool) for n in names if n not in feeds})
        got = session.run(None, feeds)[0]
        with torch.no_grad():
            assert relative_difference(torch.from_numpy(got), loaded(input_ids=ids)) <= 1e-4


def test_cli_view_shows_the_question_answering_head(tmp_path):
    net = al.from_pretrained(save_checkpoint(_model("DistilBertForQuestionAnswering", 7),
                                             tmp_path / "in"))
    path = tmp_path / "qa.attnlab"
    net.save(path)
    assert main(["view", str(path), "-o", str(tmp_path / "qa.html")]) == 0
    page = (tmp_path / "qa.html").read_text()
    assert "start_logits" in page and "qa_outputs" in page


def _edited(folder, tmp_path, **changes):
    out = shutil.copytree(folder, tmp_path / "edited")
    cfg = json.loads((out / "config.json").read_text())
    cfg.update(changes)
    (out / "config.json").write_text(json.dumps(cfg))
    return out


@pytest.mark.parametrize("changes, parts", [
    ({"activation": "quick_gelu"}, ['"activation" is "quick_gelu"', '"gelu"']),
    ({"n_heads": 5}, ['"n_heads"', "a divisor of dim (32)"]),
    ({"sinusoidal_pos_embds": "yes"}, ['"sinusoidal_pos_embds"', "true or false"]),
    ({"architectures": ["DistilBertForMultipleChoice"]},
     ['"architectures" is ["DistilBertForMultipleChoice"]', "DistilBertForQuestionAnswering"]),
    ({"n_layers": 10**9}, ['"n_layers" is 1000000000']),
])
def test_what_is_not_built_is_refused_by_name(base, tmp_path, changes, parts):
    folder = _edited(base[0], tmp_path, **changes)
    with pytest.raises(CheckpointError) as info:
        al.from_pretrained(folder)
    for part in parts:
        assert part in str(info.value)


def test_masked_lm_with_its_own_output_projection(tmp_path):
    hf = _model("DistilBertForMaskedLM", 8, tie_word_embeddings=False)
    net = al.from_pretrained(save_checkpoint(hf, tmp_path / "in"))
    assert net.layer_map["vocab_projector"].tied_to is None
    _, ids, _ = _batch([6, 6])
    with torch.no_grad():
        assert relative_difference(net(input_ids=ids), hf(input_ids=ids).logits) <= 1e-4
    net.save_pretrained(tmp_path / "out")
    assert layout(tmp_path / "out") == layout(tmp_path / "in")
    assert json.loads((tmp_path / "out" / "config.json").read_text())["tie_word_embeddings"] \
        is False
