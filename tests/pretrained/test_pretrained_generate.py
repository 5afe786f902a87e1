"""`al.generate` against transformers' `generate` on tiny random checkpoints (GPT-2, Llama, T5,
built offline): the same tokens for greedy decoding, for sampling with every processor and
the same seed, with repetition penalties, n-gram blocking and lists of stop ids; the lengths
counted as transformers counts them; the per-step callback and the step scores."""
import pytest
import torch

import attnlab as al
from pretrained_helpers import quiet_transformers, save_checkpoint

transformers = pytest.importorskip("transformers")
quiet_transformers()

VOCAB = 64


def _gpt2():
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=VOCAB,
                                     n_positions=64, bos_token_id=0, eos_token_id=0,
                                     initializer_range=0.2)
    return transformers.GPT2LMHeadModel(config)


def _llama():
    config = transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
        initializer_range=0.1, tie_word_embeddings=False, pad_token_id=0, bos_token_id=1,
        eos_token_id=2)
    return transformers.LlamaForCausalLM(config)


def _t5():
    config = transformers.T5Config(
        vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=48, num_layers=2, num_decoder_layers=2,
        num_heads=4, relative_attention_num_buckets=8, relative_attention_max_distance=16,
        decoder_start_token_id=0, pad_token_id=0, eos_token_id=1, initializer_factor=0.3,
        feed_forward_proj="gated-gelu", tie_word_embeddings=False)
    return transformers.T5ForConditionalGeneration(config)


MAKERS = {"gpt2": _gpt2, "llama": _llama, "t5": _t5}


@pytest.fixture(scope="module", params=sorted(MAKERS))
def pair(request, tmp_path_factory):
    """(family, transformers model, the attnlab network loaded from its folder)."""
    torch.manual_seed(0)
    model = MAKERS[request.param]()
    folder = save_checkpoint(model, tmp_path_factory.mktemp(request.param))
    return request.param, model.eval(), al.from_pretrained(folder)


def _prompt(family, b=2, t=5, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, VOCAB, (b, t), generator=g)


def theirs(family, model, prompt, seed=None, **kw):
    """transformers' new tokens (and its output) for the prompt: a decoder's prompt, or T5's
    encoder input with the decoder started at id 0."""
    kw = {"eos_token_id": None, "pad_token_id": 0, "do_sample": False, **kw}
    if seed is not None:
        torch.manual_seed(seed)
    with torch.no_grad():
        out = model.generate(prompt, attention_mask=torch.ones_like(prompt),
                             return_dict_in_generate=True, **kw)
    start = 1 if family == "t5" else prompt.shape[1]
    return out.sequences[:, start:], out


def ours(family, net, prompt, seed=None, **kw):
    kw.setdefault("stop", None)              # as theirs: no end id unless given
    if seed is not None:
        torch.manual_seed(seed)
    if family == "t5":
        return al.generate(net, static_inputs={"input_ids": prompt}, start=0, **kw)
    return al.generate(net, start=prompt, **kw)


def _same(family, model, net, prompt, seed=None, **kw):
    """Our tokens and transformers' for the same arguments (transformers' names)."""
    mine = ours(family, net, prompt, seed, **{k: v for k, v in kw.items() if k != "do_sample"})
    want, _ = theirs(family, model, prompt, seed, **{k: v for k, v in kw.items()
                                                     if k != "strategy"})
    assert mine.tokens.tolist() == want.tolist(), (family, kw)
    return mine


# -- lengths ------------------------------------------------------------------------------------

def test_max_length_counts_the_prompt_and_max_new_tokens_the_new_tokens(pair):
    family, model, net = pair
    prompt = _prompt(family)
    start = 1 if family == "t5" else prompt.shape[1]      # T5's decoder starts at one token
    new = _same(family, model, net, prompt, max_new_tokens=7)
    assert new.tokens.shape == (2, 7)
    total = _same(family, model, net, prompt, max_length=start + 6)
    assert total.tokens.shape == (2, 6)
    assert torch.equal(total.tokens, new.tokens[:, :6])
    assert ours(family, net, prompt).tokens.shape == (2, 20)    # transformers' default: 20 new


# -- sampling, the same seed ----------------------------------------------------------------------

SAMPLING = [
    dict(),                                       # transformers' defaults: top_k 50
    dict(temperature=0.7),
    dict(temperature=1.3, top_k=5),
    dict(top_k=0, top_p=0.8),
    dict(top_k=0, min_p=0.2),
    dict(temperature=0.6, top_k=20, top_p=0.9, min_p=0.05),
    dict(top_k=0, temperature=2.0, repetition_penalty=1.5),
    dict(top_k=10, no_repeat_ngram_size=2),
]


@pytest.mark.parametrize("settings", SAMPLING, ids=lambda s: "-".join(s) or "defaults")
@pytest.mark.parametrize("seed", [0, 7])
def test_sampling_with_the_same_seed_draws_transformers_tokens(pair, settings, seed):
    family, model, net = pair
    prompt = _prompt(family, b=3)
    got = _same(family, model, net, prompt, seed, strategy="sample", do_sample=True,
                max_new_tokens=12, **settings)
    # a generator seeded alike draws the same tokens as the seeded global one
    again = ours(family, net, prompt, strategy="sample", max_new_tokens=12,
                 generator=torch.Generator().manual_seed(seed), **settings)
    assert torch.equal(again.tokens, got.tokens)


def test_sampling_draws_differ_between_seeds(pair):
    family, model, net = pair
    prompt = _prompt(family, b=3)
    draws = {tuple(ours(family, net, prompt, seed, strategy="sample", top_k=0,
                        max_new_tokens=12).tokens.flatten().tolist()) for seed in range(3)}
    assert len(draws) == 3


# -- penalties in greedy decoding -------------------------------------------------------------------

@pytest.mark.parametrize("settings", [dict(repetition_penalty=1.8),
                                      dict(repetition_penalty=0.6),
                                      dict(no_repeat_ngram_size=1),
                                      dict(no_repeat_ngram_size=2),
                                      dict(no_repeat_ngram_size=3, repetition_penalty=1.3)],
                         ids=lambda s: "-".join(f"{k}={v}" for k, v in s.items()))
def test_greedy_penalties_give_transformers_tokens(pair, settings):
    family, model, net = pair
    prompt = _prompt(family)
    plain = ours(family, net, prompt, max_new_tokens=14).tokens
    got = _same(family, model, net, prompt, max_new_tokens=14, **settings)
    if settings.get("no_repeat_ngram_size") == 1:             # no token twice in a row
        assert all(len(set(r)) == len(r) for r in got.tokens.tolist())
    # the settings change the tokens (T5's penalty counts the decoder's ids only, as
    # transformers: its greedy tokens here hold no repeat for a penalty to act on)
    assert not torch.equal(got.tokens, plain) or (family == "t5" and len(settings) == 1 and
                                                  "repetition_penalty" in settings)


# -- stop ids ------------------------------------------------------------------------------------

def test_a_list_of_stop_ids_stops_as_transformers_eos_list(pair):
    family, model, net = pair
    prompt = _prompt(family, b=3)
    free = ours(family, net, prompt, max_new_tokens=12).tokens
    stops = [int(free[0, 2]), int(free[1, 4])]
    got = ours(family, net, prompt, stop=stops, max_new_tokens=12)
    want, _ = theirs(family, model, prompt, max_new_tokens=12, eos_token_id=stops)
    for row, seq in zip(want.tolist(), got.sequences()):
        ends = [i for i, t in enumerate(row) if t in stops]
        assert seq == (row[:ends[0] + 1] if ends else row)
    assert got.lengths[0] <= 3 and got.lengths[1] <= 5


# -- the callback and the scores ---------------------------------------------------------------------

def test_the_callback_sees_each_steps_tokens_as_transformers_streamer(pair):
    family, model, net = pair
    prompt = _prompt(family, b=1)

    class Streamer:                                  # transformers' streamer protocol
        def __init__(self):
            self.puts = []

        def put(self, value):
            self.puts.append(value.reshape(-1).tolist())

        def end(self):
            pass

    streamer = Streamer()
    want, _ = theirs(family, model, prompt, max_new_tokens=6, streamer=streamer)
    seen = []
    got = ours(family, net, prompt, max_new_tokens=6,
               callback=lambda step, tokens: seen.append((step, tokens.tolist())))
    assert seen == [(i, [t]) for i, t in enumerate(want[0].tolist())]
    assert [p for p in streamer.puts[1:]] == [[t] for t in got.tokens[0].tolist()]


@pytest.mark.parametrize("settings", [dict(), dict(repetition_penalty=1.4),
                                      dict(strategy="sample", temperature=0.8, top_p=0.9)],
                         ids=["greedy", "penalty", "sample"])
def test_return_scores_gives_the_log_probabilities_of_transformers_scores(pair, settings):
    family, model, net = pair
    prompt = _prompt(family)
    hf = {k: v for k, v in settings.items() if k != "strategy"}
    if settings.get("strategy") == "sample":
        hf["do_sample"] = True
    want, out = theirs(family, model, prompt, seed=3, max_new_tokens=5, output_scores=True, **hf)
    got = ours(family, net, prompt, seed=3, max_new_tokens=5, return_scores=True, **settings)
    assert got.tokens.tolist() == want.tolist()
    assert got.scores.shape == (2, 5, VOCAB) and got.scores.dtype == torch.float32
    expected = torch.stack([torch.log_softmax(s, -1) for s in out.scores], 1)
    finite = expected.isfinite()
    assert torch.equal(finite, got.scores.isfinite())          # the same tokens ruled out
    assert torch.allclose(got.scores[finite], expected[finite], atol=1e-4)
    assert ours(family, net, prompt, max_new_tokens=5).scores is None


# -- generation_config.json ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def configured(tmp_path_factory):
    """A GPT-2 folder whose generation_config.json asks for sampling, its own lengths and two
    end ids; transformers' model loaded back from the folder (so it reads the file too)."""
    torch.manual_seed(0)
    model = _gpt2()
    folder = tmp_path_factory.mktemp("configured")
    prompt = _prompt("gpt2", b=3)
    free = ours("gpt2", al.from_pretrained(save_checkpoint(model, folder)), prompt,
                max_new_tokens=12, stop=None).tokens
    stops = [int(free[0, 3]), int(free[2, 5])]
    model.generation_config = transformers.GenerationConfig(
        do_sample=True, top_k=6, temperature=0.8, max_new_tokens=9, eos_token_id=stops,
        pad_token_id=stops[0])
    save_checkpoint(model, folder)
    hf = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    return folder, hf, al.from_pretrained(folder), prompt


def test_generation_config_gives_the_defaults_transformers_takes(configured):
    folder, hf, net, prompt = configured
    for seed in (0, 4):
        torch.manual_seed(seed)
        with torch.no_grad():
            want = hf.generate(prompt, attention_mask=torch.ones_like(prompt))[:, 5:]
        torch.manual_seed(seed)
        got = al.generate(net, start=prompt)               # sampling, 9 tokens, two stop ids
        assert got.tokens.shape[1] <= 9 and int(got.lengths.max()) == got.tokens.shape[1]
        for row, seq in zip(want.tolist(), got.sequences()):
            assert row[:len(seq)] == seq
            assert len(seq) == 9 or seq[-1] in hf.generation_config.eos_token_id


def test_arguments_given_override_generation_config(configured):
    folder, hf, net, prompt = configured
    greedy = al.generate(net, start=prompt, strategy="greedy", stop=None, max_new_tokens=12)
    with torch.no_grad():
        want = hf.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False,
                           eos_token_id=None, max_new_tokens=12)[:, 5:]
    assert greedy.tokens.tolist() == want.tolist()
    assert greedy.lengths.tolist() == [12, 12, 12]                 # stop=None: no stop id
    assert al.generate(net, start=prompt, stop=None, max_length=8).tokens.shape == (3, 3)
    torch.manual_seed(1)
    a = al.generate(net, start=prompt, stop=None, top_k=0)        # still sampling, all tokens
    assert a.tokens.shape == (3, 9)


def test_a_bad_generation_config_value_is_a_data_error_naming_the_file(tmp_path):
    torch.manual_seed(0)
    model = _gpt2()
    model.generation_config = transformers.GenerationConfig(do_sample=True, top_k=5)
    save_checkpoint(model, tmp_path)
    path = tmp_path / "generation_config.json"
    import json
    doc = json.loads(path.read_text())
    path.write_text(json.dumps({**doc, "top_p": 2.0}))
    net = al.from_pretrained(tmp_path)
    with pytest.raises(al.DataError) as e:
        al.generate(net, start=_prompt("gpt2"))
    message = str(e.value)
    assert "generation_config.json" in message and "'top_p'" in message and "(0, 1]" in message
    assert "received 2.0" in message and "give top_p=" in message
    assert al.generate(net, start=_prompt("gpt2"), top_p=0.9, max_new_tokens=2).tokens.shape \
        == (2, 2)                                                   # an argument overrides it
    path.unlink()                                                   # no file: transformers'
    plain = al.from_pretrained(tmp_path)
    assert plain.metadata["huggingface"]["generation"] == {}
    got = al.generate(plain, start=_prompt("gpt2"))
    assert got.tokens.shape == (2, 20) and got.tokens.tolist() == \
        al.generate(plain, start=_prompt("gpt2"), strategy="greedy").tokens.tolist()


def test_a_files_end_id_past_the_vocabulary_is_no_stop(tmp_path):
    """GPT-2's default end id 50256 in a model of 64 tokens: transformers never meets it, and
    generate does not refuse the file for it (an end id given as stop= is refused)."""
    torch.manual_seed(0)
    model = _gpt2()
    model.generation_config = transformers.GenerationConfig(eos_token_id=[50256, 5])
    net = al.from_pretrained(save_checkpoint(model, tmp_path))
    prompt = _prompt("gpt2")
    with torch.no_grad():
        want = model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False,
                              max_new_tokens=10, pad_token_id=5)[:, 5:]
    got = al.generate(net, start=prompt, max_new_tokens=10)
    for row, seq in zip(want.tolist(), got.sequences()):
        assert row[:len(seq)] == seq and (len(seq) == 10 or seq[-1] == 5)
    with pytest.raises(al.ArgumentError, match="'stop'.*50256"):
        al.generate(net, start=prompt, stop=[50256, 5])


# -- beam search ------------------------------------------------------------------------------------

BEAMS = [
    dict(num_beams=2),
    dict(num_beams=3, length_penalty=0.5),
    dict(num_beams=4, length_penalty=2.0, early_stopping=True),
    dict(num_beams=3, length_penalty=-1.0, early_stopping="never"),
    dict(num_beams=4, no_repeat_ngram_size=2, repetition_penalty=1.3),
]


def _same_beams(family, model, net, prompt, stop, **kw):
    """Our best hypotheses and transformers' (its rows padded after an end with fill ids)."""
    got = ours(family, net, prompt, strategy="beam", max_new_tokens=9, stop=stop, **kw)
    want, _ = theirs(family, model, prompt, max_new_tokens=9, eos_token_id=stop, **kw)
    for row, seq in zip(want.tolist(), got.sequences()):
        assert row[:len(seq)] == seq, (family, kw, row, seq)
        assert len(seq) == 9 or seq[-1] in stop
    assert got.tokens.shape[1] == int(got.lengths.max())
    return got


@pytest.mark.parametrize("kw", BEAMS, ids=lambda kw: "-".join(f"{k}={v}" for k, v in kw.items()))
def test_beam_search_gives_transformers_tokens(pair, kw):
    family, model, net = pair
    prompt = _prompt(family, b=2)
    got = ours(family, net, prompt, strategy="beam", max_new_tokens=9, **kw)
    want, _ = theirs(family, model, prompt, max_new_tokens=9, **kw)
    assert got.tokens.tolist() == want.tolist() and got.lengths.tolist() == [9, 9]


@pytest.mark.parametrize("kw", BEAMS[:4], ids=lambda kw: "-".join(f"{k}={v}" for k, v in kw.items()))
def test_beam_search_with_stop_ids_gives_transformers_hypotheses(pair, kw):
    family, model, net = pair
    prompt = _prompt(family, b=3)
    free = ours(family, net, prompt, strategy="beam", max_new_tokens=9, **kw).tokens
    stops = [int(free[0, 2]), int(free[1, 5])]
    got = _same_beams(family, model, net, prompt, stops, **kw)
    # some hypothesis ended at a stop (T5's tiny decoder repeats one token: its stop ids are
    # that token, and a long hypothesis may win)
    assert int(got.lengths.min()) < 9 or family == "t5"


def test_beams_reorder_the_caches_and_never_feed_the_prefix_again(pair):
    family, model, net = pair
    if family == "t5":
        pytest.skip("T5's decoder prompt is its one start id")
    prompt = _prompt(family, b=2, t=6)
    fed = []
    first = next(m for m in net.modules() if isinstance(m, torch.nn.Embedding))
    hook = first.register_forward_hook(lambda m, args, out: fed.append(tuple(args[0].shape)))
    try:
        ours(family, net, prompt, strategy="beam", num_beams=3, max_new_tokens=5)
    finally:
        hook.remove()
    assert fed[0] == (6, 6) and set(fed[1:]) == {(6, 1)}          # B·beams rows, one step


def test_num_beams_from_generation_config_is_beam_search(tmp_path):
    torch.manual_seed(0)
    model = _gpt2()
    model.generation_config = transformers.GenerationConfig(num_beams=3, length_penalty=0.7,
                                                            max_new_tokens=7)
    net = al.from_pretrained(save_checkpoint(model, tmp_path))
    prompt = _prompt("gpt2")
    with torch.no_grad():
        want = model.generate(prompt, attention_mask=torch.ones_like(prompt), pad_token_id=0)
    got = al.generate(net, start=prompt, stop=None)
    assert got.tokens.tolist() == want[:, 5:].tolist()
    assert al.generate(net, start=prompt, stop=None, strategy="greedy", num_beams=None)\
        .tokens.tolist() == ours("gpt2", net, prompt, max_new_tokens=7, num_beams=None).tokens.tolist()


# -- left-padded batches ------------------------------------------------------------------------------

LENGTHS = (7, 3, 5)


def _padded(pad=0, seed=2):
    g = torch.Generator().manual_seed(seed)
    prompts = [torch.randint(3, VOCAB, (n,), generator=g) for n in LENGTHS]
    t = max(LENGTHS)
    ids = torch.full((len(LENGTHS), t), pad, dtype=torch.long)
    mask = torch.zeros(len(LENGTHS), t, dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, t - len(p):], mask[i, t - len(p):] = p, 1
    return prompts, ids, mask


def _hf_padded(model, ids, mask, seed=None, **kw):
    if seed is not None:
        torch.manual_seed(seed)
    with torch.no_grad():
        out = model.generate(ids, attention_mask=mask, pad_token_id=0,
                             **{"eos_token_id": None, **kw})
    return out[:, ids.shape[1]:]


PADDED = [dict(max_new_tokens=8),
          dict(max_new_tokens=8, repetition_penalty=1.5, no_repeat_ngram_size=2),
          dict(max_new_tokens=8, strategy="sample", temperature=0.9, top_k=20),
          dict(max_new_tokens=8, strategy="beam", num_beams=3, length_penalty=0.6)]


@pytest.mark.parametrize("kw", PADDED, ids=["greedy", "penalties", "sample", "beam"])
@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_left_padded_prompts_give_transformers_tokens(family, kw, tmp_path):
    torch.manual_seed(0)
    model = MAKERS[family]().eval()
    net = al.from_pretrained(save_checkpoint(model, tmp_path))
    prompts, ids, mask = _padded()
    hf = {k: v for k, v in kw.items() if k != "strategy"}
    if kw.get("strategy") == "sample":
        hf["do_sample"] = True
    want = _hf_padded(model, ids, mask, seed=5, **hf)
    torch.manual_seed(5)
    got = al.generate(net, start=ids, attention_mask=mask, stop=None, **kw)
    assert got.tokens.tolist() == want.tolist()
    torch.manual_seed(5)                                   # a list of prompts: the same batch
    again = al.generate(net, start=[p.tolist() for p in prompts], stop=None, **kw)
    assert torch.equal(again.tokens, got.tokens)


def test_left_padded_rows_stop_one_by_one_as_transformers(tmp_path):
    torch.manual_seed(0)
    model = _llama().eval()
    net = al.from_pretrained(save_checkpoint(model, tmp_path))
    _, ids, mask = _padded()
    free = _hf_padded(model, ids, mask, max_new_tokens=10)
    stops = [int(free[1, 2]), int(free[2, 6])]
    want = _hf_padded(model, ids, mask, max_new_tokens=10, eos_token_id=stops)
    got = al.generate(net, start=ids, attention_mask=mask, stop=stops, max_new_tokens=10)
    for row, seq in zip(want.tolist(), got.sequences()):
        assert row[:len(seq)] == seq and (len(seq) == 10 or seq[-1] in stops)
    assert sorted(got.lengths.tolist())[0] < 10
