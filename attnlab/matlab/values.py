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

    def __init__(self, line: int, why: str, var: str | None = None):
        self.line, self.why, self.var = line, why, var

    def __repr__(self):
        return f"<not computed: line {self.line} was skipped ({self.why})>"


class MatlabError(Exception):
    """An error a MATLAB `try`/`catch` can catch: from `error(...)` or from a toolbox call.
    `catch err` binds a Struct with `message` and `identifier`."""

    def __init__(self, message: str, identifier: str = "", node=None):
        super().__init__(message)
        self.message, self.identifier, self.node = message, identifier, node


class NeedsData(Exception):
    """Raised inside a statement that `attnlab analyze` skips: it needs data or trains.
    `var` names the variable whose value was missing (what `--set` can give), `node` is where
    an undefined one was used."""

    def __init__(self, why: str, var: str | None = None, node=None):
        super().__init__(why)
        self.why, self.var, self.node = why, var, node


class Categorical:
    """A MATLAB categorical array: `values` (text labels, a 1-D numpy object array; "" is
    <undefined>) and `categories`, the classes in order (sorted unless given)."""

    def __init__(self, values, categories):
        import numpy as np
        self.values = np.asarray(values, dtype=object).reshape(-1)
        self.categories = [str(c) for c in categories]

    def __len__(self):
        return len(self.values)

    @property
    def shape(self):
        return (len(self.values), 1)

    def codes(self):
        """0-based class indices (−1 for <undefined>)."""
        import numpy as np
        index = {c: i for i, c in enumerate(self.categories)}
        return np.array([index.get(str(v), -1) for v in self.values], dtype=np.int64)

    def __repr__(self):
        shown = " ".join(str(v) for v in self.values[:8]) + (" …" if len(self.values) > 8 else "")
        return f"categorical([{shown}], categories {self.categories})"


class Lambda:
    """`@(x) expr`: a closure over the workspace it was made in."""

    def __init__(self, params, body, scope, interp):
        self.params, self.body, self.scope, self.interp = params, body, scope, interp

    def __call__(self, *args):
        scope = dict(self.scope)
        scope.update(zip(self.params, args))
        return self.interp.eval_in(self.body, scope)


class Handle:
    """An object the reader does not model (a figure, axes, a tiled layout): setting its
    properties and calling its methods change nothing a network depends on, so they are
    no-ops, and reading a property gives another handle."""

    def __init__(self, kind: str):
        self.kind = kind

    def __repr__(self):
        return f"<{self.kind}>"
