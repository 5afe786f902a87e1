"""Files written whole or not at all, and the temporaries of killed writers cleaned up.

A file is written to a temporary beside it, `.NAME.PID-RANDOM.partial`, fsync'ed and renamed
over NAME (then the folder is fsync'ed): a crash at any moment leaves the old file or the new
one, never a torn one. A writer killed mid-write leaves its temporary behind; the pid in its
name says whose it was, and the writer holds an exclusive lock on it while writing, so a later
writer can tell a dead writer's leftovers (removed) from a file that a live process is still
writing (kept): a temporary is removed only when its pid is gone AND its lock is free.

Several files of a folder replaced together (`replace_files`, a model folder's config.json and
weights): the new files are written into a private folder beside it, the folder's other
entries hard-linked in, and the two folders exchanged in one step (Linux `renameat2`); a kill
at any moment leaves the folder as it was or as it is now. Where folders cannot be exchanged,
the files are renamed in one by one, the file readers look for first (`key`) removed first and
put back last, so that a reader meets the old files, the new ones, or no `key` at all (and
refuses to load), never a mix.

Temporary names are random and created exclusively (`O_EXCL | O_NOFOLLOW`, `mkdir`): a
symbolic link planted at a name is never followed.

Reading untrusted files: `open_regular`/`read_regular` open only regular files (never a FIFO,
device or folder, which could block or never end) of at most a given size.
"""
from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import re
import secrets
import shutil
import stat
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

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
        if e.is_dir(follow_symlinks=False):
            continue                                 # a folder's (`replace_files`): not a file
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
    except BlockingIOError:
        return True
    except OSError:                                  # no locks here (NFS and a folder's fd):
        return not os.path.isdir(path)               # a folder's writer did not lock it either
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


# -- several files of a folder replaced together ------------------------------------------

AT_FDCWD, RENAME_EXCHANGE = -100, 2
_renameat2_cache: list = []


def _renameat2():
    """libc's `renameat2` (Linux, glibc 2.28 or later), or None."""
    if not _renameat2_cache:
        fn = None
        if sys.platform.startswith("linux"):
            try:
                fn = ctypes.CDLL(None, use_errno=True).renameat2
                fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                               ctypes.c_uint]
                fn.restype = ctypes.c_int
            except (OSError, AttributeError):
                fn = None
        _renameat2_cache.append(fn)
    return _renameat2_cache[0]


def exchange(a, b) -> None:
    """Swaps the entries `a` and `b` (two folders) in one step, or raises OSError (ENOSYS
    where the system has no such call, EINVAL where the file system does not offer it)."""
    fn = _renameat2()
    if fn is None:
        raise OSError(errno.ENOSYS, "folders cannot be exchanged on this system", str(a))
    if fn(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), str(a), None, str(b))


def new_file_mode() -> int:
    """The mode a new file gets here (0o666 less the umask), read without changing the umask
    where the system says it (Linux)."""
    return 0o666 & ~_umask()


def _umask() -> int:
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


def _fsync_file(path) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def _private_folder(where: Path, name: str) -> Iterator[Path]:
    """An empty folder `.NAME.PID-RANDOM.partial` in `where` that only we can enter, locked
    while the block runs (so that `remove_stale_folders` knows it is alive)."""
    for _ in range(16):
        tmp = where / f".{name}.{os.getpid()}-{secrets.token_hex(4)}{SUFFIX}"
        try:
            os.mkdir(tmp, 0o700)                     # exclusive: never an existing entry
            break
        except FileExistsError:
            continue
    else:
        raise FileExistsError(errno.EEXIST, "no free temporary name", str(where))
    fd = os.open(tmp, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0))
    try:
        _lock_folder(fd)
        yield tmp
    finally:
        os.close(fd)


def _lock_folder(fd: int) -> None:
    """Locks an open folder where the file system can (not NFS: there the pid alone says
    whether its writer lives)."""
    if fcntl is not None:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX)


def replace_files(folder, write: Callable[[Path], Iterable[str]], replaced: Iterable[str] = (),
                  *, key: str | None = None,
                  leftovers: Callable[[str], bool] = lambda name: False) -> None:
    """Puts the files that `write(tmp)` writes into the empty folder `tmp` (it returns their
    names) into `folder` all at once, in place of the entries of the same names and of the
    names `replaced`; every other entry of the folder stays. The folder is made if needed (a
    symbolic link to a folder: the folder it names is updated).

    Where folders can be exchanged (Linux; the folder ours, on the file system of its parent,
    the parent writable), `tmp` is made beside the folder, the folder's other entries are
    hard-linked into it and the two are exchanged in one step: a kill at any moment leaves
    the folder as it was or as it is now. Elsewhere the files are renamed in one by one, `key`
    (the file a reader looks for first) moved out first and put back last: a reader meets the
    old files, the new ones, or no `key` (and refuses to load), never some of each.

    What killed earlier calls left (their private folders, beside the folder and in it, and
    stale temporaries of `atomic_writer`) is removed first; `leftovers(name)` says which names
    in such a folder a killed writer may have left there (they are removed; other entries that
    the folder does not hold too are kept, with a warning).
    """
    folder = Path(os.path.realpath(folder))
    name = folder.name or "folder"
    exists = folder.is_dir()
    if exists:
        remove_stale_folders(folder, name, folder, leftovers)
        remove_stale(folder)
    else:
        folder.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_folders(folder.parent, name, folder if exists else None, leftovers)
    beside = not exists or _may_exchange(folder)
    job = _Replacement(folder, set(replaced), key)
    with _private_folder(folder.parent if beside else folder, name) as tmp:
        try:
            job.written = list(write(tmp))
            for n in job.written:
                _fsync_file(tmp / n)
            _fsync_dir(tmp)
            job.commit(tmp, beside)
        finally:
            if not job.exchanged:                    # tmp is still ours alone: new files, links
                shutil.rmtree(tmp, ignore_errors=True)


def _may_exchange(folder: Path) -> bool:
    if _renameat2() is None or folder.parent == folder:
        return False
    try:
        st, up = os.stat(folder), os.stat(folder.parent)
    except OSError:
        return False
    # another user's folder would become ours, a mount point cannot move
    return st.st_uid == os.geteuid() and st.st_dev == up.st_dev and \
        os.access(folder.parent, os.W_OK | os.X_OK)


class _Replacement:
    """One `replace_files` call: the folder, the names it replaces, how it commits."""

    def __init__(self, folder: Path, replaced: set[str], key: str | None):
        self.folder, self.replaced, self.key = folder, replaced, key
        self.written: list[str] = []
        self.exchanged = False

    def commit(self, tmp: Path, beside: bool) -> None:
        if not self.folder.exists():
            os.chmod(tmp, 0o777 & ~_umask())
            try:
                os.rename(tmp, self.folder)          # a new folder: one rename
                self.exchanged = True
                _fsync_dir(self.folder.parent)
                return
            except OSError as e:
                if e.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                    raise                            # else: made meanwhile, replace in it
        if beside and self._link_others(tmp) and self._exchange(tmp):
            return
        self._in_place(tmp)

    def _link_others(self, tmp: Path) -> bool:
        try:
            _link_tree(self.folder, tmp, set(self.written) | self.replaced)
            _copy_folder_stat(self.folder, tmp)
            os.utime(tmp)                            # its content changes now
            _fsync_dir(tmp)
        except OSError:
            return False                             # e.g. another file system inside
        return True

    def _exchange(self, tmp: Path) -> bool:
        try:
            fd: int | None = os.open(self.folder, os.O_RDONLY)   # the old folder: locked
        except OSError:                              # until it is gone, where it can be
            fd = None
        try:
            if fd is not None:
                _lock_folder(fd)
            cwd = _cwd_within(self.folder)
            try:
                exchange(tmp, self.folder)
            except OSError:
                return False                         # not on this file system: file by file
            self.exchanged = True                    # done: nothing below may fail the call
            _fsync_dir(self.folder.parent)
            if cwd is not None:                      # ours was inside: the same path, now new
                with contextlib.suppress(OSError):
                    os.chdir(cwd)
            ours = set(self.written) | self.replaced
            kept = _dismantle(tmp, self.folder, lambda n: n in ours, move=True)
            if kept:
                warnings.warn(f"'{tmp}' holds {_listed(kept)}, made in '{self.folder}' while "
                              "it was being replaced, whose names were taken again: look at "
                              "them, then remove that folder.", stacklevel=4)
            return True
        finally:
            if fd is not None:
                os.close(fd)

    def _in_place(self, tmp: Path) -> None:
        """Renames the new files in one by one, `key` out first and back last; an error
        puts the old files back. The names `replaced` go last: the new files already win."""
        order = [n for n in self.written if n != self.key] + \
            [n for n in self.written if n == self.key]
        kept: list[str] = []                         # old files, kept in tmp until done
        placed: list[str] = []
        try:
            for n in order:
                with contextlib.suppress(OSError):   # e.g. another user's file: no way back
                    os.link(self.folder / n, tmp / f".old.{n}", follow_symlinks=False)
                    kept.append(n)
            if self.key in self.written and os.path.lexists(self.folder / self.key):
                os.unlink(self.folder / self.key)    # readers now find no key: they refuse
                _fsync_dir(self.folder)
            for n in order:
                os.replace(tmp / n, self.folder / n)
                placed.append(n)
                _fsync_dir(self.folder)
        except BaseException:
            for n in reversed(order):
                with contextlib.suppress(OSError):
                    if n in kept:
                        os.replace(tmp / f".old.{n}", self.folder / n)
                    elif n in placed:
                        os.unlink(self.folder / n)
            raise
        for n in self.replaced:
            with contextlib.suppress(OSError):       # one left changes nothing: ours win
                os.unlink(self.folder / n)
        _fsync_dir(self.folder)


def _link_tree(src: Path, dst: Path, skip: set[str]) -> None:
    """Hard links of every entry of `src` (but `skip`) in `dst`, folders made again."""
    for e in os.scandir(src):
        if e.name in skip:
            continue
        if e.is_dir(follow_symlinks=False):
            if e.stat(follow_symlinks=False).st_uid != os.geteuid():
                raise PermissionError(errno.EPERM, "another user's folder", e.path)
            os.mkdir(dst / e.name, 0o700)
            _link_tree(Path(e.path), dst / e.name, set())
            _copy_folder_stat(Path(e.path), dst / e.name)
        else:
            os.link(e.path, dst / e.name, follow_symlinks=False)


def _copy_folder_stat(src: Path, dst: Path) -> None:
    st = os.stat(src, follow_symlinks=False)
    if os.stat(dst).st_gid != st.st_gid:
        os.chown(dst, -1, st.st_gid)                 # else the group would change: refused
    shutil.copystat(src, dst, follow_symlinks=False)  # mode, times, extended attributes


def _cwd_within(folder: Path) -> str | None:
    try:
        cwd = os.getcwd()
    except OSError:
        return None
    real, top = os.path.realpath(cwd), str(folder)
    return cwd if real == top or real.startswith(top.rstrip(os.sep) + os.sep) else None


def _same_entry(e: os.DirEntry, other: Path | None) -> bool:
    if other is None:
        return False
    try:
        a, b = e.stat(follow_symlinks=False), os.lstat(other)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _dismantle(old: Path, live: Path | None, ours: Callable[[str], bool], move: bool) -> list[str]:
    """Removes the folder `old` entry by entry: the top-level names `ours`, and every entry
    that `live` holds too at the same place (the same file, hard-linked); others are moved
    into `live` when `move` and their name is free there, else kept (and returned)."""
    kept: list[str] = []
    try:
        entries = list(os.scandir(old))
    except FileNotFoundError:
        return kept
    for e in entries:
        there = None if live is None else live / e.name
        if e.is_dir(follow_symlinks=False):
            inner = there if there is not None and there.is_dir() and not there.is_symlink() \
                else None
            kept += _dismantle(Path(e.path), inner, lambda n: False, move)
            continue
        if ours(e.name) or _same_entry(e, there) or (move and _link_into(e.path, there)):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(e.path)
        else:
            kept.append(e.path)
    with contextlib.suppress(OSError):
        os.rmdir(old)
    return kept


def _link_into(path: str, there: Path | None) -> bool:
    if there is None:
        return False
    try:
        os.link(path, there, follow_symlinks=False)  # never over an existing entry
    except OSError:
        return False
    return True


def _listed(paths: list[str]) -> str:
    names = [os.path.basename(p) for p in paths[:5]]
    return ", ".join(names) + (f" (and {len(paths) - 5} more)" if len(paths) > 5 else "")


def remove_stale_folders(where, name: str, live, leftovers: Callable[[str], bool]) -> int:
    """Removes the private folders (`.NAME.PID-RANDOM.partial`) that killed `replace_files`
    calls for the folder `name` left in `where`: the names `leftovers` says such a call may
    leave, and what `live` (the folder itself) holds too. Anything else is kept, with a
    warning. Returns how many folders went."""
    try:
        entries = list(os.scandir(where))
    except OSError:
        return 0
    n = 0
    for e in entries:
        m = _TEMP.match(e.name)
        if m is None or m.group("name") != name or not e.is_dir(follow_symlinks=False):
            continue
        if _alive(int(m.group("pid"))) or _locked(e.path):
            continue
        kept = _dismantle(Path(e.path), None if live is None else Path(live),
                          lambda n: n.startswith(".old.") or leftovers(n), move=False)
        if kept:
            warnings.warn(f"'{e.path}' is what a killed save left; it still holds "
                          f"{_listed(kept)}, which '{live}' does not hold: look at them, then "
                          "remove that folder.", stacklevel=3)
        else:
            n += 1
    return n


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
