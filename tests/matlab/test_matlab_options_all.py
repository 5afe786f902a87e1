"""trainingOptions as MATLAB has them: every option of every solver accepted, the ones attnlab
cannot honour named in one note, properties read and set with dot syntax (values: copies keep
theirs), and SequenceLength "longest", "shortest" or a number."""
import copy
import warnings

import numpy as np
import pytest
import torch

import attnlab as al
from attnlab import matlab as M
from attnlab.core.errors import ArgumentError
from attnlab.matlab import MatlabNote, ScriptError, run_code

pytest.importorskip("tree_sitter_matlab")


def _quiet(*a, **k):
    return None


# MATLAB's trainingOptions name-value arguments (R2024b), with a value MATLAB accepts
COMMON = [
    ("Plots", "none"), ("Metrics", "accuracy"), ("Verbose", False), ("VerboseFrequency", 10),
    ("ValidationData", [np.zeros((2, 3)), np.zeros(2)]), ("ValidationFrequency", 5),
    ("ValidationPatience", 3), ("OutputNetwork", "last-iteration"),
    ("ObjectiveMetricName", "loss"), ("InputDataFormats", "auto"), ("TargetDataFormats", "auto"),
    ("ExecutionEnvironment", "cpu"), ("OutputFcn", lambda info: False),
    ("Acceleration", "auto"), ("ResetInputNormalization", True),
    ("BatchNormalizationStatistics", "auto"), ("CheckpointPath", ""),
    ("CheckpointFrequency", 2), ("CheckpointFrequencyUnit", "iteration"),
]
MINI_BATCH = COMMON + [
    ("MaxEpochs", 3), ("MiniBatchSize", 16), ("Shuffle", "every-epoch"),
    ("InitialLearnRate", 0.01), ("LearnRateSchedule", "piecewise"), ("LearnRateDropPeriod", 2),
    ("LearnRateDropFactor", 0.5), ("L2Regularization", 0.001),
    ("GradientThresholdMethod", "l2norm"), ("GradientThreshold", 1),
    ("SequenceLength", "longest"), ("SequenceLength", "shortest"), ("SequenceLength", 300),
    ("SequencePaddingDirection", "left"), ("SequencePaddingValue", 0),
    ("DispatchInBackground", False), ("PreprocessingEnvironment", "serial"),
    ("WorkerLoad", [1, 1]),
]
BY_SOLVER = {
    "sgdm": MINI_BATCH + [("Momentum", 0.95)],
    "adam": MINI_BATCH + [("GradientDecayFactor", 0.8), ("SquaredGradientDecayFactor", 0.99),
                          ("Epsilon", 1e-7)],
    "rmsprop": MINI_BATCH + [("SquaredGradientDecayFactor", 0.9), ("Epsilon", 1e-6)],
    "lbfgs": COMMON + [("MaxIterations", 100), ("GradientTolerance", 1e-5),
                       ("StepTolerance", 1e-5), ("LineSearchMethod", "strong-wolfe"),
                       ("MaxNumLineSearchIterations", 20), ("HistorySize", 10),
                       ("InitialInverseHessianFactor", 1)],
    "lm": COMMON + [("MaxIterations", 100), ("GradientTolerance", 1e-5), ("StepTolerance", 1e-5),
                    ("InitialDampingFactor", 0.001), ("MaxDampingFactor", 1e10),
                    ("DampingIncreaseFactor", 10), ("DampingDecreaseFactor", 0.1)],
}
ALL = [(s, n, v) for s, options in BY_SOLVER.items() for n, v in options]


@pytest.mark.parametrize("solver,name,value", ALL, ids=[f"{s}-{n}-{i}" for i, (s, n, _) in
                                                        enumerate(ALL)])
def test_every_option_matlab_accepts_is_accepted(solver, name, value):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MatlabNote)
        opts = M.trainingOptions(solver, **{name: value})
    assert isinstance(opts, al.TrainingOptions)


def test_options_attnlab_does_not_honour_are_named_in_one_note():
    with pytest.warns(MatlabNote) as notes:
        M.trainingOptions("adam", WorkerLoad=[1, 1], DispatchInBackground=True,
                          SequencePaddingValue=-1, BatchNormalizationStatistics="population",
                          Metrics=["accuracy", "fscore"], MaxEpochs=2)
    text = [str(n.message) for n in notes if "does not honour" in str(n.message)]
    assert len(text) == 1
    for part in ("WorkerLoad", "DispatchInBackground=true", "SequencePaddingValue=-1",
                 "BatchNormalizationStatistics=\"population\"", "Metrics 'fscore'"):
        assert part in text[0], text[0]


def test_honoured_options_map_onto_attnlab_s():
    opts = M.trainingOptions("adam", GradientDecayFactor=0.8, SquaredGradientDecayFactor=0.99,
                             Epsilon=1e-7, L2Regularization=0.001, MiniBatchSize=16)
    assert (opts.gradient_decay, opts.squared_gradient_decay, opts.epsilon, opts.l2,
            opts.batch_size) == (0.8, 0.99, 1e-7, 0.001, 16)


def test_options_are_read_and_set_with_dot_syntax_as_values():
    ws = run_code("options = trainingOptions('adam');\n"
                  "options.InitialLearnRate = 1e-2; options.MaxEpochs = 3;\n"
                  "copy = options; copy.MiniBatchSize = 8;\n"
                  "a = options.InitialLearnRate; b = options.MaxEpochs; c = options.MiniBatchSize;\n"
                  "d = copy.MiniBatchSize; e = options.Shuffle; f = options.ValidationPatience;\n"
                  "g = options.SquaredGradientDecayFactor; s = options.SolverName;",
                  out=_quiet)
    assert (ws["a"], ws["b"], ws["c"], ws["d"], ws["e"]) == (0.01, 3, 128, 8, "once")
    assert ws["f"] == float("inf") and ws["g"] == 0.999 and ws["s"] == "adam"
    assert ws["options"].learning_rate == 0.01 and ws["options"].max_epochs == 3
    assert ws["copy"].batch_size == 8 and ws["options"].batch_size == 128


def test_setting_options_checks_them_as_trainingoptions_does():
    with pytest.raises(ScriptError, match="Unrecognized property 'MaxEpoch' of the training "
                                          "options. Did you mean 'MaxEpochs'"):
        run_code("o = trainingOptions('sgdm'); o.MaxEpoch = 3;", out=_quiet)
    with pytest.raises(ScriptError, match="MaxEpochs"):
        run_code("o = trainingOptions('sgdm'); o.MaxEpochs = 0;", out=_quiet)
    with pytest.raises(ScriptError, match="SolverName.*read-only"):
        run_code("o = trainingOptions('sgdm'); o.SolverName = 'adam';", out=_quiet)


def _seq2seq(n=6, c=2):
    rs = np.random.RandomState(0)
    X = [rs.randn(t, c).astype(np.float32) for t in (7, 9, 4, 8, 5, 10)[:n]]
    T = [x.sum(axis=1, keepdims=True) for x in X]
    return X, T


def test_sequence_length_is_the_training_option_sequence_length():
    for value, field in (("longest", None), ("shortest", "shortest"), (300, 300), (4.0, 4)):
        opts = M.trainingOptions("adam", SequenceLength=value)
        assert opts.sequence_length == field
        assert M.training_options.get_option(opts, "SequenceLength") == value
    ws = run_code("o = trainingOptions('adam'); o.SequenceLength = 7; n = o.SequenceLength;",
                  out=_quiet)
    assert ws["n"] == 7 and ws["o"].sequence_length == 7


def test_trainnet_splits_sequences_with_the_lstm_state_carried_as_al_train_does():
    X, T = _seq2seq()
    torch.manual_seed(0)
    net = M.dlnetwork([M.sequenceInputLayer(2), M.lstmLayer(3), M.fullyConnectedLayer(1)])
    twin = copy.deepcopy(net)
    opts = M.trainingOptions("sgdm", SequenceLength=4, MaxEpochs=2, MiniBatchSize=3,
                             Shuffle="never", L2Regularization=0, Verbose=False)
    trained = M.trainnet(X, T, net, "mse", opts)
    info = al.train(twin, X, T, loss="mse", options=al.TrainingOptions(
        solver="sgdm", learning_rate=0.01, max_epochs=2, batch_size=3, shuffle="never",
        verbose=False, sequence_length=4))
    for p, q in zip(trained.state_dict().values(), twin.state_dict().values()):
        assert torch.allclose(p, q, atol=1e-6)
    # lengths (7, 9, 4) and (8, 5, 10) in pieces of 4: 3 + 3 iterations an epoch
    assert trained.training_info.iterations["iteration"][-1] == \
        info.iterations["iteration"][-1] == 12


def test_what_a_numeric_sequence_length_cannot_give_exactly_is_refused():
    X, T = _seq2seq()
    opts = M.trainingOptions("adam", SequenceLength=4, MaxEpochs=1, Verbose=False)
    bi = M.dlnetwork([M.sequenceInputLayer(2), M.bilstmLayer(3, Name="bi"),
                      M.fullyConnectedLayer(1)])
    with pytest.raises(ArgumentError, match="SequenceLength=4\\): 'bi' is a bidirectional LSTM"):
        M.trainnet(X, T, bi, "mse", opts)
    shortest = M.trainingOptions("adam", SequenceLength="shortest", MaxEpochs=1, Verbose=False)
    trained = M.trainnet(X, T, bi, "mse", shortest)         # nothing carried: trains
    assert trained.training_info.iterations["iteration"][-1] == 1


def test_full_batch_solvers_are_accepted_and_refused_when_training():
    with pytest.warns(MatlabNote, match="the \"lbfgs\" solver"):
        opts = M.trainingOptions("lbfgs", MaxIterations=10)
    net = M.dlnetwork([M.featureInputLayer(2), M.fullyConnectedLayer(1)])
    with pytest.raises(ArgumentError, match="L-BFGS solver, which attnlab's training does not "
                                            "have"):
        M.trainnet(torch.zeros(4, 2), torch.zeros(4, 1), net, "mse", opts)


def test_a_script_with_a_numeric_sequence_length_is_analysed(tmp_path, capsys):
    from attnlab.cli import main
    f = tmp_path / "seq.m"
    f.write_text("layers = [sequenceInputLayer(12) lstmLayer(20) fullyConnectedLayer(9)];\n"
                 "options = trainingOptions('adam', SequenceLength=300, MaxEpochs=2);\n"
                 "net = trainnet(XTrain, TTrain, layers, 'crossentropy', options);\n")
    code = main(["analyze", str(f)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "no issues" in out
