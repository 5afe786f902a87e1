"""ONNX export: dynamic batch and lengths, padding masks as inputs, checked with onnxruntime."""
import numpy as np
import pytest
import torch
from torch import nn

import attnlab as al
from attnlab import layers as L
from attnlab.cli.demos.seed1 import answer_network
from attnlab.io.onnx.export import export_onnx

from helpers import data_for, single_layer_net
from layers.test_layer_contract import ALL   # the shared table of layer cases

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

# exports only at fixed lengths today ('same' padding computed from the length); either outcome
# is accepted, as long as a failure names the layer and the fix
FIXED_LENGTH_ONLY = {("Conv1d", 0)}
# a score bias from an image input has fixed Tq×Tk, so the sequences must keep the example's
# length (the contract's T) in the export and its check
FIXED_SIZE_BIAS = {("Attention", 2), ("SelfAttention", 4), ("MultiHeadAttention", 2)}


def _session(path):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def _run(sess, feeds):
    return sess.run(None, {k: np.asarray(v) for k, v in feeds.items()})


def test_seed1_answer_matches_pytorch_with_padding_masks_at_other_lengths(tmp_path):
    net = answer_network()                      # 256 channels, 8 heads, as in the seed's answer
    path = tmp_path / "seed1.onnx"
    info = export_onnx(net, path)
    assert info.inputs == ["decoder-input", "decoder-input_mask", "encoder-input", "encoder-input_mask"]
    assert info.outputs == ["cross-attention"]
    assert info.max_error is not None and info.max_error < 1e-4
    sess = _session(path)
    shapes = {i.name: (i.shape, i.type) for i in sess.get_inputs()}
    assert shapes["decoder-input"] == (["batch", "decoder-input_time", 1], "tensor(float)")
    assert shapes["encoder-input_mask"] == (["batch", "encoder-input_time"], "tensor(bool)")
    assert sess.get_outputs()[0].shape == ["batch", "cross-attention_time", 256]
    net.eval()
    g = torch.Generator().manual_seed(1)
    for dec_lengths, enc_lengths in [((9, 3, 6), (12, 4, 7)), ((1, 2), (15, 15)), ((17,), (5,))]:
        dec = [torch.randn(n, 1, generator=g) for n in dec_lengths]
        enc = [torch.randn(n, 1, generator=g) for n in enc_lengths]
        with torch.no_grad():
            want = net({"decoder-input": dec, "encoder-input": enc})
        d, e = al.pad_sequences(dec), al.pad_sequences(enc)
        got, = _run(sess, {"decoder-input": d.data, "decoder-input_mask": d.mask,
                           "encoder-input": e.data, "encoder-input_mask": e.mask})
        assert got.shape == tuple(want.shape)
        np.testing.assert_allclose(got, want.numpy(), atol=1e-4, rtol=0)
        # feeds() builds the same arrays from what the network takes
        got2, = _run(sess, info.feeds({"decoder-input": dec, "encoder-input": enc}))
        np.testing.assert_array_equal(got, got2)


def test_without_mask_inputs(tmp_path):
    net = answer_network(channels=16, heads=2).eval()
    path = tmp_path / "seed1-nomask.onnx"
    info = export_onnx(net, path, masks=False)
    assert info.inputs == ["decoder-input", "encoder-input"]
    xd, xe = torch.randn(3, 11, 1), torch.randn(3, 6, 1)
    got, = _run(_session(path), {"decoder-input": xd, "encoder-input": xe})
    np.testing.assert_allclose(got, net(xd, xe).detach().numpy(), atol=1e-4, rtol=0)


@pytest.mark.parametrize("type_name,i,case", ALL, ids=[f"{t}-{i}" for t, i, _ in ALL])
def test_every_layer_type_exports_or_is_named(tmp_path, type_name, i, case):
    factory, in_specs, _ = case
    net = single_layer_net(factory(), in_specs)
    if (type_name, i) in FIXED_SIZE_BIAS:
        example = {f"x_{port}": data_for(spec) for port, spec in in_specs.items()}
        info = export_onnx(net, tmp_path / "layer.onnx", example_inputs=example,
                           dynamic_lengths=False)
        assert info.max_error < 1e-4
        return
    try:
        info = export_onnx(net, tmp_path / "layer.onnx")      # checked at other batch and lengths
    except al.NetworkError as e:
        assert (type_name, i) in FIXED_LENGTH_ONLY, str(e)
        assert f"'{net.layers[-1].name}' ({type_name})" in str(e)
        assert "dynamic_lengths=False" in str(e)
        info = export_onnx(net, tmp_path / "layer.onnx", dynamic_lengths=False)
    assert info.max_error < 1e-4
    sess = _session(tmp_path / "layer.onnx")
    assert [i.name for i in sess.get_inputs()] == info.inputs   # masks kept even when unread


def test_layers_that_cannot_export_are_listed(tmp_path):
    class Cummax(nn.Module):                  # no ONNX form of aten::cummax
        def forward(self, x):
            return torch.cummax(x, dim=1).values

    class FixedLength(nn.Module):             # int(...) freezes the length in the trace
        def forward(self, x):
            return x + torch.zeros(int(x.shape[1]), x.shape[2], device=x.device)

    net = al.Network([L.SequenceInput(3), L.Module(Cummax(), name="cummax"), L.LSTM(4),
                      L.Module(FixedLength(), name="fixed"), L.Dense(2)])
    with pytest.raises(al.NetworkError) as info:
        net.export_onnx(tmp_path / "bad.onnx")
    msg = str(info.value)
    assert "2 layer(s) cannot be exported" in msg
    assert "'cummax' (Module): the exporter fails: Exporting the operator 'aten::cummax'" in msg
    assert "'fixed' (Module): its ONNX form fails at other sizes" in msg
    assert "lstm" not in msg.split("\n", 1)[1]

    net.remove("cummax")
    net.connect("input", "lstm")
    with pytest.raises(al.NetworkError, match="with dynamic sequence lengths.*\n.*'fixed'"):
        net.export_onnx(tmp_path / "bad.onnx")
    assert export_onnx(net, tmp_path / "fixed.onnx", dynamic_lengths=False).max_error < 1e-4


def test_nested_networks_and_networks_without_input_layers(tmp_path):
    bare = al.Network([L.Dense(8, name="fc"), al.Residual(L.LayerNorm(), L.SelfAttention(2, 8)),
                       L.LSTM(6, output_mode="last"), L.Dense(2)])
    with pytest.raises(al.NetworkError, match="pass example inputs"):
        bare.export_onnx(tmp_path / "bare.onnx")
    x = [torch.randn(5, 3), torch.randn(2, 3)]
    info = export_onnx(bare, tmp_path / "bare.onnx", example_inputs=(x,))
    assert info.inputs == ["fc", "fc_mask"]
    bare.eval()
    p = al.pad_sequences([torch.randn(n, 3) for n in (9, 4, 7)])
    got, = _run(_session(tmp_path / "bare.onnx"), {"fc": p.data, "fc_mask": p.mask})
    with torch.no_grad():
        want = bare(p)
    np.testing.assert_allclose(got, want.numpy(), atol=1e-4, rtol=0)


def test_scores_outputs_tokens_and_modes(tmp_path):
    net = al.Network([L.SequenceInput(1, name="tokens"), L.Embedding(20, 8),
                      L.SelfAttention(2, 8, has_scores_output=True, attention_mask="causal",
                                      name="attn"),
                      L.Dropout(0.5)])
    net.train()
    info = export_onnx(net, tmp_path / "tok.onnx")
    assert net.training and net.layer_modules["dropout"].training     # modes restored
    assert info.outputs == ["attn/scores", "dropout"]
    sess = _session(tmp_path / "tok.onnx")
    assert sess.get_outputs()[0].shape == ["batch", 2, "attn/scores_query_time", "attn/scores_key_time"]
    tokens = torch.randint(0, 20, (2, 9, 1)).float()
    mask = torch.ones(2, 9, dtype=torch.bool)
    mask[1, 5:] = False
    scores, out = _run(sess, {"tokens": tokens, "tokens_mask": mask})
    net.eval()
    with torch.no_grad():
        want = net(al.Padded(tokens, mask))
    np.testing.assert_allclose(scores, want["attn/scores"].numpy(), atol=1e-5)
    np.testing.assert_allclose(out, want["dropout"].numpy(), atol=1e-4)
    assert np.all(scores[1, :, :, 5:] == 0)                             # padded keys get no weight


def test_a_wrong_example_input_is_reported_before_tracing(tmp_path):
    net = al.Network([L.ImageInput((1, 8, 8)), L.Conv2d(3, 4), L.GlobalAvgPool2d(), L.Dense(3)])
    with pytest.raises(al.DataError) as e:
        net.export_onnx(tmp_path / "x.onnx", example_inputs=torch.randn(2, 3))
    assert "expected B×1×8×8, received 2×3" in str(e.value) and "tensor(" not in str(e.value)
    assert not (tmp_path / "x.onnx").exists()
