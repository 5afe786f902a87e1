"""Numeric options at their extremes: a window wider than any sequence is no window (however
large the int, in the forward pass, a stream, al.attention and a saved file); numbers beyond
what a float holds, and rotary bases whose angles would overflow, are refused when the layer
is made, never an overflow or NaN at the first forward."""
import pytest
import torch

import attnlab as al
from attnlab import layers as L
from attnlab.functional.bias import WIDEST_WINDOW, relative_position_bucket
from attnlab.functional import SelfAttentionModule, attention
from attnlab.functional.rotary import Rotary

HUGE = 10 ** 30          # beyond int64
BEYOND_FLOAT = 10 ** 400  # beyond any float


def _pair(window, mask="causal", alibi=False):
    """The same self-attention layer with `window` and with none (same weights)."""
    nets = []
    for w in (window, None):
        torch.manual_seed(0)
        nets.append(al.Network([L.SequenceInput(8, name="x"),
                                L.SelfAttention(2, 8, attention_mask=mask, window=w,
                                                alibi=alibi, name="sa")]).eval())
    return nets


@pytest.mark.parametrize("window", [HUGE, 2 ** 63, 2 ** 63 - 1, WIDEST_WINDOW])
@pytest.mark.parametrize("opts", [{}, {"alibi": True}, {"mask": None}])
def test_a_window_wider_than_any_sequence_is_no_window(window, opts):
    windowed, plain = _pair(window, **opts)
    assert windowed.layers["sa"].window is None
    x = torch.randn(2, 6, 8)
    with torch.no_grad():
        y = windowed(x)
        torch.testing.assert_close(y, plain(x))
    if opts.get("mask", "causal"):
        s = windowed.stream()
        steps = torch.cat([s.step(x[:, :2]), s.step(x[:, 2:3]), s.step(x[:, 3:6])], 1)
        torch.testing.assert_close(steps, y, atol=1e-5, rtol=1e-5)


def test_the_widest_window_is_documented_and_saves(tmp_path):
    windowed, _ = _pair(HUGE)
    windowed.save(tmp_path / "net.attnlab")
    loaded = al.load(tmp_path / "net.attnlab")
    x = torch.randn(1, 4, 8)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), windowed(x))
    assert L.SelfAttention(2, 8, window=WIDEST_WINDOW - 1).window == WIDEST_WINDOW - 1


def test_a_module_made_with_a_huge_window_has_none():
    """No int64 arithmetic ever sees it: the stream's steps (static shapes included) read
    the module's window."""
    m = SelfAttentionModule(8, 2, 8, attention_mask="causal", window=HUGE)
    assert m.window is None and not m.positional


@pytest.mark.parametrize("window", [HUGE, 2 ** 63, WIDEST_WINDOW])
def test_al_attention_takes_any_window(window):
    q, k, v = torch.randn(2, 3, 8), torch.randn(2, 5, 8), torch.randn(2, 5, 8)
    for mask, align in ((None, "top-left"), ("causal", "top-left"), ("causal", "bottom-right")):
        want = attention(q, k, v, 2, attention_mask=mask, causal_alignment=align)
        got = attention(q, k, v, 2, attention_mask=mask, causal_alignment=align, window=window)
        torch.testing.assert_close(got, want)
        got, w = attention(q, k, v, 2, attention_mask=mask, causal_alignment=align,
                           window=window, need_weights=True)
        torch.testing.assert_close(got, want)
        assert torch.isfinite(w).all()


@pytest.mark.parametrize("make, arg", [
    (lambda: L.SelfAttention(2, 8, scale=BEYOND_FLOAT), "scale"),
    (lambda: L.SelfAttention(2, 8, scale=-BEYOND_FLOAT), "scale"),
    (lambda: L.Attention(2, scale=BEYOND_FLOAT), "scale"),
    (lambda: L.MultiHeadAttention(2, 8, dropout=BEYOND_FLOAT), "dropout"),
    (lambda: L.SelfAttention(2, 8, rotary={"base": BEYOND_FLOAT}), "rotary['base']"),
    (lambda: L.SelfAttention(2, 8, rotary={"base": 1e400}), "rotary['base']"),
    (lambda: L.SelfAttention(2, 8, rotary={"base": 1e-300}), "rotary['base']"),
    (lambda: L.SelfAttention(2, 8, rotary={"fraction": BEYOND_FLOAT}), "rotary['fraction']"),
    (lambda: SelfAttentionModule(8, 2, 8, scale=BEYOND_FLOAT), "scale"),
    (lambda: attention(torch.randn(1, 2, 8), torch.randn(1, 2, 8), torch.randn(1, 2, 8), 2,
                       scale=BEYOND_FLOAT), "scale"),
])
def test_numbers_beyond_a_float_are_refused_when_made(make, arg):
    with pytest.raises(al.ArgumentError) as info:
        make()
    msg = str(info.value)
    assert f"argument '{arg}': expected" in msg, msg
    assert "received" in msg and "Use" in msg, msg
    if "10000000" in msg:
        assert "beyond the largest float" in msg, msg


def test_the_smallest_rotary_base_turns_every_int64_position_finitely():
    """base 2^-64: frequencies below 2^64, angles below float32's largest number (2^128) at
    any int64 position; a smaller base is refused, since its angles can overflow to NaN."""
    torch.manual_seed(0)
    net = al.Network([L.SequenceInput(8, name="x"),
                      L.SelfAttention(1, 64, attention_mask="causal", name="sa",
                                      rotary={"base": 2.0 ** -64})])
    rot = net.layer_modules["sa"].rotary
    pos = torch.tensor([0, 1, 2 ** 40, 2 ** 62])
    cos, sin = rot.angles(pos, torch.float32)
    assert torch.isfinite(cos).all() and torch.isfinite(sin).all()
    assert torch.isfinite(net(torch.randn(1, 5, 8))).all()
    cos, _ = Rotary(64, 1e-30).angles(pos, torch.float32)       # what the rule keeps out
    assert not torch.isfinite(cos).all()
    with pytest.raises(al.ArgumentError, match="at least 2\\^-64"):
        L.SelfAttention(2, 8, rotary={"base": 1e-30})


def test_relative_buckets_take_any_max_distance():
    rel = torch.arange(-6, 7).view(1, -1)
    huge = relative_position_bucket(rel, True, 32, BEYOND_FLOAT)
    torch.testing.assert_close(huge, relative_position_bucket(rel, True, 32, 10 ** 300))
    net = al.Network([L.SequenceInput(8, name="x"),
                      L.SelfAttention(2, 8, has_bias_input=True, scale=1.0, name="sa")])
    net.add(L.RelativePositionBias(2, max_distance=BEYOND_FLOAT, name="rpb"))
    net.connect("x", "rpb/query")
    net.connect("x", "rpb/key")
    net.connect("rpb", "sa/bias")
    assert torch.isfinite(net(torch.randn(1, 5, 8))).all()
