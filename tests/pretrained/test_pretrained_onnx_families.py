"""The heads people fine-tune, exported to ONNX and run by onnxruntime: question answering,
sequence classification and token classification of every family that has them, each model
exported once and run on a padded batch at two lengths, equal to the network and to
transformers. (Each family's base or language model, and every rope scaling type, is
exported in its own family's tests.)"""
import numpy as np
import pytest
import torch

import attnlab as al
from pretrained_helpers import quiet_transformers, relative_difference, save_checkpoint

transformers = pytest.importorskip("transformers")
ort = pytest.importorskip("onnxruntime")
quiet_transformers()

VOCAB, LABELS, POSITIONS = 96, 3, 32
LENGTHS = ((3, 2), (11, 7))           # (length, that of the padded second row) at each size
TOLERANCE = 1e-4


def _encoder(family):
    if family == "distilbert":
        return transformers.DistilBertConfig(vocab_size=VOCAB, dim=32, n_layers=1, n_heads=4,
                                             hidden_dim=48, max_position_embeddings=POSITIONS,
                                             num_labels=LABELS)
    config = getattr(transformers, "BertConfig" if family == "bert" else "RobertaConfig")
    return config(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                  intermediate_size=48, max_position_embeddings=POSITIONS + 2,
                  type_vocab_size=2, num_labels=LABELS, pad_token_id=PADS[family])


def _decoder(family):
    if family == "gpt2":
        return transformers.GPT2Config(n_layer=1, n_embd=32, n_head=4, vocab_size=VOCAB,
                                       n_positions=POSITIONS, pad_token_id=0, num_labels=LABELS)
    if family == "gpt_neox":
        return transformers.GPTNeoXConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=1,
                                          num_attention_heads=4, intermediate_size=48,
                                          max_position_embeddings=POSITIONS, pad_token_id=0,
                                          num_labels=LABELS)
    config = getattr(transformers, {"llama": "LlamaConfig", "mistral": "MistralConfig",
                                    "qwen2": "Qwen2Config"}[family])
    return config(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                  num_key_value_heads=2, intermediate_size=48,
                  max_position_embeddings=POSITIONS, pad_token_id=0, num_labels=LABELS)


PADS = {"bert": 0, "roberta": 1, "distilbert": 0, "gpt2": 0, "gpt_neox": 0, "llama": 0,
        "mistral": 0, "qwen2": 0}
PREFIX = {"bert": "Bert", "roberta": "Roberta", "distilbert": "DistilBert", "gpt2": "GPT2",
          "gpt_neox": "GPTNeoX", "llama": "Llama", "mistral": "Mistral", "qwen2": "Qwen2"}
# every (family, head) that al.from_pretrained builds
HEADS = [(f, h) for f in ("bert", "roberta", "distilbert")
         for h in ("QuestionAnswering", "SequenceClassification", "TokenClassification")] + \
        [(f, "SequenceClassification") for f in ("gpt2", "gpt_neox", "llama", "mistral", "qwen2")]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(family, head) → (transformers model, network, onnxruntime session), made once."""
    made = {}

    def get(family, head):
        if (family, head) not in made:
            torch.manual_seed(0)
            config = _encoder(family) if family in ("bert", "roberta", "distilbert") \
                else _decoder(family)
            if head == "QuestionAnswering":
                config.num_labels = 2                 # the answer's start and end
            model = getattr(transformers, f"{PREFIX[family]}For{head}")(config).eval()
            folder = tmp_path_factory.mktemp(f"{family}-{head}")
            net = al.from_pretrained(save_checkpoint(model, folder / "hf"))
            result = net.export_onnx(folder / "net.onnx")
            assert result.max_error is not None and result.max_error < TOLERANCE
            made[family, head] = model, net, ort.InferenceSession(str(folder / "net.onnx"))
        return made[family, head]
    return get


def _batch(family, t, short, seed):
    """B=2 ids right-padded with the family's padding id (the second row `short` long), the
    attention mask, and token types (0 then 1)."""
    pad = PADS[family]
    ids = torch.randint(2, VOCAB, (2, t), generator=torch.Generator().manual_seed(seed))
    mask = torch.ones(2, t, dtype=torch.long)
    mask[1, short:] = 0
    ids = ids.masked_fill(mask == 0, pad)
    types = (torch.arange(t) >= t // 2).long().expand(2, t).contiguous()
    return ids, mask, types


def _onnx(session, ids, mask, types):
    """onnxruntime's outputs by name; each `<input>_mask` is the batch's mask."""
    feeds = {"input_ids": ids.numpy(), "token_type_ids": types.numpy()}
    names = [i.name for i in session.get_inputs()]
    feeds = {n: feeds[n] if n in feeds else mask.bool().numpy() for n in names}
    outs = session.run(None, feeds)
    return {o.name: torch.from_numpy(v) for o, v in zip(session.get_outputs(), outs)}


def _valid(x, mask, head):
    """Token-level outputs compared at the real tokens only (padded ones are unspecified)."""
    return x if head == "SequenceClassification" else x[mask.bool()]


@pytest.mark.parametrize("family,head", HEADS)
def test_a_head_exports_and_runs_in_onnxruntime_as_transformers(exported, family, head):
    model, net, session = exported(family, head)
    takes_types = "token_type_ids" in net.input_names
    for seed, (t, short) in enumerate(LENGTHS):
        ids, mask, types = _batch(family, t, short, seed)
        got = _onnx(session, ids, mask, types)
        kw = {"token_type_ids": types} if takes_types else {}
        with torch.no_grad():
            ours = net(input_ids=ids, attention_mask=mask, **kw)
            theirs = model(input_ids=ids, attention_mask=mask, **kw)
        ours = ours if isinstance(ours, dict) else {"logits": ours}
        assert set(got) == set(ours) == set(net.output_names)
        for name, value in ours.items():
            assert got[name].dtype == torch.float32
            want = _valid(getattr(theirs, name), mask, head)
            assert relative_difference(_valid(got[name], mask, head), want) <= TOLERANCE
            assert relative_difference(_valid(value, mask, head), want) <= TOLERANCE


def test_a_decoder_classifier_scores_the_last_real_token_in_onnxruntime_too(exported):
    """The decoders' sequence classifiers read the ids for the last token that is not
    padding: rows padded differently give the score of that token in ONNX as in torch."""
    _, net, session = exported("llama", "SequenceClassification")
    ids, mask, types = _batch("llama", 9, 4, seed=5)
    alone = ids[1:, :4]
    got = _onnx(session, ids, mask, types)["logits"]
    single = _onnx(session, alone, torch.ones_like(alone), types[1:, :4])["logits"]
    assert relative_difference(got[1:], single) <= TOLERANCE
    assert relative_difference(got[1:], got[:1]) > 1e-3          # another row, another score
    assert np.isfinite(got.numpy()).all()


def test_vits_base_model_exports_and_runs_in_onnxruntime_as_transformers(tmp_path):
    """ViT's base model (its pooler too), run by onnxruntime on a batch of another size than
    the export's example."""
    torch.manual_seed(0)
    model = transformers.ViTModel(transformers.ViTConfig(
        num_hidden_layers=1, hidden_size=32, num_attention_heads=4, intermediate_size=48,
        image_size=16, patch_size=8)).eval()
    net = al.from_pretrained(save_checkpoint(model, tmp_path / "hf"))
    assert net.export_onnx(tmp_path / "vit.onnx").max_error < TOLERANCE
    session = ort.InferenceSession(str(tmp_path / "vit.onnx"))
    x = torch.randn(3, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    got = dict(zip([o.name for o in session.get_outputs()],
                   session.run(None, {"pixel_values": x.numpy()})))
    with torch.no_grad():
        theirs = model(pixel_values=x)
    assert set(got) == {"last_hidden_state", "pooler_output"}
    for name in got:
        assert relative_difference(torch.from_numpy(got[name]), getattr(theirs, name)) <= TOLERANCE
