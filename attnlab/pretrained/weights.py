"""The tensors of a model folder, and the table that maps them onto a network's learnables.

A family describes its checkpoint as a list of `Weight`s: each names one tensor of the file and
the learnables ("layer/param") it fills, and how (transposed, as GPT-2's Conv1D stores in×out;
split along its first axis into several learnables, as GPT-2's fused q|k|v; reshaped, as ViT's
1×1×D class token). The same table reads the file (`load`) and writes it back (`collect`).

Only safetensors are read (`model.safetensors`, or the shards `model.safetensors.index.json`
lists), headers first: every name and shape is checked before a tensor is read. A pickle
checkpoint (`pytorch_model.bin`, …) is refused, never unpickled.

What a folder holds bounds what loading costs, never what its config.json claims: the files
are stat'ed before they are opened (a FIFO or device is named, never read), headers are read
by attnlab in one pass within safetensors' own limits, the config's counts are checked against
the tensors' names (`check_counts`) before a table of that many rows is built, and its sizes
against the tensors' shapes (`check_sizes`) before a single learnable is allocated.
"""
from __future__ import annotations

import contextlib
import gc
import heapq
import io
import json
import math
import mmap
import os
import re
import sys
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, cast

import torch
from torch import nn

from .config import LIMITS, CappedConfig, CheckpointError, Config, file_problem, read_json

SAFETENSORS = "model.safetensors"
INDEX = "model.safetensors.index.json"
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle", ".h5", ".msgpack")

LEGACY_SUFFIXES = ((".weight", ".gamma"), (".bias", ".beta"))

_ST_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16,
              "BF16": torch.bfloat16, "I64": torch.int64, "I32": torch.int32, "I16": torch.int16,
              "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool}


@dataclass(frozen=True)
class Weight:
    """One tensor of a checkpoint and the learnables it fills.

    Attributes
    ----------
    name : str
        The tensor's name in the checkpoint, e.g. "transformer.h.0.attn.c_attn.weight".
    learnables : tuple of str
        The network's learnables it fills ("layer/param"); several: the tensor is split along
        its first axis (after `transpose`) into their sizes, in this order.
    transpose : bool
        The file holds the 2-D tensor transposed (in×out, GPT-2's Conv1D).
    reshape : bool
        The file holds the same values in another shape (ViT's 1×1×D class token for a D).
    tied : bool or str
        The file may leave it out: its values are another tensor's. A learnable name ("wte/weight"):
        this row's learnable is that very Parameter (an output projection whose layer says
        ``tied_to="wte"``; `analyze()` and saved files count it once). True: another row fills
        the same learnable (BERT's decoder bias). Not read (the tensor it is tied to wins, as in
        transformers); written back when the original file had it.
    zero : bool
        The model has no such tensor (`name` says which it would be) and the learnable is
        zero: a bias the layer has for all its projections where the model has some (Qwen2's
        ``o_proj``). Loaded as zeros; `save_pretrained` refuses it when it is no longer zero.
    interleave : int
        With several learnables: the file holds them in this many groups, each group a slice
        of every learnable in turn (GPT-NeoX's fused ``query_key_value`` is laid out per head,
        [heads, 3, head size]: ``interleave=heads``); 0 or 1: one after the other.
    """

    name: str
    learnables: tuple[str, ...]
    transpose: bool = False
    reshape: bool = False
    tied: bool | str = False
    zero: bool = False
    interleave: int = 0


def W(name: str, *learnables: str, transpose: bool = False, reshape: bool = False,
      tied: bool | str = False, zero: bool = False, interleave: int = 0) -> Weight:
    """A table row: ``W("h.0.ln_1.weight", "h.0.ln_1/weight")``."""
    return Weight(name, learnables, transpose, reshape, tied, zero, interleave)


def split(w: Weight, t: torch.Tensor, sizes: list[int]) -> list[torch.Tensor]:
    """The file's tensor `t` (after `transpose`) as the pieces of `w`'s learnables, of `sizes`
    rows each: one after the other, or taken from each of `w.interleave` groups in turn."""
    if len(sizes) == 1:
        return [t]
    g = w.interleave
    if g <= 1:
        return list(t.split(sizes))
    groups = t.reshape(g, -1, *t.shape[1:])                 # G × (Σ sizes / G) × …
    return [p.reshape(-1, *t.shape[1:]) for p in groups.split([n // g for n in sizes], 1)]


def join(w: Weight, parts: list[torch.Tensor]) -> torch.Tensor:
    """`split` undone: the learnables' tensors as the file's one tensor (before `transpose`)."""
    if len(parts) == 1:
        return parts[0]
    g = w.interleave
    if g <= 1:
        return torch.cat(parts)
    rest = parts[0].shape[1:]
    return torch.cat([p.reshape(g, -1, *rest) for p in parts], 1).reshape(-1, *rest)


def _shape(shape) -> str:
    return "×".join(map(str, shape)) or "a scalar"


# -- reading a folder ----------------------------------------------------------------------------

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
            raise _damaged(path, f"tensor '{_cut(name)}' of shape {_shape(shape)} and dtype "
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


# -- the config's counts and sizes against the file, before anything is built -------------------

def small_table(weights: Callable[[Config, str], list[Weight]], cfg: Config, architecture: str,
                caps: dict[str, int] | None = None) -> tuple[list[Weight], dict[str, int]]:
    """The family's table (`weights`) for a model like `cfg`'s with every integer it reads
    capped at 1 (`caps`: a key's own cap), and the keys capped with their values: the rows of
    the non-repeated tensors and of the first of each repeated block, whatever the counts."""
    small = CappedConfig(cfg, 1, caps)
    return weights(small, architecture), small.capped


def check_counts(weights: Callable[[Config, str], list[Weight]], cfg: Config, architecture: str,
                 ckpt: Checkpoint, prefix: str = "") -> None:
    """Refuses a config that counts more layers (blocks, …) than the weights have room for,
    naming the key: each count the table reads is raised from 1 to 2 in a small table, which
    shows the tensors a block adds (e.g. "h.1.ln_1.weight"); count × those must not exceed
    the tensors the file holds. A few small tables: the cost does not grow with the count the
    config claims, and the real table is then no longer than the file. (A count the file has
    room for is checked tensor by tensor with the rest, each missing one named with its
    shape.)"""
    base, capped = small_table(weights, cfg, architecture)
    names = {w.name for w in base}
    for key, value in capped.items():
        grown, _ = small_table(weights, cfg, architecture, {key: 2})
        blocks = [at for w in grown if not w.tied and not w.zero and w.name not in names
                  and (at := _indexed(w.name, names)) is not None]
        if not blocks or value * len(blocks) <= len(ckpt.header):
            continue                       # not a count of tensors, or one the file has room for
        held = 0                           # whole blocks 0, 1, … (each takes len(blocks) tensors)
        while held < value and all(ckpt.find(f"{h}{held}{t}", prefix) for h, t in blocks):
            held += 1
        head, tail = next(((h, t) for h, t in blocks if not ckpt.find(f"{h}{held}{t}", prefix)),
                          blocks[0])
        raise CheckpointError(f"'{cfg.where}' key \"{key}\" is {value}, but the weights in "
                              f"'{ckpt.folder}' hold {held} of those blocks: the first missing "
                              f"tensor is '{head}{held}{tail}'. Do config.json and the weights "
                              "come from the same checkpoint? Nothing was loaded.")


def _indexed(name: str, first: set[str]) -> tuple[str, str] | None:
    """(head, tail) with `name` = head + "1" + tail and head + "0" + tail in `first`: where a
    block's number sits in its tensors' names."""
    for m in re.finditer(r"(?<![0-9])1(?![0-9])", name):
        head, tail = name[:m.start()], name[m.end():]
        if f"{head}0{tail}" in first:
            return head, tail
    return None


def check_sizes(net, table: list[Weight], ckpt: Checkpoint, family: str, prefix: str = "",
                cfg: Config | None = None) -> None:
    """Checks every tensor of the table against the shape the network expects, from its
    analysis (which sizes the learnables on the meta device: nothing is allocated), naming the
    config's key behind each size that differs. In a network with errors (a size too large
    to build, say) the layers the analysis could size are checked, the rest left to
    `initialize`, which names the errors."""
    from attnlab.graph.analysis import flat_learnables
    shapes = flat_learnables(net.analyze())

    def expected(w: Weight) -> tuple[int, ...] | None:
        if not all(n in shapes for n in w.learnables):
            return None                  # a bug of the family's table: check_table names it
        return _expected_shape(w, [shapes[n] for n in w.learnables])

    _fit(table, expected, ckpt, prefix, cfg, family)


# -- the table against the network --------------------------------------------------------------

def _parts(w: Weight, params: dict[str, nn.Parameter]) -> list[nn.Parameter]:
    return [params[name] for name in w.learnables]


def _expected(w: Weight, parts: list[nn.Parameter]) -> tuple[int, ...]:
    """The shape the file holds for `w`, from the learnables it fills (before `reshape`)."""
    return _expected_shape(w, [tuple(p.shape) for p in parts])


def _expected_shape(w: Weight, shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    shape = (sum(s[0] for s in shapes),) + shapes[0][1:] if len(shapes) > 1 else shapes[0]
    return shape[::-1] if w.transpose else shape


def _fits(w: Weight, file_shape: tuple[int, ...], mine: tuple[int, ...]) -> bool:
    if file_shape == mine:
        return True
    return w.reshape and math.prod(file_shape) == math.prod(mine) and \
        tuple(d for d in file_shape if d != 1) == tuple(d for d in mine if d != 1)


def _learnables(net) -> dict[str, nn.Parameter]:
    return dict(net.learnables)


def check_table(net, table: list[Weight], family: str) -> dict[str, nn.Parameter]:
    """The network's learnables, once the table is known to fill each exactly once (and its
    ties to be the network's: the layers tie their weights, `tied_to`)."""
    params = _learnables(net)
    loose = [f"{n} = {w.tied}" for w in table if isinstance(w.tied, str) for n in w.learnables
             if w.tied in params and params.get(n) is not params[w.tied]]
    if loose:
        raise CheckpointError(f"the {family} table ties {', '.join(loose)}, but the network does "
                              f"not. This is a bug in attnlab's {family} family: please report it.")
    filled = [name for w in table for name in w.learnables]
    unknown = [n for n in filled if n not in params]
    if unknown:
        raise CheckpointError(f"the {family} table names learnables the network lacks: "
                              f"{', '.join(unknown[:5])}. This is a bug in attnlab's {family} "
                              "family: please report it.")
    untied = [n for w in table if not w.tied for n in w.learnables]
    seen = {id(params[n]) for n in untied}
    left = [n for n, p in params.items() if id(p) not in seen]
    if left or len(set(untied)) != len(untied):
        twice = sorted({n for n, k in Counter(untied).items() if k > 1})
        raise CheckpointError(f"the {family} table leaves learnables unfilled "
                              f"({', '.join(left[:5]) or 'none'}) or fills some twice "
                              f"({', '.join(twice[:5]) or 'none'}). This is a bug in attnlab's "
                              f"{family} family: please report it.")
    return params


def _fit(table: list[Weight], expected: Callable[[Weight], tuple[int, ...] | None],
         ckpt: Checkpoint, prefix: str, cfg: Config | None,
         family: str) -> tuple[dict[str, list], dict[str, str]]:
    """(record, found): each row's layout in the file and the file's name for it, once every
    tensor is known to be there at the shape `expected` gives (else a CheckpointError listing
    what does not fit, naming the config's keys behind the sizes that differ)."""
    problems: list[tuple[bool, str]] = []           # (names a config key, text)
    record: dict[str, list] = {}
    found: dict[str, str] = {}
    sizes = _config_sizes(cfg)
    for w in table:
        mine = None if w.zero else expected(w)
        if mine is None:
            continue
        name = ckpt.find(w.name, prefix)
        if name is None:
            if not w.tied:
                problems.append((False, f"'{w.name}' is missing (the network expects "
                                        f"{_shape(mine)} for {', '.join(w.learnables)})"))
            continue
        shape, dtype = ckpt.header[name]
        if not _fits(w, shape, mine):
            keys = _culprits(sizes, shape, mine)
            because = f": {'; '.join(keys)}" if keys else ""
            problems.append((bool(keys), f"'{w.name}' is {_shape(shape)} in the file, the "
                                         f"network built from config.json expects "
                                         f"{_shape(mine)} (for {', '.join(w.learnables)}"
                                         f"{because})"))
            continue
        if not dtype.is_floating_point:
            problems.append((False, f"'{w.name}' has dtype {dtype} in the file; learnables are "
                                    "floating"))
            continue
        record[w.name] = [str(dtype).removeprefix("torch."), list(shape)] + \
            ([name] if name != w.name else [])
        found[w.name] = name
    if problems:
        problems.sort(key=lambda p: not p[0])       # the ones that name their key first
        texts = [t for _, t in problems]
        more = f" (and {len(texts) - 6} more)" if len(texts) > 6 else ""
        given = "" if any(k for k, _ in problems) or not sizes else \
            " The sizes config.json gives: " + ", ".join(
                f"{k} {v}" for v, ks in sizes.items() for k in ks)[:300] + "."
        raise CheckpointError(f"cannot load '{ckpt.folder}': the weights do not fit the model "
                              f"its config.json describes: {'; '.join(texts[:6])}{more}. Do "
                              f"config.json and the weights come from the same checkpoint?"
                              f"{given}")
    return record, found


def _config_sizes(cfg: Config | None) -> dict[int, list[str]]:
    """size → the config's keys the family read that give it (and "id2label", by its
    length): the keys a mismatched size can be traced to."""
    if cfg is None:
        return {}
    out: dict[int, list[str]] = {}
    for key in sorted(cfg.read):
        value = cfg.data.get(key)
        if type(value) is int and value > 0:
            out.setdefault(value, []).append(key)
    labels = cfg.data.get("id2label")
    if isinstance(labels, dict) and labels:
        out.setdefault(len(labels), []).append("id2label")
    return out


def _culprits(sizes: dict[int, list[str]], shape: tuple[int, ...],
              mine: tuple[int, ...]) -> list[str]:
    """'config.json key "n_embd" is 100000' for each size the network expects that the file's
    tensor does not have and a config key gives."""
    if len(shape) != len(mine):
        shape, mine = tuple(d for d in shape if d != 1), tuple(d for d in mine if d != 1)
    out: list[str] = []
    for have, want in zip(shape, mine):
        for key in sizes.get(want, []) if have != want else []:
            text = f"config.json {'has' if key == 'id2label' else 'key'} \"{key}\" " + \
                (f"of {want} labels" if key == "id2label" else f"is {want}")
            if text not in out:
                out.append(text)
    return out


def load(net, table: list[Weight], ckpt: Checkpoint, family: str, ignored: tuple[str, ...] = (),
         prefix: str = "", cfg: Config | None = None) -> dict[str, list]:
    """Copies the checkpoint's tensors into the network's learnables, after checking every name
    and shape. Returns the file's layout of the tensors it read: table name → [dtype, shape],
    and the file's own name third where it differs (`Checkpoint.find`); `cfg` (optional) lets
    a size that differs name the config key behind it."""
    params = check_table(net, table, family)
    record, found = _fit(table, lambda w: _expected(w, _parts(w, params)), ckpt, prefix, cfg,
                         family)
    with torch.no_grad():
        for w in table:
            if w.zero:
                for p in _parts(w, params):
                    p.zero_()
            if w.name not in record or w.tied:
                continue            # a tied tensor takes the values of the one it is tied to
            parts = _parts(w, params)
            t = ckpt.tensor(found[w.name], mapped=True)
            if w.reshape:
                t = t.reshape(_expected(w, parts))
            if w.transpose:
                t = t.t()
            for p, piece in zip(parts, split(w, t, [p.shape[0] for p in parts])):
                _place(p, piece)
        _check_tied_copies(table, record, found, params, ckpt)
    read = set(found.values())
    unused = [n for n in ckpt.header if n not in read and not n.endswith(ignored)]
    if unused:
        listed = ", ".join(heapq.nsmallest(8, unused)) + (f" (and {len(unused) - 8} more)" if len(unused) > 8 else "")
        warnings.warn(f"'{ckpt.folder}': {len(unused)} tensor(s) of the checkpoint belong to no "
                      f"part of the {family} model its config.json describes and were not read: "
                      f"{listed}.", stacklevel=3)
    return record


def _place(p: nn.Parameter, piece: torch.Tensor) -> None:
    """`p` takes the file's values: the (mapped, copy-on-write) piece itself where its dtype is
    `p`'s (a transposed or split piece stays a view of the file: GPT-2's Conv1D and fused
    q|k|v are read in place), else converted, one copy of this piece alone. The Parameter
    object stays, so that tied learnables stay tied. The allocation it replaces was never
    written (`no_random_init`), so it never took memory."""
    if piece.dtype != p.dtype or piece.device != p.device or piece.shape != p.shape:
        piece = piece.to(p.device, p.dtype).reshape(p.shape)
    p.data = piece


def _check_tied_copies(table: list[Weight], record: dict[str, list], found: dict[str, str],
                       params: dict[str, nn.Parameter], ckpt: Checkpoint) -> None:
    """A tied row the file also holds must hold the values of the tensor it is tied to: a file
    whose config ties the head to the embeddings but stores a different head would otherwise
    load silently as another model (transformers' versions disagree on which one wins)."""
    for w in table:
        if not w.tied or w.name not in record:
            continue
        parts = _parts(w, params)
        t = ckpt.tensor(found[w.name])
        if w.reshape:
            t = t.reshape(_expected(w, parts))
        if w.transpose:
            t = t.t()
        mine = join(w, [p.detach() for p in parts])
        if not torch.equal(t.to(mine.dtype), mine):
            source = w.tied if isinstance(w.tied, str) else "the tensor it shares values with"
            raise CheckpointError(
                f"cannot load '{ckpt.folder}': config.json ties '{w.name}' to {source}, but the "
                f"file stores a '{w.name}' with other values (largest difference "
                f"{(t.to(mine.dtype) - mine).abs().max().item():.3g}), so it is not one model. "
                "If the stored head is the one meant, set \"tie_word_embeddings\": false in "
                "config.json; if the embeddings are, remove the head's tensor from the file.")


def collect(net, table: list[Weight], record: dict[str, list], family: str,
            dtype: torch.dtype | None = None) -> dict[str, torch.Tensor]:
    """The checkpoint's tensors from the network's learnables, in the file's names, shapes and
    dtypes (`record`, what `load` returned; `dtype` overrides the dtypes)."""
    params = _learnables(net)
    out: dict[str, torch.Tensor] = {}
    seen: set[int] = set()
    for w in table:
        if w.zero:
            _check_zero(w, params)
        if w.name not in record:
            continue                                   # a tied tensor the original left out
        missing = [n for n in w.learnables if n not in params]
        if missing:
            raise CheckpointError(f"save_pretrained: tensor '{w.name}' comes from learnable(s) "
                                  f"{', '.join(missing)}, which the network no longer has "
                                  "(a layer removed or renamed?). The Hugging Face layout needs "
                                  "every tensor of the original file.")
        t = join(w, [params[n].detach() for n in w.learnables])
        if w.transpose:
            t = t.t()
        kind, shape = record[w.name][:2]
        if w.reshape and math.prod(shape) == t.numel():
            t = t.reshape(shape)
        if tuple(t.shape) != tuple(shape):
            raise CheckpointError(f"save_pretrained: tensor '{w.name}' is {_shape(t.shape)} in the "
                                  f"network, {_shape(shape)} in the original file and its "
                                  "config.json: a changed size needs a changed config, which "
                                  "attnlab does not write. Keep the sizes to save in this layout.")
        t = t.to("cpu", dtype or getattr(torch, kind)).contiguous()
        if t.untyped_storage().data_ptr() in seen:     # safetensors refuses shared memory
            t = t.clone()
        seen.add(t.untyped_storage().data_ptr())
        out[record[w.name][2] if len(record[w.name]) > 2 else w.name] = t
    return out


def _check_zero(w: Weight, params: dict[str, nn.Parameter]) -> None:
    """A learnable the model does not have must still be zero to be left out of the file."""
    for n in w.learnables:
        if n in params and bool(params[n].detach().ne(0).any()):
            raise CheckpointError(f"save_pretrained: learnable {n} is no longer zero, but the "
                                  f"model has no tensor '{w.name}' to hold it (the layer has it "
                                  "only because it has all its projections' biases or none). "
                                  "Set it to zero (or freeze it while training) to save in this "
                                  "layout, or keep the network with net.save(path).")


@contextlib.contextmanager
def no_random_init() -> Iterator[None]:
    """Modules built inside skip their random initialisation (every learnable is overwritten
    from the file next, and a big model's random init costs seconds to minutes)."""
    names = ("uniform_", "normal_", "trunc_normal_", "kaiming_uniform_", "kaiming_normal_",
             "xavier_uniform_", "xavier_normal_", "orthogonal_")
    saved = {n: getattr(nn.init, n) for n in names}
    try:
        for n in names:
            setattr(nn.init, n, lambda tensor, *a, **k: tensor)
        yield
    finally:
        for n, f in saved.items():
            setattr(nn.init, n, f)
