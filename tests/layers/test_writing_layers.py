"""Layer kinds written outside attnlab, exactly as docs/writing-layers.md defines them (a norm
that declares `time_local`, a running mean with a registered stepper), work everywhere a
built-in layer does: analysis, padded batches, training, streaming, saving and ONNX export.
Also: which built-in layers declare `time_local`, and that streaming and target matching read
that one declaration."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import attnlab as al
from attnlab import layers as L
from attnlab.layers.base import LAYER_TYPES
from doc_blocks import fences

PAGE = Path(__file__).resolve().parents[2] / "docs" / "writing-layers.md"


@pytest.fixture(scope="module")
def page():
    """The page's layer classes (the blocks that define classes, run as the page runs them);
    they leave the layer registry after this module."""
    before = dict(LAYER_TYPES)
    ns: dict = {"__name__": "__writing_layers__"}
    for b in fences(PAGE.read_text(encoding="utf-8")):
        if b.lang == "python" and "\nclass " in "\n" + b.code:
            exec(compile(b.code, f"{PAGE.name} line {b.line}", "exec"), ns)
    yield ns
    LAYER_TYPES.clear()
    LAYER_TYPES.update(before)


def _net(page, eps=1e-5):
    torch.manual_seed(0)
    return al.Network([L.SequenceInput(3, name="x"), L.Dense(4, name="fc"),
                       page["RunningMean"](name="mean"), page["ScaleNorm"](eps, name="norm"),
                       L.Dense(2, name="out")])


def test_the_page_defines_both_kinds(page):
    assert page["ScaleNorm"].time_local is True and page["RunningMean"].time_local is False
    assert LAYER_TYPES["ScaleNorm"] is page["ScaleNorm"]          # registered by its definition
    assert LAYER_TYPES["RunningMean"] is page["RunningMean"]


def test_analysis_counts_and_names_the_port(page):
    a = _net(page).analyze()
    assert a.ok and a.total_learnables == (3 * 4 + 4) + 1 + (4 * 2 + 2)
    assert a.out_specs["norm"]["out"].labels == "BTC"
    bad = al.Network([L.FeatureInput(3, name="f"), page["RunningMean"](name="mean")]).analyze()
    assert not bad.ok
    msg = bad.issues[0].message
    assert "layer 'mean' port 'in'" in msg and "B×T×C" in msg and "give it sequences" in msg


def test_forward_is_the_running_mean_scaled(page):
    net = _net(page)
    x = torch.randn(2, 5, 3)
    h = net.layer_modules["fc"](x)
    mean = h.cumsum(1) / torch.arange(1, 6).view(1, -1, 1)
    y = mean * torch.rsqrt(mean.pow(2).mean(-1, keepdim=True) + 1e-5)
    assert torch.allclose(net(x), net.layer_modules["out"](y), atol=1e-6)


def test_padded_batches_equal_each_sequence_alone(page):
    net = _net(page).eval()
    seqs = [torch.randn(6, 3), torch.randn(2, 3), torch.randn(4, 3)]
    for batch in (seqs, al.pad_sequences(seqs)):
        together = net.predict(batch)
        for i, s in enumerate(seqs):
            alone = net.predict([s])[0]
            assert torch.allclose(together[i][:len(s)], alone[:len(s)], atol=1e-6)


def test_one_epoch_of_training_moves_the_custom_learnable(page):
    net = _net(page)
    X = torch.randn(16, 5, 3)
    Y = X.cumsum(1)[:, :, :2]
    net.initialize()
    gain = net.layer_modules["norm"].gain.detach().clone()
    info = al.train(net, X, Y, loss="mse", max_epochs=1, batch_size=8, learning_rate=0.05,
                    verbose=False)
    assert info.final_loss is not None and np.isfinite(info.final_loss)
    assert not torch.equal(net.layer_modules["norm"].gain.detach(), gain)


def test_streaming_equals_the_full_forward_in_any_chunks(page):
    net = _net(page).eval()
    x = torch.randn(2, 9, 3)
    full = net(x)
    s = net.stream()
    steps = torch.cat([s.step(x[:, t:t + 1]) for t in range(9)], 1)
    assert torch.allclose(steps, full, atol=1e-6)
    s.reset()
    chunks = torch.cat([s.step(x[:, :4]), s.step(x[:, 4:5]), s.step(x[:, 5:])], 1)
    assert torch.allclose(chunks, full, atol=1e-6)
    assert type(s.steppers["mean"]).__name__ == "RunningMeanStepper"


def test_a_layer_that_claims_nothing_is_refused_with_the_fix(page):
    class _Shifted(page["ScaleNorm"]):       # a subclass that takes the claim back
        time_local = False

    net = al.Network([L.SequenceInput(3, name="x"), _Shifted(name="odd")]).eval()
    with pytest.raises(al.NetworkError) as e:
        net.stream()
    msg = str(e.value)
    assert "layer 'odd'" in msg and "no step-wise form" in msg and "register_stepper" in msg


def test_save_and_load_keep_type_config_and_weights(page, tmp_path):
    net = _net(page, eps=1e-3)
    x = torch.randn(2, 5, 3)
    net.initialize()
    with torch.no_grad():
        net.layer_modules["norm"].gain.fill_(2.5)
    net.save(tmp_path / "m.attnlab")
    again = al.load(tmp_path / "m.attnlab")
    assert type(again.layers["norm"]) is page["ScaleNorm"] and again.layers["norm"].eps == 1e-3
    assert type(again.layers["mean"]) is page["RunningMean"]
    assert again.layer_modules["norm"].gain.detach().tolist() == [2.5]
    assert torch.allclose(again(x), net(x))


def test_onnx_export_runs_in_onnxruntime(page, tmp_path):
    ort = pytest.importorskip("onnxruntime")
    net = _net(page).eval()
    exported = net.export_onnx(tmp_path / "m.onnx")
    assert exported.max_error is not None and exported.max_error < 1e-4
    x = torch.randn(3, 8, 3)                          # another batch and length than traced
    session = ort.InferenceSession(str(exported.path))
    [y] = session.run(None, exported.feeds(x))
    assert np.allclose(y, net(x).detach().numpy(), atol=1e-5)


def test_target_matching_walks_over_time_local_layers_only(page):
    # a sequence output given one target per sequence: the time reduction goes after the last
    # layer that mixes steps, so the walk back crosses ScaleNorm and Dense but stops at the
    # running mean
    net = _net(page)
    with pytest.raises(al.FormatError) as e:
        al.train(net, torch.randn(8, 5, 3), torch.randn(8, 2), loss="mse", max_epochs=1,
                 verbose=False)
    msg = str(e.value)
    assert "after 'mean' (before 'norm')" in msg and "GlobalAvgPool1d" in msg


TIME_LOCAL = ["Dense", "ReLU", "LeakyReLU", "GELU", "Tanh", "Sigmoid", "Softmax", "Dropout",
              "LayerNorm", "BatchNorm", "Embedding", "Addition", "Multiplication"]
ALONG_TIME = ["SequenceInput", "Conv1d", "LSTM", "GRU", "SelfAttention", "MultiHeadAttention",
              "Attention", "AttentionPool1d", "GlobalAvgPool1d", "GlobalMaxPool1d", "Index1d",
              "PositionEmbedding", "SinusoidalPositionEncoding", "Concatenation", "Module"]


def test_built_in_layers_declare_how_they_behave_along_time():
    assert L.Layer.time_local is False
    assert [n for n in TIME_LOCAL if getattr(L, n).time_local is not True] == []
    assert [n for n in ALONG_TIME if getattr(L, n).time_local is not False] == []
    from attnlab.matlab import mlayers, vit_layers
    for cls in (mlayers.InputNormalization, mlayers.Scaling, mlayers.Identity,
                mlayers.FrameFlatten, vit_layers.Swish, vit_layers.TanhGELU):
        assert cls.time_local is True, cls.__name__
    assert mlayers.SpatialDropout.time_local is False     # one mask over all steps in training


def test_time_local_matlab_layers_stream():
    from attnlab.matlab import mlayers, vit_layers
    torch.manual_seed(0)
    net = al.Network([L.SequenceInput(3, name="x"),
                      mlayers.InputNormalization("zscore", mean=0.5, std=2.0, name="norm"),
                      mlayers.Scaling(2.0, 1.0, name="scale"), vit_layers.Swish(name="swish"),
                      L.Dense(2, name="fc")]).eval()
    x = torch.randn(1, 4, 3)
    s = net.stream()
    steps = torch.cat([s.step(x[:, t:t + 1]) for t in range(4)], 1)
    assert torch.allclose(steps, net(x), atol=1e-6)


def test_batch_norm_streams_in_evaluation_only():
    net = al.Network([L.SequenceInput(3, name="x"), L.BatchNorm(name="bn")])
    with pytest.raises(al.NetworkError, match="net.eval()"):
        net.stream()
    net.eval()
    x = torch.randn(2, 3, 3)
    s = net.stream()
    assert torch.allclose(torch.cat([s.step(x[:, :1]), s.step(x[:, 1:])], 1), net(x), atol=1e-6)
