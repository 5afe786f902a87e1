"""The README runs as it stands: every Python block on its own (imports included), shortened only
by ATTNLAB_EPOCHS, which the training blocks read, printing exactly the text block that follows
it; the messages it quotes are the ones attnlab gives; its shell lines run or say why not; and
its tables are what `make demo-table` writes from the recorded measurements."""
import json
import re
import sys
from pathlib import Path

import matplotlib
import pytest

from doc_blocks import fences, lines, run_shell_line, shell_commands, unexplained_text_blocks, words

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
sys.path.insert(0, str(ROOT / "tools"))            # the repository's tools (demo_table.py)

# shell lines of the README that the tests do not run, and why
NOT_RUN = {"make demo": "trains the digits demo for about a minute (tests/docs/test_demos.py runs "
                        "every demo for one epoch)",
           "make test": "runs this suite"}


def all_blocks():
    return fences(README.read_text(encoding="utf-8"))


def blocks():
    return [b.code for b in all_blocks() if b.lang == "python"]


def _python_blocks():
    return [b for b in all_blocks() if b.lang == "python"]


def _cycle_message() -> str:
    from attnlab.cli.demos.seed1 import question_network
    return next(str(i) for i in question_network().analyze().issues if "cycle:" in str(i))


def _flatten_message() -> str:
    # the seed's network, flattenLayer before selfAttentionLayer
    from attnlab.cli.demos.seed2_images import flatten_network_attnlab
    return str(flatten_network_attnlab().analyze().issues[0])


# text blocks that are no code's output: the messages the README quotes, each from attnlab itself
QUOTED = {"error: cycle:": _cycle_message, "error: layer 'self_attention' port 'in'": _flatten_message}


def test_the_readme_has_its_python_blocks():
    # the encoder–decoder, forecasting, AttentionQKV and MATLAB blocks; the images and
    # sequence → label training examples live in docs/tutorials (run by tests/docs/test_docs.py)
    assert len(blocks()) >= 4


def test_every_readme_block_is_labelled():
    unlabelled = [b.line for b in all_blocks() if b.lang not in ("python", "text", "sh", "matlab")]
    assert not unlabelled, f"README.md lines {unlabelled}: label the blocks (python, text, sh)"


@pytest.mark.parametrize("index", range(len(blocks())))
def test_readme_python_block_runs_on_its_own(index, tmp_path, monkeypatch, capsys):
    block = _python_blocks()[index]
    if "al.datasets" in block.code:
        for package in ("sklearn", "sktime", "statsmodels"):
            pytest.importorskip(package)
    matplotlib.use("Agg")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ATTNLAB_EPOCHS", "1")
    namespace = {"__name__": "__main__"}                  # nothing from the other blocks
    exec(compile(block.code, f"{README}:{block.line}", "exec"), namespace)
    out = capsys.readouterr().out
    if block.expected is not None:                        # the output the README shows
        assert lines(out) == lines(block.expected), f"README.md line {block.line}"
    if "al.forecast" in block.code:
        assert namespace["level"].shape == (52,)          # the forecast block ran to the end
        assert "RMSE over 2001" in out
    if 'plots="training-progress"' in block.code:
        written = tmp_path / "training-progress.png"
        assert written.is_file() and str(written.resolve()) in out   # it says where it drew


def test_the_matlab_block_builds_the_whole_network_it_means(capsys):
    # the README's "From MATLAB" block builds the encoder–decoder, no port left unconnected
    block = next(b for b in _python_blocks() if "from attnlab.matlab import" in b.code)
    namespace: dict = {}
    exec(compile(block.code, "README.md", "exec"), namespace)
    net = namespace["net"]
    assert net.analyze().ok and "error" not in capsys.readouterr().out
    assert set(net.input_names) == {"decoder-input", "encoder-input"}


@pytest.mark.parametrize("start", sorted(QUOTED))
def test_the_messages_the_readme_quotes_are_attnlabs(start):
    [quoted] = [b.code for b in all_blocks() if b.lang == "text" and b.code.startswith(start)]
    assert words(quoted) == words(QUOTED[start]())


def test_every_text_block_is_an_output_or_a_quoted_message():
    blocks = all_blocks()
    unchecked = unexplained_text_blocks(blocks, lambda code: any(code.startswith(k) for k in QUOTED))
    assert not unchecked, f"README.md lines {unchecked}: text blocks no test checks"


def test_readme_shell_lines_run_or_say_why_not(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for b in all_blocks():
        if b.lang == "sh":
            for line in shell_commands(b.code):
                result = run_shell_line(line, NOT_RUN)
                if result is not None:
                    assert result[0] == 0, f"README.md line {b.line}: {line}\n{result[1]}"


def test_readme_tables_are_what_make_demo_table_writes():
    import demo_table as table
    results = json.loads(table.RESULTS.read_text(encoding="utf-8"))
    text = README.read_text(encoding="utf-8")
    assert table.render(text, results, table.BENCH.read_text(encoding="utf-8")) == text
    assert set(results) == set(table.DEMOS)
    assert all(len(r["seeds"]) == 3 for r in results.values())


def test_benchmark_table_follows_results_md():
    import demo_table as table
    row = table.bench_table(table.BENCH.read_text(encoding="utf-8")).splitlines()[2]
    assert row.startswith("| graph overhead, 24 tiny layers")
    text = table.BENCH.read_text(encoding="utf-8")
    measured = re.search(r"\| 24 tiny layers[^|]*\| [^|]+ \| [^|]+ \| [0-9.]+ \|", text).group(0)
    changed = text.replace(measured, "| 24 tiny layers (12 Dense + 12 ReLU), B8×16 | 300 µs | "
                                     "270 µs | 1.111 |")
    assert "| 300 µs | hand-written module 270 µs | 1.11× |" in table.bench_table(changed)


def test_benchmark_table_keeps_working_without_the_optional_keras_row():
    import demo_table as table
    text = table.BENCH.read_text(encoding="utf-8")
    without = "".join(l for l in text.splitlines(keepends=True) if not l.startswith("| keras fit"))
    row = next(l for l in table.bench_table(without).splitlines() if "`al.train`" in l)
    assert "Keras not measured (not installed)" in row and "(Keras" not in row
    with_keras = re.sub(r"(\| al\.train, metrics=\[\] \|[^\n]*\n)",
                        lambda m: m.group(1) + "| keras fit | 78.0 | 12.82 | 0.400 |\n", without)
    row = next(l for l in table.bench_table(with_keras).splitlines() if "`al.train`" in l)
    assert "Keras `fit` 78 it/s" in row and "(Keras 0.40×)" in row


def test_demo_table_needs_its_markers():
    import demo_table as table
    from attnlab.core.errors import FormatError
    with pytest.raises(FormatError, match="demo-table"):
        table.replace_block("no markers here", "demo-table", "| x |")


def test_demo_table_says_which_members_train_in_parallel_and_when_others_shared_the_machine():
    import copy
    import demo_table as table
    results = json.loads(table.RESULTS.read_text(encoding="utf-8"))
    quiet = copy.deepcopy(results)
    for x in quiet.values():
        for r in x["runs"]:
            r["machine"].update(demo_threads=1, load_average_1min_at_start=1.0)
            r["workers"] = 1
    for r in quiet["vowels"]["runs"]:
        r["workers"], r["machine"]["load_average_1min_at_start"] = 2, 1.9
    line = table.demo_table(quiet).splitlines()[-1]
    assert "1 torch thread(s) a process (the vowels members in 2 processes at once)" in line
    assert "other jobs shared" not in line                # 1.9 after a run of 2 processes
    for r in quiet["vowels"]["runs"]:
        r["machine"]["load_average_1min_at_start"] = 2.6
    assert "other jobs shared the machine" in table.demo_table(quiet).splitlines()[-1]
    for r in quiet["digits"]["runs"]:
        r["workers"] = 2
    assert ("(the digits and vowels members in 2 processes at once)"
            in table.demo_table(quiet).splitlines()[-1])


def test_demo_table_calls_a_tie_level_and_a_margin_better_or_worse():
    from demo_table import versus

    def run(ours, base, sd=0.0):
        return {"mean": {"test_accuracy": ours, "baseline_accuracy": base},
                "sd": {"test_accuracy": sd}}
    assert versus("vowels", run(367 / 370, 1 - 3 / 370)) == "level (no better, no worse)"
    assert versus("digits", run(0.9963, 0.9917, 0.0016)) == "better by 0.46 points"
    assert versus("vowels", run(0.9901, 0.9919, 0.0041)) == "worse by 0.18 points (less than one sd)"


def test_demo_table_gives_seed_0_beside_the_mean_and_says_which_meets_the_aim():
    # `make demo` trains seed 0 alone: the table must say what that run gives, not only the mean
    import demo_table as table
    results = json.loads(table.RESULTS.read_text(encoding="utf-8"))
    lines = table.demo_table(results).splitlines()
    assert "seed 0 alone" in lines[0] and "mean ± sd over the seeds" in lines[0]
    digits = next(l for l in lines if l.startswith("| digits"))
    one = table.first_run(results["digits"])
    assert one["seed"] == 0
    assert f"| {100 * one['test_accuracy']:.2f} % ({table.errors(one['test_errors'])}) |" in digits
    mean_met = round(100 * results["digits"]["mean"]["test_accuracy"], 2) >= 99.4
    seed_met = round(100 * one["test_accuracy"], 2) >= 99.4
    word = {True: "met", False: "not met"}
    assert f"≥ 99.4 % (mean: {word[mean_met]}; seed 0: {word[seed_met]})" in digits
    level = one["test_accuracy"] == one["baseline_accuracy"]
    assert ("seed 0: level" in digits) == level


def test_a_single_run_is_compared_with_its_own_baselines():
    from demo_table import versus_run
    run = {"test_rmse": 0.44, "holt_winters_rmse": 0.52, "seasonal_naive_drift_rmse": 0.60,
           "seasonal_naive_rmse": 1.57}
    assert versus_run("forecast", run) == "better by 0.080 ppm"
    assert versus_run("digits", {"test_accuracy": 0.99, "baseline_accuracy": 0.995}) \
        == "worse by 0.50 points"
    assert versus_run("roman", {"test_exact_match": 0.99}) == "—"
