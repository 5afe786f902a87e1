"""Beam search's arguments and what it refuses, on a tiny network of attnlab layers; its
tokens against transformers are in tests/pretrained/test_pretrained_generate.py."""
import pytest
import torch

import attnlab as al
from attnlab import layers as L
from helpers import naive_greedy

V, D = 20, 8
PROMPT = torch.tensor([[3, 1, 4], [1, 5, 9]])


def lm(recurrent=False):
    torch.manual_seed(0)
    layers = [L.TokenInput(name="ids"), L.Embedding(V, D, name="wte"),
              L.SelfAttention(2, D, attention_mask="causal", name="att")]
    layers += [L.LSTM(D, name="lstm")] if recurrent else []
    return al.Network(layers + [L.Dense(V, name="head")]).eval()


def best_by_brute_force(net, prompt, n, length_penalty=1.0):
    """The best continuation of n tokens by summed log-probability over all V**n (n small)."""
    best = []
    for row in prompt:
        seqs = torch.cartesian_prod(*[torch.arange(V)] * n)            # V**n × n
        full = torch.cat([row.expand(len(seqs), -1), seqs], 1)
        logp = torch.log_softmax(net(full), -1)[:, len(row) - 1:-1]
        total = logp.gather(-1, seqs.unsqueeze(-1)).squeeze(-1).sum(1)
        best.append(seqs[total.argmax()].tolist())
    return best


def test_enough_beams_find_the_best_sequence():
    net = lm()
    got = al.generate(net, start=PROMPT, strategy="beam", num_beams=V * V, max_new_tokens=2)
    assert got.tokens.tolist() == best_by_brute_force(net, PROMPT, 2)
    one = al.generate(net, start=PROMPT, num_beams=3, max_new_tokens=4)   # num_beams alone
    assert one.tokens.shape == (2, 4)


def test_a_recurrent_state_follows_the_beams():
    net = lm(recurrent=True)
    got = al.generate(net, start=PROMPT, strategy="beam", num_beams=V * V, max_new_tokens=2)
    assert got.tokens.tolist() == best_by_brute_force(net, PROMPT, 2)


def test_a_start_id_with_beams_is_one_sequence():
    net = lm()
    got = al.generate(net, start=3, num_beams=4, max_new_tokens=3)
    assert got.tokens.shape == (1, 3)
    assert got.tokens.tolist() == al.generate(net, start=torch.tensor([[3]]), num_beams=4,
                                              max_new_tokens=3).tokens.tolist()


@pytest.mark.parametrize("kwargs, fragments", [
    (dict(strategy="beam"), ["'num_beams'", "≥ 2 with strategy='beam'", "received None"]),
    (dict(strategy="beam", num_beams=1), ["'num_beams'", "received 1", "num_beams=4"]),
    (dict(num_beams=0), ["'num_beams'", "positive int", "received 0"]),
    (dict(num_beams=2.0), ["'num_beams'", "Use num_beams=2"]),
    (dict(strategy="sample", num_beams=3), ["'num_beams'", "strategy='sample'",
                                             "without sampling"]),
    (dict(num_beams=3, length_penalty=float("nan")), ["'length_penalty'", "finite"]),
    (dict(num_beams=3, length_penalty="1"), ["'length_penalty'", "'1' (str)"]),
    (dict(num_beams=3, early_stopping="always"), ["'early_stopping'", "True, False or 'never'"]),
    (dict(num_beams=3, early_stopping=1), ["'early_stopping'", "received 1"]),
    (dict(num_beams=3, callback=print), ["'callback'", "strategy='beam'", "no token is final"]),
    (dict(num_beams=3, return_scores=True), ["'return_scores'", "per beam"]),
    (dict(num_beams=3, feedback=lambda t, s: t), ["'feedback'", "strategy='beam'"]),
])
def test_a_bad_beam_argument_is_refused_naming_it(kwargs, fragments):
    with pytest.raises(al.ArgumentError) as e:
        al.generate(lm(), start=PROMPT, max_new_tokens=3, **kwargs)
    for fragment in fragments:
        assert fragment in str(e.value), (fragment, str(e.value))


def test_one_beam_of_greedy_length_is_not_needed_for_greedy_tokens():
    net = lm()
    greedy = naive_greedy(net, PROMPT, 4)
    assert torch.equal(al.generate(net, start=PROMPT, max_new_tokens=4, num_beams=1).tokens,
                       greedy)
