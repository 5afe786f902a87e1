"""The file format, and writing it (`save`): one zip file, no pickle.

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

import json
import os
import zipfile
from pathlib import Path

import torch

from attnlab.core.files import atomic_writer, output_path
from attnlab.core.errors import ArgumentError, AttnlabError, NetworkError
from ..graph import Graph
from ..graph.names import format_port
from attnlab.core.spec import Spec
from .messages import _first_line, _show
from .modules import _MODULE_FACTORIES
from .schema import LIMITS

FORMAT = "attnlab.network"
VERSION = 2              # the newest format read; a file is written as version 1 unless it
SHARED_VERSION = 2       # ties weights ("shared_weights", which version 1 readers do not know)
GRAPH_FILE = "network.json"
WEIGHTS_FILE = "weights.safetensors"


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
    from .._version import __version__
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
    from ..layers.module import Module

    layers = []
    wrapped: dict[int, str] = {}                  # id of a wrapped torch module → its first layer
    for name, layer in net.layer_map.items():
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
        except AttnlabError as e:                 # config() says which option and what to do
            raise NetworkError(f"cannot save {e}") from e
        except Exception as e:  # noqa: BLE001 - a layer type whose config() is broken
            raise NetworkError(f"cannot save layer '{name}' ({layer.type_name}): its config() "
                               f"raised {type(e).__name__}: {_first_line(e)}. A layer's config() "
                               "must return its constructor's arguments.") from e
        cfg = _encode(cfg, f"layer '{name}' ({layer.type_name})")
        _check_round_trip(layer, name, cfg)
        layers.append({"type": layer.type_name, "name": name, "config": cfg})
    conns = [{"source": format_port(s, sp), "destination": format_port(d, dp)}
             for (d, dp), (s, sp) in net.sources.items()]
    doc = {"name": net.name, "layers": layers, "connections": conns,
           "metadata": _encode(net.metadata, "network metadata", metadata=True)}
    if top:
        specs = net.data_specs
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
    from ..layers.base import LAYER_TYPES
    cls = type(layer)
    if LAYER_TYPES.get(cls.__name__) is not cls:
        raise NetworkError(
            f"cannot save layer '{name}': its type {cls.__module__}.{cls.__qualname__} is not "
            f"the layer type registered as '{cls.__name__}' (two classes share the name, or it "
            "is a private class whose name starts with '_'), so a file could not name it. Give "
            "the class a unique public name.")


def _check_round_trip(layer, name, cfg):
    """A layer must come back from its config() as it is, or its outputs could change: the
    layer rebuilt from it has the same config and the same value of every option that a
    constructor of its class chain names (an option a subclass took through **kwargs and
    left out of its config shows here)."""
    try:
        again = _make_layer(type(layer), _decode(cfg), name)
        same = _encode(again.config(), "") == cfg
        other = None if not same else _option_differing(layer, again)
    except Exception as e:  # noqa: BLE001 - any failure means the config does not rebuild it
        same, why = False, f": rebuilding it raised {type(e).__name__}: {_first_line(e)}"
    else:
        why = f": it rebuilds as {again!r}"
        if other is not None:
            key, was, now = other
            same, why = False, (f": its option '{key}' is {_show(repr(was), 80)}, but "
                                f"{_show(repr(now), 80)} in the layer rebuilt from the config")
    if not same:
        raise NetworkError(
            f"cannot save layer '{name}' ({layer.type_name}): its config() {cfg} does not "
            f"rebuild the same layer{why}. A layer's config() must return every argument it "
            "was built with (attributes named like the arguments; a subclass that takes its "
            "parent's options through *args or **kwargs passes them on unchanged), or the "
            "layer's type must override config() to return them.")


def _option_differing(layer, again):
    """(option, its value, the rebuilt layer's) for the first constructor option of the class
    chain whose attribute differs between `layer` and `again`; None when all agree."""
    for key in _chain_options(type(layer)):
        was, now = getattr(layer, key, None), getattr(again, key, None)
        if _comparable(was) != _comparable(now):
            return key, was, now
    return None


def _chain_options(cls) -> list[str]:
    """The named parameters of every constructor along the class's MRO, `name` aside."""
    import inspect
    keys: list[str] = []
    for c in cls.__mro__:
        init = c.__dict__.get("__init__")
        if init is None or c is object:
            continue
        try:
            params = inspect.signature(init).parameters.values()
        except (TypeError, ValueError):
            continue
        keys += [p.name for p in list(params)[1:] if p.name not in keys and p.name != "name"
                 and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    return keys


def _comparable(value):
    """A value as the file would hold it (JSON text); its repr for one a file cannot hold."""
    try:
        return json.dumps(_encode(value, ""), sort_keys=True, allow_nan=True)
    except (NetworkError, TypeError, ValueError):
        return repr(value)


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

