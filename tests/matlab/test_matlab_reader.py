"""The MATLAB script reader (run_code/run_file) and `attnlab analyze/plot FILE.m`."""
from pathlib import Path

import numpy as np
import pytest

import attnlab as al
from attnlab.cli import main
from attnlab.matlab import ScriptError, run_code, run_file

pytest.importorskip("tree_sitter_matlab")
HERE = Path(__file__).parent
SEED1_SETS = ["InputChannels=1", "hidden_num_lstm1=64", "hidden_num_lstm2=64",
              "AttentionChannels=256", "NumHeads=8", "OutputChannels=1"]


def _sets(pairs):
    return [a for p in pairs for a in ("--set", p)]


# -- the acceptance: the seeds' code, verbatim -----------------------------------------------

def test_seed1_question_names_the_cycle_in_order_with_the_fix(capsys):
    assert main(["analyze", str(HERE / "seed1_question.m"), *_sets(SEED1_SETS)]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "cycle: cross-attention → layernorm → lstm_decoder → query → cross-attention" in out
    assert "net = disconnectLayers(net, 'layernorm', 'lstm_decoder')" in out
    assert "sequenceInputLayer(C, Name='decoder-input')" in out


def test_seed1_question_without_its_variables_is_a_script_error(capsys):
    assert main(["analyze", str(HERE / "seed1_question.m")]) == 2
    err = capsys.readouterr().err
    assert "seed1_question.m:3:24: undefined variables or functions 'InputChannels', " in err
    # every variable the script needs, in one error, so one command line gives them all
    for name in ("InputChannels", "hidden_num_lstm1", "AttentionChannels", "NumHeads",
                 "hidden_num_lstm2", "OutputChannels"):
        assert f"--set {name}=VALUE" in err


def test_seed1_answer_analyses_clean(capsys):
    assert main(["analyze", str(HERE / "seed1_answer.m")]) == 0
    out = capsys.readouterr().out
    assert "network 'net': 10 layers" in out and "no issues" in out
    assert "network 'layers'" not in out               # the arrays went into net


def test_seed2_digits_gets_the_flatten_explanation_in_matlab_terms(capsys):
    assert main(["analyze", str(HERE / "seed2_digits.m")]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "layer 'self_attention' port 'in': expected B×T×C, received B×3136" in out
    assert "Use imageToSequenceLayer (an attnlab addition: MATLAB has no layer that turns an " \
           "image into a sequence) instead of flattenLayer" in out
    assert "seed2_digits.m:2: skipped" in out and "seed2_digits.m:35: skipped" in out
    from attnlab.matlab import imageToSequenceLayer
    assert isinstance(imageToSequenceLayer(PatchSize=2), al.layers.ImageToSequence)


def test_plot_draws_the_final_networks(tmp_path, capsys):
    out = tmp_path / "net.png"
    assert main(["plot", str(HERE / "seed1_answer.m"), "-o", str(out)]) == 0
    assert out.exists() and out.stat().st_size > 1000
    assert main(["plot", str(HERE / "seed1_question.m"), "-o", str(out)]) == 2


def test_set_takes_matlab_literals(capsys):
    code = HERE / "m08_function_file.m"
    assert main(["analyze", str(code), "--set", "numHeads=2"]) == 0
    assert main(["analyze", str(code), "--set", "numHeads"]) == 2
    assert "--set expects NAME=VALUE, received 'numHeads'" in capsys.readouterr().err
    from attnlab.matlab.cli import parse_sets
    ws = parse_sets(["sz=[28 28 1]", 'opt="adam"', "c='sgdm'", "flag=true", "x=0.5"])
    assert ws["sz"].tolist() == [28, 28, 1] and ws["opt"] == "adam" and ws["c"] == "sgdm"
    assert ws["flag"] is True and ws["x"] == 0.5


# -- the language subset -----------------------------------------------------------------------

def test_values_arithmetic_and_indexing():
    ws = run_code("""
    a = 3; b = a * 2 + 1;   % comment
    v = [1 2 3]; w = v .* 2; m = [1, 2; 3 4];
    r = 1:2:7; s = 'it''s'; t = "x" + 1; e = v(end); f = m(2, 1); n = numel(v);
    c = {1, 'two'}; c2 = c{2};
    %{
    not run = 1;
    %}
    q = [1, ...
         2];
    st.a.b = 5; st.x = 'y';
    ok = a > 2 && ~false;
    """)
    assert ws["b"] == 7 and ws["w"].tolist() == [2, 4, 6] and ws["m"].shape == (2, 2)
    assert ws["r"].tolist() == [1, 3, 5, 7] and ws["s"] == "it's" and ws["t"] == "x1"
    assert ws["e"] == 3 and ws["f"] == 3 and ws["n"] == 3 and ws["c2"] == "two"
    assert "run" not in ws and ws["q"].tolist() == [1, 2]
    assert ws["st"]["a"]["b"] == 5 and ws["ok"] is True


def test_control_flow_try_catch_rng_tic_toc(capsys):
    ws = run_code("""
    rng(42); tic
    total = 0;
    for i = 1:4
        if i == 2, continue, end
        total = total + i;
    end
    k = 0; while k < 3, k = k + 1; end
    try
        error('my:id', 'bad %d', 7);
    catch err
        msg = err.message; id = err.identifier;
    end
    t = toc;
    fprintf('%s total=%d\\n', 'done', total);
    disp(k)
    """)
    assert ws["total"] == 8 and ws["k"] == 3 and ws["msg"] == "bad 7" and ws["id"] == "my:id"
    assert ws["t"] >= 0
    assert capsys.readouterr().out == "done total=8\n3\n"


def test_local_functions_and_layer_arrays():
    ws = run_code("""
    layers = [featureInputLayer(3, Name="in"); block(4)];
    layers(end+1) = fullyConnectedLayer(2, Name="out");
    n = numel(layers);
    net = dlnetwork(layers);
    first = net.Layers(1).Name;
    function l = block(k)
        l = [fullyConnectedLayer(k, Name="fc"), reluLayer(Name="relu")];
    end
    """)
    assert ws["n"] == 4 and ws["first"] == "in"
    assert [l.name for l in ws["net"].layers] == ["in", "fc", "relu", "out"]


@pytest.mark.parametrize("code,where,parts", [
    ("x = 1;\nl = transformerLayer(8);", "<script>:2:5", ["transformerLayer is not a Deep Learning "
                                                         "Toolbox function that attnlab knows"]),
    ("l = lstmLayr(8);", "<script>:1:5", ["lstmLayr", "Did you mean 'lstmLayer'"]),
    ("x = [1 2", "<script>:1:", ["syntax error"]),
    ("y = lstmLayer(8, 'OutputMode', 'middle');", "<script>:1:5",
     ["lstmLayer: expected OutputMode", "'middle'"]),
    ("y = undefinedThing + 1;", "<script>:1:5", ["undefined variable or function 'undefinedThing'"]),
    ("s.a = 1; b = s.c;", "<script>:1:16", ["unknown field 'c'"]),
    ("v = [1 2]; w = v(5);", "<script>:1:", ["index exceeds"]),
    ("imds = imageDatastore('x');", "<script>:1:8", ["imageDatastore reads files"]),
])
def test_errors_name_the_line_column_and_the_construct(code, where, parts):
    with pytest.raises(ScriptError) as e:
        run_code(code)
    msg = str(e.value)
    assert msg.startswith(where), msg
    for p in parts:
        assert p in msg, msg
    assert isinstance(e.value, al.AttnlabError)


def test_analyze_skips_data_statements_and_everything_using_them():
    from attnlab.matlab.interpreter import Interpreter, _run
    ws, interp = _run(Interpreter("""
    data = load('x.mat');
    X = data.X;
    layers = [featureInputLayer(2); fullyConnectedLayer(1)];
    net = trainNetwork(X, Y, layers, trainingOptions('adam'));
    """, "s.m", analyze=True))
    assert [n.split(": ")[0] for n in interp.notes] == ["s.m:2", "s.m:3", "s.m:5"]
    assert "load reads data" in interp.notes[0] and len(ws["layers"]) == 2
    with pytest.raises(ScriptError, match="s.m:2:8: load reads files"):
        run_code("\ndata = load('x.mat');", file="s.m")
    ws = run_code("data = load('x.mat');", {"data": 1})       # given: the file is not read
    assert ws["data"] == 1


def test_function_file_takes_its_arguments_from_the_workspace():
    ws = run_file(HERE / "m08_function_file.m", {"numHeads": 2})
    assert isinstance(ws["net"], al.Network)
    with pytest.raises(ScriptError, match="function buildNet needs its arguments numHeads"):
        run_file(HERE / "m08_function_file.m")


def test_no_python_is_ever_evaluated():
    with pytest.raises(ScriptError):
        run_code("x = __import__('os');")
    with pytest.raises(ScriptError, match="eval"):
        run_code("eval('x = 1');")
    ws = run_code("s = '__import__(\"os\")'; n = numel(s);")
    assert ws["n"] == len('__import__("os")')


def test_dlarray_formats_become_attnlab_layouts():
    ws = run_code("""
    X = dlarray(zeros(3, 2, 5), "CBT");
    I = dlarray(zeros(8, 8, 1, 4), "SSCB");
    """)
    assert tuple(ws["X"].shape) == (2, 5, 3) and tuple(ws["I"].shape) == (4, 1, 8, 8)
    assert np.asarray(ws["X"]).sum() == 0
