"""The logit lens against transformers' lm_head(ln_f(hidden_states[i])) on GPT-2, and
activation patching against a hand-written loop of forwards with hooks."""
import math

import matplotlib
import pytest
import torch

import attnlab as al
from attnlab import layers as L
from pretrained_helpers import quiet_transformers, tiny_bert, tiny_gpt2

transformers = pytest.importorskip("transformers")
quiet_transformers()

VOCAB = 30


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    model, folder = tiny_gpt2(tmp_path_factory.mktemp("gpt2"), VOCAB, n_layer=3)
    return model, al.from_pretrained(folder)


def test_logit_lens_equals_transformers_head_on_each_hidden_state(gpt2):
    hf, net = gpt2
    ids = torch.randint(0, VOCAB, (2, 5))
    lens = al.explain.logit_lens(net, ids)
    with torch.no_grad():
        out = hf(ids, output_hidden_states=True)
        # hidden_states[i] is block i's output; the last has ln_f applied already
        want = [hf.lm_head(hf.transformer.ln_f(h)) for h in out.hidden_states[1:-1]]
    assert lens.blocks == ["h.0", "h.1", "h.2"] and lens.logits.shape == (3, 2, 5, VOCAB)
    for got, w in zip(lens.logits, want):
        assert torch.allclose(got, w, atol=1e-5)
    assert torch.allclose(lens.logits[-1], out.logits, atol=1e-5)
    with torch.no_grad():
        assert torch.equal(lens.logits[-1], net(ids))


def test_logit_lens_table_and_plot(gpt2):
    _, net = gpt2
    ids = torch.tensor([[4, 8, 15, 16]])
    lens = al.explain.logit_lens(net, ids)
    table = lens.top(k=2)
    assert len(table) == 3 * 4 and table[0][:2] == ("h.0", 0)
    block, pos, tokens, probs = table[-1]
    assert tokens[0] == int(lens.logits[-1, 0, 3].argmax()) and len(probs) == 2
    fig = lens.plot()
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["4", "8", "15", "16"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["h.0", "h.1", "h.2"]
    assert ax.get_ylabel() == "block"
    matplotlib.pyplot.close(fig)


def test_logit_lens_refuses_an_encoder_naming_what_it_expects(tmp_path):
    net = al.from_pretrained(tiny_bert(tmp_path, VOCAB, layers=1)[1])
    with pytest.raises(al.NetworkError, match=r"logit_lens expects a causal language model: "
                                              r"token ids in, .* logits B×T×V out; .* has "
                                              r"attention that is not causal, 2 outputs"):
        al.explain.logit_lens(net, torch.randint(0, VOCAB, (1, 4)))


def test_logit_lens_refuses_a_network_without_blocks():
    net = al.Network([L.SequenceInput(3, name="x"), L.SelfAttention(1, 3, attention_mask="causal",
                                                                    name="sa")])
    with pytest.raises(al.NetworkError, match=r"has no token input, no blocks"):
        al.explain.logit_lens(net, torch.randn(1, 4, 3))


def _hooked_metric(net, clean, corrupted, name, pos, metric):
    """The corrupted run with `name`'s clean output put in at `pos`, by forward hooks."""
    module = net.layer_modules[name]
    kept = {}
    h = module.register_forward_hook(lambda m, i, o: kept.__setitem__("v", o))
    with torch.no_grad():
        net(clean)
    h.remove()

    def put(m, i, o):
        o = o.clone()
        o[:, pos] = kept["v"][:, pos]
        return o
    h = module.register_forward_hook(put)
    try:
        with torch.no_grad():
            return float(metric(net(corrupted)))
    finally:
        h.remove()


def test_patching_equals_a_loop_of_hooked_forwards(gpt2):
    _, net = gpt2
    clean = torch.tensor([[1, 2, 3, 4, 5]])
    corrupted = torch.tensor([[1, 2, 9, 4, 5]])

    def metric(out):
        return out[0, -1, 7] - out[0, -1, 3]

    got = al.explain.patching(net, clean, corrupted, ["h.*.attn", "ln_f"], metric)
    assert got.names == ["h.0.attn/out", "h.1.attn/out", "h.2.attn/out", "ln_f/out"]
    assert got.values.shape == (4, 5) and got.values.std() > 0
    for name, pos, value in got.rows:
        layer = name.split("/")[0]
        hooked = _hooked_metric(net, clean, corrupted, layer, pos, metric)
        assert value == pytest.approx(hooked, abs=1e-6)
        assert got.values[got.names.index(name), pos] == pytest.approx(value)
    # the clean value everywhere at the last position of the final norm is the clean run
    with torch.no_grad():
        assert got.values[3, 4] == pytest.approx(float(metric(net(clean))), abs=1e-6)
    fig = got.plot()
    assert fig.axes[0].get_ylabel() == "activation"
    matplotlib.pyplot.close(fig)


def test_patching_attentions_inside_goes_by_query_position(gpt2):
    _, net = gpt2
    clean, corrupted = torch.tensor([[1, 2, 3, 4]]), torch.tensor([[1, 6, 3, 4]])
    got = al.explain.patching(net, clean, corrupted, "h.1.attn/scores",
                              lambda out: out[0, -1].max())
    assert got.names == ["h.1.attn/scores"] and [p for _, p, _ in got.rows] == [0, 1, 2, 3]
    # the first query attends to itself alone, the same in both runs: nothing changes there
    with torch.no_grad():
        base = float(net(corrupted)[0, -1].max())
    assert got.rows[0][2] == pytest.approx(base, abs=1e-6)


def test_a_value_without_positions_is_patched_whole_and_sizes_must_agree():
    net = al.Network([L.FeatureInput(3, name="x"), L.Dense(4, name="fc"), L.ReLU(name="act"),
                      L.Dense(2, name="out")]).eval()
    clean, corrupted = torch.randn(1, 3), torch.randn(1, 3)
    got = al.explain.patching(net, clean, corrupted, ["fc"], lambda out: out[0, 0])
    with torch.no_grad():
        assert got.rows == [("fc/out", None, pytest.approx(float(net(clean)[0, 0])))]
    seq = al.Network([L.SequenceInput(2, name="x"), L.SelfAttention(1, 2, name="sa")])
    with pytest.raises(al.SizeError, match=r"'sa/out' is 1×4×2 in the clean run and 1×3×2 in the "
                                           r"corrupted one.*same sizes"):
        al.explain.patching(seq, torch.randn(1, 4, 2), torch.randn(1, 3, 2), ["sa"],
                            lambda out: out.sum())
    with pytest.raises(al.ArgumentError, match=r"the metric must return a number .* returned "
                                               r"Tensor of size \(1, 4, 2\)"):
        al.explain.patching(seq, torch.randn(1, 4, 2), torch.randn(1, 4, 2), ["sa"],
                            lambda out: out)
    assert not math.isnan(float(got.values[0, 0]))
    with pytest.raises(al.ArgumentError, match=r"patching: names is empty, so there is nothing "
                                               r"to patch.*names=\['h\.\*\.attn/heads'\]"):
        al.explain.patching(seq, torch.randn(1, 4, 2), torch.randn(1, 4, 2), [],
                            lambda out: out.sum())


def _nested_lm():
    return al.Network([
        L.TokenInput(name="ids"), L.Embedding(VOCAB, 8, name="emb"),
        al.blocks.transformer_encoder(8, 2, 16, dropout=0.0, causal=True, name="enc0"),
        al.blocks.transformer_encoder(8, 2, 16, dropout=0.0, causal=True, name="enc1"),
        L.LayerNorm(name="norm"), L.Dense(VOCAB, name="head")]).eval()


def test_logit_lens_reads_nested_blocks_and_the_layers_after_them():
    net = _nested_lm()
    ids = torch.randint(0, VOCAB, (2, 5))
    lens = al.explain.logit_lens(net, ids)
    assert lens.blocks == ["enc0", "enc1"]
    with torch.no_grad():
        first = net.trace(ids, capture=["enc0"])["enc0"]
        by_hand = net.layer_modules["head"](net.layer_modules["norm"](first))
        assert torch.allclose(lens.logits[0], by_hand)
        assert torch.equal(lens.logits[1], net(ids))


def test_logit_lens_names_a_network_without_a_name_in_words():
    net = al.Network([L.TokenInput(name="ids"), L.Embedding(VOCAB, 8, name="emb"),
                      al.blocks.transformer_encoder(8, 2, 16, name="enc0"),
                      L.Dense(VOCAB, name="head")])
    with pytest.raises(al.NetworkError, match=r"; the network has attention that is not causal\."):
        al.explain.logit_lens(net, torch.randint(0, VOCAB, (1, 3)))
