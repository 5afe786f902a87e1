"""Token ids streamed and generated: a TokenInput network steps on B×t int64 ids exactly as
its full forward pass, and `generate` feeds the chosen ids back through the key/value cache."""
import pytest
import torch

import attnlab as al
from attnlab import layers as L
from helpers import naive_greedy

V, D, P = 20, 8, 16


def gpt(vocab=V, d=D, positions=P):
    """A tiny GPT: token and learned position embeddings, causal self-attention, a head."""
    torch.manual_seed(0)
    net = al.Network([L.TokenInput(name="ids"), L.Embedding(vocab, d, name="wte")])
    net.add(L.PositionEmbedding(positions, name="wpe"))
    net.connect("wte", "wpe")
    net.add(L.Addition(2, name="add"))
    net.connect("wte", "add/in1")
    net.connect("wpe", "add/in2")
    net.add([L.SelfAttention(2, d, attention_mask="causal", name="att"),
             L.LayerNorm(name="ln"), L.Dense(vocab, name="head")])
    net.connect("add", "att")
    return net.eval()


def test_streaming_token_ids_equals_the_full_pass():
    net = gpt()
    ids = torch.randint(0, V, (2, 9))
    full = net(ids)
    s = net.stream()
    parts = [s.step(ids[:, :4]), s.step(ids[:, 4:5]), s.step(ids[:, 5:6].int()),
             s.step(ids[:, 6:].numpy())]
    torch.testing.assert_close(torch.cat(parts, 1), full, atol=1e-5, rtol=1e-4)


def test_a_stream_step_refuses_token_ids_of_the_wrong_shape():
    s = gpt().stream()
    with pytest.raises(al.DataError, match=r"unsqueeze\(0\)"):
        s.step(torch.tensor([1, 2]))
    s.step(torch.tensor([[1, 2]]))
    with pytest.raises(al.DataError, match="batch size 1"):
        s.step(torch.tensor([[1], [2]]))
    with pytest.raises(al.DataError, match="whole number"):
        s.step(torch.tensor([[1.5]]))


def test_generate_feeds_token_ids_back_without_a_feedback_argument():
    net = gpt()
    prompt = torch.randint(0, V, (3, 4))
    got = al.generate(net, start=prompt, max_new_tokens=6)
    assert got.tokens.dtype == torch.int64 and got.tokens.shape == (3, 6)
    assert torch.equal(got.tokens, naive_greedy(net, prompt, 6))
    # a single start id, one per sequence, and a B×t×1 prompt
    assert torch.equal(al.generate(net, start=5, max_new_tokens=3).tokens,
                       naive_greedy(net, torch.tensor([[5]]), 3))
    assert torch.equal(al.generate(net, start=torch.tensor([5, 6]), max_new_tokens=3).tokens,
                       naive_greedy(net, torch.tensor([[5], [6]]), 3))
    assert torch.equal(al.generate(net, start=prompt.unsqueeze(-1), max_new_tokens=6).tokens,
                       got.tokens)


def test_generate_uses_the_key_value_cache_not_the_prefix_again():
    net = gpt()
    seen = []
    emb = net.layer_modules["wte"]
    hook = emb.register_forward_hook(lambda m, args, out: seen.append(tuple(args[0].shape)))
    try:
        al.generate(net, start=torch.randint(0, V, (2, 5)), max_new_tokens=4)
    finally:
        hook.remove()
    # the prompt once, then one new id per step: the prefix is never fed again
    assert seen == [(2, 5), (2, 1), (2, 1), (2, 1)]


def test_generate_stops_at_the_stop_token_per_sequence():
    net = gpt()
    prompt = torch.randint(0, V, (2, 3))
    free = naive_greedy(net, prompt, 8)
    stop = int(free[0, 2])
    got = al.generate(net, start=prompt, max_new_tokens=8, stop=stop)
    first = int((free[0] == stop).nonzero()[0])
    assert int(got.lengths[0]) == first + 1
    assert got.sequences()[0] == free[0, :first + 1].tolist()


def test_a_prompt_longer_than_the_learned_positions_is_an_error_in_forward_and_generate():
    net = gpt(positions=8)
    long = torch.randint(0, V, (1, 9))
    with pytest.raises(al.DataError, match="layer 'wpe'.*max_length 8"):
        net(long)
    with pytest.raises(al.DataError) as e:
        al.generate(net, start=long, max_new_tokens=1)
    assert "9 tokens" in str(e.value) and "layer 'wpe'" in str(e.value)
    # a prompt that fits, with more tokens asked than positions remain: refused before a step
    with pytest.raises(al.DataError) as e:
        al.generate(net, start=long[:, :5], max_new_tokens=6)
    assert "max_new_tokens ≤ 4" in str(e.value) and "'wpe'" in str(e.value)
    assert al.generate(net, start=long[:, :5], max_new_tokens=4).tokens.shape == (1, 4)


def test_generate_in_bfloat16_keeps_large_ids_exact():
    net = gpt(vocab=60000).to(torch.bfloat16)
    prompt = torch.tensor([[50001, 59999, 3]])
    got = al.generate(net, start=prompt, max_new_tokens=3)
    want = naive_greedy(net, prompt, 3)
    assert torch.equal(got.tokens, want)


def test_generate_with_a_padded_token_encoder_in_static_inputs():
    # T5's way: the encoder's ids whole (a padded list), the decoder fed from a start id
    torch.manual_seed(0)
    net = al.Network([L.TokenInput(name="enc"), L.Embedding(V, D, name="shared"),
                      L.SelfAttention(2, D, name="enc_att")])
    net.add([L.TokenInput(name="dec"), L.Embedding(V, D, tied_to="shared", name="dec_emb"),
             L.SelfAttention(2, D, attention_mask="causal", name="dec_att"),
             L.MultiHeadAttention(2, D, name="cross")])
    net.connect("enc_att", "cross/key")
    net.connect("enc_att", "cross/value")
    net.add(L.Dense(V, bias=False, tied_to="shared", name="head"))
    net.connect("cross", "head")
    net.eval()
    enc = [torch.tensor([1, 2, 3, 4]), torch.tensor([5, 6])]
    got = al.generate(net, static_inputs={"enc": enc}, start=0, max_new_tokens=5)
    cur, want = torch.zeros(2, 1, dtype=torch.long), []
    for _ in range(5):
        nxt = net({"enc": enc, "dec": cur})[:, -1].argmax(-1)
        want.append(nxt)
        cur = torch.cat([cur, nxt[:, None]], 1)
    assert torch.equal(got.tokens, torch.stack(want, 1))
