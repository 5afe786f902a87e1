"""TrainingOptions.checkpoint_activations: each block (a nested network, or a numbered prefix
of a from_pretrained network's layers) recomputed in the backward pass, with the same outputs
and gradients as without."""
import pytest
import torch

import attnlab as al
from attnlab import layers as L
from attnlab.training.checkpointing import CheckpointedForward, block_of
from pretrained_helpers import tiny_gpt2

transformers = pytest.importorskip("transformers")


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    return tiny_gpt2(tmp_path_factory.mktemp("gpt2"), 32, resid_pdrop=0.0, embd_pdrop=0.0,
                     attn_pdrop=0.0)[1]


def _encoder_stack(dropout=0.0):
    torch.manual_seed(0)
    return al.Network([L.SequenceInput(8, name="x"),
                       al.blocks.transformer_encoder(8, 2, 16, dropout=dropout, name="enc0"),
                       al.blocks.transformer_encoder(8, 2, 16, dropout=dropout, name="enc1"),
                       L.GlobalAvgPool1d(name="pool"), L.Dense(3, name="fc")])


def _batch():
    ids = torch.tensor([[0, 0, 5, 6, 7, 8], [1, 2, 3, 4, 5, 6]])
    mask = torch.tensor([[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]])
    return {"input_ids": ids, "attention_mask": mask}


def _grads(net, run, inputs):
    net.zero_grad(set_to_none=True)
    outs, _ = run(inputs)
    loss = sum((o.float() ** 2).mean() for o in outs.values())
    loss.backward()
    return outs, {n: p.grad.clone() for n, p in net.learnables.items() if p.grad is not None}


def test_blocks_are_numbered_prefixes_and_nested_networks(gpt2):
    net = al.from_pretrained(gpt2)
    assert CheckpointedForward(net).blocks == ["h.0", "h.1"]
    assert CheckpointedForward(_encoder_stack()).blocks == ["enc0", "enc1"]
    assert block_of("model.layers.3.self_attn", None) == "model.layers.3"
    assert block_of("wte", None) is None and block_of("ln_f", None) is None


def test_a_pretrained_network_gets_the_same_outputs_and_gradients(gpt2):
    net = al.from_pretrained(gpt2)
    net.train()
    plain_out, plain = _grads(net, net.forward_with_masks, _batch())
    ckpt_out, ckpt = _grads(net, CheckpointedForward(net), _batch())
    assert torch.equal(plain_out["logits"], ckpt_out["logits"])
    assert plain.keys() == ckpt.keys() and len(plain) == len(net.learnables)
    for n in plain:
        assert torch.allclose(plain[n], ckpt[n], atol=1e-6, rtol=0), n


def test_blocks_really_run_again_in_the_backward_pass(gpt2):
    net = al.from_pretrained(gpt2)
    calls = []
    net.layer_modules["h.1.attn"].register_forward_hook(lambda *a: calls.append(1))
    _grads(net, net.forward_with_masks, _batch())
    assert len(calls) == 1
    calls.clear()
    _grads(net, CheckpointedForward(net), _batch())
    assert len(calls) == 2                     # the forward, and its recomputation
    with torch.no_grad():
        calls.clear()
        CheckpointedForward(net)(_batch())
        assert len(calls) == 1                 # nothing to recompute without gradients


def test_nested_networks_with_dropout_get_the_same_gradients():
    net = _encoder_stack(dropout=0.3)
    net.train()
    x = {"x": torch.randn(3, 5, 8, generator=torch.Generator().manual_seed(2))}
    torch.manual_seed(7)
    _, plain = _grads(net, net.forward_with_masks, x)
    torch.manual_seed(7)
    _, ckpt = _grads(net, CheckpointedForward(net), x)
    for n in plain:
        assert torch.allclose(plain[n], ckpt[n], atol=1e-6, rtol=0), n


def _train(checkpoint):
    net = _encoder_stack()
    g = torch.Generator().manual_seed(4)
    x, y = torch.randn(12, 5, 8, generator=g), torch.randint(0, 3, (12,), generator=g)
    o = al.TrainingOptions(solver="sgdm", learning_rate=0.1, max_epochs=2, batch_size=4,
                           shuffle="never", verbose=False, checkpoint_activations=checkpoint)
    info = al.train(net, x, y, "crossentropy", o)
    return net, info


def test_training_with_checkpointing_gives_the_same_weights():
    plain, a = _train(False)
    ckpt, b = _train(True)
    assert a.iterations["loss"] == pytest.approx(b.iterations["loss"], abs=1e-6)
    for (n, p), q in zip(plain.learnables.items(), ckpt.learnables.values()):
        assert torch.allclose(p, q, atol=1e-6, rtol=0), n


def test_a_network_without_blocks_is_refused_and_the_option_is_a_bool():
    net = al.Network([L.FeatureInput(4, name="x"), L.Dense(3, name="fc")])
    x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))
    with pytest.raises(al.ArgumentError, match="no blocks to recompute"):
        al.train(net, x, y, "crossentropy",
                 al.TrainingOptions(max_epochs=1, verbose=False, checkpoint_activations=True))
    with pytest.raises(al.ArgumentError, match="checkpoint_activations must be True or False"):
        al.TrainingOptions(checkpoint_activations=1)


def _hf_batch():
    ids = torch.tensor([[3, 4, 5, 6, 7, 8], [9, 10, 11, 12, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]])
    labels = ids.masked_fill(mask == 0, -100)
    labels[0, 2] = -100
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


@pytest.mark.parametrize("checkpoint", [False, True])
def test_a_causal_lm_hugging_face_batch_trains_on_transformers_loss(gpt2, checkpoint):
    """labels shifted by one inside, -100 ignored: the first step's loss is transformers'
    model(input_ids, attention_mask=…, labels=…).loss, with and without checkpointing."""
    model = transformers.GPT2LMHeadModel.from_pretrained(gpt2).eval()
    batch = _hf_batch()
    with torch.no_grad():
        theirs = float(model(**batch).loss)
    o = al.TrainingOptions(max_epochs=1, batch_size=2, shuffle="never", verbose=False,
                           checkpoint_activations=checkpoint)
    ours = al.train(al.from_pretrained(gpt2), batch, options=o).iterations["loss"][0]
    assert abs(ours - theirs) <= 1e-6, (ours, theirs)
