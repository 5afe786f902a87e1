"""sequenceFoldingLayer / sequenceUnfoldingLayer: a convolution per frame of an image
sequence (a CNN-LSTM for video), with MATLAB's frame order and padded steps kept out."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import attnlab as al
from attnlab import layers as L
from attnlab.core.errors import ArgumentError, FormatError, SizeError
from attnlab.matlab import mlayers as ML
from attnlab.matlab import run_code
import attnlab.matlab as M

pytest.importorskip("tree_sitter_matlab")

H, W, C = 4, 3, 2          # a frame h×w×c, unequal sizes so that a swapped axis shows

SCRIPT = """
layers = [
    sequenceInputLayer([8 8 3], Name="input")
    sequenceFoldingLayer(Name="fold")
    convolution2dLayer(3, 4, Padding="same", Name="conv")
    batchNormalizationLayer(Name="bn")
    reluLayer(Name="relu")
    maxPooling2dLayer(2, Stride=2, Name="pool")
    sequenceUnfoldingLayer(Name="unfold")
    flattenLayer(Name="flatten")
    lstmLayer(6, OutputMode="last", Name="lstm")
    fullyConnectedLayer(2, Name="fc")
    softmaxLayer(Name="softmax")
    classificationLayer(Name="out")];
lgraph = layerGraph(layers);
lgraph = connectLayers(lgraph, "fold/miniBatchSize", "unfold/miniBatchSize");
o = trainingOptions("adam", MaxEpochs=1, MiniBatchSize=4, Shuffle="never", Verbose=false);
net = trainNetwork(X, Y, lgraph, o);
s = predict(net, X);
"""


def _matlab_flat(frame: np.ndarray) -> np.ndarray:
    return frame.reshape(-1, order="F")         # MATLAB's column-major flatten of h×w×c


def _frames(lengths, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((t, H, W, C)).astype(np.float32) for t in lengths]


def _fold_net(frame=(H, W, C)):
    net = al.Network()
    net.add([L.SequenceInput(int(np.prod(frame)), name="x"), ML.SequenceFolding(frame, name="fold"),
             ML.SequenceUnfolding(name="unfold")])
    net.connect("fold/miniBatchSize", "unfold/miniBatchSize")
    return net


def test_fold_gives_each_frame_as_an_image_in_matlab_order():
    frames = _frames([2])[0]                                        # T×h×w×c
    x = torch.tensor(np.stack([_matlab_flat(f) for f in frames]))[None]   # 1×T×(h·w·c)
    fold = ML.SequenceFolding((H, W, C), name="fold")
    images, seq = fold.build({"in": al.Spec.sequence(H * W * C)})(x)
    assert images.shape == (2, C, H, W)
    assert torch.equal(images, torch.tensor(frames).permute(0, 3, 1, 2))   # image[t, c, i, j] = frame[t][i, j, c]
    assert seq is x


def test_unfold_flattens_as_matlab_so_a_flatten_layer_passes_through():
    net = _fold_net()
    net.initialize()
    frames = _frames([3, 2])
    x = torch.tensor(np.stack([[_matlab_flat(f) for f in fs[:2]] for fs in frames]))
    assert torch.equal(net(x), x)                            # fold then unfold: the same sequence
    with pytest.warns(M.MatlabNote, match="column-major"):
        lgraph = M.layerGraph([M.sequenceInputLayer([H, W, C]), M.sequenceFoldingLayer(Name="f"),
                               M.sequenceUnfoldingLayer(Name="u"), M.flattenLayer(Name="flat")])
    assert [type(l).__name__ for l in lgraph.layers] == ["SequenceInput", "SequenceFolding",
                                                         "SequenceUnfolding", "FrameFlatten"]
    assert lgraph.layers["f"].frame == [H, W, C]             # learnt from the input layer


def test_padded_steps_are_not_folded_and_come_back_as_padding():
    net = _fold_net()
    net.initialize()
    a, b = (torch.tensor(np.stack([_matlab_flat(f) for f in fs])) for fs in _frames([3, 1]))
    y = net([a, b])                                             # a padded batch of two
    assert y.shape == (2, 3, H * W * C)
    assert torch.equal(y[0], a) and torch.equal(y[1, :1], b)
    assert torch.count_nonzero(y[1, 1:]) == 0


def test_unfold_is_contract_clean_with_its_fold(tmp_path):
    net = _fold_net()
    analysis = net.analyze()
    assert analysis.ok, analysis
    assert str(analysis.out_specs["fold"]["out"]) == f"B×{C}×{H}×{W}"
    assert str(analysis.out_specs["unfold"]["out"]) == f"B×T×{H * W * C}"
    net.initialize()
    assert analysis.total_learnables == 0 and sum(p.numel() for p in net.parameters()) == 0
    x = torch.randn(2, 5, H * W * C, requires_grad=True)
    y = net(x)
    assert tuple(y.shape) == (2, 5, H * W * C)
    y.pow(2).mean().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()
    net.save(tmp_path / "fold.attn")
    back = al.load(tmp_path / "fold.attn")
    assert [type(l).__name__ for l in back.layers] == ["SequenceInput", "SequenceFolding",
                                                       "SequenceUnfolding"]
    assert back.layers["fold"].frame == [H, W, C]
    assert torch.equal(back(x.detach()), x.detach())


def test_cnn_lstm_script_trains_and_padding_does_not_leak():
    g = torch.Generator().manual_seed(0)
    X = [torch.randn(t, 8 * 8 * 3, generator=g) for t in (3, 5, 4, 3)]
    torch.manual_seed(0)
    ws = run_code(SCRIPT, {"X": X, "Y": M.categorical(np.array(["a", "b", "a", "b"]))},
                  out=lambda *a: None)
    net = ws["net"]
    assert net.training_info.stop_reason == "max-epochs"
    assert [type(l).__name__ for l in net.layers][:3] == ["SequenceInput", "SequenceFolding",
                                                          "Conv2d"]
    s = np.asarray(ws["s"])
    assert s.shape == (4, 2)
    alone = np.concatenate([np.asarray(M.predict(net, [x])) for x in X])
    np.testing.assert_allclose(s, alone, atol=1e-5)           # each sequence as if alone


def test_fold_errors_name_the_layer_what_came_and_the_fix():
    net = al.Network()
    net.add([L.SequenceInput(12, name="x"), ML.SequenceFolding(name="fold")])
    with pytest.raises(SizeError) as e:
        net.initialize()
    msg = str(e.value)
    assert "layer 'fold' port 'in'" in msg and "B×T×12" in msg and "sequenceInputLayer([h w c])" in msg
    net = al.Network()
    net.add([L.SequenceInput(10, name="x"), ML.SequenceFolding((H, W, C), name="fold")])
    with pytest.raises(SizeError, match=r"layer 'fold' port 'in': expected B×T×24 \(frames "
                                        r"4×3×2, flattened\), received B×T×10"):
        net.initialize()
    net = al.Network()
    net.add([L.SequenceInput(24, name="x"), ML.SequenceFolding((H, W, C), name="fold"),
             ML.SequenceUnfolding(name="unfold")])
    net.add(L.FeatureInput(3, name="f"))
    net.connect("f", "unfold/miniBatchSize")
    with pytest.raises(FormatError, match=r"layer 'unfold' port 'miniBatchSize': expected B×T×C"
                                          r".*fold/miniBatchSize"):
        net.initialize()
    with pytest.raises(ArgumentError, match=r"layer 'f': expected frame as \[h w c\].*received \(2, 0, 1\)"):
        ML.SequenceFolding((2, 0, 1), name="f")


def test_a_fold_connected_from_the_input_in_a_graph_learns_the_frame_size():
    ws = run_code("lg = layerGraph(sequenceInputLayer([4 3 2], Name='in'));\n"
                  "lg = addLayers(lg, [sequenceFoldingLayer(Name='fold') "
                  "convolution2dLayer(2, 5, Name='conv') sequenceUnfoldingLayer(Name='unfold')]);\n"
                  "lg = connectLayers(lg, 'in', 'fold');\n"
                  "lg = connectLayers(lg, 'fold/miniBatchSize', 'unfold/miniBatchSize');\n"
                  "net = dlnetwork(lg);", out=lambda *a: None)
    net = ws["net"]
    assert net.layers["fold"].frame == [4, 3, 2]
    assert str(net.analyze().out_specs["conv"]["out"]) == "B×5×3×2"
    assert tuple(net(torch.randn(2, 3, 24)).shape) == (2, 3, 30)
