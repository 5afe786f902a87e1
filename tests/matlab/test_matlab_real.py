"""What real MATLAB scripts from public code needed (docs/matlab.md, "Real scripts"): the
statements around the network (plots, preprocessing, GPU state, data of their own), function
files with several outputs, and the layers of MATLAB's vision-transformer code. The .m files
are our own, written with the same constructs."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import attnlab as al
from attnlab import layers as L
from attnlab.cli import main
from attnlab.matlab import run_code, run_file, ScriptError
from attnlab.matlab.interpreter import Interpreter, _run

pytest.importorskip("tree_sitter_matlab")
HERE = Path(__file__).parent


def _analyze(capsys, name, *sets):
    code = main(["analyze", str(HERE / name), *[a for s in sets for a in ("--set", s)]])
    out = capsys.readouterr()
    return code, " ".join(out.out.replace("│", " ").split()), " ".join(out.err.split())


def test_a_script_around_its_network_analyses_with_the_data_sizes_given(capsys):
    code, out, _ = _analyze(capsys, "m15_script_around_the_network.m", "numFeatures=5")
    assert code == 0, out
    assert "network 'layers': 6 layers" in out and "no issues" in out
    # MATLAB's default names and types for bidirectional LSTMs
    assert "bilstm_1 bilstmLayer B×T×12" in out and "bilstm_2 bilstmLayer B×8" in out
    # 8·H·(C + H) + 8·H per bilstmLayer and the fc, as MATLAB counts; torch has 8·H more each
    assert "total learnables: 1,227" in out and "MATLAB counts 1,147 learnables" in out
    # the --set value stands although its statement was skipped
    assert "m15_script_around_the_network.m:11: skipped" in out and "numFeatures keeps the given value" in out
    assert "cvpartition is a MATLAB function attnlab's reader does not run" in out


def test_a_network_that_needs_data_sizes_names_the_variable_to_give(capsys):
    code, out, err = _analyze(capsys, "m15_script_around_the_network.m")
    assert code == 2
    assert "m15_script_around_the_network.m:13:1: no network could be built" in err
    assert "uses 'numFeatures' from line 11" in err and "--set numFeatures=VALUE" in err


def test_graphics_gpu_state_and_clear_run_as_matlab_does():
    ws = run_code("figure; h = 3; xlabel('t'); title(\"x\"); grid on; legend('a', 'b');\n"
                  "parallel.gpu.rng(3, 'Philox'); gpuDevice(1);\n"
                  "a = 1; b = 2; clear a\n[m, i] = max([3 9 4]); [e, j] = min([]);")
    assert "a" not in ws and ws["b"] == 2 and (ws["m"], ws["i"]) == (9, 2)
    assert np.size(ws["e"]) == 0
    drawn = torch.rand(3)                      # parallel.gpu.rng(3) seeded as rng(3) does
    torch.manual_seed(3)
    assert torch.equal(drawn, torch.rand(3))
    with pytest.raises(ScriptError, match="mapminmax is a MATLAB function attnlab's reader does "
                                          "not run: compute its result in Python"):
        run_code("y = mapminmax([1 2 3]);")


def test_analyze_skips_unknown_helpers_and_undefined_data_but_not_misspelt_layers():
    ws, interp = _run(Interpreter("[z, mu] = standardizeByCol([1 2 3]);\nn = numel(XTrain{1});\n"
                                  "layers = [featureInputLayer(3); fullyConnectedLayer(2)];",
                                  "s.m", analyze=True))
    assert len(ws["layers"]) == 2
    assert "'standardizeByCol' is neither a function attnlab knows nor a variable" in interp.notes[0]
    assert "needs 'XTrain', which the script does not define" in interp.notes[1]
    with pytest.raises(ScriptError, match="fullyConectedLayer is not a Deep Learning Toolbox"):
        _run(Interpreter("l = fullyConectedLayer(2);", "s.m", analyze=True))


def test_a_function_file_with_two_outputs_gives_both_and_skips_its_training(capsys):
    ws = run_file(HERE / "m17_function_two_outputs.m", {"numChannels": 3}, analyze=True)
    assert isinstance(ws["lgraph"], al.Network) and len(ws["layers"]) == 8
    code, out, _ = _analyze(capsys, "m17_function_two_outputs.m", "numChannels=3")
    assert code == 0 and "network 'lgraph': 7 layers" in out
    assert "needs 'XTrain', an argument of buildForecaster that was not given" in out


def test_an_initialize_that_fails_in_matlab_still_shows_the_analysis(capsys, tmp_path):
    script = tmp_path / "bad.m"
    script.write_text("net = dlnetwork;\nnet = addLayers(net, [sequenceInputLayer(1, Name='x')\n"
                      "    positionEmbeddingLayer(3, 10, Name='pos'); additionLayer(2, Name='add')]);\n"
                      "net = connectLayers(net, 'x', 'add/in2');\nnet = initialize(net);\n")
    assert main(["analyze", str(script)]) == 1
    out = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert "layer 'add' port 'in2': expected B×T×3" in out and "received B×T×1" in out
    assert "bad.m:5: initialize: the network has errors" in out


# -- the layers of MATLAB's vision transformers -------------------------------------------------

def _vit_python():
    net = al.Network()
    net.add([L.ImageInput((1, 8, 8), name="image")])
    from attnlab.matlab.vit_layers import EmbeddingConcatenation, PatchEmbedding, Swish, TanhGELU
    net.add([PatchEmbedding((4, 4), 6, "row-major", name="patches"),
             EmbeddingConcatenation(name="cls")])
    net.connect("image", "patches")
    net.add(L.PositionEmbedding(5, 6, name="pos"))
    net.add([L.Addition(2, name="add"), L.LayerNorm(eps=1e-6, name="norm"),
             L.SelfAttention(2, key_channels=6, value_channels=6, output_channels=6, name="mha"),
             TanhGELU(name="gelu"), Swish(name="swish"), L.Index1d(0, name="cls_index"),
             L.Dense(3, name="head"), L.Softmax(name="softmax")])
    net.connect("cls", "pos")
    net.connect("cls", "add/in2")
    net.connect("pos", "add/in1")
    return net


def test_the_patch_transformer_file_matches_the_same_network_built_in_python():
    net = run_file(HERE / "m16_patch_transformer.m")["net"]
    ref = _vit_python()
    ref.initialize()
    assert [l.name for l in net.layers] == [l.name for l in ref.layers]
    assert {k: tuple(v.shape) for k, v in net.learnables.items()} == \
        {k: tuple(v.shape) for k, v in ref.learnables.items()}
    # MATLAB's counts: patches 4·4·1·6 + 6, class token 6, positions 6·5
    assert net.learnables["patches/weight"].numel() + net.learnables["patches/bias"].numel() == 102
    assert net.learnables["cls/weight"].numel() == 6
    ref.load_state_dict(net.state_dict())
    x = torch.randn(2, 1, 8, 8)
    net.eval(), ref.eval()
    assert torch.allclose(net(x), ref(x), atol=1e-6)
    assert net(x).shape == (2, 3)


@pytest.mark.parametrize("mode", ["column-major", "row-major"])
def test_patch_embedding_orders_the_patches_as_matlab_flattens_them(mode):
    from attnlab.matlab import patchEmbeddingLayer, imageInputLayer, dlnetwork
    net = dlnetwork([imageInputLayer([4, 6, 1], Name="im"),
                     patchEmbeddingLayer(2, 1, SpatialFlattenMode=mode, Name="p")])
    w = net.learnables["p/weight"]
    with torch.no_grad():
        w.fill_(0.25), net.learnables["p/bias"].zero_()
    x = torch.arange(24.0).reshape(1, 1, 4, 6)
    means = torch.nn.functional.avg_pool2d(x, 2)[0, 0]        # 2×3 patch means
    expected = means.t().reshape(-1) if mode == "column-major" else means.reshape(-1)
    assert torch.allclose(net(x)[0, :, 0], expected)


def test_class_token_extends_the_mask_of_padded_sequences():
    from attnlab.matlab.vit_layers import EmbeddingConcatenation
    net = al.Network()
    net.add([L.SequenceInput(2, name="x"), EmbeddingConcatenation(name="cls"),
             L.GlobalAvgPool1d(name="mean")])
    net.initialize()
    with torch.no_grad():
        net.learnables["cls/weight"].fill_(3.0)
    # a sequence of four ones and one of two: the token (3) is a valid step of both, so the
    # means are (3 + 4·1)/5 and (3 + 2·1)/3
    batch = al.pad_sequences([torch.ones(4, 2), torch.ones(2, 2)])
    means = net(batch)
    assert torch.allclose(means, torch.tensor([[7 / 5] * 2, [5 / 3] * 2]))


# -- learn-rate and L2 factors ---------------------------------------------------------------

def _factor_net(factor):
    from attnlab.matlab import featureInputLayer, fullyConnectedLayer, dlnetwork
    torch.manual_seed(0)
    return dlnetwork([featureInputLayer(3, Name="x"),
                      fullyConnectedLayer(4, Name="frozen", WeightLearnRateFactor=0,
                                          BiasLearnRateFactor=0),
                      fullyConnectedLayer(2, Name="fc", WeightLearnRateFactor=factor)])


def _one_sgd_step(net):
    from attnlab.matlab import trainingOptions, trainnet
    X = torch.randn(8, 3, generator=torch.Generator().manual_seed(1))
    T = torch.randn(8, 2, generator=torch.Generator().manual_seed(2))
    before = {k: v.detach().clone() for k, v in net.learnables.items()}
    opts = trainingOptions("sgdm", Momentum=0, L2Regularization=0, InitialLearnRate=0.1,
                           MaxEpochs=1, MiniBatchSize=8, Shuffle="never", Verbose=False)
    trainnet(X.numpy(), T.numpy(), net, "mse", opts)
    return {k: net.learnables[k].detach() - before[k] for k in before}


def test_factor_zero_freezes_and_factor_two_doubles_the_sgd_step():
    step1, step2 = _one_sgd_step(_factor_net(1)), _one_sgd_step(_factor_net(2))
    for k in ("frozen/weight", "frozen/bias"):
        assert torch.count_nonzero(step1[k]) == 0 and torch.count_nonzero(step2[k]) == 0
    # the same start and the same gradient: the weights move twice as far, the bias as far
    assert torch.count_nonzero(step1["fc/weight"]) > 0
    assert torch.allclose(step2["fc/weight"], 2 * step1["fc/weight"], atol=1e-7)
    assert torch.allclose(step2["fc/bias"], step1["fc/bias"], atol=1e-7)


def test_l2_factors_scale_the_decay_and_the_groups_say_so():
    from attnlab.training.optim import param_groups
    w, b, frozen = (torch.nn.Parameter(torch.ones(2, 2)), torch.nn.Parameter(torch.ones(2)),
                    torch.nn.Parameter(torch.ones(2, 2)))
    b.l2_factor = 1.0                          # BiasL2Factor=1: biases decay too
    w.l2_factor = 3.0
    frozen.learn_rate_factor = 0.0
    groups = param_groups([w, b, frozen], 0.01, 1e-4)
    by = {id(p): g for g in groups for p in g["params"]}
    assert by[id(w)]["weight_decay"] == pytest.approx(3e-4) and by[id(w)]["lr"] == 0.01
    assert by[id(b)]["weight_decay"] == pytest.approx(1e-4)
    assert by[id(frozen)]["lr"] == 0.0 and groups[0]["lr"] == 0.01


def test_factors_in_scripts_set_get_and_by_property():
    ws = run_code("""
    layers = [featureInputLayer(2, Name="x"); fullyConnectedLayer(3, Name="fc", BiasL2Factor=2)];
    layers(2).WeightLearnRateFactor = 0.5;
    a = layers(2).WeightLearnRateFactor;
    l = setLearnRateFactor(layers(2), "Bias", 0);
    net = dlnetwork(layers);
    net = setL2Factor(net, "fc", "Weights", 4);
    b = getLearnRateFactor(net, "fc", "Bias");
    c = getL2Factor(net, "fc", "Bias");
    d = getL2Factor(net, "fc", "Weights");
    """)
    assert (ws["a"], ws["b"], ws["c"], ws["d"]) == (0.5, 0.0, 2.0, 4.0)
    net = ws["net"]
    assert net.learnables["fc/weight"].learn_rate_factor == 0.5
    assert net.learnables["fc/weight"].l2_factor == 4.0
    with pytest.raises(ScriptError, match=r"WeightLearnRateFactor to be a number ≥ 0 \(0 freezes the learnable\), received -1"):
        run_code("l = fullyConnectedLayer(2, WeightLearnRateFactor=-1);")
    with pytest.raises(ScriptError, match="no learnable 'Scale' for a learn-rate or L2 factor; its learnables: Bias, Weights"):
        run_code("net = dlnetwork([featureInputLayer(2, Name='x'); fullyConnectedLayer(3, Name='fc')]);"
                 " net = setLearnRateFactor(net, 'fc', 'Scale', 2);")


# -- assigning OutputNames ---------------------------------------------------------------------

def test_output_names_choose_the_outputs_inner_ones_too_and_survive_save_load(tmp_path):
    ws = run_code("""
    layers = [sequenceInputLayer(3, Name="x"); lstmLayer(4, Name="lstm");
              fullyConnectedLayer(2, Name="fc1"); fullyConnectedLayer(1, Name="fc2")];
    net = dlnetwork(layers);
    before = net.OutputNames;
    net.OutputNames = ["fc2", "lstm"];
    after = net.OutputNames;
    """)
    net = ws["net"]
    assert ws["before"] == ["fc2"] and ws["after"] == ["fc2", "lstm"]
    x = torch.randn(2, 5, 3)
    out = net(x)
    assert list(out) == ["fc2", "lstm"] and out["lstm"].shape == (2, 5, 4)
    path = tmp_path / "net.attnlab"
    net.save(path)
    loaded = al.load(path)
    assert loaded.output_names == ["fc2", "lstm"]
    loaded.load_state_dict(net.state_dict())
    assert torch.allclose(loaded(x)["lstm"], out["lstm"])
    net.choose_outputs(None)                     # back to the unconnected outputs
    assert net.output_names == ["fc2"] and torch.is_tensor(net(x))


def test_output_names_errors_name_the_layer_and_the_ports():
    with pytest.raises(ScriptError, match="OutputNames: the network has no layer 'fc3'. Did you "
                                          "mean 'fc1'"):
        run_code("net = dlnetwork([featureInputLayer(2, Name='x'); fullyConnectedLayer(2, "
                 "Name='fc1')]); net.OutputNames = {'fc3'};")
    net = al.Network([L.SequenceInput(2, name="x"), L.LSTM(3, has_state_outputs=True, name="lstm")])
    with pytest.raises(al.NetworkError, match="layer 'lstm' has outputs out, hidden, cell: name one"):
        net.choose_outputs(["lstm"])
    net.choose_outputs(["lstm/hidden"])
    assert net.output_names == ["lstm/hidden"]


# -- weights by MATLAB name: gruLayer, normalisation, embeddings -------------------------------

def test_gru_weights_by_matlab_name_in_matlab_gate_order_and_both_bias_modes():
    from attnlab.matlab import (dlnetwork, getLayerWeights, gruLayer, sequenceInputLayer,
                                setLayerWeights)
    net = dlnetwork([sequenceInputLayer(2, Name="x"), gruLayer(3, Name="gru")])
    p = net.learnables
    w = getLayerWeights(net, "gru")
    assert w["InputWeights"].shape == (9, 2) and w["RecurrentWeights"].shape == (9, 3)
    # reset, update, candidate: torch's weight_ih_l0 rows in the same order
    assert np.allclose(w["InputWeights"], p["gru/weight_ih_l0"].detach().numpy())
    assert w["Bias"].shape == (9, 1)
    assert np.allclose(w["Bias"][:, 0], (p["gru/bias_ih_l0"] + p["gru/bias_hh_l0"]).detach().numpy())
    b = np.arange(9.0)
    setLayerWeights(net, "gru", Bias=b)
    assert torch.equal(p["gru/bias_ih_l0"].detach(), torch.arange(9.0))
    assert torch.count_nonzero(p["gru/bias_hh_l0"]) == 0
    six = dlnetwork([sequenceInputLayer(2, Name="x"),
                     gruLayer(3, Name="gru", ResetGateMode="recurrent-bias-after-multiplication")])
    w6 = getLayerWeights(six, "gru")["Bias"][:, 0]
    q = six.learnables
    assert np.allclose(w6, torch.cat([q["gru/bias_ih_l0"], q["gru/bias_hh_l0"]]).detach().numpy())


def test_normalisation_scale_offset_and_embedding_weights_by_matlab_name():
    ws = run_code("""
    layers = [sequenceInputLayer(1, Name="tok"); embeddingLayer(3, 5, Name="emb");
              layerNormalizationLayer(Name="ln", Scale=[1; 2; 3], OffsetLearnRateFactor=0)];
    net = dlnetwork(layers);
    s = net.Layers(3).Scale;
    E = net.Layers(2).Weights;
    net = setLayerWeights(net, "emb", Weights=reshape(1:15, 3, 5));
    """)
    net, p = ws["net"], ws["net"].learnables
    assert ws["s"].shape == (3, 1) and np.allclose(ws["s"][:, 0], [1, 2, 3])
    assert torch.equal(p["ln/weight"].detach(), torch.tensor([1.0, 2.0, 3.0]))
    assert ws["E"].shape == (3, 5)
    # MATLAB's column k is the vector of index k: torch's row k (row 0 is unused)
    assert torch.equal(p["emb/weight"][1:].detach(), torch.arange(1.0, 16.0).reshape(5, 3))
    y = net(torch.tensor([[[2.0]]]))
    assert torch.allclose(torch.nn.functional.layer_norm(torch.tensor([4.0, 5, 6]), (3,)) *
                          torch.tensor([1.0, 2, 3]) + p["ln/bias"].detach(), y[0, 0], atol=1e-5)
    assert getattr(p["ln/bias"], "learn_rate_factor", None) is None    # marked when training


# -- initializers given as functions ---------------------------------------------------------

def test_initializer_function_handles_run_in_the_interpreter_with_matlab_sizes():
    ws = run_code("""
    rng(4);
    layers = [featureInputLayer(3, Name="x")
              fullyConnectedLayer(2, Name="fc", WeightsInitializer=@(sz) 0.01*randn(sz), ...
                                  BiasInitializer=@(sz) ones(sz) * numel(sz))
              lstmLayer(4, Name="lstm", InputWeightsInitializer=@(sz) zeros(sz) + sz(1))];
    net = dlnetwork([layers(1:2); fullyConnectedLayer(4, Name="up")]);
    """)
    p = ws["net"].learnables
    np.random.seed(4)
    assert np.allclose(p["fc/weight"].detach().numpy(), 0.01 * np.random.randn(2, 3), atol=1e-7)
    assert torch.equal(p["fc/bias"].detach(), torch.full((2,), 2.0))      # sz is [2 1]


def test_python_callables_as_initializers_get_the_size_as_a_tuple():
    from attnlab.matlab import dlnetwork, featureInputLayer, fullyConnectedLayer
    seen = []

    def init(sz):
        seen.append(sz)
        return np.full(sz, 0.5)

    net = dlnetwork([featureInputLayer(3, Name="x"),
                     fullyConnectedLayer(2, Name="fc", WeightsInitializer=init)])
    assert seen == [(2, 3)] and torch.equal(net.learnables["fc/weight"].detach(),
                                            torch.full((2, 3), 0.5))
    with pytest.raises(al.ArgumentError, match=r"layer 'fc' WeightsInitializer: the initializer "
                                               r"function failed for Weights of size 2×3"):
        dlnetwork([featureInputLayer(3, Name="x"),
                   fullyConnectedLayer(2, Name="fc", WeightsInitializer=lambda sz: 1 / 0)])
    with pytest.raises(al.SizeError, match="expected 2×3"):
        dlnetwork([featureInputLayer(3, Name="x"),
                   fullyConnectedLayer(2, Name="fc", WeightsInitializer=lambda sz: np.ones(4))])


def test_scores2label_with_two_outputs_gives_the_labels_and_the_best_scores():
    ws = run_code('s = [0.1 0.7 0.2; 0.6 0.3 0.1];\n[Y, best] = scores2label(s, ["a" "b" "c"]);\n'
                  'c = categories(Y);')
    assert [str(v) for v in ws["Y"].values] == ["b", "a"]
    assert np.allclose(ws["best"], [0.7, 0.6]) and list(ws["c"]) == ["a", "b", "c"]


# -- grouped and channel-wise convolutions -----------------------------------------------------

def test_grouped_convolution_matches_torch_groups_and_reads_weights_in_matlab_shape(tmp_path):
    ws = run_code("""
    layers = [imageInputLayer([6 6 4], Name="im")
              groupedConvolution2dLayer(3, 2, 'channel-wise', Name="dw", Padding=[1 1 1 1])
              groupedConvolution2dLayer([3 3], 3, 2, Name="g2", Stride=2, Padding="same")];
    net = dlnetwork(layers);
    W = net.Layers(2).Weights;
    B = net.Layers(3).Bias;
    """)
    net, p = ws["net"], ws["net"].learnables
    assert ws["W"].shape == (3, 3, 1, 2, 4) and ws["B"].shape == (1, 1, 3, 2)
    assert tuple(p["dw/weight"].shape) == (8, 1, 3, 3) and tuple(p["g2/weight"].shape) == (6, 4, 3, 3)
    # MATLAB's W(:, :, 1, f, g) is torch's filter g·fpg + f of group g
    assert np.allclose(ws["W"][:, :, 0, 1, 3], p["dw/weight"][3 * 2 + 1, 0].detach().numpy())
    x = torch.randn(2, 4, 6, 6)
    ref = torch.nn.functional.conv2d(x, p["dw/weight"], p["dw/bias"], padding=1, groups=4)
    # "same" with stride 2 on 6 rows: MATLAB puts the one padding row at the bottom
    ref2 = torch.nn.functional.conv2d(torch.nn.functional.pad(ref, (0, 1, 0, 1)), p["g2/weight"],
                                      p["g2/bias"], stride=2, groups=2)
    assert torch.allclose(net(x), ref2, atol=1e-5) and net(x).shape == (2, 6, 3, 3)
    path = tmp_path / "g.attnlab"
    net.save(path)
    back = al.load(path)
    back.load_state_dict(net.state_dict())
    assert torch.allclose(back(x), net(x), atol=1e-6)
    with pytest.raises(ScriptError, match="channels divisible by numGroups 3"):
        run_code("n = dlnetwork([imageInputLayer([4 4 4]); groupedConvolution2dLayer(3, 1, 3)]);")
