"""Several files of a folder replaced together, or not at all (`replace_files`: a model
folder's config.json and weights).

The new files are written into a private folder beside the folder, the folder's other entries
hard-linked in, and the two folders exchanged in one step (Linux `renameat2`); a kill at any
moment leaves the folder as it was or as it is now. Where folders cannot be exchanged, the
files are renamed in one by one, the file readers look for first (`key`) removed first and put
back last, so that a reader meets the old files, the new ones, or no `key` at all (and refuses
to load), never a mix.

The private folders are temporaries as `attnlab.core.files` names them, made exclusively
(`mkdir`) and locked while in use, so that what a killed call left is told from a live one's.
"""
from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import shutil
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from attnlab.core.files import (current_umask, fsync_dir, remove_stale, temp_name, temporary_of,
                                writer_gone)

try:                                                # POSIX; elsewhere folders are not locked
    import fcntl
except ImportError:                                 # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

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
        tmp = temp_name(where / name)
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
            fsync_dir(tmp)
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
            os.chmod(tmp, 0o777 & ~current_umask())
            try:
                os.rename(tmp, self.folder)          # a new folder: one rename
                self.exchanged = True
                fsync_dir(self.folder.parent)
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
            fsync_dir(tmp)
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
            fsync_dir(self.folder.parent)
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
                fsync_dir(self.folder)
            for n in order:
                os.replace(tmp / n, self.folder / n)
                placed.append(n)
                fsync_dir(self.folder)
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
        fsync_dir(self.folder)


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
        temp = temporary_of(e.name)
        if temp is None or temp[0] != name or not e.is_dir(follow_symlinks=False):
            continue
        if not writer_gone(e.path, temp[1]):
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
