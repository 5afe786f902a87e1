"""What the commands share about files: which FILE is a Hugging Face folder, reading a network,
default and checked output files, `--import` modules and a MATLAB script's output folder."""
from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path


def hugging_face_folder(path: Path) -> bool:
    """A Hugging Face model folder: config.json in it (from_pretrained checks the rest)."""
    return path.is_dir() and (path / "config.json").is_file()


def beside(path: Path, suffix: str) -> Path:
    """The default output for `path`: a file's with `suffix` instead of its own, a folder's
    beside it (FOLDER.png)."""
    return path.with_name(path.name + suffix) if path.is_dir() else path.with_suffix(suffix)


def read_network(path: Path):
    """A saved network, or a Hugging Face model folder read with `al.from_pretrained`."""
    if hugging_face_folder(path):
        from attnlab.pretrained import from_pretrained
        return from_pretrained(path)
    from attnlab.io import load
    return load(path)


def folder_problem(folder: Path, option: str) -> str | None:
    """Why `folder` cannot be created or written to (its nearest existing ancestor decides)."""
    for p in (folder, *folder.parents):
        if not p.exists():
            if p.is_symlink():
                return f"{option}: '{p}' is a broken symbolic link"
            continue
        if not p.is_dir():
            return (f"{option}: cannot write into '{folder}': '{p}' is a file, not a folder. "
                    "Give a folder, e.g. --out demo-out")
        if not os.access(p, os.W_OK | os.X_OK):
            return f"{option}: cannot write into '{folder}': '{p}' is not writable"
        return None
    return None


def output_file(path: Path, who: str, formats: tuple[str, ...], example: str,
                 default_suffix: str | None = None) -> Path:
    """An output file once it is known to be writable: not a folder, not a device or other
    special file, in a folder that exists, with a known extension. `default_suffix` is
    added to a name without one (so the file written is the file reported)."""
    from attnlab.core.files import output_path
    from attnlab.core.errors import ArgumentError
    candidates = [path]
    if default_suffix and not path.suffix and path.name:
        candidates.append(path.with_name(path.name + default_suffix))
    for candidate in candidates:
        if candidate.is_symlink() and not candidate.exists():
            raise ArgumentError(f"{who}: '{candidate}' is a broken symbolic link (to "
                                f"'{os.readlink(candidate)}'); give another file name or "
                                "remove the link.")
        if candidate.is_dir():
            raise ArgumentError(f"{who}: '{candidate}' is a folder; give a file name inside "
                                f"it, e.g. '{candidate / example}'.")
        if candidate.exists() and not candidate.is_file():
            raise ArgumentError(f"{who}: '{candidate}' is not a regular file (a device, a pipe "
                                f"or a socket); give a file name such as '{example}'.")
        path = candidate
    out = output_path(path, who, formats, example=example)
    if out.exists() and not os.access(out, os.W_OK) or \
            not out.exists() and not os.access(out.parent, os.W_OK | os.X_OK):
        raise ArgumentError(f"{who}: cannot write '{out}': permission denied. Give a file in "
                            "a folder you can write to.")
    return out


def import_modules(names: list[str]) -> bool:
    """`--import MODULE`s (they register Module factories); False once the error is printed."""
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError as e:
            print(f"error: --import {e.name or name}: {e}", file=sys.stderr)
            return False
        except Exception as e:            # the module itself failed: its error, in one line
            print(f"error: --import {name}: importing it raised {type(e).__name__}: {e}",
                  file=sys.stderr)
            return False
    return True


def matlab_outputs(path: Path):
    """The script's folder as the one it may write to; analyze never trains, so a training
    path outside it is a note (what run_file would refuse) rather than an error."""
    from attnlab.matlab.confinement import script_outputs
    return script_outputs(path.parent, "run_file", lambda *a, **k: None, analyze=True)
