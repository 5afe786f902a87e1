"""The attention layers inside networks: equal to torch.nn.MultiheadAttention with copied
weights, masks from padding and ports, fused = weights path, no NaN for fully masked rows."""
import pytest
import torch
from torch import nn

import attnlab as al
from attnlab import layers as L


def copy_to_torch(learnables, prefix, mha: nn.MultiheadAttention):
    """attnlab's four Linear maps → torch's packed in_proj (or q/k/v_proj when kdim ≠ embed)."""
    w = {k.split("/", 1)[1]: v for k, v in learnables.items() if k.startswith(prefix + "/")}
    with torch.no_grad():
        if mha._qkv_same_embed_dim:
            mha.in_proj_weight.copy_(torch.cat([w["query.weight"], w["key.weight"], w["value.weight"]]))
        else:
            mha.q_proj_weight.copy_(w["query.weight"])
            mha.k_proj_weight.copy_(w["key.weight"])
            mha.v_proj_weight.copy_(w["value.weight"])
        mha.in_proj_bias.copy_(torch.cat([w["query.bias"], w["key.bias"], w["value.bias"]]))
        mha.out_proj.weight.copy_(w["output.weight"])
        mha.out_proj.bias.copy_(w["output.bias"])


LENGTHS = [6, 2, 4]


@pytest.mark.parametrize("causal", [False, True])
def test_self_attention_equals_torch_multihead_attention(causal):
    e, h = 16, 4
    net = al.Network([L.SequenceInput(e, name="x"),
                      L.SelfAttention(h, e, attention_mask="causal" if causal else None, name="sa")])
    net.initialize().eval()
    ref = nn.MultiheadAttention(e, h, batch_first=True).eval()
    copy_to_torch(net.learnables, "sa", ref)
    xs = [torch.randn(n, e) for n in LENGTHS]
    p = al.pad_sequences(xs)
    ours = net(xs)
    t = p.data.shape[1]
    theirs, _ = ref(p.data, p.data, p.data, key_padding_mask=~p.mask,       # torch: True = ignore
                    attn_mask=torch.ones(t, t, dtype=torch.bool).triu(1) if causal else None)
    torch.testing.assert_close(ours[p.mask], theirs[p.mask], atol=1e-5, rtol=1e-5)


def test_multihead_attention_with_other_key_value_width_and_length():
    eq, ek, ev, h = 16, 10, 6, 4
    net = al.Network([L.SequenceInput(eq, name="q"), L.MultiHeadAttention(h, eq, name="mha")])
    net.add(L.SequenceInput(ek, name="k")).add(L.SequenceInput(ev, name="v"))
    net.connect("k", "mha/key").connect("v", "mha/value")
    net.initialize().eval()
    ref = nn.MultiheadAttention(eq, h, batch_first=True, kdim=ek, vdim=ev).eval()
    copy_to_torch(net.learnables, "mha", ref)
    q = torch.randn(3, 5, eq)
    ks = [torch.randn(n, ek) for n in (7, 3, 1)]
    vs = [torch.randn(len(k), ev) for k in ks]
    ours = net(q, ks, vs)
    pk, pv = al.pad_sequences(ks), al.pad_sequences(vs)
    theirs, _ = ref(q, pk.data, pv.data, key_padding_mask=~pk.mask)
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)


def scores_net(causal=None, dropout=0.0):
    net = al.Network([L.SequenceInput(8, name="x"),
                      L.SelfAttention(2, 8, attention_mask=causal, dropout=dropout,
                                      has_scores_output=True, has_padding_mask_input=True, name="sa")])
    net.add(L.SequenceInput(1, name="m")).connect("m", "sa/mask")
    return net


def test_scores_output_never_changes_the_main_output():
    net = scores_net(causal="causal")
    plain = al.Network([L.SequenceInput(8, name="x"), L.SelfAttention(2, 8, attention_mask="causal",
                                                                        has_padding_mask_input=True,
                                                                        name="sa")])
    plain.add(L.SequenceInput(1, name="m")).connect("m", "sa/mask")
    plain.initialize()
    net.initialize()
    net.load_state_dict(plain.state_dict())
    x, m = torch.randn(2, 5, 8), (torch.rand(2, 5, 1) > 0.3).float()
    out = net({"x": x, "m": m})
    torch.testing.assert_close(out["sa/out"], plain({"x": x, "m": m}), atol=1e-6, rtol=1e-6)
    assert out["sa/scores"].shape == (2, 2, 5, 5)
    visible = torch.ones(5, 5).tril().bool() & m[:, None, :, 0].bool()   # B×Tq×Tk
    rows = out["sa/scores"].sum(-1)                            # B×H×Tq: 1 where a key is visible
    seen = visible.any(-1).unsqueeze(1).expand(2, 2, 5)
    torch.testing.assert_close(rows[seen], torch.ones_like(rows[seen]))
    assert torch.equal(rows[~seen], torch.zeros_like(rows[~seen]))
    masked = out["sa/scores"].masked_select(~m[:, None, None, :, 0].bool().expand(2, 2, 5, 5))
    assert torch.equal(masked, torch.zeros_like(masked))       # masked keys get weight 0


def test_fully_masked_rows_give_zeros_and_finite_gradients():
    net = scores_net()
    net.initialize()
    x = torch.randn(2, 4, 8, requires_grad=True)
    m = torch.ones(2, 4, 1)
    m[1] = 0                                               # every key of sequence 1 masked
    out = net({"x": x, "m": m})
    y, s = out["sa/out"], out["sa/scores"]
    assert torch.isfinite(y).all() and torch.isfinite(s).all()
    assert torch.equal(s[1], torch.zeros_like(s[1]))
    # attention output is 0 before the output projection: only its bias remains
    bias = net.learnables["sa/output.bias"]
    torch.testing.assert_close(y[1], bias.expand(4, -1))
    (y.sum() + s.sum()).backward()
    assert all(torch.isfinite(p.grad).all() for p in net.parameters())
    assert torch.isfinite(x.grad).all()


def test_train_without_dropout_equals_eval_equals_no_grad():
    net = scores_net(dropout=0.0).initialize()
    x, m = torch.randn(2, 5, 8), torch.ones(2, 5, 1)
    a = net.train()({"x": x, "m": m})["sa/out"]
    b = net.eval()({"x": x, "m": m})["sa/out"]
    with torch.no_grad():
        c = net({"x": x, "m": m})["sa/out"]
    torch.testing.assert_close(a, b)
    torch.testing.assert_close(b, c)


def test_dropout_only_in_training():
    net = al.Network([L.SequenceInput(8), L.SelfAttention(2, 8, dropout=0.5, name="sa")]).initialize()
    x = torch.randn(2, 6, 8)
    net.eval()
    assert torch.equal(net(x), net(x))
    net.train()
    assert not torch.equal(net(x), net(x))


def test_attention_pool_ignores_padding_and_reduces_time():
    net = al.Network([L.SequenceInput(4), L.AttentionPool1d(2, name="pool")]).initialize().eval()
    with torch.no_grad():
        net.learnables["pool/query_vector"].normal_()
    xs = [torch.randn(n, 4) for n in LENGTHS]
    batched = net(xs)
    assert batched.shape == (3, 4)
    for i, x in enumerate(xs):
        torch.testing.assert_close(batched[i], net(x.unsqueeze(0))[0], atol=1e-5, rtol=1e-5)


def test_image_to_sequence_is_row_major_patches():
    net = al.Network([L.ImageInput((2, 4, 6)), L.ImageToSequence(2, name="seq")])
    x = torch.arange(2 * 4 * 6, dtype=torch.float32).reshape(1, 2, 4, 6)
    y = net(x)
    assert y.shape == (1, 6, 8)
    torch.testing.assert_close(y[0, 1], x[0, :, 0:2, 2:4].reshape(-1))       # second patch of row 0


def test_position_layers():
    net = al.Network([L.SequenceInput(4, name="x"), L.PositionEmbedding(8, name="pos")])
    y = net(torch.randn(2, 5, 4))
    torch.testing.assert_close(y[0], net.learnables["pos/weight"][:5])
    with pytest.raises(al.DataError, match="max_length 8"):
        net(torch.randn(1, 9, 4))
    enc = al.Network([L.SequenceInput(1), L.SinusoidalPositionEncoding(6)])
    pe = enc(torch.zeros(1, 3, 1))[0]
    t, i = 2, 1
    torch.testing.assert_close(pe[t, 2 * i], torch.tensor(t / 10000 ** (2 * i / 6)).sin())
    torch.testing.assert_close(pe[t, 2 * i + 1], torch.tensor(t / 10000 ** (2 * i / 6)).cos())


def test_causal_self_attention_sees_only_the_past():
    net = al.Network([L.SequenceInput(8), L.SelfAttention(2, 8, attention_mask="causal")]).initialize()
    x = torch.randn(1, 6, 8)
    y = net(x)
    x2 = x.clone()
    x2[:, 4:] = torch.randn(1, 2, 8)
    torch.testing.assert_close(net(x2)[:, :4], y[:, :4])


def test_heads_that_do_not_divide_the_channels_are_refused_at_construction():
    import attnlab as al
    for make, arg in [(lambda: L.SelfAttention(3, 8), "key_channels"),
                      (lambda: L.MultiHeadAttention(4, 64, value_channels=30), "value_channels")]:
        with pytest.raises(al.ArgumentError) as e:
            make()
        msg = str(e.value)
        assert "argument 'num_heads'" in msg and f"'{arg}'" in msg and "Use num_heads one of" in msg
