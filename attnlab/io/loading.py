"""Loading a saved network (`load`): the source opened, the archive checked, the graph rebuilt
from the schema-checked JSON (layer types from the layer registry), then the weights.
"""
from __future__ import annotations

import io
import json
import os
import zipfile
import zlib
from pathlib import Path
from typing import Any, BinaryIO, Callable, Mapping

import torch
from torch import nn

from attnlab.core.errors import ArgumentError, AttnlabError, NetworkError, close_matches
from .archive import _members, _read_member, _what_is
from .format import FORMAT, GRAPH_FILE, SHARED_VERSION, VERSION, WEIGHTS_FILE, _make_layer
from .messages import _first_line, _show
from .modules import _module_config, _same_module
from .schema import (LIMITS, _IDENT, _bad, _check_config_keys, _keys, _kind, _metadata, _name,
                     _parse_json, _spec, _string, _value)
from .weights import _check_lazy_size, _load_weights

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
        from attnlab.core.reading import open_regular         # a FIFO or device would block or never end
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



def _network_from_json(doc: dict, where: str, modules: dict, top: bool = False, depth: int = 0,
                       at: str = "network"):
    from ..layers.base import LAYER_TYPES

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
    from ..layers.base import LAYER_TYPES

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
    cls = _layer_type(kind)
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


# Packages of attnlab that define layer types beyond the core ones. Each registers its types
# with the layer registry (`attnlab.layers.LAYER_TYPES`) when it is imported, as every `Layer`
# subclass does; loading imports them only when a file names a type the registry does not
# know yet. Fixed names, never data: a file cannot choose what is imported.
LAYER_PACKAGES = ("attnlab.layers", "attnlab.combinators", "attnlab.matlab")


def _layer_type(kind: str):
    """The registered layer type named `kind`, or None."""
    from ..layers.base import LAYER_TYPES
    cls = LAYER_TYPES.get(kind)
    if cls is None:
        _import_layer_packages()
        cls = LAYER_TYPES.get(kind)
    return cls


def _import_layer_packages():
    import importlib
    for m in LAYER_PACKAGES:
        try:
            importlib.import_module(m)
        except ImportError as e:
            if (e.name or "").split(".")[0] == "attnlab":
                raise                            # attnlab itself is broken: say so
            # else an optional dependency of that package is missing: its types stay unknown
