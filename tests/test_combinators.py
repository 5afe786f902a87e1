"""Trax-style combinators: ports and counts, numerics, nesting, padding, AttentionQKV equality."""
import pytest
import torch

import attnlab as al
from attnlab import layers as L


def attention_qkv(d, n_heads):
    """Trax's AttentionQKV, written literally."""
    return al.Serial(al.Parallel(L.Dense(d), L.Dense(d), L.Dense(d)), L.Attention(n_heads),
                     L.Dense(d))


def copy_mha_into_qkv(mha_net, qkv):
    """MultiHeadAttention's query/key/value/output maps → the three Dense of Parallel and the
    last Dense (the same nn.Linear layout: weight out×in, bias)."""
    src = mha_net.learnables
    dst = qkv.learnables
    pairs = {"query": "parallel/fc", "key": "parallel/fc_1", "value": "parallel/fc_2",
             "output": "fc"}
    with torch.no_grad():
        for m, s in pairs.items():
            dst[f"{s}/weight"].copy_(src[f"mha/{m}.weight"])
            dst[f"{s}/bias"].copy_(src[f"mha/{m}.bias"])


def sequences(lengths, channels):
    return [torch.randn(t, channels) for t in lengths]


# -- AttentionQKV == MultiHeadAttention ---------------------------------------------------

@pytest.mark.parametrize("cq,ck,cv", [(8, 8, 8), (8, 5, 3)])
def test_attention_qkv_equals_multihead_attention_with_padding(cq, ck, cv):
    d, heads = 8, 2
    qkv = attention_qkv(d, heads)
    mha = al.Network([L.MultiHeadAttention(heads, d, name="mha")])
    q = sequences([4, 2, 3], cq)            # queries and keys of other lengths, padded
    k_lengths = [6, 1, 5]
    k = sequences(k_lengths, ck)
    v = sequences(k_lengths, cv)
    ref = mha(q, k, v)                      # initialises both from the data
    qkv(q, k, v)
    copy_mha_into_qkv(mha, qkv)
    out = qkv(q, k, v)
    assert out.shape == ref.shape == (3, 4, d)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=0)
    # each sequence alone (no padding) gives the same valid steps
    for i in range(3):
        alone = qkv(q[i][None], k[i][None], v[i][None])
        torch.testing.assert_close(alone[0], out[i, :len(q[i])], atol=1e-5, rtol=0)
    # predict of lists gives each sequence's own steps
    got = qkv.predict(q, k, v)
    assert [g.shape[0] for g in got] == [4, 2, 3]


def test_attention_qkv_inside_a_network_with_input_layers():
    d, heads = 8, 4
    qkv = attention_qkv(d, heads)
    net = al.Network()
    for name, c in (("q", 8), ("k", 6), ("v", 4)):
        net.add(L.SequenceInput(c, name=name))
    net.add(qkv)
    for i, name in enumerate("qkv", 1):
        net.connect(name, f"serial/in{i}")
    analysis = net.analyze()
    assert analysis.ok, analysis
    assert str(analysis.out_specs["serial"]["out"]) == "B×T×8"
    assert analysis.total_learnables == 2 * d * d + d * 6 + d * 4 + 4 * d
    mha = al.Network()
    for name, c in (("q", 8), ("k", 6), ("v", 4)):
        mha.add(L.SequenceInput(c, name=name))
    mha.add(L.MultiHeadAttention(heads, d, name="mha"))
    for name, port in (("q", "query"), ("k", "key"), ("v", "value")):
        mha.connect(name, f"mha/{port}")
    mha.initialize()
    net.initialize()
    copy_mha_into_qkv(mha, qkv)
    x = {"q": torch.randn(2, 3, 8), "k": torch.randn(2, 5, 6), "v": torch.randn(2, 5, 4)}
    torch.testing.assert_close(net(x), mha(x), atol=1e-5, rtol=0)


# -- ports and counts ---------------------------------------------------------------------

@pytest.mark.parametrize("make,ins,outs", [
    (lambda: al.Serial(L.Dense(4), L.ReLU()), ["in"], ["out"]),
    (lambda: al.Serial(), ["in"], ["out"]),
    (lambda: al.Parallel(L.Dense(4), L.Dense(4), L.Dense(4)), ["in1", "in2", "in3"],
     ["out1", "out2", "out3"]),
    (lambda: al.Parallel(L.Attention(1), None), ["in1", "in2", "in3", "in4"], ["out1", "out2"]),
    (lambda: al.Branch(None, L.Dense(4), [L.Dense(4), L.ReLU()]), ["in"], ["out1", "out2", "out3"]),
    (lambda: al.Branch(L.Addition(2), None), ["in1", "in2"], ["out1", "out2"]),
    (lambda: al.Residual(L.Dense(4)), ["in"], ["out"]),
    (lambda: al.Select([0, 0, 0]), ["in"], ["out1", "out2", "out3"]),
    (lambda: al.Select([1, 0]), ["in1", "in2"], ["out1", "out2"]),
    (lambda: al.Select([1], n_in=3), ["in1", "in2", "in3"], ["out"]),
])
def test_port_names_and_counts(make, ins, outs):
    net = make()
    assert isinstance(net, al.Network)
    assert net.input_names == ins and list(net.input_ports) == ins
    assert net.output_names == outs and list(net.output_ports) == outs
    assert not any(l.is_input for l in net.layers)


def test_unnamed_combinators_take_their_kind_as_name():
    net = al.Network([L.SequenceInput(3), al.Serial(L.Dense(3)), al.Residual(L.Dense(3)),
                      al.Serial(L.ReLU())])
    assert [l.name for l in net.layers] == ["input", "serial", "residual", "serial_1"]
    assert al.Serial(L.Dense(2), name="block").name == "block"


# -- numerics -----------------------------------------------------------------------------

def test_serial_parallel_branch_residual_select_compute_what_they_say():
    x, z = torch.randn(2, 5, 3), torch.randn(2, 5, 3)
    fc = L.Dense(3)
    res = al.Residual(fc)
    y = res(x)
    w, b = res.learnables["fc/weight"], res.learnables["fc/bias"]
    torch.testing.assert_close(y, x + x @ w.T + b)

    br = al.Branch(None, L.ReLU(), L.Tanh())
    a, r, t = br(x).values()
    assert torch.equal(a, x) and torch.equal(r, x.relu()) and torch.equal(t, x.tanh())

    par = al.Parallel(L.ReLU(), L.Tanh())
    out = par(x, z)
    assert torch.equal(out["out1"], x.relu()) and torch.equal(out["out2"], z.tanh())

    sel = al.Select([1, 0, 1])
    out = sel(x, z)
    assert torch.equal(out["out1"], z) and torch.equal(out["out2"], x) and torch.equal(out["out3"], z)
    assert torch.equal(al.Select([1], n_in=2)(x, z), z)          # dropping an item

    add = al.Serial(al.Branch(L.ReLU(), L.Tanh()), L.Addition(2))
    torch.testing.assert_close(add(x), x.relu() + x.tanh())


def test_residual_with_a_shortcut_layer_and_self_attention_by_select():
    x = torch.randn(2, 4, 6)
    res = al.Residual(al.Select([0, 0, 0]), L.Attention(2), shortcut=L.Dense(6, name="proj"))
    y = res(x)
    ref = al.attention(x, x, x, 2) + x @ res.learnables["proj/weight"].T + res.learnables["proj/bias"]
    torch.testing.assert_close(y, ref, atol=1e-6, rtol=0)


def test_select_keeps_each_items_padding_mask():
    # swap two sequences of different lengths, then attend: the keys' own padding must be used
    q, kv = sequences([3, 2], 4), sequences([5, 1], 4)
    net = al.Serial(al.Select([1, 0, 0]), L.Attention(1))      # query = in2, key = value = in1
    y = net(kv, q)
    for i in range(2):
        alone = al.attention(q[i][None], kv[i][None], kv[i][None], 1)
        torch.testing.assert_close(y[i, :len(q[i])], alone[0], atol=1e-6, rtol=0)


# -- nesting, analysis, variable lengths --------------------------------------------------

def transformer_classifier():
    return al.Network([
        L.SequenceInput(8, name="x"),
        al.Serial(
            al.Residual(L.LayerNorm(), L.SelfAttention(2, 8)),
            al.Residual(L.LayerNorm(), L.Dense(16), L.GELU(), L.Dense(8)),
            al.Branch(L.GlobalAvgPool1d(), L.Index1d("last"), L.AttentionPool1d(2)),
            L.Concatenation(3), L.Dense(3), name="body")])


def test_nested_combinators_analyze_run_and_respect_padding():
    net = transformer_classifier()
    analysis = net.analyze()
    assert analysis.ok, analysis
    assert str(analysis.out_specs["body"]["out"]) == "B×3"
    assert analysis.learnables["body"]["residual/selfattention/query.weight"] == (8, 8)
    table = analysis.table()
    assert "B×3" in table and "Network" in table
    x = sequences([6, 2, 4], 8)
    net.eval()
    y = net(x)
    assert y.shape == (3, 3)
    for i in range(3):
        torch.testing.assert_close(net([x[i]])[0], y[i], atol=1e-5, rtol=0)
    y.sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    inner = net.layers["body"].layers["residual"]
    assert inner.analyze().ok


def test_standalone_combinator_shows_sizes_after_the_first_call_or_with_examples():
    net = al.Serial(L.Dense(5), al.Branch(L.ReLU(), L.GlobalAvgPool1d()))
    assert net.analyze().ok                                   # no data yet: sizes unknown
    a = net.analyze(torch.randn(2, 7, 3))
    assert str(a.out_specs["fc"]["out"]) == "B×T×5"
    assert a.out_specs["branch"] == {"out1": al.Spec.sequence(5), "out2": al.Spec.features(5)}
    net(torch.randn(2, 7, 3))
    assert str(net.analyze().out_specs["out2"]["out"]) == "B×5"


def test_save_and_load_round_trip():
    pytest.importorskip("attnlab.io")
    import tempfile
    net = transformer_classifier()
    x = sequences([5, 3], 8)
    net.eval()
    y = net(x)
    with tempfile.TemporaryDirectory() as d:
        net.save(f"{d}/net.attnlab")
        back = al.load(f"{d}/net.attnlab")
    back.eval()
    torch.testing.assert_close(back(x), y)
    assert back.layers["body"].input_names == ["in"]


# -- errors -------------------------------------------------------------------------------

def test_count_mismatch_names_both_children_and_counts():
    with pytest.raises(al.NetworkError) as e:
        al.Serial(L.Dense(8, name="proj"), L.Attention(2, name="att"))
    msg = str(e.value)
    for part in ("Serial", "'att'", "expected 3 input(s) (query, key, value)", "received 1",
                 "'proj'", "Select([0, 0, 0])"):
        assert part in msg, msg
    with pytest.raises(al.NetworkError, match=r"expected 1 input.*received 2.*'parallel'"):
        al.Serial(al.Parallel(L.Dense(2), L.Dense(2)), L.Dense(3))


@pytest.mark.parametrize("make,err,match", [
    (lambda: al.Serial(L.SequenceInput(3), L.Dense(2)), al.ArgumentError, "input layer"),
    (lambda: al.Serial(torch.nn.Linear(2, 2)), al.ArgumentError, r"L\.Module"),
    (lambda: al.Parallel(), al.ArgumentError, "at least one"),
    (lambda: al.Branch(), al.ArgumentError, "at least one"),
    (lambda: al.Serial(L.Dense(2, name="out")), al.ArgumentError, "uses for its ports"),
    (lambda: al.Residual(al.Select([0, 0])), al.NetworkError, "1 output"),
    (lambda: al.Residual(L.Dense(2), shortcut=L.Attention(1)), al.NetworkError, "shortcut"),
    (lambda: al.Select([]), al.ArgumentError, "non-empty"),
    (lambda: al.Select([0, -1]), al.ArgumentError, "0-based"),
    (lambda: al.Select([2], n_in=2), al.ArgumentError, "n_in ≥ 3"),
])
def test_construction_errors(make, err, match):
    with pytest.raises(err, match=match):
        make()


def test_same_layer_twice_is_refused():
    fc = L.Dense(2)
    with pytest.raises(al.NetworkError, match="already in this network"):
        al.Parallel(fc, fc)


def test_size_errors_inside_a_combinator_surface_in_the_outer_analysis():
    net = al.Network([L.SequenceInput(4, name="x"), al.Residual(L.Dense(6))])
    analysis = net.analyze()
    assert not analysis.ok
    assert "addition" in str(analysis.errors[0]) and "B×T×6" in str(analysis.errors[0])


def test_running_a_network_with_a_size_error_inside_a_combinator_raises_size_error():
    net = al.Network([L.SequenceInput(4, name="x"), al.Residual(L.Dense(6))])
    with pytest.raises(al.SizeError) as info:
        net(torch.randn(1, 2, 4))
    assert isinstance(info.value, al.NetworkError)
    assert "cannot use network 'residual' as a layer" in str(info.value)
