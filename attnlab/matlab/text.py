"""Base MATLAB's text and messages: sprintf/fprintf formats, disp, num2str, error, warning,
strcmp, strcat, string, char."""
from __future__ import annotations

import math
import re

import numpy as np

from .budget import check_chars
from .numeric import _num, _scalar
from .values import Categorical, MatlabError, String, Struct


_SPEC = re.compile(r"%(?:(\d+)\$)?([-+ 0#]*)(\*|\d+)?(?:\.(\*|\d+))?[lhbt]?"
                   r"([diuoxXfFeEgGcs])")
_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", "a": "\a", "b": "\b", "f": "\f", "r": "\r",
            "v": "\v", "'": "'", '"': '"'}


def _escapes(text: str) -> str:
    """The escape sequences of a format: \\n \\t \\\\ \\a \\b \\f \\r \\v, \\xHH, \\NNN
    (octal); `%%` is kept for the format's own reading."""
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 >= len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            i += 2
        elif nxt == "x":
            m = re.match(r"[0-9a-fA-F]+", text[i + 2:])
            if m:
                out.append(chr(int(m.group(0), 16)))
                i += 2 + len(m.group(0))
            else:
                out.append("\\x")
                i += 2
        elif nxt in "01234567":
            m = re.match(r"[0-7]{1,3}", text[i + 1:])
            out.append(chr(int(m.group(0), 8)))           # type: ignore[union-attr]
            i += 1 + len(m.group(0))                      # type: ignore[union-attr]
        else:
            out.append(nxt)                               # an unknown escape: the character
            i += 2
    return "".join(out)


class _Chars:
    """A character vector among sprintf's data: %s takes it whole, a numeric conversion or
    %c one character at a time (its codes, for %d)."""

    def __init__(self, text: str):
        self.text = text


def _flatten(args) -> list:
    values: list = []
    for a in args:
        if isinstance(a, (Struct,)) or isinstance(a, list) and not all(
                isinstance(v, str) for v in a):
            raise MatlabError("Only numeric, logical, text and string data can be formatted: "
                              f"received {'a struct' if isinstance(a, Struct) else 'a cell array'}"
                              ". Format its contents (c{i}, s.field) instead")
        if isinstance(a, np.ndarray):
            flat = a.ravel(order="F")
            values.extend(int(v) if isinstance(v, (bool, np.bool_)) else _scalar(v)
                          for v in flat)
        elif isinstance(a, list):
            values.extend(str(v) for v in a)             # a string array: one text each
        elif isinstance(a, String):
            values.append(str(a))
        elif isinstance(a, str):
            if a:
                values.append(_Chars(a))
        elif isinstance(a, (bool, np.bool_)):
            values.append(int(a))
        elif hasattr(a, "detach"):
            values.extend(_scalar(v) for v in a.detach().cpu().numpy().ravel(order="F"))
        elif isinstance(a, Categorical):
            values.extend(str(v) for v in a.values)
        else:
            values.append(a)
    return values


class _Data:
    """The values a format consumes, in order (character vectors split as each conversion
    needs them)."""

    def __init__(self, values):
        self.values, self.i, self.taken = values, 0, 0

    def left(self) -> bool:
        return self.i < len(self.values)

    def take(self, kind: str):
        self.taken += 1
        v = self.values[self.i]
        if isinstance(v, _Chars):
            if kind == "s":
                self.i += 1
                return v.text
            head, rest = v.text[0], v.text[1:]       # %c, %d … of a char: one at a time
            if rest:
                self.values[self.i] = _Chars(rest)
            else:
                self.i += 1
            return head if kind == "c" else ord(head)
        self.i += 1
        return v


def _number(v):
    if isinstance(v, str):
        raise MatlabError(f"cannot format the text {v!r} as a number")
    if not isinstance(v, (int, float, np.number)):
        raise MatlabError(f"the format takes a number or text, received {type(v).__name__}")
    return v


def _one(flags, width, precision, kind, v) -> str:
    """One conversion of one value, as MATLAB formats it."""
    w = "" if width is None else str(width)
    p = "" if precision is None else f".{precision}"
    if kind == "s":
        if isinstance(v, str):
            return f"%{flags}{w}{p}s" % v
        f = float(_number(v))
        if f.is_integer() and 0 <= f < 0x110000:        # %s of a character code
            return f"%{flags}{w}s" % chr(int(f))
        kind = "e"                                       # MATLAB's own choice for a number
        return f"%{flags}{w}{p}e" % f
    if kind == "c":
        if isinstance(v, str):
            return f"%{flags}{w}s" % v
        f = float(_number(v))
        if f.is_integer() and 0 <= f < 0x110000:
            return f"%{flags}{w}s" % chr(int(f))
        return f"%{flags}{w}{p}e" % f
    if isinstance(v, str):                              # a string for a numeric conversion
        return f"%{flags}{w}s" % v
    f = float(_number(v))
    if not math.isfinite(f):
        return f"%{flags.replace('0', '')}{w}s" % _fmt_value(f)
    if kind in "diu":
        if f.is_integer():
            return f"%{flags}{w}{p}d" % int(f)
        return f"%{flags}{w}{p}e" % f                    # MATLAB: %e for a fraction
    if kind in "oxX":
        if f.is_integer() and f >= 0:
            return f"%{flags}{w}{p}{kind}" % int(f)
        return f"%{flags}{w}{p}e" % f
    return f"%{flags}{w}{p}{kind}" % f


def _format(fmt: str, args, ctx=None) -> str:
    """sprintf/fprintf: MATLAB's format (a C format; the format is reused while values remain;
    a pass stops at the first conversion left without data; with no data at all, the text up
    to the first conversion). Numbers that do not fit %d/%x are written with %e, character
    vectors feed %s whole and numeric conversions by character, as MATLAB does. With the
    interpreter `ctx`, field widths and the text made are held to Limits.chars."""
    if not isinstance(fmt, str):
        raise MatlabError(f"expected a format text first, received {type(fmt).__name__}")
    text = _escapes(str(fmt)).replace("%%", "\x00")
    pieces: list = []
    last = 0
    for m in _SPEC.finditer(text):
        pieces.append(text[last:m.start()])
        pieces.append(m)
        last = m.end()
    tail = text[last:]
    specs = [p for p in pieces if not isinstance(p, str)]
    for m in specs:                              # %1000000000d: refused before it is made
        widths = [int(g) for g in (m.group(3), m.group(4)) if g and g != "*"] or [0]
        if ctx is not None:
            check_chars(ctx, max(widths), f"the format {m.group(0)[:20]!r}")
        elif max(widths) > 10_000_000:
            raise MatlabError(f"the format {m.group(0)[:20]!r} asks for a field too wide")
    data = _Data(_flatten(args))
    if not specs:
        return (text).replace("\x00", "%")
    out, total = [], 0
    while True:
        chunk: list[str] = []
        start = data.taken
        stopped = False
        for piece in pieces:
            if isinstance(piece, str):
                chunk.append(piece)
                continue
            flags, width, precision, kind = piece.group(2), piece.group(3), piece.group(4), \
                piece.group(5)
            if width == "*":
                width = int(_number(data.take("d"))) if data.left() else None
            if precision == "*":
                precision = int(_number(data.take("d"))) if data.left() else None
            if not data.left():
                stopped = True
                break
            chunk.append(_one(flags, width, precision, kind, data.take(kind)))
        if not stopped:
            chunk.append(tail)
        piece_text = "".join(chunk)
        out.append(piece_text)
        total += len(piece_text)
        if ctx is not None:
            check_chars(ctx, total, "the formatted text")
        if stopped or not data.left() or data.taken == start:
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
    """fprintf(format, …), fprintf(1, format, …) (the screen; 2, the error stream, prints
    too); a file identifier from fopen is a file, which the reader never writes."""
    if not isinstance(fmt, str) and isinstance(fmt, (int, float)) and not isinstance(fmt, bool) \
            and fmt in (1, 2) and args and isinstance(args[0], str):
        fmt, args = args[0], args[1:]
    if not isinstance(fmt, str):
        raise MatlabError("fprintf: expected a format text first, or the screen's identifier "
                          "1 (writing to files is not supported)")
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
    from .date_builtins import date_text
    if date_text(x) is not None:                 # string(datetime('now')): its Format
        return String(date_text(x))
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
    from .date_builtins import date_text
    if date_text(x) is not None:
        return date_text(x)
    if isinstance(x, Categorical):
        labels = [str(v) for v in x.values]
        return labels[0] if len(labels) == 1 else labels
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
