"""RoBERTa checkpoints: `al.from_pretrained` against transformers on small random models."""
import json
import shutil

import pytest
import torch

import attnlab as al
from attnlab import layers as L
from attnlab.cli import main
from attnlab.pretrained import CheckpointError
from pretrained_helpers import (layout, quiet_transformers, relative_difference, save_checkpoint,
                                valid_steps)

transformers = pytest.importorskip("transformers")
quiet_transformers()

VOCAB, PAD = 120, 1                 # RoBERTa's padding id: positions count from PAD + 1
POSITIONS = 40


def _config(**kw):
    base = dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=4, intermediate_size=48,
                vocab_size=VOCAB, max_position_embeddings=POSITIONS, type_vocab_size=1)
    return transformers.RobertaConfig(**{**base, **kw})


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    torch.manual_seed(0)
    model = transformers.RobertaModel(_config())
    return save_checkpoint(model, tmp_path_factory.mktemp("roberta")), model.eval()


@pytest.fixture(scope="module")
def loaded(base):
    return al.from_pretrained(base[0])


def _batch(lengths, seed=0):
    """Sequences of ids other than PAD, padded with PAD (as a tokenizer pads), their token
    types (all 0) and the attention mask."""
    g = torch.Generator().manual_seed(seed)
    seqs = [torch.randint(PAD + 1, VOCAB, (n,), generator=g) for n in lengths]
    types = [torch.zeros(n, dtype=torch.long) for n in lengths]
    ids = torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True, padding_value=PAD)
    mask = (torch.arange(max(lengths)).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)).long()
    return seqs, types, ids, torch.zeros_like(ids), mask


def _model(cls, seed, **kw):
    torch.manual_seed(seed)
    return getattr(transformers, cls)(_config(**kw)).eval()


def test_hidden_states_and_pooler_equal_transformers(base, loaded):
    _, _, ids, tt, _ = _batch([10, 10, 10])
    with torch.no_grad():
        ours = loaded(input_ids=ids, token_type_ids=tt)
        theirs = base[1](input_ids=ids, token_type_ids=tt)
    assert loaded.input_names == ["input_ids", "token_type_ids"]
    assert loaded.output_names == ["last_hidden_state", "pooler_output"]
    assert relative_difference(ours["last_hidden_state"], theirs.last_hidden_state) <= 1e-4
    assert relative_difference(ours["pooler_output"], theirs.pooler_output) <= 1e-4


def test_positions_count_the_tokens_that_are_not_padding(base, loaded):
    # a padding id inside a sequence takes the padding row and is not counted; left padding
    # shifts nothing: the rows transformers' create_position_ids_from_input_ids gives
    ids = torch.tensor([[0, 7, PAD, 9, 11, 2], [PAD, PAD, 0, 5, 6, 2]])
    tt = torch.zeros_like(ids)
    rows = transformers.models.roberta.modeling_roberta.RobertaEmbeddings \
        .create_position_ids_from_input_ids(ids, PAD)
    assert rows.tolist() == [[2, 3, 1, 4, 5, 6], [1, 1, 2, 3, 4, 5]]
    with torch.no_grad():
        ours_rows = loaded.layer_modules["embeddings.position_embeddings"](ids)
        theirs_rows = base[1].embeddings.position_embeddings(rows)
        ours, theirs = loaded(input_ids=ids, token_type_ids=tt), base[1](input_ids=ids)
    assert torch.equal(ours_rows, theirs_rows)
    assert relative_difference(ours["last_hidden_state"], theirs.last_hidden_state) <= 1e-4


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


HEADS = {"RobertaForMaskedLM": ["logits"],
         "RobertaForSequenceClassification": ["logits"],
         "RobertaForTokenClassification": ["logits"],
         "RobertaForQuestionAnswering": ["start_logits", "end_logits"]}


@pytest.mark.parametrize("cls", sorted(HEADS))
def test_heads_equal_transformers_on_a_padded_batch(cls, tmp_path):
    # the blocks' activation is not the masked-LM head's: RobertaLMHead applies GELU whatever
    # hidden_act says
    hf = _model(cls, 2, num_labels=2 if "Question" in cls else 3, hidden_act="gelu_new")
    net = al.from_pretrained(save_checkpoint(hf, tmp_path / "in"))
    assert net.output_names == HEADS[cls]
    lengths = [7, 4]
    seqs, types, ids, tt, mask = _batch(lengths, seed=2)
    with torch.no_grad():
        ours = net(input_ids=seqs, token_type_ids=types)
        theirs = hf(input_ids=ids, token_type_ids=tt, attention_mask=mask)
    ours = ours if isinstance(ours, dict) else {"logits": ours}
    for name in HEADS[cls]:
        a, b = ours[name], theirs[name]
        if cls != "RobertaForSequenceClassification":          # scores per token
            assert a.shape == b.shape
            a, b = valid_steps(a, lengths), valid_steps(b, lengths)
        assert relative_difference(a, b) <= 1e-4, name
    assert net.analyze().total_learnables == hf.num_parameters()


@pytest.mark.parametrize("cls", sorted(HEADS))
def test_save_pretrained_and_transformers_loads_it_back(cls, tmp_path):
    hf = _model(cls, 3)
    folder = save_checkpoint(hf, tmp_path / "in")
    net = al.from_pretrained(folder)
    net.save_pretrained(tmp_path / "out")
    assert layout(tmp_path / "out") == layout(folder)
    assert json.loads((tmp_path / "out" / "config.json").read_text()) == \
        json.loads((folder / "config.json").read_text())
    again = getattr(transformers, cls).from_pretrained(tmp_path / "out").eval()
    _, _, ids, tt, _ = _batch([6, 6])
    with torch.no_grad():
        a, b = again(input_ids=ids, token_type_ids=tt), hf(input_ids=ids, token_type_ids=tt)
    for name in HEADS[cls]:
        assert torch.equal(a[name], b[name])


def test_save_pretrained_writes_the_base_model(base, loaded, tmp_path):
    folder, hf = base
    loaded.save_pretrained(tmp_path / "out")
    assert layout(tmp_path / "out") == layout(folder)
    again = transformers.RobertaModel.from_pretrained(tmp_path / "out").eval()
    _, _, ids, tt, _ = _batch([6, 6])
    with torch.no_grad():
        assert torch.equal(again(input_ids=ids).pooler_output, hf(input_ids=ids).pooler_output)


def test_classifier_fine_tuned_with_al_train_and_taken_back(tmp_path):
    hf = _model("RobertaForSequenceClassification", 4, num_labels=2)
    net = al.from_pretrained(save_checkpoint(hf, tmp_path / "in"))
    lengths = [int(n) for n in torch.randint(3, 10, (16,))]
    seqs, types, ids, tt, mask = _batch(lengths, seed=4)
    labels = torch.tensor([int(s[0] > VOCAB // 2) for s in seqs])
    before = net.learnables["classifier.out_proj/weight"].detach().clone()
    al.train(net, {"input_ids": seqs, "token_type_ids": types}, labels, loss="crossentropy",
             options=al.TrainingOptions(max_epochs=2, batch_size=8, plots="none"), verbose=False)
    assert not torch.equal(net.learnables["classifier.out_proj/weight"], before)
    net.eval()
    net.save_pretrained(tmp_path / "tuned")
    tuned = transformers.RobertaForSequenceClassification.from_pretrained(tmp_path / "tuned").eval()
    with torch.no_grad():
        ours = net(input_ids=seqs, token_type_ids=types)
        theirs = tuned(input_ids=ids, token_type_ids=tt, attention_mask=mask).logits
    assert relative_difference(ours, theirs) <= 1e-4


def test_classifier_with_new_labels_is_written_with_them(tmp_path):
    hf = _model("RobertaForSequenceClassification", 5, num_labels=2)
    net = al.from_pretrained(save_checkpoint(hf, tmp_path / "in"))
    net.replace("classifier.out_proj", L.Dense(4, name="classifier.out_proj"))
    net.initialize()
    net.metadata["class_labels"] = ["a", "b", "c", "d"]
    net.save_pretrained(tmp_path / "out")
    cfg = json.loads((tmp_path / "out" / "config.json").read_text())
    assert cfg["id2label"] == {"0": "a", "1": "b", "2": "c", "3": "d"}
    again = transformers.RobertaForSequenceClassification.from_pretrained(tmp_path / "out").eval()
    _, _, ids, tt, _ = _batch([6, 6])
    with torch.no_grad():
        assert relative_difference(net(input_ids=ids, token_type_ids=tt),
                                   again(input_ids=ids).logits) <= 1e-4


@pytest.mark.parametrize("cls", ["RobertaModel", "RobertaForQuestionAnswering"])
def test_export_onnx_checked_by_onnxruntime_at_two_lengths(cls, tmp_path):
    ort = pytest.importorskip("onnxruntime")
    import numpy as np
    net = al.from_pretrained(save_checkpoint(_model(cls, 6), tmp_path / "in"))
    result = net.export_onnx(tmp_path / "net.onnx")
    assert result.max_error is not None and result.max_error < 1e-4
    session = ort.InferenceSession(str(tmp_path / "net.onnx"))
    names = [i.name for i in session.get_inputs()]
    for t in (3, 11):
        ids = torch.randint(PAD + 1, VOCAB, (2, t))
        ids[1, t // 2] = PAD                              # a padding id inside: its own row
        feeds = {"input_ids": ids.numpy(), "token_type_ids": np.zeros((2, t), dtype=np.int64)}
        feeds.update({n: np.ones((2, t), dtype=bool) for n in names if n not in feeds})
        got = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
        with torch.no_grad():
            want = net(input_ids=ids, token_type_ids=torch.zeros_like(ids))
        for name, value in want.items():
            assert relative_difference(torch.from_numpy(got[name]), value) <= 1e-4


def test_cli_view_and_plot_show_the_question_answering_head(tmp_path, capsys):
    net = al.from_pretrained(save_checkpoint(_model("RobertaForQuestionAnswering", 7),
                                             tmp_path / "in"))
    path = tmp_path / "qa.attnlab"
    net.save(path)
    assert main(["analyze", str(path)]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in ("qa_outputs", "start_logits", "end_logits"))
    assert main(["plot", str(path), "-o", str(tmp_path / "qa.png")]) == 0
    assert main(["view", str(path), "-o", str(tmp_path / "qa.html")]) == 0
    page = (tmp_path / "qa.html").read_text()
    assert "start_logits" in page and "qa_outputs" in page


def test_a_sequence_past_the_positions_is_refused(loaded):
    ids = torch.randint(PAD + 1, VOCAB, (1, POSITIONS - PAD))         # one more than fits
    with pytest.raises(al.AttnlabError, match="at most 38"):
        loaded(input_ids=ids, token_type_ids=torch.zeros_like(ids))
    ids[0, 0] = PAD                              # a padding id is not counted: it fits again
    with torch.no_grad():
        assert loaded(input_ids=ids, token_type_ids=torch.zeros_like(ids))[
            "last_hidden_state"].shape == (1, POSITIONS - PAD, 32)


def _edited(folder, tmp_path, **changes):
    out = shutil.copytree(folder, tmp_path / "edited")
    cfg = json.loads((out / "config.json").read_text())
    for key, value in changes.items():
        if value is None and key != "pad_token_id":
            cfg.pop(key, None)
        else:
            cfg[key] = value
    (out / "config.json").write_text(json.dumps(cfg))
    return out


@pytest.mark.parametrize("changes, parts", [
    ({"position_embedding_type": "relative_key"},
     ['"position_embedding_type" is "relative_key"', 'supported: "absolute"']),
    ({"is_decoder": True}, ['"is_decoder" is true']),
    ({"pad_token_id": None}, ['"pad_token_id"', "padding token's id"]),
    ({"pad_token_id": 39}, ['"pad_token_id"', "below max_position_embeddings"]),
    ({"architectures": ["RobertaForMultipleChoice"]},
     ['"architectures" is ["RobertaForMultipleChoice"]', "RobertaForMaskedLM"]),
    ({"architectures": ["RobertaForCausalLM"]}, ['"architectures" is ["RobertaForCausalLM"]']),
])
def test_what_is_not_built_is_refused_by_name(base, tmp_path, changes, parts):
    folder = _edited(base[0], tmp_path, **changes)
    with pytest.raises(CheckpointError) as info:
        al.from_pretrained(folder)
    for part in parts:
        assert part in str(info.value)


def test_a_question_answering_head_of_three_labels_is_refused(tmp_path):
    folder = save_checkpoint(_model("RobertaForQuestionAnswering", 8), tmp_path / "in")
    cfg = json.loads((folder / "config.json").read_text())
    cfg["id2label"] = {"0": "a", "1": "b", "2": "c"}
    (folder / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match='"id2label".*2 labels for a question-answering'):
        al.from_pretrained(folder)


def test_a_huge_layer_count_is_refused_before_anything_is_built(base, tmp_path):
    folder = _edited(base[0], tmp_path, num_hidden_layers=10**9)
    with pytest.raises(CheckpointError, match='"num_hidden_layers" is 1000000000'):
        al.from_pretrained(folder)
