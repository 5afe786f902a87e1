"""`generate`'s names as transformers has them: `max_new_tokens` counts new tokens, `max_length`
the prompt's and the new ones (a start id is a prompt of one); `strategy` "sample" and the
older "top-k"; the sampling and penalty arguments checked where they enter; the per-step
callback; the step scores."""
import pytest
import torch

import attnlab as al
from attnlab import layers as L
from helpers import naive_greedy

V, D = 20, 8
ARG = al.ArgumentError


def lm():
    torch.manual_seed(0)
    return al.Network([L.TokenInput(name="ids"), L.Embedding(V, D, name="wte"),
                       L.SelfAttention(2, D, attention_mask="causal", name="att"),
                       L.Dense(V, name="head")]).eval()


PROMPT = torch.tensor([[3, 1, 4], [1, 5, 9]])


def test_max_length_counts_the_prompt_and_the_new_tokens():
    net = lm()
    want = naive_greedy(net, PROMPT, 7)
    assert torch.equal(al.generate(net, start=PROMPT, max_new_tokens=7).tokens, want)
    assert torch.equal(al.generate(net, start=PROMPT, max_length=10).tokens, want)
    assert torch.equal(al.generate(net, start=PROMPT, max_length=4).tokens, want[:, :1])
    # both, when they say the same
    assert torch.equal(al.generate(net, start=PROMPT, max_length=10, max_new_tokens=7).tokens,
                       want)
    # a start id is a prompt of one token (transformers counts T5's decoder start so)
    assert al.generate(net, start=5, max_length=6).tokens.shape == (1, 5)
    assert al.generate(net, start=torch.tensor([5, 6]), max_new_tokens=6).tokens.shape == (2, 6)


def test_without_a_length_twenty_new_tokens_as_transformers():
    assert al.generate(lm(), start=PROMPT).tokens.shape == (2, 20)


@pytest.mark.parametrize("kwargs, fragments", [
    (dict(max_length=3), ["'max_length'", "more than the prompt's 3 tokens",
                          "prompt and the new tokens", "max_new_tokens=3", "max_length=6"]),
    (dict(max_length=2), ["'max_length'", "received 2"]),
    (dict(max_length=9, max_new_tokens=7), ["'max_length'", "3 + 7 = 10", "received 9",
                                            "not both"]),
    (dict(max_new_tokens=0), ["'max_new_tokens'", "positive int", "received 0"]),
    (dict(max_new_tokens=2.0), ["'max_new_tokens'", "Use max_new_tokens=2"]),
    (dict(max_new_tokens=True), ["'max_new_tokens'", "True (bool)"]),
    (dict(strategy="sample", top_p=0), ["'top_p'", "(0, 1]", "received 0"]),
    (dict(strategy="sample", top_p=1.5), ["'top_p'", "(0, 1]", "top_p=0.9"]),
    (dict(strategy="sample", top_p=float("nan")), ["'top_p'", "received nan"]),
    (dict(strategy="sample", min_p=-0.1), ["'min_p'", "[0, 1]", "received -0.1"]),
    (dict(strategy="sample", min_p="0.1"), ["'min_p'", "'0.1' (str)"]),
    (dict(strategy="sample", top_k=-1), ["'top_k'", "an int ≥ 0", "received -1"]),
    (dict(strategy="sample", top_k=2.5), ["'top_k'", "received 2.5"]),
    (dict(strategy="sample", temperature=0), ["'temperature'", "> 0", "strategy='greedy'"]),
    (dict(repetition_penalty=0), ["'repetition_penalty'", "> 0", "received 0"]),
    (dict(repetition_penalty=float("inf")), ["'repetition_penalty'", "finite"]),
    (dict(no_repeat_ngram_size=-1), ["'no_repeat_ngram_size'", "an int ≥ 0"]),
    (dict(no_repeat_ngram_size=1.5), ["'no_repeat_ngram_size'", "received 1.5"]),
    (dict(strategy="sample", k=4), ["'k'", "strategy='top-k'", "Use top_k=4"]),
    (dict(callback=3), ["'callback'", "a function or None", "received 3"]),
    (dict(return_scores="yes"), ["'return_scores'", "True or False", "'yes' (str)"]),
    (dict(return_scores=None), ["'return_scores'", "received None"]),
])
def test_a_bad_decoding_argument_is_refused_naming_it(kwargs, fragments):
    net = lm()
    seen = []
    hook = net.layer_modules["wte"].register_forward_hook(lambda *a: seen.append(1))
    try:
        with pytest.raises(ARG) as e:
            al.generate(net, start=PROMPT, **kwargs)
    finally:
        hook.remove()
    message = str(e.value)
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    assert message.startswith("generate argument")
    assert seen == []                                   # refused before any step


def test_top_k_is_sampling_with_top_k():
    net = lm()
    for seed in (0, 3):
        old = al.generate(net, start=PROMPT, max_new_tokens=8, strategy="top-k", k=4,
                          temperature=0.7, generator=torch.Generator().manual_seed(seed))
        new = al.generate(net, start=PROMPT, max_new_tokens=8, strategy="sample", top_k=4,
                          temperature=0.7, generator=torch.Generator().manual_seed(seed))
        assert torch.equal(old.tokens, new.tokens)


def test_sampling_without_a_generator_draws_from_torchs_global_one():
    net = lm()
    torch.manual_seed(5)
    a = al.generate(net, start=PROMPT, max_new_tokens=8, strategy="sample", top_k=0)
    b = al.generate(net, start=PROMPT, max_new_tokens=8, strategy="sample", top_k=0,
                    generator=torch.Generator().manual_seed(5))
    assert torch.equal(a.tokens, b.tokens)


def test_the_callback_gets_each_step_and_its_tokens_and_stops_with_the_batch():
    net = lm()
    free = naive_greedy(net, PROMPT, 10)
    seen = []
    got = al.generate(net, start=PROMPT, max_new_tokens=10,
                      callback=lambda step, tokens: seen.append((step, tokens.clone())))
    assert [s for s, _ in seen] == list(range(10))
    assert torch.equal(torch.stack([t for _, t in seen], 1), got.tokens)
    assert all(t.dtype == torch.int64 and t.shape == (2,) for _, t in seen)
    # with stop ids: the step where the last sequence stops is the last call
    stops = [int(free[0, 2]), int(free[1, 3])]
    seen.clear()
    got = al.generate(net, start=PROMPT, max_new_tokens=10, stop=stops,
                      callback=lambda step, tokens: seen.append(tokens.tolist()))
    assert len(seen) == int(got.lengths.max()) == got.tokens.shape[1]
    assert seen == got.tokens.t().tolist()


def test_an_error_in_the_callback_reaches_the_caller():
    def broken(step, tokens):
        raise KeyError("mine")
    with pytest.raises(KeyError, match="mine"):
        al.generate(lm(), start=PROMPT, max_new_tokens=3, callback=broken)


def test_return_scores_holds_each_steps_log_probabilities():
    net = lm()
    got = al.generate(net, start=PROMPT, max_new_tokens=5, return_scores=True)
    assert got.scores.shape == (2, 5, V)
    # the log-softmax of the network's scores at each position, the chosen token the best
    full = net(torch.cat([PROMPT, got.tokens], 1))[:, PROMPT.shape[1] - 1:-1]
    assert torch.allclose(got.scores, torch.log_softmax(full, -1), atol=1e-5)
    assert torch.equal(got.scores.argmax(-1), got.tokens)
    assert torch.allclose(got.scores.exp().sum(-1), torch.ones(2, 5))
    tokens, lengths, scores = got                     # a named tuple of three
    assert scores is got.scores
    assert al.generate(net, start=PROMPT, max_new_tokens=5).scores is None
