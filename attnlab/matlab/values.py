"""The values a MATLAB script computes with, in Python.

Numbers are Python ints/floats (a MATLAB double that holds an integer stays an int so layer sizes
read naturally), vectors and matrices numpy arrays (row vectors 1-D), '…' text is `str`, "…" text
`String` (so ["a" "b"] is a string array and ['a' 'b'] is 'ab'), cell arrays `Cell`, structs
`Struct`, layer arrays Python lists of layers.
"""
from __future__ import annotations


class String(str):
    """A MATLAB string ("…"), as opposed to a character vector ('…')."""


class Cell(list):
    """A MATLAB cell array {…}."""


class Struct(dict):
    """A MATLAB struct: fields by name, in the order they were set."""

    def __repr__(self):
        return "struct(" + ", ".join(f"{k}={v!r}" for k, v in self.items()) + ")"


class Missing:
    """The value of a variable whose statement `attnlab analyze` skipped (it needs data)."""

    def __init__(self, line: int, why: str):
        self.line, self.why = line, why

    def __repr__(self):
        return f"<not computed: line {self.line} was skipped ({self.why})>"


class MatlabError(Exception):
    """An error a MATLAB `try`/`catch` can catch: from `error(...)` or from a toolbox call.
    `catch err` binds a Struct with `message` and `identifier`."""

    def __init__(self, message: str, identifier: str = "", node=None):
        super().__init__(message)
        self.message, self.identifier, self.node = message, identifier, node


class NeedsData(Exception):
    """Raised inside a statement that `attnlab analyze` skips: it needs data or trains."""

    def __init__(self, why: str):
        super().__init__(why)
        self.why = why
