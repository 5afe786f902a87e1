"""Scripts written as people write them (the shapes of MathWorks examples, MATLAB Answers
questions, GitHub projects), each in tests/matlab/real/ with a header saying the pattern and what
MATLAB does with it. Each runs through `attnlab analyze FILE.m` (exit code and the words that
matter) and through `run_file`; those that train do so for one epoch on tiny data."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import attnlab as al
from attnlab.cli import main
from attnlab.core.errors import NetworkError
from attnlab.matlab import run_code, run_file, ScriptError
import attnlab.matlab as M

pytest.importorskip("tree_sitter_matlab")
REAL = Path(__file__).parent / "real"


def _analyze(capsys, name, *sets):
    code = main(["analyze", str(REAL / name), *[a for s in sets for a in ("--set", s)]])
    out = capsys.readouterr()
    return code, " ".join(out.out.replace("│", " ").split()), " ".join(out.err.split())


def _quiet(*args, **kwargs):
    return None


def _seq(n=6, t=5, c=12, classes=9, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, t, c, generator=g), torch.randint(0, classes, (n,), generator=g)


def _types(net):
    return [type(l).__name__ for l in net.layers]


@pytest.fixture
def one_epoch(monkeypatch):
    """Training as the script asks, for one epoch (the example's MaxEpochs is for its data)."""
    import attnlab.training as training
    real = training.train

    def train(net, *data, options=None, **kwargs):
        return real(net, *data, options=options.replace(max_epochs=1), **kwargs)
    monkeypatch.setattr(training, "train", train)


# -- 1. the analysed network is the one the script built -------------------------------------

def test_trainNetwork_output_holds_the_layers_it_was_given(capsys):
    code, out, _ = _analyze(capsys, "r01_trainnetwork_replaces_net.m")
    assert code == 0, out
    assert "1 network, held by 'net' (trainNetwork at line 28, from 'layers': " \
           "analysed as built, untrained)" in out
    assert "network 'net': 4 layers" in out and "no issues" in out
    assert "lstm lstmLayer B×100" in out


def test_trainNetwork_script_trains_with_run_file_on_tiny_data():
    X, Y = _seq()
    Xt, Yt = _seq(n=4, seed=1)
    labels = np.array([f"speaker{i + 1}" for i in range(9)])
    ws = run_file(REAL / "r01_trainnetwork_replaces_net.m",
                  {"XTrain": X, "YTrain": M.categorical(labels[Y.numpy()], labels),
                   "XTest": Xt, "YTest": M.categorical(labels[Yt.numpy()], labels)}, out=_quiet)
    net = ws["net"]
    assert isinstance(net, al.Network) and net.initialized and net.training_info is not None
    assert _types(net) == ["SequenceInput", "LSTM", "Dense", "Softmax"]
    assert len(ws["YPred"]) == 4            # classify(..., 'SequenceLength', 'longest'): an option
    assert 0.0 <= float(ws["acc"]) <= 1.0


def test_trainnet_into_the_same_variable_keeps_the_dlnetwork(capsys):
    code, out, _ = _analyze(capsys, "r02_trainnet_overwrites_dlnetwork.m")
    assert code == 0, out
    assert "1 network, held by 'net'" in out and "network 'net': 3 layers" in out
    assert "r02_trainnet_overwrites_dlnetwork.m:12: skipped" in out and "'net' keeps its network" in out


def test_two_outputs_and_clearvars_except_keep_the_network(capsys):
    code, out, _ = _analyze(capsys, "r03_info_output_and_clear.m")
    assert code == 0, out
    assert "held by 'lgraph', 'net' (trainNetwork at line 13, from 'lgraph'" in out
    assert "network 'lgraph': 4 layers" in out and "no issues" in out
    ws = run_file(REAL / "r03_info_output_and_clear.m",
                  {"XTrain": np.random.rand(8, 4).astype(np.float32),
                   "YTrain": np.random.rand(8, 1).astype(np.float32)}, out=_quiet)
    assert set(ws) >= {"net", "lgraph", "info"} and "inputSize" not in ws and "opts" not in ws
    assert ws["net"].training_info is ws["info"]


def test_skipped_objects_take_property_sets_and_methods(capsys):
    code, out, _ = _analyze(capsys, "r04_skipped_objects.m")
    assert code == 0, out
    assert "network 'net': 6 layers" in out and "no issues" in out
    assert "r04_skipped_objects.m:4: skipped: sets a property of 'ds', which line 3 left " \
           "uncomputed" in out
    ws = run_file(REAL / "r04_skipped_objects.m", {"XTrain": np.zeros((28, 28, 5))}, out=_quiet)
    assert ws["net"].initialized and _types(ws["net"])[0] == "ImageInput"


def test_custom_training_loop_is_one_note_and_the_network_it_trains_is_analysed(capsys):
    code, out, _ = _analyze(capsys, "r05_custom_loop.m")
    assert code == 0, out
    assert "network 'net': 5 layers" in out and "no issues" in out
    assert out.count("custom training loop (lines 20-33") == 1
    assert "trainingProgressMonitor belongs to a custom training loop" in out
    printed: list = []
    ws = run_file(REAL / "r05_custom_loop.m", {"ds": M.arrayDatastore(np.zeros((4, 8)))},
                  out=printed.append)
    net = ws["net"]                              # the network as built, never lost
    assert isinstance(net, al.Network) and net.initialized and len(net.layers) == 5
    assert getattr(net, "training_info", None) is None
    assert type(ws["epoch"]).__name__ == "Missing"          # set in the loop: not computed
    loop = [p for p in printed if "custom training loop (lines 20-33" in p]
    assert len(loop) == 1 and "which run_file does not run; 'net' keeps the network as " \
        "built, untrained" in loop[0] and "trainnet(X, T, net, lossFcn, options)" in loop[0]
    assert any("r05_custom_loop.m:14: skipped: minibatchqueue belongs to a custom training "
               "loop" in p for p in printed)
    with pytest.raises(ScriptError, match=r"<script>:5:\d+: uses 'loss' from line 2, which "
                                          "was skipped"):
        run_code("net = dlnetwork([featureInputLayer(2) fullyConnectedLayer(1)]);\n"
                 "for k = 1:3\n  [loss, g] = dlfeval(@f, net);\nend\ndisp(loss)\n",
                 out=_quiet)


def test_a_skipped_branch_keeps_the_network_and_loops_note_once(capsys):
    code, out, _ = _analyze(capsys, "r09_skipped_branch_and_loop_notes.m")
    assert code == 0, out
    assert "network 'net': 5 layers" in out
    assert out.count("r09_skipped_branch_and_loop_notes.m:24: skipped") == 1
    assert out.count("r09_skipped_branch_and_loop_notes.m:25: skipped") == 1


def test_a_network_built_in_part_is_not_reported_clean(capsys):
    code, out, err = _analyze(capsys, "r10_fragment_is_not_clean.m")
    assert code == 2 and "no issues" not in out
    assert "r10_fragment_is_not_clean.m:8:1: the network could not be built whole" in err
    assert "--set numClasses=VALUE" in err
    code, out, _ = _analyze(capsys, "r10_fragment_is_not_clean.m", "numClasses=3")
    assert code == 0 and "network 'layers': 4 layers" in out


def test_clear_and_clearvars_except_as_matlab(capsys):
    code, out, _ = _analyze(capsys, "r11_clear_keeps_networks.m")
    assert code == 0 and "1 network, held by 'net'" in out and "'tmp'" not in out
    ws = run_file(REAL / "r11_clear_keeps_networks.m", out=_quiet)
    assert set(ws) == {"net", "results"}
    ws = run_code("a = 1; tmpA = 2; tmpB = 3;\nclear -regexp ^tmp\nb = 2; c = 3;\n"
                  "clearvars -except a b\n")
    assert set(ws) == {"a", "b"}


def test_a_network_cleared_at_the_end_is_still_analysed(capsys, tmp_path):
    script = tmp_path / "cleared.m"
    script.write_text("layers = [featureInputLayer(3) fullyConnectedLayer(2)];\n"
                      "net = dlnetwork(layers);\nclear net layers\n")
    assert main(["analyze", str(script)]) == 0
    out = capsys.readouterr().out
    assert "network 'net': 2 layers" in out and "'net' was cleared at line 3" in out


def test_a_script_that_builds_no_network_exits_2(capsys):
    code, out, err = _analyze(capsys, "r08_no_network.m")
    assert code == 2 and "r08_no_network.m: the script builds no network" in err
    assert np.allclose(run_file(REAL / "r08_no_network.m", out=_quiet)["sig"], 2)


def test_graphics_handles_and_method_syntax_in_run_code():
    ws = run_code("f = figure; f.Position = [1 2 3 4]; t = tiledlayout(2, 1); "
                  "t.TileSpacing = 'compact'; ax = nexttile; ax.YLim = [0 1]; h = plot(1:3);\n"
                  "net = dlnetwork; net = net.addLayers([featureInputLayer(2) "
                  "fullyConnectedLayer(1)]); net = net.initialize();")
    assert ws["net"].initialized and _types(ws["net"]) == ["FeatureInput", "Dense"]


# -- 3. what MATLAB refuses, refused ------------------------------------------------------------

def test_dlnetwork_given_an_output_layer_is_a_network_error(capsys):
    code, out, _ = _analyze(capsys, "r06_output_layer_in_dlnetwork.m")
    assert code == 1, out
    assert "error: r06_output_layer_in_dlnetwork.m:8: dlnetwork: layer 'regressionLayer' " \
           "(regressionLayer) is an output layer, and a dlnetwork must not contain output " \
           "layers" in out
    assert 'trainnet(X, T, net, "mse", options)' in out
    with pytest.raises(ScriptError, match="r06_output_layer_in_dlnetwork.m:8:.*must not contain "
                                          "output layers"):
        run_file(REAL / "r06_output_layer_in_dlnetwork.m", out=_quiet)
    with pytest.raises(NetworkError, match="classificationLayer.*crossentropy"):
        M.dlnetwork([M.featureInputLayer(2), M.fullyConnectedLayer(2), M.softmaxLayer(),
                     M.classificationLayer()])


@pytest.mark.parametrize("name,line", [("r07_concat_sequence_feature.m", None),
                                       ("r12_concat_in_array.m", 14)])
def test_a_sequence_branch_joined_to_features_names_both_sizes_and_the_fix(capsys, name, line):
    code, out, _ = _analyze(capsys, name)
    assert code == 1, out
    assert "its inputs disagree" in out and "receives a sequence B×T×" in out
    assert "features B×" in out and 'OutputMode="last" on \'lstm\'' in out
    if line:
        assert f"{name}:{line}: dlnetwork: the network has errors" in out


# -- 2. what current MATLAB accepts, accepted -----------------------------------------------

def test_repmat_of_a_block_and_one_layer_twice_are_copies_as_in_matlab(capsys):
    code, out, _ = _analyze(capsys, "r13_repmat_and_shared_layer.m")
    assert code == 0, out
    assert "1 network, held by 'net'" in out and "network 'net': 12 layers" in out
    assert "network 'block'" not in out                # copied into 'net', not a network itself
    ws = run_file(REAL / "r13_repmat_and_shared_layer.m", out=_quiet)
    net = ws["net"]
    assert _types(net) == ["FeatureInput"] + ["Dense", "ReLU"] * 5 + ["Dense"]
    assert len({id(l) for l in net.layers}) == 12             # no layer object twice
    assert sum(l is ws["act"] for l in net.layers) <= 1
    assert tuple(net.learnables["fc_3/weight"].shape) == (16, 16)     # the third copy of fc(16)
    assert tuple(net.learnables["fc_4/weight"].shape) == (8, 16)
    assert len(ws["layers"]) == 12 and ws["block"][0].name is None     # the originals untouched


def test_spatial_dropout_drops_whole_channels(capsys):
    code, out, _ = _analyze(capsys, "r14_spatial_dropout.m")
    assert code == 0, out
    assert "spatialdrop spatialDropoutLayer B×8×16×16" in out
    assert "spatialdrop spatialDropoutLayer B×T×6" in out
    ws = run_file(REAL / "r14_spatial_dropout.m", out=_quiet)
    layer = ws["netImg"].layers[3]
    assert type(layer).__name__ == "SpatialDropout" and layer.p == 0.25
    drop = M.dlnetwork([M.sequenceInputLayer(64), M.spatialDropoutLayer(Probability=0.5)])
    drop.train()
    torch.manual_seed(0)
    y = drop(torch.ones(8, 5, 64))
    per_channel = y[:, 0, :]
    assert torch.equal(y, per_channel.unsqueeze(1).expand_as(y))      # same over all time steps
    assert set(per_channel.unique().tolist()) == {0.0, 2.0}           # dropped, or kept × 1/(1-p)
    drop.eval()
    assert torch.equal(drop(torch.ones(2, 3, 64)), torch.ones(2, 3, 64))
    with pytest.raises(al.ArgumentError, match="spatialDropoutLayer: expected Probability in "
                                               r"\[0, 1\), received 1.5"):
        M.spatialDropoutLayer(Probability=1.5)


def test_closed_loop_forecasting_with_the_network_state_equals_forecast(capsys):
    code, out, _ = _analyze(capsys, "r15_closed_loop_forecast.m")
    assert code == 0, out
    assert "held by 'net' (trainnet at line 13, from 'layers'" in out
    g = torch.Generator().manual_seed(0)
    X, T = torch.randn(6, 9, 2, generator=g), torch.randn(6, 9, 2, generator=g)
    history = torch.randn(7, 2, generator=g)
    ws = run_file(REAL / "r15_closed_loop_forecast.m", {"XTrain": X, "TTrain": T,
                                                         "XTest": history}, out=_quiet)
    net = ws["net"]
    assert net.training_info is not None and ws["Y"].shape == (4, 2)
    net.eval()
    expected = al.forecast(net, history[:5], 4).numpy()
    np.testing.assert_allclose(ws["Y"], expected, atol=1e-5)        # predict + net.State
    np.testing.assert_allclose(ws["Y2"], expected, atol=1e-5)       # predictAndUpdateState
    # resetState starts again; a state not kept (net.State not set) is not the network's
    again = run_code("net = resetState(net);\n[net, a] = predictAndUpdateState(net, X);\n"
                     "net = resetState(net);\n[b, s] = predict(net, X);\n[c, s2] = predict(net, X);\n",
                     {"net": net, "X": history[:3].numpy()})
    np.testing.assert_allclose(again["a"], again["b"], atol=1e-6)
    np.testing.assert_allclose(again["b"], again["c"], atol=1e-6)


def test_training_options_as_matlab_matches_them():
    ws = run_code("o = trainingOptions('adam', 'maxepochs', 2, 'MiniBatch', 4, 'verbose', 0, "
                  "'initiallearn', 0.01);\n"
                  "p = trainingOptions(\"sgdm\", SequencePaddingDirection=\"left\", "
                  "InputDataFormats=\"CTB\", TargetDataFormats=\"CB\");")
    o = ws["o"]
    assert (o.max_epochs, o.batch_size, o.verbose, o.learning_rate) == (2, 4, False, 0.01)
    assert ws["p"].solver == "sgdm"
    with pytest.raises(ScriptError, match="'Sequence' is the start of several options"):
        run_code("o = trainingOptions('adam', 'Sequence', 'longest');")
    with pytest.raises(ScriptError, match="InputDataFormats .auto. or MATLAB data formats"):
        run_code("o = trainingOptions('adam', InputDataFormats='XYZ');")


def _train_with_formats(X, T, formats, target="auto", layers=None):
    torch.manual_seed(0)
    layers = layers or ("[sequenceInputLayer(3) lstmLayer(4, OutputMode='last') "
                        "fullyConnectedLayer(2)]")
    ws = run_code(f"layers = {layers};\n"
                  f"o = trainingOptions('adam', MaxEpochs=2, MiniBatchSize=3, Shuffle='never', "
                  f"Verbose=false, InputDataFormats='{formats}', TargetDataFormats='{target}');\n"
                  "net = trainnet(X, T, layers, 'mse', o);", {"X": X, "T": T})
    return ws["net"].learnables


@pytest.mark.parametrize("formats,layout", [("CTB", (2, 1, 0)), ("TCB", (1, 2, 0)),
                                            ("BTC", (0, 1, 2)), ("CBT", (2, 0, 1))])
def test_input_data_formats_permute_the_data_to_attnlabs_layout(formats, layout):
    g = torch.Generator().manual_seed(0)
    X, T = torch.randn(6, 5, 3, generator=g), torch.randn(6, 2, generator=g)     # B×T×C
    default = _train_with_formats(X, T, "auto")
    given = _train_with_formats(X.permute(*layout), T.T, formats, target="CB")
    for name, value in default.items():
        torch.testing.assert_close(given[name], value)


def test_data_formats_of_cells_images_and_features_train_as_the_default_layout():
    g = torch.Generator().manual_seed(1)
    seqs = [torch.randn(n, 3, generator=g) for n in (4, 2, 5)]                  # T×C each
    T = torch.randn(3, 2, generator=g)
    default = _train_with_formats(seqs, T, "auto")
    given = _train_with_formats([x.T for x in seqs], T, "CTB")                  # C×T each
    for name, value in default.items():
        torch.testing.assert_close(given[name], value)
    images, Ti = torch.randn(4, 2, 5, 6, generator=g), torch.randn(4, 3, generator=g)
    cnn = "[imageInputLayer([5 6 2]) convolution2dLayer(3, 2) flattenLayer fullyConnectedLayer(3)]"
    default = _train_with_formats(images, Ti, "auto", layers=cnn)
    given = _train_with_formats(images.permute(2, 3, 1, 0), Ti, "SSCB", layers=cnn)   # h×w×c×B
    for name, value in default.items():
        torch.testing.assert_close(given[name], value)
    feats, Tf = torch.randn(5, 3, generator=g), torch.randn(5, 2, generator=g)
    mlp = "[featureInputLayer(3) fullyConnectedLayer(2)]"
    default = _train_with_formats(feats, Tf, "auto", layers=mlp)
    given = _train_with_formats(feats.T.numpy(), Tf.T, "CB", target="CB", layers=mlp)
    for name, value in default.items():
        torch.testing.assert_close(given[name], value)


def test_unknown_or_mismatched_data_formats_name_the_problem():
    X, T = torch.randn(6, 5, 3), torch.randn(6, 2)
    with pytest.raises(ScriptError, match="InputDataFormats \"SSCB\" gives images "
                                          r"\(B×C×H×W\), and input 'sequenceinput' reads "
                                          r"sequences \(B×T×C\)"):
        _train_with_formats(X, T, "SSCB")
    with pytest.raises(ScriptError, match="InputDataFormats \"CTBT\".*T 2 times"):
        _train_with_formats(X, T, "CTBT")
    with pytest.raises(ScriptError, match="InputDataFormats \"CB\" gives features"):
        _train_with_formats(X, T, "CB")
    with pytest.raises(ScriptError, match="InputDataFormats \"CT\".*one C and one B"):
        _train_with_formats(X, T, "CT")
    with pytest.raises(ScriptError, match="InputDataFormats \"CTB\" names 3 dimensions, and "
                                          r"the predictors have 4 \(size 1×3×5×6\)"):
        _train_with_formats(X.permute(2, 1, 0)[None], T.T, "CTB", target="CB")


def test_left_padding_gives_the_results_of_right_padding():
    g = torch.Generator().manual_seed(1)
    seqs = [torch.randn(n, 3, generator=g) for n in (2, 5, 4, 3)]
    labels = np.array(["a", "b", "a", "b"])
    results = []
    for side in ("left", "right"):
        torch.manual_seed(0)
        ws = run_code(f"layers = [sequenceInputLayer(3) lstmLayer(5, OutputMode='last') "
                      f"fullyConnectedLayer(2) softmaxLayer classificationLayer];\n"
                      f"o = trainingOptions('sgdm', MaxEpochs=1, MiniBatchSize=4, Shuffle='never', "
                      f"SequencePaddingDirection='{side}', Verbose=false);\n"
                      f"net = trainNetwork(X, Y, layers, o);\n"
                      f"s = predict(net, X, 'SequencePaddingDirection', '{side}');",
                      {"X": seqs, "Y": M.categorical(labels)})
        results.append(np.asarray(ws["s"]))
    np.testing.assert_allclose(results[0], results[1], atol=1e-6)


def test_local_functions_with_arguments_blocks_and_a_two_input_function_layer(capsys):
    code, out, _ = _analyze(capsys, "r16_local_functions_and_function_layer.m")
    assert code == 0, out
    assert "network 'net': 8 layers, inputs in, outputs prob" in out
    assert "lstm lstmLayer B×12" in out and "gated functionLayer B×12" in out
    g = torch.Generator().manual_seed(0)
    X = [torch.randn(n, 3, generator=g) for n in (3, 6, 4, 5)]         # different lengths
    ws = run_file(REAL / "r16_local_functions_and_function_layer.m",
                  {"XTrain": X, "TTrain": M.categorical(np.array(["a", "b", "a", "b"]))},
                  out=_quiet)
    net = ws["net"]
    assert net.training_info.stop_reason == "max-epochs"
    assert net.layers[2].p == 0.1                        # the arguments block's default
    assert getattr(net.learnables["fc_out/weight"], "l2_factor", None) == 0.0
    ws = run_code("a = f(2);\nb = f(2, 'Scale', 3);\nc = f(2, Sc=4);\n"
                  "function y = f(x, opts)\narguments\n  x\n  opts.Scale = 10\nend\n"
                  "y = x * opts.Scale;\nend\n")
    assert (ws["a"], ws["b"], ws["c"]) == (20, 6, 8)
    with pytest.raises(ScriptError, match="f: expected a name–value argument among Scale, "
                                          "received 'Size'"):
        run_code("a = f(2, Size=3);\nfunction y = f(x, opts)\narguments\n  x\n"
                 "  opts.Scale = 10\nend\ny = x * opts.Scale;\nend\n")


def test_an_image_sequence_flattened_per_frame_feeds_the_lstm(capsys):
    code, out, _ = _analyze(capsys, "r17_image_sequence_flatten.m")
    assert code == 0, out
    assert "frames sequenceInputLayer B×T×784" in out and "flat flattenLayer B×T×784" in out
    assert "weight_ih_l0 128×784" in out and "flatten it" not in out
    assert "a sequence of 28×28×1 images, which attnlab reads as B×T×784" in out
    net = run_file(REAL / "r17_image_sequence_flatten.m", out=_quiet)["net"]
    frames = torch.randn(2, 3, 28, 28, 1)                  # B×T×H×W×C, flattened per frame
    assert tuple(net.predict(frames.reshape(2, 3, -1)).shape) == (2, 4)


# -- the collection's example-shaped scripts ------------------------------------------------

def test_the_digits_example_analyses_its_cnn_without_the_image_files(capsys):
    code, out, _ = _analyze(capsys, "r18_digits_cnn_trainnetwork.m")
    assert code == 0, out
    assert "held by 'net' (trainNetwork at line 43, from 'layers'" in out
    assert "network 'net': 14 layers" in out and "no issues" in out
    assert "r18_digits_cnn_trainnetwork.m:4: skipped: matlabroot reads data" in out
    assert out.count("r18_digits_cnn_trainnetwork.m:12: skipped") == 1        # once, not 20 times


def _digits(n, seed):
    g = torch.Generator().manual_seed(seed)
    names = np.array([str(d) for d in range(10)])
    labels = M.categorical(names[(torch.arange(n) % 10).numpy()], names)
    return M.ImageDatastore(torch.randn(n, 1, 28, 28, generator=g), labels)


def test_the_digits_example_trains_on_tiny_images_with_run_file(tmp_path, one_epoch):
    from attnlab.matlab.values import Cell, Struct
    ws = run_file(REAL / "r18_digits_cnn_trainnetwork.m",
                  {"digitDatasetPath": "DigitDataset", "labelCount": 0,
                   "imds": Struct(Files=Cell(["digit.png"] * 10000)),     # what imshow shows
                   "imdsTrain": _digits(20, 0), "imdsValidation": _digits(10, 1)}, out=_quiet,
                  out_dir=tmp_path)                # the training-progress picture goes there
    net = ws["net"]
    assert _types(net)[0] == "ImageInput" and len(net.layers) == 14
    assert net.training_info.stop_reason == "max-epochs"
    assert len(ws["YPred"]) == 10 and 0.0 <= float(ws["accuracy"]) <= 1.0


def test_the_turbofan_example_reads_matlabs_feature_by_time_cells(tmp_path, one_epoch):
    from attnlab.matlab.values import Cell
    g = np.random.default_rng(0)
    lengths = (7, 4, 6)
    X = Cell([np.vstack([g.standard_normal((4, n)), np.ones((1, n))]) for n in lengths])
    Y = Cell([g.uniform(0, 200, (1, n)) for n in lengths])        # C×T, as MATLAB holds them
    ws = run_file(REAL / "r19_seq2seq_regression.m",
                  {"dataFolder": "data", "XTrain": X, "YTrain": Y}, out=_quiet, out_dir=tmp_path)
    net = ws["net"]
    assert ws["numFeatures"] == 4                        # the constant row removed
    assert [x.shape for x in ws["XTrain"]] == [(4, 7), (4, 6), (4, 4)]     # sorted, descending
    assert np.allclose(np.hstack(list(ws["XTrain"])).mean(axis=1), 0, atol=1e-12)
    assert max(float(np.max(y)) for y in ws["YTrain"]) <= 150            # clipped at thr
    assert net.training_info.stop_reason == "max-epochs"
    assert tuple(net.predict(torch.randn(2, 5, 4)).shape) == (2, 5, 1)


def test_the_text_example_trains_on_word_ids_with_run_file(tmp_path, one_epoch):
    from attnlab.matlab.values import Cell, Struct
    g = np.random.default_rng(0)
    X = Cell([np.concatenate([np.zeros(3), g.integers(1, 21, 7)]).reshape(1, 10)
              for _ in range(8)])                          # doc2sequence: 1×10, padded with 0
    T = M.categorical(np.array(["a", "b", "c", "a", "b", "c", "a", "b"]))
    ws = run_file(REAL / "r20_text_classification.m",
                  {"textDataTrain": "text", "documentsTrain": "documents",
                   "enc": Struct(NumWords=20), "XTrain": X, "TTrain": T}, out=_quiet,
                  out_dir=tmp_path)
    net = ws["net"]
    assert tuple(net.learnables["embedding/weight"].shape) == (20, 50)
    assert net.training_info.stop_reason == "max-epochs"
    assert list(net.training_info.epochs["epoch"]) == [1]             # one epoch


@pytest.mark.parametrize("name,sets,line,var,layers", [
    ("r19_seq2seq_regression.m", ("numFeatures=17", "numResponses=1"), 33, "numFeatures", 5),
    ("r20_text_classification.m", ("numWords=100", "numClasses=3"), 13, "numWords", 5)])
def test_sizes_read_from_data_are_asked_for_then_the_network_is_analysed(capsys, name, sets, line,
                                                                        var, layers):
    code, out, err = _analyze(capsys, name)
    assert code == 2 and f"{name}:{line}:1: no network could be built" in err
    assert f"uses '{var}' from line" in err                  # the size the network waits for
    # every size the network needs, in one message
    assert "Give them with " + " ".join(f"--set {s.split('=')[0]}=VALUE" for s in sets) in err
    code, out, err = _analyze(capsys, name, sets[0])
    assert code == 2 and f"--set {sets[1].split('=')[0]}=VALUE" in err
    code, out, _ = _analyze(capsys, name, *sets)
    assert code == 0, out
    assert f"network 'net': {layers} layers" in out and "no issues" in out


def test_a_residual_layer_graph_and_a_small_transformer_build_and_run(capsys):
    for name, layers in (("r21_residual_layergraph.m", 11), ("r22_transformer_encoder.m", 10)):
        code, out, _ = _analyze(capsys, name)
        assert code == 0 and f"{layers} layers" in out and "no issues" in out, out
    net = run_file(REAL / "r21_residual_layergraph.m", out=_quiet)["net"]
    assert tuple(net.predict(torch.randn(2, 7, 6)).shape) == (2, 5)
    net = run_file(REAL / "r22_transformer_encoder.m", out=_quiet)["net"]
    assert net.initialized and tuple(net.predict(torch.randn(2, 5, 4)).shape) == (2, 3)


def test_word_embeddings_count_as_matlab_counts_them(capsys, tmp_path):
    code, out, _ = _analyze(capsys, "r20_text_classification.m", "numWords=100", "numClasses=3")
    assert code == 0 and "embedding wordEmbeddingLayer B×T×50 weight 100×50" in out
    # 50 × 100 + LSTM 4·80·(50 + 80) + 4·80 + fc 3·80 + 3, as MATLAB counts
    assert "MATLAB counts 47,163 learnables" in out and "row 0" not in out
    net = M.dlnetwork([M.sequenceInputLayer(1), M.wordEmbeddingLayer(3, 4, Name="emb")])
    W = net.learnables["emb/weight"]
    assert tuple(W.shape) == (4, 3)                               # numWords rows, as MATLAB
    ids = torch.tensor([[[0.0], [1.0], [4.0]]])                   # doc2sequence pads with 0
    y = net(ids)[0].detach()
    assert torch.equal(y[0], torch.zeros(3))                      # padding: a zero vector
    assert torch.equal(y[1], W[0].detach()) and torch.equal(y[2], W[3].detach())
    weights = run_code("w = net.Layers(2).Weights;", {"net": net})["w"]
    assert weights.shape == (3, 4) and np.allclose(weights[:, 0], W[0].detach().numpy())
    with pytest.raises(al.DataError, match="layer 'emb': word id 5 at observation 1, step 2 is "
                                           r"out of the vocabulary of 4 words \(ids 1…4"):
        net(torch.tensor([[[1.0], [5.0]]]))
    last = M.dlnetwork([M.sequenceInputLayer(1), M.wordEmbeddingLayer(3, 4, OOVMode="map-to-last")])
    z = last(torch.tensor([[[9.0], [4.0]]]))[0]
    assert torch.equal(z[0], z[1])                                # unknown → the last vector
    net.save(tmp_path / "emb.attnlab")
    back = al.load(tmp_path / "emb.attnlab")
    assert type(back.layers[1]).__name__ == "WordEmbedding"
    assert torch.equal(back(ids), net(ids))


def test_unnamed_layers_get_matlabs_default_names(capsys):
    code, out, _ = _analyze(capsys, "r18_digits_cnn_trainnetwork.m")
    source = (REAL / "r18_digits_cnn_trainnetwork.m").read_text()
    block = "layers = [" + source.split("layers = [", 1)[1].split("options =", 1)[0]
    layers = run_code(block)["layers"]                       # the array, its output layer last
    names = [l.name for l in M.dlnetwork(layers[:-1]).layers]
    assert names == ["imageinput", "conv_1", "batchnorm_1", "relu_1", "maxpool_1", "conv_2",
                     "batchnorm_2", "relu_2", "maxpool_2", "conv_3", "batchnorm_3", "relu_3",
                     "fc", "softmax"]
    assert "imageinput imageInputLayer" in out and "conv_3 convolution2dLayer" in out
    ws = run_code("lg = layerGraph([sequenceInputLayer(3) fullyConnectedLayer(4) reluLayer "
                  "additionLayer(2) globalAveragePooling1dLayer]);\n"
                  "lg = connectLayers(lg, 'fc', 'addition/in2');\nnet = dlnetwork(lg);")
    assert [l.name for l in ws["net"].layers] == ["sequenceinput", "fc", "relu", "addition",
                                                  "gapool1d"]
    assert ws["net"].initialized


def test_folded_image_sequences_convolve_each_frame_then_feed_the_lstm(capsys):
    code, out, err = _analyze(capsys, "r23_folded_cnn_lstm.m")
    assert code == 0 and "no issues" in out, out + err
    assert "fold sequenceFoldingLayer out: B×3×32×32, miniBatchSize: B×T×3072" in out
    assert "conv convolution2dLayer B×8×30×30" in out              # each frame an image
    assert "unfold sequenceUnfoldingLayer B×T×7200" in out
    assert "flatten flattenLayer B×T×7200" in out and "lstm lstmLayer B×16" in out
    ws = run_file(REAL / "r23_folded_cnn_lstm.m", out=_quiet)
    g = torch.Generator().manual_seed(0)
    X = [torch.randn(t, 32 * 32 * 3, generator=g) for t in (3, 5, 4, 3)]   # different lengths
    o = M.trainingOptions("adam", MaxEpochs=1, MiniBatchSize=4, Verbose=False)
    net = M.trainnet(X, M.categorical(np.array(["a", "b", "a", "b"])), ws["lgraph"],
                     "crossentropy", o)
    assert net.training_info.stop_reason == "max-epochs"
    batch = np.asarray(M.predict(net, X))
    alone = np.concatenate([np.asarray(M.predict(net, [x])) for x in X])
    np.testing.assert_allclose(batch, alone, atol=1e-5)         # padded frames do not leak


def test_initialize_in_a_branch_analyze_cannot_decide_keeps_the_network(capsys, tmp_path):
    script = tmp_path / "branch.m"
    script.write_text("net = dlnetwork([featureInputLayer(3) fullyConnectedLayer(2)]);\n"
                      "if useGPU\n    net = initialize(net);\nend\n"
                      "for k = 1:3\n    YPred = predict(net, XVal);\nend\n")
    assert main(["analyze", str(script)]) == 0
    out = capsys.readouterr().out
    assert "network 'net': 2 layers" in out and "no issues" in out
    assert "branch.m:2: skipped: needs 'useGPU'" in out
    assert out.count("branch.m:6: skipped") == 1


# -- MathWorks' current sequence examples ---------------------------------------------------

def _waveforms(seed=0):
    from attnlab.matlab.values import Cell
    g = np.random.default_rng(seed)
    data = Cell([g.standard_normal((n, 3)) for n in (9, 7, 8, 6, 10, 5, 7, 8, 9, 6)])  # T×C
    kinds = np.array(["sine", "square", "triangle", "sawtooth"])
    return data, M.categorical(kinds[np.arange(10) % 4])


def test_the_waveform_classifier_asks_for_its_data_sizes_then_trains(capsys, tmp_path, one_epoch):
    name = "r24_waveform_sequence_classification.m"
    code, out, err = _analyze(capsys, name)
    assert code == 2 and f"{name}:32:1: no network could be built" in err
    assert "Give them with --set numChannels=VALUE --set numClasses=VALUE" in err
    code, out, _ = _analyze(capsys, name, "numChannels=3", "numClasses=4")
    assert code == 0 and "network 'net': 4 layers" in out and "no issues" in out, out
    assert "bilstm bilstmLayer B×240" in out
    assert f"{name}:8: skipped: load reads data the script does not have" in out
    data, labels = _waveforms()
    printed: list = []
    ws = run_file(REAL / name, {"data": data, "labels": labels, "idxTrain": np.arange(1, 9),
                                "idxValidation": np.array([9]), "idxTest": np.array([9, 10])},
                  out=printed.append, out_dir=tmp_path)      # trainingPartitions: given
    net = ws["net"]
    assert ws["numChannels"] == 3 and net.training_info.stop_reason == "max-epochs"
    assert any(f"{name}:8: skipped: load reads a file" in p for p in printed)
    assert len(ws["YTest"]) == 2 and 0.0 <= float(ws["acc"]) <= 1.0


def test_the_forecast_data_preparation_shifts_normalises_and_trains(capsys, tmp_path, one_epoch):
    name = "r25_forecast_data_preparation.m"
    code, out, err = _analyze(capsys, name)
    assert code == 2 and "Give it with --set numChannels=VALUE" in err
    code, out, _ = _analyze(capsys, name, "numChannels=3")
    assert code == 0 and "network 'net': 3 layers" in out and "no issues" in out, out
    data, _ = _waveforms(1)
    ws = run_file(REAL / name, {"data": data}, out=_quiet, out_dir=tmp_path)
    XTrain, TTrain = ws["XTrain"], ws["TTrain"]
    assert len(XTrain) == 9 and XTrain[0].shape == (8, 3)          # X(1:end-1, :)
    np.testing.assert_allclose(TTrain[0][:-1] * ws["sigmaT"] + ws["muT"],
                               XTrain[0][1:] * ws["sigmaX"] + ws["muX"])   # shifted by one
    np.testing.assert_allclose(np.vstack(list(XTrain)).mean(axis=0), 0, atol=1e-12)
    assert ws["net"].training_info.stop_reason == "max-epochs"
    assert ws["YTest"][0].shape == (5, 3) and ws["err"].shape == (1,)


def test_the_activity_classifier_labels_every_step_of_matlabs_feature_rows(capsys, tmp_path, one_epoch):
    from attnlab.matlab.values import Cell
    name = "r26_seq2seq_activity_classification.m"
    code, out, _ = _analyze(capsys, name)
    assert code == 0 and "network 'net': 4 layers" in out and "no issues" in out, out
    assert "lstm lstmLayer B×T×200" in out and "fc fullyConnectedLayer B×T×5" in out
    assert f"{name}:9: skipped: needs 'XTrain'" in out
    g = np.random.default_rng(0)
    acts = np.array(["Dancing", "Running", "Sitting", "Standing", "Walking"])
    lengths = (12, 9, 10)
    X = Cell([g.standard_normal((3, n)) for n in lengths])          # 3×T: MATLAB's layout
    Y = Cell([M.categorical(acts[g.integers(0, 5, n)], acts) for n in lengths])
    ws = run_file(REAL / name, {"XTrain": X, "YTrain": Y, "XTest": Cell([X[1]]),
                                "YTest": Cell([Y[1]])}, out=_quiet, out_dir=tmp_path)
    net = ws["net"]
    assert net.training_info.stop_reason == "max-epochs"
    assert len(ws["YPred"]) == 9 and 0.0 <= float(ws["acc"]) <= 1.0     # a label per step
    alone = M.classify(net, X[1].T.copy())               # attnlab's layout: the same labels
    assert list(alone.values) == list(ws["YPred"].values)


def test_the_remaining_scripts_run_with_run_file_as_matlab_runs_them(one_epoch):
    g = torch.Generator().manual_seed(0)
    ws = run_file(REAL / "r02_trainnet_overwrites_dlnetwork.m",
                  {"XTrain": [torch.randn(n, 3, generator=g) for n in (4, 6, 5)],
                   "TTrain": [torch.randn(n, 3, generator=g) for n in (4, 6, 5)],
                   "XTest": [torch.randn(3, 3, generator=g)]}, out=_quiet)
    assert ws["net"].training_info.stop_reason == "max-epochs"       # trained in place
    kinds = np.array(["a", "b", "c", "d"])
    ws = run_file(REAL / "r09_skipped_branch_and_loop_notes.m",
                  {"XTrain": [torch.randn(n, 6, generator=g) for n in (3, 5, 4, 6)],
                   "TTrain": M.categorical(kinds), "classNames": M.categories(M.categorical(kinds)),
                   "XVal": [[torch.randn(4, 6, generator=g)] for _ in range(3)],
                   "TVal": [M.categorical(np.array(["b"]), kinds) for _ in range(3)]},
                  out=_quiet)
    assert ws["net"].training_info.stop_reason == "max-epochs" and ws["accuracy"].shape == (1, 3)
    ws = run_file(REAL / "r10_fragment_is_not_clean.m",
                  {"YTrain": M.categorical(np.array(["x", "y", "z"]))}, out=_quiet)
    assert ws["numClasses"] == 3 and len(M.dlnetwork(ws["layers"]).layers) == 4
    net = run_file(REAL / "r07_concat_sequence_feature.m", out=_quiet)["net"]
    assert not net.initialized and net.analyze().issues      # built, never initialised
    with pytest.raises(ScriptError, match=r"(?s)r12_concat_in_array.m:14:7: cannot initialize the "
                                          r"network.*port 'in2': expected B×T×10 \(as 'in1'\), "
                                          "received B×3"):
        run_file(REAL / "r12_concat_in_array.m", out=_quiet)   # MATLAB stops at that line too


def test_what_a_skipped_loop_assigns_is_named_with_the_loop(capsys, tmp_path):
    # MathWorks' sequence classification example sorts its data by length in a loop over data
    # the reader does not load: a later use names the loop, not an undefined variable
    script = tmp_path / "sorted.m"
    script.write_text(
        "[XTrain, TTrain] = japaneseVowelsTrainData;\n"
        "for i = 1:numel(XTrain)\n"
        "    sequence = XTrain{i};\n"
        "    sequenceLengths(i) = size(sequence, 2);\n"
        "end\n"
        "[sequenceLengths, idx] = sort(sequenceLengths);\n"
        "layers = [sequenceInputLayer(12)\n"
        "    bilstmLayer(100, OutputMode=\"last\")\n"
        "    fullyConnectedLayer(9)\n"
        "    softmaxLayer];\n")
    code = main(["analyze", str(script)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "sorted.m:6: skipped: uses 'sequenceLengths' from line 2, which was skipped" in out
    assert "does not define" not in out
    assert "MATLAB counts 92,209 learnables" in out
