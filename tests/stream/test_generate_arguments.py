"""`generate` checks every argument where it enters: a wrong one is an attnlab error naming the
argument, what it expects, what it received and a fix, raised before the network is touched
(the vocabulary and the generator's device once the stream knows them, before any step); right
ones, in every accepted form, give the tokens of the definition."""
import numpy as np
import pytest
import torch

import attnlab as al
from attnlab import layers as L

V, D = 20, 8


def lm():
    """A tiny causal language model on token ids, its scores over V tokens."""
    torch.manual_seed(0)
    return al.Network([L.TokenInput(name="ids"), L.Embedding(V, D, name="wte"),
                       L.SelfAttention(2, D, attention_mask="causal", name="att"),
                       L.Dense(V, name="head")]).eval()


def naive(net, prompt, n, pick=None):
    """Decoding by full forward passes over the whole prefix (the definition); `pick(scores)`
    chooses each token (default: greedy)."""
    cur, out = prompt, []
    for _ in range(n):
        scores = net(cur)[:, -1]
        nxt = scores.argmax(-1) if pick is None else pick(scores)
        out.append(nxt)
        cur = torch.cat([cur, nxt[:, None]], 1)
    return torch.stack(out, 1)


ARG, DATA = al.ArgumentError, al.DataError

# (arguments, error class, fragments the message must hold)
BAD = [
    # a bool is not a number
    (dict(max_length=True), ARG, ["'max_length'", "positive int", "True (bool)"]),
    (dict(k=True), ARG, ["'k'", "positive int", "True (bool)"]),
    (dict(temperature=True), ARG, ["'temperature'", "number > 0", "True (bool)"]),
    (dict(max_length=0), ARG, ["'max_length'", "positive int", "received 0"]),
    (dict(max_length=2.0), ARG, ["'max_length'", "Use max_length=2"]),
    (dict(max_length="10"), ARG, ["'max_length'", "'10' (str)"]),
    (dict(max_length=10**30), ARG, ["'max_length'", "≤ 9007199254740992"]),
    (dict(k=0), ARG, ["'k'", "positive int", "received 0"]),
    (dict(k=2.5), ARG, ["'k'", "received 2.5"]),
    (dict(temperature="x"), ARG, ["'temperature'", "finite number > 0", "'x' (str)",
                                  "temperature=0.7"]),
    (dict(temperature=0), ARG, ["'temperature'", "> 0", "received 0"]),
    (dict(temperature=-1.0), ARG, ["'temperature'", "received -1.0"]),
    (dict(temperature=float("inf")), ARG, ["'temperature'", "finite", "received inf"]),
    (dict(temperature=float("nan")), ARG, ["'temperature'", "received nan"]),
    (dict(strategy="top_k"), ARG, ["'strategy'", "'greedy', 'sample'", "Did you mean 'top-k'"]),
    (dict(strategy="Sample"), ARG, ["'strategy'", "'greedy', 'sample'", "'Sample'"]),
    (dict(strategy=3), ARG, ["'strategy'", "received 3"]),
    # stop: an int id or ids, never text, floats, bools or negatives, in the vocabulary
    (dict(stop="x"), ARG, ["'stop'", "token id", "'x' (str)", "stop=[2, 7]"]),
    (dict(stop=1.5), ARG, ["'stop'", "token id", "received 1.5"]),
    (dict(stop=3.0), ARG, ["'stop'", "Use stop=3 (an int, not a float)"]),
    (dict(stop=-1), ARG, ["'stop'", "an int ≥ 0", "received -1"]),
    (dict(stop=True), ARG, ["'stop'", "True (bool)"]),
    (dict(stop=[7, "a"]), ARG, ["'stop'", "'a' in it is no token id"]),
    (dict(stop=[7, 1.5]), ARG, ["'stop'", "1.5 in it is no token id"]),
    (dict(stop=[]), ARG, ["'stop'", "not empty", "stop=None"]),
    (dict(stop=torch.tensor([1.0])), ARG, ["'stop'", "of integers", "torch.tensor([2, 7])"]),
    (dict(stop=torch.tensor([[1, 2]])), ARG, ["'stop'", "0-d or 1-D"]),
    (dict(stop=np.array([True])), ARG, ["'stop'", "of integers"]),
    (dict(stop=V), ARG, ["'stop'", f"0…{V - 1}", f"scores {V} tokens", f"received {V}",
                         "tokenizer"]),
    (dict(stop=[3, V + 5]), ARG, ["'stop'", f"0…{V - 1}", f"{V + 5} is past it"]),
    # start: numbers; prompts of different lengths are padded, an attention_mask pads left
    (dict(start=[[1, 2], [3.5, 4, 5]]), DATA, ["'start'", "prompt 1 is no list of token ids"]),
    (dict(start=torch.tensor([[1, 2, 3]]), attention_mask=torch.tensor([[1, 1, 0]])), DATA,
     ["'attention_mask'", "padded at its end", "padding_side = 'left'"]),
    (dict(start=torch.tensor([[1, 2, 3]]), attention_mask=torch.tensor([[0, 0, 0]])), DATA,
     ["'attention_mask'", "no real token"]),
    (dict(start=torch.tensor([[1, 2, 3]]), attention_mask=torch.tensor([[1, 1]])), ARG,
     ["'attention_mask'", "a B×T mask", "ids 1×3", "same B×T shape"]),
    (dict(start=torch.tensor([[1, 2, 3]]), attention_mask=torch.tensor([[0.5, 1, 1]])), ARG,
     ["'attention_mask'", "0s and 1s"]),
    (dict(start=[[1, 2], 3]), DATA, ["'start'", "mixes ids and prompts"]),
    (dict(start="hello"), DATA, ["'start'", "numbers", "'hello' (str)", "tokenizer"]),
    (dict(start=["a", "b"]), DATA, ["'start'", "numbers", "text"]),
    (dict(start=None), DATA, ["'start'", "received None", "start=0"]),
    (dict(start=True), DATA, ["'start'", "True (bool)"]),
    (dict(start=torch.tensor([[True]])), DATA, ["'start'", "torch.bool"]),
    (dict(start=[]), DATA, ["'start'", "[] (list)", "of size 0"]),
    (dict(start=torch.zeros(1, 1, 1, 1, dtype=torch.long)), DATA, ["'start'", "1×1×1×1",
                                                                    "B×t prompts"]),
    (dict(start=[[1.5, 2.0]]), DATA, ["'start'", "1.5", "not a whole number"]),
    # the other arguments
    (dict(feedback=3), ARG, ["'feedback'", "a function or None", "received 3"]),
    (dict(output=3), ARG, ["'output'", "output name", "received 3"]),
    (dict(output="hed"), ARG, ["'output'", "'head'", "Did you mean 'head'"]),
    (dict(generator=0), ARG, ["'generator'", "torch.Generator", "received 0",
                              "torch.Generator().manual_seed(0)"]),
    (dict(generator="seed", strategy="top-k"), ARG, ["'generator'", "'seed' (str)"]),
    (dict(static_inputs=torch.zeros(1, 3)), ARG, ["static_inputs must be a dict",
                                                  "received Tensor", "start="]),
    (dict(device="gpu"), ARG, ["device 'gpu'"]),
    (dict(device=5), ARG, ["device must be one of", "int 5"]),
    (dict(precision="fp64"), ARG, ["precision", "'fp64'", "'fp32'"]),
    (dict(compile="yes"), ARG, ["compile", "'yes'", "True, False or a dict"]),
]


@pytest.mark.parametrize("kwargs, error, fragments", BAD,
                         ids=[f"{i}-{'-'.join(k)}" for i, (k, _, _) in enumerate(BAD)])
def test_a_bad_argument_is_refused_naming_it(kwargs, error, fragments):
    kwargs = {"start": torch.tensor([[1, 2]]), "max_length": 3, **kwargs}
    with pytest.raises(error) as e:
        al.generate(lm(), **kwargs)
    message = str(e.value)
    for fragment in fragments:
        assert fragment in message, (fragment, message)


def test_a_bad_net_is_an_argument_error():
    with pytest.raises(ARG) as e:
        al.generate("model", start=0, max_length=3)
    assert "'net'" in str(e.value) and "attnlab Network" in str(e.value)
    assert "'model' (str)" in str(e.value)


def test_argument_errors_carry_the_argument_and_value():
    with pytest.raises(ARG) as e:
        al.generate(lm(), start=0, stop=1.5)
    assert e.value.argument == "stop" and e.value.value == 1.5


def test_arguments_are_refused_before_the_network_is_touched(monkeypatch):
    net = lm()
    calls = []
    monkeypatch.setattr(net, "stream", lambda *a, **k: calls.append(a))
    for kwargs in ({"max_length": True}, {"stop": "x"}, {"start": [[1], [2.5, 3]]},
                   {"temperature": "x"}, {"k": True}):
        with pytest.raises(al.AttnlabError):
            al.generate(net, **{"start": 0, **kwargs})
    import attnlab.stream.decode as decode
    made = []
    real = decode.stream
    monkeypatch.setattr(decode, "stream", lambda *a, **k: made.append(real(*a, **k)) or made[-1])
    with pytest.raises(ARG, match="'stop'"):
        al.generate(net, start=0, stop=V)                 # the vocabulary: from the stream on
    assert calls == [] and made and made[-1].position == 0           # ... before any step


def test_a_huge_max_length_is_refused_by_learned_positions_before_any_step():
    net = al.Network([L.TokenInput(name="ids"), L.Embedding(V, D, name="wte")])
    net.add(L.PositionEmbedding(16, name="wpe"))
    net.connect("wte", "wpe")
    net.add(L.Addition(2, name="add"))
    net.connect("wte", "add/in1")
    net.connect("wpe", "add/in2")
    net.add([L.SelfAttention(2, D, attention_mask="causal", name="att"), L.Dense(V)])
    net.connect("add", "att")
    net.eval()
    seen = []
    hook = net.layer_modules["wte"].register_forward_hook(lambda *a: seen.append(1))
    try:
        with pytest.raises(DATA) as e:
            al.generate(net, start=torch.tensor([[1, 2, 3]]), stop=2, max_new_tokens=10**9)
    finally:
        hook.remove()
    assert "past the 16 positions" in str(e.value) and "max_new_tokens ≤ 14" in str(e.value)
    assert seen == []


# -- valid calls: every accepted form, the tokens of the definition ---------------------------

def test_every_form_of_a_valid_call_gives_the_greedy_tokens():
    net = lm()
    prompt = torch.tensor([[3, 1, 4], [1, 5, 9]])
    want = naive(net, prompt, 5)
    for kwargs in (dict(start=prompt, max_new_tokens=5),
                   dict(start=prompt.tolist(), max_new_tokens=5),            # a list of prompts
                   dict(start=tuple(map(tuple, prompt.tolist())), max_new_tokens=5),
                   dict(start=list(prompt), max_new_tokens=5),               # a list of tensors
                   dict(start=prompt.numpy(), max_new_tokens=np.int64(5)),   # numpy ints
                   dict(start=prompt, max_new_tokens=5, k=np.int32(3), temperature=1),
                   dict(start=prompt, max_new_tokens=5, output="head", feedback=None,
                        generator=torch.Generator(), device="cpu", precision="fp32")):
        got = al.generate(net, **kwargs)
        assert torch.equal(got.tokens, want), kwargs
        assert got.lengths.tolist() == [5, 5]


def test_top_k_sampling_with_a_seed_gives_the_tokens_of_its_definition():
    net = lm()
    prompt = torch.tensor([[3, 1, 4], [1, 5, 9]])

    def sample(generator, k=4, temperature=0.7):
        # transformers' draw: temperature, then all but the k highest at -inf, then one
        # multinomial draw over the whole vocabulary
        def pick(scores):
            scores = scores / temperature
            kth = scores.topk(k, dim=-1)[0][:, -1:]
            probs = torch.softmax(scores.masked_fill(scores < kth, -float("inf")), dim=-1)
            return torch.multinomial(probs, 1, generator=generator).squeeze(-1)
        return pick

    want = naive(net, prompt, 6, sample(torch.Generator().manual_seed(7)))
    got = al.generate(net, start=prompt, max_new_tokens=6, strategy="top-k", k=4, temperature=0.7,
                      generator=torch.Generator().manual_seed(7))
    assert torch.equal(got.tokens, want)


def test_one_stop_id_in_every_form_stops_alike():
    net = lm()
    prompt = torch.tensor([[3, 1, 4], [1, 5, 9]])
    free = naive(net, prompt, 10)
    stop = int(free[0, 3])
    ref = al.generate(net, start=prompt, stop=stop, max_new_tokens=10)
    first = int((free[0] == stop).nonzero()[0])
    assert int(ref.lengths[0]) == first + 1
    assert ref.sequences()[0] == free[0, :first + 1].tolist()
    for form in ([stop], (stop,), np.int64(stop), torch.tensor(stop), torch.tensor([stop]),
                 np.array([stop]), [torch.tensor(stop)]):
        got = al.generate(net, start=prompt, stop=form, max_new_tokens=10)
        assert torch.equal(got.tokens, ref.tokens) and torch.equal(got.lengths, ref.lengths), form


def test_a_list_of_stop_ids_stops_each_sequence_at_the_first_of_them():
    net = lm()
    prompt = torch.tensor([[3, 1, 4], [1, 5, 9], [2, 6, 5]])
    free = naive(net, prompt, 12)
    # the first id of rows 1 and 2 (two different ids): each row ends at whichever of them
    # comes first, or runs to max_length without one
    stops = [int(free[1, 0]), int(free[2, 0])]
    assert stops[0] != stops[1]
    got = al.generate(net, start=prompt, stop=stops, max_new_tokens=12)
    for row, seq, n in zip(free.tolist(), got.sequences(), got.lengths.tolist()):
        ends = [i for i, t in enumerate(row) if t in stops]
        want = row[:ends[0] + 1] if ends else row
        assert seq == want and n == len(want)
    # after its stop a row repeats the id it ended with
    ended = {}
    for r, n in enumerate(got.lengths.tolist()):
        assert got.tokens[r, n:].tolist() == [int(got.tokens[r, n - 1])] * (got.tokens.shape[1] - n)
        if n < 12:
            ended[r] = int(got.tokens[r, n - 1])
    assert sorted(ended.values()) == sorted(stops)          # rows ended at different ids
    # the same as one id when the list holds one
    one = al.generate(net, start=prompt, stop=stops[1], max_new_tokens=12)
    assert torch.equal(al.generate(net, start=prompt, stop=[stops[1]], max_new_tokens=12).tokens,
                       one.tokens)
