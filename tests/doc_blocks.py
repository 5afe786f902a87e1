"""The fenced blocks of a page (README.md, docs/**/*.md) and how the tests run them.

A block's language is the first word of its info string. `python` runs; a `text` block right
after a `python` block is that code's printed output and must match it; `sh` lines that call
`attnlab …` run through the CLI (in-process) and must exit 0, other shell lines must be listed
with the reason they do not run here; a `matlab` block whose first line is `% NAME.m…` is that
file (the page's later blocks use it), any other `matlab` block is a whole script and runs
through `attnlab.matlab.run_code`. Blocks whose info string starts with `{` are directives
(`{toctree}`, `{include}`). Every other block must be labelled."""
from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path
from typing import NamedTuple

FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```[ \t]*$", re.S | re.M)
LANGUAGES = {"python", "text", "sh", "matlab"}
MATLAB_FILE = re.compile(r"^%+\s*([\w-]+\.m)\b")


class Block(NamedTuple):
    lang: str                 # "python", "text", "sh", "matlab", "directive" or "" (unlabelled)
    code: str
    line: int                 # 1-based line of the opening fence
    expected: str | None      # for a python block: the text block right after it


def fences(text: str) -> list[Block]:
    found = []
    for m in FENCE.finditer(text):
        info = m.group(1).strip()
        lang = "directive" if info.startswith("{") else (info.split()[0] if info else "")
        found.append((lang, m.group(2), text.count("\n", 0, m.start()) + 1, m.start(), m.end()))
    out = []
    for i, (lang, code, line, _, end) in enumerate(found):
        expected = None
        if lang == "python" and i + 1 < len(found):
            nlang, ncode, _, nstart, _ = found[i + 1]
            if nlang == "text" and not text[end:nstart].strip():
                expected = ncode
        out.append(Block(lang, code, line, expected))
    return out


def lines(s: str) -> list[str]:
    """Printed output compared line by line, without trailing spaces or blank ends."""
    return [line.rstrip() for line in s.strip().splitlines()]


def words(s: str) -> str:
    """A message wrapped for a page compared with the same message on one line."""
    return " ".join(s.split())


def unexplained_text_blocks(blocks: list[Block], explained) -> list[int]:
    """Lines of the text blocks that are no python block's output and not `explained` (a
    function of the block's code: True when the test checks it, or it is an illustration)."""
    out = []
    for i, b in enumerate(blocks):
        if b.lang != "text":
            continue
        prev = blocks[i - 1] if i else None
        if prev is not None and prev.expected is b.code:
            continue
        if not explained(b.code):
            out.append(b.line)
    return out


def shell_commands(code: str) -> list[str]:
    return [line.strip() for line in code.splitlines() if line.strip()
            and not line.strip().startswith("#")]


def run_shell_line(line: str, not_run: dict[str, str]) -> tuple[int, str] | None:
    """Runs an `attnlab …` line through the CLI in the current folder: (exit status, output).
    None for a line listed in `not_run` (a prefix → why it does not run in the tests);
    any other line is an error, so that no command of a page goes unchecked unnoticed."""
    argv = shlex.split(line, comments=True)
    command = " ".join(argv)
    for prefix in not_run:
        if command.startswith(prefix):
            return None
    if not argv or argv[0] != "attnlab":
        raise AssertionError(f"{line!r}: a shell line the tests do not run; make it an `attnlab` "
                             "command on files the page makes or ships, or list it in NOT_RUN "
                             "with the reason")
    from attnlab.cli import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(argv[1:])
        except SystemExit as e:              # argparse: a usage error
            status = e.code if isinstance(e.code, int) else 2
    return int(status or 0), out.getvalue() + err.getvalue()


def matlab_file(code: str) -> str | None:
    """The file name a matlab block's first line gives (`% model.m: …`), or None."""
    m = MATLAB_FILE.match(code.lstrip())
    return m.group(1) if m else None


def ship(path: Path, code: str, shipped_beside: Path) -> None:
    """Writes a page's file; when the repository ships it beside the page, they must agree."""
    shipped = shipped_beside / path.name
    if shipped.is_file():
        assert shipped.read_text(encoding="utf-8") == code, (
            f"{shipped} differs from the block that shows it: keep them the same")
    path.write_text(code, encoding="utf-8")
