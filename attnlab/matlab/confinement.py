"""Where a running script may write: inside a script (`run_file`, `run_code`) MATLAB training
writes checkpoints and the training-progress picture only inside the script's output folder
(`script_outputs`), relative paths are read from that folder, and a path resolving outside it is
refused naming the option (a note when the script is only analysed)."""
from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from attnlab.core.errors import ArgumentError
from ._options import MatlabNote


@dataclass(frozen=True)
class ScriptRun:
    """Where a running script may write: `folder` (resolved: no symlink, no `..`), the reader
    entry point that ran it (`who`, for messages), its `out` (what `disp` prints with) and
    whether it is only analysed (then an outside path is a note, not an error)."""
    folder: Path
    who: str
    out: Callable[..., object]
    analyze: bool = False


_RUN: ContextVar[ScriptRun | None] = ContextVar("attnlab_matlab_script_run", default=None)


@contextlib.contextmanager
def script_outputs(folder: str | os.PathLike[str], who: str = "run_file",
                   out: Callable[..., object] = print, analyze: bool = False) -> Iterator[ScriptRun]:
    """While the block runs, MATLAB training (`trainnet`, `trainNetwork`) writes only inside
    `folder`: `CheckpointPath` and relative paths are read from it, anything resolving outside
    it (through `..` or a symlink) is refused naming the option, the path and the folder, the
    training-progress picture of `Plots="training-progress"` goes into it, and
    `ExecutionEnvironment="parallel"`/`"multi-gpu"` trains in this process (a note says so)
    instead of launching processes. `run_file` and `run_code` run scripts inside it."""
    if isinstance(folder, bytes):
        folder = os.fsdecode(folder)
    if not isinstance(folder, (str, os.PathLike)) or not str(folder):
        raise ArgumentError(f"{who} out_dir: expected a folder (str or pathlib.Path), received "
                            f"{type(folder).__name__} {repr(folder)[:60]}.")
    root = Path(folder).resolve()
    if root.exists() and not root.is_dir():
        raise ArgumentError(f"{who} out_dir: '{folder}' is a file, not a folder. Give the folder "
                            "the script may write into, e.g. out_dir='results'.")
    token = _RUN.set(ScriptRun(root, who, out, analyze))
    try:
        yield _RUN.get()  # type: ignore[misc]
    finally:
        _RUN.reset(token)


def _inside(run: ScriptRun, fn: str, option: str, value, base: Path | None = None) -> Path:
    """`value` (relative to `base`, default the script's folder) resolved, once it is known to
    lie inside the folder the script may write to."""
    p = Path(os.fsdecode(value) if isinstance(value, bytes) else str(value))
    full = (p if p.is_absolute() else (base or run.folder) / p).resolve()
    if full == run.folder or run.folder in full.parents:
        return full
    where = f" (it resolves to '{full}')" if str(full) != str(value) else ""
    message = (f"{fn}: {option} '{value}' is outside the folder this script may write to, "
               f"'{run.folder}'{where}: {run.who} writes only inside it. Give a path inside "
               f"it, e.g. {option}=\"checkpoints\", or choose the folder with "
               f"{run.who}(..., out_dir=FOLDER).")
    if run.analyze:
        warnings.warn(message.replace(f"{run.who} writes only inside it",
                                      f"{run.who} would refuse it"), MatlabNote, stacklevel=3)
        return full
    raise ArgumentError(message)
