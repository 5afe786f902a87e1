"""Functions of a script as MATLAB calls them: varargin/varargout, nargin/nargout, `~`,
arguments blocks, nested functions, handles, evalin/assignin and the workspaces --set reaches.
Each expected value is MATLAB's documented behaviour."""
import numpy as np
import pytest

from attnlab.matlab import ScriptError, run_code, run_file

pytest.importorskip("tree_sitter_matlab")


def _quiet(*a, **k):
    return None


def run(code, workspace=None, **kw):
    return run_code(code, workspace, out=_quiet, **kw)


# MathWorks' own helper from its examples (trainingPartitions.m), as scripts copy it
TRAINING_PARTITIONS = """
function varargout = trainingPartitions(numObservations,splits)
arguments
    numObservations (1,1) {mustBePositive}
    splits {mustBeVector,mustBeInRange(splits,0,1,"exclusive"),mustSumToOne}
end
numPartitions = numel(splits);
varargout = cell(1,numPartitions);
idx = randperm(numObservations);
idxEnd = 0;
for i = 1:numPartitions-1
    idxStart = idxEnd + 1;
    idxEnd = idxStart + floor(splits(i)*numObservations) - 1;
    varargout{i} = idx(idxStart:idxEnd);
end
varargout{end} = idx(idxEnd+1:end);
end

function mustSumToOne(v)
if sum(v,"all") ~= 1
    error("Value must sum to one.")
end
end
"""


def test_varargout_of_mathworks_training_partitions():
    ws = run("[a, b, c] = trainingPartitions(100, [0.7 0.15 0.15]);" + TRAINING_PARTITIONS)
    assert (ws["a"].size, ws["b"].size, ws["c"].size) == (70, 15, 15)
    together = np.concatenate([ws["a"], ws["b"], ws["c"]])
    assert sorted(together.tolist()) == list(range(1, 101))      # a permutation, split


def test_validation_functions_of_the_helper_and_its_local_validator():
    with pytest.raises(ScriptError, match=r"Invalid argument at position 2\. Value must sum "
                                          r"to one\."):
        run("[a, b] = trainingPartitions(100, [0.5 0.6]);" + TRAINING_PARTITIONS)
    with pytest.raises(ScriptError, match=r"Invalid argument at position 1\. Value must be "
                                          r"positive\."):
        run("[a, b] = trainingPartitions(-1, [0.5 0.5]);" + TRAINING_PARTITIONS)
    with pytest.raises(ScriptError, match=r"position 2\. Value must be greater than 0 and "
                                          r"less than 1\."):
        run("[a, b] = trainingPartitions(10, [1 0]);" + TRAINING_PARTITIONS)


def test_varargin_nargin_and_name_value_syntax_passed_as_pairs():
    ws = run("n = f(1, 2, 3); m = f(); [k, first] = f(7, Mode='x');\n"
             "function [n, first] = f(varargin)\n"
             "n = nargin;\nfirst = '';\nif nargin > 0, first = varargin{1}; end\n"
             "if nargout > 1 && nargin > 1, first = varargin{2}; end\nend\n")
    assert (ws["n"], ws["m"], ws["k"]) == (3, 0, 3)
    assert ws["first"] == "Mode" and isinstance(ws["first"], str)   # Name=value is "Mode", 'x'


def test_nargout_and_tilde_outputs_and_inputs():
    ws = run("[~, b] = g(); c = g(); [p, q, r] = g();\n"
             "d = h(5, 6);\n"
             "function [a, b, c] = g()\na = nargout; b = nargout * 10; c = 0;\nend\n"
             "function y = h(~, x)\ny = x * nargin;\nend\n")
    assert (ws["b"], ws["c"], ws["p"], ws["d"]) == (20, 1, 3, 12)


def test_too_many_inputs_and_outputs_and_unassigned_outputs():
    code = "function y = f(x)\ny = x;\nend\nfunction [a, b] = g()\na = 1;\nend\n"
    with pytest.raises(ScriptError, match="Too many input arguments"):
        run("y = f(1, 2);\n" + code)
    with pytest.raises(ScriptError, match="Too many output arguments"):
        run("[a, b] = f(1);\n" + code)
    with pytest.raises(ScriptError, match='Output argument "b" \\(and possibly others\\) not '
                                          'assigned a value in the execution with "g" function'):
        run("[a, b] = g();\n" + code)


def test_arguments_block_defaults_sizes_classes():
    code = ("function y = f(n, k, name)\narguments\n  n (1,1) double {mustBeInteger}\n"
            "  k (1,:) double = [1 2]\n  name string = 'net'\nend\n"
            "y = {n, k, name, class(name), size(k, 1)};\nend\n")
    ws = run("a = f(3); b = f(3, [4; 5; 6], 'x');\n" + code)
    assert ws["a"][:2] == [3, ws["a"][1]] and list(ws["a"][1]) == [1, 2]
    assert ws["a"][3] == "string"                                   # char converted
    assert ws["b"][4] == 1                                          # a column made a row
    with pytest.raises(ScriptError, match=r"Invalid argument at position 1\. Value must be of "
                                          r"size 1×1, received 1×2"):
        run("a = f([1 2]);\n" + code)
    with pytest.raises(ScriptError, match=r"Value must be integer"):
        run("a = f(2.5);\n" + code)
    with pytest.raises(ScriptError, match="Not enough input arguments"):
        run("a = f();\n" + code)


NAME_VALUE = ("function layers = buildNet(numFeatures, numClasses, opts)\narguments\n"
              "    numFeatures (1,1) double\n    numClasses (1,1) double = 2\n"
              "    opts.NumHeads (1,1) double {mustBePositive} = 4\n"
              "    opts.Dropout {mustBeMember(opts.Dropout, [0 0.1 0.2])} = 0.1\nend\n"
              "layers = [sequenceInputLayer(numFeatures)\n"
              "    selfAttentionLayer(opts.NumHeads, 8 * opts.NumHeads)\n"
              "    dropoutLayer(opts.Dropout)\n    fullyConnectedLayer(numClasses)];\nend\n")


@pytest.mark.parametrize("call,heads,classes,p", [
    ("buildNet(12)", 4, 2, 0.1),
    ("buildNet(12, 5, NumHeads=8)", 8, 5, 0.1),
    ("buildNet(12, 5, 'NumHeads', 8, 'Dropout', 0.2)", 8, 5, 0.2),
    ("buildNet(12, 'NumHeads', 2)", 2, 2, 0.1),        # the optional numClasses left out
    ("buildNet(12, numheads=2)", 2, 2, 0.1),           # names match case-insensitively
    ("buildNet(12, NumH=2)", 2, 2, 0.1),               # and by unique start
])
def test_name_value_structures_of_an_arguments_block(call, heads, classes, p):
    ws = run(f"layers = {call};\n" + NAME_VALUE)
    attention, drop, fc = ws["layers"][1], ws["layers"][2], ws["layers"][3]
    assert (attention.num_heads, fc.out, drop.p) == (heads, classes, p)


def test_name_value_validation_speaks_matlab():
    with pytest.raises(ScriptError, match=r"Invalid value for 'NumHeads' argument\. Value must "
                                          r"be positive\."):
        run("layers = buildNet(12, NumHeads=-1);\n" + NAME_VALUE)
    with pytest.raises(ScriptError, match=r"Value must be a member of this set"):
        run("layers = buildNet(12, Dropout=0.5);\n" + NAME_VALUE)
    with pytest.raises(ScriptError, match=r"expected a name–value argument among NumHeads, "
                                          r"Dropout, received 'Heads'"):
        run("layers = buildNet(12, Heads=2);\n" + NAME_VALUE)


def test_early_return_nested_functions_and_handles_to_local_functions():
    ws = run("a = first([3 -1 4]); b = outer(2); h = @twice; c = h(4); d = feval(@twice, 5);\n"
             "e = feval('twice', 6); g = arrayfun(@twice, [1 2 3]);\n"
             "function k = first(v)\nk = 0;\nfor i = 1:numel(v)\n  if v(i) < 0\n"
             "    k = i;\n    return\n  end\nend\nend\n"
             "function y = outer(x)\ntotal = 10;\nbump(x);\ny = total;\n"
             "    function bump(z)\n        total = total + z;\n    end\nend\n"
             "function y = twice(x)\ny = 2 * x;\nend\n")
    assert (ws["a"], ws["b"], ws["c"], ws["d"], ws["e"]) == (2, 12, 8, 10, 12)
    assert list(ws["g"]) == [2, 4, 6]


def test_evalin_and_assignin_reach_the_base_and_caller_workspaces():
    ws = run("numHeads = 4; z = f(); q = g();\n"
             "function z = f()\nz = evalin('base', 'numHeads * 2');\n"
             "assignin('base', 'fromF', 7);\nend\n"
             "function q = g()\nlocal = 3;\nq = h();\nend\n"
             "function r = h()\nr = evalin('caller', 'local') + 1;\n"
             "assignin('caller', 'unused', 0);\nend\n")
    assert (ws["z"], ws["fromF"], ws["q"]) == (8, 7, 4)
    ws = run("v = evalin('base', 'notThere', '42');")          # the catch text runs instead
    assert ws["v"] == 42


def test_set_values_are_in_the_base_workspace_where_evalin_reads_them(tmp_path):
    f = tmp_path / "net.m"
    f.write_text("layers = build(12);\nnet = dlnetwork(layers);\n"
                 "function layers = build(numFeatures)\n"
                 "numHeads = evalin('base', 'numHeads');\n"
                 "layers = [sequenceInputLayer(numFeatures)\n"
                 "    selfAttentionLayer(numHeads, 8 * numHeads)\n"
                 "    fullyConnectedLayer(2)];\nend\n")
    ws = run_file(f, {"numHeads": 2}, analyze=True, out=_quiet)
    assert ws["net"].layers[1].num_heads == 2


def test_a_function_does_not_see_the_script_s_variables(tmp_path):
    # MATLAB: "Unrecognized function or variable 'numHeads'" inside f, --set or not; the
    # message must not ask for the --set that was given
    f = tmp_path / "f.m"
    f.write_text("numHeads = 4;\nlayers = f();\nfunction layers = f()\n"
                 "layers = [sequenceInputLayer(3)\n    selfAttentionLayer(numHeads, 8)];\nend\n")
    for analyze, given in ((False, None), (True, {"numHeads": 4})):
        with pytest.raises(ScriptError) as e:
            run_file(f, given, analyze=analyze, out=_quiet)
        text = str(e.value)
        assert "f.m:5:" in text and "'numHeads'" in text and "f's workspace" in text or \
            "workspace of f" in text, text
        assert "--set numHeads=VALUE" not in text


def test_exist_of_variables_and_functions():
    ws = run("a = exist('x', 'var'); x = 1; b = exist('x', 'var'); c = exist('x');\n"
             "d = exist('lstmLayer'); e = exist('numel', 'builtin');\n"
             "if ~exist('numHeads', 'var'), numHeads = 8; end")
    assert (ws["a"], ws["b"], ws["c"], ws["d"], ws["e"], ws["numHeads"]) == (0, 1, 1, 2, 5, 8)


def test_a_function_file_taking_varargin_runs_with_none(tmp_path):
    f = tmp_path / "train_model.m"
    f.write_text("function train_model(varargin)\nopts.units = 16;\n"
                 "if mod(numel(varargin), 2) ~= 0\n"
                 "    error('Options must be given as name-value pairs.');\nend\n"
                 "for k = 1:2:numel(varargin)\n    opts.(varargin{k}) = varargin{k + 1};\nend\n"
                 "layers = [sequenceInputLayer(3)\n    lstmLayer(opts.units)];\n"
                 "net = dlnetwork(layers);\nend\n")
    ws = run_file(f, analyze=True, out=_quiet)
    assert ws["net"].layers[1].hidden == 16


def test_a_function_file_asks_for_its_required_arguments(tmp_path):
    f = tmp_path / "makeLayer.m"
    f.write_text("function layers = makeLayer(hiddenSize, numHeads, args)\narguments\n"
                 "    hiddenSize (1,1) {mustBePositive, mustBeInteger}\n"
                 "    numHeads (1,1) {mustBePositive, mustBeInteger}\n"
                 "    args.Name (1,1) string = \"\"\nend\n"
                 "layers = [sequenceInputLayer(hiddenSize)\n"
                 "    selfAttentionLayer(numHeads, hiddenSize, Name=args.Name)];\nend\n")
    with pytest.raises(ScriptError, match=r"Not enough input arguments: makeLayer requires "
                                          r"hiddenSize, numHeads.*--set hiddenSize=VALUE "
                                          r"--set numHeads=VALUE"):
        run_file(f, analyze=True, out=_quiet)
    ws = run_file(f, {"hiddenSize": 16, "numHeads": 2}, analyze=True, out=_quiet)
    assert ws["layers"][1].key_channels == 16 and ws["layers"][1].name is None
