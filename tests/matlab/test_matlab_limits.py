"""The MATLAB reader on untrusted scripts: bounded steps, sizes, nesting and file reads, located
errors instead of Python exceptions, and control characters shown escaped."""
import math
import os
import threading
import time
import tracemalloc

import pytest

import attnlab as al
from attnlab.cli import main
from attnlab.matlab import LimitError, Limits, ScriptError, run_code, run_file

pytest.importorskip("tree_sitter_matlab")


def _quiet(*args, **kwargs):
    return None


def _limit_error(code, limits=None, **kwargs) -> LimitError:
    with pytest.raises(LimitError) as e:
        run_code(code, limits=limits, out=_quiet, **kwargs)
    return e.value


def _in_thread(fn, seconds=10.0):
    """Runs fn() in a thread; fails (instead of hanging the suite) if it does not return."""
    result: dict = {}

    def target():
        try:
            result["value"] = fn()
        except BaseException as e:           # handed to the test's thread
            result["error"] = e
    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still blocked after {seconds} s"
    return result


# -- steps -----------------------------------------------------------------------------------

def test_an_endless_loop_stops_at_the_step_limit_located_and_naming_the_fix():
    e = _limit_error("x = 1;\nwhile true, x = x + 1; end", Limits(steps=1000))
    assert e.limit == "steps"
    assert str(e).startswith("<script>:2:"), str(e)
    assert "the script ran 1,000 steps (statements, loop iterations and expressions" in str(e)
    assert "Limits.steps" in str(e) and "limits=Limits(steps=N)" in str(e)
    assert "ATTNLAB_MATLAB_LIMITS=steps=N" in str(e)


def test_the_default_step_limit_stops_while_true_within_seconds():
    start = time.perf_counter()
    e = _limit_error("while true, end")
    assert e.limit == "steps" and f"{Limits().steps:,} steps" in str(e)
    assert str(e).startswith("<script>:1:1:")
    assert time.perf_counter() - start < 30        # well under a second on an idle machine


def test_loop_iterations_count_as_steps_and_try_does_not_catch_a_limit():
    e = _limit_error("for i = 1:1000, end", Limits(steps=100))
    assert e.limit == "steps" and str(e).startswith("<script>:1:1:")
    # the script's try/catch would otherwise swallow the limit and loop on
    e = _limit_error("n = 0;\nwhile true\n  try\n    n = n + 1;\n  catch\n  end\nend",
                     Limits(steps=500))
    assert e.limit == "steps" and str(e).startswith("<script>:")


def test_limits_are_validated_and_read_from_the_environment(monkeypatch):
    with pytest.raises(al.ArgumentError, match="Limits\\(steps=…\\): expected a whole number"):
        Limits(steps=0)
    monkeypatch.setenv("ATTNLAB_MATLAB_LIMITS", "steps=50, chars=1e3")
    e = _limit_error("while true, end")
    assert "50 steps" in str(e)
    monkeypatch.setenv("ATTNLAB_MATLAB_LIMITS", "stepz=5")
    with pytest.raises(ScriptError, match="ATTNLAB_MATLAB_LIMITS expects NAME=N.*'stepz=5'"):
        run_code("x = 1;")


# -- sizes -----------------------------------------------------------------------------------

def test_zeros_of_a_huge_size_is_refused_before_anything_is_allocated():
    e = _limit_error("x = 1;\nx = zeros(1e6, 1e6);")
    assert e.limit == "elements"
    assert str(e).startswith("<script>:2:5: zeros(1000000, 1000000) would have "
                             "1,000,000,000,000 elements, over the limit of 10,000,000"), str(e)
    assert "Limits(elements=N)" in str(e)
    tracemalloc.start()
    try:
        _limit_error("x = zeros(3000, 3000);", Limits(elements=1000))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * 3000 * 3000 / 10             # the 72 MB array was never made


@pytest.mark.parametrize("code,col,words", [
    ("y = ones(1e5)^2;", 5, ["ones(100000, 100000)", "10,000,000,000 elements"]),
    ("x = 1; while true, x = repmat(x, 1, 2); end", 24, ["repmat's array", "16,777,216"]),
    ("x = rand(1e5, 1e5);", 5, ["rand(100000, 100000)"]),
    ("x = 1:1e12;", 5, ["range", "1,000,000,000,000 elements"]),
    ("x = (1:1e5)' .* (1:1e5);", 5, [".* would make an array of 10,000,000,000"]),
    ("x = [1 2 3]; x(1e10) = 1;", 14, ["assigning element 10,000,000,000"]),
    ("c = {1}; c{1e10} = 1;", 10, ["assigning element 10,000,000,000"]),
    ("x = cell(1e10);", 5, ["the cell array"]),
    ("x = randperm(1e12);", 5, ["randperm(1000000000000)"]),
    ("x = linspace(0, 1, 1e12);", 5, ["linspace"]),
    ("c = {}; for i = 1:40, c = {c, c}; end", 27, ["cell array holding", "values"]),
])
def test_arrays_past_the_element_limit_are_located_errors(code, col, words):
    e = _limit_error(code)
    assert e.limit == "elements" and str(e).startswith(f"<script>:1:{col}:"), str(e)
    assert "Limits.elements" in str(e)
    for w in words:
        assert w in str(e), str(e)


@pytest.mark.parametrize("code,col,words", [
    ("x = sprintf('%1000000000d', 1);", 5, ["the format '%1000000000d'", "1,000,000,000 char"]),
    ("x = repmat('ab', 1, 1e20);", 5, ["repmat's text", "characters"]),
    ("s = repmat('a', 1, 6e6); t = [s s];", 30, ["concatenation", "12,000,000 characters"]),
    ("x = num2str(pi, 1e9);", 5, ["num2str's precision"]),
])
def test_texts_past_the_character_limit_are_located_errors(code, col, words):
    e = _limit_error(code)
    assert e.limit == "chars" and str(e).startswith(f"<script>:1:{col}:"), str(e)
    assert "Limits.chars" in str(e)
    for w in words:
        assert w in str(e), str(e)


# -- nesting ---------------------------------------------------------------------------------

def test_endless_recursion_of_a_user_function_is_a_depth_error():
    e = _limit_error("x = f(1);\nfunction y = f(n)\n  y = f(n + 1);\nend\n")
    assert e.limit == "depth" and str(e).startswith("<script>:3:"), str(e)
    assert "nesting deeper than 500 levels" in str(e) and "Limits(depth=N)" in str(e)
    # recursion that ends is fine
    ws = run_code("x = f(20);\nfunction y = f(n)\n  if n == 0\n    y = 0;\n  else\n"
                  "    y = 1 + f(n - 1);\n  end\nend\n")
    assert ws["x"] == 20


def test_deeply_nested_source_is_a_depth_error_not_a_recursion_error():
    e = _limit_error("x = " + "(" * 10_000 + "1" + ")" * 10_000 + ";")
    assert e.limit == "depth" and str(e).startswith("<script>:1:"), str(e)
    e = _limit_error("if 1\n" * 3000 + "x = 1;\n" + "end\n" * 3000)
    assert e.limit == "depth" and str(e).startswith("<script>:500:"), str(e)
    e = _limit_error("if 1\n" * 30 + "x = 1;\n" + "end\n" * 30, Limits(depth=20))
    assert "nesting deeper than 20 levels" in str(e)


# -- files -----------------------------------------------------------------------------------

def test_a_fifo_is_refused_without_blocking(tmp_path, capsys):
    fifo_m = tmp_path / "pipe.m"
    os.mkfifo(fifo_m)
    got = _in_thread(lambda: run_file(fifo_m))
    assert isinstance(got.get("error"), ScriptError), got
    assert str(got["error"]).startswith("pipe.m:1:1:") and "FIFO (named pipe)" in str(got["error"])
    got = _in_thread(lambda: main(["analyze", str(fifo_m)]))
    assert got.get("value") == 2, got
    assert "not a regular file" in capsys.readouterr().err
    fifo_net = tmp_path / "pipe.attnlab"
    os.mkfifo(fifo_net)
    got = _in_thread(lambda: al.load(fifo_net))
    assert isinstance(got.get("error"), al.ArgumentError), got
    assert "load(path)" in str(got["error"]) and "FIFO" in str(got["error"])


def test_devices_and_folders_are_refused(tmp_path):
    if os.path.exists("/dev/zero"):
        with pytest.raises(ScriptError, match="zero:1:1: .*'/dev/zero' is a character device"):
            run_file("/dev/zero")
        with pytest.raises(al.ArgumentError, match="'/dev/zero' is a character device"):
            al.load("/dev/zero")
    folder = tmp_path / "x.m"
    folder.mkdir()
    with pytest.raises(ScriptError, match="x.m:1:1: .* is a folder, not a regular file"):
        run_file(folder)
    with pytest.raises(ScriptError, match="no such file"):
        run_file(tmp_path / "missing.m")


def test_a_50_mb_script_is_refused_by_its_size_before_parsing(tmp_path, monkeypatch):
    big = tmp_path / "big.m"
    with open(big, "wb") as f:
        f.write(b"x = 1;\n")
        f.truncate(50 * 2**20)                     # sparse: nothing is written
    from attnlab.matlab import interpreter, reader

    def never(*args):
        raise AssertionError("parsed")
    monkeypatch.setattr(reader, "parse", never)
    monkeypatch.setattr(interpreter, "parse", never)
    with pytest.raises(LimitError) as e:
        run_file(big)
    assert e.value.limit == "file_bytes"
    assert str(e.value).startswith("big.m:1:1:") and "52,428,800 bytes" in str(e.value)
    assert "over the limit of 2,097,152" in str(e.value) and "Limits(file_bytes=N)" in str(e.value)
    with pytest.raises(LimitError, match="the script has 2,000 bytes, over the limit of 1,000"):
        run_code("x = 1;" + " " * 1994, limits=Limits(file_bytes=1000))


def test_latin1_and_windows_1252_scripts_are_read(tmp_path):
    path = tmp_path / "latin.m"
    path.write_bytes(b"s = 'caf\xe9';\nt = '\x93quoted\x94';  % caf\xe9\n")
    ws = run_file(path)
    assert ws["s"] == "café" and ws["t"] == "\u201cquoted\u201d"
    path.write_bytes(b"\xef\xbb\xbfs = 'caf\xc3\xa9';\n")           # UTF-8 with a BOM
    assert run_file(path)["s"] == "café"


# -- raw Python exceptions -------------------------------------------------------------------

def test_num2str_with_a_precision_is_significant_digits_as_in_matlab():
    ws = run_code("a = num2str(pi, 8); b = num2str(pi); c = num2str(1/3, 2); "
                  "d = num2str(NaN, 4); e = num2str(42, '%05d');")
    assert ws["a"] == "3.1415927" and ws["b"] == "3.14159" and ws["c"] == "0.33"
    assert ws["d"] == "NaN" and ws["e"] == "00042"


def test_a_handle_called_with_name_value_arguments_is_a_located_error():
    with pytest.raises(ScriptError) as e:
        run_code("h = @disp;\nh(x=1)", out=_quiet)
    assert str(e.value).startswith("<script>:2:1: disp takes no name=value arguments, "
                                   "received x"), str(e.value)
    with pytest.raises(ScriptError, match="<script>:1:13: the anonymous function f = @\\(x\\) "
                                          "takes at most 1 arguments, received 2"):
        run_code("f = @(x) x; f(1, 2)")


def test_numbers_are_doubles_no_python_overflow():
    ws = run_code("a = 1/0; b = 2^1e9; c = -1/0; d = 99999999999999999999999; e = 6/3;")
    assert ws["a"] == math.inf and ws["b"] == math.inf and ws["c"] == -math.inf
    assert ws["d"] == 1e23 and ws["e"] == 2 and isinstance(ws["e"], int)
    assert run_code("x = 'a':'e';")["x"] == "abcde"


@pytest.mark.parametrize("code,start,words", [
    ("x = zeros(NaN);", "<script>:1:5:", ["zeros: sizes must be whole numbers, received NaN"]),
    ("x = zeros(Inf);", "<script>:1:5:", ["received Inf"]),
    ("x = ones(1.5);", "<script>:1:5:", ["received 1.5"]),
    ("x = zeros(-3);", None, []),                                   # MATLAB: 0×0
    ("x = size();", "<script>:1:5:", ["size: expected 1 to 2 arguments, received 0"]),
    ("disp(1, 2)", "<script>:1:1:", ["disp: expected 1 argument, received 2"]),
    ("x = sprintf(1);", "<script>:1:5:", ["sprintf: expected a format text first"]),
    ("x = strcat(1, 2);", "<script>:1:5:", ["strcat: expected texts", "num2str"]),
    ("x = 1:NaN;", "<script>:1:5:", ["finite bounds"]),
    ("x = 1:Inf;", "<script>:1:5:", ["finite bounds", "Inf"]),
    ("x = [1 2; 3 4] * [1 2 3];", "<script>:1:5:", ["the sizes 2×2 and 3 do not match"]),
    ("x = -{1};", "<script>:1:5:", ["unary - needs a number", "cell array"]),
    ("x = 0x10;", "<script>:1:5:", ["'0x10' is not a number"]),
    ("x = [1 2 3]; x(1:2) = [4 5 6];", "<script>:1:14:", ["cannot assign a 1×3 array there",
                                                          "1×3"]),
    ("x = [1 2 3]; x(1) = 'abc';", "<script>:1:14:", ["an array of numbers takes numbers",
                                                      "char vector"]),
    ("x = []; x(3) = reluLayer;", "<script>:1:9:", ["takes numbers, received a ReLU"]),
    ("x = 5; y = x(NaN);", "<script>:1:12:", ["index must be a positive integer, received NaN"]),
    ("x = [1 2 3]; y = x([1 NaN]);", "<script>:1:18:", ["indices must be positive integers"]),
    ("x = repmat({1}, 2);", "<script>:1:5:", ["repmat: expected a number"]),
    ("x = reshape([1 2 3], NaN);", "<script>:1:5:", ["reshape: sizes must be whole numbers"]),
    ("x = randperm(3, 5);", "<script>:1:5:", ["k between 0 and n = 3"]),
    ("rng(-1)", "<script>:1:1:", ["rng: expected a seed"]),
    ("x = size(1, 0);", "<script>:1:5:", ["size(x, dim): expected a dimension ≥ 1"]),
    ("x = char(1e400);", "<script>:1:5:", ["char: expected character codes", "Inf"]),
    ("x = dlarray({1});", "<script>:1:5:", ["dlarray: expected a number or numeric array, "
                                            "received Cell"]),
    ("a = [{1} 2];", "<script>:1:5:", ["cannot concatenate a cell array with other values"]),
    ("x = sprintf('%d', reluLayer);", "<script>:1:5:", ["takes a number or text, received ReLU"]),
    ("x = linspace(1, 2, NaN);", "<script>:1:5:", ["linspace: sizes must be whole numbers"]),
    ("error(struct('message', 'from a struct'))", "<script>:1:1:", ["from a struct"]),
    ("c = {}; for i = 1:20000, c = {c}; end; disp(c)", "<script>:1:40:", ["nesting too deep"]),
])
def test_odd_inputs_are_located_script_errors(code, start, words):
    if start is None:
        run_code(code, out=_quiet)
        return
    with pytest.raises(ScriptError) as e:
        run_code(code, out=_quiet)
    assert str(e.value).startswith(start), str(e.value)
    for w in words:
        assert w in str(e.value), str(e.value)


def test_an_unexpected_python_exception_is_located_and_keeps_its_cause(monkeypatch):
    from attnlab.matlab import builtins as B

    def broken(ctx, x):
        raise KeyError("inner")
    monkeypatch.setitem(B.BASE, "numel", broken)
    with pytest.raises(ScriptError) as e:
        run_code("a = 1;\nb = numel(a);")
    assert str(e.value).startswith("<script>:2:5: numel: cannot take these arguments "
                                   "(a number): KeyError"), str(e.value)
    assert isinstance(e.value.__cause__.__cause__, KeyError) or \
        isinstance(e.value.__cause__, KeyError)


# -- control characters ----------------------------------------------------------------------

def test_control_characters_from_a_script_are_shown_escaped(tmp_path, capsys):
    code = "error(['bad' char(27) ']0;title' char(7) char(27) '[2J'])"
    with pytest.raises(ScriptError) as e:
        run_code(code)
    assert "\x1b" not in str(e.value) and "\x07" not in str(e.value)
    assert str(e.value) == "<script>:1:1: bad\\x1b]0;title\\x07\\x1b[2J"
    assert e.value.reason == "bad\x1b]0;title\x07\x1b[2J"        # the text itself, for catch
    assert run_code("try, " + code[:-1] + "), catch err, m = err.message; end")["m"] == \
        "bad\x1b]0;title\x07\x1b[2J"
    printed = []
    run_code("disp(['a' char(27) '[31m']); fprintf('%s\\n', char([27 93])); warning(char(7));",
             out=lambda *a, **k: printed.append(a[0]))
    assert printed == ["a\\x1b[31m", "\\x1b]\n", "Warning: \\x07"]
    script = tmp_path / "esc.m"
    script.write_bytes(b"layers = [featureInputLayer(2)];\nerror('x\x1b]0;owned\x07\x1b[2J');\n")
    assert main(["analyze", str(script)]) == 2
    captured = capsys.readouterr()
    assert "\x1b" not in captured.err + captured.out and "\x07" not in captured.err
    assert "esc.m:2:1: x\\x1b]0;owned\\x07\\x1b[2J" in captured.err


def test_notes_show_control_characters_escaped():
    import warnings

    from attnlab.matlab import MatlabNote
    from attnlab.matlab.interpreter import Interpreter, _run
    interp = Interpreter("noteIt(['layer ' char(27) '[2J' char(7)]);", "n.m", analyze=True,
                         out=_quiet)
    interp.toolbox["noteIt"] = lambda text: warnings.warn(text, MatlabNote)
    _run(interp)
    assert interp.notes == ["n.m:1: layer \\x1b[2J\\x07"]


def test_an_empty_error_message_does_nothing_as_in_matlab():
    assert run_code("error(''); error([]); error(struct('message', '')); x = 1;")["x"] == 1
    with pytest.raises(ScriptError, match="<script>:1:1: value 5$"):
        run_code("error('my:id', 'value %d', 5)")


def test_copying_large_arrays_counts_towards_the_step_limit():
    # each x(i) = v copies x: 100,000 elements count 24 steps, so 50 assignments are 1,200
    e = _limit_error("x = zeros(1, 1e5);\nfor i = 1:50, x(i) = i; end", Limits(steps=1000))
    assert e.limit == "steps" and "one more per 4,096 array elements made or copied" in str(e)
    assert str(e).startswith("<script>:2:"), str(e)
    e = _limit_error("c = cell(1, 1e5);\nfor i = 1:50, c{i} = i; end", Limits(steps=1000))
    assert e.limit == "steps"
    ws = run_code("x = zeros(1, 1e4); for i = 1:100, x(i) = i; end", limits=Limits(steps=2000))
    assert ws["x"][0, 99] == 100


def test_linear_index_assignment_into_a_matrix_is_column_major():
    ws = run_code("x = zeros(2, 2); x(3) = 5; y = zeros(1, 3); y(2) = 1; z = 1:3; z(5) = 9;")
    assert ws["x"].tolist() == [[0, 5], [0, 0]] and ws["y"].tolist() == [[0, 1, 0]]
    assert ws["z"].tolist() == [1, 2, 3, 0, 9]


def test_a_network_too_large_to_allocate_is_refused_before_its_weights_exist():
    code = "net = dlnetwork([featureInputLayer(1e5) fullyConnectedLayer(1e5)]);"
    for analyze in (False, True):
        tracemalloc.start()
        try:
            e = _limit_error(code, analyze=analyze)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert e.limit == "learnables" and str(e).startswith(
            "<script>:1:7: dlnetwork would allocate 10,000,100,000 learnables, over the limit of "
            "500,000,000 (Limits.learnables)"), str(e)
        assert peak < 50 * 2**20
    ws = run_code("net = dlnetwork([featureInputLayer(10) fullyConnectedLayer(5)]);",
                  limits=Limits(learnables=55))
    assert ws["net"].initialized
    e = _limit_error("net = dlnetwork([featureInputLayer(10) fullyConnectedLayer(5)]);",
                     Limits(learnables=54))
    assert "55 learnables" in str(e)


def test_the_cli_takes_its_limits_from_the_environment(tmp_path, capsys, monkeypatch):
    script = tmp_path / "loop.m"
    script.write_text("layers = [featureInputLayer(2)];\nn = 0;\nwhile true\n  n = n + 1;\nend\n")
    monkeypatch.setenv("ATTNLAB_MATLAB_LIMITS", "steps=200")
    assert main(["analyze", str(script)]) == 2
    err = capsys.readouterr().err
    assert "loop.m:" in err and "the script ran 200 steps" in err and "Limits.steps" in err
    assert "ATTNLAB_MATLAB_LIMITS=steps=N" in err


def test_a_lone_surrogate_in_code_text_is_replaced_not_a_decode_error():
    assert run_code("x = '\ud800';")["x"] == "?"


def test_a_layer_name_set_by_property_is_checked_like_any_layer_name():
    with pytest.raises(ScriptError, match="<script>:1:29: layer name 'a\\\\x1b' is not valid: "
                                          "character U\\+001B"):
        run_code("l = fullyConnectedLayer(3); l.Name = ['a' char(27)];")
    with pytest.raises(ScriptError, match="it has 1000000 characters, the most is"):
        run_code("l = fullyConnectedLayer(3); l.Name = repmat('a', 1, 1e6);")
    assert run_code('l = fullyConnectedLayer(3); l.Name = "fc2";')["l"].name == "fc2"


def test_analyze_prints_an_output_layer_name_with_escapes_as_text(tmp_path, capsys):
    script = tmp_path / "out.m"
    script.write_text("layers = [featureInputLayer(2, Name=\"in\"); fullyConnectedLayer(2, "
                      "Name=\"fc\"); classificationLayer(Name=['out' char(27) '[2J'])];\n")
    assert main(["analyze", str(script)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "classificationLayer 'out\\x1b[2J'" in out


def test_a_struct_counted_on_every_use_counts_its_fields_as_steps():
    code = "s = struct();\nfor i = 1:2000, s.(sprintf('f%d', i)) = i; end"
    e = _limit_error(code, Limits(steps=100_000))
    assert e.limit == "steps" and str(e).startswith("<script>:2:"), str(e)
    assert len(run_code(code.replace("2000", "50"))["s"]) == 50


def test_a_depth_raised_past_pythons_stack_still_ends_in_a_limit_error():
    import sys
    before = sys.getrecursionlimit()
    e = _limit_error("x = f(1);\nfunction y = f(n)\n  y = f(n + 1);\nend\n", Limits(depth=10**6))
    assert e.limit == "depth" and "nesting too deep for Python's stack" in str(e)
    assert sys.getrecursionlimit() == before
