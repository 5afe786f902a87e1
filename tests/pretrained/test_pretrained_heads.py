"""The heads people fine-tune, chosen by the config's `architectures`: BERT's question
answering and the decoders' sequence classifiers (GPT-2's too), against transformers on small random
checkpoints. (RoBERTa's and DistilBERT's heads: their own test files.)"""
import json

import pytest
import torch

import attnlab as al
from attnlab import layers as L
from attnlab.pretrained import CheckpointError
from pretrained_helpers import (layout, quiet_transformers, relative_difference, save_checkpoint,
                                valid_steps)

transformers = pytest.importorskip("transformers")
quiet_transformers()

VOCAB, PAD = 96, 0


# -- BERT's question answering ------------------------------------------------------------

def _bert_qa(seed=0, **kw):
    torch.manual_seed(seed)
    return transformers.BertForQuestionAnswering(transformers.BertConfig(
        num_hidden_layers=2, hidden_size=32, num_attention_heads=4, intermediate_size=48,
        vocab_size=VOCAB, max_position_embeddings=32, **kw)).eval()


def test_bert_question_answering_gives_start_and_end_logits(tmp_path):
    hf = _bert_qa()
    net = al.from_pretrained(save_checkpoint(hf, tmp_path / "in"))
    assert net.output_names == ["start_logits", "end_logits"]
    assert net.layer_map["qa_outputs"].out == 2
    assert "pooler.dense" not in net.layer_map                 # built without the pooler
    lengths = [9, 5]
    seqs = [torch.randint(1, VOCAB, (n,)) for n in lengths]
    types = [(torch.arange(n) >= 3).long() for n in lengths]      # question, then context
    ids = torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True)
    tt = torch.nn.utils.rnn.pad_sequence(types, batch_first=True)
    mask = (ids != PAD).long()
    with torch.no_grad():
        ours = net(input_ids=seqs, token_type_ids=types)
        theirs = hf(input_ids=ids, token_type_ids=tt, attention_mask=mask)
    for name in ("start_logits", "end_logits"):
        assert ours[name].shape == theirs[name].shape == (2, 9)
        assert relative_difference(valid_steps(ours[name], lengths),
                                   valid_steps(theirs[name], lengths)) <= 1e-4
    assert net.analyze().total_learnables == hf.num_parameters()
    net.save_pretrained(tmp_path / "out")
    assert layout(tmp_path / "out") == layout(tmp_path / "in")
    again = transformers.BertForQuestionAnswering.from_pretrained(tmp_path / "out").eval()
    with torch.no_grad():
        assert torch.equal(again(input_ids=ids, token_type_ids=tt).start_logits,
                           hf(input_ids=ids, token_type_ids=tt).start_logits)


def test_a_question_answering_config_of_other_than_two_labels_is_refused(tmp_path):
    folder = save_checkpoint(_bert_qa(), tmp_path / "in")
    cfg = json.loads((folder / "config.json").read_text())
    cfg.pop("id2label", None)
    cfg.pop("label2id", None)
    cfg["num_labels"] = 3
    (folder / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match='"num_labels": expected 2 labels for a '
                                              'question-answering model'):
        al.from_pretrained(folder)


# -- the decoders' sequence classifiers -------------------------------------------------------

def _decoder(family, seed=0, **kw):
    torch.manual_seed(seed)
    common = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                  num_attention_heads=4, num_labels=3, **kw)
    kv = dict(num_key_value_heads=2)
    config, cls = {
        "llama": (lambda: transformers.LlamaConfig(**kv, **common),
                  transformers.LlamaForSequenceClassification),
        "mistral": (lambda: transformers.MistralConfig(sliding_window=4, **kv, **common),
                    transformers.MistralForSequenceClassification),
        "qwen2": (lambda: transformers.Qwen2Config(**kv, **common),
                  transformers.Qwen2ForSequenceClassification),
        "gpt_neox": (lambda: transformers.GPTNeoXConfig(**common),
                     transformers.GPTNeoXForSequenceClassification),
        "gpt2": (lambda: transformers.GPT2Config(vocab_size=VOCAB, n_embd=32, n_inner=48,
                                                 n_layer=2, n_head=4, num_labels=3, **kw),
                 transformers.GPT2ForSequenceClassification),
    }[family]
    return cls(config()).eval()


DECODERS = ["llama", "mistral", "qwen2", "gpt_neox", "gpt2"]


@pytest.fixture(scope="module")
def classifiers(tmp_path_factory):
    """family → (folder, transformers model, attnlab network), pad_token_id 0."""
    made = {}

    def get(family):
        if family not in made:
            hf = _decoder(family, pad_token_id=PAD)
            folder = save_checkpoint(hf, tmp_path_factory.mktemp(family))
            made[family] = (folder, hf, al.from_pretrained(folder))
        return made[family]
    return get


@pytest.mark.parametrize("family", DECODERS)
def test_the_last_token_that_is_not_padding_is_scored(classifiers, family):
    folder, hf, net = classifiers(family)
    assert net.output_names == ["logits"]
    assert net.layer_map["last_token"].type_name == "LastToken"
    assert net.source("last_token", "ids") == ("input_ids", "out")
    # the third sequence ends with the padding id itself: transformers scores the token
    # before it, whatever the padding mask says
    seqs = [torch.randint(1, VOCAB, (n,)) for n in (7, 3, 5)]
    seqs[2][-1] = PAD
    ids = torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True, padding_value=PAD)
    mask = (torch.arange(7).unsqueeze(0) < torch.tensor([7, 3, 5]).unsqueeze(1)).long()
    with torch.no_grad():
        ours = net(input_ids=seqs)
        theirs = hf(input_ids=ids, attention_mask=mask).logits
        alone = hf(input_ids=seqs[2][:-1].unsqueeze(0)).logits         # without its padding
    assert ours.shape == (3, 3)
    assert relative_difference(ours, theirs) <= 1e-4
    assert relative_difference(ours[2:], alone) <= 1e-4
    assert net.analyze().total_learnables == hf.num_parameters()


@pytest.mark.parametrize("family", DECODERS)
def test_left_padding_and_a_padding_id_inside_a_row(classifiers, family):
    # no mask on either side: the padding ids are read as transformers reads them
    _, hf, net = classifiers(family)
    ids = torch.tensor([[PAD, PAD, 5, 6, 7], [3, PAD, 5, 6, PAD], [3, 4, 5, 6, 7]])
    with torch.no_grad():
        assert relative_difference(net(input_ids=ids), hf(input_ids=ids).logits) <= 1e-4


@pytest.mark.parametrize("family", DECODERS)
def test_save_pretrained_and_transformers_loads_it_back(classifiers, family, tmp_path):
    folder, hf, net = classifiers(family)
    net.save_pretrained(tmp_path / "out")
    assert layout(tmp_path / "out") == layout(folder)
    assert json.loads((tmp_path / "out" / "config.json").read_text()) == \
        json.loads((folder / "config.json").read_text())
    again = type(hf).from_pretrained(tmp_path / "out").eval()
    ids = torch.randint(1, VOCAB, (2, 6))
    with torch.no_grad():
        assert torch.equal(again(input_ids=ids).logits, hf(input_ids=ids).logits)


def test_without_a_padding_id_each_sequence_is_scored_at_its_last_step(tmp_path):
    # transformers refuses a batch of several then; one sequence at a time is its answer
    hf = _decoder("llama", seed=1)
    assert hf.config.pad_token_id is None
    net = al.from_pretrained(save_checkpoint(hf, tmp_path))
    assert net.layer_map["last_token"].pad_id is None
    seqs = [torch.randint(0, VOCAB, (n,)) for n in (6, 2, 4)]
    with torch.no_grad():
        ours = net(input_ids=seqs)
        theirs = torch.cat([hf(input_ids=s.unsqueeze(0)).logits for s in seqs])
    assert relative_difference(ours, theirs) <= 1e-4


def test_the_classifier_trains_and_is_taken_back(tmp_path):
    hf = _decoder("qwen2", seed=2, pad_token_id=PAD)
    net = al.from_pretrained(save_checkpoint(hf, tmp_path / "in"))
    seqs = [torch.randint(1, VOCAB, (int(n),)) for n in torch.randint(2, 8, (12,))]
    labels = torch.tensor([int(s[-1]) % 3 for s in seqs])
    before = net.learnables["score/weight"].detach().clone()
    al.train(net, {"input_ids": seqs}, labels, loss="crossentropy",
             options=al.TrainingOptions(max_epochs=2, batch_size=4, plots="none"), verbose=False)
    assert not torch.equal(net.learnables["score/weight"], before)
    net.eval()
    net.save_pretrained(tmp_path / "tuned")
    tuned = transformers.Qwen2ForSequenceClassification.from_pretrained(tmp_path / "tuned").eval()
    ids = torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True, padding_value=PAD)
    with torch.no_grad():
        assert relative_difference(net(input_ids=seqs), tuned(input_ids=ids).logits) <= 1e-4


def test_last_token_layer_follows_transformers_rule():
    x = torch.arange(12.).view(3, 4, 1)
    ids = torch.tensor([[7, 7, 0, 0], [0, 0, 7, 7], [0, 0, 0, 0]])
    assert L.LastToken(0)(x, ids).flatten().tolist() == [1.0, 7.0, 8.0]   # none real: the first
    assert L.LastToken()(x, ids).flatten().tolist() == [3.0, 7.0, 11.0]   # no padding id


def test_view_shows_the_classifier_head(classifiers, tmp_path):
    from attnlab.cli import main
    _, _, net = classifiers("llama")
    net.save(tmp_path / "cls.attnlab")
    assert main(["view", str(tmp_path / "cls.attnlab"), "-o", str(tmp_path / "cls.html")]) == 0
    page = (tmp_path / "cls.html").read_text()
    assert "last_token" in page and "score" in page
