"""`generate` grows what it holds with the tokens it makes: the key/value caches (and the tables
of sinusoidal positions) start at the prompt plus a few dozen steps and double when full, and the
output gathers the tokens as they come, so `max_length` is a bound, never an allocation; the
tokens stay exactly those of decoding by full forward passes across every doubling."""
import pytest
import torch

import attnlab as al
import attnlab.stream.decode as decode
from attnlab import layers as L
from helpers import naive_greedy

V, D = 24, 8


def lm():
    """A tiny causal language model with sinusoidal positions (no learned table bounds it)."""
    torch.manual_seed(0)
    net = al.Network([L.TokenInput(name="ids"), L.Embedding(V, D, name="wte"),
                      L.SinusoidalPositionEncoding(D, name="pos"), L.Addition(2, name="add"),
                      L.SelfAttention(2, D, attention_mask="causal", name="att"),
                      L.LayerNorm(name="ln"), L.Dense(V, name="head")])
    net.connect("wte", "add/in2")
    return net.eval()


@pytest.fixture
def streams(monkeypatch):
    """The streams generate makes, with the capacity each was made with."""
    made = []
    real = decode.stream

    def spy(*args, **kwargs):
        s = real(*args, **kwargs)
        made.append((s, kwargs["capacity"]))
        return s
    monkeypatch.setattr(decode, "stream", spy)
    return made


def test_a_huge_max_length_with_an_early_stop_holds_only_the_tokens_made(streams):
    net = lm()
    prompt = torch.tensor([[3, 1, 4]])
    free = naive_greedy(net, prompt, 8)
    stop = int(free[0, 3])
    first = int((free[0] == stop).nonzero()[0])
    got = al.generate(net, start=prompt, stop=stop, max_new_tokens=10**9)
    assert got.sequences()[0] == free[0, :first + 1].tolist()
    assert got.tokens.shape == (1, first + 1) and got.lengths.tolist() == [first + 1]
    (s, capacity), = streams
    assert capacity == 3 + 64                     # the prompt and a first chunk, not 10**9
    cache = s.steppers["att"].cache
    assert cache.capacity == capacity and cache.n <= 3 + 8      # stopped within 8 steps
    assert cache.k.numel() == 1 * 2 * capacity * (D // 2)
    assert s.steppers["pos"].table.shape[1] == capacity


def test_the_caches_double_as_decoding_goes_on_and_the_tokens_stay_exact(streams, monkeypatch):
    monkeypatch.setattr(decode, "_FIRST_STEPS", 8)     # doublings within a few dozen tokens
    net = lm()
    prompt = torch.tensor([[3, 1, 4], [2, 7, 1]])
    got = al.generate(net, start=prompt, max_new_tokens=40)
    assert torch.equal(got.tokens, naive_greedy(net, prompt, 40))
    (s, capacity), = streams
    cache = s.steppers["att"].cache
    assert capacity == 3 + 8 and cache.capacity == 4 * 11 and cache.n == 3 + 39
    assert s.steppers["pos"].table.shape[1] >= cache.n
    # the views of the cache made in doubling chunks, not one per step of max_length
    assert len(cache.k_prefix) <= cache.capacity


def test_a_short_max_length_sizes_the_caches_to_it(streams):
    net = lm()
    got = al.generate(net, start=torch.tensor([[3, 1, 4]]), max_new_tokens=5)
    assert got.tokens.shape == (1, 5)
    (s, capacity), = streams
    assert capacity == 8 and s.steppers["att"].cache.capacity == 8


def test_tokens_past_the_gathering_chunk_come_back_whole_and_in_order(monkeypatch):
    monkeypatch.setattr(decode, "_GATHER", 4)     # gather every 4 steps: 10 tokens = 4 + 4 + 2
    net = lm()
    prompt = torch.tensor([[3, 1, 4], [2, 7, 1]])
    want = naive_greedy(net, prompt, 10)
    assert torch.equal(al.generate(net, start=prompt, max_new_tokens=10).tokens, want)
    stop = int(want[1, 6])
    got = al.generate(net, start=prompt, max_new_tokens=10, stop=stop)
    n = got.lengths.tolist()
    for r in range(2):
        assert got.tokens[r, :n[r]].tolist() == want[r, :n[r]].tolist()


def test_a_compiled_stream_grows_its_static_caches_and_gives_the_same_tokens(streams,
                                                                             monkeypatch):
    monkeypatch.setattr(decode, "_FIRST_STEPS", 4)
    net = lm()
    prompt = torch.tensor([[3, 1, 4]])
    eager = al.generate(net, start=prompt, max_new_tokens=12)
    compiled = al.generate(net, start=prompt, max_new_tokens=12, compile={"backend": "eager"})
    assert torch.equal(compiled.tokens, eager.tokens)
    assert torch.equal(eager.tokens, naive_greedy(net, prompt, 12))
    assert streams[1][0].steppers["att"].cache.capacity == 2 * (3 + 4)     # it doubled
