"""Base MATLAB's text and messages: sprintf/fprintf formats, disp, num2str, error, warning,
strcmp, strcat, string, char."""
from __future__ import annotations

import math
import re

import numpy as np

from .budget import check_chars
from .numeric import _num, _scalar
from .values import Categorical, MatlabError, String, Struct


def _format(fmt: str, args, ctx=None) -> str:
    """sprintf/fprintf: MATLAB's format (a C format; the format is reused while values remain).
    With the interpreter `ctx`, field widths and the text made are held to Limits.chars."""
    if not isinstance(fmt, str):
        raise MatlabError(f"expected a format text first, received {type(fmt).__name__}")
    values: list = []
    for a in args:
        if isinstance(a, np.ndarray):
            values.extend(_scalar(v) for v in a.ravel())
        elif isinstance(a, (list, tuple)):
            values.extend(a)
        else:
            values.append(a)
    fmt = (fmt.replace("\\n", "\n").replace("\\t", "\t").replace("\\\\", "\\")
           .replace("%%", "\x00"))
    specs = re.findall(r"%[-+ 0#]*\d*(?:\.\d+)?[diufeEgGsc]", fmt)
    if not specs:
        return fmt.replace("\x00", "%")
    for spec in specs:                          # %1000000000d: refused before it is made
        widths = [int(w) for w in re.findall(r"\d+", spec[1:-1])] or [0]
        if ctx is not None:
            check_chars(ctx, max(widths), f"the format {spec[:20]!r}")
        elif max(widths) > 10_000_000:
            raise MatlabError(f"the format {spec[:20]!r} asks for a field too wide")
    out, i, total = [], 0, 0
    while True:
        chunk = fmt
        for spec in specs:
            if i >= len(values):
                chunk = chunk[:chunk.index(spec)] if spec in chunk else chunk
                break
            v = values[i]
            kind = spec[-1]
            bare = re.sub(r"\.\d+", "", spec)[:-1]           # the flags and width only
            if isinstance(v, str) and kind not in "sc":
                if len(v) == 1:
                    v = ord(v)                               # sprintf('%d', 'a') is 97
                else:
                    kind = "s"
            if isinstance(v, (bool, np.bool_)):
                v = int(v)
            if not isinstance(v, (str, int, float, np.number)):
                raise MatlabError(f"the format {spec!r} takes a number or text, received "
                                  f"{type(v).__name__}")
            if kind in "diu":
                f = float(v)
                if not math.isfinite(f):                     # MATLAB writes Inf, -Inf, NaN
                    py, v = bare + "s", _fmt_value(f)
                else:
                    py = spec[:-1] + ("d" if f.is_integer() else "g")
                    v = int(f) if f.is_integer() else f
            elif kind in "feEgG":
                py, v = spec, float(v)
                if not math.isfinite(v):
                    py, v = bare + "s", _fmt_value(v)
            elif kind == "c":
                code = v if isinstance(v, str) else float(v)
                py, v = bare + "s", code if isinstance(code, str) else chr(int(code)) \
                    if code.is_integer() and 0 <= code < 0x110000 else _fmt_value(code)
            else:
                py, v = spec, v if isinstance(v, str) else _fmt_value(v)
            chunk = chunk.replace(spec, py % v, 1)
            i += 1
        out.append(chunk)
        total += len(chunk)
        if ctx is not None:
            check_chars(ctx, total, "the formatted text")
        if i >= len(values):
            break
    return "".join(out).replace("\x00", "%")


def _fmt_value(v) -> str:
    v = _scalar(v)
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if math.isnan(v) else "Inf" if v > 0 else "-Inf"
    return str(v) if not isinstance(v, float) else f"{v:g}"


def disp(ctx, x):
    ctx.print(x if isinstance(x, str) else _fmt_value(x) if isinstance(x, (int, float, np.ndarray))
              else repr(x))


def fprintf(ctx, fmt, *args):
    if not isinstance(fmt, str):
        raise MatlabError("fprintf: expected a format text first (writing to files is not "
                          "supported)")
    ctx.print(_format(fmt, args, ctx), end="")


def sprintf(ctx, fmt, *args):
    if not isinstance(fmt, str):
        raise MatlabError(f"sprintf: expected a format text first, received "
                          f"{type(fmt).__name__}")
    return _format(fmt, args, ctx)


def num2str(ctx, x, *args):
    """num2str(x), num2str(x, precision) (that many significant digits, as MATLAB:
    num2str(pi, 8) is '3.1415927') or num2str(x, format)."""
    if len(args) > 1:
        raise MatlabError(f"num2str: expected num2str(x), num2str(x, precision) or "
                          f"num2str(x, format), received {1 + len(args)} arguments")
    if isinstance(x, str):
        return x
    if not args:
        return _fmt_value(x)
    spec = args[0]
    if isinstance(spec, str):
        return _format(spec, [x], ctx)
    digits = _scalar(_num(spec))
    if not isinstance(digits, int) or isinstance(digits, bool) or digits < 1:
        raise MatlabError(f"num2str: expected a precision (a whole number ≥ 1) or a format, "
                          f"received {_fmt_value(digits) if isinstance(digits, (int, float)) else type(digits).__name__}")
    check_chars(ctx, digits, "num2str's precision")
    values = np.atleast_1d(_num(x)).ravel()
    check_chars(ctx, values.size * (digits + 8), "num2str's text")
    return "  ".join(_fmt_value(v) if not math.isfinite(float(v)) else f"{float(v):.{digits}g}"
                     for v in values)


def error(ctx, *args):
    """error(msg), error(id, fmt, values…), error(struct); an empty message does nothing, as
    in MATLAB (error('') and error([]) continue)."""
    if not args or len(args) == 1 and (isinstance(args[0], str) and not args[0] or
                                       isinstance(args[0], np.ndarray) and args[0].size == 0):
        return
    ident = ""
    if len(args) > 1 and isinstance(args[0], str) and ":" in args[0] and "%" not in args[0]:
        ident, args = args[0], args[1:]
    if isinstance(args[0], Struct):                    # error(struct('message', …))
        if not args[0].get("message", ""):
            return
        raise MatlabError(str(args[0].get("message", "")), str(args[0].get("identifier", "")))
    if len(args) > 1 and not isinstance(args[0], str):
        raise MatlabError(f"error: expected a message text first, received "
                          f"{type(args[0]).__name__}")
    raise MatlabError(_format(args[0], args[1:], ctx) if len(args) > 1 else
                      str(args[0]) if isinstance(args[0], str) else _fmt_value(args[0]), ident)


def warning(ctx, *args):
    if args and isinstance(args[0], str) and args[0].lower() in ("off", "on", "query"):
        return                                         # warning('off', id): state only
    if args and not isinstance(args[0], str):
        raise MatlabError(f"warning: expected a message text first, received "
                          f"{type(args[0]).__name__}")
    ctx.print("Warning: " + (_format(args[0], args[1:], ctx) if args else ""))


def strcmp(ctx, a, b):
    return isinstance(a, str) and isinstance(b, str) and a == b


def strcmpi(ctx, a, b):
    return isinstance(a, str) and isinstance(b, str) and a.lower() == b.lower()


def strcat(ctx, *args):
    for a in args:
        if not isinstance(a, str):
            raise MatlabError(f"strcat: expected texts, received {type(a).__name__} (make "
                              "numbers text with num2str)")
    check_chars(ctx, sum(len(a) for a in args), "strcat's text")
    return "".join(a.rstrip() if not isinstance(a, String) else a for a in args)


def string(ctx, x):
    if isinstance(x, Categorical):               # string(labels(i)): the category's name
        names = [String(str(v)) for v in x.values]
        return names[0] if len(names) == 1 else names
    if isinstance(x, np.ndarray) and x.size > 1:     # string(1:3): one string per number
        return [String(_fmt_value(v)) for v in x.ravel()]
    if not isinstance(x, (str, int, float, bool, np.ndarray, np.generic)):
        raise MatlabError(f"string: expected a text or number, received {type(x).__name__}")
    return String(x if isinstance(x, str) else _fmt_value(x))


def char(ctx, x):
    """char('text'), char("string"), char(65) (the character of a code, as MATLAB: char(27)
    is ESC, which attnlab prints escaped)."""
    if isinstance(x, str):
        return str(x)
    codes = np.atleast_1d(_num(x)).ravel()
    check_chars(ctx, codes.size, "char's text")
    out = []
    for c in codes:
        f = float(c)
        if not (math.isfinite(f) and f.is_integer() and 0 <= f < 0x110000):
            raise MatlabError(f"char: expected character codes (whole numbers from 0 to "
                              f"1114111), received {_fmt_value(f)}")
        out.append(chr(int(f)))
    return "".join(out)
