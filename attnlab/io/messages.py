"""How things from a file appear in messages: bounded one-line strings, state-dict keys by
the layer names of the network (and as earlier attnlab named them), short listings."""
from __future__ import annotations

from ..graph import Graph
from ..graph.names import learnable_name, legacy_module_key, module_path


def _show(text: str, n: int = 60) -> str:
    """A string from a file, safe to put in a message: one line, bounded."""
    text = str(text)
    text = text if text.isprintable() else repr(text)[1:-1]
    return text if len(text) <= n else text[: n - 1] + "…"


PREFIX = "layer_modules."     # where a Network keeps its layers' modules


def split_key(net, key: str) -> tuple[str, str] | None:
    """A state-dict key of `net` as (its layer, the rest): 'layer_modules.h.0.attn.query.weight'
    → ('h.0.attn', 'query.weight'), reading the module path (`graph.names.module_path`: the name's
    parts between dots) part by part; None for a key of no layer of `net`. No layer's path
    lies inside another's (`Graph.add` refuses that), so the first layer found is the one."""
    if not key.startswith(PREFIX):
        return None
    layers = net.layer_map
    parts = key[len(PREFIX):].split(".")
    for i in range(1, len(parts)):
        name = ".".join(parts[:i])
        if name in layers and module_path(name) == tuple(parts[:i]):
            return name, ".".join(parts[i:])
    return None


def _friendly(net, key: str) -> str:
    """A state-dict key as the learnables name it: 'layer_modules.h.0.fc.weight' → 'h.0.fc/weight'."""
    found = split_key(net, key)
    if found is not None:
        name, rest = found
        inner = net.layer_map[name]
        return learnable_name(name, _friendly(inner, rest) if isinstance(inner, Graph) else rest)
    if key.startswith(PREFIX) and key.count(".") >= 2:        # not a layer of `net`
        name, _, rest = key[len(PREFIX):].partition(".")
        return learnable_name(name, rest)
    return key


def legacy_key(net, key: str) -> str:
    """The name earlier attnlab gave to `net`'s state-dict key `key`: each '.' of a layer name
    written as U+2024 (`graph.names.legacy_module_key`), nested networks' keys likewise; `key` itself
    where the schemes agree."""
    found = split_key(net, key)
    if found is None:
        return key
    name, rest = found
    inner = net.layer_map[name]
    rest = legacy_key(inner, rest) if isinstance(inner, Graph) else rest
    return f"{PREFIX}{legacy_module_key(name)}.{rest}"


def legacy_keys(net, keys, given) -> dict[str, str]:
    """Old key → key, for the keys of `given` (a file's or a checkpoint's tensor names) that
    name one of `keys` (`net`'s state-dict keys) as earlier attnlab did: what to rename so the
    weights of an earlier file load. A given key that is one of `keys` stays, so nothing is
    ever renamed onto a name already meant as it is."""
    mine = set(keys)
    if all(k in mine for k in given):
        return {}
    old = {legacy_key(net, k): k for k in keys}
    return {k: old[k] for k in given if k not in mine and k in old and old[k] not in given}


def _listing(items, n=6):
    shown = ", ".join(items[:n])
    return shown + (f" and {len(items) - n} more" if len(items) > n else "")


def _first_line(e) -> str:
    s = str(e).strip()
    return s.splitlines()[0] if s else type(e).__name__

