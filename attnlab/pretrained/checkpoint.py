"""The files of a model folder: its safetensors, read header first, and its tensors by name.

Only safetensors are read (`model.safetensors`, or the shards `model.safetensors.index.json`
lists), headers first: every name and shape is checked before a tensor is read. A pickle
checkpoint (`pytorch_model.bin`, …) is refused, never unpickled.

What a folder holds bounds what loading costs, never what its config.json claims: the files
are stat'ed before they are opened (a FIFO or device is named, never read), and headers are
read by attnlab in one pass within safetensors' own limits. `weights.py` then checks the
config's counts and sizes against these headers before anything is built.
"""
from __future__ import annotations

import contextlib
import gc
import io
import json
import mmap
import os
import sys
import warnings
from pathlib import Path
from typing import Iterator, cast

import torch

from .config import LIMITS, CheckpointError, file_problem, read_json

SAFETENSORS = "model.safetensors"
INDEX = "model.safetensors.index.json"
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle", ".h5", ".msgpack")

LEGACY_SUFFIXES = ((".weight", ".gamma"), (".bias", ".beta"))

_ST_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16,
              "BF16": torch.bfloat16, "I64": torch.int64, "I32": torch.int32, "I16": torch.int16,
              "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool}



def shape_text(shape) -> str:
    """A shape in words for messages: "4×8", or "a scalar"."""
    return "×".join(map(str, shape)) or "a scalar"


# safetensors' own limit on a header (MAX_HEADER_SIZE): a longer one is no safetensors file
MAX_HEADER_BYTES = 100_000_000
# a run of digits that long in a header is a number json would read slowly or too large: the
# header is then read with every integer checked (`config.parse_json`'s rule). Found as a
# substring once every digit is "0" and every other byte " " (both at C speed)
_DIGITS = bytes(48 if 48 <= b <= 57 else 32 for b in range(256))
_LONG_NUMBER = b"0" * 20


def _damaged(path: Path, why: str) -> CheckpointError:
    return CheckpointError(f"cannot read '{path}': {why}. The file is damaged or not a "
                           "safetensors file.")


def _not_a_file(path: Path, problem: str) -> CheckpointError:
    return CheckpointError(f"'{path}' is {problem}, not a regular file: nothing was read from "
                           "it. A model folder holds its weights as files.")


class _File:
    """One safetensors file, open: its header read and checked (`entries`: name → (shape,
    dtype, first byte, end byte) in the data), its tensors read on demand from the same open
    file (never reopened by name: what was checked is what is read)."""

    def __init__(self, path: Path):
        from attnlab.core.reading import open_regular
        self.path = path
        try:
            self.handle = cast(io.BufferedReader, open_regular(path, "from_pretrained(path)",
                                                                error=CheckpointError))
        except OSError as e:                     # gone or unreadable since the folder was read
            raise CheckpointError(f"cannot open '{path}': {e.strerror or e}.") from None
        try:
            self.start, (self.header, self.places) = self._header()
            self.map: mmap.mmap | None = None    # made on the first `mapped` tensor
        except BaseException:
            self.handle.close()
            raise

    def _header(self) -> tuple[int, tuple[dict, dict]]:
        """(where the data starts, (name → (shape, dtype), name → (first byte, end byte) in
        the data)): the 8-byte little-endian length, the JSON header it measures, every
        entry's dtype, shape and place checked against the file."""
        f, path = self.handle, self.path
        size = os.fstat(f.fileno()).st_size
        first = f.read(8)
        if len(first) < 8:
            raise _damaged(path, f"it has {size} byte(s), fewer than the 8 that give a "
                                 "safetensors header's length")
        n = int.from_bytes(first, "little")
        if n > MAX_HEADER_BYTES:
            raise _damaged(path, f"its header claims {n:,} bytes, more than safetensors' limit "
                                 f"of {MAX_HEADER_BYTES:,}")
        if 8 + n > size:
            raise _damaged(path, f"its header claims {n:,} bytes, but the file has only "
                                 f"{size - 8:,} after the header's length")
        raw = f.read(n)
        if len(raw) < n:
            raise _damaged(path, "it was shortened while it was read")
        most, listed = LIMITS["tensors"], raw.count(b'"data_offsets"')   # at C speed
        if listed > most:                            # refused before it is parsed
            raise _too_many(path, listed)
        with _no_gc():
            doc = _header_json(raw, path)
            if len(doc) - ("__metadata__" in doc) > most:
                raise _too_many(path, len(doc) - ("__metadata__" in doc))
            return 8 + n, _entries(doc, path, size - 8 - n)

    def mapped(self, shape: tuple[int, ...], dtype: torch.dtype, begin: int,
               end: int) -> torch.Tensor:
        """The tensor stored at bytes begin:end of the data, memory-mapped: no byte is read
        until it is used, and a write lands in a private copy of the page (`ACCESS_COPY`),
        never in the file. A copy (`read`) where a mapping cannot hold it: no bytes, a place
        not aligned to the dtype, a big-endian machine."""
        offset = self.start + begin
        if end == begin or offset % dtype.itemsize or sys.byteorder == "big":
            return self.read(shape, dtype, begin, end)
        if self.map is None:
            self.map = mmap.mmap(self.handle.fileno(), 0, access=mmap.ACCESS_COPY)
        if len(self.map) < self.start + end:        # shortened since its header was checked
            raise _damaged(self.path, "it was shortened while it was read")
        with warnings.catch_warnings():     # the mapping is writable: private copy-on-write
            warnings.simplefilter("ignore")
            t = torch.frombuffer(self.map, dtype=dtype, count=(end - begin) // dtype.itemsize,
                                 offset=offset)
        return t.reshape(shape)

    def read(self, shape: tuple[int, ...], dtype: torch.dtype, begin: int, end: int) -> torch.Tensor:
        """The tensor stored at bytes begin:end of the data."""
        if end == begin:
            return torch.empty(shape, dtype=dtype)
        buf = bytearray(end - begin)
        self.handle.seek(self.start + begin)
        if self.handle.readinto(buf) != len(buf):
            raise _damaged(self.path, "it was shortened while it was read")
        t = torch.frombuffer(buf, dtype=dtype)
        if sys.byteorder == "big" and dtype.itemsize > 1:      # safetensors is little-endian
            t = t.view(torch.uint8).view(-1, dtype.itemsize).flip(1).contiguous().view(dtype)
        return t.reshape(shape)

    def close(self) -> None:
        # the mapping stays open while learnables alias it (closing it under them would
        # fail); it goes with the last of them
        self.map = None
        self.handle.close()


def _too_many(path: Path, n: int) -> CheckpointError:
    return CheckpointError(f"cannot read '{path}': its header lists {n:,} tensors, more than "
                           f"attnlab reads from one file ({LIMITS['tensors']:,}, a hundred times "
                           "the tensors of a large model's shard). Nothing was loaded. To read "
                           "a file you trust, raise attnlab.pretrained.config.LIMITS"
                           "[\"tensors\"].")


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    """The cycle collector paused: parsing a header makes a million small objects, none of
    them in a cycle, and the collections they would trigger make the parse several times
    slower."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _header_json(raw: bytes, path: Path) -> dict:
    """The header's JSON object. Parsed at C speed (a header may list a million tensors); a
    header holding a long number is parsed with every integer bounded instead."""
    from .config import parse_json
    if _LONG_NUMBER in raw.translate(_DIGITS):
        doc = parse_json(raw, f"the header of '{path}'")
    else:
        try:
            doc = json.loads(raw.decode("utf-8"))
        except RecursionError:     # its entries are checked flat below: only this is recursive
            raise _damaged(path, "its header is nested deeper than any safetensors header "
                                 "(name → dtype, shape, data_offsets)") from None
        except (ValueError, UnicodeDecodeError) as e:
            raise _damaged(path, f"its header is not valid JSON ({e})") from None
    if not isinstance(doc, dict):
        raise _damaged(path, f"its header is a JSON {type(doc).__name__}, not an object of "
                             "tensors")
    return doc


def _entries(doc: dict, path: Path, data: int) -> tuple[dict, dict]:
    """The header's tensors, (name → (shape, dtype), name → (first byte, end byte)), each
    checked: a dtype attnlab reads, a shape of whole numbers, and a place within the file's
    `data` bytes that holds exactly that many bytes. One pass, nothing per entry but the
    checks."""
    header, places = {}, {}
    itemsizes = {k: d.itemsize for k, d in _ST_DTYPES.items()}
    for name, entry in doc.items():
        try:
            kind, shape, (begin, end) = entry["dtype"], entry["shape"], entry["data_offsets"]
            size = _nbytes(shape, itemsizes[kind], data)
        except (TypeError, KeyError, ValueError):
            _refuse_entry(path, name, entry)
            continue                            # __metadata__, checked there
        if type(begin) is not int or type(end) is not int or not 0 <= begin <= end <= data:
            raise _damaged(path, f"tensor '{_cut(name)}' lies at bytes {_cut(str(begin))} to "
                                 f"{_cut(str(end))}, outside the {data:,} bytes of data")
        if size != end - begin:
            if size is None:
                raise _damaged(path, f"tensor '{_cut(name)}' has the shape "
                                     f"{_cut(str(shape))}, not a list of sizes")
            raise _damaged(path, f"tensor '{_cut(name)}' of shape {shape_text(shape)} and dtype "
                                 f"{kind} takes {end - begin:,} bytes in the file")
        header[name] = (tuple(shape), _ST_DTYPES[kind])
        places[name] = (begin, end)
    return header, places


def _refuse_entry(path: Path, name: str, entry) -> None:
    """Refuses the entry `name` that is not a tensor attnlab reads (or passes the header's
    optional `__metadata__`: null or an object of strings)."""
    if name == "__metadata__":
        if entry is None or isinstance(entry, dict) and \
                all(isinstance(v, str) for v in entry.values()):
            return
        raise _damaged(path, "its __metadata__ is not an object of strings")
    kind = entry.get("dtype") if isinstance(entry, dict) else None
    if isinstance(kind, str) and kind not in _ST_DTYPES:
        raise CheckpointError(f"'{path}': tensor '{_cut(name)}' has dtype {_cut(kind)}, which "
                              f"attnlab does not read ({', '.join(_ST_DTYPES)}).")
    raise _damaged(path, f"tensor '{_cut(name)}' is not given as a dtype name, a shape and two "
                         "data_offsets")


def _nbytes(shape: list[int], itemsize: int, most: int) -> int | None:
    """The bytes a tensor of this shape takes (once over `most`, more than `most`: a huge
    shape is never multiplied out), or None when `shape` is not a list of sizes."""
    if type(shape) is not list:
        return None
    n = itemsize
    for d in shape:
        if type(d) is not int or d < 0:
            return None
        if n <= most:
            n *= d
    return 0 if 0 in shape else n


def _cut(text: str) -> str:
    return text if len(text) <= 80 else text[:77] + "..."


class Checkpoint:
    """The tensors of a model folder, by name: headers read when opened, tensors when asked.

    Every file is stat'ed before it is opened (a FIFO, folder or device where a file belongs is
    named and never opened) and its header is read by attnlab itself, in one pass: the 8-byte
    length is bounded by safetensors' limit and the file's size, every tensor's dtype, shape
    and place checked. `header` maps each tensor's name to (shape, dtype).

    Parameters
    ----------
    folder : path
        A folder holding `model.safetensors`, or `model.safetensors.index.json` and the shards
        it lists.
    """

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self.header: dict[str, tuple[tuple[int, ...], torch.dtype]] = {}
        self._where: dict[str, _File] = {}       # a shard's tensors: their file
        self._open: list[_File] = []
        try:
            for path, names in self._files():
                self._read(path, names)
        except BaseException:
            self.close()
            raise

    def _read(self, path: Path, names: list[str] | None) -> None:
        file = _File(path)
        self._open.append(file)
        if names is None:                        # the one file: all of it
            self.header = file.header
            return
        for name in names:                       # a shard: the tensors the index gives it
            if name not in file.header:
                raise CheckpointError(f"'{self.folder / INDEX}' lists tensor '{_cut(name)}' in "
                                      f"'{path.name}', which does not hold it. The index and "
                                      "its shards do not belong together.")
            self.header[name] = file.header[name]
            self._where[name] = file

    def _files(self) -> list[tuple[Path, list[str] | None]]:
        single, index = self.folder / SAFETENSORS, self.folder / INDEX
        for path in (single, index):
            problem = file_problem(path)
            if problem is None:
                return [(single, None)] if path is single else self._shards(index)
            if problem != "missing":
                raise _not_a_file(path, problem)
        pickles = sorted(p.name for p in self.folder.iterdir()
                         if p.is_file() and p.name.endswith(PICKLE_SUFFIXES))
        if pickles:
            raise CheckpointError(
                f"'{self.folder}' holds its weights as {', '.join(pickles[:3])}, a pickle (or "
                f"TensorFlow/Flax) file: attnlab reads safetensors only and never unpickles a "
                "file, which can run code. Convert it once where you trust the file: "
                "transformers.AutoModel.from_pretrained(folder).save_pretrained(folder) writes "
                f"{SAFETENSORS}.")
        raise CheckpointError(f"'{self.folder}' has no {SAFETENSORS} (nor {INDEX}): nothing to "
                              "load the weights from. Save the model with "
                              "model.save_pretrained(folder).")

    def _shards(self, index: Path) -> list[tuple[Path, list[str] | None]]:
        doc = read_json(index)
        mapping = doc.get("weight_map") if isinstance(doc, dict) else None
        if not isinstance(mapping, dict) or not mapping:
            raise CheckpointError(f"'{index}' has no \"weight_map\" object (tensor name → shard "
                                  "file): it is not a safetensors index.")
        by_file: dict[str, list[str]] = {}
        for name, file in mapping.items():
            if not isinstance(file, str) or Path(file).name != file or file in ("", ".", ".."):
                raise CheckpointError(f"'{index}': tensor '{_cut(name)}' is in "
                                      f"{_cut(repr(file))}; a shard is a file name in the "
                                      "model's folder, without a path.")
            by_file.setdefault(file, []).append(name)
        out: list[tuple[Path, list[str] | None]] = []
        for file, names in by_file.items():
            path = self.folder / file
            problem = file_problem(path)
            if problem == "missing":
                raise CheckpointError(f"'{index}' lists shard '{file}', which is not in "
                                      f"'{self.folder}' (a download or copy that stopped short?).")
            if problem is not None:
                raise _not_a_file(path, problem)
            out.append((path, names))
        return out

    def tensor(self, name: str, mapped: bool = False) -> torch.Tensor:
        """The tensor `name`, read from its file, or with `mapped` its pages mapped
        copy-on-write (`_File.mapped`: read when used, never written back)."""
        file = self._where[name] if self._where else self._open[0]
        shape, dtype = self.header[name]
        return (file.mapped if mapped else file.read)(shape, dtype, *file.places[name])

    def find(self, name: str, prefix: str = "") -> str | None:
        """The name the file holds tensor `name` under, or None: the name itself; without or
        with the base model's `prefix` ("transformer."), as transformers reads a head model's
        file saved from the base model and the reverse; or, for a name ending in `.weight` or
        `.bias`, in the `.gamma` / `.beta` of early BERT files' LayerNorms."""
        names = [name]
        if prefix:
            names.append(name[len(prefix):] if name.startswith(prefix) else prefix + name)
        for n in list(names):
            for new, old in LEGACY_SUFFIXES:
                if n.endswith(new):
                    names.append(n[:-len(new)] + old)
        return next((n for n in names if n in self.header), None)

    def close(self) -> None:
        for file in self._open:
            file.close()
        self._open.clear()
        self._where.clear()

    def __enter__(self) -> Checkpoint:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

