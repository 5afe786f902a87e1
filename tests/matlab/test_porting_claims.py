"""What docs/porting-matlab.md says works, and what it says does not, each as a tiny MATLAB
script run through attnlab.matlab.run_code."""
import numpy as np
import pytest

pytest.importorskip("tree_sitter")

import attnlab as al                                   # noqa: E402
from attnlab import layers as L                        # noqa: E402
from attnlab.matlab import run_code                    # noqa: E402
from attnlab.matlab import ScriptError                 # noqa: E402


def run(code, **workspace):
    return run_code(code, workspace=workspace or None, out=lambda s: None)


def test_learn_rate_factors_freeze_and_are_read_back():
    rng = np.random.default_rng(0)
    ws = run("""
layers = [featureInputLayer(4)
          fullyConnectedLayer(3, WeightLearnRateFactor=0, Name="frozen")
          reluLayer
          fullyConnectedLayer(2, Name="fc")];
net = dlnetwork(layers);
net = setLearnRateFactor(net, "fc", "Weights", 3);
f = getLearnRateFactor(net, "fc", "Weights");
before = getLayerWeights(net, "frozen");
opts = trainingOptions("sgdm", MaxEpochs=2, Verbose=false, Plots="none", InitialLearnRate=0.1);
[net, info] = trainnet(X, T, net, "crossentropy", opts);
after = getLayerWeights(net, "frozen");
""", X=rng.standard_normal((16, 4)).astype(np.float32), T=rng.integers(0, 2, 16))
    assert ws["f"] == 3
    assert np.array_equal(ws["before"]["Weights"], ws["after"]["Weights"])    # factor 0 freezes
    assert not np.array_equal(ws["before"]["Bias"], ws["after"]["Bias"])      # the bias learns
    assert isinstance(ws["info"], al.TrainingInfo)


def test_initializer_handles_run_in_the_interpreter():
    ws = run("""
net = dlnetwork([featureInputLayer(4)
                 fullyConnectedLayer(3, WeightsInitializer=@(sz) 0.5*ones(sz), BiasInitializer="zeros")]);
W = net.Layers(2).Weights;
""")
    assert np.array_equal(ws["W"], np.full((3, 4), 0.5))


def test_gru_normalisation_and_embedding_weights_by_matlab_name():
    ws = run("""
net = dlnetwork([sequenceInputLayer(1)
                 embeddingLayer(4, 10)
                 gruLayer(5)
                 layerNormalizationLayer
                 fullyConnectedLayer(2)]);
g = getLayerWeights(net, "gru");
e = getLayerWeights(net, "embedding");
net = setLayerWeights(net, "layernorm", Scale=2*ones(5, 1));
n = getLayerWeights(net, "layernorm");
""")
    assert {k: v.shape for k, v in ws["g"].items()} == {"InputWeights": (15, 4),
                                                       "RecurrentWeights": (15, 5), "Bias": (15, 1)}
    assert ws["e"]["Weights"].shape == (4, 10)
    assert np.array_equal(ws["n"]["Scale"], np.full((5, 1), 2.0))


def test_output_names_choose_the_outputs():
    ws = run("""
layers = [featureInputLayer(4)
          fullyConnectedLayer(3, Name="fc1")
          reluLayer
          fullyConnectedLayer(2, Name="fc2")];
net = dlnetwork(layers);
net.OutputNames = ["fc2", "fc1"];
other = dlnetwork(layers, OutputNames=["fc1"]);
""")
    assert list(ws["net"].output_names) == ["fc2", "fc1"]
    assert list(ws["other"].output_names) == ["fc1"]


@pytest.mark.parametrize("option", ["zscore", "zerocenter", "rescale-symmetric", "rescale-zero-one"])
def test_input_normalization_other_than_none(option):
    ws = run(f'net = dlnetwork([featureInputLayer(3, Normalization="{option}"); '
             'fullyConnectedLayer(2)]);')
    types = [type(layer).__name__ for layer in ws["net"].layers]
    assert types[1] == "InputNormalization", types


def test_spatial_dropout_and_flattened_image_sequences():
    ws = run("""
net = dlnetwork([sequenceInputLayer([8 8 1]); flattenLayer; spatialDropoutLayer(0.2)
                 lstmLayer(4, OutputMode="last"); fullyConnectedLayer(2)]);
""")
    import torch
    net = ws["net"]
    assert any(type(layer).__name__ == "SpatialDropout" for layer in net.layers)
    assert tuple(net.predict(torch.randn(2, 5, 64)).shape) == (2, 2)     # frames flattened


def test_al_train_returns_a_training_info():
    net = al.Network([L.FeatureInput(4), L.Dense(2)])
    import torch
    info = al.train(net, torch.randn(8, 4), torch.randint(0, 2, (8,)), max_epochs=1, verbose=False)
    assert isinstance(info, al.TrainingInfo) and info.epochs["epoch"] == [1]


@pytest.mark.parametrize("code, words", [
    ("net = dlnetwork([featureInputLayer(3); fullyConnectedLayer(2)]);"
     " [loss, gradients] = dlfeval(@modelLoss, net, 1, 2);", ["custom training loop", "trainnet"]),
    ("l = lstmLayer(8, InputWeightsLearnRateFactor=[1 2 1 1]);", ["InputWeightsLearnRateFactor",
                                                                  "a number"]),
    ("net = dlnetwork([featureInputLayer(3); batchNormalizationLayer; fullyConnectedLayer(2)]);"
     " m = net.Layers(2).TrainedMean;", ["TrainedMean"]),
])
def test_what_the_page_lists_as_not_supported_is_an_error_saying_so(code, words):
    with pytest.raises(ScriptError) as e:
        run(code)
    for w in words:
        assert w in str(e.value)
