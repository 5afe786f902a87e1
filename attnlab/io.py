"""Saving and loading networks: one zip file, no pickle.

A saved network is a zip archive holding

- ``network.json``: the graph as versioned JSON — every layer's type, name and constructor
  arguments (``Layer.config()``), the connections port to port, ``Network.metadata`` (class
  labels, …) and, for a network without input layers, the input specs it was initialised with.
  Nested networks are stored as nested graphs.
- ``weights.safetensors``: ``Network.state_dict()`` (parameters and buffers such as BatchNorm's
  running statistics) in the safetensors format, which holds raw tensors and nothing else;
  stored uncompressed, so that a member's declared size is exactly what it holds. A tensor
  that serves under several names (tied weights: a Dense head given the Embedding's weight, a
  torch module wrapped by two layers) is stored once; ``network.json`` then holds
  ``shared_weights``, state-dict key → the key of the tensor stored, and loading ties them
  again (the same Parameter object). A ``Module`` layer wrapping the very torch module of an
  earlier one says so (``same_module_as``), and loading gives both layers one module again.
  Such a file is format version 2; others stay version 1.

Loading rebuilds each layer from the registry of layer types (``attnlab.layers.LAYER_TYPES``; a
user's own ``Layer`` subclass registers itself when its module is imported), initialises the
network and copies the weights in, checking every name and shape. Nothing is ever unpickled:
a pickle or ``torch.save`` file is refused, not opened.

A ``L.Module`` layer wraps arbitrary Python code, which a data file cannot hold: the file names
only the module's class (a plain identifier, never an import path), and loading makes the module
with a factory the program registered — an explicit allow-list: register one before saving
(``al.register_module(MyBlock)``; ``save`` refuses a class that is not, naming it) and before
loading, or pass ``modules={"MyBlock": MyBlock}`` to ``load``.
Loading checks everything against a schema and the limits in ``LIMITS`` first (see ``load``).
"""
from __future__ import annotations

import copy
import io
import json
import math
import os
import re
import sys
import zipfile
import zlib
from pathlib import Path
from typing import Any, BinaryIO, Callable, Mapping

import torch
from torch import nn

from ._files import atomic_writer, output_path
from .errors import ArgumentError, AttnlabError, NetworkError, close_matches
from .graph import Graph, module_key
from .spec import Spec

FORMAT = "attnlab.network"
VERSION = 2              # the newest format read; a file is written as version 1 unless it
SHARED_VERSION = 2       # ties weights ("shared_weights", which version 1 readers do not know)
GRAPH_FILE = "network.json"
WEIGHTS_FILE = "weights.safetensors"

_MODULE_FACTORIES: dict[str, Callable[[], nn.Module]] = {}


# ------------------------------------------------------------------------------ factories ---

def register_module(name: str | type, factory: Callable[[], nn.Module] | None = None) -> Any:
    """Registers how to recreate the torch module of `L.Module` layers when loading.

    A saved file records the module's class name only (never code); `al.load` calls the factory
    registered for that name and loads the weights into the fresh module::

        al.register_module("Linear", lambda: nn.Linear(4, 3))
        al.register_module(MyBlock)              # a class whose constructor needs no arguments

        @al.register_module("MyBlock")           # or as a decorator
        def make_block(): return MyBlock(64)

    Parameters
    ----------
    name : str or type
        The module's class name, as a saved file records it, or the class itself.
    factory : Callable, optional
        Returns a fresh module of the same structure. Without it, a class `name` is its own
        factory, and a string `name` makes the call a decorator.

    Returns
    -------
    Callable
        The factory (or the decorator).
    """
    if isinstance(name, type) and factory is None:
        factory, name = name, name.__name__
    if not isinstance(name, str) or not name:
        raise ArgumentError(f"register_module(name, factory): name must be the module's class "
                            f"name as a string, got {name!r}")
    if factory is None:                                   # decorator form
        def deco(f):
            register_module(name, f)
            return f
        return deco
    if not callable(factory):
        raise ArgumentError(f"register_module('{name}', factory): factory must be callable (a "
                            f"class or a function returning an nn.Module), got {factory!r}")
    _MODULE_FACTORIES[name] = factory
    return factory


# ---------------------------------------------------------------------------------- save ---

def save(net, path) -> None:
    """Writes `net` to one file (see the module docstring). The file is written to a temporary
    name first and renamed, so an interrupted save never leaves a half-written file behind."""
    if not (isinstance(net, Graph) and isinstance(net, torch.nn.Module)):
        raise ArgumentError(f"save() takes an attnlab Network, got {type(net).__name__}")
    network = _graph_to_json(net, top=True)
    weights, shared = _weights_to_save(net)
    doc = {"format": FORMAT, "version": SHARED_VERSION if shared or _shares_modules(network) else 1,
           "attnlab_version": _version(), "torch_version": torch.__version__.split("+")[0],
           "network": network,
           "weights": WEIGHTS_FILE if weights is not None else None}
    if shared:
        doc["shared_weights"] = shared
    try:
        text = json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=True)
    except (TypeError, ValueError) as e:          # _graph_to_json checked every value already
        raise NetworkError(f"cannot save the network: {e}") from None
    graph = text.encode("utf-8")
    if len(graph) > LIMITS["graph_bytes"]:
        raise NetworkError(f"cannot save the network: its graph ({GRAPH_FILE}) is "
                           f"{len(graph):,} bytes, over the limit of {LIMITS['graph_bytes']:,} "
                           "that al.load() accepts (attnlab.io.LIMITS['graph_bytes']; is the "
                           "metadata very large?).")
    blobs = [(GRAPH_FILE, graph, zipfile.ZIP_DEFLATED)]
    if weights is not None:
        from safetensors.torch import save as st_save
        # stored, not deflated: float weights hardly compress, and load can then check that
        # the member holds exactly the bytes it declares
        blobs.append((WEIGHTS_FILE, st_save(weights), zipfile.ZIP_STORED))
    if hasattr(path, "write"):                    # a binary file object
        _write_zip(path, blobs)
        return
    with atomic_writer(_save_path(path)) as f:
        _write_zip(f, blobs)


def _shares_modules(doc) -> bool:
    """Whether a graph's JSON has a Module layer wrapping the module of another."""
    return any("same_module_as" in e or ("network" in e and _shares_modules(e["network"]))
               for e in doc["layers"])


def _save_path(path) -> Path:
    if not isinstance(path, (str, bytes, os.PathLike)) or not os.fspath(path):
        raise ArgumentError(f"save(path): path must be a file name (str or pathlib.Path) or a "
                            f"binary file object, received {type(path).__name__} {_show(repr(path))}.")
    return output_path(path, "save(path)", example="model.attnlab")


def _write_zip(f, blobs):
    with zipfile.ZipFile(f, "w") as z:
        for name, data, method in blobs:
            z.writestr(name, data, compress_type=method)


def _version():
    from ._version import __version__
    return __version__


def _weights_to_save(net):
    """(the state dict to write, or None for a network that holds no weights yet; the shared
    tensors: key → the key of the same tensor, which alone is written)."""
    if not net.initialized:
        if not len(net.layer_modules):
            return None, {}                          # never initialised: the graph alone
        try:                                         # edited after initialisation: what the
            net.initialize()                         # next call would build anyway
        except AttnlabError as e:
            raise NetworkError(
                "cannot save the network's weights: it was edited after initialisation and "
                f"cannot be initialised again as it is ({_first_line(e)}). Fix the graph, or "
                "initialise it with example inputs (net.initialize(x)), then save.") from e
    out, seen = {}, set()
    first: dict[int, str] = {}                       # id of a tensor → its first key
    shared: dict[str, str] = {}
    for key, t in net.state_dict(keep_vars=True).items():   # the tensors themselves: ties show
        if id(t) in first:                           # the same Parameter (or buffer) again:
            shared[key] = first[id(t)]               # stored once, tied again by load
            continue
        first[id(t)] = key
        t = t.detach().to("cpu")
        ptr = (t.untyped_storage().data_ptr(), t.storage_offset()) if t.numel() else None
        if ptr is not None and ptr in seen or not t.is_contiguous():
            t = t.contiguous().clone()               # safetensors refuses shared storage
        elif ptr is not None:
            seen.add(ptr)
        out[key] = t
    return out, shared


def _graph_to_json(net, top=False) -> dict:
    from .layers.module import Module

    layers = []
    wrapped: dict[int, str] = {}                  # id of a wrapped torch module → its first layer
    for name, layer in net._layers.items():
        if isinstance(layer, Graph):
            layers.append({"type": "Network", "name": name, "class": type(layer).__name__,
                           "network": _graph_to_json(layer)})
            continue
        if isinstance(layer, Module):
            _check_module_registered(layer, name)
            cfg = dict(layer.config())
            cfg["output_specs"] = layer.output_specs
            entry = {"type": "Module", "name": name,
                     "config": _encode(cfg, f"layer '{name}' (Module)")}
            first = wrapped.setdefault(id(layer.module), name)
            if first != name:                     # the same torch module as an earlier layer
                entry["same_module_as"] = first
            layers.append(entry)
            continue
        _check_registered(layer, name)
        try:
            cfg = layer.config()
        except Exception as e:  # noqa: BLE001 - a layer type whose config() is broken
            raise NetworkError(f"cannot save layer '{name}' ({layer.type_name}): its config() "
                               f"raised {type(e).__name__}: {_first_line(e)}. A layer's config() "
                               "must return its constructor's arguments.") from e
        cfg = _encode(cfg, f"layer '{name}' ({layer.type_name})")
        _check_round_trip(layer, name, cfg)
        layers.append({"type": layer.type_name, "name": name, "config": cfg})
    conns = [{"source": f"{s}/{sp}", "destination": f"{d}/{dp}"}
             for (d, dp), (s, sp) in net._conns.items()]
    doc = {"name": net.name, "layers": layers, "connections": conns,
           "metadata": _encode(net.metadata, "network metadata", metadata=True)}
    if top:
        specs = net._data_specs
        doc["data_specs"] = None if specs is None else {k: s.to_json() for k, s in specs.items()}
    return doc


def _check_module_registered(layer, name):
    """A file names a wrapped module's class only; `load` remakes it from a registered
    factory. Refuse now, while the program that knows the class is running, rather than
    write a file that no load can read."""
    cls = type(layer.module)
    if cls.__name__ in _MODULE_FACTORIES:
        return
    raise NetworkError(
        f"cannot save layer '{name}' (Module): it wraps a torch module of class "
        f"'{cls.__name__}' ({cls.__module__}.{cls.__qualname__}), and a file holds no code, so "
        f"al.load() can only remake it from a factory registered under that name. Register it "
        f"once, before saving (and in the program that loads): al.register_module("
        f"{cls.__name__}) — or, when its constructor needs arguments, "
        f"al.register_module('{cls.__name__}', lambda: {cls.__name__}(...)). The weights are "
        "saved in the file.")


def _check_registered(layer, name):
    from .layers.base import LAYER_TYPES
    cls = type(layer)
    if LAYER_TYPES.get(cls.__name__) is not cls:
        raise NetworkError(
            f"cannot save layer '{name}': its type {cls.__module__}.{cls.__qualname__} is not "
            f"the layer type registered as '{cls.__name__}' (two classes share the name, or it "
            "is a private class whose name starts with '_'), so a file could not name it. Give "
            "the class a unique public name.")


def _check_round_trip(layer, name, cfg):
    """A layer must come back from its config() as it is, or its outputs could change."""
    try:
        again = _make_layer(type(layer), _decode(cfg), name)
        same = _encode(again.config(), "") == cfg
    except Exception as e:  # noqa: BLE001 - any failure means the config does not rebuild it
        same, why = False, f": rebuilding it raised {type(e).__name__}: {_first_line(e)}"
    else:
        why = f": it rebuilds as {again!r}"
    if not same:
        raise NetworkError(
            f"cannot save layer '{name}' ({layer.type_name}): its config() {cfg} does not "
            f"rebuild the same layer{why}. A layer's config() must return its constructor's "
            "arguments (attributes named like the arguments).")


def _encode(value, where: str, metadata: bool = False):
    """Plain JSON, with tuples and Specs tagged so that they come back as they were."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value
    if isinstance(value, Spec):
        return {"__spec__": value.to_json()}
    if isinstance(value, tuple):
        return {"__tuple__": [_encode(v, where, metadata) for v in value]}
    if isinstance(value, list):
        return [_encode(v, where, metadata) for v in value]
    if isinstance(value, dict):
        bad = [k for k in value if not isinstance(k, str)]
        if bad:
            if metadata:
                return {str(k): _encode(v, where, metadata) for k, v in value.items()}
            raise NetworkError(f"cannot save {where}: dict keys must be strings, got {bad[0]!r}")
        return {k: _encode(v, where, metadata) for k, v in value.items()}
    if metadata:                                  # numpy arrays and scalars, tensors: as lists
        if hasattr(value, "tolist"):
            return _encode(value.tolist(), where, metadata)
    elif hasattr(value, "item") and getattr(value, "ndim", 1) == 0:      # numpy scalar
        return _encode(value.item(), where)
    raise NetworkError(f"cannot save {where}: the value {value!r} ({type(value).__name__}) has no "
                       "JSON form. Use numbers, strings, booleans, None, lists, tuples or dicts.")


# ---------------------------------------------------------------------------------- load ---
#
# A file is data from anywhere. Loading reads it in this order, each step bounded and checked
# before the next one allocates: the file's kind (first bytes) → the zip's member list (names,
# methods, declared sizes, compression ratios) → network.json, read in chunks up to a limit →
# the JSON against the schema below (types, ranges, lengths, nesting, layer types from the
# registry, config keys against the constructor's parameters, specs through Spec) → the graph,
# then its weights' shapes on the meta device (nothing allocated) → the safetensors header
# against those shapes → only then the tensors, read straight into their own memory.

LIMITS = {
    "graph_bytes": 8 * 2**20,       # network.json, uncompressed
    "header_bytes": 16 * 2**20,     # the safetensors header (JSON)
    "ratio": 100,                   # uncompressed / stored size of a member ...
    "ratio_floor": 16 * 2**20,      # ... checked once it is larger than this
    "json_depth": 200,              # nesting of JSON values
    "network_depth": 64,            # networks inside networks
    "layers": 200_000,              # layers (and connections) of one network
    "name_chars": 256,              # a layer or network name
    "string_chars": 4096,           # a string in a layer's config
    "list_items": 100_000,          # a list in a layer's config
    "metadata_bytes": 4 * 2**20,    # strings in the metadata, all together
    "members": 2,                   # members of the zip: network.json, weights.safetensors
    "lazy_weights_bytes": 2**30,    # what a file without weights makes the first call allocate
}
"""What `load` accepts; a file beyond these is refused before anything is allocated for it.
Raise one (e.g. `al.io.LIMITS["graph_bytes"] = 64 * 2**20`) to load a bigger file you trust."""

_CHUNK = 1 << 20
_MAX_SIZE = 2**31 - 1                            # a size in a spec
_MAX_INT = 2**53                                  # an int in a config
_SPEC_LABELS = frozenset("BTCSHQK")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16,
           "BF16": torch.bfloat16, "I64": torch.int64, "I32": torch.int32, "I16": torch.int16,
           "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool}


def load(path: str | os.PathLike | BinaryIO, *,
         modules: Mapping[str, Callable[[], nn.Module]] | None = None,
         device: str | torch.device | None = None) -> Any:
    """Reads a network written by `net.save(path)`: the same graph, weights and outputs.

    A file is data, never code: nothing in it is unpickled, imported, evaluated or pasted into
    code. It is checked against the format's schema and the limits in `LIMITS` before anything
    is built for it. Like any new module the network comes back in training mode:
    `net.predict` switches to eval mode by itself, a direct call needs `net.eval()` for Dropout
    and BatchNorm to act as at inference.

    Parameters
    ----------
    path : str, os.PathLike or binary file
        The file.
    modules : dict, optional
        Module class name → factory, for `L.Module` layers (see `register_module`).
    device : str or torch.device, optional
        Where to move the network (default: the CPU).

    Returns
    -------
    Network

    Raises
    ------
    NetworkError
        Naming the file and what is wrong: a pickle, `torch.save`, ONNX or checkpoint file, an
        unknown layer type, a value out of range, weights that do not fit the graph.
    ArgumentError
        For a path that names no file.
    """
    if modules is not None and not isinstance(modules, Mapping):
        raise ArgumentError(f"load(modules=...): expected a dict of module class name → factory, "
                            f"received {type(modules).__name__}")
    where, f, close = _open_source(path)
    try:
        net = _load_from(f, where, dict(modules or {}))
    finally:
        if close:
            f.close()
    if device is not None:
        net.to(device)
    return net


def _open_source(path):
    """(name for messages, binary file, whether to close it)."""
    if hasattr(path, "read"):
        where = str(getattr(path, "name", "<file object>"))
        if not (hasattr(path, "seekable") and path.seekable()):
            data = path.read()
            if not isinstance(data, (bytes, bytearray)):
                raise ArgumentError(f"load(): the file object {where!r} gives "
                                    f"{type(data).__name__}, not bytes: open it in binary mode "
                                    "(open(path, 'rb')).")
            return where, io.BytesIO(data), True
        return where, path, False
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, (str, os.PathLike)):
        raise ArgumentError(f"load(path): path must be a file name (str or pathlib.Path) or a "
                            f"binary file object, received {type(path).__name__} "
                            f"{_show(repr(path))}.")
    p = Path(path)
    if not str(path):
        raise ArgumentError("load(path): the path is empty; give the file written by net.save().")
    if p.is_dir():
        raise ArgumentError(f"load(path): '{p}' is a folder, not a network file. Give the file "
                            "written by net.save() (e.g. 'model.attnlab'); a training "
                            "checkpoint_dir is resumed with TrainingOptions(resume=True).")
    try:
        from ._files import open_regular         # a FIFO or device would block or never end
        return str(p), open_regular(p, "load(path)"), True
    except FileNotFoundError:
        hint = f" The folder '{p.parent}' does not exist either." if not p.parent.exists() else ""
        raise ArgumentError(f"load(path): no such file: '{p}'.{hint}") from None
    except OSError as e:
        raise ArgumentError(f"load(path): cannot open '{p}': {e.strerror or e}.") from None


def _load_from(f, where: str, modules: dict):
    head = f.read(16)
    if not isinstance(head, (bytes, bytearray)):
        raise ArgumentError(f"load(): the file object {where!r} gives {type(head).__name__}, "
                            "not bytes: open it in binary mode (open(path, 'rb')).")
    f.seek(0)
    if not zipfile.is_zipfile(f):
        raise NetworkError(f"cannot load '{where}': {_what_is(bytes(head), f)}")
    f.seek(0)
    try:
        with zipfile.ZipFile(f) as z:
            graph_info, weights_info = _members(z, f, where)
            doc = _parse_json(_read_member(z, graph_info, LIMITS["graph_bytes"], where),
                              where, GRAPH_FILE)
            _check_top(doc, where, weights_info is not None)
            net = _network_from_json(doc["network"], where, modules, top=True, depth=0,
                                     at="network")
            if doc["weights"] is not None:
                if weights_info is None:
                    raise NetworkError(f"cannot load '{where}': it names weights file "
                                       f"'{WEIGHTS_FILE}' but does not contain it. The file is "
                                       "damaged.")
                _load_weights(net, z, weights_info, where, doc.get("shared_weights"))
            else:
                if doc.get("shared_weights"):
                    raise _bad(where, "shared_weights", "ties weights, but the file holds none")
                _check_lazy_size(net, where)
    except zipfile.BadZipFile as e:
        raise NetworkError(f"cannot load '{where}': the file is damaged ({e}).") from None
    except (OSError, EOFError, zlib.error) as e:
        raise NetworkError(f"cannot load '{where}': the file is damaged or truncated "
                           f"({type(e).__name__}: {e}).") from None
    return net


def _members(z: zipfile.ZipFile, f, where: str):
    infos = z.infolist()
    names = [i.filename for i in infos]
    if GRAPH_FILE not in names:
        if any(n.endswith(".pkl") or n.endswith("/data.pkl") for n in names):
            raise NetworkError(
                f"cannot load '{where}': it is a torch.save file (a pickle inside a zip). "
                "attnlab never unpickles (a pickle can run any code). Load it with torch "
                "yourself if you trust it, then save it with net.save().")
        raise NetworkError(f"cannot load '{where}': it is a zip file without "
                           f"'{GRAPH_FILE}', so not an attnlab network file.")
    unexpected = [n for n in names if n not in (GRAPH_FILE, WEIGHTS_FILE)]
    if unexpected or len(names) != len(set(names)) or len(names) > LIMITS["members"]:
        what = (f"unexpected member {_show(repr(unexpected[0]))}" if unexpected
                else "a member that appears twice")
        raise NetworkError(f"cannot load '{where}': the zip holds {what}; an attnlab network file "
                           f"holds only {GRAPH_FILE} and {WEIGHTS_FILE}. Nothing was read from "
                           "it (a file that carries other members was not written by attnlab).")
    f.seek(0, os.SEEK_END)
    file_bytes = f.tell()
    for info in infos:
        member = f"member {info.filename}"
        if info.flag_bits & 0x1:
            raise NetworkError(f"cannot load '{where}': {member} is encrypted.")
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise NetworkError(f"cannot load '{where}': {member} uses compression method "
                               f"{info.compress_type}; attnlab writes only stored or deflated "
                               "members.")
        if info.compress_size > file_bytes:
            raise NetworkError(f"cannot load '{where}': {member} declares {info.compress_size:,} "
                               f"stored bytes, but the whole file has {file_bytes:,}. The file is "
                               "damaged or forged.")
        if info.compress_type == zipfile.ZIP_STORED and info.file_size != info.compress_size:
            raise NetworkError(f"cannot load '{where}': {member} is stored uncompressed but "
                               f"declares {info.file_size:,} bytes unpacked and "
                               f"{info.compress_size:,} stored. The file is damaged or forged.")
        ratio = info.file_size / max(info.compress_size, 1)
        if info.file_size > LIMITS["ratio_floor"] and ratio > LIMITS["ratio"]:
            raise NetworkError(f"cannot load '{where}': {member} would unpack to "
                               f"{info.file_size:,} bytes from {info.compress_size:,} "
                               f"({ratio:,.0f}× — over the limit of {LIMITS['ratio']}×): a "
                               "decompression bomb, not a network.")
    by_name = {i.filename: i for i in infos}
    return by_name[GRAPH_FILE], by_name.get(WEIGHTS_FILE)


def _read_member(z, info, limit: int, where: str) -> bytes:
    """The member's bytes, refused before reading when it declares more than `limit` and
    read in chunks (zipfile stops at the declared size and checks the CRC)."""
    if info.file_size > limit:
        raise NetworkError(f"cannot load '{where}': {info.filename} is {info.file_size:,} bytes, "
                           f"over the limit of {limit:,} (attnlab.io.LIMITS). Nothing was "
                           "unpacked; raise the limit if you trust this file.")
    out = bytearray()
    with z.open(info) as m:
        while True:
            chunk = m.read(min(_CHUNK, limit + 1 - len(out)))
            if not chunk:
                break
            out += chunk
            if len(out) > limit:
                raise NetworkError(f"cannot load '{where}': {info.filename} unpacks to more than "
                                   f"{limit:,} bytes (attnlab.io.LIMITS).")
    return bytes(out)


def _parse_json(raw: bytes, where: str, what: str):
    try:
        return json.loads(raw.decode("utf-8"))
    except RecursionError:
        raise NetworkError(f"cannot load '{where}': {what} is nested too deeply (over "
                           f"{sys.getrecursionlimit()} levels; attnlab's limit is "
                           f"{LIMITS['json_depth']}).") from None
    except (UnicodeDecodeError, ValueError) as e:
        raise NetworkError(f"cannot load '{where}': {what} is not valid JSON ({e}). "
                           "The file is damaged.") from None


def _what_is(raw: bytes, f=None) -> str:
    if not raw:
        return "the file is empty."
    if raw[:1] == b"\x80" and len(raw) > 1 and raw[1] <= 5:
        return ("it is a pickle file. attnlab never unpickles (a pickle can run any code): "
                "save networks with net.save() and load them with al.load().")
    if raw[:8] == b"\x89HDF\r\n\x1a\n":
        return "it is an HDF5 file (a Keras model?), not an attnlab network file."
    if raw[:8] == b"\x08\x07\x12\x07" or raw[:2] == b"\x08\x07" or raw[:2] == b"\x08\x08":
        return "it looks like an ONNX model; attnlab reads only files written by net.save()."
    if len(raw) > 8 and raw[8:9] == b"{" and f is not None:
        return _what_safetensors(raw, f)
    return "it is not an attnlab network file (those are zip archives written by net.save())."


def _what_safetensors(raw: bytes, f) -> str:
    """A safetensors file: a training checkpoint (say how to resume) or bare weights."""
    n = int.from_bytes(raw[:8], "little")
    meta: dict = {}
    if n <= LIMITS["header_bytes"]:
        f.seek(8)
        try:
            header = json.loads(f.read(n).decode("utf-8"))
            meta = header.get("__metadata__") or {} if isinstance(header, dict) else {}
        except (UnicodeDecodeError, ValueError, RecursionError):
            meta = {}
    if isinstance(meta, dict) and "attnlab.training" in meta:
        return ("it is an attnlab training checkpoint, not a saved network: a checkpoint holds "
                "the weights and the training state but not the graph. Resume training with "
                "the network it was trained with: al.train(net, X, Y, options=al.TrainingOptions("
                "checkpoint_dir=<its folder>, resume=True)); after training, net.save(path) "
                "writes a file that al.load() reads.")
    return ("it is a safetensors file (weights only, no graph). Build the network in Python and "
            "copy them in with safetensors.torch.load_file() and net.load_state_dict(), or load "
            "a file written by net.save().")


# ---- the schema ---------------------------------------------------------------------------

def _bad(where: str, at: str, what: str):
    return NetworkError(f"cannot load '{where}': {at}: {what}. The file is damaged or was not "
                        "written by attnlab.")


def _keys(obj, where, at, required, optional=()):
    if not isinstance(obj, dict):
        raise _bad(where, at, f"expected a JSON object, found {_kind(obj)}")
    missing = [k for k in required if k not in obj]
    if missing:
        raise _bad(where, at, f"missing \"{missing[0]}\"")
    extra = [k for k in obj if k not in required and k not in optional]
    if extra:
        raise _bad(where, at, f"unknown entry {_show(repr(extra[0]))} (allowed: "
                              f"{', '.join(list(required) + list(optional))})")


def _kind(v) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            int: "a number", float: "a number", type(None): "null"}.get(type(v), type(v).__name__)


def _string(v, where, at, limit=None, printable=True):
    limit = limit or LIMITS["string_chars"]
    if not isinstance(v, str):
        raise _bad(where, at, f"expected a string, found {_kind(v)}")
    if len(v) > limit:
        raise _bad(where, at, f"a string of {len(v):,} characters, over the limit of {limit:,}")
    if printable and not v.isprintable():
        bad = next(c for c in v if not c.isprintable())
        raise _bad(where, at, f"the string {_show(repr(v))} holds the control character "
                              f"{bad!r}; names and types are printable text")
    return v


def _name(v, where, at):
    """A layer or network name: printable, bounded, valid for attnlab (check_name)."""
    from .layers.base import check_name
    _string(v, where, at, LIMITS["name_chars"])
    try:
        return check_name(v)
    except AttnlabError as e:
        raise _bad(where, at, str(e)) from None


def _int(v, where, at, lo, hi):
    if type(v) is not int or not lo <= v <= hi:
        raise _bad(where, at, f"expected a whole number from {lo:,} to {hi:,}, found "
                              f"{_show(repr(v))}")
    return v


def _check_top(doc, where, has_weights_member):
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise NetworkError(f"cannot load '{where}': {GRAPH_FILE} does not describe an attnlab "
                           f"network (no \"format\": \"{FORMAT}\").")
    version = doc.get("version")
    if type(version) is not int or version < 1:
        raise NetworkError(f"cannot load '{where}': unknown format version {_show(repr(version))}.")
    if version > VERSION:
        raise NetworkError(f"cannot load '{where}': it was written in format version {version} "
                           f"(attnlab {_show(str(doc.get('attnlab_version', '?')))}); this attnlab "
                           f"reads versions up to {VERSION}. Upgrade attnlab.")
    _keys(doc, where, GRAPH_FILE, ("format", "version", "network"),
          ("attnlab_version", "torch_version", "weights")
          + (("shared_weights",) if version >= SHARED_VERSION else ()))
    for k in ("attnlab_version", "torch_version"):
        if k in doc:
            _string(doc[k], where, k, 64)
    weights = doc.setdefault("weights", None)
    if weights is not None and weights != WEIGHTS_FILE:
        raise _bad(where, "weights", f"expected \"{WEIGHTS_FILE}\" or null, found "
                                     f"{_show(repr(weights))}")
    if not isinstance(doc.get("network"), dict):
        raise NetworkError(f"cannot load '{where}': {GRAPH_FILE} has no \"network\" object.")


def _spec(v, where, at) -> Spec:
    """A spec as `Spec.to_json` writes it: labels from attnlab's set, sizes null or ints."""
    _keys(v, where, at, ("labels", "sizes"))
    labels, sizes = v["labels"], v["sizes"]
    _string(labels, where, f"{at}.labels", 16)
    if not labels or any(c not in _SPEC_LABELS for c in labels):
        raise _bad(where, f"{at}.labels", f"{_show(repr(labels))} is not a spec's labels (letters "
                                          f"from {''.join(sorted(_SPEC_LABELS))})")
    if not isinstance(sizes, list) or len(sizes) != len(labels):
        raise _bad(where, f"{at}.sizes", f"expected a list of {len(labels)} sizes, found "
                                         f"{_show(repr(sizes))}")
    for i, s in enumerate(sizes):
        if s is not None:
            _int(s, where, f"{at}.sizes[{i}]", 0, _MAX_SIZE)
    return Spec(labels, tuple(sizes))


def _value(v, where, at, depth=0, budget=None):
    """A config or metadata value: JSON scalars, lists, string-keyed objects, and attnlab's
    tags for tuples and specs; bounded in depth and size. Returns the Python value."""
    if depth > LIMITS["json_depth"]:
        raise _bad(where, at, f"values nested deeper than {LIMITS['json_depth']} levels")
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, int):
        return _int(v, where, at, -_MAX_INT, _MAX_INT)
    if isinstance(v, float):
        return v
    if isinstance(v, str):
        if budget is not None:                       # metadata: one budget for all its text
            budget[0] -= len(v)
            if budget[0] < 0:
                raise _bad(where, at, f"the metadata's text is over the limit of "
                                      f"{LIMITS['metadata_bytes']:,} characters")
            return v
        return _string(v, where, at, printable=False)
    if isinstance(v, list):
        if budget is None and len(v) > LIMITS["list_items"]:
            raise _bad(where, at, f"a list of {len(v):,} items, over the limit of "
                                  f"{LIMITS['list_items']:,}")
        if budget is not None:
            budget[0] -= len(v)
        return [_value(x, where, f"{at}[{i}]", depth + 1, budget) for i, x in enumerate(v)]
    if isinstance(v, dict):
        if len(v) == 1 and "__tuple__" in v:
            items = v["__tuple__"]
            if not isinstance(items, list):
                raise _bad(where, f"{at}.__tuple__", f"expected a list, found {_kind(items)}")
            return tuple(_value(x, where, f"{at}[{i}]", depth + 1, budget)
                         for i, x in enumerate(items))
        if len(v) == 1 and "__spec__" in v:
            return _spec(v["__spec__"], where, f"{at}.__spec__")
        if budget is not None:
            budget[0] -= len(v)
        out = {}
        for k, x in v.items():
            _string(k, where, f"{at} (a key)", printable=False)
            out[k] = _value(x, where, f"{at}.{_show(k, 40)}", depth + 1, budget)
        return out
    raise _bad(where, at, f"unexpected {type(v).__name__}")


def _metadata(v, where, at):
    if not isinstance(v, dict):
        raise _bad(where, at, f"expected a JSON object, found {_kind(v)}")
    meta = _value(v, where, at, 1, budget=[LIMITS["metadata_bytes"]])
    labels = meta.get("class_labels")
    if labels is not None:
        groups = labels.values() if isinstance(labels, dict) else [labels]
        for g in groups:
            if not isinstance(g, list) or any(isinstance(x, (list, dict, tuple)) or x is None
                                              for x in g):
                raise _bad(where, f"{at}.class_labels", "expected a list of class labels "
                           "(strings, numbers or booleans), or such lists by output name")
    return meta


def _network_from_json(doc: dict, where: str, modules: dict, top: bool = False, depth: int = 0,
                       at: str = "network"):
    from .layers.base import LAYER_TYPES

    Network: Any = LAYER_TYPES["Network"]  # the registry, not an import: io sits below network

    if depth > LIMITS["network_depth"]:
        raise _bad(where, at, f"networks nested deeper than {LIMITS['network_depth']} levels")
    _keys(doc, where, at, ("layers",), ("name", "connections", "metadata")
          + (("data_specs",) if top else ()))
    name = doc.get("name")
    if name is not None:
        _name(name, where, f"{at}.name")
    layers, conns = doc["layers"], doc.get("connections", [])
    for key, items in (("layers", layers), ("connections", conns)):
        if not isinstance(items, list):
            raise _bad(where, f"{at}.{key}", f"expected a list, found {_kind(items)}")
        if len(items) > LIMITS["layers"]:
            raise _bad(where, f"{at}.{key}", f"{len(items):,} entries, over the limit of "
                                             f"{LIMITS['layers']:,}")
    net = Network(name=name)
    for i, entry in enumerate(layers):
        layer = _layer_from_json(entry, where, modules, depth, f"{at}.layers[{i}]", net)
        try:
            net.add(layer)
        except AttnlabError as e:
            raise NetworkError(f"cannot load '{where}': {e}") from None
    port_chars = 2 * LIMITS["name_chars"] + 2
    for i, c in enumerate(conns):
        here = f"{at}.connections[{i}]"
        _keys(c, where, here, ("source", "destination"))
        src = _string(c["source"], where, f"{here}.source", port_chars)
        dst = _string(c["destination"], where, f"{here}.destination", port_chars)
        try:
            net.connect(src, dst)
        except AttnlabError as e:
            raise NetworkError(f"cannot load '{where}': connection {src} → {dst}: {e}") from None
    net.metadata = _metadata(doc.get("metadata") or {}, where, f"{at}.metadata")
    specs = doc.get("data_specs")
    if top and specs is not None:
        if not isinstance(specs, dict):
            raise _bad(where, f"{at}.data_specs", f"expected a JSON object, found {_kind(specs)}")
        inputs = net.input_names
        if sorted(specs) != sorted(inputs):
            raise _bad(where, f"{at}.data_specs", f"input specs for {_show(repr(sorted(specs)))}, "
                                                  f"but the network's inputs are {inputs}")
        net._data_specs = {k: _spec(v, where, f"{at}.data_specs.{k}") for k, v in specs.items()}
    return net


def _layer_from_json(entry, where: str, modules: dict, depth: int, at: str, net=None):
    from .layers.base import LAYER_TYPES

    if not isinstance(entry, dict) or not isinstance(entry.get("type"), str):
        raise _bad(where, at, "a layer entry lacks its \"type\"")
    kind = _string(entry["type"], where, f"{at}.type", 100)
    if kind == "Network":
        _keys(entry, where, at, ("type", "name", "network"), ("class",))
        name = _name(entry["name"], where, f"{at}.name")
        if "class" in entry:
            _string(entry["class"], where, f"{at}.class", 100)
        inner = entry["network"]
        if not isinstance(inner, dict):
            raise _bad(where, f"{at}.network", f"expected a JSON object, found {_kind(inner)}")
        if inner.get("name") not in (None, name):
            raise _bad(where, f"{at}.network.name", f"{_show(repr(inner.get('name')))} differs "
                                                    f"from the layer's name {name!r}")
        return _network_from_json(inner, where, modules, depth=depth + 1, at=f"{at}.network")
    _keys(entry, where, at, ("type", "name"), ("config", "same_module_as") if kind == "Module"
          else ("config",))
    name = _name(entry["name"], where, f"{at}.name")
    if not _IDENT.match(kind):
        raise _bad(where, f"{at}.type", f"{_show(repr(kind))} is not a layer type name")
    cls = LAYER_TYPES.get(kind)
    if cls is None:
        _import_layer_modules()
        cls = LAYER_TYPES.get(kind)
    if cls is None:
        known = sorted(k for k in LAYER_TYPES if k != "Network")
        raise NetworkError(
            f"cannot load '{where}': layer '{name}' has unknown type {_show(repr(kind))}."
            f"{close_matches(kind, known)} If it is your own Layer subclass, import the module "
            f"that defines it before al.load(). Known types: {', '.join(known)}.")
    raw_cfg = entry.get("config", {})
    if not isinstance(raw_cfg, dict):
        raise _bad(where, f"{at}.config", f"expected a JSON object, found {_kind(raw_cfg)}")
    _check_config_keys(cls, raw_cfg, where, f"{at}.config", name)
    cfg = {k: _value(v, where, f"{at}.config.{k}", 1) for k, v in raw_cfg.items()}
    if kind == "Module":
        cfg = _module_config(cfg, where, f"{at}.config", name, modules,
                             _same_module(entry, net, where, at))
    try:
        return _make_layer(cls, cfg, name)
    except (TypeError, AttnlabError, ValueError, OverflowError) as e:
        raise NetworkError(f"cannot load '{where}': layer '{name}' ({kind}) cannot be rebuilt "
                           f"from its config {_show(json.dumps(raw_cfg, default=str), 200)}: "
                           f"{_first_line(e)}") from None


def _check_config_keys(cls, cfg, where, at, name):
    """A config holds the constructor's arguments: no others (nothing else is ever set on a
    layer from a file), and every argument without a default."""
    import inspect
    params = inspect.signature(cls.__init__).parameters
    named = {k: p for k, p in params.items() if k not in ("self", "name")
             and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    takes_more = any(p.kind is p.VAR_KEYWORD for p in params.values())
    for k in cfg:
        if not isinstance(k, str) or not _IDENT.match(k) or k.startswith("_") or \
                (k not in named and not takes_more):
            raise _bad(where, at, f"layer '{name}' ({cls.__name__}) has no argument "
                                  f"{_show(repr(k))}.{close_matches(str(k), named)} Its arguments: "
                                  f"{', '.join(named) or 'none'}")
    missing = [k for k, p in named.items() if p.default is p.empty and k not in cfg]
    if missing and cls.__name__ != "Module":          # Module's module comes from a factory
        raise _bad(where, at, f"layer '{name}' ({cls.__name__}) lacks its argument '{missing[0]}'")


def _same_module(entry, net, where, at):
    """The Module layer, loaded before this one, whose torch module this one wraps too."""
    if "same_module_as" not in entry:
        return None
    here = f"{at}.same_module_as"
    first = _string(entry["same_module_as"], where, here, LIMITS["name_chars"])
    layer = net._layers.get(first) if net is not None else None
    if layer is None or layer.type_name != "Module":
        raise _bad(where, here, f"{_show(repr(first))} is not a Module layer before this one")
    return layer


def _module_config(cfg, where, at, name, modules, same=None):
    """`L.Module` entries name their module's class; the module itself comes only from a
    factory the program registered (an explicit allow-list): a file cannot name code to
    import or run."""
    cls_name = cfg.pop("module", None)
    if not isinstance(cls_name, str) or not _IDENT.match(cls_name):
        raise _bad(where, f"{at}.module", f"{_show(repr(cls_name))} is not a module class name: "
                   "a Module entry names a factory registered with al.register_module(), never "
                   "an import path")
    factory = modules.get(cls_name) or _MODULE_FACTORIES.get(cls_name)
    if same is not None:                      # the module of an earlier layer: no new one
        if type(same.module).__name__ != cls_name:
            raise _bad(where, f"{at}.module", f"{_show(repr(cls_name))} differs from the class "
                       f"'{type(same.module).__name__}' of layer '{same.name}', whose module "
                       "it names as its own")
        factory = lambda: same.module             # noqa: E731
    if factory is None:
        raise NetworkError(
            f"cannot load '{where}': layer '{name}' wraps a torch module of class "
            f"'{cls_name}', whose code a file cannot hold (attnlab never pickles or imports "
            f"what a file names). Tell attnlab how to make one before loading: "
            f"al.register_module('{cls_name}', lambda: {cls_name}(...)), or "
            f"al.load(path, modules={{'{cls_name}': ...}}). The weights then come from the file.")
    for key, lo, hi in (("num_inputs", 1, 1024), ("num_outputs", 1, 1024)):
        if key in cfg:
            _int(cfg[key], where, f"{at}.{key}", lo, hi)
    fmt = cfg.get("output_format")
    if fmt is not None:
        for i, f in enumerate(fmt if isinstance(fmt, (list, tuple)) else [fmt]):
            if not isinstance(f, str) or not f or any(c not in _SPEC_LABELS for c in f):
                raise _bad(where, f"{at}.output_format", f"{_show(repr(f))} is not a spec's labels")
    specs = cfg.get("output_specs")
    if specs is not None and (not isinstance(specs, list)
                              or not all(isinstance(s, Spec) for s in specs)):
        raise _bad(where, f"{at}.output_specs", "expected a list of specs")
    try:
        module = factory()
    except Exception as e:
        raise NetworkError(f"cannot load '{where}': the factory registered for module class "
                           f"'{cls_name}' (layer '{name}') raised {type(e).__name__}: {e}") from e
    if not isinstance(module, nn.Module):
        raise NetworkError(f"cannot load '{where}': the factory for '{cls_name}' returned "
                           f"{type(module).__name__}, not a torch.nn.Module.")
    cfg["module"] = module
    return cfg


_LAYER_MODULES = ("attnlab.layers", "attnlab.combinators", "attnlab.matlab.mlayers")   # where attnlab defines layer types


def _import_layer_modules():
    import importlib
    for m in _LAYER_MODULES:                      # attnlab's own modules: fixed names, not data
        try:
            importlib.import_module(m)
        except ImportError as e:
            if (e.name or "").split(".")[0] == "attnlab":
                raise                            # attnlab itself is broken: say so
            # else an optional dependency (the matlab extra) is missing: its types stay unknown


def _make_layer(cls, cfg: dict, name: str):
    return cls(**cfg, name=name)


def _decode(value):
    """Tagged JSON (tuples, specs) back to Python; for values attnlab wrote itself."""
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if isinstance(value, dict):
        if len(value) == 1 and "__tuple__" in value:
            return tuple(_decode(v) for v in value["__tuple__"])
        if len(value) == 1 and "__spec__" in value:
            return Spec.from_json(value["__spec__"])
        return {k: _decode(v) for k, v in value.items()}
    return value


# ---- the weights --------------------------------------------------------------------------

def _expected_tensors(net, where, params: set | None = None) \
        -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
    """key → (shape, dtype) of the state dict the graph implies, built on the meta device
    (and the keys that are parameters, not buffers, added to `params` when given)."""
    probe = copy.deepcopy(net)
    try:
        with torch.device("meta"):
            probe.initialize()
    except AttnlabError as e:
        raise NetworkError(f"cannot load '{where}': the saved network cannot be initialised "
                           f"to receive its weights: {e}") from e
    except (RuntimeError, NotImplementedError, ValueError, TypeError, OverflowError) as e:
        raise NetworkError(f"cannot load '{where}': the saved network cannot be built "
                           f"({type(e).__name__}: {_first_line(e)}).") from None
    state = probe.state_dict(keep_vars=True)
    if params is not None:
        params.update(k for k, t in state.items() if isinstance(t, nn.Parameter))
    return {k: (tuple(t.shape), t.dtype) for k, t in state.items()}


def _check_lazy_size(net, where):
    """A file without weights builds them at the first call: refuse one whose graph implies
    more than the limit, now, rather than let that call allocate it."""
    try:
        expected = _expected_tensors(net, where)
    except NetworkError:
        return                                       # not buildable yet: stays lazy, as saved
    total = sum(math.prod(s) * d.itemsize for s, d in expected.values())
    if total > LIMITS["lazy_weights_bytes"]:
        big = max(expected, key=lambda k: math.prod(expected[k][0]))
        raise NetworkError(f"cannot load '{where}': the graph (saved without weights) implies "
                           f"{total:,} bytes of weights ({_friendly(net, big)} alone is "
                           f"{'×'.join(map(str, expected[big][0]))}), over the limit of "
                           f"{LIMITS['lazy_weights_bytes']:,} (attnlab.io.LIMITS"
                           "['lazy_weights_bytes']); raise it if you trust this file.")


def _header(z, info, where):
    """The safetensors header of `info`, checked: (entries in offset order, data start)."""
    at = f"{WEIGHTS_FILE} (not a valid safetensors file) header"
    with z.open(info) as m:
        raw = m.read(8)
        if len(raw) < 8:
            raise NetworkError(f"cannot load '{where}': {WEIGHTS_FILE} is truncated.")
        n = int.from_bytes(raw, "little")
        if n > LIMITS["header_bytes"] or 8 + n > info.file_size:
            raise NetworkError(f"cannot load '{where}': {WEIGHTS_FILE} is not a valid safetensors "
                               f"file: its header declares {n:,} bytes (the member has "
                               f"{info.file_size:,}; the limit is {LIMITS['header_bytes']:,}).")
        text = m.read(n)
    header = _parse_json(text, where, at)
    if not isinstance(header, dict):
        raise _bad(where, at, f"expected a JSON object, found {_kind(header)}")
    meta = header.pop("__metadata__", None)
    if meta is not None and (not isinstance(meta, dict) or not all(
            isinstance(v, str) for v in meta.values())):
        raise _bad(where, f"{at}.__metadata__", "expected an object of strings")
    entries, data_bytes = [], info.file_size - 8 - n
    for key, e in header.items():
        here = f"{at}.{_show(key, 60)}"
        _keys(e, where, here, ("dtype", "shape", "data_offsets"))
        if e["dtype"] not in _DTYPES:
            raise _bad(where, f"{here}.dtype", f"{_show(repr(e['dtype']))} is not one of "
                                               f"{', '.join(_DTYPES)}")
        shape, offs = e["shape"], e["data_offsets"]
        if not isinstance(shape, list) or len(shape) > 16:
            raise _bad(where, f"{here}.shape", "expected a list of at most 16 sizes")
        for i, s in enumerate(shape):
            _int(s, where, f"{here}.shape[{i}]", 0, 2**62)
        if not isinstance(offs, list) or len(offs) != 2:
            raise _bad(where, f"{here}.data_offsets", "expected [start, end]")
        a, b = (_int(o, where, f"{here}.data_offsets", 0, data_bytes) for o in offs)
        nbytes = math.prod(shape) * _DTYPES[e["dtype"]].itemsize
        if b - a != nbytes:
            raise _bad(where, here, f"shape {shape} of {e['dtype']} needs {nbytes:,} bytes, its "
                                    f"offsets give {b - a:,}")
        entries.append((a, b, key, tuple(shape), _DTYPES[e["dtype"]]))
    entries.sort()
    pos = 0
    for a, b, key, _, _ in entries:
        if a != pos:
            raise _bad(where, at, f"tensor {_show(repr(key))} starts at byte {a:,}, expected "
                                  f"{pos:,} (tensors overlap or leave gaps)")
        pos = b
    if pos != data_bytes:
        raise _bad(where, at, f"the tensors cover {pos:,} bytes of the {data_bytes:,} after the "
                              "header")
    return entries, 8 + n


def _load_weights(net, z, info, where: str, shared=None):
    entries, start = _header(z, info, where)
    saved = {key: (shape, dtype) for _, _, key, shape, dtype in entries}
    params: set[str] = set()
    mine = _expected_tensors(net, where, params)
    ties = _shared_weights(net, shared, saved, mine, params, where)
    full = {**saved, **{alias: saved[key] for alias, key in ties.items()}}
    _check_fit(net, full, mine, where)
    target = _target_dtypes(net, full, mine, where)
    tensors = _read_tensors(z, info, entries, start)          # the only allocation for the file
    with torch.random.fork_rng(devices=[]):  # initialising must not move the caller's RNG
        torch.manual_seed(0)
        net.initialize()
    if target is not None:
        net.to(target)
    _tie(net, ties)
    tensors.update({alias: tensors[key] for alias, key in ties.items()})
    with torch.no_grad():
        own = dict(net.named_parameters(remove_duplicate=False))
        own.update(dict(net.named_buffers(remove_duplicate=False)))
        for key, t in own.items():
            if key in tensors and not t.is_floating_point() and t.dtype != tensors[key].dtype:
                tensors[key] = tensors[key].to(t.dtype)               # e.g. an int32 counter
    net.load_state_dict(tensors, strict=True)


def _shared_weights(net, shared, saved, mine, params, where) -> dict[str, str]:
    """The file's table of tied tensors (state-dict key → the key of the tensor it is, which
    alone the file holds), checked as the rest of the file: every alias a tensor the graph
    has and the file does not, every target one the file holds, of the same shape and kind."""
    if shared is None:
        return {}
    at = "shared_weights"
    if not isinstance(shared, dict):
        raise _bad(where, at, f"expected a JSON object, found {_kind(shared)}")
    if len(shared) > len(mine):
        raise _bad(where, at, f"{len(shared):,} entries for a network of {len(mine):,} tensors")
    limit = 64 * LIMITS["name_chars"]
    ties = {}
    for alias, key in shared.items():
        here = f"{at}.{_show(alias, 80)}"
        _string(alias, where, f"{at} (a key)", limit)
        _string(key, where, here, limit)
        if alias not in mine:
            raise _bad(where, here, "names no tensor of the network")
        if alias in saved:
            raise _bad(where, here, "is also stored in the weights; a tied tensor is stored once")
        if key not in saved:
            raise _bad(where, here, f"ties it to {_show(repr(key), 80)}, which the weights do "
                                    "not hold")
        if mine[alias][0] != mine[key][0] or saved[key][0] != mine[alias][0]:
            def dims(s):
                return "×".join(map(str, s)) or "scalar"
            raise _bad(where, here, f"ties {_friendly(net, alias)} ({dims(mine[alias][0])} in the "
                                    f"network) to {_friendly(net, key)} ({dims(saved[key][0])} in "
                                    "the file): the shapes differ")
        if (alias in params) != (key in params) or \
                mine[alias][1].is_floating_point != mine[key][1].is_floating_point:
            raise _bad(where, here, f"ties {_friendly(net, alias)} to {_friendly(net, key)}, "
                                    "which is another kind of tensor (parameter or buffer, "
                                    "floating point or not)")
        ties[alias] = key
    return ties


def _tie(net, ties):
    """Makes each alias the very tensor (Parameter or buffer) it was when saved."""
    def owner(key):
        path, _, attr = key.rpartition(".")
        return net.get_submodule(path), attr
    for alias, key in ties.items():
        mod, attr = owner(key)
        tensor = mod._parameters.get(attr) if attr in mod._parameters else mod._buffers.get(attr)
        mod, attr = owner(alias)
        if attr in mod._parameters:
            mod._parameters[attr] = tensor
        else:
            mod._buffers[attr] = tensor


def _check_fit(net, saved, mine, where):
    """The file's tensors (from its header) against the graph's: names and shapes."""
    def dims(s):
        return "×".join(map(str, s)) or "scalar"
    missing = [_friendly(net, k) for k in mine if k not in saved]
    extra = sorted(_friendly(net, _show(k, 80)) for k in saved if k not in mine)
    shapes = [f"{_friendly(net, k)}: file {dims(saved[k][0])}, network {dims(mine[k][0])}"
              for k in mine if k in saved and saved[k][0] != mine[k][0]]
    if missing or extra or shapes:
        parts = []
        if missing:
            parts.append(f"missing in the file: {_listing(missing)}")
        if extra:
            parts.append(f"in the file but not in the network: {_listing(extra)}")
        if shapes:
            parts.append(f"different sizes: {_listing(shapes)}")
        raise NetworkError(f"cannot load '{where}': the weights do not fit the network "
                           f"({'; '.join(parts)}). The graph and the weights in this file do not "
                           "belong together (or a Module factory builds a different module). "
                           "Nothing was allocated for them.")


def _target_dtypes(net, saved, mine, where):
    """The floating dtype the loaded network takes (the file's; the widest when the file mixes
    several, so values stay exact), after refusing tensors of the wrong kind."""
    floats = set()
    for k, (shape, want) in mine.items():
        got = saved[k][1]
        kind_ok = (got.is_floating_point == want.is_floating_point) and \
                  ((got is torch.bool) == (want is torch.bool))
        if not kind_ok:
            raise NetworkError(
                f"cannot load '{where}': {_friendly(net, k)} is {str(got)[6:]} in the file, but "
                f"the network keeps it as {str(want)[6:]} ({'floating point' if want.is_floating_point else 'integer'}"
                "). The file's weights were not written for this graph; save the network "
                "again with net.save().")
        if got.is_floating_point:
            floats.add(got)
    if not floats:
        return None
    order = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
    if floats == {torch.float16, torch.bfloat16}:
        return torch.float32                        # neither holds the other's values
    return max(floats, key=order.index)


def _read_tensors(z, info, entries, start) -> dict[str, torch.Tensor]:
    """Reads each tensor straight into its own memory, in chunks (no copy of the member)."""
    out = {}
    with z.open(info) as m:
        _skip(m, start)
        for a, b, key, shape, dtype in entries:
            t = torch.empty(shape, dtype=dtype)
            if b > a:
                view = t.reshape(-1).view(torch.uint8).numpy().data     # a memoryview
                pos = 0
                while pos < len(view):
                    n = m.readinto(view[pos:pos + 16 * _CHUNK])
                    if not n:
                        raise EOFError(f"{WEIGHTS_FILE} ends inside tensor {key!r}")
                    pos += n
            out[key] = t
    return out


def _skip(m, n):
    while n > 0:
        chunk = m.read(min(n, _CHUNK))
        if not chunk:
            raise EOFError(f"{WEIGHTS_FILE} is truncated")
        n -= len(chunk)


def _show(text: str, n: int = 60) -> str:
    """A string from a file, safe to put in a message: one line, bounded."""
    text = str(text)
    text = text if text.isprintable() else repr(text)[1:-1]
    return text if len(text) <= n else text[: n - 1] + "…"


def _friendly(net, key: str) -> str:
    """A state-dict key as the learnables name it: 'layer_modules.fc.weight' → 'fc/weight'."""
    for name in sorted(net._layers, key=len, reverse=True):
        prefix = f"layer_modules.{module_key(name)}."
        if key.startswith(prefix):
            rest = key[len(prefix):]
            inner = net._layers[name]
            return f"{name}/" + (_friendly(inner, rest) if isinstance(inner, Graph) else rest)
    if key.startswith("layer_modules.") and key.count(".") >= 2:        # not a layer of `net`
        name, _, rest = key[len("layer_modules."):].partition(".")
        return f"{name}/{rest}"
    return key


def _listing(items, n=6):
    shown = ", ".join(items[:n])
    return shown + (f" and {len(items) - n} more" if len(items) > n else "")


def _first_line(e) -> str:
    s = str(e).strip()
    return s.splitlines()[0] if s else type(e).__name__


# ---------------------------------------------------------------------------------- onnx ---

def export_onnx(net, path, *args, **kw):
    """See `attnlab.onnx_export.export_onnx`."""
    from .onnx_export import export_onnx as _export
    return _export(net, path, *args, **kw)

