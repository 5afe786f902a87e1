"""MATLAB categorical arrays: element-wise comparisons, classify returning categoricals, and
the accuracy lines of scripts."""
import numpy as np
import pytest
import torch

import attnlab as al
from attnlab import matlab as M
from attnlab.matlab import ScriptError, run_code
from attnlab.matlab.values import Categorical

pytest.importorskip("tree_sitter_matlab")


def _col(*values):
    return np.array(values, dtype=bool).reshape(-1, 1)


def test_categoricals_compare_element_by_element():
    a = M.categorical(["a", "b", "a"])
    b = M.categorical(["a", "b", "b"])
    assert np.array_equal(a == b, _col(True, True, False))
    assert np.array_equal(a != b, _col(False, False, True))
    assert (a == b).shape == (3, 1) and (a == b).dtype == bool
    assert np.array_equal(a == "a", _col(True, False, True))
    assert np.array_equal("a" == a, _col(True, False, True))
    assert np.array_equal(a == ["a", "a", "b"], _col(True, False, False))
    assert np.array_equal(np.array(["a", "b", "c"]) == a, _col(True, True, False))
    assert float(np.mean(a == b)) == pytest.approx(2 / 3)


def test_undefined_equals_nothing():
    c = M.categorical(["x", "y", "z"], ["x", "y"])           # 'z' is not a category
    assert list(c.values) == ["x", "y", ""] and list(c.codes()) == [0, 1, -1]
    assert np.array_equal(c == c, _col(True, True, False))
    assert np.array_equal(c != c, _col(False, False, True))
    assert np.array_equal(c == "", _col(False, False, False))


def test_different_category_sets_follow_matlab():
    a = M.categorical(["a", "b"])
    b = M.categorical(["a", "b"], ["b", "a", "c"])
    assert np.array_equal(a == b, _col(True, True))          # not ordinal: by label
    lo = M.categorical(["lo", "hi"], ["lo", "hi"], Ordinal=True)
    other = M.categorical(["lo", "hi"], ["hi", "lo"], Ordinal=True)
    with pytest.raises(al.ArgumentError, match=r"ordinal categorical arrays must have the same "
                       r"categories in the same order, received \['lo', 'hi'\] and \['hi', 'lo'\]"):
        lo == other
    with pytest.raises(al.ArgumentError, match="two ordinal or two non-ordinal"):
        lo == M.categorical(["lo", "hi"])
    assert np.array_equal(lo == M.categorical(["hi", "hi"], ["lo", "hi"], Ordinal=True),
                          _col(False, True))
    assert np.array_equal(lo < "hi", _col(True, False))
    assert np.array_equal(lo >= "lo", _col(True, True))
    with pytest.raises(al.ArgumentError, match="'mid' is not a category of this ordinal array"):
        lo == "mid"
    with pytest.raises(al.ArgumentError, match="expected an ordinal categorical array"):
        a < "b"


def test_comparisons_that_cannot_work_say_why():
    a = M.categorical(["a", "b", "a"])
    with pytest.raises(al.ArgumentError, match=r"received the number 2\. Compare with the label "
                       r"as text, e.g\. c == '2'"):
        a == 2
    with pytest.raises(al.ArgumentError, match=r"expected 3 labels \(one per element\) or 1, "
                       r"received 2"):
        a == ["a", "b"]


def test_accuracy_lines_of_scripts():
    ws = run_code("""YTest = categorical({'cat', 'dog', 'dog', 'cat'});
YPred = categorical({'cat', 'dog', 'cat', 'cat'});
a1 = mean(YPred == YTest);
a2 = sum(YPred == YTest)/numel(YTest);
accuracy = mean(YPred == YTest)*100;
wrong = sum(YPred ~= YTest);
cats = sum(YPred == 'cat');
dogs = mean("dog" == YTest);
same = mean(YPred == {'cat', 'dog', 'dog', 'dog'});
n = numel(YPred); s = size(YPred); len = length(YTest);
first = YPred(1); some = YPred(2:end); last = YPred(end);
""")
    assert ws["a1"] == 0.75 and ws["a2"] == 0.75 and ws["accuracy"] == 75
    assert ws["wrong"] == 1 and ws["cats"] == 3 and ws["dogs"] == 0.5 and ws["same"] == 0.5
    assert ws["n"] == 4 and list(ws["s"]) == [4, 1] and ws["len"] == 4
    assert isinstance(ws["first"], Categorical) and list(ws["first"].values) == ["cat"]
    assert list(ws["some"].values) == ["dog", "cat", "cat"]
    assert ws["some"].categories == ["cat", "dog"] and list(ws["last"].values) == ["cat"]


def test_a_comparison_error_in_a_script_is_located():
    with pytest.raises(ScriptError, match=r"s\.m:2:5: .*received the number 1"):
        run_code("c = categorical({'a'});\nx = c == 1;", file="s.m")


def test_python_access_to_a_categorical():
    c = M.categorical(["b", "a", "b"])
    assert c[0] == "b" and isinstance(c[1:], Categorical) and list(c[1:].values) == ["a", "b"]
    assert np.asarray(c).shape == (3,) and list(c) == ["b", "a", "b"] and len(c) == 3
    assert M.categories(c[1:]) == ["a", "b"]
    assert (c == None) is False and (c != None) is True and c in [None, c]  # noqa: E711
    assert repr(M.categorical(["x", "q"], ["x"])) == "categorical([x <undefined>], categories ['x'])"


def _trained_classifier():
    torch.manual_seed(0)
    X = np.concatenate([np.random.default_rng(0).normal(2, 0.3, (10, 2)),
                        np.random.default_rng(1).normal(-2, 0.3, (10, 2))]).astype(np.float32)
    Y = M.categorical(["up"] * 10 + ["down"] * 10, ["up", "down"])
    net = M.dlnetwork([M.featureInputLayer(2), M.fullyConnectedLayer(2), M.softmaxLayer()])
    opts = M.trainingOptions("adam", MaxEpochs=30, MiniBatchSize=20, Verbose=False,
                             InitialLearnRate=0.05)
    return M.trainnet(X, Y, net, "crossentropy", opts), X, Y


def test_classify_returns_a_categorical_and_the_accuracy_is_right():
    net, X, Y = _trained_classifier()
    pred = M.classify(net, X)
    assert isinstance(pred, Categorical)
    assert pred.categories == ["up", "down"] and pred.shape == (20, 1)
    want = float(np.mean(al.classify(net, X) == np.array(Y.values)))
    assert want > 0.9
    ws = run_code("YPred = classify(net, X);\nacc = mean(YPred == YTest);\n"
                  "pct = sum(YPred == YTest)/numel(YTest)*100;\n"
                  "YS = scores2label(predict(net, X), categories(YTest));\n"
                  "acc2 = mean(YS == YTest);", {"net": net, "X": X, "YTest": Y})
    assert ws["acc"] == pytest.approx(want) and ws["pct"] == pytest.approx(100 * want)
    assert ws["acc2"] == pytest.approx(want)
    assert isinstance(ws["YS"], Categorical) and ws["YS"].categories == ["up", "down"]


def test_classify_without_class_names_uses_the_labels_predicted():
    net = M.dlnetwork([M.featureInputLayer(2), M.fullyConnectedLayer(3)])
    net.initialize()
    pred = M.classify(net, torch.zeros(4, 2))
    assert isinstance(pred, Categorical) and set(pred.categories) >= set(pred.values)
    assert all(v in ("0", "1", "2") for v in pred.values)


def test_categorical_of_a_categorical():
    c = M.categorical(["lo", "hi"], ["lo", "hi"])
    assert M.categorical(c) is c
    o = M.categorical(c, Ordinal=True)
    assert o.ordinal and o.categories == ["lo", "hi"] and list(o.values) == ["lo", "hi"]


def test_countcats_unique_and_isequal_in_scripts():
    ws = run_code("""c = categorical({'b', 'a', 'b', 'z'}, {'a', 'b', 'c'});
counts = countcats(c);
u = unique(c);
k = numel(unique(c));
same = isequal(c(1:3), categorical({'b', 'a', 'b'}));
differ = isequal(c, categorical({'b', 'a', 'a', 'z'}, {'a', 'b', 'c'}));
undefined = isequal(c, c);
scalar = isequal(c(2), 'a');
numbers = unique([3 1 2 3 1]);
texts = unique({'dog', 'cat', 'dog'});
sizes = isequal([1 2], [1 2]) + isequal(1, [1 1]) * 10 + isequal('ab', "ab") * 100;
""")
    assert ws["counts"].ravel().tolist() == [1, 2, 0]            # 'z' is <undefined>: not counted
    assert isinstance(ws["u"], Categorical) and list(ws["u"].values) == ["a", "b"]
    assert ws["u"].categories == ["a", "b", "c"] and ws["k"] == 2
    assert ws["same"] is True and ws["differ"] is False
    assert ws["undefined"] is False                  # <undefined> equals nothing, itself included
    assert ws["scalar"] is True
    assert ws["numbers"].tolist() == [1, 2, 3] and list(ws["texts"]) == ["cat", "dog"]
    assert ws["sizes"] == 101
    with pytest.raises(ScriptError, match=r"countcats: expected a categorical array, received "
                                          r"ndarray\. Make one with categorical\(x\)"):
        run_code("n = countcats([1 2 3]);")


def test_switch_on_a_categorical_matches_its_label():
    ws = run_code("""c = categorical({'cat', 'dog'});
switch c(2)
    case {'cat', 'cow'}
        kind = 1;
    case 'dog'
        kind = 2;
    otherwise
        kind = 3;
end""")
    assert ws["kind"] == 2


def test_categoricals_concatenate():
    ws = run_code("""a = categorical({'b', 'a'});
b = categorical({'c', 'a'});
both = [a; b];
more = [a, 'z'];
acc = mean([a; b] == [a; a]);""")
    assert list(ws["both"].values) == ["b", "a", "c", "a"]
    assert ws["both"].categories == ["a", "b", "c"]           # a's, then the new ones in order
    assert list(ws["more"].values) == ["b", "a", "z"] and ws["acc"] == 0.75
    with pytest.raises(ScriptError, match=r"<script>:2:5: concatenating categorical arrays: "
                                          r"expected all ordinal or all non-ordinal"):
        run_code("a = categorical({'lo'}, {'lo', 'hi'}, Ordinal=true);\n"
                 "x = [a; categorical({'hi'})];")
    with pytest.raises(ScriptError, match=r"'mid' is not one of its categories \(lo, hi\)"):
        run_code("a = categorical({'lo'}, {'lo', 'hi'}, Ordinal=true);\nx = [a; 'mid'];")
