"""Parsing MATLAB source with tree-sitter-matlab (the `attnlab[matlab]` extra).

Why tree-sitter-matlab and not MISS_HIT: both parse the seeds' code (layer arrays over several
lines, `'Name',value` and `Name=value`, `%{ %}`, `...`). tree-sitter-matlab is MIT-licensed like
attnlab (MISS_HIT is GPL-3), keeps going after a syntax error so the message can point at the
first bad token with its line and column, and is a compiled grammar maintained with the editors
that use it. This module turns source text into a tree and syntax errors into ScriptError;
`interpreter.py` walks the tree.

Scripts are untrusted input: `read_source` reads only a regular file of at most
`Limits.file_bytes` bytes (never a FIFO, device or folder), `decode` accepts UTF-8 and falls back
to Windows-1252/Latin-1 as MATLAB does, and `Limits` bounds what running a script may take
(steps, array sizes, nesting). Text that came from a script is shown with its control
characters escaped (`printable`), so an error message cannot drive the terminal.
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import os
import re
from collections.abc import Iterator
from pathlib import Path

from attnlab.core.errors import AttnlabError

# C0/C1 control characters (but newline and tab), DEL, and the bidirectional overrides that can
# make text read in another order than it runs
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """`text` with its control characters escaped as Python writes them (ESC → `\\x1b`), so
    that text from a script printed on a terminal stays text; newlines and tabs are kept."""
    return _CONTROL.sub(lambda m: m.group(0).encode("unicode_escape").decode("ascii"), str(text))


class ScriptError(AttnlabError):
    """A MATLAB script that cannot be run: `FILE.m:LINE:COL: what, and the fix`. Control
    characters in the message are escaped (`reason` keeps the text as the script gave it)."""

    def __init__(self, message: str, file: str = "<script>", line: int = 0, col: int = 0):
        self.file, self.line, self.col, self.reason = file, line, col, message
        super().__init__(printable(f"{file}:{line}:{col}: {message}"))


class LimitError(ScriptError):
    """A script that went past one of its `Limits` (`limit` names the field). A MATLAB
    `try`/`catch` in the script does not catch it: the script stops."""

    def __init__(self, message: str, limit: str, file: str = "<script>", line: int = 0,
                 col: int = 0):
        self.limit = limit
        super().__init__(message, file, line, col)


@dataclasses.dataclass(frozen=True)
class Limits:
    """What reading and running one MATLAB script may take; past one, the script stops with a
    `LimitError` (`FILE.m:LINE:COL: …`) naming the limit and how to raise it.

    Give them to `run_file(path, limits=Limits(steps=10**8))` / `run_code`; runs given none
    (`attnlab analyze FILE.m`, `attnlab plot FILE.m`) take those of `limits_used(...)` or of the
    environment variable ATTNLAB_MATLAB_LIMITS (`steps=100000000,elements=1e8`), else these
    defaults.

    Attributes
    ----------
    steps : int
        Statements, loop iterations and expressions evaluated, and one more per 4,096 array
        elements made or copied.
    elements : int
        Elements of one array, cell array or layer array that a statement creates (a cell
        array or struct counts what it holds, nested ones included).
    chars : int
        Characters of one text value (char vector or string) a statement creates.
    depth : int
        Nesting of user-function calls, expressions and statements together.
    learnables : int
        Weights `dlnetwork`, `initialize` or `trainnet` may allocate for one network.
    file_bytes : int
        Size of the script's source, checked before it is parsed.
    """

    steps: int = 1_000_000
    elements: int = 10_000_000
    chars: int = 10_000_000
    depth: int = 500
    learnables: int = 500_000_000
    file_bytes: int = 2 * 2**20

    def __post_init__(self):
        from attnlab.core.errors import ArgumentError
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ArgumentError(f"Limits({f.name}=…): expected a whole number ≥ 1, "
                                    f"received {v!r}")

    @staticmethod
    def hint(name: str) -> str:
        """How to raise limit `name`: the words an error message ends with."""
        return (f"Raise it if the script is trusted: run_file(path, limits=Limits({name}=N)), "
                f"or ATTNLAB_MATLAB_LIMITS={name}=N attnlab analyze FILE.m")


Limits.__module__ = "attnlab.matlab"             # where it is imported from and documented


_CURRENT: contextvars.ContextVar[Limits | None] = contextvars.ContextVar(
    "attnlab_matlab_limits", default=None)


ENVIRONMENT = "ATTNLAB_MATLAB_LIMITS"


def current_limits() -> Limits:
    """The limits a script run gets when it is given none: those of `limits_used`, else those
    of the environment variable ATTNLAB_MATLAB_LIMITS (`steps=1e8,chars=1e8`), else the
    defaults."""
    given = _CURRENT.get()
    if given is not None:
        return given
    text = os.environ.get(ENVIRONMENT, "").strip()
    return parse_limits([p for p in re.split(r"[,\s]+", text) if p]) if text else Limits()


@contextlib.contextmanager
def limits_used(limits: Limits | None) -> Iterator[None]:
    """`with limits_used(Limits(steps=…)):` — scripts run inside the block without limits of
    their own get these (what `attnlab analyze --limit` uses)."""
    token = _CURRENT.set(limits)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def parse_limits(pairs: list[str]) -> Limits:
    """`NAME=N` pairs (`steps=100000000`, `elements=1e8`) → Limits; the rest keep defaults.
    ScriptError for a pair that is not one (named as the environment variable's)."""
    names = [f.name for f in dataclasses.fields(Limits)]
    given: dict[str, int] = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        name = name.strip()
        try:
            value = float(text)
            ok = bool(sep) and name in names and value.is_integer() and value >= 1
        except ValueError:
            ok = False
        if not ok:
            raise ScriptError(f"{ENVIRONMENT} expects NAME=N pairs with NAME one of "
                              f"{', '.join(names)} and N a whole number ≥ 1, received {pair!r}",
                              ENVIRONMENT, 0, 0)
        given[name] = int(value)
    return Limits(**given)


def read_source(path: str | os.PathLike[str], limits: Limits | None = None) -> bytes:
    """The bytes of the script file `path`: a regular file of at most `limits.file_bytes`
    bytes. ScriptError (`NAME.m:1:1: …`) for a missing file, a folder, FIFO or device, or a
    file over the limit; nothing blocking is done before those checks."""
    from attnlab.core.reading import read_regular
    limits = limits or current_limits()
    p = Path(path)

    def fail(message: str) -> ScriptError:
        return LimitError(message, "file_bytes", p.name, 1, 1) if "over the limit" in message \
            else ScriptError(message, p.name, 1, 1)
    try:
        return read_regular(p, "cannot read the script", limits.file_bytes,
                            limit_hint=Limits.hint("file_bytes") + ".", error=fail)
    except FileNotFoundError:
        raise ScriptError(f"no such file: '{p}'", p.name, 1, 1) from None
    except OSError as e:
        raise ScriptError(f"cannot read the script '{p}': {e.strerror or e}", p.name, 1,
                          1) from None


def decode(source: str | bytes) -> bytes:
    """The script as UTF-8 bytes (what the parser reads): UTF-8 as it is (without a byte-order
    mark), otherwise Windows-1252 (MATLAB's default on Windows), and Latin-1 for the bytes
    Windows-1252 leaves undefined."""
    if isinstance(source, str):
        return source.encode("utf-8", "replace")   # a lone surrogate becomes '?'
    data = bytes(source)
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        data.decode("utf-8")
        return data
    except UnicodeDecodeError:
        pass
    try:
        text = data.decode("cp1252")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    return text.encode("utf-8")


def check_size(source: bytes, file: str, limits: Limits) -> None:
    if len(source) > limits.file_bytes:
        raise LimitError(f"the script has {len(source):,} bytes, over the limit of "
                         f"{limits.file_bytes:,}; nothing was parsed. {Limits.hint('file_bytes')}",
                         "file_bytes", file, 1, 1)


def _parser():
    try:
        import tree_sitter
        import tree_sitter_matlab
    except ImportError:
        raise ScriptError("reading MATLAB files needs the tree-sitter MATLAB grammar: "
                          "pip install 'attnlab[matlab]'") from None
    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_matlab.language()))


def parse(source: bytes, file: str):
    """The tree-sitter root node of `source`; raises ScriptError at the first syntax error."""
    if not source.endswith(b"\n"):
        source += b"\n"                           # `while true, end` at the very end
    tree = _parser().parse(source)
    root = tree.root_node
    if root.has_error:
        bad = _first_error(root)
        line, col = bad.start_point.row + 1, bad.start_point.column + 1
        text = source[bad.start_byte:bad.end_byte].decode("utf-8", "replace").split("\n")[0]
        what = f"missing {bad.type!r}" if bad.is_missing else f"near {text[:40]!r}"
        raise ScriptError(f"syntax error {what}: this is not valid MATLAB (check brackets, "
                          "quotes and '...' continuations)", file, line, col)
    return root


def _first_error(root):
    """The first error or missing node (a missing one inside the first error node if there is
    one); iterative, so that deeply nested source cannot exhaust Python's stack."""
    node = root
    while True:
        for child in node.children:
            if child.is_error or child.is_missing:
                missing = _first_missing(child)
                return missing if missing is not None else child
            if child.has_error:
                node = child
                break
        else:
            return node


def _first_missing(node):
    stack = [node]
    while stack:
        n = stack.pop()
        if n.is_missing:
            return n
        stack.extend(reversed(n.children))
    return None
