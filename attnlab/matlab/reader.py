"""Parsing MATLAB source with tree-sitter-matlab (the `attnlab[matlab]` extra).

Why tree-sitter-matlab and not MISS_HIT: both parse the seeds' code (layer arrays over several
lines, `'Name',value` and `Name=value`, `%{ %}`, `...`). tree-sitter-matlab is MIT-licensed like
attnlab (MISS_HIT is GPL-3), keeps going after a syntax error so the message can point at the
first bad token with its line and column, and is a compiled grammar maintained with the editors
that use it. This module only turns source text into a tree and syntax errors into ScriptError;
`interpreter.py` walks the tree.
"""
from __future__ import annotations

from ..errors import AttnlabError


class ScriptError(AttnlabError):
    """A MATLAB script that cannot be run: `FILE.m:LINE:COL: what, and the fix`."""

    def __init__(self, message: str, file: str = "<script>", line: int = 0, col: int = 0):
        self.file, self.line, self.col, self.reason = file, line, col, message
        super().__init__(f"{file}:{line}:{col}: {message}")


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


def _first_error(node):
    for child in node.children:
        if child.is_error or child.is_missing:
            deeper = _first_error(child)
            return deeper if deeper is not None and deeper.is_missing else child
        if child.has_error:
            return _first_error(child)
    return node if (node.is_error or node.is_missing) else None
