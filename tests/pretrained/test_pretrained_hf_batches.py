"""`al.train` on the batches Hugging Face data collators make (`input_ids`,
`attention_mask`, `labels` with -100 where ignored): a step's loss is transformers'
`model(**batch).loss` on the same weights. Small random checkpoints without dropout (so
that a training step and transformers' eval-mode loss compute the same), written offline."""
import pytest
import torch

import attnlab as al
from pretrained_helpers import quiet_transformers, save_checkpoint

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")
quiet_transformers()

VOCAB = 64
EXACT = 1e-5                 # relative, on a loss of about log(VOCAB)


def _model(kind):
    torch.manual_seed(0)
    if kind == "gpt2":
        return transformers.GPT2LMHeadModel(transformers.GPT2Config(
            n_layer=2, n_embd=32, n_head=4, vocab_size=VOCAB, n_positions=16, resid_pdrop=0.0,
            embd_pdrop=0.0, attn_pdrop=0.0))
    if kind == "llama":
        return transformers.LlamaForCausalLM(transformers.LlamaConfig(
            vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2))
    if kind == "bert":
        return transformers.BertForMaskedLM(transformers.BertConfig(
            vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=48, max_position_embeddings=16, hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0))
    raise AssertionError(kind)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    made = {}

    def get(kind):
        if kind not in made:
            model = _model(kind)
            made[kind] = (save_checkpoint(model, tmp_path_factory.mktemp(kind)), model.eval())
        return made[kind]
    return get


def _tokenizer(side="right"):
    """A word-level tokenizer over ids "w0"… (w0 the padding), made offline, for the
    collators that pad through a tokenizer."""
    vocab = {f"w{i}": i for i in range(VOCAB)}
    tok = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="w1")),
        pad_token="w0", mask_token="w2")
    tok.padding_side = side
    return tok


def _examples(lengths=(7, 4, 6, 5), seed=0):
    g = torch.Generator().manual_seed(seed)
    return [{"input_ids": torch.randint(3, VOCAB, (n,), generator=g).tolist()} for n in lengths]


def _first_loss(net, data, **options):
    opts = al.TrainingOptions(max_epochs=1, shuffle="never", learning_rate=1e-9, verbose=False,
                              **options)
    return al.train(net, data, options=opts).iterations["loss"][0]


def _close(ours, theirs):
    return abs(ours - float(theirs)) <= EXACT * abs(float(theirs))


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_a_causal_lm_step_on_a_collator_batch_is_transformers_loss(checkpoints, kind):
    """DataCollatorForLanguageModeling(mlm=False): labels are the ids, -100 at the padding;
    the network shifts them inside as transformers' loss does."""
    folder, model = checkpoints(kind)
    examples = _examples()
    collator = transformers.DataCollatorForLanguageModeling(_tokenizer(), mlm=False)
    batch = collator(examples)
    assert (batch["labels"] == -100).any() and (batch["attention_mask"] == 0).any()
    with torch.no_grad():
        theirs = model(**batch).loss
    loader = torch.utils.data.DataLoader(examples, batch_size=4, collate_fn=collator)
    assert _close(_first_loss(al.from_pretrained(folder), loader), theirs)
    # the same batch given whole, and the examples as a plain list (padded here)
    assert _close(_first_loss(al.from_pretrained(folder), dict(batch)), theirs)
    rows = [dict(e, labels=e["input_ids"]) for e in examples]
    assert _close(_first_loss(al.from_pretrained(folder), rows, batch_size=4), theirs)


def test_a_masked_lm_step_reads_its_labels_as_given(checkpoints):
    """BertForMaskedLM: one label per token, -100 where nothing is masked; no shift, and
    token_type_ids left out."""
    folder, model = checkpoints("bert")
    examples = _examples(seed=1)
    torch.manual_seed(1)
    batch = transformers.DataCollatorForLanguageModeling(_tokenizer(), mlm_probability=0.4)(
        examples)
    assert (batch["labels"] != -100).any() and "token_type_ids" not in batch
    with torch.no_grad():
        theirs = model(**batch).loss
    assert _close(_first_loss(al.from_pretrained(folder), dict(batch)), theirs)


def test_a_left_padded_causal_batch_is_refused(checkpoints):
    """With padding on the left the first real token is predicted from a padded step, which
    transformers scores and attnlab does not compute: refused, naming where."""
    folder, _ = checkpoints("gpt2")
    collator = transformers.DataCollatorForLanguageModeling(_tokenizer("left"), mlm=False)
    batch = collator(_examples())
    with pytest.raises(al.DataError, match=r"labels: observation 1: the label of step 3, "
                                           r"scored from step 2, a padded step .*padding_side"):
        _first_loss(al.from_pretrained(folder), dict(batch))


def test_what_a_batch_needs(checkpoints):
    folder, _ = checkpoints("gpt2")
    net = al.from_pretrained(folder)
    ids = torch.randint(3, VOCAB, (2, 5))
    with pytest.raises(al.DataError, match=r"no 'labels'"):
        _first_loss(net, [{"input_ids": ids[0]}, {"input_ids": ids[1]}])
    with pytest.raises(al.DataError, match=r"key\(s\) 'special_tokens_mask' that the network "
                                           r"does not take"):
        _first_loss(net, {"input_ids": ids, "labels": ids,
                          "special_tokens_mask": torch.zeros_like(ids)})


def test_in_memory_training_refuses_left_padding_it_would_misread(checkpoints):
    """X, Y in memory keep each sequence's length only: a left-padded Padded is refused
    rather than read as padded at the end."""
    folder, _ = checkpoints("gpt2")
    ids = torch.randint(3, VOCAB, (2, 5))
    mask = torch.tensor([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]], dtype=torch.bool)
    with pytest.raises(al.DataError, match="padded at their end.*left padding"):
        al.train(al.from_pretrained(folder), {"input_ids": al.Padded(ids, mask)}, ids,
                 options=al.TrainingOptions(max_epochs=1, verbose=False))
