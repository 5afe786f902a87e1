"""A stream's step for the last new step only (`step(x, last=True)`, what generate's prefill
asks for), the cache's views held a chunk at a time, and dropout in eval mode skipped."""
import pytest
import torch
from torch import nn

import attnlab as al
from attnlab import layers as L
from attnlab.stream import generate, stream

C, V = 8, 13


def _lm(dropout=0.0):
    """ids → embedding → causal self-attention (+ residual) → norm → dropout → scores."""
    net = al.Network([L.TokenInput(name="ids"), L.Embedding(V, C, name="embed"),
                      L.SelfAttention(2, C, attention_mask="causal", name="attn"),
                      L.Addition(2, name="add"), L.LayerNorm(name="norm"),
                      L.Dropout(dropout, name="drop"), L.Dense(V, name="head")])
    net.connect("embed", "add/in2")
    torch.manual_seed(0)
    return net.initialize().eval()


def _rows_seen(module):
    """The time steps of every input `module` gets (a forward pre-hook: the stream then calls
    the module itself)."""
    seen = []
    module.register_forward_pre_hook(lambda m, args: seen.append(args[0].shape[1]))
    return seen


def test_last_step_equals_the_whole_steps_last_and_runs_the_head_on_it_alone():
    net = _lm()
    ids = torch.randint(0, V, (2, 7))
    seen = _rows_seen(net.layer_modules["head"])
    whole, last = stream(net), stream(net)
    with torch.no_grad():
        want = whole.step(ids)
        assert seen == [7]
        got = last.step(ids, last=True)
        assert seen == [7, 1]                          # the prompt's other rows never scored
        assert got.shape == (2, 1, V)
        assert torch.allclose(got, want[:, -1:], atol=1e-6)
        assert last.position == whole.position == 7
        # the caches hold every step: the next steps agree too
        nxt = torch.randint(0, V, (2, 3))
        assert torch.allclose(last.step(nxt, last=True), whole.step(nxt)[:, -1:], atol=1e-6)
        one = torch.randint(0, V, (2, 1))
        assert torch.allclose(last.step(one, last=True), whole.step(one), atol=1e-6)


def test_last_step_of_an_output_straight_from_attention_and_of_a_static_output():
    """Without a per-step tail the output itself is cut to its last step; an output computed
    from static inputs only comes back whole, as from `step(x)`."""
    net = al.Network([L.SequenceInput(C, name="x"),
                      L.SelfAttention(2, C, attention_mask="causal", name="attn")])
    net.add([L.FeatureInput(3, name="side"), L.Dense(4, name="side-out")])
    net.initialize().eval()
    x, side = torch.randn(1, 5, C), torch.randn(1, 3)
    with torch.no_grad():
        want = stream(net, {"side": side}).step(x)
        got = stream(net, {"side": side}).step(x, last=True)
    assert got["attn"].shape == (1, 1, C)
    assert torch.allclose(got["attn"], want["attn"][:, -1:], atol=1e-6)
    assert torch.equal(got["side-out"], want["side-out"])


def test_generate_prefills_a_prompt_without_scoring_its_other_positions():
    net = _lm()
    seen = _rows_seen(net.layer_modules["head"])
    prompt = torch.randint(0, V, (1, 9))
    tokens = generate(net, start=prompt, max_new_tokens=4).tokens
    assert seen == [1, 1, 1, 1]                       # never the prompt's 9 rows
    ids = prompt
    for _ in range(4):                                # greedy by full passes
        ids = torch.cat([ids, net(ids)[:, -1:].argmax(-1)], 1)
    assert torch.equal(tokens, ids[:, 9:])


def test_decoding_holds_the_cache_views_of_one_chunk_and_remakes_them_after_a_reset():
    """Views of the slots and prefixes are made 64 steps at a time and the ones behind
    dropped (a few MiB over a long decode otherwise); after a reset (same batch, same
    buffers) decoding from step 0 makes them again, and still equals the full pass."""
    net = _lm()
    s = stream(net, capacity=200)
    ids = torch.randint(0, V, (1, 150))
    with torch.no_grad():
        full = net(ids)
        for _ in range(2):
            got = torch.cat([s.step(ids[:, i:i + 1]) for i in range(150)], 1)
            cache = s.steppers["attn"].cache
            assert len(cache.k_prefix) <= 64 and cache.base == 128
            assert torch.allclose(got, full, atol=1e-5)
            s.reset()


def test_a_stream_in_eval_mode_skips_dropout_and_in_training_runs_it(monkeypatch):
    calls = []
    forward = nn.Dropout.forward

    def counted(self, x):
        calls.append(x.shape)
        return forward(self, x)
    monkeypatch.setattr(nn.Dropout, "forward", counted)
    net = _lm(dropout=0.5)
    s = stream(net)
    ids = torch.randint(0, V, (1, 4))
    with torch.no_grad():
        want = net(ids)
        calls.clear()
        assert torch.allclose(s.step(ids), want, atol=1e-6)
        assert calls == []                             # the identity in eval: not called
        net.train()                                    # read live: the next step drops
        torch.manual_seed(1)
        s.step(torch.randint(0, V, (1, 2)))
        assert calls == [torch.Size([1, 2, C])]


@pytest.mark.parametrize("last", [False, True])
def test_a_refused_step_with_last_leaves_the_stream_where_it_was(last):
    net = _lm()
    s = stream(net)
    with torch.no_grad():
        s.step(torch.randint(0, V, (1, 3)), last=last)
        with pytest.raises(al.DataError, match="batch size 1"):
            s.step(torch.randint(0, V, (2, 2)), last=last)
        assert s.position == 3


def test_a_step_drops_each_activation_after_its_last_reader():
    """As the forward pass does: a prefill holds a few activations at a time, not every
    layer's until the step returns (a Dense's output is gone once the ReLU after it ran)."""
    import weakref
    net = al.Network([L.TokenInput(name="ids"), L.Embedding(V, C, name="embed"),
                      L.SelfAttention(2, C, attention_mask="causal", name="attn"),
                      L.Dense(16, name="up"), L.ReLU(name="relu"), L.Dense(C, name="down"),
                      L.Dense(V, name="head")])
    torch.manual_seed(0)
    net.initialize().eval()
    refs, alive = [], []
    net.layer_modules["up"].register_forward_hook(
        lambda m, args, out: refs.append(weakref.ref(out)))
    net.layer_modules["head"].register_forward_pre_hook(
        lambda m, args: alive.append(refs[-1]() is not None))
    for last in (False, True):
        with torch.no_grad():
            got = stream(net).step(torch.randint(0, V, (1, 6)), last=last)
        assert got.shape == (1, 1 if last else 6, V)
    assert alive == [False, False]
