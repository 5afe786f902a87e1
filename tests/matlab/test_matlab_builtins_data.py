"""The data-side builtins scripts write around their networks, each against MATLAB's documented
behaviour: categorical arrays, tables (`net.Learnables`), `end` in any indexing, cell arrays,
`containers.Map`, struct arrays, dates for file names and sprintf/fprintf formats."""
import re

import numpy as np
import pytest
import torch

from attnlab.matlab import ScriptError, run_code
from attnlab.matlab.values import Categorical

pytest.importorskip("tree_sitter_matlab")


def _quiet(*a, **k):
    return None


def run(code, workspace=None):
    return run_code(code, workspace, out=_quiet)


# -- categorical ------------------------------------------------------------------------------

def test_categorical_with_no_argument_is_an_empty_categorical():
    ws = run("c = categorical(); n = numel(c); e = isempty(c); s = size(c); k = categories(c);")
    assert isinstance(ws["c"], Categorical)
    assert (ws["n"], ws["e"], list(ws["s"]), list(ws["k"])) == (0, True, [0, 0], [])


def test_growing_a_categorical_by_indexed_assignment_adds_the_category():
    ws = run("Labels = categorical(); Labels(1:960) = '1'; Labels(961:1000) = '2';\n"
             "n = numel(Labels); s = size(Labels); k = categories(Labels); c = countcats(Labels);")
    assert ws["n"] == 1000 and list(ws["s"]) == [1, 1000]          # a row, as MATLAB grows it
    assert list(ws["k"]) == ["1", "2"] and ws["c"].ravel().tolist() == [960, 40]
    ws = run("c = categorical({'a'; 'b'}); c(4) = 'z'; k = categories(c); u = isundefined(c);")
    assert list(ws["k"]) == ["a", "b", "z"]
    assert ws["u"].ravel().tolist() == [False, False, True, False]  # the gap is <undefined>


def test_an_ordinal_categorical_refuses_a_new_category():
    with pytest.raises(ScriptError, match="Cannot add a new category \\(c\\) to an ordinal"):
        run("c = categorical({'a','b'}, {'a','b'}, 'Ordinal', true); c(3) = 'c';")


def test_categorical_valueset_catnames_ordinal():
    ws = run("c = categorical([1 2 1 3], [1 2], {'one', 'two'}); k = categories(c);\n"
             "u = isundefined(c);\n"
             "o = categorical({'lo','hi','lo'}, {'lo','hi'}, 'Ordinal', true); b = o(1) < o(2);")
    assert list(ws["k"]) == ["one", "two"]
    assert ws["u"].ravel().tolist() == [False, False, False, True]  # 3 is not in valueset
    assert bool(np.all(ws["b"]))


def test_categories_countcats_removecats_and_comparisons():
    ws = run("c = categorical({'cat','dog','cat','bird'});\n"
             "k = categories(c); n = countcats(c); eq = c == 'cat'; r = removecats(c, 'bird');\n"
             "kr = categories(r); ur = isundefined(r); a = addcats(c, 'fish');\n"
             "m = mergecats(c, {'cat', 'dog'}, 'pet'); km = categories(m);\n"
             "rn = renamecats(c, {'b', 'c', 'd'}); kn = categories(rn);")
    assert list(ws["k"]) == ["bird", "cat", "dog"]                 # sorted
    assert ws["n"].ravel().tolist() == [1, 2, 1]
    assert ws["eq"].ravel().tolist() == [True, False, True, False]
    assert list(ws["kr"]) == ["cat", "dog"] and ws["ur"].ravel().tolist()[-1]
    assert ws["a"].categories == ["bird", "cat", "dog", "fish"]
    assert list(ws["km"]) == ["bird", "pet"] and list(ws["kn"]) == ["b", "c", "d"]


# -- tables: net.Learnables ----------------------------------------------------------------------

NET = "net = dlnetwork([featureInputLayer(3) fullyConnectedLayer(2, Name='fc') " \
      "layerNormalizationLayer(Name='ln')]);\n"


def test_learnables_is_a_table_of_layer_parameter_value():
    ws = run(NET + "T = net.Learnables; h = height(T); w = width(T);\n"
             "v = net.Learnables.Value{1,1}; v1 = net.Learnables.Value{1}; p = T.Parameter;\n"
             "names = T.Properties.VariableNames; last = T.Value{end};\n"
             "fc = T(T.Layer == \"fc\", :); hf = height(fc); b = T{2, 'Value'};")
    assert (ws["h"], ws["w"]) == (4, 3)
    assert list(ws["names"]) == ["Layer", "Parameter", "Value"]
    assert list(ws["p"]) == ["Weights", "Bias", "Offset", "Scale"]   # MATLAB's names and order
    weight = ws["net"].learnables["fc/weight"].detach().numpy()
    assert ws["v"].shape == (2, 3) and np.allclose(ws["v"], weight)  # OutputSize×InputSize
    assert np.allclose(ws["v1"], weight) and ws["last"].shape == (2, 1)
    assert ws["hf"] == 2 and ws["b"].shape == (2, 1)


def test_learnables_of_an_uninitialized_network_is_empty():
    ws = run("net = dlnetwork([fullyConnectedLayer(2)], Initialize=false); "
             "h = height(net.Learnables);")
    assert ws["h"] == 0


# -- end, cells, growth -----------------------------------------------------------------------------

def test_end_in_indexing_of_any_value():
    ws = run(NET + "a = net.Layers(end).Name; c = {1, 'two', [3 4 5]}; b = c{end}(end);\n"
             "s(1).x = 1; s(2).x = 5; d = s(end).x; t = 'hello'; e = t(end-1:end);\n"
             "k = categorical({'p','q','r'}); f = k(end); m = magic3(); g = m(end, end);\n"
             "function m = magic3()\nm = [8 1 6; 3 5 7; 4 9 2];\nend\n")
    assert (ws["a"], ws["b"], ws["d"], ws["e"], ws["g"]) == ("ln", 5, 5, "lo", 2)
    assert list(ws["f"].values) == ["r"]


def test_values_grow_under_indexed_assignment():
    ws = run("r = []; r(end+1, :) = [1 2 3]; r(end+1, :) = [4 5 6];\n"
             "x = [1 2]; x(5) = 9; m = zeros(2); m(3, 3) = 1;\n"
             "for i = 1:3\n  net{i} = i * 10;\nend\nc = numel(net);\n"
             "s.a = 1; s(3).a = 3; n = numel(s); e = isempty(s(2).a);")
    assert ws["r"].tolist() == [[1, 2, 3], [4, 5, 6]]
    assert ws["x"].tolist() == [1, 2, 0, 0, 9] and ws["m"].shape == (3, 3)
    assert (ws["c"], ws["n"], ws["e"]) == (3, 3, True)


def test_structs_are_values():
    ws = run("s.a = 1; t = s; t.a = 2; x = s.a; y = t.a;")
    assert (ws["x"], ws["y"]) == (1, 2)


def test_cell2mat_num2cell_cellfun_arrayfun():
    ws = run("a = cell2mat({[1 2], 3, [4 5]}); b = num2cell([7 8]);\n"
             "L = cellfun(@(x) size(x, 2), {ones(3, 4), ones(3, 2)});\n"
             "D = cellfun(@(x) x * 2, {1, [1 2]}, 'UniformOutput', false);\n"
             "e = cellfun('isempty', {[], 1, ''}); q = arrayfun(@(k) k^2, [1 2 3]);")
    assert ws["a"].tolist() == [1, 2, 3, 4, 5] and list(ws["b"]) == [7, 8]
    assert ws["L"].tolist() == [4, 2] and ws["D"][1].tolist() == [2, 4]
    assert ws["e"].tolist() == [True, False, True] and ws["q"].tolist() == [1, 4, 9]
    with pytest.raises(ScriptError, match="UniformOutput"):
        run("x = cellfun(@(x) [x x], {1, 2});")


# -- containers.Map ---------------------------------------------------------------------------

def test_containers_map_keys_values_iskey_indexing():
    ws = run("m = containers.Map(); m('lstm') = 64; m('attention') = 8;\n"
             "k = keys(m); v = values(m); n = m.Count; t = isKey(m, 'lstm'); h = m('attention');\n"
             "m2 = containers.Map({'a', 'b'}, {1, 2}); x = m2('b'); l = length(m2);\n"
             "m3 = containers.Map('KeyType', 'double', 'ValueType', 'any'); m3(3) = 'three';\n"
             "y = m3(3); w = values(m2, {'a'});")
    assert list(ws["k"]) == ["attention", "lstm"]                  # keys sorted, as MATLAB
    assert list(ws["v"]) == [8, 64] and (ws["n"], ws["t"], ws["h"]) == (2, True, 8)
    assert (ws["x"], ws["l"], ws["y"], list(ws["w"])) == (2, 2, "three", [1])


def test_a_map_is_a_handle_and_a_missing_key_is_matlab_s_error():
    ws = run("m = containers.Map(); other = m; other('x') = 1; n = m.Count;")
    assert ws["n"] == 1
    with pytest.raises(ScriptError, match="The specified key is not present in this container"):
        run("m = containers.Map(); v = m('nope');")


# -- dates for file names -------------------------------------------------------------------------

def test_dates_for_file_names():
    ws = run("a = datestr(now, 'yyyy-mm-dd_HH-MM-SS'); t = datetime('now', 'Format', 'yyyyMMdd');\n"
             "s = string(t); f = \"model_\" + string(t) + \".mat\";\n"
             "d = datetime(2024, 1, 15, 10, 30, 0); c = char(d); later = d + hours(2);\n"
             "e = datestr(later, 'yyyymmdd_HHMMSS'); g = datestr(738000);\n"
             "span = datetime(2024, 1, 2) - datetime(2024, 1, 1); h = hours(span);")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d", ws["a"])
    assert re.fullmatch(r"\d{8}", ws["s"]) and ws["f"] == f"model_{ws['s']}.mat"
    assert ws["c"] == "15-Jan-2024 10:30:00" and ws["e"] == "20240115_123000"
    assert ws["g"] == "28-Jul-2020" and ws["h"] == 24


# -- sprintf / fprintf --------------------------------------------------------------------------

@pytest.mark.parametrize("call,expected", [
    ("sprintf('The array is %dx%d.', 2, 3)", "The array is 2x3."),         # MATLAB's example
    ("sprintf('%0.5g', 1/eps)", "4.5036e+15"),                             # MATLAB's example
    ("sprintf('%0.5e', 1/eps)", "4.50360e+15"),                            # MATLAB's example
    ("sprintf('%025d', 123456)", "0000000000000000000123456"),             # MATLAB's example
    ("sprintf('%d', 1/3)", "3.333333e-01"),         # a fraction under %d is written with %e
    ("sprintf('%.0d', 110.00000000000001)", "1e+02"),
    ("sprintf('%d', [1 2 3])", "123"),               # the format is reused for every value
    ("sprintf('%5.2f|', [1 2])", " 1.00| 2.00|"),
    ("sprintf('%d, %d; ', 1:3)", "1, 2; 3, "),       # stops at the first operator without data
    ("sprintf('abc %d def')", "abc "),               # no data: the text up to the operator
    ("sprintf('%s', [65 66 67])", "ABC"),            # character codes under %s
    ("sprintf('%d,', 'ab')", "97,98,"),              # characters under %d: their codes
    ("sprintf('%s=%d\\n', 'a', 1)", "a=1\n"),
    ("sprintf('%x %X %o', 255, 255, 8)", "ff FF 10"),
    ("sprintf('%.3f', pi)", "3.142"),
    ("sprintf('%+05d|%-4d|', 3, 4)", "+0003|4   |"),
    ("sprintf('%e', 12345.678)", "1.234568e+04"),
    ("sprintf('%g', 0.0001)", "0.0001"),
    ("sprintf('100%% done\\t!')", "100% done\t!"),
    ("sprintf('%c%c', 72, 105)", "Hi"),
    ("sprintf('\\x41\\101')", "AA"),
    ("sprintf('%*d', 5, 3)", "    3"),
    ("sprintf('%d', NaN)", "NaN"),
    ("sprintf('%5.1f', Inf)", "  Inf"),
])
def test_sprintf_formats(call, expected):
    assert run(f"s = {call};")["s"] == expected


def test_fprintf_to_the_screen_identifier():
    printed = []
    run_code("fprintf(1, 'epoch %d of %d\\n', 3, 10); fprintf('%s\\n', 'done');",
             out=lambda *a, **k: printed.append("".join(map(str, a))))
    assert printed == ["epoch 3 of 10\n", "done\n"]


def test_class_and_isa():
    ws = run("a = class(1); b = class('x'); c = class(\"x\"); d = class({}); "
             "e = class(categorical({'a'})); f = isa(3, 'numeric'); g = isa(true, 'numeric');"
             " h = class(@sin); k = class(struct());")
    assert (ws["a"], ws["b"], ws["c"], ws["d"], ws["e"]) == \
        ("double", "char", "string", "cell", "categorical")
    assert (ws["f"], ws["g"], ws["h"], ws["k"]) == (True, False, "function_handle", "struct")


def test_a_learnables_value_is_what_the_network_holds():
    ws = run(NET)
    net = ws["net"]
    with torch.no_grad():
        net.learnables["fc/bias"].fill_(0.25)
    ws = run("b = net.Learnables.Value{2};", {"net": net})
    assert ws["b"].ravel().tolist() == [0.25, 0.25]


# -- cell arrays with rows and columns -------------------------------------------------------------

def test_a_cell_array_has_rows_and_columns():
    ws = run("a = [1 2]; b = [3 4];\n"
             "v = cell2mat({a; b}); h = cell2mat({a, b}); sv = size({a; b}); sh = size({a, b});\n"
             "m = {1, 2; 3, 4}; x = m{2, 1}; y = m{3}; sm = size(m); t = m'; tt = t{1, 2};\n"
             "g = cell2mat(m); col = m(:, 2); sc = size(col); two = cell2mat(col);")
    assert ws["v"].tolist() == [[1, 2], [3, 4]]                 # {a; b}: one above the other
    assert ws["h"].tolist() == [1, 2, 3, 4]                     # {a, b}: side by side
    assert (list(ws["sv"]), list(ws["sh"]), list(ws["sm"])) == ([2, 1], [1, 2], [2, 2])
    assert (ws["x"], ws["y"], ws["tt"]) == (3, 2, 3)            # linear order down the columns
    assert ws["g"].tolist() == [[1, 2], [3, 4]]
    assert list(ws["sc"]) == [2, 1] and ws["two"].ravel().tolist() == [2, 4]


def test_cell_vectors_keep_their_orientation():
    ws = run("c = cell(3, 1); c{4} = 5; s1 = size(c); d = [{1; 2}; {3}]; s2 = size(d);\n"
             "e = [{1, 2}, {3}]; s3 = size(e); n = num2cell([1; 2]); s4 = size(n);\n"
             "k = cellfun(@(z) z * 2, {1; 2; 3}); s5 = size(k);\n"
             "r = {}; r{1, 3} = 1; s6 = size(r); q = {}; q{3, 1} = 2; s7 = size(q);\n"
             "d(2) = []; s8 = size(d);")
    sizes = [list(ws[f"s{i}"]) for i in range(1, 9)]
    assert sizes == [[4, 1], [3, 1], [1, 3], [2, 1], [3, 1], [1, 3], [3, 1], [2, 1]]
    assert ws["k"].ravel().tolist() == [2, 4, 6]


def test_cell_arrays_that_do_not_fit_together_are_matlab_s_error():
    with pytest.raises(ScriptError, match="Dimensions of arrays being concatenated are not "
                                          "consistent"):
        run("c = {1, 2; 3};")
    with pytest.raises(ScriptError, match="Dimensions of arrays being concatenated"):
        run("c = [{1, 2}; {3}];")


# -- function handles, methods, struct arrays ---------------------------------------------------------

def test_a_function_handle_gives_every_output_asked_for():
    ws = run("h = @two; [a, b] = h(3); g = @max; [m, i] = g([3 9 2]);\n"
             "f = @(v) max(v); [fm, fi] = f([4 1 8]); [p, q] = feval(h, 5);\n"
             "function [x, y] = two(v)\nx = v; y = 2 * v;\nend\n")
    assert (ws["a"], ws["b"], ws["m"], ws["i"]) == (3, 6, 9, 2)
    assert (ws["fm"], ws["fi"], ws["p"], ws["q"]) == (8, 3, 5, 10)


def test_a_map_s_functions_as_methods():
    ws = run("m = containers.Map(); m('lstm') = 64; m('gru') = 32;\n"
             "t = m.isKey('lstm'); f = m.isKey('cnn'); k = m.keys(); v = m.values({'gru'});\n"
             "m.remove('gru'); n = m.Count; l = m.length();")
    assert (ws["t"], ws["f"], list(ws["k"]), list(ws["v"])) == (True, False, ["gru", "lstm"],
                                                                   [32])
    assert (ws["n"], ws["l"]) == (1, 1)


def test_struct_with_cell_values_makes_a_struct_array():
    ws = run("s = struct('a', {1, 2}, 'b', 'same'); n = numel(s); z = size(s); x = s(2).a;\n"
             "y = s(1).b; one = struct('c', {{1, 2}}); c = one.c; e = numel(struct('a', {}));")
    assert (ws["n"], list(ws["z"]), ws["x"], ws["y"]) == (2, [1, 2], 2, "same")
    assert list(ws["c"]) == [1, 2] and ws["e"] == 0            # {{…}}: the cell array itself
    with pytest.raises(ScriptError, match="cell array values must be of one size"):
        run("s = struct('a', {1, 2}, 'b', {1, 2, 3});")
