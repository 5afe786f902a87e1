"""Prompts of different lengths in one batch: left padded, each row decodes what it decodes
alone (its padded keys masked out, its positions from its first real token), with learned
positions and with rotary positions that follow the mask; stop ids end rows one by one."""
import pytest
import torch

import attnlab as al
from attnlab import layers as L
from helpers import naive_greedy

V, D = 24, 8
PROMPTS = [[3, 1, 4, 1, 5], [9, 2], [6, 5, 3, 5]]


def gpt():
    """Learned positions (PositionEmbedding follows a padding mask in the forward pass)."""
    torch.manual_seed(0)
    net = al.Network([L.TokenInput(name="ids"), L.Embedding(V, D, name="wte"),
                      L.PositionEmbedding(32, name="wpe"), L.Addition(2, name="add"),
                      L.SelfAttention(2, D, attention_mask="causal", name="att"),
                      L.LayerNorm(name="ln"), L.Dense(V, name="head")])
    net.connect("wte", "add/in2")
    return net.eval()


def rotary():
    """Rotary positions that follow the mask, as every decoder from_pretrained builds."""
    torch.manual_seed(1)
    return al.Network([L.TokenInput(name="ids"), L.Embedding(V, D, name="wte"),
                       L.SelfAttention(2, D, attention_mask="causal", name="att",
                                       rotary={"positions": "mask"}),
                       L.Dense(V, name="head")]).eval()


@pytest.mark.parametrize("make", [gpt, rotary])
def test_each_padded_row_decodes_what_it_decodes_alone(make):
    net = make()
    alone = [naive_greedy(net, torch.tensor([p]), 6)[0].tolist() for p in PROMPTS]
    got = al.generate(net, start=PROMPTS, max_new_tokens=6)
    assert got.tokens.tolist() == alone
    # the same batch as ids with transformers' attention_mask, padded with any id
    t = max(map(len, PROMPTS))
    ids = torch.tensor([[7] * (t - len(p)) + p for p in PROMPTS])
    mask = torch.tensor([[0] * (t - len(p)) + [1] * len(p) for p in PROMPTS])
    assert al.generate(net, start=ids, attention_mask=mask, max_new_tokens=6).tokens.tolist() \
        == alone
    # a list of tensors, and sampling: each row its own draw of the batch's one multinomial
    tensors = [torch.tensor(p) for p in PROMPTS]
    a = al.generate(net, start=tensors, max_new_tokens=6, strategy="sample",
                    generator=torch.Generator().manual_seed(3))
    b = al.generate(net, start=ids, attention_mask=mask, max_new_tokens=6, strategy="sample",
                    generator=torch.Generator().manual_seed(3))
    assert torch.equal(a.tokens, b.tokens)


def test_padded_rows_stop_one_by_one():
    net = gpt()
    free = al.generate(net, start=PROMPTS, max_new_tokens=8).tokens
    stops = [int(free[1, 1]), int(free[2, 4])]
    got = al.generate(net, start=PROMPTS, max_new_tokens=8, stop=stops)
    for row, seq in zip(free.tolist(), got.sequences()):
        ends = [i for i, tok in enumerate(row) if tok in stops]
        assert seq == (row[:ends[0] + 1] if ends else row)


def test_beams_over_padded_prompts_equal_each_prompt_alone():
    net = rotary()
    alone = [al.generate(net, start=[p], num_beams=3, max_new_tokens=4).tokens[0].tolist()
             for p in PROMPTS]
    assert al.generate(net, start=PROMPTS, num_beams=3, max_new_tokens=4).tokens.tolist() \
        == alone


def test_a_layer_that_cannot_follow_padding_is_named():
    net = al.Network([L.TokenInput(name="ids"), L.Embedding(V, D, name="wte"),
                      L.LSTM(D, name="lstm"), L.Dense(V, name="head")]).eval()
    with pytest.raises(al.DataError, match="'lstm'.*cannot"):
        al.generate(net, start=PROMPTS, max_new_tokens=2)
