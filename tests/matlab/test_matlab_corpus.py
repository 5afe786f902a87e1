"""The corpus of real scripts from r27 on: each file in tests/matlab/real/ says in its header what
MATLAB does with it and what `attnlab analyze` must therefore report, in lines this module reads:

    % Expect: exit 2 "--set numFeatures=VALUE"
    % Expect-with: --set numFeatures=3 --set "x=[1 2]" -> exit 0 "36 layers" "no issues" learnables=146437
    % Xfail: what the reader lacks (added after measuring; the case must fail until it is fixed)

`Expect` is the script analysed as it is, `Expect-with` the script given those --set values
(shell-quoted). After `exit N` come phrases (shell-quoted) that stdout and stderr, joined, must
contain once box-drawing characters are dropped and whitespace is collapsed, and optionally
`learnables=N`: the count MATLAB shows, which attnlab prints as "MATLAB counts N learnables"
where PyTorch's count differs (LSTM, GRU) and as "total learnables: N" otherwise."""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from attnlab.cli import main

pytest.importorskip("tree_sitter_matlab")
REAL = Path(__file__).parent / "real"
FIRST = 27                                  # r01-r26 have their own tests
_BOX = re.compile("[\u2500-\u257f]")


@dataclass(frozen=True)
class Expectation:
    sets: tuple[str, ...]                   # NAME=VALUE, each given as --set
    exit: int
    phrases: tuple[str, ...]
    learnables: int | None

    def describe(self) -> str:
        given = " ".join(f"--set {s}" for s in self.sets) or "as it is"
        return f"analysed {given}"


def parse_result(text: str, sets: tuple[str, ...] = ()) -> Expectation:
    """`exit N ["phrase" ...] [learnables=N]`."""
    tokens = shlex.split(text)
    if len(tokens) < 2 or tokens[0] != "exit" or not tokens[1].isdigit():
        raise ValueError(f"an expectation starts with 'exit N', received {text!r}")
    phrases, learnables = [], None
    for token in tokens[2:]:
        if token.startswith("learnables="):
            learnables = int(token.partition("=")[2].replace(",", ""))
        else:
            phrases.append(token)
    return Expectation(sets, int(tokens[1]), tuple(phrases), learnables)


def parse_with(text: str) -> Expectation:
    """`--set A=1 --set "B=[1 2]" -> exit N ...`."""
    given, arrow, result = text.partition("->")
    if not arrow:
        raise ValueError(f"Expect-with needs '->' before the result, received {text!r}")
    tokens = shlex.split(given)
    if len(tokens) % 2 or any(flag != "--set" for flag in tokens[::2]):
        raise ValueError(f"Expect-with gives --set NAME=VALUE pairs, received {given!r}")
    return parse_result(result, tuple(tokens[1::2]))


def read_header(path: Path) -> tuple[list[Expectation], str | None]:
    """The expectations of a script's leading comment block, and its Xfail reason if any."""
    expectations, xfail = [], None
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("%"):
            break
        key, colon, value = line[1:].strip().partition(":")
        if not colon:
            continue
        if key == "Expect":
            expectations.append(parse_result(value))
        elif key == "Expect-with":
            expectations.append(parse_with(value))
        elif key == "Xfail":
            xfail = value.strip()
    return expectations, xfail


def corpus() -> list[Path]:
    return sorted(p for p in REAL.glob("r*.m") if int(p.name[1:3]) >= FIRST)


def _case(path: Path):
    _, xfail = read_header(path)
    marks = [pytest.mark.xfail(strict=True, reason=xfail)] if xfail else []
    return pytest.param(path, marks=marks, id=path.stem)


def _analyze(capsys, path: Path, sets: tuple[str, ...]) -> tuple[int, str]:
    code = main(["analyze", str(path), *[a for s in sets for a in ("--set", s)]])
    captured = capsys.readouterr()
    return code, " ".join(_BOX.sub(" ", captured.out + "\n" + captured.err).split())


def _learnables(out: str) -> int | None:
    found = (re.search(r"MATLAB counts ([\d,]+) learnables", out)
             or re.search(r"total learnables: ([\d,]+)", out))
    return int(found.group(1).replace(",", "")) if found else None


def _mismatches(expected: Expectation, code: int, out: str) -> list[str]:
    problems = []
    if code != expected.exit:
        problems.append(f"exit {code}, expected {expected.exit}")
    problems += [f"missing {p!r}" for p in expected.phrases if p not in out]
    if expected.learnables is not None and _learnables(out) != expected.learnables:
        problems.append(f"learnables {_learnables(out)}, expected {expected.learnables:,}")
    return problems


@pytest.mark.parametrize("path", [_case(p) for p in corpus()])
def test_a_real_script_is_analysed_as_matlab_runs_it(capsys, path):
    expectations, _ = read_header(path)
    failures = []
    for expected in expectations:
        code, out = _analyze(capsys, path, expected.sets)
        problems = _mismatches(expected, code, out)
        if problems:
            failures.append(f"{expected.describe()}: {'; '.join(problems)}\n    output: {out[-1500:]}")
    assert not failures, f"{path.name}:\n  " + "\n  ".join(failures)


def test_every_corpus_script_states_what_matlab_does():
    scripts = corpus()
    assert len(scripts) >= 22
    for path in scripts:
        expectations, _ = read_header(path)
        lines = path.read_text(encoding="utf-8").splitlines()
        header = lines[:next(i for i, line in enumerate(lines) if not line.startswith("%"))]
        assert header[0].startswith("% Pattern:"), path.name
        assert any(line.startswith("% MATLAB:") for line in header), path.name
        assert expectations and expectations[0].sets == (), path.name     # the script as it is


def test_the_expectation_grammar():
    plain = parse_result('exit 0 "10 layers" \'no issues\' learnables=242,077')
    assert plain == Expectation((), 0, ("10 layers", "no issues"), 242077)
    given = parse_with('--set n=3 --set "x=[1 2]" -> exit 2 "--set y=VALUE"')
    assert given.sets == ("n=3", "x=[1 2]") and given.exit == 2
    assert given.phrases == ("--set y=VALUE",) and given.learnables is None
    for bad in ("0 layers", "exit two"):
        with pytest.raises(ValueError, match="starts with 'exit N'"):
            parse_result(bad)
    with pytest.raises(ValueError, match="needs '->'"):
        parse_with("--set n=3 exit 0")
    with pytest.raises(ValueError, match="--set NAME=VALUE pairs"):
        parse_with("n=3 -> exit 0")
    assert _learnables("total learnables: 1,344 MATLAB counts 1,280 learnables: …") == 1280
    assert _learnables("total learnables: 2,275 no issues") == 2275
    assert _mismatches(plain, 1, "9 layers") == ["exit 1, expected 0", "missing '10 layers'",
                                                 "missing 'no issues'",
                                                 "learnables None, expected 242,077"]
