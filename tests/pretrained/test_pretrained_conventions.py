"""Hugging Face's calling conventions on the networks of `al.from_pretrained`: an
`attention_mask` beside the ids (left or right padding, integers or bools), positions that
follow it as transformers computes them, and `token_type_ids` left out. Each family against
transformers itself on small random checkpoints written offline."""
import pytest
import torch

import attnlab as al
from pretrained_helpers import quiet_transformers, relative_difference, save_checkpoint

transformers = pytest.importorskip("transformers")
quiet_transformers()

VOCAB = 96
LENGTHS = (9, 6, 3)          # one row unpadded, two padded
T = max(LENGTHS)
TOLERANCE = 1e-4             # × the largest magnitude of transformers' output


def _model(kind):
    torch.manual_seed(0)
    if kind == "gpt2":
        return transformers.GPT2LMHeadModel(transformers.GPT2Config(
            n_layer=2, n_embd=32, n_head=4, vocab_size=VOCAB, n_positions=16))
    if kind == "llama":
        return transformers.LlamaForCausalLM(transformers.LlamaConfig(
            vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64))
    if kind == "mistral":                 # a window shorter than the sequences
        return transformers.MistralForCausalLM(transformers.MistralConfig(
            vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
            sliding_window=4))
    if kind == "bert":
        return transformers.BertModel(transformers.BertConfig(
            vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=48, max_position_embeddings=16, type_vocab_size=2))
    if kind == "roberta":                 # ids from 2 on: 1 is its padding token
        return transformers.RobertaModel(transformers.RobertaConfig(
            vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=48, max_position_embeddings=20, type_vocab_size=2,
            pad_token_id=1))
    if kind == "distilbert":
        return transformers.DistilBertModel(transformers.DistilBertConfig(
            vocab_size=VOCAB, dim=32, n_layers=2, n_heads=4, hidden_dim=48,
            max_position_embeddings=16))
    if kind == "bert-qa":
        return transformers.BertForQuestionAnswering(transformers.BertConfig(
            vocab_size=VOCAB, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
            intermediate_size=48, max_position_embeddings=16, type_vocab_size=2))
    if kind == "t5":
        return transformers.T5ForConditionalGeneration(transformers.T5Config(
            vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=48, num_layers=2, num_heads=4,
            relative_attention_num_buckets=8, relative_attention_max_distance=16,
            decoder_start_token_id=0, pad_token_id=0))
    raise AssertionError(kind)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """kind → (folder, transformers model, attnlab network), made on first use."""
    made = {}

    def get(kind):
        if kind not in made:
            model = _model(kind)
            folder = save_checkpoint(model, tmp_path_factory.mktemp(kind))
            made[kind] = (folder, model.eval(), al.from_pretrained(folder))
        return made[kind]
    return get


def _ids(b=len(LENGTHS), t=T, seed=0):
    return torch.randint(1, VOCAB, (b, t), generator=torch.Generator().manual_seed(seed))


def _mask(side, lengths=LENGTHS, t=T):
    """B×T int64, 1 at each sequence's tokens: at the end (left padding) or the start."""
    m = torch.zeros(len(lengths), t, dtype=torch.long)
    for i, n in enumerate(lengths):
        if side == "left":
            m[i, t - n:] = 1
        else:
            m[i, :n] = 1
    return m


def _positions(mask):
    """transformers' position ids of a decoder from its attention mask (what generate makes)."""
    return (mask.cumsum(-1) - 1).masked_fill(mask == 0, 0)


def _difference(ours, theirs, mask):
    """max |ours − theirs| / max |theirs| over the steps the mask keeps."""
    keep = mask.bool()
    return relative_difference(ours[keep], theirs[keep])


# -- attention_mask, left and right, family by family ------------------------------------------

@pytest.mark.parametrize("kind", ["gpt2", "llama", "mistral"])
@pytest.mark.parametrize("side", ["left", "right"])
def test_a_decoder_with_attention_mask_equals_transformers(checkpoints, kind, side):
    """Positions follow the mask (each sequence starts at 0 however it is padded), as the
    position ids transformers' generate makes; padded keys are ignored."""
    folder, model, net = checkpoints(kind)
    ids, mask = _ids(), _mask(side)
    with torch.no_grad():
        ours = net({"input_ids": ids, "attention_mask": mask})
        theirs = model(input_ids=ids, attention_mask=mask,
                       position_ids=_positions(mask)).logits
        plain = model(input_ids=ids, attention_mask=mask).logits
    assert _difference(ours, theirs, mask) <= TOLERANCE
    if side == "right":                   # the same positions as the steps' indices
        assert _difference(ours, plain, mask) <= TOLERANCE
    for i, n in enumerate(LENGTHS):       # and each sequence as it computes alone
        row = ids[i:i + 1, T - n:] if side == "left" else ids[i:i + 1, :n]
        with torch.no_grad():
            alone = model(input_ids=row).logits[0]
        got = ours[i, T - n:] if side == "left" else ours[i, :n]
        assert relative_difference(got, alone) <= TOLERANCE


def test_left_padding_moves_gpt2s_learned_positions(checkpoints):
    """GPT-2's positions are learned per index: with left padding the steps' indices are not
    the tokens' positions, and the network follows the mask instead."""
    _, model, net = checkpoints("gpt2")
    ids, mask = _ids(), _mask("left")
    with torch.no_grad():
        ours = net(input_ids=ids, attention_mask=mask)
        by_index = model(input_ids=ids, attention_mask=mask).logits
    assert _difference(ours, by_index, mask) > 1e-2


def test_a_mask_with_a_hole_gives_rotary_positions_that_skip_it(checkpoints):
    """Llama's rotary positions count only the attended tokens (cumsum of the mask), also
    around padding inside a sequence, as transformers' position ids do."""
    _, model, net = checkpoints("llama")
    ids = _ids(2, 7, seed=4)
    mask = torch.tensor([[1, 1, 0, 0, 1, 1, 1], [0, 1, 1, 0, 1, 0, 1]])
    with torch.no_grad():
        ours = net({"input_ids": ids, "attention_mask": mask})
        theirs = model(input_ids=ids, attention_mask=mask,
                       position_ids=_positions(mask)).logits
        by_index = model(input_ids=ids, attention_mask=mask).logits
    assert _difference(ours, theirs, mask) <= TOLERANCE
    assert _difference(ours, by_index, mask) > 1e-4


@pytest.mark.parametrize("side", ["left", "right"])
def test_bert_with_attention_mask_equals_transformers(checkpoints, side):
    """An encoder's positions are the steps' indices, as BertModel computes them; padded keys
    are ignored; token_type_ids left out are zeros."""
    _, model, net = checkpoints("bert")
    ids, mask = _ids(seed=1), _mask(side)
    types = (torch.arange(T) >= 4).long().expand(len(LENGTHS), T)
    with torch.no_grad():
        ours = net({"input_ids": ids, "attention_mask": mask, "token_type_ids": types})
        theirs = model(input_ids=ids, attention_mask=mask, token_type_ids=types)
    assert _difference(ours["last_hidden_state"], theirs.last_hidden_state, mask) <= TOLERANCE
    if side == "right":                   # the pooler reads step 0, a real token
        assert relative_difference(ours["pooler_output"], theirs.pooler_output) <= TOLERANCE


def test_bert_without_token_type_ids(checkpoints):
    _, model, net = checkpoints("bert")
    ids, mask = _ids(seed=2), _mask("right")
    with torch.no_grad():
        plain = net(input_ids=ids)
        masked = net({"input_ids": ids, "attention_mask": mask})
        theirs_plain = model(input_ids=ids)
        theirs_masked = model(input_ids=ids, attention_mask=mask)
        listed = net(input_ids=[ids[i, :n] for i, n in enumerate(LENGTHS)])
    for ours, theirs in ((plain, theirs_plain), (masked, theirs_masked)):
        assert relative_difference(ours["pooler_output"], theirs.pooler_output) <= TOLERANCE
    assert relative_difference(plain["last_hidden_state"],
                               theirs_plain.last_hidden_state) <= TOLERANCE
    assert _difference(masked["last_hidden_state"], theirs_masked.last_hidden_state,
                       mask) <= TOLERANCE
    assert _difference(listed["last_hidden_state"], theirs_masked.last_hidden_state,
                       mask) <= TOLERANCE


@pytest.mark.parametrize("side", ["left", "right"])
def test_t5_with_encoder_and_decoder_masks_equals_transformers(checkpoints, side):
    """The encoder's attention_mask pads its self-attention and the decoder's
    cross-attention; decoder_attention_mask pads the decoder's own keys."""
    _, model, net = checkpoints("t5")
    ids, mask = _ids(seed=3), _mask(side)
    dec = _ids(3, 5, seed=5)
    dec_mask = _mask(side, (5, 4, 2), 5)
    with torch.no_grad():
        ours = net({"input_ids": ids, "attention_mask": mask, "decoder_input_ids": dec})
        theirs = model(input_ids=ids, attention_mask=mask, decoder_input_ids=dec).logits
        both = net({"input_ids": ids, "attention_mask": mask, "decoder_input_ids": dec,
                    "decoder_attention_mask": dec_mask})
        theirs_both = model(input_ids=ids, attention_mask=mask, decoder_input_ids=dec,
                            decoder_attention_mask=dec_mask).logits
        unmasked = model(input_ids=ids, decoder_input_ids=dec).logits
    assert relative_difference(ours, theirs) <= TOLERANCE
    assert relative_difference(ours, unmasked) > 1e-3       # the encoder's mask mattered
    assert _difference(both, theirs_both, dec_mask) <= TOLERANCE


@pytest.mark.parametrize("kind", ["gpt2", "bert"])
def test_integer_and_bool_masks_give_the_same(checkpoints, kind):
    _, _, net = checkpoints(kind)
    ids, mask = _ids(), _mask("left")
    with torch.no_grad():
        as_int = net({"input_ids": ids, "attention_mask": mask})
        as_bool = net({"input_ids": ids, "attention_mask": mask.bool()})
        as_int32 = net({"input_ids": ids, "attention_mask": mask.int()})
        padded = net({"input_ids": al.Padded(ids, mask.bool())})
    first = lambda out: out if isinstance(out, torch.Tensor) else out["last_hidden_state"]  # noqa: E731
    for other in (as_bool, as_int32, padded):
        assert torch.equal(first(other)[mask.bool()], first(as_int)[mask.bool()])


def test_predict_takes_the_mask_by_keyword_and_in_a_dict(checkpoints):
    _, _, net = checkpoints("gpt2")
    ids, mask = _ids(), _mask("left")
    with torch.no_grad():
        direct = net({"input_ids": ids, "attention_mask": mask})
    by_keyword = net.predict(input_ids=ids, attention_mask=mask, batch_size=2)
    in_a_dict = net.predict({"input_ids": ids, "attention_mask": mask}, batch_size=2)
    for out in (by_keyword, in_a_dict):
        assert relative_difference(out[mask.bool()], direct[mask.bool()]) <= 1e-6


def test_a_padded_encoder_generates_as_transformers(checkpoints):
    """al.generate with T5's encoder input and its attention_mask in static_inputs: the same
    greedy tokens as transformers' generate with that mask."""
    _, model, net = checkpoints("t5")
    ids, mask = _ids(seed=6), _mask("left")
    ours = al.generate(net, static_inputs={"input_ids": ids, "attention_mask": mask},
                       start=0, stop=None, max_new_tokens=6).tokens
    with torch.no_grad():
        theirs = model.generate(ids, attention_mask=mask, max_new_tokens=6, do_sample=False,
                                eos_token_id=None, decoder_start_token_id=0)
    assert ours.tolist() == theirs[:, 1:].tolist()


# -- what is refused ---------------------------------------------------------------------------

def test_masks_that_cannot_be_read_are_refused_by_name(checkpoints):
    _, _, net = checkpoints("gpt2")
    ids = _ids()
    cases = [
        (_mask("right")[:, :4], r"'attention_mask' is 3×4 but input 'input_ids' is 3×9"),
        (_mask("right") * 2, r"'attention_mask': expected 0 \(padding\) or 1 \(attend\), "
                             r"received 2"),
        (_mask("right").float(), r"'attention_mask': expected bools or the integers 0 and 1"),
        (_mask("right")[0], r"'attention_mask' is 9 but input 'input_ids' is 3×9|expected B×T"),
    ]
    for mask, message in cases:
        with pytest.raises(al.DataError, match=message):
            net({"input_ids": ids, "attention_mask": mask})
    with pytest.raises(al.DataError, match=r"already padded \(al.Padded\)"):
        net({"input_ids": al.Padded(ids, _mask("right").bool()), "attention_mask": _mask("right")})


def test_vit_takes_no_attention_mask(tmp_path):
    torch.manual_seed(0)
    model = transformers.ViTModel(transformers.ViTConfig(
        num_hidden_layers=1, hidden_size=32, num_attention_heads=4, intermediate_size=48,
        image_size=16, patch_size=8))
    net = al.from_pretrained(save_checkpoint(model, tmp_path))
    with pytest.raises(al.DataError, match=r"'attention_mask' pads the model's token inputs, "
                                           r"but this network has none .*pixel_values"):
        net({"pixel_values": torch.randn(1, 3, 16, 16), "attention_mask": torch.ones(1, 5)})


def test_a_network_of_ones_own_points_to_padded():
    net = al.Network([al.layers.TokenInput(name="ids"), al.layers.Embedding(10, 4)])
    with pytest.raises(al.DataError, match=r"unknown attention_mask.*al\.Padded\(x, mask\)"):
        net({"ids": torch.zeros(1, 3, dtype=torch.long), "attention_mask": torch.ones(1, 3)})


# -- inputs by position, in transformers' order --------------------------------------------------

ENCODERS = ["bert", "roberta", "distilbert"]


def _types():
    return (torch.arange(T) >= 4).long().expand(len(LENGTHS), T)


def _hidden(out):
    """The encoder's last hidden state, from ours (a dict or a tensor) or transformers'."""
    if isinstance(out, torch.Tensor):
        return out
    return out["last_hidden_state"] if isinstance(out, dict) else out.last_hidden_state


@pytest.mark.parametrize("kind", ENCODERS)
def test_ids_alone_by_position_as_transformers(checkpoints, kind):
    """net(input_ids) as model(input_ids): token_type_ids, where the network has them, are
    zeros as in transformers."""
    _, model, net = checkpoints(kind)
    ids = _ids(seed=7) + 1                      # no RoBERTa padding token (1) among them
    with torch.no_grad():
        ours, theirs = net(ids), model(ids)
        by_name = net({"input_ids": ids})
    assert relative_difference(_hidden(ours), _hidden(theirs)) <= TOLERANCE
    assert torch.equal(_hidden(ours), _hidden(by_name))


@pytest.mark.parametrize("kind", ENCODERS)
@pytest.mark.parametrize("side", ["left", "right"])
def test_ids_and_mask_by_position_as_transformers(checkpoints, kind, side):
    """net(input_ids, attention_mask): the second input is the mask, as in transformers, not
    the network's second input (token_type_ids for BERT and RoBERTa)."""
    _, model, net = checkpoints(kind)
    ids, mask = _ids(seed=8) + 1, _mask(side)
    with torch.no_grad():
        ours, theirs = net(ids, mask), model(ids, mask)
        predicted = net.predict(ids, mask, batch_size=2)
    assert _difference(_hidden(ours), _hidden(theirs), mask) <= TOLERANCE
    assert _difference(_hidden(predicted), _hidden(ours), mask) <= 1e-6


@pytest.mark.parametrize("kind", ["bert", "roberta"])
def test_ids_mask_and_token_types_by_position_as_transformers(checkpoints, kind):
    _, model, net = checkpoints(kind)
    ids, mask, types = _ids(seed=9) + 1, _mask("right"), _types()
    with torch.no_grad():
        ours, theirs = net(ids, mask, types), model(ids, mask, types)
        mixed = net(ids, mask, token_type_ids=types)
        typeless = model(ids, mask)
    assert _difference(_hidden(ours), _hidden(theirs), mask) <= TOLERANCE
    assert relative_difference(ours["pooler_output"], theirs.pooler_output) <= TOLERANCE
    assert torch.equal(_hidden(mixed), _hidden(ours))
    assert _difference(_hidden(ours), _hidden(typeless), mask) > 1e-3    # the types mattered


@pytest.mark.parametrize("kind", ENCODERS)
def test_ids_by_position_and_mask_by_name_as_transformers(checkpoints, kind):
    _, model, net = checkpoints(kind)
    ids, mask = _ids(seed=10) + 1, _mask("left")
    with torch.no_grad():
        ours = net(ids, attention_mask=mask)
        theirs = model(ids, attention_mask=mask)
    assert _difference(_hidden(ours), _hidden(theirs), mask) <= TOLERANCE


def test_a_head_takes_inputs_by_position_as_transformers(checkpoints):
    _, model, net = checkpoints("bert-qa")
    ids, mask, types = _ids(seed=11), _mask("right"), _types()
    with torch.no_grad():
        ours, theirs = net(ids, mask, types), model(ids, mask, types)
    for name in ("start_logits", "end_logits"):
        assert _difference(ours[name], getattr(theirs, name), mask) <= TOLERANCE


def test_t5_reads_its_four_inputs_by_position_as_transformers(checkpoints):
    _, model, net = checkpoints("t5")
    ids, mask, dec = _ids(seed=12), _mask("right"), _ids(3, 5, seed=13)
    with torch.no_grad():
        ours, theirs = net(ids, mask, dec), model(ids, mask, dec).logits
    assert relative_difference(ours, theirs) <= TOLERANCE


def test_positional_calls_transformers_would_not_read_so_are_refused(checkpoints):
    """Each refusal names the inputs and says how to give them."""
    ids, mask = _ids(), _mask("right")
    _, _, gpt2 = checkpoints("gpt2")          # transformers' GPT-2 takes its cache second
    with pytest.raises(al.DataError, match=r"2 inputs by position, but transformers' "
                       r"GPT2LMHeadModel reads input_ids by position, then its key/value cache "
                       r"\(past_key_values\).*net\(input_ids, attention_mask=mask\)"):
        gpt2(ids, mask)
    with torch.no_grad():
        assert torch.equal(gpt2(ids, attention_mask=mask), gpt2(input_ids=ids,
                                                                 attention_mask=mask))
    _, _, distilbert = checkpoints("distilbert")
    with pytest.raises(al.DataError, match=r"3 inputs by position, but transformers' "
                       r"DistilBertModel reads input_ids, attention_mask by position, and "
                       r"nothing after them is an input.*\(the network's inputs: input_ids\)"):
        distilbert(ids, mask, mask)
    with pytest.raises(al.DataError, match=r"3 inputs by position.*net.predict|3 inputs by "
                                           r"position, but transformers' DistilBertModel"):
        distilbert.predict(ids, mask, mask)
    _, _, t5 = checkpoints("t5")              # the network's own order: ids, decoder ids
    with pytest.raises(al.DataError, match=r"2 inputs by position leave out decoder_input_ids: "
                       r"transformers' T5ForConditionalGeneration reads input_ids, "
                       r"attention_mask, decoder_input_ids, decoder_attention_mask"):
        t5(ids, _ids(3, 5))
    _, _, bert = checkpoints("bert")
    with pytest.raises(al.DataError, match=r"input 'attention_mask' given both by position "
                                           r"and by name"):
        bert(ids, mask, attention_mask=mask)


def test_a_model_type_attnlab_does_not_list_takes_its_ids_alone_by_position(checkpoints):
    """A registered family's order is not known: its first input alone is read by position."""
    import copy
    _, _, net = checkpoints("llama")
    other = copy.deepcopy(net)
    other.metadata["huggingface"]["config"]["model_type"] = "my-llama"
    ids, mask = _ids(), _mask("right")
    with torch.no_grad():
        assert torch.equal(other(ids), net(ids))
    with pytest.raises(al.DataError, match=r"2 inputs by position, but transformers' "
                                           r"LlamaForCausalLM reads input_ids by position"):
        other(ids, mask)
    with torch.no_grad():
        ours = net(ids, mask)
    assert torch.equal(ours[mask.bool()], net(input_ids=ids, attention_mask=mask)[mask.bool()])
