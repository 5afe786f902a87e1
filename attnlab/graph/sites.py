"""The names of the values a network lets you look inside, the one list that `net.trace`,
a stream's `capture=`/`patch=` and `generate`'s `capture=` select from.

- each layer's output port, `"layer/port"` (a layer with one output port may be named
  `"layer"` alone, its alias), the input layers' included; a nested network's layers as
  `"outer/inner/port"`, to any depth;
- each attention layer's inside (functional/probe.py): `"layer/query"`, `"layer/key"`,
  `"layer/scores"`, `"layer/heads"`. An attention layer's own `scores` output is the same
  value under the same name.

The names come in the order the forward makes them (the analysis' order, layer by layer; a
nested network's after its own outputs). A pattern is a name, an alias or an `fnmatch`
pattern over both; one that matches nothing is refused with the names close to it, in the
words of the function that was called (`trace:`, `stream:`, `generate:`).
"""
from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Iterator, Mapping

from torch import Tensor

from attnlab.core.errors import ArgumentError, close_matches
from attnlab.functional.modules import AttentionModule, AttentionPoolModule
from attnlab.functional.probe import PORTS, Patch

from . import Graph
from .analysis import analyze

__all__ = ["Site", "Sites", "PROBED", "sites", "capture_patterns", "patch_items"]

PROBED = (AttentionModule, AttentionPoolModule)      # the modules that take a probe
EXAMPLE = "such as 'h.0.attn/scores' or 'h.*.attn/scores'"


@dataclass(frozen=True)
class Site:
    """Where a named value is made: the networks' layers down to it (`path`), and its port;
    `inside`: attention's inside (a probe port) rather than a layer's output."""
    path: tuple[str, ...]
    port: str
    inside: bool

    @property
    def layer(self) -> str:
        """The layer's name as messages and nested names spell it, `"outer/inner"`."""
        return "/".join(self.path)


def sites(net: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, Site, bool]]:
    """(name, site, single: the layer's only output) of every value `net` offers, in the
    order the forward makes them."""
    mods = net.layer_modules
    for lname in analyze(net, net.data_specs).order:
        layer = net.layer_map[lname]
        inner = path + (lname,)
        module = mods[lname] if lname in mods else None
        probed = isinstance(module, PROBED)
        outs = layer.output_ports
        for port in outs:
            if probed and port in PORTS:
                continue                                  # the probe's port of that name
            yield "/".join(inner + (port,)), Site(inner, port, False), len(outs) == 1
        if probed:
            for port in PORTS:
                yield "/".join(inner + (port,)), Site(inner, port, True), False
        if isinstance(layer, Graph) and module is not None:
            yield from sites(module, inner)


class Sites:
    """Every name a network offers: `sites` (name → Site, in order), `aliases` (a
    single-output layer's name → its output's name) and `order` (name → its place).
    `caller` is the function whose words a refusal speaks (`"trace"`, `"stream"`, …)."""

    def __init__(self, net: Any, caller: str) -> None:
        self.caller = caller
        self.sites: dict[str, Site] = {}
        self.aliases: dict[str, str] = {}
        for name, site, single in sites(net):
            self.sites[name] = site
            if single and site.layer not in self.sites:
                self.aliases.setdefault(site.layer, name)
        self.order = {n: i for i, n in enumerate(self.sites)}

    def place(self, name: str) -> int:
        """Where a name (or an alias, at the name it stands for) comes in the order."""
        return self.order[self.aliases.get(name, name)]

    def select(self, pattern: str, what: str) -> list[str]:
        """The names `pattern` stands for, in order: a name, a layer's name alone, or an
        `fnmatch` pattern over both; matching nothing is an ArgumentError with close names.
        `what` says which argument it came from ("capture pattern", "patch name")."""
        if pattern in self.sites:
            return [pattern]
        if pattern in self.aliases:
            return [self.aliases[pattern]]
        found = {n for n in self.sites if fnmatchcase(n, pattern)}
        found |= {n for a, n in self.aliases.items() if fnmatchcase(a, pattern)}
        if not found:
            raise self.unknown(pattern, what)
        return sorted(found, key=self.order.__getitem__)

    def unknown(self, pattern: str, what: str) -> ArgumentError:
        known = list(self.sites) + list(self.aliases)
        hint = close_matches(pattern, known) or (
            " Names look like " + ", ".join(f"'{n}'" for n in known[:4]) + "." if known else "")
        return ArgumentError(
            f"{self.caller}: {what} '{pattern}' matches no name of the network.{hint} Names "
            "are 'layer/port' (a nested network's 'outer/inner/port'), with 'layer/query', "
            "'layer/key', 'layer/scores' and 'layer/heads' for each attention layer; "
            "al.network.tracing.names(net) lists them all.")


def capture_patterns(capture: Any, caller: str) -> list[str]:
    """`capture=` as a list of patterns: None is none, a str is one; each a non-empty str."""
    if capture is None:
        return []
    if isinstance(capture, str):
        capture = [capture]
    try:
        patterns = list(capture)
    except TypeError:
        raise ArgumentError(f"{caller}: capture takes a list of names or fnmatch patterns "
                            f"{EXAMPLE}, received {type(capture).__name__}. Give e.g. "
                            "capture=['*/scores'].") from None
    for p in patterns:
        if not isinstance(p, str) or not p:
            raise ArgumentError(f"{caller}: capture takes names or patterns, each a non-empty "
                                f"string {EXAMPLE}, received {p!r} ({type(p).__name__}).")
    return patterns


def patch_items(patch: Any, caller: str) -> list[tuple[str, Patch]]:
    """`patch=` as (name or pattern, tensor or function) pairs, each checked; None is none."""
    if patch is None:
        return []
    if not isinstance(patch, Mapping):
        raise ArgumentError(f"{caller}: patch must be a dict of name → tensor or function, "
                            f"received {type(patch).__name__}. Give e.g. "
                            "patch={'fc/out': lambda v: v * 0}.")
    items: list[tuple[str, Patch]] = []
    for name, value in patch.items():
        if not isinstance(name, str) or not name:
            raise ArgumentError(f"{caller}: each patch name must be a non-empty string "
                                f"{EXAMPLE}, received {name!r}.")
        if not isinstance(value, Tensor) and not callable(value):
            raise ArgumentError(f"{caller}: the patch of '{name}' must be a tensor or a function "
                                f"of the value returning one (a tensor of the value's size or "
                                f"a callable value → replacement), received "
                                f"{type(value).__name__}.")
        items.append((name, value))
    return items
