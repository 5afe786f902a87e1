"""The table that maps a checkpoint's tensors onto a network's learnables.

A family describes its checkpoint as a list of `Weight`s: each names one tensor of the file and
the learnables ("layer/param") it fills, and how (transposed, as GPT-2's Conv1D stores in×out;
split along its first axis into several learnables, as GPT-2's fused q|k|v; reshaped, as ViT's
1×1×D class token). The same table reads the file (`load`) and writes it back (`collect`).

The files themselves are `checkpoint.Checkpoint`'s. What a folder holds bounds what loading
costs, never what its config.json claims: the config's counts are checked against the
tensors' names (`check_counts`) before a table of that many rows is built, and its sizes
against the tensors' shapes (`check_sizes`) before a single learnable is allocated.
"""
from __future__ import annotations

import contextlib
import heapq
import math
import re
import warnings
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterator

import torch
from torch import nn

from .checkpoint import Checkpoint, shape_text
from .config import CappedConfig, CheckpointError, Config


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
                                        f"{shape_text(mine)} for {', '.join(w.learnables)})"))
            continue
        shape, dtype = ckpt.header[name]
        if not _fits(w, shape, mine):
            keys = _culprits(sizes, shape, mine)
            because = f": {'; '.join(keys)}" if keys else ""
            problems.append((bool(keys), f"'{w.name}' is {shape_text(shape)} in the file, the "
                                         f"network built from config.json expects "
                                         f"{shape_text(mine)} (for {', '.join(w.learnables)}"
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
            raise CheckpointError(f"save_pretrained: tensor '{w.name}' is {shape_text(t.shape)} in the "
                                  f"network, {shape_text(shape)} in the original file and its "
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
