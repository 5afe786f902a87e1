"""How things from a file appear in messages: bounded one-line strings, state-dict keys by
the layer names of the network, short listings."""
from __future__ import annotations

from ..graph import Graph, learnable_name, module_key


def _show(text: str, n: int = 60) -> str:
    """A string from a file, safe to put in a message: one line, bounded."""
    text = str(text)
    text = text if text.isprintable() else repr(text)[1:-1]
    return text if len(text) <= n else text[: n - 1] + "…"


def _friendly(net, key: str) -> str:
    """A state-dict key as the learnables name it: 'layer_modules.fc.weight' → 'fc/weight'."""
    layers = net.layer_map
    for name in sorted(layers, key=len, reverse=True):
        prefix = f"layer_modules.{module_key(name)}."
        if key.startswith(prefix):
            rest = key[len(prefix):]
            inner = layers[name]
            return learnable_name(name, _friendly(inner, rest) if isinstance(inner, Graph) else rest)
    if key.startswith("layer_modules.") and key.count(".") >= 2:        # not a layer of `net`
        name, _, rest = key[len("layer_modules."):].partition(".")
        return learnable_name(name, rest)
    return key


def _listing(items, n=6):
    shown = ", ".join(items[:n])
    return shown + (f" and {len(items) - n} more" if len(items) > n else "")


def _first_line(e) -> str:
    s = str(e).strip()
    return s.splitlines()[0] if s else type(e).__name__

