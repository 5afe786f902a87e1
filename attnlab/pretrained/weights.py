"""The tensors of a model folder, and the table that maps them onto a network's learnables.

A family describes its checkpoint as a list of `Weight`s: each names one tensor of the file and
the learnables ("layer/param") it fills, and how (transposed, as GPT-2's Conv1D stores in×out;
split along its first axis into several learnables, as GPT-2's fused q|k|v; reshaped, as ViT's
1×1×D class token). The same table reads the file (`load`) and writes it back (`collect`).

Only safetensors are read (`model.safetensors`, or the shards `model.safetensors.index.json`
lists), headers first: every name and shape is checked before a tensor is read. A pickle
checkpoint (`pytorch_model.bin`, …) is refused, never unpickled.
"""
from __future__ import annotations

import contextlib
import json
import math
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import torch
from torch import nn

from .config import MAX_CONFIG_BYTES, CheckpointError

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
    """

    name: str
    learnables: tuple[str, ...]
    transpose: bool = False
    reshape: bool = False
    tied: bool | str = False


def W(name: str, *learnables: str, transpose: bool = False, reshape: bool = False,
      tied: bool | str = False) -> Weight:
    """A table row: ``W("h.0.ln_1.weight", "h.0.ln_1/weight")``."""
    return Weight(name, learnables, transpose, reshape, tied)


def _shape(shape) -> str:
    return "×".join(map(str, shape)) or "a scalar"


# -- reading a folder ----------------------------------------------------------------------------

class Checkpoint:
    """The tensors of a model folder, by name: headers read when opened, tensors when asked.

    Parameters
    ----------
    folder : path
        A folder holding `model.safetensors`, or `model.safetensors.index.json` and the shards
        it lists.
    """

    def __init__(self, folder: str | Path):
        from safetensors import SafetensorError, safe_open
        self.folder = Path(folder)
        files = self._files()
        self.header: dict[str, tuple[tuple[int, ...], torch.dtype]] = {}
        self._where: dict[str, Any] = {}
        self._handles = []
        for path, names in files:
            try:
                handle = safe_open(str(path), framework="pt")
            except (SafetensorError, OSError) as e:
                raise CheckpointError(f"cannot read '{path}': {e}. The file is damaged or not a "
                                      "safetensors file.") from None
            self._handles.append(handle)
            present = set(handle.keys())
            for name in names if names is not None else sorted(present):
                if name not in present:
                    raise CheckpointError(f"'{self.folder / INDEX}' lists tensor '{name}' in "
                                          f"'{path.name}', which does not hold it. The index and "
                                          "its shards do not belong together.")
                piece = handle.get_slice(name)
                kind = piece.get_dtype()
                if kind not in _ST_DTYPES:
                    raise CheckpointError(f"'{path}': tensor '{name}' has dtype {kind}, which "
                                          f"attnlab does not read ({', '.join(_ST_DTYPES)}).")
                self.header[name] = (tuple(piece.get_shape()), _ST_DTYPES[kind])
                self._where[name] = handle

    def _files(self) -> list[tuple[Path, list[str] | None]]:
        single, index = self.folder / SAFETENSORS, self.folder / INDEX
        if single.is_file():
            return [(single, None)]
        if index.is_file():
            return self._shards(index)
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
        from .._files import read_regular
        raw = read_regular(index, "from_pretrained(path)", MAX_CONFIG_BYTES, error=CheckpointError)
        try:
            doc = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as e:
            raise CheckpointError(f"'{index}' is not valid JSON ({e}).") from None
        mapping = doc.get("weight_map") if isinstance(doc, dict) else None
        if not isinstance(mapping, dict) or not mapping:
            raise CheckpointError(f"'{index}' has no \"weight_map\" object (tensor name → shard "
                                  "file): it is not a safetensors index.")
        by_file: dict[str, list[str]] = {}
        for name, file in mapping.items():
            if not isinstance(file, str) or Path(file).name != file or file in ("", ".", ".."):
                raise CheckpointError(f"'{index}': tensor '{name}' is in {file!r}; a shard is a "
                                      "file name in the model's folder, without a path.")
            by_file.setdefault(file, []).append(name)
        out: list[tuple[Path, list[str] | None]] = []
        for file, names in by_file.items():
            path = self.folder / file
            if not path.is_file():
                raise CheckpointError(f"'{index}' lists shard '{file}', which is not in "
                                      f"'{self.folder}' (a download or copy that stopped short?).")
            out.append((path, names))
        return out

    def tensor(self, name: str) -> torch.Tensor:
        """The tensor `name`, read from its file."""
        return self._where[name].get_tensor(name)

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
        self._handles.clear()
        self._where.clear()

    def __enter__(self) -> Checkpoint:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# -- the table against the network --------------------------------------------------------------

def _parts(w: Weight, params: dict[str, nn.Parameter]) -> list[nn.Parameter]:
    return [params[name] for name in w.learnables]


def _expected(w: Weight, parts: list[nn.Parameter]) -> tuple[int, ...]:
    """The shape the file holds for `w`, from the learnables it fills (before `reshape`)."""
    shapes = [tuple(p.shape) for p in parts]
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
        twice = sorted({n for n in untied if untied.count(n) > 1})
        raise CheckpointError(f"the {family} table leaves learnables unfilled "
                              f"({', '.join(left[:5]) or 'none'}) or fills some twice "
                              f"({', '.join(twice[:5]) or 'none'}). This is a bug in attnlab's "
                              f"{family} family: please report it.")
    return params


def load(net, table: list[Weight], ckpt: Checkpoint, family: str, ignored: tuple[str, ...] = (),
         prefix: str = "") -> dict[str, list]:
    """Copies the checkpoint's tensors into the network's learnables, after checking every name
    and shape. Returns the file's layout of the tensors it read: table name → [dtype, shape],
    and the file's own name third where it differs (`Checkpoint.find`)."""
    params = check_table(net, table, family)
    problems, record, found = [], {}, {}
    for w in table:
        parts = _parts(w, params)
        mine = _expected(w, parts)
        name = ckpt.find(w.name, prefix)
        if name is None:
            if not w.tied:
                problems.append(f"'{w.name}' is missing (the network expects {_shape(mine)} "
                                f"for {', '.join(w.learnables)})")
            continue
        shape, dtype = ckpt.header[name]
        if not _fits(w, shape, mine):
            problems.append(f"'{w.name}' is {_shape(shape)} in the file, the network built from "
                            f"config.json expects {_shape(mine)} (for {', '.join(w.learnables)})")
            continue
        if not dtype.is_floating_point:
            problems.append(f"'{w.name}' has dtype {dtype} in the file; learnables are floating")
            continue
        record[w.name] = [str(dtype).removeprefix("torch."), list(shape)] + \
            ([name] if name != w.name else [])
        found[w.name] = name
    if problems:
        more = f" (and {len(problems) - 6} more)" if len(problems) > 6 else ""
        raise CheckpointError(f"cannot load '{ckpt.folder}': the weights do not fit the model "
                              f"its config.json describes: {'; '.join(problems[:6])}{more}. Do "
                              "config.json and the weights come from the same checkpoint?")
    with torch.no_grad():
        for w in table:
            if w.name not in record or w.tied:
                continue            # a tied tensor takes the values of the one it is tied to
            parts = _parts(w, params)
            t = ckpt.tensor(found[w.name])
            if w.reshape:
                t = t.reshape(_expected(w, parts))
            if w.transpose:
                t = t.t()
            for p, piece in zip(parts, t.split([p.shape[0] for p in parts]) if len(parts) > 1
                                else (t,)):
                p.copy_(piece)
    read = set(found.values())
    unused = sorted(n for n in ckpt.header if n not in read and not n.endswith(ignored))
    if unused:
        listed = ", ".join(unused[:8]) + (f" (and {len(unused) - 8} more)" if len(unused) > 8 else "")
        warnings.warn(f"'{ckpt.folder}': {len(unused)} tensor(s) of the checkpoint belong to no "
                      f"part of the {family} model its config.json describes and were not read: "
                      f"{listed}.", stacklevel=3)
    return record


def collect(net, table: list[Weight], record: dict[str, list], family: str,
            dtype: torch.dtype | None = None) -> dict[str, torch.Tensor]:
    """The checkpoint's tensors from the network's learnables, in the file's names, shapes and
    dtypes (`record`, what `load` returned; `dtype` overrides the dtypes)."""
    params = _learnables(net)
    out: dict[str, torch.Tensor] = {}
    seen: set[int] = set()
    for w in table:
        if w.name not in record:
            continue                                   # a tied tensor the original left out
        missing = [n for n in w.learnables if n not in params]
        if missing:
            raise CheckpointError(f"save_pretrained: tensor '{w.name}' comes from learnable(s) "
                                  f"{', '.join(missing)}, which the network no longer has "
                                  "(a layer removed or renamed?). The Hugging Face layout needs "
                                  "every tensor of the original file.")
        parts = [params[n].detach() for n in w.learnables]
        t = torch.cat(parts) if len(parts) > 1 else parts[0]
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
