"""Files written whole or not at all, and the temporaries of killed writers cleaned up.

A file is written to a temporary beside it, `.NAME.PID-RANDOM.partial`, fsync'ed and renamed
over NAME (then the folder is fsync'ed): a crash at any moment leaves the old file or the new
one, never a torn one. A writer killed mid-write leaves its temporary behind; the pid in its
name says whose it was, and the writer holds an exclusive lock on it while writing, so a later
writer can tell a dead writer's leftovers (removed) from a file that a live process is still
writing (kept): a temporary is removed only when its pid is gone AND its lock is free.

Reading untrusted files: `open_regular`/`read_regular` open only regular files (never a FIFO,
device or folder, which could block or never end) of at most a given size.
"""
from __future__ import annotations

import contextlib
import os
import re
import secrets
import stat
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

try:                                                # POSIX; elsewhere the pid check alone decides
    import fcntl
except ImportError:                                 # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

SUFFIX = ".partial"
_TEMP = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)-[0-9a-f]{8}\.partial$")


def temp_name(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}{SUFFIX}")


@contextlib.contextmanager
def atomic_writer(path):
    """`with atomic_writer(path) as f: f.write(...)` — `path` appears only once the block has
    finished (fsync'ed); an exception or a kill leaves the old file as it was."""
    path = Path(path)
    remove_stale(path.parent, path.name)
    tmp = temp_name(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)   # the umask applies
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)           # held until the file is closed (or we die)
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
            os.replace(tmp, path)                    # still locked: never seen as stale
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def atomic_write(path, data: bytes) -> None:
    """Writes `data` to `path` atomically (see `atomic_writer`)."""
    with atomic_writer(path) as f:
        f.write(data)


def stale_temporaries(directory, name: str | None = None) -> list[Path]:
    """The temporaries in `directory` (of final file `name`, or of any file) whose writer is
    gone: its pid is not a live process and nobody holds the file's lock."""
    directory = Path(directory)
    try:
        entries = list(os.scandir(directory))
    except OSError:                                  # no folder, or not readable: nothing to do
        return []
    found = []
    for e in entries:
        m = _TEMP.match(e.name)
        if m is None or (name is not None and m.group("name") != name):
            continue
        if _alive(int(m.group("pid"))) or _locked(e.path):
            continue
        found.append(Path(e.path))
    return found


def remove_stale(directory, name: str | None = None) -> int:
    """Removes `stale_temporaries(directory, name)`; returns how many were removed."""
    n = 0
    for p in stale_temporaries(directory, name):
        with contextlib.suppress(FileNotFoundError, PermissionError):
            p.unlink()
            n += 1
    return n


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    if pid == os.getpid():
        return True                                  # maybe another thread of ours is writing it
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):     # no such process (or no such pid at all)
        return False
    except OSError:                                  # PermissionError: exists, another user's
        return True
    return True


def _locked(path: str) -> bool:
    """True when some process holds the writer's lock on `path` (its pid may be another pid
    namespace's, e.g. a container sharing the folder)."""
    if fcntl is None:
        return False
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return True                                  # vanished or unreadable: leave it alone
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)                                 # releases our probe lock
    return False


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:                                  # e.g. Windows: directories cannot be opened
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def output_path(path, who: str, formats: tuple[str, ...] | None = None,
                example: str = "out") -> Path:
    """`path` as a Path once it is known to be writable as a file: its folder exists and, when
    `formats` is given, its extension (if it has one) is one of them. `who` names the call in
    the error (e.g. "plot(path)"); `example` is the file name suggested inside a folder."""
    from .errors import ArgumentError
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, (str, os.PathLike)) or not str(path):
        raise ArgumentError(f"{who}: path must be a file name (str or pathlib.Path), received "
                            f"{type(path).__name__} {repr(path)[:80]}.")
    p = Path(path)
    if p.is_dir():
        raise ArgumentError(f"{who}: '{p}' is a folder; give a file name inside it, e.g. "
                            f"'{p / example}'.")
    if not p.parent.is_dir():
        what = "is a file, not a folder" if p.parent.exists() else "does not exist"
        raise ArgumentError(f"{who}: cannot write '{p}': the folder '{p.parent}' {what}. "
                            "Create it first (pathlib.Path(folder).mkdir(parents=True)).")
    if formats is not None and p.suffix and p.suffix.lower().lstrip(".") not in formats:
        raise ArgumentError(f"{who}: cannot write '{p}': expected a file name ending in "
                            + ", ".join("." + f for f in formats)
                            + f", received {p.suffix!r}.")
    return p


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
    from .errors import ArgumentError
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
    from .errors import ArgumentError
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
