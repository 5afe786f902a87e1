"""The MATLAB calls users write, each compared with the same thing in Python."""
import copy
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.nn import functional as F

import attnlab as al
from attnlab.core.errors import ArgumentError, NetworkError
import attnlab.matlab as M
from attnlab.matlab import run_code, run_file
from attnlab.matlab.training import WeightedCrossEntropy

HERE = Path(__file__).parent
pytestmark = pytest.mark.filterwarnings("ignore::attnlab.matlab.MatlabNote")


def _data(n=12, t=5, c=3, seed=0):
    rs = np.random.RandomState(seed)
    return (rs.randn(n, t, c) * 3 + 2).astype(np.float32)


def _copy_weights(dst, src):
    with torch.no_grad():
        for k, p in src.state_dict().items():
            dst.state_dict()[k].copy_(p)


# -- output layers ----------------------------------------------------------------------------

def test_weighted_cross_entropy_is_matlabs_normalised_by_observations():
    logits, target = torch.randn(6, 3), torch.tensor([0, 1, 2, 2, 1, 0])
    w = [1.0, 2.0, 0.5]
    loss = WeightedCrossEntropy(w).bind(al.Spec.features(3), "class")
    want = -(torch.tensor(w)[target] * F.log_softmax(logits, 1)[range(6), target]).sum()
    assert torch.allclose(loss.sum(logits, target, None), want)


def test_class_weights_must_match_classes():
    with pytest.raises(ArgumentError, match=r"classificationLayer.*one ClassWeights value per class \(2 Classes\), received 3"):
        M.classificationLayer(Classes=["a", "b"], ClassWeights=[1, 2, 3])
    with pytest.raises(ArgumentError, match=r"ClassWeights to be positive, received \[1.0, -1.0\]"):
        M.classificationLayer(ClassWeights=[1, -1])


def test_trainNetwork_on_a_layer_graph_with_a_connected_classification_layer_equals_al_train():
    X, Y = _data(), np.array(["a", "b", "c"] * 4)
    layers = [M.sequenceInputLayer(3, Name="in"), M.lstmLayer(4, OutputMode="last"),
              M.fullyConnectedLayer(3, Name="fc"), M.softmaxLayer(Name="sm")]
    torch.manual_seed(0)
    lgraph = M.dlnetwork(layers)                          # initialised: weights to copy
    lgraph = M.addLayers(lgraph, M.classificationLayer(Name="out"))
    lgraph = M.connectLayers(lgraph, "sm", "out")
    python = copy.deepcopy(lgraph)
    opts = M.trainingOptions("adam", MaxEpochs=1, MiniBatchSize=4, Verbose=False)
    torch.manual_seed(5)
    net = M.trainNetwork(X, Y, lgraph, opts)
    torch.manual_seed(5)
    al.train(python, X, Y, loss="crossentropy", options=opts)
    assert net is not lgraph                              # MATLAB returns a new network
    for k, v in python.state_dict().items():
        assert torch.allclose(net.state_dict()[k], v, atol=1e-6), k
    assert net.metadata["class_labels"] == ["a", "b", "c"]


def test_trainNetwork_without_an_output_layer_names_the_fix():
    net = M.layerGraph([M.featureInputLayer(2), M.fullyConnectedLayer(1)])
    with pytest.raises(NetworkError, match=r"trainNetwork: expected an output layer.*classificationLayer"):
        M.trainNetwork(np.zeros((4, 2)), np.zeros((4, 1)), net, M.trainingOptions("adam"))


def test_the_matlab_example_with_class_weights_and_zscore_trains_and_predicts_classes():
    X = _data()
    Y = np.array(["low", "mid", "high"] * 4)
    ws = run_file(HERE / "m13_layergraph_classweights.m", {"XTrain": X, "YTrain": Y}, out=lambda *a: None)
    net = ws["net"]
    assert net.metadata["class_labels"] == ["low", "mid", "high"]    # Classes order, not sorted
    stats = net.layer_modules["sequence-normalization"]
    assert np.allclose(stats.mean.numpy(), X.reshape(-1, 3).mean(0), atol=1e-5)
    assert np.allclose(stats.std.numpy(), X.reshape(-1, 3).std(0), atol=1e-5)
    assert ws["info"].stop_reason == "max-epochs"
    assert set(ws["YPred"].values) <= {"low", "mid", "high"}
    assert ws["YPred"].categories == ["low", "mid", "high"]


def test_trainnet_takes_a_plain_layer_array_and_datastores():
    X, T = _data(8), np.random.RandomState(1).randn(8, 1).astype(np.float32)
    torch.manual_seed(3)
    ws = run_file(HERE / "m14_pooling_datastore.m", {"XTrain": X, "TTrain": T}, out=lambda *a: None)
    net = ws["net"]
    assert net.training_info.stop_reason == "max-epochs"
    # the same network in Python, same initial weights, same data as arrays
    torch.manual_seed(3)
    again = M.dlnetwork([M.inputLayer([3, float("nan"), float("nan")], "CBT", Name="in"),
                         M.convolution1dLayer(3, 8, Padding="same"), M.reluLayer(),
                         M.maxPooling1dLayer(2, Stride=2), M.averagePooling1dLayer(2, Padding="same"),
                         M.identityLayer(Name="junction"), M.scalingLayer(Scale=0.5, Bias=1),
                         M.globalMaxPooling1dLayer(), M.fullyConnectedLayer(1)])
    opts = M.trainingOptions("sgdm", MaxEpochs=1, MiniBatchSize=4, Shuffle="never", Verbose=False)
    M.trainnet(X, T, again, "mse", opts)
    for k, v in again.state_dict().items():
        assert torch.allclose(net.state_dict()[k], v, atol=1e-6), k


# -- input normalisation ----------------------------------------------------------------------

@pytest.mark.parametrize("method", ["zscore", "rescale-symmetric", "rescale-zero-one", "zerocenter"])
def test_input_normalization_is_computed_at_training_and_saved(method, tmp_path):
    X = _data(8)
    T = np.random.RandomState(2).randn(8, 2).astype(np.float32)
    net = M.dlnetwork([M.sequenceInputLayer(3, Normalization=method, Name="in"),
                       M.lstmLayer(4, OutputMode="last"), M.fullyConnectedLayer(2)])
    M.trainnet(X, T, net, "mse", M.trainingOptions("adam", MaxEpochs=1, Verbose=False))
    flat = torch.tensor(X.reshape(-1, 3))
    got = net.layer_modules["in-normalization"](torch.tensor(X)).reshape(-1, 3)
    want = {"zscore": (flat - flat.mean(0)) / flat.std(0, unbiased=False),
            "zerocenter": flat - flat.mean(0),
            "rescale-zero-one": (flat - flat.amin(0)) / (flat.amax(0) - flat.amin(0)),
            "rescale-symmetric": 2 * (flat - flat.amin(0)) / (flat.amax(0) - flat.amin(0)) - 1}[method]
    assert torch.allclose(got, want, atol=1e-5)
    net.save(tmp_path / "n.attnlab")
    back = al.load(tmp_path / "n.attnlab")
    assert torch.allclose(back.predict(torch.tensor(X)), net.predict(torch.tensor(X)))


def test_given_statistics_are_kept_when_reset_is_false():
    net = M.dlnetwork([M.featureInputLayer(2, Normalization="zscore", Mean=[1, 2],
                                           StandardDeviation=[2, 4], Name="f"),
                       M.fullyConnectedLayer(1)])
    X, T = np.ones((4, 2), np.float32), np.zeros((4, 1), np.float32)
    M.trainnet(X, T, net, "mse", M.trainingOptions("adam", MaxEpochs=1, Verbose=False,
                                                   ResetInputNormalization=False))
    assert net.layer_modules["f-normalization"].mean.tolist() == [1, 2]
    with pytest.raises(ArgumentError, match=r"Normalization.*received 'whiten'"):
        M.featureInputLayer(2, Normalization="whiten")


def test_connecting_from_a_normalised_input_starts_after_its_normalization():
    net = M.dlnetwork()
    net = M.addLayers(net, M.sequenceInputLayer(3, Normalization="zscore", Name="in"))
    net = M.addLayers(net, M.lstmLayer(4, Name="lstm"))
    net = M.connectLayers(net, "in", "lstm")
    assert ("in-normalization", "lstm") in [tuple(c) for c in net.connections]


# -- options ----------------------------------------------------------------------------------

def test_output_network_best_validation_loss_returns_the_best_weights():
    X, T = _data(16), np.random.RandomState(3).randn(16, 1).astype(np.float32)
    net = M.dlnetwork([M.sequenceInputLayer(3), M.lstmLayer(4, OutputMode="last"),
                       M.fullyConnectedLayer(1)])
    opts = M.trainingOptions("adam", MaxEpochs=3, MiniBatchSize=4, InitialLearnRate=0.5,
                             ValidationData=[X[:4], T[:4]], ValidationFrequency=1,
                             OutputNetwork="best-validation-loss", Verbose=False)
    M.trainnet(X, T, net, "mse", opts)
    info = net.training_info
    best = min(info.validation["loss"])
    now = F.mse_loss(net.predict(torch.tensor(X[:4])), torch.tensor(T[:4])).item()
    assert info.stop_reason == "max-epochs" and now == pytest.approx(best, rel=1e-4)
    with pytest.raises(ArgumentError, match=r"ValidationData with OutputNetwork=\"best-validation\""):
        M.trainingOptions("adam", OutputNetwork="best-validation")
    with pytest.raises(ArgumentError, match=r"OutputNetwork.*received 'best'"):
        M.trainingOptions("adam", OutputNetwork="best")


def test_rng_seeds_initialisation_and_training():
    code = """rng(%d)
net = dlnetwork([featureInputLayer(2) fullyConnectedLayer(3)]);"""
    a, b, c = (run_code(code % s)["net"] for s in (1, 1, 2))
    assert torch.equal(a.learnables["fc/weight"], b.learnables["fc/weight"])
    assert not torch.equal(a.learnables["fc/weight"], c.learnables["fc/weight"])
    assert M.trainingOptions("adam").seed is None          # training follows rng, as MATLAB


def test_execution_environment_maps_onto_the_device():
    assert M.trainingOptions("adam", ExecutionEnvironment="cpu").device == "cpu"
    assert M.trainingOptions("adam", ExecutionEnvironment="auto").device is None
    assert M.trainingOptions("adam", ExecutionEnvironment="gpu").device == "cuda"
    assert M.trainingOptions("adam", ExecutionEnvironment="parallel").device is None
    with pytest.raises(ArgumentError, match=r"ExecutionEnvironment.*received 'tpu'"):
        M.trainingOptions("adam", ExecutionEnvironment="tpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_gpu_without_a_gpu_is_an_error_in_matlab_terms():
    net = M.dlnetwork([M.featureInputLayer(2), M.fullyConnectedLayer(1)])
    opts = M.trainingOptions("adam", ExecutionEnvironment="gpu", Verbose=False)
    with pytest.raises(ArgumentError, match=r"device 'cuda'.*ExecutionEnvironment='auto'"):
        M.trainnet(np.zeros((2, 2)), np.zeros((2, 1)), net, "mse", opts)


# -- layers -----------------------------------------------------------------------------------

def test_pooling_1d_matches_torch_and_skips_padding():
    x = torch.randn(2, 7, 3)
    net = M.dlnetwork([M.sequenceInputLayer(3), M.maxPooling1dLayer(3, Stride=2, Name="p")])
    assert torch.allclose(net(x), F.max_pool1d(x.transpose(1, 2), 3, 2).transpose(1, 2))
    avg = M.dlnetwork([M.sequenceInputLayer(3), M.averagePooling1dLayer(2, Padding="same")])
    want = F.avg_pool1d(F.pad(x.transpose(1, 2), (0, 1)), 2, 1).transpose(1, 2)
    assert torch.allclose(avg(x), want)
    # a shorter sequence in a padded batch: the padding never wins the max
    short = torch.randn(4, 3) - 10
    y = net.predict([x[0], short])
    alone = net.predict([short])
    y1 = y[1] if not isinstance(y, list) else y[1]
    a0 = alone[0]
    assert torch.allclose(y1[: a0.shape[0]], a0, atol=1e-6)


@pytest.mark.parametrize("fmt,size,spec", [("CBT", [3, float("nan"), float("nan")], "B×T×3"),
                                           ("CT", [3, 10], "B×10×3"),
                                           ("SSCB", [28, 28, 1, float("nan")], "B×1×28×28"),
                                           ("CB", [5, float("nan")], "B×5")])
def test_input_layer_formats(fmt, size, spec):
    layer = M.inputLayer(size, fmt, Name="in")
    assert str(layer.spec) == spec


def test_input_layer_refuses_what_attnlab_has_no_layout_for():
    with pytest.raises(ArgumentError, match=r"inputLayer: expected one size per letter of the format \"CBT\" \(3\), received 2"):
        M.inputLayer([3, 4], "CBT")
    with pytest.raises(ArgumentError, match=r"inputLayer: expected a data format"):
        M.inputLayer([3, 4])


def test_function_identity_scaling_and_network_layers():
    x = torch.randn(2, 4, 3)
    inner = M.dlnetwork([M.fullyConnectedLayer(3, Name="fc")], Initialize=False)
    code = """layers = [sequenceInputLayer(3)
    functionLayer(@(X) X .* 2 + 1, Name="f")
    identityLayer(Name="id")
    scalingLayer(Scale=[1 2 3], Bias=0.5)
    networkLayer(inner, Name="block")];
net = dlnetwork(layers);"""
    net = run_code(code, {"inner": inner})["net"]
    fc = inner.layer_modules["fc"] if inner.initialized else net.layer_modules["block"].layer_modules["fc"]
    want = fc((x * 2 + 1) * torch.tensor([1.0, 2, 3]) + 0.5)
    assert torch.allclose(net(x), want, atol=1e-6)


# -- data -------------------------------------------------------------------------------------

def test_categorical_categories_and_scores2label():
    c = M.categorical(np.array([3, 1, 2, 3]))
    assert M.categories(c) == ["1", "2", "3"] and list(c.values) == ["3", "1", "2", "3"]
    c = M.categorical(["b", "a"], ["b", "a"])
    assert c.categories == ["b", "a"]
    y = M.scores2label(torch.tensor([[0.1, 0.9], [0.8, 0.2]]), ["yes", "no"])
    assert list(y.values) == ["no", "yes"] and y.categories == ["yes", "no"]
    with pytest.raises(ArgumentError, match=r"scores2label: expected scores with a dimension of size 3"):
        M.scores2label(np.zeros((2, 2)), ["a", "b", "c"])


def test_datastores_must_be_combined():
    with pytest.raises(ArgumentError, match=r"combine: expected datastores with the same number of observations, received \[2, 3\]"):
        M.combine(M.arrayDatastore(np.zeros((2, 1))), M.arrayDatastore(np.zeros((3, 1))))
    net = M.dlnetwork([M.featureInputLayer(1), M.fullyConnectedLayer(1)])
    with pytest.raises(ArgumentError, match=r"trainnet: expected predictors and targets.*combine\(dsX, dsT\)"):
        M.trainnet(M.arrayDatastore(np.zeros((2, 1))), net, "mse", M.trainingOptions("adam"))


# -- messages in MATLAB terms ------------------------------------------------------------------

def test_attention_layer_without_num_heads_says_it_is_missing(tmp_path, capsys):
    from attnlab.matlab.cli import analyze
    f = tmp_path / "att.m"
    f.write_text("layers = [sequenceInputLayer(3)\n    attentionLayer('SequenceLength','last')];\n")
    assert analyze(f, []) == 2
    err = capsys.readouterr().err
    assert "att.m:2:5: attentionLayer: numHeads is missing" in err and "'SequenceLength'" in err
    with pytest.raises(ArgumentError, match=r"selfAttentionLayer: numHeads is missing.*received 'NumKeyChannels'"):
        M.selfAttentionLayer("NumKeyChannels", 64)


def test_indexing_before_lstm_says_the_time_axis_is_gone(tmp_path, capsys):
    from attnlab.matlab.cli import analyze
    f = tmp_path / "idx.m"
    f.write_text('layers = [sequenceInputLayer(3)\n    indexing1dLayer("last", Name="pick")\n'
                 '    lstmLayer(8, Name="lstm")\n    fullyConnectedLayer(2)];\n'
                 'net = dlnetwork(layers, Initialize=false);\n')
    assert analyze(f, []) == 1
    out = capsys.readouterr().out.replace("\n", " ")
    assert "layer 'lstm' (lstmLayer) port 'in': the time axis is gone: 'pick' before it" in out
    assert "indexing1dLayer" in out and "move 'pick' after 'lstm'" in out


def test_a_saved_network_with_matlab_layers_loads_without_importing_attnlab_matlab(tmp_path):
    import subprocess
    import sys
    from attnlab.matlab import dlnetwork, fullyConnectedLayer, scalingLayer, sequenceInputLayer
    net = dlnetwork([sequenceInputLayer(3, Name="in"), scalingLayer(Scale=2.0),
                     fullyConnectedLayer(2)])
    path = tmp_path / "m.attnlab"
    net.save(path)
    code = ("import sys, torch, attnlab as al; n = al.load(sys.argv[1]); "
            "print(tuple(n(torch.randn(1, 4, 3)).shape))")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "(1, 4, 2)"


def test_self_attention_heads_that_do_not_divide_are_named_in_matlab_terms():
    import attnlab as al
    import attnlab.matlab as m
    with pytest.raises(al.ArgumentError) as e:
        m.selfAttentionLayer(3, 64)
    assert "numKeyChannels (64) must be a multiple of numHeads (3)" in str(e.value)
    assert "selfAttentionLayer(3, 63)" in str(e.value)
    with pytest.raises(al.ArgumentError) as e:
        m.selfAttentionLayer(4, 64, NumValueChannels=30)
    assert "NumValueChannels=32" in str(e.value)


def test_execution_environment_multi_gpu_and_parallel_launch_data_parallel(monkeypatch):
    import attnlab as al
    import attnlab.matlab as m
    import attnlab.training.distributed as dist
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    layers = [m.featureInputLayer(3), m.fullyConnectedLayer(2), m.softmaxLayer()]
    X, Y = np.random.randn(8, 3).astype("float32"), np.arange(8) % 2
    launched = []
    monkeypatch.setattr(dist, "launch", lambda nproc: launched.append(nproc))
    opts = m.trainingOptions("adam", MaxEpochs=1, Verbose=False, ExecutionEnvironment="parallel")
    m.trainnet(X, Y, m.dlnetwork(layers), "crossentropy", opts)
    assert len(launched) == 1 and (launched[0] == "gpu" or launched[0] >= 1)
    if not __import__("torch").cuda.is_available():
        opts = m.trainingOptions("adam", MaxEpochs=1, ExecutionEnvironment="multi-gpu")
        with pytest.raises(al.TrainingError) as e:
            m.trainnet(X, Y, m.dlnetwork(layers), "crossentropy", opts)
        assert "multi-gpu" in str(e.value) and '"parallel"' in str(e.value)
