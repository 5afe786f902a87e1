"""Reading files that a user or a file names, as untrusted input: `open_regular` and
`read_regular` open only regular files (never a FIFO, device or folder, which could block or
never end) of at most a given size.
"""
from __future__ import annotations

import os
import stat
from collections.abc import Callable
from typing import BinaryIO

try:                                                # POSIX: the open does not block
    import fcntl
except ImportError:                                 # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def _kind(mode: int) -> str:
    return next((what for test, what in _KINDS if test(mode)), "not a regular file")


def open_regular(path, who: str, max_bytes: int | None = None, *, limit_hint: str = "",
                 error: Callable[[str], Exception] | None = None) -> BinaryIO:
    """`path` opened for reading in binary mode, once it is known to be a regular file (not a
    folder, FIFO, device or socket) of at most `max_bytes` bytes (None: any size). Nothing
    that could block is done first: the path is stat'ed, opened with O_NONBLOCK (a FIFO
    swapped in meanwhile cannot hang the open) and the open file is stat'ed again.

    Refusals raise `error(message)` (default ArgumentError) with messages starting with `who`,
    e.g. "load(path)"; `limit_hint` says how to raise `max_bytes`. FileNotFoundError and other
    OSErrors of the open itself propagate as they are."""
    from attnlab.core.errors import ArgumentError
    fail = error or ArgumentError
    p = os.fspath(path)
    st = os.stat(p)
    _check_regular(st, p, who, max_bytes, limit_hint, fail)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | \
        getattr(os, "O_BINARY", 0)
    fd = os.open(p, flags)
    try:
        _check_regular(os.fstat(fd), p, who, max_bytes, limit_hint, fail)
        if fcntl is not None and hasattr(os, "O_NONBLOCK"):        # plain blocking reads again
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path, who: str, max_bytes: int | None = None, *, limit_hint: str = "",
                 error: Callable[[str], Exception] | None = None) -> bytes:
    """The bytes of the regular file `path`, at most `max_bytes` of them (see `open_regular`;
    a file that grows past the limit while it is read is refused too)."""
    from attnlab.core.errors import ArgumentError
    with open_regular(path, who, max_bytes, limit_hint=limit_hint, error=error) as f:
        data = f.read() if max_bytes is None else f.read(max_bytes + 1)
    if max_bytes is not None and len(data) > max_bytes:
        raise (error or ArgumentError)(_too_large(os.fspath(path), who, len(data), max_bytes,
                                                  limit_hint, "at least "))
    return data


def _check_regular(st: os.stat_result, p: str, who: str, max_bytes: int | None, hint: str,
                   fail: Callable[[str], Exception]) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise fail(f"{who}: '{p}' is {_kind(st.st_mode)}, not a regular file; give the file "
                   "itself (nothing is read from anything else).")
    if max_bytes is not None and st.st_size > max_bytes:
        raise fail(_too_large(p, who, st.st_size, max_bytes, hint))


def _too_large(p: str, who: str, size: int, most: int, hint: str, what: str = "") -> str:
    return (f"{who}: '{p}' has {what}{size:,} bytes, over the limit of {most:,}; nothing was "
            f"parsed. {hint}".rstrip())
