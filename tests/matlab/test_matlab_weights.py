"""Weights by MATLAB name in MATLAB's shapes, and MATLAB's initializers: each compared with the same
computation written directly in torch."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import attnlab as al
import attnlab.matlab as M

rng = np.random.default_rng(0)


def _r(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def _t(a):
    return torch.as_tensor(np.asarray(a, dtype=np.float32))


def test_fully_connected_weights_and_bias():
    W, b = _r(2, 3), _r(2)
    net = M.dlnetwork([M.featureInputLayer(3, Name="in"),
                       M.fullyConnectedLayer(2, Weights=W, Bias=b, Name="fc")])
    got = M.getLayerWeights(net, "fc")
    assert got["Weights"].shape == (2, 3) and got["Bias"].shape == (2, 1)
    x = _r(4, 3)
    torch.testing.assert_close(_t(M.predict(net, x)), F.linear(_t(x), _t(W), _t(b)))
    W2 = _r(2, 3)
    M.setLayerWeights(net, "fc", Weights=W2)
    torch.testing.assert_close(_t(M.predict(net, x)), F.linear(_t(x), _t(W2), _t(b)))


def test_convolution_weights_in_matlab_order():
    # MATLAB: FilterSize(1)×FilterSize(2)×NumChannels×NumFilters, Bias 1×1×NumFilters
    W, b = _r(3, 2, 4, 5), _r(1, 1, 5)
    net = M.dlnetwork([M.imageInputLayer([6, 7, 4], Name="im"),
                       M.convolution2dLayer([3, 2], 5, Name="conv")])
    M.setLayerWeights(net, "conv", Weights=W, Bias=b)
    x = _r(2, 4, 6, 7)
    want = F.conv2d(_t(x), _t(W).permute(3, 2, 0, 1), _t(b).reshape(5))
    torch.testing.assert_close(_t(M.predict(net, x)), want)
    np.testing.assert_array_equal(M.getLayerWeights(net, "conv")["Weights"], W)

    W1 = _r(3, 4, 5)                        # FilterSize×NumChannels×NumFilters
    net = M.dlnetwork([M.sequenceInputLayer(4, Name="in"),
                       M.convolution1dLayer(3, 5, Weights=W1, Bias=np.zeros((1, 5)), Name="c")])
    x = _r(2, 6, 4)                         # B×T×C
    want = F.conv1d(_t(x).transpose(1, 2), _t(W1).permute(2, 1, 0)).transpose(1, 2)
    torch.testing.assert_close(_t(M.predict(net, x)), want)


def test_lstm_gates_stack_as_torch_and_one_bias():
    H, C = 3, 2
    Wi, Wr, b = _r(4 * H, C), _r(4 * H, H), _r(4 * H, 1)
    net = M.dlnetwork([M.sequenceInputLayer(C, Name="in"), M.lstmLayer(H, Name="lstm")])
    M.setLayerWeights(net, "lstm", InputWeights=Wi, RecurrentWeights=Wr, Bias=b)
    ref = torch.nn.LSTM(C, H, batch_first=True)
    with torch.no_grad():
        ref.weight_ih_l0.copy_(_t(Wi)), ref.weight_hh_l0.copy_(_t(Wr))
        ref.bias_ih_l0.copy_(_t(b).reshape(-1)), ref.bias_hh_l0.zero_()
    x = _r(2, 5, C)
    torch.testing.assert_close(_t(M.predict(net, x)), ref(_t(x))[0])
    got = M.getLayerWeights(net, "lstm")
    np.testing.assert_allclose(got["Bias"], b, rtol=1e-6)
    assert set(got) == {"InputWeights", "RecurrentWeights", "Bias"}
    bi = M.dlnetwork([M.sequenceInputLayer(C), M.bilstmLayer(H, Name="bi")])
    shapes = {k: v.shape for k, v in M.getLayerWeights(bi, "bi").items()}
    assert shapes == {"InputWeights": (8 * H, C), "RecurrentWeights": (8 * H, H), "Bias": (8 * H, 1)}


def test_self_attention_weights_against_manual_attention():
    C, K, heads, T = 4, 6, 2, 5
    w = {"QueryWeights": _r(K, C), "KeyWeights": _r(K, C), "ValueWeights": _r(K, C),
         "OutputWeights": _r(C, K), "QueryBias": _r(K, 1), "KeyBias": _r(K, 1),
         "ValueBias": _r(K, 1), "OutputBias": _r(C, 1)}
    net = M.dlnetwork([M.sequenceInputLayer(C, Name="in"), M.selfAttentionLayer(heads, K, Name="sa")])
    M.setLayerWeights(net, "sa", **w)
    x = _t(_r(2, T, C))

    def proj(name):
        y = F.linear(x, _t(w[f"{name}Weights"]), _t(w[f"{name}Bias"]).reshape(-1))
        return y.reshape(2, T, heads, K // heads).transpose(1, 2)
    att = F.scaled_dot_product_attention(proj("Query"), proj("Key"), proj("Value"))
    want = F.linear(att.transpose(1, 2).reshape(2, T, K), _t(w["OutputWeights"]),
                    _t(w["OutputBias"]).reshape(-1))
    torch.testing.assert_close(_t(M.predict(net, x.numpy())), want, rtol=1e-4, atol=1e-5)


def test_weight_errors_name_layer_property_and_shape():
    net = M.dlnetwork([M.featureInputLayer(3), M.fullyConnectedLayer(2, Name="fc")])
    with pytest.raises(al.SizeError, match=r"layer 'fc' Weights: expected 2×3 .*received 3×2"):
        M.setLayerWeights(net, "fc", Weights=np.ones((3, 2)))
    with pytest.raises(al.ArgumentError, match=r"no property 'Weight'.*Weights"):
        M.setLayerWeights(net, "fc", Weight=np.ones((2, 3)))
    with pytest.raises(al.ArgumentError, match=r"no layer 'fx'"):
        M.getLayerWeights(net, "fx")


@pytest.mark.parametrize("word, torch_init", [
    ("he", lambda t: torch.nn.init.kaiming_normal_(t, nonlinearity="relu")),
    ("glorot", torch.nn.init.xavier_uniform_),
    ("orthogonal", torch.nn.init.orthogonal_),
    ("narrow-normal", lambda t: t.normal_(0, 0.01)),
    ("zeros", torch.nn.init.zeros_),
])
def test_weights_initializer_matches_torch_init(word, torch_init):
    # same seed, same draws: the default init of the build, then the initializer
    torch.manual_seed(3)
    net = M.dlnetwork([M.featureInputLayer(8), M.fullyConnectedLayer(6, WeightsInitializer=word,
                                                                      BiasInitializer="ones",
                                                                      Name="fc")])
    torch.manual_seed(3)
    ref = M.dlnetwork([M.featureInputLayer(8), M.fullyConnectedLayer(6, Name="fc")])
    with torch.no_grad():
        torch_init(ref.learnables["fc/weight"])
    torch.testing.assert_close(net.learnables["fc/weight"], ref.learnables["fc/weight"])
    assert torch.equal(net.learnables["fc/bias"], torch.ones(6))


def test_lstm_initializers_and_script_properties():
    ws = M.run_code("""
    layers = [sequenceInputLayer(2, Name="in")
              lstmLayer(3, 'InputWeightsInitializer', 'zeros', ...
                        BiasInitializer="unit-forget-gate", Name="lstm")
              fullyConnectedLayer(2, Name="fc")];
    layers(3).Bias = [1; 2];   % a preset, used when the network is built
    net = dlnetwork(layers);
    b = net.Layers(2).Bias;
    fcb = net.Layers(3).Bias;
    W = net.Layers(2).InputWeights;
    """)
    np.testing.assert_array_equal(ws["b"].ravel(), [0] * 3 + [1] * 3 + [0] * 6)
    np.testing.assert_array_equal(ws["fcb"], [[1], [2]])
    assert not ws["W"].any() and ws["W"].shape == (12, 2)
    with pytest.raises(M.ScriptError, match=r"read-only.*setLayerWeights"):
        M.run_code("net.Layers(2).Bias = zeros(12, 1);", workspace={"net": ws["net"]})


def test_presets_wait_for_a_network_sized_by_data():
    W = _r(2, 3)
    net = M.dlnetwork([M.fullyConnectedLayer(2, Weights=W, Bias=[0, 0], Name="fc")])
    x = _r(4, 3)
    net = M.initialize(net, x)
    torch.testing.assert_close(_t(M.predict(net, x)), F.linear(_t(x), _t(W)))


def test_predict_outputs_of_inner_layers_match_python():
    net = M.dlnetwork([M.sequenceInputLayer(3, Name="in"), M.lstmLayer(4, Name="lstm"),
                       M.fullyConnectedLayer(5, Name="fc1"), M.reluLayer(Name="r"),
                       M.fullyConnectedLayer(2, Name="fc2")])
    x = _r(2, 6, 3)
    h, y = M.predict(net, x, Outputs=["lstm", "fc2"])
    torch.testing.assert_close(y, _t(M.predict(net, x)))
    w = M.getLayerWeights(net, "fc1")
    ref = net.layer_modules["lstm"]
    with torch.no_grad():
        torch.testing.assert_close(h, ref(_t(x)))
    fc1 = M.minibatchpredict(net, x, Outputs="fc1", MiniBatchSize=1)   # two batches, joined
    torch.testing.assert_close(fc1, F.linear(h, _t(w["Weights"]), _t(w["Bias"]).reshape(-1)))
    with pytest.raises(al.ArgumentError, match=r"predict: expected Outputs .*received 'fc3'.*fc2"):
        M.predict(net, x, Outputs="fc3")
