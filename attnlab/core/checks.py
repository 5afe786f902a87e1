"""Argument checks shared by every layer constructor (and by `al.attention`, the combinators).

Each check returns the value in its canonical form (a plain int, float, bool or tuple, so that
`config()` and saving see ordinary Python values) or raises `ArgumentError` in one wording:

    Conv2d 'conv' argument 'kernel': expected a positive int or a pair of them, received 0 (int).
    Use e.g. kernel=3.

`owner` is the layer being made (its type and name are read) or a plain prefix string such as
"attention" or "Select". Checks run once, when the layer is made, never on a hot path.
"""
from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Literal, overload

from attnlab.core.errors import ArgumentError, SizeError, close_matches

# A layer with more ports than this is a typo (10**9 inputs), not a network: refuse it before
# a tuple of a billion port names is made.
MAX_PORTS = 1024


def prefix(owner) -> str:
    if isinstance(owner, str):
        return owner
    name = getattr(owner, "name", None)
    kind = type(owner).__name__
    return f"{kind} '{name}'" if name else kind


def shown(value) -> str:
    """The received value as the user wrote it, with its type when the repr hides it."""
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    if value is None:
        return text
    kind = type(value).__name__
    return text if kind in ("int", "float") else f"{text} ({kind})"


def fail(owner, arg: str, expected: str, value, fix: str = "") -> ArgumentError:
    """The ArgumentError for `arg`; carries `.argument` and `.value` for programs."""
    msg = f"{prefix(owner)} argument '{arg}': expected {expected}, received {shown(value)}."
    err = ArgumentError(f"{msg} {fix}".rstrip())
    err.layer = getattr(owner, "name", None) if not isinstance(owner, str) else None
    err.argument, err.value = arg, value
    return err


def _is_int(value) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool)


def _is_real(value) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool)


@overload
def integer(owner, arg: str, value, least: int = 1, most: int | None = None,
            none_ok: Literal[False] = False, example: int | None = None) -> int: ...
@overload
def integer(owner, arg: str, value, least: int = 1, most: int | None = None, *,
            none_ok: bool, example: int | None = None) -> int | None: ...
def integer(owner, arg: str, value, least: int = 1, most: int | None = None,
            none_ok: bool = False, example: int | None = None) -> int | None:
    """An int ≥ `least` (and ≤ `most`); None only where it is the documented default."""
    if value is None and none_ok:
        return None
    if _is_int(value) and value >= least and (most is None or value <= most):
        return int(value)
    if least == 1:
        what = "a positive int (1, 2, 3, …)"
    elif least == 0:
        what = "an int ≥ 0"
    else:
        what = f"an int ≥ {least}"
    if most is not None:
        what += f" and ≤ {most}"
    if none_ok:
        what += " or None (the default)"
    hint = ""
    if isinstance(value, float) and value.is_integer() and value >= least:
        hint = f"Use {arg}={int(value)} (an int, not a float)."
    elif example is not None:
        hint = f"Use e.g. {arg}={example}."
    raise fail(owner, arg, what, value, hint)


def int_pair(owner, arg: str, value, least: int = 1, example: int | None = None) -> tuple[int, int]:
    """An int (used for both dimensions) or a pair of ints, each ≥ `least`."""
    what = ("a positive int or a pair of them, e.g. 3 or (3, 5)" if least == 1
            else f"an int ≥ {least} or a pair of them")
    fix = f"Use e.g. {arg}={example}." if example is not None else ""
    if _is_int(value):
        if value >= least:
            return (int(value), int(value))
        raise fail(owner, arg, what, value, fix)
    if isinstance(value, (tuple, list)) and len(value) == 2 and all(
            _is_int(v) and v >= least for v in value):
        return (int(value[0]), int(value[1]))
    raise fail(owner, arg, what, value, fix)


def real(owner, arg: str, value, low: float | None = None, high: float | None = None,
         low_open: bool = False, high_open: bool = False, what: str | None = None,
         fix: str = "") -> float:
    """A finite real number in the interval given by `low`/`high` (open ends as asked)."""
    ok = _is_real(value) and math.isfinite(value)
    if ok and low is not None:
        ok = value > low if low_open else value >= low
    if ok and high is not None:
        ok = value < high if high_open else value <= high
    if ok:
        return float(value)
    if what is None:
        if low is None and high is None:
            what = "a finite number"
        else:
            lo = "(" if low_open else "["
            hi = ")" if high_open else "]"
            what = f"a number in {lo}{low if low is not None else '-inf'}, " \
                   f"{high if high is not None else 'inf'}{hi}"
    raise fail(owner, arg, what, value, fix)


def probability(owner, arg: str, value) -> float:
    """A drop probability: in [0, 1)."""
    return real(owner, arg, value, 0, 1, high_open=True,
                what="a probability in [0, 1)", fix=f"Use e.g. {arg}=0.1, or 0 for none.")


def positive(owner, arg: str, value, example: str = "1e-5") -> float:
    """A finite number > 0 (eps, scale)."""
    return real(owner, arg, value, 0, None, low_open=True, what="a finite number > 0",
                fix=f"Use e.g. {arg}={example}.")


def flag(owner, arg: str, value) -> bool:
    """True or False (a numpy bool too); 'no', 0 and None are refused, not read as truth."""
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return bool(value)
    raise fail(owner, arg, "True or False", value, f"Use {arg}=True or {arg}=False.")


def choice(owner, arg: str, value, choices: tuple, extra: str = ""):
    """One of `choices` (strings or None); lists them, with a close match for a typo.
    `extra` names further allowed forms that the caller checks itself (e.g. "an int ≥ 0")."""
    # compare only strings and None: `tensor in choices` would ask a tensor for its truth
    if (value is None and None in choices) or (isinstance(value, str) and value in choices):
        return value
    listed = " or ".join("None" if c is None else repr(c) for c in choices)
    if extra:
        listed = ", ".join("None" if c is None else repr(c) for c in choices) + f" or {extra}"
    hint = close_matches(value, [c for c in choices if isinstance(c, str)]) \
        if isinstance(value, str) else ""
    raise fail(owner, arg, listed, value, hint.strip())


def scale(owner, value, arg: str = "scale"):
    """"auto" (1/sqrt(head channels)) or any finite number: negative turns the softmax towards
    the least similar keys, 0 gives uniform attention over the allowed keys (as PyTorch's
    `scale=`). NaN, ±inf, bools and non-numbers are refused."""
    if isinstance(value, str) and value == "auto":
        return "auto"
    if _is_real(value) and math.isfinite(value):
        return float(value)
    hint = close_matches(value, ["auto"]) if isinstance(value, str) else ""
    raise fail(owner, arg, "\"auto\" (1/sqrt(channels per head)) or a finite number", value,
               (hint.strip() + " " if hint else "") + f"Use {arg}=\"auto\" or e.g. {arg}=0.125.")


def product(sizes) -> int | None:
    """The product of sizes, None when one is unknown (None)."""
    out = 1
    for s in sizes:
        if s is None:
            return None
        out *= s
    return out


def known(layer, port: str, size: int | None) -> int:
    """A size the module needs when it is built. The analysis builds modules only once the
    sizes arriving at the layer are known, so None here means a spec that lost its size."""
    if size is None:
        raise layer.error(SizeError, port, "the size is unknown when the layer's module is built. "
                          "Give the input layers their sizes, or call net.initialize(example_inputs).")
    return size


# More numbers than any device holds (4 TiB of float32): a size typo such as 10**9, found by
# the analysis before torch is asked for the storage.
MAX_LEARNABLES = 2 ** 40


def learnables_fit(layer, port: str, fix: str, **shapes) -> None:
    """SizeError from the layer's size rule when one of its learnables could never be made."""
    for what, shape in shapes.items():
        if None in shape:
            continue
        n = math.prod(shape)
        if n > MAX_LEARNABLES:
            size = "×".join(map(str, shape))
            raise layer.error(SizeError, port, f"expected learnables that fit in memory, received "
                              f"a {what} of {size} = {n:.3g} numbers (more than {MAX_LEARNABLES:.3g}"
                              f"). {fix}")
