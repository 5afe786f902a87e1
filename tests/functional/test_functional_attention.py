"""attnlab.functional: attention math against an independent float64 reference (the semantics of docs/attention.md)."""
from __future__ import annotations

import pathlib
import re

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings, strategies as st

from attnlab.core.errors import ArgumentError, AttnlabError, FormatError, SizeError
from attnlab.functional import (AttentionPoolModule, MultiHeadAttentionModule,
                                SelfAttentionModule, attention, naive_attention)

ATOL = 1e-5
DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "attention.md"


def close(a, b, atol=ATOL):
    return torch.allclose(a.double(), b.double(), atol=atol, rtol=1e-5)


def make_case(seed, B, Tq, Tk, H, dk, dv, kv_heads=None, requires_grad=True):
    g = torch.Generator().manual_seed(seed)
    kvh = kv_heads or H
    q = torch.randn(B, Tq, H * dk, generator=g)
    k = torch.randn(B, Tk, kvh * dk, generator=g)
    v = torch.randn(B, Tk, kvh * dv, generator=g)
    upstream = torch.randn(B, Tq, H * dv, generator=g)
    return [t.requires_grad_(requires_grad) for t in (q, k, v)], upstream, g


def run(fn, q, k, v, upstream, **kw):
    """Output, weights (or None) and the gradients of q, k, v for loss = <out, upstream>."""
    r = fn(q, k, v, **kw)
    out, w = (r if isinstance(r, tuple) else (r, None))
    grads = torch.autograd.grad((out * upstream.to(out.dtype)).sum(), (q, k, v),
                                allow_unused=True, retain_graph=w is not None)
    grads = [torch.zeros_like(t) if gr is None else gr for t, gr in zip((q, k, v), grads)]
    return out, w, grads


def reference(q, k, v, upstream, **kw):
    """naive_attention in float64 on the same float32 values."""
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    return run(naive_attention, q64, k64, v64, upstream, need_weights=True, **kw)


masks = st.sampled_from(["none", "causal", "2d", "3d"])


# ------------------------------------------------------------------------------------------
# property tests against the reference
# ------------------------------------------------------------------------------------------

@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), B=st.integers(1, 3), Tq=st.integers(1, 6),
       Tk=st.integers(1, 6), H=st.integers(1, 3), dk=st.integers(1, 4), dv=st.integers(1, 4),
       am_kind=masks, padding=st.booleans(),
       alignment=st.sampled_from(["top-left", "bottom-right"]),
       density=st.sampled_from([0.3, 0.7, 1.0]), scale=st.sampled_from(["auto", 0.3]))
def test_matches_reference_values_weights_and_gradients(seed, B, Tq, Tk, H, dk, dv, am_kind,
                                                        padding, alignment, density, scale):
    (q, k, v), up, g = make_case(seed, B, Tq, Tk, H, dk, dv)
    kpm = (torch.rand(B, Tk, generator=g) < density) if padding else None
    am = {"none": None, "causal": "causal",
          "2d": torch.rand(Tq, Tk, generator=g) < density,
          "3d": torch.rand(B, Tq, Tk, generator=g) < density}[am_kind]
    kw = dict(num_heads=H, scale=scale, key_padding_mask=kpm, attention_mask=am,
              causal_alignment=alignment)
    ref_out, ref_w, ref_grads = reference(q, k, v, up, **kw)
    fused_out, _, fused_grads = run(attention, q, k, v, up, **kw)
    out, w, grads = run(attention, q, k, v, up, need_weights=True, **kw)

    assert fused_out.shape == out.shape == (B, Tq, H * dv) and w.shape == (B, H, Tq, Tk)
    assert close(fused_out, ref_out) and close(out, ref_out) and close(w, ref_w)
    assert close(fused_out, out, atol=1e-6)
    for a, b, r in zip(fused_grads, grads, ref_grads):
        assert torch.isfinite(a).all() and torch.isfinite(b).all()
        assert close(a, r) and close(b, r)
    # gradients through the returned weights as well
    up_w = torch.randn(w.shape, generator=g)
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    _, w64 = naive_attention(q64, k64, v64, need_weights=True, **kw)
    ref_wgrads = torch.autograd.grad((w64 * up_w.double()).sum(), (q64, k64))
    wgrads = torch.autograd.grad((w * up_w).sum(), (q, k))  # weights do not depend on v
    assert all(close(a, r) for a, r in zip(wgrads, ref_wgrads))
    # rows with no visible key: exactly zero output and weights, on both paths
    empty = ref_w.sum(-1) == 0  # B×H×Tq (same for every head)
    rows = empty[:, 0]
    assert (fused_out[rows] == 0).all() and (out[rows] == 0).all() and (w[empty] == 0).all()
    # the remaining weights are a distribution over the keys
    assert torch.allclose(w.sum(-1)[~empty], torch.ones(()), atol=1e-6)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), B=st.integers(1, 2), Tq=st.integers(1, 5),
       Tk=st.integers(1, 5), kv_heads=st.sampled_from([1, 2]), group=st.sampled_from([1, 2, 3]),
       dk=st.integers(1, 3), dv=st.integers(1, 3), padding=st.booleans(), causal=st.booleans())
def test_grouped_query_attention_equals_repeated_kv_heads(seed, B, Tq, Tk, kv_heads, group,
                                                          dk, dv, padding, causal):
    H = kv_heads * group
    (q, k, v), up, g = make_case(seed, B, Tq, Tk, H, dk, dv, kv_heads=kv_heads)
    kpm = (torch.rand(B, Tk, generator=g) < 0.7) if padding else None
    am = "causal" if causal else None

    def repeat(t, d):  # kv head j serves query heads j*group … j*group+group-1
        return t.reshape(B, Tk, kv_heads, 1, d).expand(-1, -1, -1, group, -1).reshape(B, Tk, -1)

    kw = dict(num_heads=H, key_padding_mask=kpm, attention_mask=am)
    ref_out, ref_w, ref_grads = reference(q, k, v, up, num_kv_heads=kv_heads, **kw)
    for need_weights in (False, True):
        out, w, grads = run(attention, q, k, v, up, num_kv_heads=kv_heads,
                            need_weights=need_weights, **kw)
        rep = attention(q, repeat(k, dk), repeat(v, dv), need_weights=need_weights, **kw)
        rep_out = rep[0] if need_weights else rep
        assert close(out, rep_out) and close(out, ref_out)
        if need_weights:
            assert close(w, rep[1]) and close(w, ref_w)
        for a, r in zip(grads, ref_grads):
            assert close(a, r)


def test_reference_agrees_with_torch_sdpa_math():
    # guards the reference itself against a shared misunderstanding
    (q, k, v), _, g = make_case(1, 2, 4, 6, 2, 3, 3, requires_grad=False)
    m = torch.rand(4, 6, generator=g) < 0.8
    m[:, 0] = True
    ours = naive_attention(q, k, v, 2, attention_mask=m)
    qh, kh, vh = (t.view(2, -1, 2, 3).transpose(1, 2) for t in (q, k, v))
    from torch.nn.attention import SDPBackend, sdpa_kernel
    with sdpa_kernel(SDPBackend.MATH):
        theirs = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=m)
    assert close(ours, theirs.transpose(1, 2).reshape(2, 4, 6))


# ------------------------------------------------------------------------------------------
# masks, fully masked rows, dropout, the fast path
# ------------------------------------------------------------------------------------------

class SpySDPA:
    def __init__(self, monkeypatch):
        self.calls = []
        real = F.scaled_dot_product_attention

        def spy(*args, **kwargs):
            self.calls.append(kwargs)
            return real(*args, **kwargs)
        monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", spy)


@pytest.mark.filterwarnings("ignore:Anomaly Detection has been enabled")
def test_fully_masked_rows_are_zero_with_finite_gradients_everywhere(monkeypatch):
    spy = SpySDPA(monkeypatch)
    (q, k, v), up, _ = make_case(3, 2, 4, 5, 2, 3, 2)
    kpm = torch.ones(2, 5, dtype=torch.bool)
    kpm[0] = False                       # every key of observation 0 is padding
    am = torch.ones(4, 5, dtype=torch.bool)
    am[2] = False                        # query 2 sees nothing in any observation
    for need_weights in (False, True):
        # anomaly mode fails on any NaN produced in the backward pass, even if masked later
        with torch.autograd.detect_anomaly():
            out, w, grads = run(attention, q, k, v, up, num_heads=2, key_padding_mask=kpm,
                                attention_mask=am, need_weights=need_weights)
            if need_weights:
                torch.autograd.grad(w.sum(), (q, k))
        assert (out[0] == 0).all() and (out[1, 2] == 0).all() and out[1, 0].abs().sum() > 0
        assert all(torch.isfinite(gr).all() for gr in grads)
        assert torch.isfinite(out).all()
        if need_weights:
            assert (w[0] == 0).all() and (w[1, :, 2] == 0).all()
    # bottom-right causal with more queries than keys: the first Tq-Tk queries see nothing
    (q, k, v), up, _ = make_case(4, 1, 5, 2, 1, 2, 2)
    out, _, grads = run(attention, q, k, v, up, num_heads=1, attention_mask="causal",
                        causal_alignment="bottom-right")
    assert (out[0, :3] == 0).all() and (out[0, 3:] != 0).any()
    assert all(torch.isfinite(gr).all() for gr in grads)
    # kernels never see a row without keys (some backends return NaN for one)
    assert len(spy.calls) == 2
    assert all(c["attn_mask"].any(-1).all() for c in spy.calls)


def test_causal_alignments():
    (q, k, v), _, _ = make_case(5, 1, 2, 4, 1, 2, 2, requires_grad=False)
    _, tl = attention(q, k, v, 1, attention_mask="causal", need_weights=True)
    _, br = attention(q, k, v, 1, attention_mask="causal", causal_alignment="bottom-right",
                      need_weights=True)
    assert ((tl[0, 0] > 0) == torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0]]).bool()).all()
    assert ((br[0, 0] > 0) == torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]]).bool()).all()
    # with Tq == Tk the two alignments agree
    (q, k, v), _, _ = make_case(6, 1, 3, 3, 1, 2, 2, requires_grad=False)
    assert torch.equal(attention(q, k, v, 1, attention_mask="causal"),
                       attention(q, k, v, 1, attention_mask="causal",
                                 causal_alignment="bottom-right"))


def test_fast_path_uses_sdpa_and_is_causal(monkeypatch):
    spy = SpySDPA(monkeypatch)
    (q, k, v), _, _ = make_case(7, 2, 3, 5, 2, 2, 2, requires_grad=False)
    attention(q, k, v, 2, attention_mask="causal")                    # top-left, Tq != Tk
    attention(q[:, :3], k[:, :3], v[:, :3], 2, attention_mask="causal",
              causal_alignment="bottom-right")                        # Tq == Tk
    assert [c["is_causal"] for c in spy.calls] == [True, True]
    assert all(c["attn_mask"] is None for c in spy.calls)
    spy.calls.clear()
    attention(q, k, v, 2, attention_mask="causal", causal_alignment="bottom-right")
    attention(q, k, v, 2, attention_mask="causal", key_padding_mask=torch.ones(2, 5).bool())
    assert [c["is_causal"] for c in spy.calls] == [False, False]
    assert all(c["attn_mask"] is not None for c in spy.calls)
    spy.calls.clear()
    attention(q, k, v, 2, need_weights=True)                          # weights: explicit path
    assert spy.calls == []


def test_no_host_synchronisation_on_any_path():
    # meta tensors carry no data: any .item() or `if tensor` would raise
    B, Tq, Tk = 2, 3, 4
    q = torch.empty(B, Tq, 8, device="meta")
    k = torch.empty(B, Tk, 8, device="meta")
    v = torch.empty(B, Tk, 6, device="meta")
    kpm = torch.empty(B, Tk, dtype=torch.bool, device="meta")
    for am in (None, "causal", torch.empty(Tq, Tk, dtype=torch.bool, device="meta"),
               torch.empty(B, Tq, Tk, dtype=torch.bool, device="meta")):
        for kp in (None, kpm):
            for alignment in ("top-left", "bottom-right"):
                kw = dict(key_padding_mask=kp, attention_mask=am, causal_alignment=alignment)
                assert attention(q, k, v, 2, **kw).shape == (B, Tq, 6)
                out, w = attention(q, k, v, 2, need_weights=True, **kw)
                assert out.shape == (B, Tq, 6) and w.shape == (B, 2, Tq, Tk)


def test_dropout_zero_train_equals_eval_equals_no_grad():
    (q, k, v), _, _ = make_case(8, 2, 4, 4, 2, 3, 3, requires_grad=False)
    kw = dict(key_padding_mask=torch.rand(2, 4) < 0.8, attention_mask="causal")
    ev = attention(q, k, v, 2, **kw)
    tr = attention(q, k, v, 2, dropout=0.0, training=True, **kw)
    with torch.no_grad():
        ng = attention(q, k, v, 2, dropout=0.0, training=True, **kw)
    assert torch.equal(ev, tr) and torch.equal(ev, ng)
    # dropout > 0 acts in training only, on both paths
    assert torch.equal(attention(q, k, v, 2, dropout=0.5, **kw), ev)
    torch.manual_seed(0)
    assert not torch.allclose(attention(q, k, v, 2, dropout=0.5, training=True, **kw), ev)
    out, w = attention(q, k, v, 2, dropout=0.5, training=True, need_weights=True, **kw)
    _, w_eval = attention(q, k, v, 2, need_weights=True, **kw)
    assert torch.equal(w, w_eval) and not torch.allclose(out, ev)  # weights are pre-dropout
    mod = SelfAttentionModule(6, 2, 6, dropout=0.0)
    x = torch.randn(2, 4, 6)
    train_out = mod.train()(x)
    assert torch.equal(train_out, mod.eval()(x))
    with torch.no_grad():
        assert torch.equal(train_out, mod(x))


def test_zero_keys_give_zero_output():
    q = torch.randn(2, 3, 4, requires_grad=True)
    out = attention(q, torch.randn(2, 0, 4), torch.randn(2, 0, 6), 2)
    assert out.shape == (2, 3, 6) and (out == 0).all()
    out.sum().backward()
    assert torch.isfinite(q.grad).all()


# ------------------------------------------------------------------------------------------
# modules vs torch.nn.MultiheadAttention
# ------------------------------------------------------------------------------------------

def copy_from_torch(ours, mha: torch.nn.MultiheadAttention):
    E = mha.embed_dim
    with torch.no_grad():
        if mha._qkv_same_embed_dim:
            wq, wk, wv = mha.in_proj_weight.split(E)
        else:
            wq, wk, wv = mha.q_proj_weight, mha.k_proj_weight, mha.v_proj_weight
        bq, bk, bv = mha.in_proj_bias.split(E)
        for lin, w, b in ((ours.query, wq, bq), (ours.key, wk, bk), (ours.value, wv, bv),
                          (ours.output, mha.out_proj.weight, mha.out_proj.bias)):
            lin.weight.copy_(w)
            lin.bias.copy_(b)


def torch_masks(kpm, causal, Tq, Tk):
    """Our True = attend masks in torch.nn.MultiheadAttention's True = ignore convention."""
    attn_mask = None
    if causal:
        attn_mask = ~torch.ones(Tq, Tk, dtype=torch.bool).tril()
    return dict(key_padding_mask=None if kpm is None else ~kpm, attn_mask=attn_mask)


@pytest.mark.parametrize("kdim,vdim", [(12, 12), (5, 7)])
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("training", [False, True])
def test_multi_head_module_equals_torch(kdim, vdim, masked, training):
    torch.manual_seed(0)
    E, H, B, Tq, Tk = 12, 3, 2, 4, 6
    mha = torch.nn.MultiheadAttention(E, H, batch_first=True, kdim=kdim, vdim=vdim)
    torch.nn.init.normal_(mha.in_proj_bias)
    ours = MultiHeadAttentionModule(E, kdim, vdim, H, E)
    copy_from_torch(ours, mha)
    mha.train(training)
    ours.train(training)
    xq = torch.randn(B, Tq, E, requires_grad=True)
    xk = torch.randn(B, Tk, kdim, requires_grad=True)
    xv = torch.randn(B, Tk, vdim, requires_grad=True)
    kpm = torch.rand(B, Tk) < 0.6 if masked else None
    if masked:
        kpm[:, 0] = True  # torch gives NaN for a query that sees no key
    expected, w_expected = mha(xq, xk, xv, need_weights=True, average_attn_weights=False,
                               **torch_masks(kpm, masked, Tq, Tk))
    got = ours(xq, xk, xv, key_padding_mask=kpm, attention_mask="causal" if masked else None)
    got_w, w = ours(xq, xk, xv, key_padding_mask=kpm,
                    attention_mask="causal" if masked else None, need_weights=True)
    assert close(got, expected) and close(got_w, expected) and close(w, w_expected)
    g1 = torch.autograd.grad(expected.square().sum(), (xq, xk, xv))
    g2 = torch.autograd.grad(got.square().sum(), (xq, xk, xv))
    assert all(close(a, b, atol=1e-4) for a, b in zip(g1, g2))


@pytest.mark.parametrize("masked", [False, True])
def test_self_attention_module_equals_torch(masked):
    torch.manual_seed(1)
    E, H, B, T = 16, 4, 3, 5
    mha = torch.nn.MultiheadAttention(E, H, batch_first=True)
    torch.nn.init.normal_(mha.in_proj_bias)
    ours = SelfAttentionModule(E, H, E)
    copy_from_torch(ours, mha)
    x = torch.randn(B, T, E, requires_grad=True)
    kpm = torch.rand(B, T) < 0.6 if masked else None
    if masked:
        kpm[:, 0] = True
    expected, _ = mha(x, x, x, need_weights=False, **torch_masks(kpm, masked, T, T))
    got = ours(x, key_padding_mask=kpm, attention_mask="causal" if masked else None)
    assert close(got, expected)
    g1, = torch.autograd.grad(expected.square().sum(), x)
    g2, = torch.autograd.grad(got.square().sum(), x)
    assert close(g1, g2, atol=1e-4)
    # the fused input projection equals the separate one, weights too
    sep, w_sep = MultiHeadAttentionModule.forward(ours, x, x, x, key_padding_mask=kpm,
                                                  need_weights=True)
    fus, w_fus = ours(x, key_padding_mask=kpm, need_weights=True)
    assert close(sep, fus) and close(w_sep, w_fus)


@pytest.mark.parametrize("kw", [dict(num_kv_heads=2), dict(bias=False),
                                dict(value_channels=8, output_channels=5)])
def test_self_attention_module_fused_projection_matches_separate(kw):
    torch.manual_seed(2)
    mod = SelfAttentionModule(6, 4, 12, **kw)
    x = torch.randn(2, 5, 6, requires_grad=True)
    a = mod(x, attention_mask="causal")
    b = MultiHeadAttentionModule.forward(mod, x, x, x, attention_mask="causal")
    assert close(a, b)
    ga = torch.autograd.grad(a.sum(), [x, *mod.parameters()], allow_unused=False)
    gb = torch.autograd.grad(b.sum(), [x, *mod.parameters()])
    assert all(close(u, w) for u, w in zip(ga, gb))


def test_module_learnables_are_four_linears():
    mod = MultiHeadAttentionModule(10, 7, 9, 2, 8, value_channels=6, output_channels=3,
                                   num_kv_heads=1)
    shapes = {n: tuple(p.shape) for n, p in mod.named_parameters()}
    assert shapes == {"query.weight": (8, 10), "query.bias": (8,),
                      "key.weight": (4, 7), "key.bias": (4,),        # 1 kv head × dk 4
                      "value.weight": (3, 9), "value.bias": (3,),    # 1 kv head × dv 3
                      "output.weight": (3, 6), "output.bias": (3,)}
    assert mod(torch.randn(2, 4, 10), torch.randn(2, 5, 7), torch.randn(2, 5, 9)).shape \
        == (2, 4, 3)
    sa = SelfAttentionModule(10, 2, 8)
    assert [n for n, _ in sa.named_parameters()] == [
        "query.weight", "query.bias", "key.weight", "key.bias", "value.weight",
        "value.bias", "output.weight", "output.bias"]
    assert sa(torch.randn(2, 4, 10)).shape == (2, 4, 10)


def test_attention_pool_module():
    torch.manual_seed(3)
    pool = AttentionPoolModule(8, 2)
    x = torch.randn(3, 5, 8)
    kpm = torch.ones(3, 5, dtype=torch.bool)
    kpm[1, 3:] = False
    kpm[2] = False
    y, w = pool(x, key_padding_mask=kpm, need_weights=True)
    assert y.shape == (3, 8) and w.shape == (3, 2, 1, 5)
    # a zero query starts as masked mean pooling of the values
    mean = torch.stack([pool.value(x[0]).mean(0), pool.value(x[1, :3]).mean(0)])
    assert close(y[:2], pool.output(mean))
    assert close(y[2], pool.output.bias)          # nothing to pool: 0 before `output`
    x2 = x.clone()
    x2[1, 3:] = 100.0                             # padding does not leak in
    assert close(pool(x2, key_padding_mask=kpm)[1], y[1])
    assert sorted(n for n, _ in pool.named_parameters()) == [
        "key.bias", "key.weight", "output.bias", "output.weight", "query_vector",
        "value.bias", "value.weight"]
    assert pool.query_vector.shape == (1, 1, 8)


# ------------------------------------------------------------------------------------------
# errors
# ------------------------------------------------------------------------------------------

def err(exc, match, *args, **kw):
    with pytest.raises(exc) as info:
        attention(*args, **kw)
    assert isinstance(info.value, AttnlabError)
    if exc is ArgumentError:
        assert isinstance(info.value, ValueError)  # a bad argument value is also a ValueError
    msg = str(info.value)
    assert msg.startswith("attention: ")
    for part in match:
        assert part in msg, msg
    return msg


def test_error_messages():
    q, k, v = torch.randn(2, 3, 256), torch.randn(2, 4, 256), torch.randn(2, 4, 256)
    msg = err(SizeError, ["num_heads 3 does not divide key channels 256 (Ck)",
                          "Use a num_heads that divides 256, e.g. 4 or 8."], q, k, v, 3)
    assert msg == ("attention: num_heads 3 does not divide key channels 256 (Ck). "
                   "Use a num_heads that divides 256, e.g. 4 or 8.")
    err(FormatError, ["query must be B×T×C", "received 2 dimensions of size 3×256",
                      "unsqueeze(0)"], q[0], k, v, 4)
    err(SizeError, ["query has 256 channels but key has 128 (Ck)"], q, k[..., :128], v, 4)
    err(SizeError, ["key has 4 time steps (Tk) but value has 2"], q, k, v[:, :2], 4)
    err(SizeError, ["batch size", "2, 1 and 2"], q, k[:1], v, 4)
    err(SizeError, ["does not divide value channels 250 (Cv)"], q, k, v[..., :250], 4)
    err(SizeError, ["key_padding_mask must be B×Tk = 2×4, received 2×3"], q, k, v, 4,
        key_padding_mask=torch.ones(2, 3, dtype=torch.bool))
    err(FormatError, ["key_padding_mask must be boolean with True = attend",
                      "torch.float32"], q, k, v, 4, key_padding_mask=torch.ones(2, 4))
    err(SizeError, ["attention_mask must be Tq×Tk = 3×4 or B×Tq×Tk = 2×3×4, received 4×3"],
        q, k, v, 4, attention_mask=torch.ones(4, 3, dtype=torch.bool))
    err(ArgumentError, ["argument 'attention_mask'", "'causal'", "received 'casual'"], q, k, v, 4,
        attention_mask="casual")
    err(ArgumentError, ["argument 'causal_alignment'", "'top-left' or 'bottom-right'",
                       "received 'bottom'"], q, k, v, 4, attention_mask="causal",
        causal_alignment="bottom")
    err(ArgumentError, ["argument 'dropout'", "a probability in [0, 1), received 1.5"], q, k, v, 4,
        dropout=1.5)
    err(ArgumentError, ["argument 'scale'", "expected \"auto\""], q, k, v, 4, scale="sqrt")
    err(SizeError, ["num_kv_heads 3 does not divide num_heads 4"], q, k, v, 4, num_kv_heads=3)
    err(SizeError, ["with num_kv_heads 2 the key must have 2×64 = 128 channels"], q, k, v, 4,
        num_kv_heads=2)
    err(FormatError, ["one dtype"], q, k.double(), v, 4)
    with pytest.raises(SizeError, match="num_heads 3 does not divide key channels 64"):
        SelfAttentionModule(16, 3, 64)
    with pytest.raises(SizeError, match="input has 8 channels, expected 16"):
        SelfAttentionModule(16, 4, 64)(torch.randn(2, 3, 8))


# ------------------------------------------------------------------------------------------
# the documentation's worked example runs and holds
# ------------------------------------------------------------------------------------------

def test_docs_snippet_runs():
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert blocks, "docs/attention.md has no ```python block"
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), {"__name__": "__docs__"})


def test_a_float_additive_mask_gets_the_additive_conversion():
    import attnlab as al
    x = torch.randn(2, 4, 8)
    additive = torch.zeros(2, 4)
    additive[0, 2:] = float("-inf")
    with pytest.raises(al.FormatError) as e:
        al.attention(x, x, x, 2, key_padding_mask=additive)
    assert "torch.float32" in str(e.value) and "mask == 0" in str(e.value)
    with pytest.raises(al.FormatError) as e:
        al.attention(x, x, x, 2, key_padding_mask=torch.ones(2, 4, dtype=torch.int64))
    assert "torch.int64" in str(e.value) and "~mask" in str(e.value)
    out = al.attention(x, x, x, 2, key_padding_mask=additive == 0)
    assert torch.isfinite(out).all()
