"""The schema of a saved network's JSON, for input from anywhere: the limits (`LIMITS`) and
the checks of every value against them (types, ranges, lengths, nesting, names, specs, a
layer's config keys against its constructor's parameters).

A file is data from anywhere. Loading reads it in this order, each step bounded and checked
before the next one allocates: the file's kind (first bytes) → the zip's member list (names,
methods, declared sizes, compression ratios) → network.json, read in chunks up to a limit →
the JSON against this schema (types, ranges, lengths, nesting, layer types from the
registry, config keys against the constructor's parameters, specs through Spec) → the graph,
then its weights' shapes on the meta device (nothing allocated) → the safetensors header
against those shapes → only then the tensors, read straight into their own memory.
"""
from __future__ import annotations

import json
import re
import sys

from attnlab.core.errors import AttnlabError, NetworkError, close_matches
from attnlab.core.spec import Spec
from .messages import _show

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

_MAX_SIZE = 2**31 - 1                            # a size in a spec
_MAX_INT = 2**53                                  # an int in a config
_SPEC_LABELS = frozenset("BTCSHQK")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


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
    from ..layers.base import check_name
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

