"""Freezing and unfreezing learnables by name pattern (`net.freeze`, `net.unfreeze`).

A pattern is an `fnmatch` pattern over learnable names, "layer/param" ("h.*.attn/*",
"wte/weight"), or over layer names alone ("h.0.attn": all of that layer's learnables, a
nested network's included). Freezing sets `requires_grad`; tied learnables are one Parameter,
so both names follow, and both are reported.
"""
from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any

from torch import nn

from attnlab.core.errors import ArgumentError, NetworkError, close_matches
from attnlab.graph.names import parse_learnable


def set_trainable(net: Any, patterns: tuple, trainable: bool) -> list[str]:
    """Sets `requires_grad` of every learnable a pattern matches; returns the sorted names
    changed (the matched ones and those tied to them)."""
    verb = "freeze" if not trainable else "unfreeze"
    learnables: dict[str, nn.Parameter] = net.learnables
    _check(verb, patterns, learnables)
    chosen = {id(p) for name, p in learnables.items()
              if any(matches(name, pat) for pat in patterns)}
    for name, p in learnables.items():
        if id(p) in chosen:
            p.requires_grad_(trainable)
    return sorted(name for name, p in learnables.items() if id(p) in chosen)


def matches(name: str, pattern: str) -> bool:
    """Whether learnable `name` matches `pattern`, as a whole name or by its layer (or any
    enclosing network's layer: "block" covers "block/attn/query.weight")."""
    if fnmatchcase(name, pattern):
        return True
    layer, _ = parse_learnable(name)
    parts = layer.split("/")
    return any(fnmatchcase("/".join(parts[:k]), pattern) for k in range(1, len(parts) + 1))


def _check(verb: str, patterns: tuple, learnables: dict) -> None:
    if not patterns:
        raise ArgumentError(f"{verb}: no pattern given. Name learnables or layers, e.g. "
                            f"net.{verb}('h.*.attn/*', 'wte/weight'), or net.{verb}('*') for all.")
    for pat in patterns:
        if not isinstance(pat, str) or not pat:
            raise ArgumentError(f"{verb}: each pattern must be a non-empty string such as "
                                f"'h.*.attn/*' or 'wte/weight', received {pat!r}.")
    if not learnables:
        raise NetworkError(f"{verb}: the network has no learnables yet (not initialised, or no "
                           "learnable layers). Call net.initialize(example_inputs) first.")
    for pat in patterns:
        if not any(matches(name, pat) for name in learnables):
            raise ArgumentError(f"{verb}: pattern '{pat}' matches no learnable."
                                + _hint(pat, learnables)
                                + " Patterns are fnmatch patterns over 'layer/param' names or "
                                  "layer names; see net.learnables for every name.")


def _hint(pattern: str, learnables: dict) -> str:
    layers = {parse_learnable(n)[0] for n in learnables}
    return close_matches(pattern, sorted(set(learnables) | layers))
