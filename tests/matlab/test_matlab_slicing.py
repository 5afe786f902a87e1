"""The reader runs what the networks need and never stops on the rest: the network slice
(slicing.py), statements outside it skipped with one note per run, names no path assigns
reported as MATLAB reports them, and eval skipped with a clean note."""
from __future__ import annotations

import pytest

from attnlab.cli import main
from attnlab.matlab import ScriptError, run_code
from attnlab.matlab.reader import parse
from attnlab.matlab.slicing import analyse

pytest.importorskip("tree_sitter_matlab")

NET = ("layers = [featureInputLayer(4)\n"
       "          fullyConnectedLayer(8)\n"
       "          reluLayer\n"
       "          fullyConnectedLayer(2)];\n"
       "net = dlnetwork(layers);\n")


def _analyze(capsys, tmp_path, text, *sets, name="s.m"):
    script = tmp_path / name
    script.write_text(text)
    code = main(["analyze", str(script), *[a for s in sets for a in ("--set", s)]])
    out = capsys.readouterr()
    return code, " ".join(out.out.replace("│", " ").split()), " ".join(out.err.split())


def _needed_lines(text, given=()):
    """The lines of the statements in the network slice (the first line of each)."""
    src = text.encode()
    root = parse(src, "s.m")
    plan = analyse(root, src, given)
    lines = set()
    stack = list(root.named_children)
    while stack:
        n = stack.pop()
        if n.type not in ("comment", "block", "function_definition") and n.is_named and \
                n.parent is not None and n.parent.type in ("source_file", "block") and \
                plan.needed(n):
            lines.add(n.start_point.row + 1)
        stack.extend(n.named_children)
    return lines


# -- 1. the network slice --------------------------------------------------------------------

def test_the_slice_follows_what_layers_and_options_read_and_leaves_data_out():
    text = ("numHidden = 16;\n"                                   # 1 needed
            "data = readmatrix('x.csv');\n"                       # 2 data
            "X = data(:, 1:3); Y = data(:, 4);\n"                 # 3 data
            "numFeatures = 3;\n"                                  # 4 needed
            "epochs = 5;\n"                                       # 5 needed (options)
            "layers = [featureInputLayer(numFeatures)\n"          # 6 seed
            "          fullyConnectedLayer(numHidden)];\n"
            "opts = trainingOptions('adam', MaxEpochs=epochs, ValidationData={X, Y});\n"  # 8
            "net = trainNetwork(X, Y, layers, opts);\n"            # 9 seed
            "plot(data)\n")                                        # 10 plots
    assert _needed_lines(text) == {1, 4, 5, 6, 8, 9}


def test_training_and_prediction_data_is_not_followed():
    text = ("load WaveformData\n"                               # 1: numChannels reads data
            "numChannels = size(data{1}, 2);\n"                   # 2
            "X = data(1:end-1); T = data(2:end);\n"               # 3: training data
            "layers = [sequenceInputLayer(numChannels) lstmLayer(8)\n"   # 4
            "          fullyConnectedLayer(numChannels)];\n"
            "net = trainnet(X, T, layers, \"mse\", trainingOptions(\"adam\"));\n"   # 6
            "XTest = data(end);\n"                                # 7: prediction data
            "Y = predict(net, XTest, 'MiniBatchSize', 2);\n"      # 8
            "net = resetState(net);\n")                           # 9: state, not a network
    assert _needed_lines(text) == {1, 2, 4, 6}


def test_the_slice_goes_through_branches_loops_and_local_functions():
    text = ("useBig = true;\n"                                    # 1: decides h
            "if useBig\n"                                         # 2
            "  h = 64;\n"                                         # 3
            "else\n"
            "  h = 8;\n"                                          # 5
            "end\n"
            "n = 3;\n"                                            # 7: loop bound
            "acc = 0;\n"                                          # 8: results
            "layers = featureInputLayer(4);\n"                    # 9
            "for k = 1:n\n"                                       # 10
            "  layers = [layers; block(h)];\n"                    # 11
            "  acc = acc + k;\n"                                  # 12
            "end\n"
            "function l = block(units)\n"
            "  scale = 2;\n"                                      # 15: read by the output
            "  unused = 7;\n"                                     # 16
            "  l = fullyConnectedLayer(units * scale);\n"         # 17
            "end\n")
    assert _needed_lines(text) == {1, 2, 3, 5, 7, 9, 10, 11, 15, 17}


def test_a_statement_outside_the_slice_that_cannot_run_is_skipped_with_one_note(capsys,
                                                                                tmp_path):
    code, out, err = _analyze(capsys, tmp_path, NET +
                              "s = struct('a', 1);\n"             # 6
                              "v = s.missingField;\n"             # 7: cannot run
                              "w = v * 2;\n"                      # 8: uses it
                              "title(sprintf('%d', w));\n"        # 9: uses it
                              "disp('done')\n")                   # 10: runs
    assert code == 0, out + err
    assert "network 'net': 4 layers" in out and "no issues" in out
    assert "s.m:7: lines 7-9: plots, skipped: unknown field 'missingField'" in out
    assert "(line 7; no network needs these lines)" in out
    assert "s.m:8:" not in out and "s.m:9:" not in out        # one note for the run


def test_an_error_on_a_statement_the_network_needs_stays_an_error(capsys, tmp_path):
    code, out, err = _analyze(capsys, tmp_path,
                              "s = struct('a', 1);\n"
                              "h = s.missingField;\n"
                              "layers = [featureInputLayer(4) fullyConnectedLayer(h)];\n")
    assert code == 2
    assert "s.m:2:" in err and "unknown field 'missingField'" in err


def test_a_statement_the_network_needs_that_needs_data_names_every_variable(capsys,
                                                                           tmp_path):
    code, out, err = _analyze(capsys, tmp_path,
                              "load(file)\n"
                              "numFeatures = size(sequence(2:end), 2);\n"
                              "numClasses = numel(categories(labels));\n"
                              "layers = [sequenceInputLayer(numFeatures) lstmLayer(8)\n"
                              "          fullyConnectedLayer(numClasses) softmaxLayer];\n")
    assert code == 2
    assert "--set numFeatures=VALUE --set numClasses=VALUE" in err
    code, out, err = _analyze(capsys, tmp_path, (tmp_path / "s.m").read_text(),
                              "numFeatures=3", "numClasses=2")
    assert code == 0, out + err


def test_an_error_in_the_scripts_own_try_goes_to_its_catch(capsys, tmp_path):
    code, out, err = _analyze(capsys, tmp_path, NET +
                              "try\n  v = struct('a', 1).b;\ncatch e\n  m = e.message;\nend\n"
                              "s = struct('a', 1);\ntry\n  v = s.b;\ncatch e\n"
                              "  msg = e.message;\nend\n")
    assert code == 0, out + err
    assert "skipped" not in out


def test_error_raised_by_the_script_stops_it_wherever_it_is(capsys, tmp_path):
    code, out, err = _analyze(capsys, tmp_path, NET + "error('myid:x', 'stop at %d', 3);\n")
    assert code == 2 and "s.m:6:1: stop at 3" in err


# -- 1b. the lines the network does not need ------------------------------------------

def test_categorical_with_no_argument_never_leaks_a_python_message(capsys, tmp_path):
    code, out, err = _analyze(capsys, tmp_path, "Labels = categorical();\n" + NET)
    assert code == 0, out + err
    assert "network 'net': 4 layers" in out and "no issues" in out
    assert "positional argument" not in out + err and "TypeError" not in out + err


def test_assigning_text_into_a_categorical_does_not_stop_the_analysis(capsys, tmp_path):
    code, out, err = _analyze(capsys, tmp_path,
                              "Labels = categorical(zeros(960, 1));\n"
                              "Labels(1:960) = '1';\n"
                              "Labels(961:1000) = '2';\n" + NET)
    assert code == 0, out + err
    assert "network 'net': 4 layers" in out and "no issues" in out


def test_indexing_a_variable_load_brought_is_a_skip_naming_it(capsys, tmp_path):
    code, out, err = _analyze(capsys, tmp_path,
                              "file = 'data.mat';\n"
                              "load(file)\n"
                              "sequence = sequence(2:end);\n" + NET)
    assert code == 0, out + err
    assert "s.m:3: skipped: needs 'sequence', which load at line 2 would read from a file " \
           "(give it with --set sequence=VALUE)" in out
    ws = run_code("x = seq(2:end);", {"seq": [5, 6, 7]})         # given: as MATLAB indexes
    assert list(ws["x"]) == [6, 7]
    with pytest.raises(ScriptError, match="s.m:1:5: undefined variable or function 'seq'"):
        run_code("x = seq(2:end);", file="s.m")                   # not: 'end' outside an index


def test_writing_results_of_a_trained_network_is_skipped(capsys, tmp_path):
    code, out, err = _analyze(capsys, tmp_path, NET.replace("net = dlnetwork(layers);\n", "") +
                              "layers = [layers; regressionLayer];\n"
                              "opts = trainingOptions('adam', MaxEpochs=2);\n"
                              "trainedNet = trainNetwork(XTrain, YTrain, layers, opts);\n"
                              "csvwrite('w.csv', trainedNet.Learnables.Value{1,1});\n"
                              "csvwrite('b.csv', trainedNet.Learnables.Value{2,1});\n")
    assert code == 0, out + err
    assert "network 'trainedNet'" in out and "no issues" in out
    assert "Learnables" not in err


# -- 2. undefined names, as MATLAB reports them -----------------------------------------------

def test_a_name_used_after_clear_and_assigned_nowhere_is_matlabs_error(capsys, tmp_path):
    code, out, err = _analyze(capsys, tmp_path,
                              "N1 = 10; N3 = 4;\nclear\n" + NET + "x = N1 + 2 * N3;\n")
    assert code == 2
    assert "error: s.m:8:5: Unrecognized function or variable 'N1'." in err
    assert "the workspace is cleared at line 2" in err
    with pytest.raises(ScriptError, match="s.m:3:5: Unrecognized function or variable 'N3'"):
        run_code("clear all\nN1 = 3;\nx = N3 + N1;", file="s.m")


def test_an_undefined_name_is_reported_on_a_line_otherwise_skipped(capsys, tmp_path):
    code, out, err = _analyze(capsys, tmp_path, "clear; close all; clc\n" + NET +
                              "YPred = predict(net, XTest(:, 1:N3));\n")
    assert code == 2 and "s.m:7:33: Unrecognized function or variable 'N3'." in err


def test_an_undefined_name_in_a_function_is_reported_when_it_is_called():
    text = "y = f(2);\nfunction out = f(x)\n  out = x + scale;\nend\n"
    with pytest.raises(ScriptError, match="s.m:3:13: Unrecognized function or variable "
                                          "'scale'. MATLAB stops here too: f's workspace"):
        run_code(text, file="s.m")
    ws = run_code("y = 1;\nfunction out = f(x)\n  out = x + scale;\nend\n")   # never called
    assert ws["y"] == 1


def test_the_scripts_try_catches_an_undefined_name_as_matlab_does():
    ws = run_code("clear\ntry\n  x = N3;\ncatch err\n  m = err.message;\n"
                  "  id = err.identifier;\nend\n")
    assert ws["m"].startswith("Unrecognized function or variable 'N3'.")
    assert ws["id"] == "MATLAB:UndefinedFunction"


def test_clear_x_removes_it_and_clear_of_another_name_does_not():
    with pytest.raises(ScriptError, match="s.m:3:5: Unrecognized function or variable 'x'"):
        run_code("x = 1;\nclear x\nz = x;", file="s.m")
    ws = run_code("x = 1;\nclear y\nz = x;", file="s.m")
    assert ws["z"] == 1
    ws = run_code("a = 1; b = 2;\nclearvars -except a\nc = a;")
    assert ws["c"] == 1 and "b" not in ws
    with pytest.raises(ScriptError, match="Unrecognized function or variable 'b'"):
        run_code("a = 1; b = 2;\nclearvars -except a\nc = b;")


def test_bare_clear_empties_the_workspace_but_the_given_values():
    ws = run_code("x = 1;\nclear\ny = 2;", {"given": 5})
    assert ws == {"given": 5, "y": 2}
    ws = run_code("given = 9;\nclear all\ny = given;", {"given": 5})
    assert ws["y"] == 5


# -- 2b. no false positives ---------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "clear\nc = 1;\nif c > 0\n  N3 = 1;\nend\nx = N3;",                     # one branch
    "clear\nfor k = 1:3\n  if k > 1\n    y = z;\n  end\n  z = k;\nend",       # in a loop
    "clear\nwhile true\n  v = 1;\n  break\nend\nw = v;",                      # loop, break
    "clear\nload data.mat\nx = N3;",                                          # load, a command
    "clear\nf = 'data.mat';\nload(f)\nx = N3;",                                # load(file)
    "x = 1;\nclear y\nz = x;",                                                 # other name
    "clear\nhold on\nformat long\nclose all\ngrid on",                          # commands
    "clear\ns.a = [1 2 3];\nv = s.a(end);\nf = @(t) t + 1 + later;\ng = f;\nh = @sin;",
    "clear\nk = i + j + pi + eps + Inf + NaN + true + false + numel([1 2]);",
    "clear\ntry\n  q = 1;\ncatch err\n  q = 2;\nend\nr = q;",
    "clear\nglobal G\nx = G;",                                                 # unsure
    "clear\neval('N3 = 1;');\nx = N3;",                                         # unsure
    "clear\nx = myHelper(3);",                                                 # a function?
    "clear\n[XTrain, YTrain] = deal(1, 2);\ny = XTrain + YTrain;",
    "clear\nl = reluLayer; o = 1;\nnet = trainNetwork(XTrain, YTrain, l, o);",  # data: given
    "y = r(2);\nfunction out = r(x)\n  out = x;\nend",
    "y = outer(2);\nfunction r = outer(a)\n  r = a;\n  r = inner(a);\n"
    "  function q = inner(b)\n    q = b + r;\n  end\nend",                     # nested function
])
def test_names_some_path_may_assign_are_never_reported(text):
    src = text.encode()
    root = parse(src, "s.m")
    plan = analyse(root, src)
    reported = []
    stack = [root]
    while stack:
        n = stack.pop()
        if plan.undefined(n) is not None:
            reported.append(plan.undefined(n)[0])
        stack.extend(n.named_children)
    assert reported == []


def test_load_of_listed_variables_defines_only_those(capsys, tmp_path):
    code, out, err = _analyze(capsys, tmp_path, "clear\nf = 'x.mat';\nload(f, 'a', \"b\");\n"
                              + NET + "y = a + b;\nz = c;\n")
    assert code == 2 and "s.m:10:5: Unrecognized function or variable 'c'." in err
    with pytest.raises(ScriptError, match="s.m:3:13: Unrecognized function or variable 'c'"):
        run_code("clear\nload x.mat a b\nz = a + b + c;", {"a": 1, "b": 2}, file="s.m")


def test_given_values_and_files_beside_the_script_count_as_defined(capsys, tmp_path):
    text = "clear\nlayers = [featureInputLayer(numIn) fullyConnectedLayer(2)];\nk = helperK;\n"
    code, out, err = _analyze(capsys, tmp_path, text, "numIn=4")
    assert code == 2 and "s.m:3:5: Unrecognized function or variable 'helperK'." in err
    (tmp_path / "helperK.m").write_text("function k = helperK\nk = 3;\nend\n")
    code, out, err = _analyze(capsys, tmp_path, text, "numIn=4")
    assert code == 0, out + err
    code, out, err = _analyze(capsys, tmp_path, text)        # cleared: MATLAB stops there
    assert code == 2 and "s.m:2:29: Unrecognized function or variable 'numIn'." in err
    code, out, err = _analyze(capsys, tmp_path, text.replace("clear\n", "% no clear\n"))
    assert code == 2 and "Unrecognized" not in err and "--set numIn=VALUE" in err


# -- 3. eval ------------------------------------------------------------------------------------

def test_eval_is_skipped_with_a_clean_note(capsys, tmp_path):
    code, out, err = _analyze(capsys, tmp_path, NET + "eval('z = 3;');\n"
                              "t = evalc('disp(1)');\n")
    assert code == 0, out + err
    assert "s.m:6: skipped: eval runs text as MATLAB code, which attnlab's reader never does; " \
           "what it would compute or assign is not known here" in out
    assert "s.m:7: skipped: evalc runs text as MATLAB code" in out
    assert "Did you mean" not in out and "did you mean" not in out
    with pytest.raises(ScriptError, match="s.m:1:1: eval runs text as MATLAB code, which "
                                          "attnlab's reader never does"):
        run_code("eval('x = 1');", file="s.m")


def test_an_undefined_name_in_code_skipped_for_data_is_still_reported(capsys, tmp_path):
    code, out, err = _analyze(capsys, tmp_path,
                              "function acc = evaluate(X, n)\n"
                              "layers = [featureInputLayer(4) fullyConnectedLayer(n)];\n"
                              "acc = 0;\n"
                              "for i = 1:size(X, 2)\n"            # X: data, the loop is skipped
                              "  acc = acc + sum(testLoc);\n"     # no path assigns testLoc
                              "end\n"
                              "end\n", "n=2")
    assert code == 2 and "s.m:5:19: Unrecognized function or variable 'testLoc'." in err


def test_a_local_function_runs_with_an_argument_only_its_data_statements_need(capsys,
                                                                            tmp_path):
    text = ("load(\"users.mat\", \"data\");\n"
            "[len, ch] = size(data{1});\n"
            "for j = 1:3\n"
            "  net = build(ch, data{j});\n"
            "end\n"
            "function net = build(numChannels, dataset)\n"
            "  layers = [sequenceInputLayer(numChannels) lstmLayer(8) fullyConnectedLayer(2)];\n"
            "  net = trainnet(dataset.X, dataset.T, layers, 'mse', trainingOptions('adam'));\n"
            "end\n")
    code, out, err = _analyze(capsys, tmp_path, text)
    assert code == 2 and "Give it with --set ch=VALUE." in err
    code, out, err = _analyze(capsys, tmp_path, text, "ch=6")
    assert code == 0, out + err
    assert "network 'net': 3 layers" in out and "no issues" in out


def test_a_skipped_result_stored_into_an_array_is_a_skip_not_an_error(capsys, tmp_path):
    code, out, err = _analyze(capsys, tmp_path, NET +
                              "acc = zeros(1, 3);\n"
                              "for k = 1:3\n  acc(k) = score(net, XTest);\nend\n"
                              "function a = score(net, X)\n  a = mean(predict(net, X));\nend\n")
    assert code == 0, out + err
    assert "s.m:8: skipped: uses a value from line 11, which was skipped" in out
    assert "Missing" not in out


def test_return_in_a_script_ends_it():
    ws = run_code("a = 1;\nif a > 0\n  return\nend\nb = 2;")
    assert ws == {"a": 1}


def test_the_note_of_an_unknown_function_reads_cleanly(capsys, tmp_path):
    code, out, err = _analyze(capsys, tmp_path, NET + "z = numell(4);\n")
    assert code == 0, out + err
    assert "s.m:6: skipped: 'numell' is neither a function attnlab knows nor a variable the " \
           "script defines (did you mean 'numel'" in out
    assert "defines Did" not in out
