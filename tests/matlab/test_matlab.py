"""attnlab.matlab: MATLAB names and name–value options → the same attnlab objects."""
import warnings

import numpy as np
import pytest
import torch

import attnlab as al
from attnlab import layers as L
from attnlab import matlab as M
from attnlab.matlab import mlayers as ML


def same(a, b):
    assert type(a) is type(b), (a, b)
    assert a.name == b.name, (a.name, b.name)
    assert a.config() == b.config(), (a.config(), b.config())


# -- layers: MATLAB call → the attnlab layer it makes -------------------------------------

CASES = [
    (lambda: M.sequenceInputLayer(3, Name="in"), L.SequenceInput(3, name="in")),
    (lambda: M.sequenceInputLayer(3, MinLength=5, Normalization="none"), L.SequenceInput(3)),
    (lambda: M.imageInputLayer([28, 24, 3], "Name", "img"), L.ImageInput((3, 28, 24), name="img")),
    (lambda: M.imageInputLayer(np.array([8, 8])), L.ImageInput((1, 8, 8))),
    (lambda: M.featureInputLayer(5), L.FeatureInput(5)),
    (lambda: M.lstmLayer(64, "OutputMode", "sequence", Name="lstm"), L.LSTM(64, name="lstm")),
    (lambda: M.lstmLayer(64, outputmode="Last"), L.LSTM(64, output_mode="last")),
    (lambda: M.lstmLayer(8, HasStateOutputs=1), L.LSTM(8, has_state_outputs=True)),
    (lambda: M.bilstmLayer(16, OutputMode="last"), L.LSTM(16, "last", bidirectional=True)),
    (lambda: M.gruLayer(16), L.GRU(16)),
    (lambda: M.attentionLayer(8, Name="cross-attention"), L.Attention(8, name="cross-attention")),
    (lambda: M.attentionLayer(2, AttentionMask="causal", Scale=0.5, DropoutProbability=0.1,
                              HasScoresOutput=True, HasPaddingMaskInput=True),
     L.Attention(2, scale=0.5, attention_mask="causal", dropout=0.1, has_scores_output=True,
                 has_padding_mask_input=True)),
    (lambda: M.selfAttentionLayer(8, 64, "Name", "sa"), L.SelfAttention(8, 64, name="sa")),
    (lambda: M.selfAttentionLayer(2, 16, NumValueChannels=8, OutputSize=12, AttentionMask="causal"),
     L.SelfAttention(2, 16, value_channels=8, output_channels=12, attention_mask="causal")),
    (lambda: M.fullyConnectedLayer(10, "Name", "fc"), L.Dense(10, name="fc")),
    (lambda: M.fullyConnectedLayer(10.0), L.Dense(10)),                  # MATLAB doubles
    (lambda: M.convolution1dLayer(3, 16), L.Conv1d(3, 16, padding="valid")),
    (lambda: M.convolution1dLayer(3, 16, Padding="causal", DilationFactor=2),
     L.Conv1d(3, 16, padding="causal", dilation=2)),
    (lambda: M.convolution1dLayer(3, 16, Padding=[1, 1]), L.Conv1d(3, 16, padding=1)),
    (lambda: M.convolution2dLayer(3, 32, "Padding", "same", "Name", "conv1"),
     L.Conv2d(3, 32, padding="same", name="conv1")),
    (lambda: M.convolution2dLayer([3, 5], 8), L.Conv2d((3, 5), 8, padding="valid")),
    (lambda: M.convolution2dLayer(3, 8, Stride=2, Padding=[1, 1, 2, 2]),
     L.Conv2d(3, 8, stride=2, padding=(1, 2))),
    (lambda: M.maxPooling2dLayer(2, "Stride", 2, "Name", "maxpool1"),
     L.MaxPool2d(2, stride=2, name="maxpool1")),
    (lambda: M.maxPooling2dLayer(3), L.MaxPool2d(3, stride=1)),             # MATLAB's Stride 1
    (lambda: M.averagePooling2dLayer(2, Padding=1), L.AvgPool2d(2, stride=1, padding=1)),
    (lambda: M.globalAveragePooling1dLayer(Name="gap"), L.GlobalAvgPool1d(name="gap")),
    (lambda: M.globalMaxPooling1dLayer(), L.GlobalMaxPool1d()),
    (lambda: M.globalAveragePooling2dLayer(), L.GlobalAvgPool2d()),
    (lambda: M.globalMaxPooling2dLayer(), L.GlobalMaxPool2d()),
    (lambda: M.flattenLayer("Name", "flatten"), L.Flatten(name="flatten")),
    (lambda: M.indexing1dLayer(), L.Index1d("first")),                       # MATLAB's default
    (lambda: M.indexing1dLayer("last"), L.Index1d("last")),
    (lambda: M.indexing1dLayer(3, Name="third"), L.Index1d(2, name="third")),  # 1-based
    (lambda: M.indexing1dLayer(Index="Last"), L.Index1d("last")),
    (lambda: M.positionEmbeddingLayer(16, 100), L.PositionEmbedding(100, 16)),
    (lambda: M.sinusoidalPositionEncodingLayer(16), L.SinusoidalPositionEncoding(16)),
    (lambda: M.embeddingLayer(16, 100), L.Embedding(101, 16)),
    (lambda: M.wordEmbeddingLayer(16, 50), M.WordEmbedding(50, 16)),
    (lambda: M.layerNormalizationLayer(Name="ln"), L.LayerNorm(name="ln")),
    (lambda: M.layerNormalizationLayer(Epsilon=1e-6), L.LayerNorm(eps=1e-6)),
    (lambda: M.batchNormalizationLayer("Name", "bn1"), L.BatchNorm(name="bn1")),
    (lambda: M.batchNormalizationLayer(MeanDecay=0.2, VarianceDecay=0.2), L.BatchNorm(momentum=0.2)),
    (lambda: M.dropoutLayer(0.2, Name="d"), L.Dropout(0.2, name="d")),
    (lambda: M.dropoutLayer(), L.Dropout(0.5)),
    (lambda: M.dropoutLayer("Name", "d2"), L.Dropout(0.5, name="d2")),
    (lambda: M.reluLayer("Name", "relu1"), L.ReLU(name="relu1")),
    (lambda: M.leakyReluLayer(0.2), L.LeakyReLU(0.2)),
    (lambda: M.geluLayer(), L.GELU()),
    (lambda: M.tanhLayer(), L.Tanh()),
    (lambda: M.sigmoidLayer(), L.Sigmoid()),
    (lambda: M.softmaxLayer("Name", "softmax"), L.Softmax(name="softmax")),
    (lambda: M.additionLayer(3, Name="add"), L.Addition(3, name="add")),
    (lambda: M.multiplicationLayer(2), L.Multiplication(2)),
    (lambda: M.concatenationLayer(1, 2), ML.MatlabConcatenation(2, 1)),
    (lambda: M.concatenationLayer("time", 2), L.Concatenation(2, dim="time")),
    (lambda: M.depthConcatenationLayer(2), L.Concatenation(2)),
    (lambda: M.fullyConnectedLayer(4, WeightLearnRateFactor=1, BiasL2Factor=1), L.Dense(4)),
]


@pytest.mark.parametrize("matlab,expected", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_layer_functions_make_the_attnlab_layer(matlab, expected):
    same(matlab(), expected)


def test_pairs_keywords_and_case_are_equivalent():
    a = M.lstmLayer(32, "OutputMode", "last", "Name", "x")
    b = M.lstmLayer(32, OutputMode="last", Name="x")
    c = M.lstmLayer(32, "outputmode", "LAST", NAME="x")
    same(a, b)
    same(a, c)


# -- errors -------------------------------------------------------------------------------

def test_unknown_option_lists_the_valid_ones():
    with pytest.raises(al.ArgumentError) as e:
        M.attentionLayer(8, SequenceLength="last")
    msg = str(e.value)
    for part in ("attentionLayer", "'SequenceLength'", "Name", "Scale", "HasPaddingMaskInput",
                 "AttentionMask", "DropoutProbability", "indexing1dLayer"):
        assert part in msg, msg
    with pytest.raises(al.ArgumentError, match="Did you mean 'OutputMode'"):
        M.lstmLayer(8, OutputMdoe="last")
    # MATLAB matches a unique prefix of a name; one of several is an error naming them
    assert M.lstmLayer(8, OutputMod="last").output_mode == "last"
    with pytest.raises(al.ArgumentError, match="'Has' is the start of several options"):
        M.lstmLayer(8, Has=True)


@pytest.mark.parametrize("call,match", [
    (lambda: M.lstmLayer(8, "last"), "without a value"),
    (lambda: M.lstmLayer(8, OutputMode="middle"), "'sequence', 'last'"),
    (lambda: M.lstmLayer(0), "integer ≥ 1"),
    (lambda: M.lstmLayer(8, StateActivationFunction="softsign"), "StateActivationFunction"),
    (lambda: M.sequenceInputLayer(3, Normalization="whiten"), "Normalization to be one of"),
    (lambda: M.imageInputLayer([28, 28, 1], Normalization=lambda x: x), "function handle"),
    (lambda: M.sequenceInputLayer([28, 28, 1, 2]), r"an image size \[h w c\]"),
    (lambda: M.imageInputLayer(28), r"\[h w c\]"),
    (lambda: M.reluLayer(WeightsInitializer="he"), "net.learnables"),
    (lambda: M.fullyConnectedLayer(4, WeightsInitializer="glorotx"), "'glorotx'.*glorot"),
    (lambda: M.fullyConnectedLayer(4, WeightLearnRateFactor=-2), "number ≥ 0"),
    (lambda: M.reluLayer(Weights=np.ones((4, 10))), "preset"),
    (lambda: M.attentionLayer(2, AttentionMask=np.ones((3, 3))), "custom mask"),
    (lambda: M.convolution2dLayer(3, 8, Padding=[1, 0, 1, 1]), "symmetric"),
    (lambda: M.convolution1dLayer(3, 8, Padding=[2, 0]), "causal"),
    (lambda: M.maxPooling2dLayer(2, Padding="same"), "numeric Padding"),
    (lambda: M.concatenationLayer(0, 2), "dim to be an integer ≥ 1"),
    (lambda: M.indexing1dLayer(0), "integer ≥ 1"),
    (lambda: M.indexing1dLayer("middle"), "'first', 'last'"),
    (lambda: M.geluLayer(Approximation="sigmoid"), "Approximation"),
    (lambda: M.batchNormalizationLayer(MeanDecay=0.1, VarianceDecay=0.3), "one momentum"),
    (lambda: M.embeddingLayer(8, 10, MaskIndex=0), "MaskIndex"),
    (lambda: M.addLayers([M.reluLayer()], M.reluLayer()), "expected a network"),
    (lambda: M.dlnetwork([M.reluLayer(), "fc"]), "expected layers"),
])
def test_argument_errors(call, match):
    with pytest.raises(al.ArgumentError, match=match):
        call()


# -- networks -----------------------------------------------------------------------------

def test_network_functions_return_the_same_edited_network():
    net = M.dlnetwork()
    assert isinstance(net, al.Network) and not net.layers
    out = M.addLayers(net, [M.sequenceInputLayer(2, Name="x"), M.fullyConnectedLayer(4, Name="a"),
                            M.reluLayer(Name="r")])
    assert out is net
    assert M.addLayers(net, M.fullyConnectedLayer(4, Name="b")) is net
    assert M.connectLayers(net, "x", "b") is net
    assert M.disconnectLayers(net, "x", "b") is net
    assert M.connectLayers(net, "r", "b") is net
    assert M.replaceLayer(net, "r", [M.tanhLayer(Name="t")]) is net
    assert [l.name for l in net.layers] == ["x", "a", "t", "b"]
    assert M.removeLayers(net, ["b"]) is net
    assert M.removeLayers(net, "t") is net
    assert [str(c) for c in net.connections] == ["x → a"]
    assert M.initialize(net) is net and net.initialized


def test_dlnetwork_initialises_complete_networks_like_matlab():
    net = M.dlnetwork([M.sequenceInputLayer(3), M.lstmLayer(4), M.fullyConnectedLayer(2)])
    assert net.initialized and "lstm/weight_ih_l0" in net.learnables
    lazy = M.dlnetwork([M.sequenceInputLayer(3), M.fullyConnectedLayer(2)], Initialize=False)
    assert not lazy.initialized
    partial = M.dlnetwork([M.sequenceInputLayer(3, Name="q"), M.attentionLayer(1)])
    assert not partial.initialized                         # key and value still unconnected
    no_inputs = M.dlnetwork([M.fullyConnectedLayer(2)], torch.randn(2, 5, 3))  # example input
    assert no_inputs.initialized
    with pytest.raises(al.FormatError):
        M.dlnetwork([M.imageInputLayer([8, 8, 1]), M.flattenLayer(), M.selfAttentionLayer(2, 8)])
    assert M.layerGraph([M.sequenceInputLayer(3), M.fullyConnectedLayer(2)]).initialized is False


def test_output_layers_are_dropped_with_a_note():
    layers = [M.featureInputLayer(4), M.fullyConnectedLayer(3), M.softmaxLayer(),
              M.classificationLayer("Name", "output")]
    with pytest.raises(al.NetworkError, match="'output' \\(classificationLayer\\) is an output "
                                              "layer.*must not contain.*crossentropy"):
        M.dlnetwork(layers)                       # MATLAB refuses output layers in a dlnetwork
    with pytest.warns(M.MatlabNote, match="classificationLayer 'output'.*trainNetwork"):
        net = M.layerGraph(layers)
    assert [type(l).__name__ for l in net.layers] == ["FeatureInput", "Dense", "Softmax"]
    with pytest.warns(M.MatlabNote, match="regressionLayer.*trainNetwork takes its loss"):
        M.addLayers(M.dlnetwork(), [M.featureInputLayer(4), M.regressionLayer()])
    assert M.classificationLayer().loss == "crossentropy"


def test_nested_layer_arrays_concatenate_like_matlab():
    a = [M.sequenceInputLayer(2), M.fullyConnectedLayer(3)]
    net = M.dlnetwork([a, [M.reluLayer()]])
    assert [type(l).__name__ for l in net.layers] == ["SequenceInput", "Dense", "ReLU"]
    assert len(net.connections) == 2


def test_analyze_network_prints_and_returns_the_analysis(capsys):
    layers = [M.imageInputLayer([8, 8, 1]), M.flattenLayer(), M.selfAttentionLayer(2, 8)]
    analysis = M.analyzeNetwork(layers)
    assert isinstance(analysis, al.Analysis) and not analysis.ok
    printed = capsys.readouterr().out
    assert "ImageToSequence" in printed and "selfattention" in printed


def test_predict_and_minibatchpredict():
    net = M.dlnetwork([M.sequenceInputLayer(3, Name="x"), M.lstmLayer(4, HasStateOutputs=True,
                                                                     Name="lstm")])
    x = torch.randn(5, 6, 3)
    y, h, c = M.predict(net, x)
    assert y.shape == (5, 6, 4) and h.shape == (5, 4) and c.shape == (5, 4)
    h2 = M.predict(net, x, Outputs="lstm/hidden")
    assert torch.equal(h, h2)
    y3 = M.minibatchpredict(net, x, MiniBatchSize=2, Outputs=["lstm/out"])
    torch.testing.assert_close(y3, y)
    with pytest.raises(al.ArgumentError, match="Outputs among"):
        M.predict(net, x, Outputs="lstm/cel")
    single = M.dlnetwork([M.featureInputLayer(3), M.fullyConnectedLayer(2)])
    assert M.predict(single, torch.randn(4, 3)).shape == (4, 2)


def test_plot_returns_a_figure(tmp_path):
    import matplotlib.pyplot as plt
    net = M.dlnetwork([M.sequenceInputLayer(2), M.fullyConnectedLayer(3)])
    fig = M.plot(net, tmp_path / "net.png")
    assert (tmp_path / "net.png").exists() and fig is not None
    plt.close("all")


# -- training -----------------------------------------------------------------------------

def test_training_options_map_matlab_names_and_defaults():
    opts = M.trainingOptions("SGDM", "InitialLearnRate", 0.01, "MaxEpochs", 5,
                             "Shuffle", "every-epoch", "ValidationFrequency", 30,
                             "Verbose", False, "Plots", "none", ValidationPatience=float("inf"),
                             GradientThreshold=float("inf"), MiniBatchSize=16,
                             L2Regularization=0, SequenceLength="longest")
    TrainingOptions = al.TrainingOptions
    assert isinstance(opts, TrainingOptions)
    assert (opts.solver, opts.learning_rate, opts.max_epochs, opts.shuffle,
            opts.validation_frequency, opts.verbose, opts.plots, opts.validation_patience,
            opts.gradient_threshold, opts.batch_size, opts.l2) == \
        ("sgdm", 0.01, 5, "every-epoch", 30, False, None, None, None, 16, 0.0)
    d = M.trainingOptions("adam")                               # MATLAB's defaults
    assert (d.solver, d.max_epochs, d.batch_size, d.shuffle, d.l2) == ("adam", 30, 128, "once", 1e-4)
    v = M.trainingOptions("adam", ValidationData=[np.zeros((2, 3)), np.zeros(2)],
                          ExecutionEnvironment="cpu", Metrics="Accuracy")
    assert isinstance(v.validation_data, tuple) and v.device == "cpu" and v.metrics == ["accuracy"]


@pytest.mark.parametrize("call,match", [
    (lambda: M.trainingOptions("lbfg"), "'sgdm', 'adam'"),
    (lambda: M.trainingOptions("adam", MaxEpoks=5), "Did you mean 'MaxEpochs'"),
    (lambda: M.trainingOptions("adam", SequenceLength="shortes"), "longest"),
    (lambda: M.trainingOptions("adam", MaxEpochs=0), "MaxEpochs"),
])
def test_training_option_errors(call, match):
    with pytest.raises(al.ArgumentError, match=match):
        call()


def _toy_classification(n=64):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 4, generator=g)
    return x, (x[:, 0] + x[:, 1] > 0).long()


def test_trainnet_trains_in_place_and_returns_the_network():
    x, t = _toy_classification()
    net = M.dlnetwork([M.featureInputLayer(4), M.fullyConnectedLayer(2), M.softmaxLayer()])
    before = M.predict(net, x).argmax(1).eq(t).float().mean()
    opts = M.trainingOptions("adam", InitialLearnRate=0.05, MaxEpochs=20, MiniBatchSize=32,
                             Verbose=False)
    out = M.trainnet(x, t, net, "crossentropy", opts)
    assert out is net and net.training_info is not None
    after = M.predict(net, x).argmax(1).eq(t).float().mean()
    assert after > max(before, 0.85)


def test_legacy_train_network_reads_the_loss_from_the_output_layer():
    x, t = _toy_classification()
    layers = [M.featureInputLayer(4), M.fullyConnectedLayer(2), M.softmaxLayer(),
              M.classificationLayer()]
    opts = M.trainingOptions("adam", InitialLearnRate=0.05, MaxEpochs=10, MiniBatchSize=32,
                             Verbose=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", M.MatlabNote)           # no note: the layer is used
        net = M.trainNetwork(x, t, layers, opts)
    assert [type(l).__name__ for l in net.layers] == ["FeatureInput", "Dense", "Softmax"]
    assert np.asarray(M.classify(net, x[:4])).shape == (4,)
    with pytest.raises(al.NetworkError, match="output layer"):
        M.trainNetwork(x, t, layers[:-1], opts)
