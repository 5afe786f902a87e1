"""Files written whole or not at all, and the temporaries of killed writers cleaned up.

A file is written to a temporary beside it, `.NAME.PID-RANDOM.partial`, fsync'ed and renamed
over NAME (then the folder is fsync'ed): a crash at any moment leaves the old file or the new
one, never a torn one. A writer killed mid-write leaves its temporary behind; the pid in its
name says whose it was, and the writer holds an exclusive lock on it while writing, so a later
writer can tell a dead writer's leftovers (removed) from a file that a live process is still
writing (kept): a temporary is removed only when its pid is gone AND its lock is free.

Temporary names are random and created exclusively (`O_EXCL | O_NOFOLLOW`): a symbolic link
planted at a name is never followed. Several files of a folder replaced together are
`attnlab.core.folders`' job, on the same temporaries; reading untrusted files is
`attnlab.core.reading`'s.
"""
from __future__ import annotations

import contextlib
import os
import re
import secrets
from pathlib import Path

try:                                                # POSIX; elsewhere the pid check alone decides
    import fcntl
except ImportError:                                 # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

SUFFIX = ".partial"
_TEMP = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)-[0-9a-f]{8}\.partial$")
# a new file: never an existing name, never through a symbolic link planted at the name
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | \
    getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)


def temp_name(path: Path) -> Path:
    """A new temporary's name for `path`, beside it: `.NAME.PID-RANDOM.partial`."""
    return path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}{SUFFIX}")


@contextlib.contextmanager
def atomic_writer(path):
    """`with atomic_writer(path) as f: f.write(...)` — `path` appears only once the block has
    finished (fsync'ed); an exception or a kill leaves the old file as it was."""
    path = Path(path)
    remove_stale(path.parent, path.name)
    tmp = temp_name(path)
    fd = os.open(tmp, _CREATE, 0o666)               # the umask applies
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
    fsync_dir(path.parent)


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
        temp = temporary_of(e.name)
        if temp is None or (name is not None and temp[0] != name):
            continue
        if e.is_dir(follow_symlinks=False):
            continue                                 # a folder's (`replace_files`): not a file
        if not writer_gone(e.path, temp[1]):
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


def temporary_of(entry: str) -> tuple[str, int] | None:
    """(the final name, the writer's pid) of a temporary's name `entry`, or None when `entry`
    is not a temporary's name (a folder's, made by `attnlab.core.folders`, has the same form)."""
    m = _TEMP.match(entry)
    return None if m is None else (m.group("name"), int(m.group("pid")))


def writer_gone(path: str, pid: int) -> bool:
    """Whether the writer of the temporary `path`, process `pid`, is gone: no such live
    process, and nobody holds the temporary's lock."""
    return not (_alive(pid) or _locked(path))


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
    except BlockingIOError:
        return True
    except OSError:                                  # no locks here (NFS and a folder's fd):
        return not os.path.isdir(path)               # a folder's writer did not lock it either
    finally:
        os.close(fd)                                 # releases our probe lock
    return False


def fsync_dir(directory: Path) -> None:
    """Makes a folder's entries durable (a rename in it), where the system can."""
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


def new_file_mode() -> int:
    """The mode a new file gets here (0o666 less the umask), read without changing the umask
    where the system says it (Linux)."""
    return 0o666 & ~current_umask()


def current_umask() -> int:
    """The process's umask, read without changing it where the system says it (Linux)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)                           # elsewhere: read it by setting it back
    os.umask(mask)
    return mask


def write_new(path, data: bytes) -> None:
    """Writes `data` to a file `path` that must not exist yet (never through a symbolic link
    at that name), fsync'ed."""
    fd = os.open(path, _CREATE, 0o666)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def output_path(path, who: str, formats: tuple[str, ...] | None = None,
                example: str = "out") -> Path:
    """`path` as a Path once it is known to be writable as a file: its folder exists and, when
    `formats` is given, its extension (if it has one) is one of them. `who` names the call in
    the error (e.g. "plot(path)"); `example` is the file name suggested inside a folder."""
    from attnlab.core.errors import ArgumentError
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
