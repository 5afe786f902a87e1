"""Saving and loading networks: one zip file, no pickle.

A saved network is a zip archive holding

- ``network.json``: the graph as versioned JSON — every layer's type, name and constructor
  arguments (``Layer.config()``), the connections port to port, ``Network.metadata`` (class
  labels, …) and, for a network without input layers, the input specs it was initialised with.
  Nested networks are stored as nested graphs.
- ``weights.safetensors``: ``Network.state_dict()`` (parameters and buffers such as BatchNorm's
  running statistics) in the safetensors format, which holds raw tensors and nothing else.

Loading rebuilds each layer from the registry of layer types (``attnlab.layers.LAYER_TYPES``; a
user's own ``Layer`` subclass registers itself when its module is imported), initialises the
network and copies the weights in, checking every name and shape. Nothing is ever unpickled:
a pickle or ``torch.save`` file is refused, not opened.

A ``L.Module`` layer wraps arbitrary Python code, which a data file cannot hold: register a
factory for its module class before loading (``al.register_module("MyBlock", MyBlock)``) or
pass ``modules={"MyBlock": MyBlock}`` to ``load``.
"""
from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Callable, Mapping

import torch
from torch import nn

from ._files import atomic_write
from .errors import ArgumentError, AttnlabError, NetworkError, close_matches
from .graph import Graph, module_key
from .spec import Spec

FORMAT = "attnlab.network"
VERSION = 1
GRAPH_FILE = "network.json"
WEIGHTS_FILE = "weights.safetensors"

_MODULE_FACTORIES: dict[str, Callable[[], nn.Module]] = {}


# ------------------------------------------------------------------------------ factories ---

def register_module(name, factory: Callable[[], nn.Module] | None = None):
    """Registers how to recreate the torch module of `L.Module` layers when loading.

    `name` is the module's class name, as a saved file records it; `factory()` returns a fresh
    module of the same structure (its weights are then loaded from the file)::

        al.register_module("Linear", lambda: nn.Linear(4, 3))
        al.register_module(MyBlock)              # a class whose constructor needs no arguments

        @al.register_module("MyBlock")           # or as a decorator
        def make_block(): return MyBlock(64)

    Returns the factory (so it works as a decorator)."""
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
    weights = _weights_to_save(net)
    doc = {"format": FORMAT, "version": VERSION, "attnlab_version": _version(),
           "torch_version": torch.__version__.split("+")[0],
           "network": _graph_to_json(net, top=True),
           "weights": WEIGHTS_FILE if weights is not None else None}
    try:
        text = json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=True)
    except (TypeError, ValueError) as e:          # _graph_to_json checked every value already
        raise NetworkError(f"cannot save the network: {e}") from None
    blobs = [(GRAPH_FILE, text.encode("utf-8"))]
    if weights is not None:
        from safetensors.torch import save as st_save
        blobs.append((WEIGHTS_FILE, st_save(weights)))
    if hasattr(path, "write"):                    # a binary file object
        _write_zip(path, blobs)
        return
    buf = io.BytesIO()
    _write_zip(buf, blobs)
    atomic_write(path, buf.getvalue())


def _write_zip(f, blobs):
    with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, data in blobs:
            z.writestr(name, data)


def _version():
    import attnlab
    return getattr(attnlab, "__version__", "0")


def _weights_to_save(net):
    """The state dict to write, or None for a network that holds no weights yet."""
    if not net.initialized:
        if not len(net.layer_modules):
            return None                              # never initialised: the graph alone
        try:                                         # edited after initialisation: what the
            net.initialize()                         # next call would build anyway
        except AttnlabError as e:
            raise NetworkError(
                "cannot save the network's weights: it was edited after initialisation and "
                f"cannot be initialised again as it is ({_first_line(e)}). Fix the graph, or "
                "initialise it with example inputs (net.initialize(x)), then save.") from e
    out, seen = {}, set()
    for key, t in net.state_dict().items():
        t = t.detach().to("cpu")
        ptr = (t.untyped_storage().data_ptr(), t.storage_offset()) if t.numel() else None
        if ptr is not None and ptr in seen or not t.is_contiguous():
            t = t.contiguous().clone()               # safetensors refuses shared storage
        elif ptr is not None:
            seen.add(ptr)
        out[key] = t
    return out


def _graph_to_json(net, top=False) -> dict:
    from .layers.module import Module

    layers = []
    for name, layer in net._layers.items():
        if isinstance(layer, Graph):
            layers.append({"type": "Network", "name": name, "class": type(layer).__name__,
                           "network": _graph_to_json(layer)})
            continue
        if isinstance(layer, Module):
            cfg = dict(layer.config())
            cfg["output_specs"] = layer.output_specs
            layers.append({"type": "Module", "name": name,
                           "config": _encode(cfg, f"layer '{name}' (Module)")})
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


def _decode(value):
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if isinstance(value, dict):
        if len(value) == 1 and "__tuple__" in value:
            return tuple(_decode(v) for v in value["__tuple__"])
        if len(value) == 1 and "__spec__" in value:
            return Spec.from_json(value["__spec__"])
        return {k: _decode(v) for k, v in value.items()}
    return value


# ---------------------------------------------------------------------------------- load ---

def load(path, *, modules: Mapping[str, Callable[[], nn.Module]] | None = None,
         device=None):
    """Reads a network written by `net.save(path)`: same graph, same weights, same outputs.

    `modules` maps module class names to factories for `L.Module` layers (see
    `register_module`); `device` moves the loaded network (default: CPU). Like any new
    module it comes back in training mode: `net.predict` switches to eval mode by itself, a
    direct call needs `net.eval()` for Dropout and BatchNorm to act as at inference. Raises
    `NetworkError` for a file that is not an attnlab network (a pickle or `torch.save` file
    is refused without being opened), an unknown layer type, or weights that do not fit."""
    where = str(path) if not hasattr(path, "read") else getattr(path, "name", "<file>")
    raw = path.read() if hasattr(path, "read") else Path(path).read_bytes()
    doc, weights_blob = _read_archive(raw, where)
    net = _network_from_json(doc["network"], where, dict(modules or {}), top=True)
    if doc.get("weights"):
        if weights_blob is None:
            raise NetworkError(f"cannot load '{where}': it names weights file "
                               f"'{doc['weights']}' but does not contain it. The file is damaged.")
        _load_weights(net, weights_blob, where)
    if device is not None:
        net.to(device)
    return net


def _read_archive(raw: bytes, where: str):
    if not zipfile.is_zipfile(io.BytesIO(raw)):
        raise NetworkError(f"cannot load '{where}': {_what_is(raw)}")
    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as z:
            names = z.namelist()
            if GRAPH_FILE not in names:
                if any(n.endswith(".pkl") or n.endswith("/data.pkl") for n in names):
                    raise NetworkError(
                        f"cannot load '{where}': it is a torch.save file (a pickle inside a zip). "
                        "attnlab never unpickles (a pickle can run any code). Load it with torch "
                        "yourself if you trust it, then save it with net.save().")
                raise NetworkError(f"cannot load '{where}': it is a zip file without "
                                   f"'{GRAPH_FILE}', so not an attnlab network file.")
            graph = z.read(GRAPH_FILE)
            weights = z.read(WEIGHTS_FILE) if WEIGHTS_FILE in names else None
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError) as e:
        raise NetworkError(f"cannot load '{where}': the file is damaged ({e}).") from None
    try:
        doc = json.loads(graph.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise NetworkError(f"cannot load '{where}': {GRAPH_FILE} is not valid JSON ({e}). "
                           "The file is damaged.") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise NetworkError(f"cannot load '{where}': {GRAPH_FILE} does not describe an attnlab "
                           f"network (no \"format\": \"{FORMAT}\").")
    version = doc.get("version")
    if not isinstance(version, int) or version < 1:
        raise NetworkError(f"cannot load '{where}': unknown format version {version!r}.")
    if version > VERSION:
        raise NetworkError(f"cannot load '{where}': it was written in format version {version} "
                           f"(attnlab {doc.get('attnlab_version', '?')}); this attnlab reads "
                           f"versions up to {VERSION}. Upgrade attnlab.")
    if not isinstance(doc.get("network"), dict):
        raise NetworkError(f"cannot load '{where}': {GRAPH_FILE} has no \"network\" object.")
    return doc, weights


def _what_is(raw: bytes) -> str:
    if not raw:
        return "the file is empty."
    if raw[:1] == b"\x80" and len(raw) > 1 and raw[1] <= 5:
        return ("it is a pickle file. attnlab never unpickles (a pickle can run any code): "
                "save networks with net.save() and load them with al.load().")
    if raw[:8] == b"\x89HDF\r\n\x1a\n":
        return "it is an HDF5 file (a Keras model?), not an attnlab network file."
    if raw[:8] == b"\x08\x07\x12\x07" or raw[:2] == b"\x08\x07" or raw[:2] == b"\x08\x08":
        return "it looks like an ONNX model; attnlab reads only files written by net.save()."
    return "it is not an attnlab network file (those are zip archives written by net.save())."


def _need(cond, where, what):
    if not cond:
        raise NetworkError(f"cannot load '{where}': {what}. The file is damaged or was not "
                           "written by attnlab.")


def _network_from_json(doc: dict, where: str, modules: dict, top: bool = False):
    from .layers.base import LAYER_TYPES

    Network = LAYER_TYPES["Network"]      # the registry, not an import: io sits below network
    _need(isinstance(doc, dict), where, "a network entry is not an object")
    layers, conns = doc.get("layers"), doc.get("connections", [])
    _need(isinstance(layers, list), where, "a network has no list of layers")
    _need(isinstance(conns, list), where, "a network's connections are not a list")
    net = Network(name=doc.get("name"))
    for entry in layers:
        _need(isinstance(entry, dict) and isinstance(entry.get("type"), str)
              and isinstance(entry.get("name"), str), where,
              "a layer entry lacks its \"type\" or \"name\"")
        layer = _layer_from_json(entry, where, modules)
        try:
            net.add(layer)
        except AttnlabError as e:
            raise NetworkError(f"cannot load '{where}': {e}") from None
    for c in conns:
        _need(isinstance(c, dict) and isinstance(c.get("source"), str)
              and isinstance(c.get("destination"), str), where, "a connection is malformed")
        try:
            net.connect(c["source"], c["destination"])
        except AttnlabError as e:
            raise NetworkError(f"cannot load '{where}': connection {c['source']} → "
                               f"{c['destination']}: {e}") from None
    meta = doc.get("metadata") or {}
    _need(isinstance(meta, dict), where, "the metadata is not an object")
    net.metadata = _decode(meta)
    if top and doc.get("data_specs") is not None:
        specs = doc["data_specs"]
        _need(isinstance(specs, dict), where, "the input specs are not an object")
        try:
            net._data_specs = {k: Spec.from_json(v) for k, v in specs.items()}
        except (KeyError, TypeError, ValueError) as e:
            raise NetworkError(f"cannot load '{where}': bad input spec ({e}).") from None
    return net


def _layer_from_json(entry: dict, where: str, modules: dict):
    from .layers.base import LAYER_TYPES

    kind, name = entry["type"], entry["name"]
    if kind == "Network":
        return _network_from_json(entry.get("network"), where, modules)
    cls = LAYER_TYPES.get(kind)
    if cls is None:
        _import_layer_modules()
        cls = LAYER_TYPES.get(kind)
    if cls is None:
        known = sorted(k for k in LAYER_TYPES if k != "Network")
        raise NetworkError(
            f"cannot load '{where}': layer '{name}' has unknown type '{kind}'."
            f"{close_matches(kind, known)} If it is your own Layer subclass, import the module "
            f"that defines it before al.load(). Known types: {', '.join(known)}.")
    cfg = entry.get("config", {})
    _need(isinstance(cfg, dict), where, f"layer '{name}' has a config that is not an object")
    cfg = _decode(cfg)
    if kind == "Module":
        cfg = dict(cfg)
        cls_name = cfg.pop("module", None)
        factory = modules.get(cls_name) or _MODULE_FACTORIES.get(cls_name)
        if factory is None:
            raise NetworkError(
                f"cannot load '{where}': layer '{name}' wraps a torch module of class "
                f"'{cls_name}', whose code a file cannot hold (attnlab never pickles). Tell "
                f"attnlab how to make one before loading: al.register_module('{cls_name}', "
                f"lambda: {cls_name}(...)), or al.load(path, modules={{'{cls_name}': ...}}). "
                "The weights then come from the file.")
        try:
            module = factory()
        except Exception as e:
            raise NetworkError(f"cannot load '{where}': the factory registered for module class "
                               f"'{cls_name}' (layer '{name}') raised {type(e).__name__}: {e}") from e
        if not isinstance(module, nn.Module):
            raise NetworkError(f"cannot load '{where}': the factory for '{cls_name}' returned "
                               f"{type(module).__name__}, not a torch.nn.Module.")
        cfg["module"] = module
    try:
        return _make_layer(cls, cfg, name)
    except (TypeError, AttnlabError, ValueError) as e:
        raise NetworkError(f"cannot load '{where}': layer '{name}' ({kind}) cannot be rebuilt "
                           f"from config {entry.get('config')}: {e}") from None


_LAYER_MODULES = ("attnlab.layers", "attnlab.combinators")   # where attnlab defines layer types


def _import_layer_modules():
    import importlib
    for m in _LAYER_MODULES:
        try:
            importlib.import_module(m)
        except ImportError:
            pass


def _make_layer(cls, cfg: dict, name: str):
    return cls(**cfg, name=name)


def _load_weights(net, blob: bytes, where: str):
    from safetensors.torch import load as st_load

    try:
        saved = st_load(blob)
    except Exception as e:  # noqa: BLE001 - safetensors raises its own error types
        raise NetworkError(f"cannot load '{where}': {WEIGHTS_FILE} is not a valid safetensors "
                           f"file ({_first_line(e)}). The file is damaged.") from None
    try:
        with torch.random.fork_rng(devices=[]):  # initialising must not move the caller's RNG
            torch.manual_seed(0)
            net.initialize()
    except AttnlabError as e:
        raise NetworkError(f"cannot load '{where}': the saved network cannot be initialised "
                           f"to receive its weights: {e}") from e
    mine = net.state_dict()
    missing = [_friendly(net, k) for k in mine if k not in saved]
    extra = sorted(_friendly(net, k) for k in saved if k not in mine)
    shapes = [f"{_friendly(net, k)}: file {'×'.join(map(str, saved[k].shape)) or 'scalar'}, "
              f"network {'×'.join(map(str, mine[k].shape)) or 'scalar'}"
              for k in mine if k in saved and saved[k].shape != mine[k].shape]
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
                           "belong together (or a Module factory builds a different module).")
    # keep each tensor's saved dtype (a float64 network stays float64: outputs stay bit-identical)
    tensors = dict(net.named_parameters(remove_duplicate=False))
    tensors.update(dict(net.named_buffers(remove_duplicate=False)))
    with torch.no_grad():
        for key, value in saved.items():
            t = tensors.get(key)
            if t is not None and t.dtype != value.dtype:
                t.data = t.data.to(value.dtype)
    net.load_state_dict(saved, strict=True)


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

