"""Streaming: step-wise outputs equal the full forward pass at the same positions, one
step at a time and after multi-step prefills; layers that cannot stream are refused at stream()
with a fix; generate and forecast equal their definitions by repeated full forward passes."""

import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st
from torch import nn

import attnlab as al
from attnlab import layers as L
from attnlab.cli.demos.seed1 import answer_network
from attnlab.stream import forecast, generate, stream as _stream

ATOL = 1e-5
C = 8


def stream(net, static_inputs=None, **kw):
    """`net.stream(...)` once Network has the method, else the function."""
    if hasattr(net, "stream") and not kw:
        return net.stream(static_inputs)
    return _stream(net, static_inputs, **kw)


def close(a, b):
    torch.testing.assert_close(a, b, atol=ATOL, rtol=1e-4)


def step_by_step(s, x, cuts=None):
    """Streams x (B×T×C) through s in chunks ending at `cuts` (default: one step each)."""
    t = x.shape[1]
    cuts = list(cuts or range(1, t + 1))
    ys, start = [], 0
    for end in cuts:
        ys.append(s.step(x[:, start:end]))
        start = end
    if isinstance(ys[0], dict):
        return {k: torch.cat([y[k] for y in ys], 1) for k in ys[0]}
    return torch.cat(ys, 1)


# -- random causal networks ----------------------------------------------------------------

class _Builder:
    """Grows a random causal decoder, block by block, from a seeded `random.Random`."""

    def __init__(self, rng):
        self.rng = rng
        self.net = al.Network([L.SequenceInput(3, name="dec"), L.Dense(C, name="in")])
        self.prev = "in"
        self.memory = None
        self.n = 0

    def _name(self, stem):
        self.n += 1
        return f"{stem}{self.n}"

    def chain(self, layer, port=None):
        self.net.add(layer)
        self.net.connect(self.prev, f"{layer.name}/{port}" if port else layer.name)
        self.prev = layer.name
        return layer.name

    def residual(self, layer):
        """prev + layer(prev)."""
        before = self.prev
        self.chain(layer)
        add = L.Addition(2, name=self._name("add"))
        self.net.add(add)
        self.net.connect(before, f"{add.name}/in1")
        self.net.connect(layer.name, f"{add.name}/in2")
        self.prev = add.name

    def encoder(self):
        """A static encoder (non-causal self-attention is fine: it never streams)."""
        if self.memory is None:
            self.net.add([L.SequenceInput(2, name="enc"), L.Dense(C, name="enc-in"),
                          L.SelfAttention(2, C, name="enc-attn"), L.LayerNorm(name="enc-norm")])
            self.memory = "enc-norm"
        return self.memory

    def block(self, kind):
        rng, name = self.rng, self._name(kind)
        if kind == "lstm":
            self.chain(L.LSTM(C, name=name))
        elif kind == "gru":
            self.chain(L.GRU(C, name=name))
        elif kind == "self-attention":
            heads = rng.choice([1, 2, 4])
            kv = rng.choice([None, heads, 1])
            self.residual(L.SelfAttention(heads, C, attention_mask="causal", num_kv_heads=kv,
                                          name=name))
        elif kind == "mha-self":                     # q, k, v all streamed, separate ports
            layer = L.MultiHeadAttention(2, C, attention_mask="causal", name=name)
            before = self.prev
            self.chain(layer, "query")
            self.net.connect(before, f"{name}/key")
            self.net.connect(before, f"{name}/value")
        elif kind == "attention-self":               # Attention without learnables, causal
            before = self.prev
            self.chain(L.Attention(rng.choice([1, 2]), attention_mask="causal", name=name),
                       "query")
            self.net.connect(before, f"{name}/key")
            self.net.connect(before, f"{name}/value")
        elif kind == "cross":                        # keys/values from the static encoder
            memory = self.encoder()
            self.chain(L.MultiHeadAttention(2, C, name=name), "query")
            self.net.connect(memory, f"{name}/key")
            self.net.connect(memory, f"{name}/value")
        elif kind == "attention-cross":              # Attention without learnables
            memory = self.encoder()
            self.chain(L.Attention(2, name=name), "query")
            self.net.connect(memory, f"{name}/key")
            self.net.connect(memory, f"{name}/value")
        elif kind == "dense":
            self.chain(L.Dense(C, name=name))
            self.chain(rng.choice([L.ReLU, L.GELU, L.Tanh, L.Sigmoid])(name=self._name("act")))
        elif kind == "norm":
            self.chain(L.LayerNorm(name=name))
        elif kind == "residual":
            self.residual(L.Dense(C, name=name))
        elif kind == "position-embedding":
            self.residual(L.PositionEmbedding(16, name=name))
        elif kind == "sinusoidal":
            self.residual(L.SinusoidalPositionEncoding(C, name=name))
        elif kind == "conv":
            self.chain(L.Conv1d(rng.choice([1, 2, 3]), C, padding="causal",
                                dilation=rng.choice([1, 2]), name=name))
        elif kind == "concat":
            before = self.prev
            self.chain(L.Dense(4, name=name))
            cat = L.Concatenation(2, name=self._name("cat"))
            self.net.add(cat)
            self.net.connect(before, f"{cat.name}/in1")
            self.net.connect(name, f"{cat.name}/in2")
            self.prev = cat.name
            self.chain(L.Dense(C, name=self._name("fc")))


KINDS = ["lstm", "gru", "self-attention", "mha-self", "attention-self", "cross", "attention-cross",
         "dense", "norm", "residual", "position-embedding", "sinusoidal", "conv", "concat"]


def random_network(rng):
    b = _Builder(rng)
    kinds = rng.choices(KINDS, k=rng.randint(2, 6))
    for kind in kinds:
        b.block(kind)
    b.chain(L.Dense(4, name="out"))
    net = b.net.eval()
    net.initialize()
    return net, kinds, b.memory is not None


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False))
def test_random_causal_networks_stream_exactly(rng):
    torch.manual_seed(rng.randrange(2 ** 31))
    net, kinds, has_encoder = random_network(rng)
    b, t = rng.randint(1, 3), rng.randint(2, 10)
    x = torch.randn(b, t, 3)
    static = {}
    if has_encoder:
        if rng.random() < 0.5:                              # padded: keys must be ignored
            static["enc"] = [torch.randn(rng.randint(1, 6), 2) for _ in range(b)]
        else:
            static["enc"] = torch.randn(b, rng.randint(1, 6), 2)
    full = net({"dec": x, **static})
    s = stream(net, static)
    close(step_by_step(s, x), full)                           # one step at a time
    s.reset()
    cut = rng.randint(1, t)                                   # a prefill, then random chunks
    cuts = [cut]
    while cuts[-1] < t:
        cuts.append(rng.randint(cuts[-1] + 1, t))
    close(step_by_step(s, x, cuts), full)
    assert s.position == t


# -- particular networks -------------------------------------------------------------------

def test_seed1_cross_attention_computes_the_encoder_once():
    net = answer_network(channels=16, heads=4).eval()
    xd = torch.randn(3, 6, 1)
    xe = [torch.randn(n, 1) for n in (9, 4, 7)]            # padded encoder: key padding
    full = net({"decoder-input": xd, "encoder-input": xe})
    calls = []
    net.layer_modules["lstm-encoder"].register_forward_hook(lambda *a: calls.append(1))
    s = stream(net, {"encoder-input": xe})
    assert len(calls) == 1                                   # at stream creation
    assert "lstm-encoder" not in s.source and "fc-key" not in s.source
    close(step_by_step(s, xd), full)
    close(step_by_step(s.reset(), xd, [4, 6]), full)
    assert len(calls) == 1                                   # never again


def test_cross_attention_mask_port_from_static_inputs():
    net = al.Network([L.SequenceInput(C, name="x"),
                      L.Attention(2, has_padding_mask_input=True, name="attn")])
    net.add(L.SequenceInput(C, name="mem"))
    net.add(L.SequenceInput(1, name="keep"))
    net.connect("mem", "attn/key")
    net.connect("mem", "attn/value")
    net.connect("keep", "attn/mask")
    net.eval()
    x, mem = torch.randn(2, 5, C), torch.randn(2, 4, C)
    keep = torch.tensor([[1, 1, 0, 1], [0, 0, 0, 0]]).float().unsqueeze(-1)   # row 2: no key
    full = net({"x": x, "mem": mem, "keep": keep})
    assert float(full[1].abs().max()) == 0.0
    close(step_by_step(stream(net, {"mem": mem, "keep": keep}), x), full)


def test_static_outputs_come_back_whole_and_outputs_by_name():
    net = answer_network(channels=8, heads=2).eval()
    net.add(L.Dense(3, name="enc-out"))
    net.connect("key-value", "enc-out")
    xd, xe = torch.randn(2, 4, 1), torch.randn(2, 5, 1)
    full = net({"decoder-input": xd, "encoder-input": xe})
    s = stream(net, {"encoder-input": xe})
    y = s.step(xd[:, :1])
    assert set(y) == {"cross-attention", "enc-out"}
    close(y["enc-out"], full["enc-out"])
    close(y["cross-attention"], full["cross-attention"][:, :1])


def test_lstm_state_from_a_static_encoder_and_state_outputs():
    net = al.Network([L.SequenceInput(2, name="enc"),
                      L.LSTM(C, has_state_outputs=True, output_mode="last", name="encoder")])
    net.add([L.SequenceInput(3, name="dec"), L.LSTM(C, has_state_inputs=True,
                                                    has_state_outputs=True, name="decoder"),
             L.Dense(2, name="out")])
    net.connect("encoder/hidden", "decoder/hidden")
    net.connect("encoder/cell", "decoder/cell")
    net.add(L.Dense(2, name="enc-fc"))
    net.connect("encoder/out", "enc-fc")
    net.eval()
    xe, xd = torch.randn(2, 5, 2), torch.randn(2, 6, 3)
    s = stream(net, {"enc": xe})
    for n in range(1, 7):
        y = s.step(xd[:, n - 1:n])
        full = net({"enc": xe, "dec": xd[:, :n]})
        close(y["out"], full["out"][:, -1:])
        # the state outputs: the state after the newest step, as the full pass on the prefix
        close(y["decoder/hidden"], full["decoder/hidden"])
        close(y["decoder/cell"], full["decoder/cell"])


def test_recurrent_last_output_is_the_prefix_summary():
    net = al.Network([L.SequenceInput(3, name="x"), L.GRU(C, output_mode="last"),
                      L.Dense(2)]).eval()
    x = torch.randn(2, 5, 3)
    s = stream(net)
    for n in range(1, 6):
        close(s.step(x[:, n - 1:n]), net(x[:, :n]))


def test_static_sequence_read_step_by_step():
    net = al.Network([L.SequenceInput(3, name="x"), L.Dense(4, name="fc")])
    net.add([L.SequenceInput(4, name="known"), L.Tanh(name="tanh")])
    net.add([L.Addition(2, name="add"), L.Dense(2, name="out")])
    net.connect("fc", "add/in1")
    net.connect("tanh", "add/in2")
    net.eval()
    x, known = torch.randn(2, 6, 3), torch.randn(2, 6, 4)
    s = stream(net, {"known": known})
    close(step_by_step(s, x, [2, 3, 6]), net(x, known))
    with pytest.raises(al.DataError, match="only 6 steps"):
        s.step(x[:, :1])


def test_nested_networks_stream_with_their_own_programs():
    block = al.Network([L.SelfAttention(2, C, attention_mask="causal"), L.Dense(C)])
    norm = al.Network([L.LayerNorm(), L.LSTM(C)])
    net = al.Network([L.SequenceInput(C, name="x"), block, norm, L.Dense(3)]).eval()
    x = torch.randn(2, 7, C)
    full = net(x)
    s = stream(net)
    close(step_by_step(s, x), full)
    close(step_by_step(s.reset(), x, [3, 4, 7]), full)
    assert any(name.startswith("network/") for name in s.steppers)


def test_trax_attention_qkv_combinators_stream_as_self_and_cross_attention():
    d = C

    def attention_qkv(**kw):
        return al.Serial(al.Parallel(L.Dense(d), L.Dense(d), L.Dense(d)), L.Attention(2, **kw),
                         L.Dense(d), name="qkv")

    x = torch.randn(2, 6, d)
    net = al.Network([L.SequenceInput(d, name="x"), al.Select([0, 0, 0], name="sel"),
                      attention_qkv(attention_mask="causal")])
    net.connect("sel/out2", "qkv/in2")
    net.connect("sel/out3", "qkv/in3")
    net.eval()
    close(step_by_step(stream(net), x), net(x))

    cross = al.Network([L.SequenceInput(d, name="x"), attention_qkv()])
    cross.add(L.SequenceInput(d, name="mem"))
    cross.connect("mem", "qkv/in2")
    cross.connect("mem", "qkv/in3")
    cross.eval()
    mem = [torch.randn(n, d) for n in (3, 5)]
    s = stream(cross, {"mem": mem})
    close(step_by_step(s, x, [2, 6]), cross({"x": x, "mem": mem}))
    assert list(s.steppers) == ["qkv/attention"]           # the key/value Dense ran once


def test_embedding_decoder_and_double_precision():
    net = al.Network([L.SequenceInput(1, name="tok"), L.Embedding(11, C),
                      L.SelfAttention(2, C, attention_mask="causal"), L.Dense(11)])
    net = net.initialize().double().eval()
    x = torch.randint(0, 11, (2, 6, 1)).double()
    s = stream(net)
    y = step_by_step(s, x)
    assert y.dtype == torch.float64
    torch.testing.assert_close(y, net(x), atol=1e-12, rtol=0)


def test_wrapped_modules_stream_when_time_local():
    ok = al.Network([L.SequenceInput(3, name="x"), L.Module(nn.Linear(3, 4)), L.Dense(2)]).eval()
    x = torch.randn(2, 5, 3)
    close(step_by_step(stream(ok), x), ok(x))

    class CumulativeMean(nn.Module):                        # causal, but not per-step
        def forward(self, x):
            steps = torch.arange(1, x.shape[1] + 1, dtype=x.dtype, device=x.device)
            return x.cumsum(1) / steps.view(1, -1, 1)

    bad = al.Network([L.SequenceInput(3, name="x"), L.Module(CumulativeMean(), name="cummean")])
    with pytest.raises(al.NetworkError, match="cummean.*mixes time steps"):
        stream(bad)


def test_kv_cache_grows_by_doubling_and_appends_in_place():
    net = al.Network([L.SequenceInput(3, name="x"), L.Dense(C),
                      L.SelfAttention(2, C, attention_mask="causal", name="attn")]).eval()
    x = torch.randn(1, 20, 3)
    s = stream(net, capacity=4) if not hasattr(net, "stream") else _stream(net, capacity=4)
    cache = s.steppers["attn"].cache
    ptrs, capacities = [], []
    ys = []
    for i in range(20):
        ys.append(s.step(x[:, i:i + 1]))
        ptrs.append(cache.k.data_ptr())
        capacities.append(cache.capacity)
    assert sorted(set(capacities)) == [4, 8, 16, 32]
    assert len(set(ptrs)) == 4                         # new buffers only when the cache doubles
    assert cache.n == 20
    close(torch.cat(ys, 1), net(x))
    s.reset()
    assert cache.n == 0 and cache.capacity == 32     # reset keeps the memory


# -- layers that cannot stream -------------------------------------------------------------

NOT_STREAMABLE = [
    (lambda: L.SelfAttention(2, C, name="bad"), "attention_mask='causal'"),
    (lambda: L.LSTM(4, bidirectional=True, name="bad"), "bidirectional=False"),
    (lambda: L.GRU(4, bidirectional=True, name="bad"), "bidirectional=False"),
    (lambda: L.GlobalAvgPool1d(name="bad"), "reduces the streamed time axis"),
    (lambda: L.GlobalMaxPool1d(name="bad"), "reduces the streamed time axis"),
    (lambda: L.AttentionPool1d(2, name="bad"), "reduces the streamed time axis"),
    (lambda: L.Index1d("last", name="bad"), "reduces the streamed time axis"),
    (lambda: L.Conv1d(3, 4, name="bad"), "padding='causal'"),
    (lambda: L.Conv1d(3, 4, padding="causal", stride=2, name="bad"), "stride=1"),
    (lambda: L.BatchNorm(name="bad"), "net.eval()"),
    (lambda: L.SelfAttention(2, C, attention_mask="causal", has_scores_output=True, name="bad"),
     "has_scores_output=False"),
]


@pytest.mark.parametrize("make, fix", NOT_STREAMABLE)
def test_layers_that_cannot_stream_are_named_with_a_fix(make, fix):
    net = al.Network([L.SequenceInput(C, name="x"), make()])
    if not isinstance(net.layers["bad"], L.BatchNorm):
        net.eval()
    with pytest.raises(al.NetworkError) as e:
        stream(net)
    msg = str(e.value)
    assert "layer 'bad'" in msg and fix in msg
    assert e.value.issues and e.value.issues[0].layer == "bad"


def test_time_concatenation_and_every_problem_at_once():
    net = al.Network([L.SequenceInput(C, name="x"), L.SelfAttention(2, C, name="attn"),
                      L.LSTM(4, bidirectional=True, name="bilstm")])
    net.add(L.Concatenation(2, dim="time", name="tcat"))
    net.connect("x", "tcat/in1")
    net.connect("bilstm", "tcat/in2")
    net.eval()
    with pytest.raises(al.NetworkError) as e:
        stream(net)
    msg = str(e.value)
    assert "3 layer(s)" in msg
    for name in ("attn", "bilstm", "tcat"):
        assert f"layer '{name}'" in msg
    assert "dim='channel'" in msg


def test_attention_whose_keys_stream_but_query_is_static():
    net = al.Network([L.SequenceInput(C, name="x")])
    net.add([L.SequenceInput(C, name="q"), L.MultiHeadAttention(2, C, attention_mask="causal",
                                                                name="mha")])
    net.connect("x", "mha/key")
    net.connect("x", "mha/value")
    with pytest.raises(al.NetworkError, match="stream the query too"):
        stream(net, {"q": torch.randn(1, 3, C)})


def test_bottom_right_causal_cross_attention_is_refused_top_left_streams():
    for alignment, ok in (("bottom-right", False), ("top-left", True)):
        net = al.Network([L.SequenceInput(C, name="x"),
                          L.MultiHeadAttention(2, C, attention_mask="causal",
                                               causal_alignment=alignment, name="mha")])
        net.add(L.SequenceInput(C, name="mem"))
        net.connect("mem", "mha/key")
        net.connect("mem", "mha/value")
        net.eval()
        x, mem = torch.randn(2, 6, C), torch.randn(2, 4, C)
        if ok:
            close(step_by_step(stream(net, {"mem": mem}), x), net(x, mem))
        else:
            with pytest.raises(al.NetworkError, match="top-left"):
                stream(net, {"mem": mem})


def test_argument_errors():
    net = answer_network(channels=8, heads=2).eval()
    with pytest.raises(al.DataError, match="encoder-input"):
        stream(net, {"encoder-inputs": torch.randn(1, 3, 1)})
    with pytest.raises(al.NetworkError, match="nothing to stream"):
        stream(net, {"encoder-input": torch.randn(1, 3, 1), "decoder-input": torch.randn(1, 2, 1)})
    feats = al.Network([L.FeatureInput(3, name="f"), L.Dense(2)])
    with pytest.raises(al.NetworkError, match="only sequences"):
        stream(feats)


def test_step_input_errors():
    net = answer_network(channels=8, heads=2).eval()
    s = stream(net, {"encoder-input": torch.randn(2, 3, 1)})
    with pytest.raises(al.DataError, match="batch size 2"):
        s.step(torch.randn(3, 1, 1))
    with pytest.raises(al.DataError, match="unsqueeze"):
        s.step(torch.randn(2, 1))
    with pytest.raises(al.DataError, match="zero steps"):
        s.step(torch.randn(2, 0, 1))
    y = s.step([[[0.5]], [[1.0]]])                            # nested lists convert
    assert y.shape == (2, 1, 8)
    two = al.Network([L.SequenceInput(2, name="a"), L.Dense(3, name="fa")])
    two.add([L.SequenceInput(3, name="b"), L.Addition(2, name="add")])
    two.connect("fa", "add/in2")
    s2 = stream(two.eval())
    with pytest.raises(al.DataError, match="dict by name"):
        s2.step(torch.randn(1, 1, 2))
    with pytest.raises(al.DataError, match="missing b"):
        s2.step({"a": torch.randn(1, 1, 2)})
    a, b = torch.randn(1, 4, 2), torch.randn(1, 4, 3)
    close(torch.cat([s2.step({"a": a[:, i:i + 1], "b": b[:, i:i + 1]}) for i in range(4)], 1),
          two(a, b))


def test_runtime_errors_name_the_layer():
    net = al.Network([L.SequenceInput(1, name="tok"), L.Embedding(5, 4, name="embed"),
                      L.Dense(2)]).eval()
    s = stream(net)
    with pytest.raises(al.DataError, match="layer 'embed'.*vocabulary"):
        s.step(torch.full((1, 1, 1), 7.0))
    pos = al.Network([L.SequenceInput(2, name="x"), L.PositionEmbedding(3, name="pos")]).eval()
    s = stream(pos)
    s.step(torch.randn(1, 3, 2))
    with pytest.raises(al.DataError, match="layer 'pos'.*max_length 3"):
        s.step(torch.randn(1, 1, 2))
    assert net.layer_modules["embed"] is not None and pos.layer_modules["pos"].offset == 0


# -- generate and forecast -----------------------------------------------------------------

V = 7


def translator():
    """Token decoder (Embedding, positions, causal self-attention, cross-attention over a
    padded encoder) → scores over V tokens."""
    net = al.Network([L.SequenceInput(1, name="tokens"), L.Embedding(V, C, name="embed")])
    net.add([L.SinusoidalPositionEncoding(C, name="pos"), L.Addition(2, name="add")])
    net.connect("embed", "pos")
    net.connect("embed", "add/in2")
    net.add([L.SelfAttention(2, C, attention_mask="causal", name="self"), L.LayerNorm(),
             L.MultiHeadAttention(2, C, name="cross"), L.Dense(V, name="scores")])
    net.connect("add", "self")
    net.add([L.SequenceInput(3, name="source"), L.LSTM(C, name="encoder")])
    net.connect("encoder", "cross/key")
    net.connect("encoder", "cross/value")
    return net.eval()


def greedy_by_full_passes(net, source, prefix, max_length, stop=None):
    """The definition: recompute the whole sequence at every step, keep the last argmax."""
    seq = prefix.clone()
    out = []
    for _ in range(max_length):
        y = net({"tokens": seq, "source": source})[:, -1]
        tok = y.argmax(-1)
        out.append(tok)
        seq = torch.cat([seq, tok.view(-1, 1, 1).float()], 1)
    tokens = torch.stack(out, 1)
    lengths = torch.full((tokens.shape[0],), max_length)
    if stop is not None:
        for i, row in enumerate(tokens):
            hits = (row == stop).nonzero()
            if len(hits):
                n = int(hits[0]) + 1
                lengths[i] = n
                row[n:] = stop
        tokens = tokens[:, :int(lengths.max())]
    return tokens, lengths


def test_generate_equals_greedy_decoding_by_full_passes():
    torch.manual_seed(1)
    net = translator()
    source = [torch.randn(n, 3) for n in (5, 3, 6, 2)]
    start = torch.zeros(4, 1, 1)
    ref, _ = greedy_by_full_passes(net, source, start, 12)
    stop = int(ref[0, 3])                                  # a token some sequences produce
    ref, lengths = greedy_by_full_passes(net, source, start, 12, stop)
    g = generate(net, static_inputs={"source": source}, start=0, stop=stop, max_new_tokens=12)
    assert torch.equal(g.tokens, ref)
    assert torch.equal(g.lengths, lengths)
    assert g.sequences()[0][-1] == stop and len(g.sequences()[0]) == int(lengths[0])
    # without a stop token, every sequence runs to max_length
    g = generate(net, 0, 12, static_inputs={"source": source})
    assert torch.equal(g.tokens, greedy_by_full_passes(net, source, start, 12)[0])


def test_generate_with_a_prompt_prefills_it():
    torch.manual_seed(2)
    net = translator()
    source = torch.randn(2, 4, 3)
    prompt = torch.randint(0, V, (2, 3))                   # B×t ids
    ref, _ = greedy_by_full_passes(net, source, prompt.unsqueeze(-1).float(), 6)
    g = generate(net, static_inputs={"source": source}, start=prompt, max_new_tokens=6)
    assert torch.equal(g.tokens, ref)


def test_generate_top_k_samples_reproducibly_and_k1_is_greedy():
    torch.manual_seed(3)
    net = translator()
    source = torch.randn(3, 4, 3)
    greedy = generate(net, 0, 8, static_inputs={"source": source})
    k1 = generate(net, 0, 8, static_inputs={"source": source}, strategy="top-k", k=1)
    assert torch.equal(k1.tokens, greedy.tokens)
    runs = [generate(net, 0, 8, static_inputs={"source": source}, strategy="top-k", k=3,
                     temperature=2.0,
                     generator=torch.Generator().manual_seed(5)) for _ in range(2)]
    assert torch.equal(runs[0].tokens, runs[1].tokens)
    assert runs[0].tokens.min() >= 0 and runs[0].tokens.max() < V


def test_generate_restores_training_mode_and_checks_arguments():
    net = translator().train()
    generate(net, 0, 2, static_inputs={"source": torch.randn(1, 2, 3)})
    assert all(m.training for m in net.modules())
    with pytest.raises(al.ArgumentError, match="strategy"):
        generate(net, static_inputs={"source": torch.randn(1, 2, 3)}, strategy="beam")
    onehot = al.Network([L.SequenceInput(V, name="x"), L.LSTM(C), L.Dense(V)])
    with pytest.raises(al.ArgumentError, match="feedback"):
        generate(onehot, torch.zeros(1, 1, V), 3)
    g = generate(onehot, torch.zeros(2, 1, V), 3,
                 feedback=lambda tok, scores: nn.functional.one_hot(tok, V).float().unsqueeze(1))
    assert g.tokens.shape == (2, 3)


def forecaster():
    net = al.Network([L.SequenceInput(2, name="x"), L.Dense(C), L.LSTM(C),
                      L.SelfAttention(2, C, attention_mask="causal"), L.Dense(2)])
    return net.eval()


def test_forecast_equals_closed_loop_full_passes():
    torch.manual_seed(4)
    net = forecaster()
    history = torch.randn(3, 5, 2)
    seq, ref = history, []
    for _ in range(6):
        y = net(seq)[:, -1:]
        ref.append(y)
        seq = torch.cat([seq, y], 1)
    ref = torch.cat(ref, 1)
    close(forecast(net, history, 6), ref)
    close(forecast(net, history[0], 6), ref[0])                # one T×C history → steps×C


def test_forecast_needs_matching_channels_or_feedback():
    net = al.Network([L.SequenceInput(2, name="x"), L.LSTM(4), L.Dense(1)]).eval()
    with pytest.raises(al.SizeError, match="feedback"):
        forecast(net, torch.randn(1, 3, 2), 2)
    y = forecast(net, torch.randn(1, 3, 2), 4, feedback=lambda p: p.repeat(1, 1, 2))
    assert y.shape == (1, 4, 1)


# -- token ids and the decoding fast paths ------------------------------------------------------

def _token_decoder():
    net = al.Network([L.SequenceInput(1, name="tok"), L.Embedding(11, C, name="embed"),
                      L.SinusoidalPositionEncoding(C, name="pos"), L.Addition(2, name="add"),
                      L.SelfAttention(2, C, attention_mask="causal", name="attn"),
                      L.LayerNorm(name="norm"), L.Dense(11, name="scores")])
    net.connect("embed", "add/in2")
    return net.initialize().eval()


def test_integer_ids_stream_as_floats_do_and_equal_the_full_pass():
    net = _token_decoder()
    ids = torch.randint(0, 11, (2, 9, 1))
    full = net(ids.float())
    s_int, s_float = _stream(net, capacity=4), _stream(net, capacity=4)   # the cache doubles
    assert s_int.steppers["attn"].cache.capacity == 0
    close(step_by_step(s_int, ids, [3, 4, 5, 6, 7, 8, 9]), full)        # prefill, then steps
    close(step_by_step(s_float, ids.float()), full)
    assert s_int.steppers["attn"].cache.capacity == 16
    s_int.reset()
    close(step_by_step(s_int, ids.int()), full)                          # int32 too


def test_a_bad_integer_id_in_a_step_names_the_layer_and_the_id():
    s = _stream(_token_decoder())
    s.step(torch.tensor([[[3]]]))
    with pytest.raises(al.DataError, match=r"layer 'embed'.*token id 11 .*vocabulary of 11"):
        s.step(torch.tensor([[[11]]]))


def test_integer_ids_reach_only_embedding_inputs():
    """An input that feeds something else than an Embedding takes ids as floats (converted)."""
    net = al.Network([L.SequenceInput(1, name="x"), L.Dense(3, name="fc")]).initialize().eval()
    s = _stream(net)
    x = torch.tensor([[[2]]])
    close(s.step(x), net(x.float()))


def test_embedding_off_the_cpu_reads_nothing_back_and_marks_bad_ids_nan():
    """Elsewhere than on the CPU the lookup cannot check ids without a host read: meta tensors
    (no data: any read raises) stand in for a GPU; bad ids become NaN vectors."""
    emb = _token_decoder().layer_modules["embed"]
    y = emb.lookup_unchecked(torch.tensor([[0, 11, -1, 4]]))
    assert y.shape == (1, 4, C)
    assert torch.isnan(y[0, 1:3]).all() and torch.equal(y[0, 0], emb.weight[0].detach())
    meta = _token_decoder().layer_modules["embed"].to("meta")
    out = meta(torch.zeros(2, 5, 1, device="meta"))                 # float ids: no read either
    assert out.shape == (2, 5, C) and out.is_meta


def test_long_one_step_decodes_equal_the_full_pass_across_view_chunks_and_growth():
    """One-step decoding makes its cache views a chunk of 64 steps at a time, holding only the
    current chunk, and doubles the buffers when full: 150 steps from capacity 100 cross both;
    a reset to another batch size starts over in fresh buffers. Every step equals the full
    forward pass."""
    net = _token_decoder()
    torch.manual_seed(3)
    s = _stream(net, capacity=100)
    for batch in (2, 3):
        ids = torch.randint(0, 11, (batch, 150, 1))
        full = net(ids.float())
        got = torch.cat([s.step(ids[:, i:i + 1]) for i in range(150)], 1)
        assert torch.allclose(got, full, atol=1e-5)
        cache = s.steppers["attn"].cache
        assert cache.capacity == 200 and len(cache.k_prefix) == len(cache.k_slots) <= 64
        assert cache.base <= 149 < cache.base + len(cache.k_prefix)      # the last step's
        s.reset()


def test_decoding_step_indexes_views_made_once_per_buffer():
    """The one-step path copies into slot views and attends over prefix views of the cache."""
    s = _stream(_token_decoder(), capacity=8)
    s.step(torch.zeros(1, 1, 1, dtype=torch.long))
    cache = s.steppers["attn"].cache
    assert len(cache.k_slots) == len(cache.k_prefix) == 8
    assert cache.k_slots[0].data_ptr() == cache.k.data_ptr()
    assert cache.k_prefix[4].shape == (1, 2, 5, C // 2)
