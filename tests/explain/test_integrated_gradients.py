"""Integrated gradients: completeness (the attributions sum to f(x) − f(baseline) within
1 %) on a classifier, a token model, a time-series model and an image model; the quadrature;
targets, baselines and errors by content."""
import matplotlib
import numpy as np
import pytest
import torch

import attnlab as al
from attnlab import layers as L
from attnlab.explain.gradients import integrate, nodes, path
from pretrained_helpers import quiet_transformers, save_checkpoint, tiny_gpt2

transformers = pytest.importorskip("transformers")
quiet_transformers()


def _complete(attr, tol=0.01):
    assert attr.delta.abs().min() > 1e-3                     # a difference worth explaining
    assert (attr.error.abs() <= tol * attr.delta.abs()).all(), (attr.error, attr.delta)


def _classifier():
    return al.Network([L.FeatureInput(5, name="x"), L.Dense(8, name="fc1"), L.Tanh(name="act"),
                       L.Dense(3, name="fc2")])


def test_completeness_on_a_classifier():
    net = _classifier().eval()
    x = torch.randn(4, 5)
    attr = al.explain.integrated_gradients(net, x, 2)
    assert attr.values.shape == (4, 5) and attr.kind == "features"
    with torch.no_grad():
        want = net(x)[:, 2] - net(torch.zeros_like(x))[:, 2]
    assert torch.allclose(attr.delta, want)
    _complete(attr)


def test_a_linear_model_gets_exactly_input_times_weight():
    net = al.Network([L.FeatureInput(4, name="x"), L.Dense(2, name="fc")]).eval()
    x, base = torch.randn(3, 4), torch.randn(3, 4)
    attr = al.explain.integrated_gradients(net, x, 1, baseline=base, steps=1)
    w = net.learnables["fc/weight"][1].detach()
    assert torch.allclose(attr.values, (x - base) * w, atol=1e-6)


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    return al.from_pretrained(tiny_gpt2(tmp_path_factory.mktemp("gpt2"), 40)[1])


def test_completeness_on_a_token_model_per_token_through_the_embedding(gpt2):
    ids = torch.randint(0, 40, (2, 6))
    attr = al.explain.integrated_gradients(gpt2, ids, (5, 7))
    assert attr.kind == "tokens" and attr.values.shape == (2, 6)
    assert attr.full.shape == (2, 6, 16)
    assert torch.allclose(attr.values, attr.full.sum(-1))
    assert attr.labels == ids.tolist() and attr.input_name == "input_ids"
    _complete(attr)
    # the zero embedding is the baseline: f(baseline) is the model with wte's output zeroed
    with torch.no_grad():
        fx = gpt2(ids)[:, 5, 7]
        fb = gpt2.trace(ids, patch={"wte": lambda e: torch.zeros_like(e)}).outputs[:, 5, 7]
    assert torch.allclose(attr.delta, fx - fb, atol=1e-6)


def test_a_token_baseline_of_pad_ids_starts_from_their_embedding(gpt2):
    ids = torch.randint(1, 40, (1, 5))
    pads = torch.zeros_like(ids)
    attr = al.explain.integrated_gradients(gpt2, ids, lambda out: out[:, -1].logsumexp(-1),
                                           baseline=pads)
    with torch.no_grad():
        want = gpt2(ids)[:, -1].logsumexp(-1) - gpt2(pads)[:, -1].logsumexp(-1)
    assert torch.allclose(attr.delta, want, atol=1e-6)
    _complete(attr)


def test_completeness_on_a_time_series_model():
    net = al.Network([L.SequenceInput(3, name="x"), L.SelfAttention(2, 8, name="sa"),
                      L.GlobalAvgPool1d(name="pool"), L.Dense(2, name="fc")]).eval()
    x = torch.randn(2, 7, 3)
    attr = al.explain.integrated_gradients(net, x, 0)
    assert attr.values.shape == (2, 7, 3) and attr.kind == "sequence"
    _complete(attr)


def test_completeness_on_an_image_model():
    net = al.Network([L.ImageInput((2, 6, 6), name="img"), L.Conv2d(3, 4, name="conv"),
                      L.ReLU(name="relu"), L.GlobalAvgPool2d(name="pool"),
                      L.Dense(3, name="fc")]).eval()
    x = torch.randn(2, 2, 6, 6)
    attr = al.explain.integrated_gradients(net, x, 1, baseline=torch.full((2, 6, 6), 0.5))
    assert attr.values.shape == (2, 2, 6, 6) and attr.kind == "image"
    _complete(attr)
    fig = attr.plot(batch=1)
    assert fig.axes[0].get_xlabel() == "width (pixels)"
    matplotlib.pyplot.close(fig)


def test_gauss_legendre_integrates_polynomials_exactly():
    alphas, weights = nodes(3)
    assert float(weights.sum()) == pytest.approx(1.0)
    for k in range(6):                              # degree ≤ 2·3 − 1
        assert float((weights * alphas ** k).sum()) == pytest.approx(1 / (k + 1), abs=1e-12)
    x, base = torch.tensor([[2.0, 4.0]]), torch.tensor([[0.0, 2.0]])
    pts = path(x, base, torch.tensor([0.0, 0.5, 1.0]))
    assert torch.equal(pts, torch.tensor([[0.0, 2.0], [1.0, 3.0], [2.0, 4.0]]))
    grads = torch.tensor([[1.0, 1.0], [3.0, 3.0]])               # two steps of batch 1
    assert torch.equal(integrate(grads, torch.tensor([0.25, 0.75]), 1), torch.tensor([[2.5, 2.5]]))


def test_few_steps_of_a_riemann_sum_would_miss_what_gauss_legendre_gets():
    net = _classifier().eval()
    x = torch.randn(2, 5) * 3
    exact = al.explain.integrated_gradients(net, x, 0, steps=16)
    _complete(exact, tol=1e-3)
    # a left Riemann sum of as many steps, for contrast
    a = torch.arange(16) / 16
    z = path(x, torch.zeros_like(x), a).requires_grad_(True)
    (g,) = torch.autograd.grad(net(z)[:, 0].sum(), z)
    riemann = (x * g.reshape(16, 2, 5).mean(0)).sum(1)
    assert (riemann - exact.delta).abs().max() > (exact.error.abs().max() * 10)


def test_the_token_plot_labels_its_bars_by_token(gpt2):
    ids = torch.tensor([[5, 9, 2]])
    fig = al.explain.integrated_gradients(gpt2, ids, (2, 1), steps=8).plot()
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["5", "9", "2"]
    assert ax.get_xlabel() == "token" and ax.get_ylabel() == "attribution"
    matplotlib.pyplot.close(fig)


@pytest.mark.parametrize("target, message", [
    (4, r"output index 4 is outside|target index 4 is outside the output's dimension 1 of "
        r"size 3\. Give one in -3 … 2"),
    ((0, 1), r"each item's output is 3, so the target is a class index; received \(0, 1\)"),
    ("cat", r"target must be an output index \(class\), a \(position, class\) pair or a "
            r"function of the outputs, received 'cat'"),
    (lambda out: out, r"the target function must return one value per batch item \(a tensor "
                      r"of size 2\), returned \(2, 3\)"),
])
def test_a_wrong_target_is_refused_by_content(target, message):
    with pytest.raises(al.ArgumentError if not isinstance(target, int) else al.SizeError,
                       match=message):
        al.explain.integrated_gradients(_classifier(), torch.randn(2, 5), target, steps=2)


def test_a_sequence_output_asks_for_a_position_and_class(gpt2):
    with pytest.raises(al.ArgumentError, match=r"integrated_gradients: each item's output is "
                                               r"4×40, so the target is a \(position, class\) "
                                               r"pair; received 3"):
        al.explain.integrated_gradients(gpt2, torch.randint(0, 40, (1, 4)), 3, steps=2)


@pytest.mark.parametrize("steps", [0, 2.5, True])
def test_steps_must_be_a_positive_integer(steps):
    with pytest.raises(al.ArgumentError, match=rf"steps must be a positive integer, received "
                                               rf"{steps!r}"):
        al.explain.integrated_gradients(_classifier(), torch.randn(1, 5), 0, steps=steps)


def test_a_baseline_of_the_wrong_size_and_inputs_not_tensors_are_refused():
    with pytest.raises(al.SizeError, match=r"the baseline of size 4 does not broadcast to "
                                           r"input 'x' of size 2×5"):
        al.explain.integrated_gradients(_classifier(), torch.randn(2, 5), 0,
                                        baseline=torch.zeros(4))
    with pytest.raises(al.ArgumentError, match=r"expected the inputs as a tensor .* received "
                                               r"list"):
        al.explain.integrated_gradients(_classifier(), [np.zeros(5)], 0)


def test_a_padded_time_series_keeps_its_mask_on_every_step():
    net = al.Network([L.SequenceInput(2, name="x"), L.SelfAttention(1, 4, name="sa"),
                      L.GlobalAvgPool1d(name="pool"), L.Dense(2, name="fc")]).eval()
    batch = al.pad_sequences([torch.randn(5, 2), torch.randn(3, 2)])
    attr = al.explain.integrated_gradients(net, batch, 1)
    _complete(attr)
    assert attr.values[1, 3:].abs().max() == 0          # padding is no input
    with torch.no_grad():
        want = net(batch)[:, 1] - net(al.Padded(torch.zeros(2, 5, 2), batch.mask))[:, 1]
    assert torch.allclose(attr.delta, want)


def test_tokens_go_through_the_embedding_when_a_position_layer_reads_the_ids_too(tmp_path):
    torch.manual_seed(3)
    hf = transformers.RobertaForSequenceClassification(transformers.RobertaConfig(
        num_hidden_layers=1, hidden_size=16, num_attention_heads=2, intermediate_size=24,
        vocab_size=40, max_position_embeddings=20, num_labels=2, pad_token_id=1)).eval()
    net = al.from_pretrained(save_checkpoint(hf, tmp_path))
    ids = torch.randint(3, 40, (1, 6))
    attr = al.explain.integrated_gradients(net, ids, 1)
    _complete(attr)
    assert attr.full.shape == (1, 6, 16)


def test_a_token_input_read_by_two_layers_neither_an_embedding_is_refused():
    net = al.Network([L.TokenInput(name="ids"), L.TokenPositionEmbedding(8, 4, 0, name="p1")])
    net.add(L.TokenPositionEmbedding(8, 4, 0, name="p2"))
    net.connect("ids", "p2")
    with pytest.raises(al.NetworkError, match=r"token input 'ids' is read by 2 layers \(p1, "
                                              r"p2\) and none or several of them is an "
                                              r"Embedding"):
        al.explain.integrated_gradients(net, torch.ones(1, 3, dtype=torch.long),
                                        lambda out: out["p1"].sum((1, 2)))


@pytest.fixture(scope="module")
def t5(tmp_path_factory):
    torch.manual_seed(0)
    model = transformers.T5ForConditionalGeneration(transformers.T5Config(
        num_layers=1, num_decoder_layers=1, d_model=16, d_kv=4, num_heads=2, d_ff=24,
        vocab_size=40, decoder_start_token_id=0)).eval()
    return al.from_pretrained(save_checkpoint(model, tmp_path_factory.mktemp("t5")))


def test_a_result_that_misses_completeness_is_refused_and_a_pad_baseline_fixes_it(t5):
    # T5's zero embedding is a special point: its RMSNorms make f jump within α < 1e-7,
    # which no quadrature of 64 steps sees
    ids = torch.tensor([[5, 9, 3, 7, 2, 8]])
    inputs = {"input_ids": ids, "decoder_input_ids": ids[:, :4]}
    with pytest.raises(al.ArgumentError, match=r"integrated_gradients: the attributions of item "
                                               r"0 sum to .*, but f\(x\) − f\(baseline\) is .* "
                                               r"off, more than the tolerance of 1\.0%.*raise "
                                               r"steps \(e\.g\. steps=256\) or start from a "
                                               r"baseline nearer the input"):
        al.explain.integrated_gradients(t5, inputs, (3, 5))
    loose = al.explain.integrated_gradients(t5, inputs, (3, 5), tolerance=None)
    assert (loose.error.abs() > 0.01 * loose.delta.abs()).all()
    _complete(al.explain.integrated_gradients(t5, inputs, (3, 5),
                                              baseline=torch.zeros_like(ids)))


@pytest.mark.parametrize("tolerance", [0, -0.1, "1%", True])
def test_tolerance_must_be_a_positive_number_or_none(tolerance):
    with pytest.raises(al.ArgumentError, match=r"tolerance must be a positive number or None, "
                                               rf"received {tolerance!r}"):
        al.explain.integrated_gradients(_classifier(), torch.randn(1, 5), 0, tolerance=tolerance)
