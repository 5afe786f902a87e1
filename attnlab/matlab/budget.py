"""The script's size limits before a value is made: `Exhausted` and the checks that raise it."""
from __future__ import annotations


class Exhausted(Exception):
    """A value a statement would create is past one of the script's Limits (`limit` names
    it); the interpreter turns it into a located LimitError, which `try`/`catch` does not
    catch."""

    def __init__(self, message: str, limit: str, node=None):
        super().__init__(message)
        self.message, self.limit, self.node = message, limit, node


def check_elements(ctx, n, what: str) -> None:
    """Refuses, before anything is allocated, an array of `n` elements past Limits.elements."""
    most = ctx.limits.elements
    if n > most:
        from .reader import Limits
        raise Exhausted(f"{what} would have {_count(n)} elements, over the limit of {most:,} "
                        f"elements per array (Limits.elements). {Limits.hint('elements')}",
                        "elements")


def check_chars(ctx, n, what: str) -> None:
    """Refuses, before it is made, a text of `n` characters past Limits.chars."""
    most = ctx.limits.chars
    if n > most:
        from .reader import Limits
        raise Exhausted(f"{what} would have {_count(n)} characters, over the limit of {most:,} "
                        f"characters per text (Limits.chars). {Limits.hint('chars')}", "chars")


def _count(n) -> str:
    return f"{int(n):,}" if n < 1e30 else f"{float(n):.3g}"
