"""Base MATLAB functions on dates, as scripts use them for file names and messages:
`datetime` and `duration` values (`DateTime`, `Duration`), `datetime`, `datestr`, `now`,
`clock`, `seconds`/`minutes`/`hours`/`days`. Each takes the interpreter's context first, as the
other base functions do; data_builtins.py lists them with the rest."""
from __future__ import annotations

import datetime as _dt

import numpy as np

from .numeric import _num, _scalar
from .values import MatlabError


class DateTime:
    """A `datetime`: a moment and its display `Format` (MATLAB's letters: yyyy MM dd HH mm ss
    SSS MMM MMMM eee EEEE a). Text of it (`string(t)`, `char(t)`) follows the format; `t + d`
    adds a duration, `t1 - t2` is a duration."""

    def __init__(self, moment: _dt.datetime, fmt: str = "dd-MMM-yyyy HH:mm:ss"):
        self.moment, self.format = moment, fmt

    shape = property(lambda self: (1, 1))

    def text(self) -> str:
        return _cldr(self.moment, self.format)

    def __repr__(self):
        return self.text()

    def __add__(self, other):
        if isinstance(other, Duration):
            return DateTime(self.moment + _dt.timedelta(days=other.days), self.format)
        if isinstance(other, (int, float)) and not isinstance(other, bool):
            return DateTime(self.moment + _dt.timedelta(days=float(other)), self.format)
        return NotImplemented

    __radd__ = __add__

    def __sub__(self, other):
        if isinstance(other, DateTime):
            return Duration((self.moment - other.moment).total_seconds() / 86400)
        if isinstance(other, Duration):
            return DateTime(self.moment - _dt.timedelta(days=other.days), self.format)
        if isinstance(other, (int, float)) and not isinstance(other, bool):
            return DateTime(self.moment - _dt.timedelta(days=float(other)), self.format)
        return NotImplemented

    def _cmp(self, other, op):
        if not isinstance(other, DateTime):
            raise MatlabError("comparing a datetime with something that is not one")
        return op(self.moment, other.moment)

    def __lt__(self, other):
        return self._cmp(other, lambda a, b: a < b)

    def __gt__(self, other):
        return self._cmp(other, lambda a, b: a > b)

    def __le__(self, other):
        return self._cmp(other, lambda a, b: a <= b)

    def __ge__(self, other):
        return self._cmp(other, lambda a, b: a >= b)


class Duration:
    """A `duration` (kept in days): `hours(2)`, `t2 - t1`; `seconds(d)` reads it back."""

    def __init__(self, days: float):
        self.days = float(days)

    shape = property(lambda self: (1, 1))

    def __repr__(self):
        return f"{self.days * 24:g} hr"

    def __add__(self, other):
        if isinstance(other, Duration):
            return Duration(self.days + other.days)
        if isinstance(other, DateTime):
            return other + self
        return NotImplemented

    __radd__ = __add__

    def __sub__(self, other):
        if isinstance(other, Duration):
            return Duration(self.days - other.days)
        return NotImplemented

    def __mul__(self, k):
        if isinstance(k, (int, float)) and not isinstance(k, bool):
            return Duration(self.days * k)
        return NotImplemented

    __rmul__ = __mul__

    def __truediv__(self, k):
        if isinstance(k, Duration):
            return self.days / k.days
        if isinstance(k, (int, float)) and not isinstance(k, bool):
            return Duration(self.days / k)
        return NotImplemented

    def __lt__(self, other):
        return self.days < _days(other)

    def __gt__(self, other):
        return self.days > _days(other)


def _days(x) -> float:
    if isinstance(x, Duration):
        return x.days
    raise MatlabError("comparing a duration with something that is not one")


_CLDR = [("yyyy", "%Y"), ("MMMM", "%B"), ("MMM", "%b"), ("MM", "%m"), ("dd", "%d"),
         ("EEEE", "%A"), ("eeee", "%A"), ("EEE", "%a"), ("eee", "%a"), ("HH", "%H"),
         ("hh", "%I"), ("mm", "%M"), ("ss", "%S"), ("yy", "%y"), ("a", "%p")]


def _cldr(moment: _dt.datetime, fmt: str) -> str:
    """A datetime's Format (Unicode letters, as MATLAB's datetime takes them) applied."""
    out, i = [], 0
    while i < len(fmt):
        if fmt[i] == "'":                      # quoted literal text
            j = fmt.find("'", i + 1)
            j = len(fmt) if j < 0 else j
            out.append(fmt[i + 1:j])
            i = j + 1
            continue
        if fmt.startswith("SSS", i) or fmt.startswith("S", i) and fmt[i] == "S":
            n = len(fmt[i:]) - len(fmt[i:].lstrip("S"))
            out.append(f"{moment.microsecond:06d}"[:n].ljust(n, "0"))
            i += n
            continue
        for code, py in _CLDR:
            if fmt.startswith(code, i):
                out.append(moment.strftime(py))
                i += len(code)
                break
        else:
            if fmt[i] in "dMyHms":             # a single letter: no leading zero
                single = {"d": moment.day, "M": moment.month, "y": moment.year,
                          "H": moment.hour, "m": moment.minute, "s": moment.second}[fmt[i]]
                out.append(str(single))
            else:
                out.append(fmt[i])
            i += 1
    return "".join(out)


# datestr's letters (MATLAB's own, not datetime's): longest first
_DATESTR = [("yyyy", "%Y"), ("yy", "%y"), ("mmmm", "%B"), ("mmm", "%b"), ("mm", "%m"),
            ("dddd", "%A"), ("ddd", "%a"), ("dd", "%d"), ("HH", "%H"), ("MM", "%M"),
            ("SS", "%S"), ("PM", "%p"), ("AM", "%p")]
_DATESTR_NUMBERED = {0: "dd-mmm-yyyy HH:MM:SS", 1: "dd-mmm-yyyy", 2: "mm/dd/yy", 13: "HH:MM:SS",
                     23: "mm/dd/yyyy", 29: "yyyy-mm-dd", 30: "yyyymmddTHHMMSS", 31:
                     "yyyy-mm-dd HH:MM:SS"}


def _datestr_text(moment: _dt.datetime, fmt: str) -> str:
    out, i = [], 0
    while i < len(fmt):
        if fmt.startswith("FFF", i):
            out.append(f"{moment.microsecond // 1000:03d}")
            i += 3
            continue
        for code, py in _DATESTR:
            if fmt.startswith(code, i):
                out.append(moment.strftime(py))
                i += len(code)
                break
        else:
            out.append(fmt[i])
            i += 1
    return "".join(out)


_EPOCH = _dt.datetime(1, 1, 1)


def _from_datenum(n: float) -> _dt.datetime:
    """MATLAB's serial date number (days from year 0) → a datetime."""
    return _EPOCH + _dt.timedelta(days=float(n) - 367)


def _datenum(moment: _dt.datetime) -> float:
    return (moment - _EPOCH).total_seconds() / 86400 + 367


def now(ctx):
    return _datenum(_dt.datetime.now())


def clock(ctx):
    t = _dt.datetime.now()
    return np.array([t.year, t.month, t.day, t.hour, t.minute,
                     t.second + t.microsecond / 1e6], dtype=float)


def datestr(ctx, t=None, fmt=None):
    """`datestr(now)`, `datestr(now, 'yyyy-mm-dd_HH-MM-SS')`, `datestr(t, 30)` (a numbered
    format), `datestr(datetime(...))`."""
    if t is None:
        moment = _dt.datetime.now()
    elif isinstance(t, DateTime):
        moment = t.moment
    else:
        moment = _from_datenum(float(_scalar(_num(t))))
    if fmt is None:
        fmt = _DATESTR_NUMBERED[0 if moment.time() != _dt.time(0) else 1]
    elif not isinstance(fmt, str):
        code = int(_scalar(_num(fmt)))
        if code not in _DATESTR_NUMBERED:
            raise MatlabError(f"datestr: the numbered format {code} is not one attnlab knows; "
                              f"give the format as text, e.g. 'yyyy-mm-dd'")
        fmt = _DATESTR_NUMBERED[code]
    return _datestr_text(moment, str(fmt))


def datetime(ctx, *args):
    """`datetime('now')`, `datetime('today')`, `datetime(y, m, d[, h, mi, s])`,
    `datetime(..., 'Format', f)`."""
    args = list(args)
    fmt = None
    if len(args) >= 2 and isinstance(args[-2], str) and args[-2].lower() == "format":
        fmt = str(args[-1])
        args = args[:-2]
    if not args or len(args) == 1 and isinstance(args[0], str) and args[0].lower() == "now":
        moment = _dt.datetime.now()
    elif len(args) == 1 and isinstance(args[0], str) and args[0].lower() in ("today",
                                                                             "tomorrow",
                                                                             "yesterday"):
        day = _dt.datetime.combine(_dt.date.today(), _dt.time(0))
        moment = day + _dt.timedelta(days={"today": 0, "tomorrow": 1,
                                           "yesterday": -1}[args[0].lower()])
        fmt = fmt or "dd-MMM-yyyy"
    elif all(isinstance(a, (int, float)) and not isinstance(a, bool) for a in args) and \
            3 <= len(args) <= 6:
        parts = [float(a) for a in args] + [0.0] * (6 - len(args))
        y, mo, d, h, mi, sec = parts
        moment = _dt.datetime(int(y), int(mo), 1) + _dt.timedelta(
            days=d - 1, hours=h, minutes=mi, seconds=sec)
        if len(args) == 3:
            fmt = fmt or "dd-MMM-yyyy"
    else:
        raise MatlabError("datetime: attnlab reads datetime('now'), datetime('today') and "
                          "datetime(y, m, d, h, mi, s), with 'Format'; parse dates of text in "
                          "Python and give them as workspace variables")
    return DateTime(moment, fmt or "dd-MMM-yyyy HH:mm:ss")


def _duration(days_per_unit, name):
    def make(ctx, x):
        if isinstance(x, Duration):              # seconds(d): the duration in that unit
            return _scalar(x.days / days_per_unit)
        return Duration(float(_scalar(_num(x))) * days_per_unit)
    make.__name__ = name
    return make


def date_text(x) -> str | None:
    """The text of a datetime or duration (string(t), char(t)); None for other values."""
    if isinstance(x, DateTime):
        return x.text()
    if isinstance(x, Duration):
        return repr(x)
    return None

FUNCTIONS = {
    "now": now, "clock": clock, "datestr": datestr, "datetime": datetime,
    "seconds": _duration(1 / 86400, "seconds"), "minutes": _duration(1 / 1440, "minutes"),
    "hours": _duration(1 / 24, "hours"), "days": _duration(1.0, "days"),
}
