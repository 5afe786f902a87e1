"""attnlab's exceptions.

Every message names the layer and port where it can, says what was expected and what was
received, and ends with a fix.
"""
from __future__ import annotations

import difflib
from typing import Iterable


class AttnlabError(Exception):
    """Base class of every error attnlab raises for a mistake in a network or its data.

    Where the mistake is known, the error carries it as attributes as well as in its message:
    `layer` and `port` (a layer's error), `argument` and `value` (an `ArgumentError`).
    """

    layer: str | None
    port: str | None
    argument: str
    value: object


class NetworkError(AttnlabError):
    """The graph is wrong: cycles, unconnected or unknown ports, duplicate names."""

    def __init__(self, message: str, issues: Iterable = ()):  # issues: analysis.Issue
        super().__init__(message)
        self.issues = list(issues)


class SizeError(AttnlabError):
    """An activation has the wrong size for the port it reaches."""


class FormatError(AttnlabError):
    """An activation has the wrong kind of dimensions (e.g. an image where a sequence belongs)."""


class DataError(AttnlabError):
    """Inputs or targets do not fit the network: counts, sizes, NaN, label values."""


class TrainingError(AttnlabError):
    """Training diverged: the message names the iteration and the loss."""

    iteration: int
    epoch: int
    loss: float | None


def where(layer: str | None, port: str | None = None) -> str:
    """The uniform prefix `layer 'x' port 'y': `."""
    if layer is None:
        return ""
    return f"layer '{layer}' port '{port}': " if port else f"layer '{layer}': "


def close_matches(name: str, candidates: Iterable[str]) -> str:
    """A ' Did you mean ...?' suffix, or '' when nothing is close."""
    matches = difflib.get_close_matches(name, list(candidates), n=3, cutoff=0.5)
    if not matches:
        return ""
    return " Did you mean " + " or ".join(f"'{m}'" for m in matches) + "?"


class ArgumentError(AttnlabError, ValueError):
    """A layer or function argument has a value it cannot take (also a ValueError)."""


class SignatureError(AttnlabError, TypeError):
    """A call that does not fit the signature: an unknown keyword argument, a missing or an
    extra one (also a TypeError, as Python's own error for such a call is)."""
