"""The model folder `save_pretrained` writes: config.json and model.safetensors change together
(`core.folders.replace_files`), the folder's other files (tokenizer, README) stay, and the index
and shards of an earlier sharded save go with the old weights, so that nothing from before can
win over the new file. What killed writers left behind is cleared first.
"""
from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

import torch

from attnlab.core import files as _files, folders as _folders, reading as _reading
from attnlab.core.errors import ArgumentError, AttnlabError
from .checkpoint import INDEX, SAFETENSORS
from .config import CONFIG_FILE, MAX_CONFIG_BYTES

# names a killed save may leave in its private folder or in the model folder
_SHARD = re.compile(r"^model-\d+-of-\d+\.safetensors$")
_SAFETENSORS_TEMP = re.compile(r"^\.tmp[A-Za-z0-9]{6}$")       # safetensors' own save_file
_OLD_TEMPORARIES = (CONFIG_FILE + ".partial", SAFETENSORS + ".partial")   # attnlab ≤ 0.x
TEMP_AGE_S = 600            # a safetensors temporary untouched this long has no live writer


def target(path: Any) -> Path:
    """`path` as the folder to write, once it can be one."""
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, (str, os.PathLike)):
        raise ArgumentError(f"save_pretrained(path): expected the folder to write (str or "
                            f"pathlib.Path), received {type(path).__name__} {repr(path)[:60]}.")
    text = os.fspath(path)
    if not text:
        raise ArgumentError("save_pretrained(path): the path is empty (''), which names no "
                            "folder. Give the folder to write, e.g. 'my-model' ('.' for the "
                            "current folder).")
    p = Path(text)
    # os.path's tests: an unreadable place is "not there" here, and an error when written
    if os.path.islink(p) and not os.path.exists(p):
        raise ArgumentError(f"save_pretrained(path): '{p}' is a symbolic link to "
                            f"'{os.readlink(p)}', which does not exist. Give a folder, or "
                            "remove the link.")
    if os.path.exists(p) and not os.path.isdir(p):
        raise ArgumentError(f"save_pretrained(path): '{p}' is a file; give a folder to write "
                            f"{CONFIG_FILE} and {SAFETENSORS} in (it is made if needed).")
    for up in p.absolute().parents:
        if os.path.exists(up):
            if not os.path.isdir(up):
                raise ArgumentError(f"save_pretrained(path): cannot make the folder '{p}': "
                                    f"'{up}' is a file. Give a path under a folder.")
            break
    return p


def write(folder: Path, config: str, tensors: dict[str, torch.Tensor]) -> None:
    from safetensors.torch import save_file

    def write(tmp: Path) -> list[str]:
        weights = tmp / SAFETENSORS
        save_file(tensors, str(weights), metadata={"format": "pt"})
        os.chmod(weights, _files.new_file_mode())     # safetensors makes it 0600
        _files.write_new(tmp / CONFIG_FILE, config.encode("utf-8"))
        return [SAFETENSORS, CONFIG_FILE]             # config.json, read first, goes last

    try:
        if os.path.isdir(folder):
            _remove_old_temporaries(folder)
        _folders.replace_files(folder, write, _stale_weights(folder), key=CONFIG_FILE,
                               leftovers=_leftover)
    except OSError as e:
        raise ArgumentError(_os_error(folder, e)) from None


def _os_error(folder: Path, e: OSError) -> str:
    where = f" ('{e.filename}')" if e.filename else ""
    if isinstance(e, PermissionError):
        fix = "Choose a folder you can write, or make this one writable (e.g. chmod u+w)."
    elif getattr(e, "errno", None) == 28:
        fix = "Free some space, or choose a folder on another disk."
    else:
        fix = "Choose another folder."
    return (f"save_pretrained: cannot write the model into '{folder}': {e.strerror or e}{where}. "
            f"Its files are as they were. {fix}")


def _leftover(name: str) -> bool:
    return name in (CONFIG_FILE, SAFETENSORS, INDEX) or bool(_SHARD.match(name)) or \
        bool(_SAFETENSORS_TEMP.match(name))


def _stale_weights(folder: Path) -> list[str]:
    """The index of an earlier sharded save and the shards it lists (files in the folder
    named like safetensors files): they go with the old weights."""
    index = folder / INDEX
    if not os.path.lexists(index):
        return []
    names = [INDEX]
    try:
        doc = json.loads(_reading.read_regular(index, "save_pretrained", MAX_CONFIG_BYTES))
        files = set(doc["weight_map"].values())
    except (AttnlabError, OSError, ValueError, KeyError, TypeError, AttributeError):
        return names                                   # not an index: only it goes
    for f in sorted(x for x in files if isinstance(x, str)):
        if Path(f).name == f and f.endswith(".safetensors") and f != SAFETENSORS and \
                os.path.lexists(folder / f) and not (folder / f).is_dir():
            names.append(f)
    return names


def _remove_old_temporaries(folder: Path) -> None:
    """What killed writers of earlier versions and of safetensors' `save_file` left in the
    folder: attnlab's fixed `.partial` names, and safetensors' `.tmpXXXXXX` files (a
    safetensors header, untouched for `TEMP_AGE_S`: nobody is still writing them)."""
    now = time.time()
    for e in os.scandir(folder):
        if e.name in _OLD_TEMPORARIES and not e.is_dir(follow_symlinks=False):
            os.unlink(e.path)                          # a link planted there goes, not its target
        elif _SAFETENSORS_TEMP.match(e.name) and e.is_file(follow_symlinks=False) and \
                now - e.stat(follow_symlinks=False).st_mtime > TEMP_AGE_S and \
                _looks_like_safetensors(e.path):
            os.unlink(e.path)


def _looks_like_safetensors(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(9)
    except OSError:
        return False
    return len(head) == 9 and int.from_bytes(head[:8], "little") < 2**30 and head[8:] == b"{"
