"""What "the same graph" means for the examples: the same layers (type, name, config — nested
networks compared layer by layer) in the same order, and the same connections."""
from __future__ import annotations

import attnlab as al


def graph_signature(net: al.Network):
    """([(type, name, config or nested signature)], [(source, destination)])."""
    layers = []
    for layer in net.layers:
        cfg = graph_signature(layer) if isinstance(layer, al.Network) else layer.config()
        layers.append((type(layer).__name__, layer.name, cfg))
    return layers, [tuple(c) for c in net.connections]


def assert_same_graph(a: al.Network, b: al.Network, what: str = "the two versions") -> None:
    """Raises AssertionError naming the first layer or connection that differs."""
    (la, ca), (lb, cb) = graph_signature(a), graph_signature(b)
    for i, (x, y) in enumerate(zip(la, lb)):
        if x != y:
            raise AssertionError(f"{what}: layer {i + 1} differs: {x} vs {y}")
    if len(la) != len(lb):
        raise AssertionError(f"{what}: {len(la)} vs {len(lb)} layers")
    if ca != cb:
        raise AssertionError(f"{what}: connections differ: {sorted(set(ca) ^ set(cb))}")
