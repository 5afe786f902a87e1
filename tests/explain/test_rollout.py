"""Attention rollout and relevance against their formulas computed from transformers'
`output_attentions` on tiny GPT-2, BERT (a padded batch) and ViT checkpoints."""
import matplotlib
import pytest
import torch

import attnlab as al
from attnlab import layers as L
from pretrained_helpers import quiet_transformers, save_checkpoint, tiny_bert, tiny_gpt2

transformers = pytest.importorskip("transformers")
quiet_transformers()

VOCAB = 40


def _abnar(attentions, t):
    """Abnar & Zuidema's rollout: the product of 0.5·mean_h(A) + 0.5·I over the layers."""
    r = torch.eye(t).expand(attentions[0].shape[0], t, t)
    for a in attentions:
        r = (0.5 * a.mean(1) + 0.5 * torch.eye(t)) @ r
    return r


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    model, folder = tiny_gpt2(tmp_path_factory.mktemp("gpt2"), VOCAB,
                              attn_implementation="eager")
    return model, al.from_pretrained(folder)


def test_rollout_equals_abnars_formula_on_gpt2(gpt2):
    hf, net = gpt2
    ids = torch.randint(0, VOCAB, (2, 7))
    got = al.explain.rollout(net, ids)
    with torch.no_grad():
        attentions = hf(ids, output_attentions=True).attentions
    assert got.layers == ["h.0.attn", "h.1.attn"] and got.basis == "input_ids"
    assert torch.allclose(got.values, _abnar(attentions, 7), atol=1e-5)
    assert got.labels == ids.tolist()


def test_rollout_equals_abnars_formula_on_a_padded_bert_batch(tmp_path):
    hf, folder = tiny_bert(tmp_path, VOCAB, layers=2, seed=1, attn_implementation="eager")
    net = al.from_pretrained(folder)
    ids = torch.randint(1, VOCAB, (2, 6))
    mask = torch.tensor([[1] * 6, [1] * 4 + [0] * 2])
    got = al.explain.rollout(net, {"input_ids": ids, "attention_mask": mask})
    with torch.no_grad():
        attentions = hf(input_ids=ids, attention_mask=mask, output_attentions=True).attentions
    want = _abnar(attentions, 6)
    for b, n in enumerate((6, 4)):      # padded steps are no token: the valid block compares
        assert torch.allclose(got.values[b, :n, :n], want[b, :n, :n], atol=1e-5)
    assert got.values[1, :4, 4:].abs().max() == 0      # nothing flows from padding


def test_rollout_equals_abnars_formula_on_vit_over_the_class_token_and_patches(tmp_path):
    torch.manual_seed(2)
    hf = transformers.ViTForImageClassification(transformers.ViTConfig(
        num_hidden_layers=2, hidden_size=16, num_attention_heads=2, intermediate_size=24,
        image_size=8, patch_size=4, num_labels=3, attn_implementation="eager")).eval()
    net = al.from_pretrained(save_checkpoint(hf, tmp_path))
    x = torch.randn(2, 3, 8, 8)
    got = al.explain.rollout(net, x)
    with torch.no_grad():
        attentions = hf(pixel_values=x, output_attentions=True).attentions
    assert got.values.shape == (2, 5, 5) and got.kind == "image"   # class token + 4 patches
    assert torch.allclose(got.values, _abnar(attentions, 5), atol=1e-5)


def test_relevance_equals_chefers_formula_on_gpt2(gpt2):
    hf, net = gpt2
    ids = torch.randint(0, VOCAB, (2, 6))
    got = al.explain.relevance(net, ids, (5, 3))
    out = hf(ids, output_attentions=True)
    grads = torch.autograd.grad(out.logits[:, 5, 3].sum(), out.attentions)
    r = torch.eye(6).expand(2, 6, 6)
    for a, g in zip(out.attentions, grads):
        r = r + (g * a).clamp_min(0).mean(1) @ r
    assert got.method == "relevance" and got.layers == ["h.0.attn", "h.1.attn"]
    assert torch.allclose(got.values, r.detach(), atol=1e-6)
    assert (got.values - torch.eye(6)).abs().max() > 0       # the gradients moved it


def test_relevance_takes_a_function_of_the_outputs_and_a_frozen_network(gpt2):
    hf, net = gpt2
    ids = torch.randint(0, VOCAB, (1, 5))
    by_index = al.explain.relevance(net, ids, (4, 7))
    net.requires_grad_(False)
    try:
        by_function = al.explain.relevance(net, ids, lambda out: out[:, 4, 7])
    finally:
        net.requires_grad_(True)
    assert torch.allclose(by_index.values, by_function.values)


def test_a_network_without_attention_is_refused_by_name():
    net = al.Network()
    net.add([L.SequenceInput(3, name="x"), L.Dense(2, name="fc")])
    with pytest.raises(al.NetworkError, match=r"rollout: expected a network with attention "
                                              r"layers, but .* has none.*integrated_gradients"):
        al.explain.rollout(net, torch.randn(1, 4, 3))
    with pytest.raises(al.NetworkError, match=r"relevance: expected a network with attention"):
        al.explain.relevance(net, torch.randn(1, 4, 3), lambda out: out.sum((1, 2)))


def test_the_rollout_plot_labels_its_axes_by_token(gpt2):
    _, net = gpt2
    ids = torch.tensor([[3, 1, 4, 1, 5]])
    fig = al.explain.rollout(net, ids).plot()
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["3", "1", "4", "1", "5"]
    assert "input token" in ax.get_xlabel() and ax.get_ylabel() == "output position"
    matplotlib.pyplot.close(fig)


def test_rollout_through_nested_blocks_equals_the_formula_on_their_traced_weights():
    net = al.Network([L.TokenInput(name="ids"), L.Embedding(VOCAB, 8, name="emb"),
                      al.blocks.transformer_encoder(8, 2, 16, dropout=0.0, name="enc0"),
                      al.blocks.transformer_encoder(8, 2, 16, dropout=0.0, norm="pre",
                                                    name="enc1"),
                      L.Dense(3, name="head")]).eval()
    ids = torch.randint(0, VOCAB, (2, 5))
    got = al.explain.rollout(net, ids)
    assert got.layers == ["enc0/self_attn", "enc1/self_attn"]
    with torch.no_grad():
        trace = net.trace(ids, capture=["*/scores"])
    assert list(trace) == ["enc0/self_attn/scores", "enc1/self_attn/scores"]
    want = _abnar([trace[n] for n in trace], 5)
    assert torch.allclose(got.values, want, atol=1e-6)


def test_rollout_to_an_attention_pool_over_a_padded_batch():
    net = al.Network([L.SequenceInput(3, name="x"), L.SelfAttention(2, 4, name="sa")])
    net.add(L.Addition(2, name="add"))
    net.connect("x", "add/in1")
    net.connect("sa", "add/in2")
    net.add([L.AttentionPool1d(1, name="pool"), L.Dense(2, name="fc")])
    net.connect("add", "pool")
    net.eval()
    batch = al.pad_sequences([torch.randn(5, 3), torch.randn(3, 3)])
    got = al.explain.rollout(net, batch)
    with torch.no_grad():
        trace = net.trace(batch, capture=["sa/scores", "pool/scores"])
    residual = 0.5 * trace["sa/scores"].mean(1) + 0.5 * torch.eye(5)
    assert got.layers == ["sa", "pool"] and got.kind == "sequence"
    assert got.values.shape == (2, 1, 5)                  # the pooled vector's one row
    assert torch.allclose(got.values, trace["pool/scores"].mean(1) @ residual, atol=1e-6)
    assert got.values[1, 0, 3:].abs().max() == 0
    fig = got.plot(batch=1)
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == [f"t{i}" for i in range(5)]
    matplotlib.pyplot.close(fig)
