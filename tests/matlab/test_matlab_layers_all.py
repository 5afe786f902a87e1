"""Every Deep Learning Toolbox layer function with a counterpart in attnlab: what it builds, what
it computes (against the formula MATLAB documents, through torch), the properties a script may
set, and the layers refused by name."""
import numpy as np
import pytest
import torch

import attnlab as al
from attnlab import layers as L
from attnlab import matlab as M
from attnlab.cli import main
from attnlab.core.errors import ArgumentError, NetworkError
from attnlab.matlab import ScriptError, run_code
from attnlab.core.sequences import Padded

pytestmark = pytest.mark.filterwarnings("ignore::attnlab.matlab.MatlabNote")


def _quiet(*a, **k):
    return None


# every layer function of MATLAB's list that attnlab builds, and the attnlab type it makes
LAYERS = [
    ("sequenceInputLayer(3)", "SequenceInput"), ("imageInputLayer([8 8 3])", "ImageInput"),
    ("featureInputLayer(4)", "FeatureInput"), ("inputLayer([3 NaN NaN], 'CBT')", "SequenceInput"),
    ("fullyConnectedLayer(4)", "Dense"), ("convolution1dLayer(3, 4)", "Conv1d"),
    ("convolution2dLayer(3, 4)", "Conv2d"), ("groupedConvolution2dLayer(3, 2, 2)", "GroupedConv2d"),
    ("lstmLayer(4)", "LSTM"), ("bilstmLayer(4)", "LSTM"), ("gruLayer(4)", "GRU"),
    ("attentionLayer(2)", "Attention"), ("selfAttentionLayer(2, 8)", "SelfAttention"),
    ("positionEmbeddingLayer(8, 16)", "PositionEmbedding"),
    ("sinusoidalPositionEncodingLayer(8)", "SinusoidalPositionEncoding"),
    ("embeddingLayer(8, 20)", "Embedding"), ("wordEmbeddingLayer(8, 20)", "WordEmbedding"),
    ("patchEmbeddingLayer(4, 8)", "PatchEmbedding"),
    ("embeddingConcatenationLayer", "EmbeddingConcatenation"),
    ("indexing1dLayer('last')", "Index1d"),
    ("layerNormalizationLayer", "LayerNorm"), ("batchNormalizationLayer", "BatchNorm"),
    ("groupNormalizationLayer(2)", "GroupNorm"), ("instanceNormalizationLayer", "GroupNorm"),
    ("crossChannelNormalizationLayer(3)", "CrossChannelNormalization"),
    ("dropoutLayer(0.2)", "Dropout"), ("spatialDropoutLayer", "SpatialDropout"),
    ("reluLayer", "ReLU"), ("leakyReluLayer(0.1)", "LeakyReLU"), ("clippedReluLayer(6)", "ClippedReLU"),
    ("eluLayer", "ELU"), ("geluLayer", "GELU"), ("geluLayer(Approximation='tanh')", "TanhGELU"),
    ("swishLayer", "Swish"), ("tanhLayer", "Tanh"), ("sigmoidLayer", "Sigmoid"),
    ("softmaxLayer", "Softmax"), ("softplusLayer", "Softplus"),
    ("maxPooling1dLayer(2)", "Pool1d"), ("averagePooling1dLayer(2)", "Pool1d"),
    ("maxPooling2dLayer(2)", "MaxPool2d"), ("averagePooling2dLayer(2)", "AvgPool2d"),
    ("globalAveragePooling1dLayer", "GlobalAvgPool1d"), ("globalMaxPooling1dLayer", "GlobalMaxPool1d"),
    ("globalAveragePooling2dLayer", "GlobalAvgPool2d"), ("globalMaxPooling2dLayer", "GlobalMaxPool2d"),
    ("flattenLayer", "Flatten"), ("additionLayer(2)", "Addition"),
    ("multiplicationLayer(2)", "Multiplication"), ("concatenationLayer(1, 2)", "MatlabConcatenation"),
    ("depthConcatenationLayer(2)", "Concatenation"), ("identityLayer", "Identity"),
    ("scalingLayer(Scale=2)", "Scaling"), ("functionLayer(@(X) X)", "Module"),
    ("resize2dLayer(Scale=2)", "Resize2d"), ("sequenceFoldingLayer", "SequenceFolding"),
    ("sequenceUnfoldingLayer", "SequenceUnfolding"),
]


@pytest.mark.parametrize("call,kind", LAYERS, ids=[c for c, _ in LAYERS])
def test_every_layer_function_builds_its_attnlab_layer(call, kind):
    layer = run_code(f"layer = {call};", out=_quiet)["layer"]
    assert type(layer).__name__ == kind


@pytest.mark.parametrize("name", ["transposedConv2dLayer", "transposedConv1dLayer",
                                  "convolution3dLayer", "lstmProjectedLayer", "preluLayer",
                                  "maxUnpooling2dLayer", "image3dInputLayer"])
def test_layers_without_a_counterpart_are_refused_by_name(name):
    with pytest.raises(ScriptError, match=f"{name}: attnlab has no counterpart of {name}"):
        run_code(f"layer = {name}(3, 4);", out=_quiet)


def _net(layers, spec):
    net = al.Network([L.SequenceInput(spec[-1]) if len(spec) == 3 else
                      L.ImageInput(tuple(spec[1:])), *layers])
    net.initialize()
    return net.eval()


def test_group_normalization_is_torch_group_norm():
    x = torch.randn(2, 6, 5, 5)
    for groups, ref in ((3, torch.nn.GroupNorm(3, 6)), ("all-channels", torch.nn.GroupNorm(1, 6)),
                        ("channel-wise", torch.nn.InstanceNorm2d(6))):
        y = _net([M.groupNormalizationLayer(groups)], x.shape)(x)
        assert torch.allclose(y, ref(x), atol=1e-5), groups
    y = _net([M.instanceNormalizationLayer()], x.shape)(x)
    assert torch.allclose(y, torch.nn.InstanceNorm2d(6)(x), atol=1e-5)


def test_group_normalization_of_sequences_leaves_the_padding_out():
    layer = M.groupNormalizationLayer(2, Name="gn")
    net = _net([layer], (1, 4, 4))
    short, long = torch.randn(3, 4), torch.randn(5, 4)
    data = torch.zeros(2, 5, 4)
    data[0, :3], data[1] = short, long
    mask = torch.tensor([[True] * 3 + [False] * 2, [True] * 5])
    y = net(Padded(data, mask))
    y = y.data if isinstance(y, Padded) else y
    alone = net(short[None])
    assert torch.allclose(y[0, :3], alone[0], atol=1e-5)       # as if it had no padding


def test_layer_normalization_operation_dimension():
    img = torch.randn(2, 3, 4, 4)
    channel_only = _net([M.layerNormalizationLayer(OperationDimension="channel-only")], img.shape)
    want = torch.nn.functional.layer_norm(img.permute(0, 2, 3, 1), (3,)).permute(0, 3, 1, 2)
    assert torch.allclose(channel_only(img), want, atol=1e-5)   # each pixel over its channels
    seq = torch.randn(2, 5, 3)
    excluded = _net([M.layerNormalizationLayer(OperationDimension="batch-excluded")], seq.shape)
    want = torch.nn.functional.layer_norm(seq, (5, 3))           # channels and time together
    assert torch.allclose(excluded(seq), want, atol=1e-5)
    assert type(M.layerNormalizationLayer(OperationDimension="spatial-channel")) is L.LayerNorm


def test_activations_follow_matlab_s_formulas():
    x = torch.linspace(-3, 8, 23).reshape(1, 23, 1)
    elu = _net([M.eluLayer(0.5)], x.shape)(x)
    assert torch.allclose(elu, torch.where(x > 0, x, 0.5 * (torch.exp(x) - 1)))
    clipped = _net([M.clippedReluLayer(6)], x.shape)(x)
    assert torch.allclose(clipped, x.clamp(0, 6))
    soft = _net([M.softplusLayer()], x.shape)(x)
    assert torch.allclose(soft, torch.log1p(torch.exp(x)))


def test_cross_channel_normalization_is_matlab_s_formula():
    x = torch.randn(1, 5, 3, 3)
    y = _net([M.crossChannelNormalizationLayer(3, Alpha=1e-2, Beta=0.75, K=2)], x.shape)(x)
    sq = torch.nn.functional.pad(x.pow(2), (0, 0, 0, 0, 1, 1))
    ss = sq[:, 0:5] + sq[:, 1:6] + sq[:, 2:7]                        # a window of 3 channels
    assert torch.allclose(y, x / (2 + 1e-2 * ss / 3) ** 0.75, atol=1e-6)


def test_resize_layer_sizes_and_values():
    x = torch.arange(16.0).reshape(1, 1, 4, 4)
    up = _net([M.resize2dLayer(Scale=2)], x.shape)
    assert up.analyze().out_specs[up.layers[-1].name]["out"].sizes[2:] == (8, 8)
    assert torch.equal(up(x)[0, 0, ::2, ::2], x[0, 0])               # nearest: each pixel twice
    to = _net([M.resize2dLayer(OutputSize=[2, 2], Method="bilinear")], x.shape)(x)
    assert torch.allclose(to, torch.nn.functional.interpolate(x, size=(2, 2), mode="bilinear",
                                                              align_corners=False))


def _concat_script(dim, first="sequenceInputLayer(3, Name='in')", ports="lstmLayer(4, Name='a')"):
    return (f"lgraph = layerGraph([{first} {ports} concatenationLayer({dim}, 2, Name='cat') "
            f"fullyConnectedLayer(2, Name='fc')]);\n"
            f"lgraph = addLayers(lgraph, fullyConnectedLayer(4, Name='b'));\n"
            f"lgraph = connectLayers(lgraph, 'in', 'b');\n"
            f"lgraph = connectLayers(lgraph, 'b', 'cat/in2');\n")


def test_concatenation_dim_is_matlab_s_dimension_of_the_data():
    a = run_code(_concat_script(1), out=_quiet)["lgraph"].analyze()
    assert a.ok and a.out_specs["cat"]["out"].channels == 8          # "CBT": 1 is channels
    a = run_code(_concat_script(3), out=_quiet)["lgraph"].analyze()
    assert a.ok and a.out_specs["cat"]["out"].channels == 4          # 3 is time
    img = run_code(_concat_script(3, "imageInputLayer([4 4 2], Name='in')",
                                  "convolution2dLayer(1, 3, Name='a')")
                   .replace("fullyConnectedLayer(4, Name='b')", "convolution2dLayer(1, 5, Name='b')"),
                   out=_quiet)["lgraph"].analyze()
    assert img.ok and img.out_specs["cat"]["out"].channels == 8      # "SSCB": 3 is channels


def _analyze(capsys, path):
    code = main(["analyze", str(path)])
    captured = capsys.readouterr()
    return code, " ".join((captured.out + captured.err).split())


def test_concatenation_along_the_batch_is_a_network_error_as_matlab_s_analysis(tmp_path, capsys):
    net = run_code(_concat_script(2), out=_quiet)["lgraph"]
    issues = net.analyze().issues
    assert any("dimension 2 of its sequence input" in i.message and "the batch" in i.message
               for i in issues)
    f = tmp_path / "cat2.m"
    f.write_text(_concat_script(2))
    code, out = _analyze(capsys, f)
    assert code == 1, out                                        # a network error, not exit 2
    assert "concatenationLayer(2, 2)" in out


def test_layer_properties_a_script_may_set_and_those_it_may_not():
    ws = run_code("d = dropoutLayer(0.2); e = d; e.Probability = 0.4; a = d.Probability;\n"
                  "b = e.Probability; layers = [sequenceInputLayer(3) lstmLayer(5)];\n"
                  "layers(2).Name = 'enc'; n = layers(2).Name; h = layers(2).NumHiddenUnits;\n"
                  "layers(2).InputWeightsLearnRateFactor = 0; r = layers(2).Name;\n"
                  "f = fullyConnectedLayer(2); f.Weights = ones(2, 3); f.Bias = [1; 2];",
                  out=_quiet)
    assert (ws["a"], ws["b"], ws["n"], ws["h"], ws["r"]) == (0.2, 0.4, "enc", 5, "enc")
    net = M.dlnetwork([M.featureInputLayer(3), ws["f"]])
    assert torch.equal(net.learnables["fc/weight"], torch.ones(2, 3))
    with pytest.raises(ScriptError, match="Unable to set the 'NumHiddenUnits' property of class "
                                          "'LSTMLayer' because it is read-only"):
        run_code("l = lstmLayer(10); l.NumHiddenUnits = 20;", out=_quiet)
    with pytest.raises(ScriptError, match="Unable to set the 'Layers' property of class "
                                          "'dlnetwork' because it is read-only"):
        run_code("net = dlnetwork([featureInputLayer(3) fullyConnectedLayer(2)]);\n"
                 "net.Layers(2).Name = 'x';", out=_quiet)


def test_a_two_input_function_layer_connects_by_its_input_names():
    ws = run_code("net = dlnetwork([featureInputLayer(3, Name='a') "
                  "functionLayer(@(x, y) x + y, InputNames=[\"x\", \"y\"], Name='sum')], "
                  "Initialize=false);\n"
                  "net = addLayers(net, featureInputLayer(3, Name='b'));\n"
                  "net = connectLayers(net, 'b', 'sum/y');", out=_quiet)
    net = ws["net"]
    net.initialize()
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    assert torch.allclose(net({"a": a, "b": b}), a + b)


def test_the_analysis_names_the_matlab_layer_types(tmp_path, capsys):
    f = tmp_path / "gn.m"
    f.write_text("layers = [imageInputLayer([8 8 4]) convolution2dLayer(3, 8, Padding='same') "
                 "groupNormalizationLayer(4) eluLayer instanceNormalizationLayer "
                 "clippedReluLayer(6) globalAveragePooling2dLayer fullyConnectedLayer(3)];\n"
                 "net = dlnetwork(layers);\n")
    code, out = _analyze(capsys, f)
    assert code == 0, out
    for kind in ("groupNormalizationLayer", "eluLayer", "instanceNormalizationLayer",
                 "clippedReluLayer"):
        assert kind in out


def test_new_layer_kinds_save_and_load(tmp_path):
    net = M.dlnetwork([M.imageInputLayer([4, 4, 2]), M.groupNormalizationLayer(2),
                       M.eluLayer(0.5), M.clippedReluLayer(3),
                       M.crossChannelNormalizationLayer(2), M.resize2dLayer(Scale=2),
                       M.globalAveragePooling2dLayer(), M.softplusLayer()])
    path = tmp_path / "net.attnlab"
    net.save(path)
    back = al.load(path)
    x = torch.randn(2, 2, 4, 4)
    assert torch.allclose(net.eval()(x), back.eval()(x))
    assert [type(l).__name__ for l in back.layers] == [type(l).__name__ for l in net.layers]


def test_layer_option_errors_name_the_option():
    with pytest.raises(ArgumentError, match="numGroups"):
        M.groupNormalizationLayer("some")
    with pytest.raises(ArgumentError, match="ceiling to be a positive number"):
        M.clippedReluLayer(-1)
    with pytest.raises(ArgumentError, match="Scale or OutputSize"):
        M.resize2dLayer()
    with pytest.raises(NetworkError, match="channels divisible by the 4 groups"):
        M.dlnetwork([M.imageInputLayer([4, 4, 6]), M.groupNormalizationLayer(4)])
    assert np.isclose(M.groupNormalizationLayer(2, Epsilon=1e-3).eps, 1e-3)
