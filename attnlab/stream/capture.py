"""What a stream captures and patches at each step: `net.stream(capture=[patterns],
patch={name: tensor | callable})`.

Names are those of a trace: a layer's output `"layer/port"` (or `"layer"` alone for its only
output), a nested network's `"outer/inner/port"`, and each attention layer's inside,
`"layer/query"`, `"layer/key"`, `"layer/scores"`, `"layer/heads"`. Patterns are `fnmatch`
patterns over them; a pattern that matches nothing is refused with the names close to it.

`Capture` resolves the names once, at stream creation, into what the step program needs:
for a layer output, a tap (`tap(key)`: a function the generated step calls on that value
alone, so names never enter the code); for an attention layer's inside, a probe that the
layer's stepper sets on its module for the duration of a step (the module's `attend` reads
it). Values computed once from static inputs are captured (and patched) once, at creation.
"""
from __future__ import annotations

import fnmatch
from typing import Callable, Iterable, Iterator

from torch import Tensor

from attnlab.core.errors import ArgumentError, close_matches
from attnlab.functional.modules import AttentionModule, AttentionPoolModule
from attnlab.functional.probe import PORTS as INSIDE, Patch, Probe, checked_patch
from ..graph import Graph
from ..graph.names import learnable_name

Key = tuple[str, str]          # (layer, nested layers joined by "/", port)
PROBED = (AttentionModule, AttentionPoolModule)      # the modules that take a probe


def capturable(net, prefix: str = "") -> Iterator[tuple[str, Key, bool]]:
    """(name, (layer, port), single) of every value a stream of `net` can capture, as a trace
    names them: each layer's outputs (`single`: the layer's only one, which its layer's name
    alone names too), nested networks' layers, and the inside of each attention layer (whose
    own `scores` output is the same value under the same name)."""
    for name, layer in net.layer_map.items():
        path = prefix + name
        module = None if layer.is_input else net.layer_modules[name]
        probed = isinstance(module, PROBED)
        ports = tuple(layer.output_ports)
        for port in ports:
            if not (probed and port in INSIDE):
                yield learnable_name(path, port), (path, port), len(ports) == 1
        if probed:
            for port in INSIDE:
                yield learnable_name(path, port), (path, port), False
        if isinstance(layer, Graph):
            yield from capturable(layer, learnable_name(path, ""))


class Capture:
    """The names a stream captures and patches, resolved once, and the values of its last
    step: `values()` (name → tensor), the static ones included."""

    def __init__(self, net, capture: Iterable[str] | None, patch: dict | None) -> None:
        self.known: dict[str, Key] = {}
        self.aliases: dict[str, str] = {}         # a single-output layer's name → its output's
        for name, key, single in capturable(net):
            self.known[name] = key
            if single and key[0] not in self.known:
                self.aliases.setdefault(key[0], name)
        self.wanted: dict[Key, list[str]] = {}     # key → the names it is captured under
        for pattern in _patterns(capture):
            for n in self._select(pattern, "capture"):
                key = self.known[self.aliases.get(n, n)]
                names = self.wanted.setdefault(key, [])
                if n not in names:
                    names.append(n)
        self.patches: dict[Key, tuple[str, Patch]] = {}    # key → (its name, the patch)
        for pattern, value in _patch_items(patch):
            for n in self._select(pattern, "patch"):
                self.patches[self.known[n]] = (n, value)
        self.static: dict[str, Tensor] = {}       # captured once, at stream creation
        self.current: dict[str, Tensor] = {}      # the step being run
        self.last: dict[str, Tensor] = {}         # the last step that succeeded

    def _select(self, pattern: str, argument: str) -> list[str]:
        """The names `pattern` stands for: a name, a layer's name alone (its one output:
        then captured under that name too), or an `fnmatch` pattern over both; matching
        nothing is an ArgumentError naming the close names."""
        if pattern in self.known:
            return [pattern]
        if pattern in self.aliases:
            return [pattern] if argument == "capture" else [self.aliases[pattern]]
        found = [n for n in self.known if fnmatch.fnmatchcase(n, pattern)]
        found += [n for a, n in self.aliases.items()
                  if fnmatch.fnmatchcase(a, pattern) and n not in found]
        if not found:
            raise _unknown(argument, pattern, list(self.known) + list(self.aliases))
        return found

    def __bool__(self) -> bool:
        return bool(self.wanted or self.patches)

    # -- what the program asks ---------------------------------------------------------------
    def touches(self, layer: str, port: str) -> bool:
        return (layer, port) in self.wanted or (layer, port) in self.patches

    def within(self, network: str) -> bool:
        """Whether a value of a layer inside nested network `network` is captured or
        patched."""
        under = network + "/"
        return any(key[0].startswith(under) for key in (*self.wanted, *self.patches))

    def inside(self, layer: str) -> bool:
        """Whether the attention layer's inside is captured or patched."""
        return any(self.touches(layer, p) for p in INSIDE)

    def tap(self, layer: str, port: str, static: bool = False) -> Callable[[Tensor], Tensor]:
        """`tap(value) → value`: records the value under its names, and returns its patched
        replacement (the value itself when it is not patched), refused unless it has the
        value's size, dtype and device."""
        record = self._recorder(layer, static)
        patch = self.patches.get((layer, port))

        def tap(value: Tensor) -> Tensor:
            record(port, value)
            if patch is None:
                return value
            given = patch[1]
            new = given(value) if callable(given) else given
            return checked_patch(layer, port, value, new, callable(given))
        return tap

    def probe(self, layer: str, static: bool = False) -> Probe:
        """The `Probe` of an attention layer's inside, recording into this capture."""
        return Probe([p for p in INSIDE if (layer, p) in self.wanted],
                     {p: self.patches[(layer, p)][1] for p in INSIDE
                      if (layer, p) in self.patches},
                     layer, self._recorder(layer, static))

    def _recorder(self, layer: str, static: bool) -> Callable[[str, Tensor], None]:
        """`record(port, value)`: the value kept under each name it is captured as, in the
        static values or the current step's."""
        def record(port: str, value: Tensor) -> None:
            names = self.wanted.get((layer, port), ())
            if names:
                kept = _kept(value)
                into = self.static if static else self.current
                for n in names:
                    into[n] = kept
        return record

    # -- the stream's steps ------------------------------------------------------------------
    def begin(self) -> None:
        self.current = {}

    def commit(self) -> None:
        self.last = self.current

    def reset(self) -> None:
        self.current, self.last = {}, {}

    def values(self) -> dict[str, Tensor]:
        return {**self.static, **self.last}


def _patterns(capture) -> list[str]:
    if capture is None:
        return []
    if isinstance(capture, str):
        capture = [capture]
    try:
        patterns = list(capture)
    except TypeError:
        raise ArgumentError(f"argument 'capture': expected a list of names or fnmatch "
                            f"patterns ('layer/port', 'h.*.attn/scores'), received "
                            f"{type(capture).__name__}. Give e.g. capture=['*/scores'].") from None
    bad = [p for p in patterns if not isinstance(p, str) or not p]
    if bad:
        raise ArgumentError(f"argument 'capture': expected names or patterns (str), "
                            f"received {bad[0]!r} ({type(bad[0]).__name__}). Give e.g. "
                            "capture=['*/scores'].")
    return patterns


def _patch_items(patch) -> list[tuple[str, Patch]]:
    """The patches given, each a name (or pattern) and a tensor or callable, checked."""
    if patch is None:
        return []
    if not isinstance(patch, dict):
        raise ArgumentError(f"argument 'patch': expected a dict name → tensor or "
                            f"callable, received {type(patch).__name__}. Give e.g. "
                            "patch={'fc/out': lambda v: v * 0}.")
    items: list[tuple[str, Patch]] = []
    for name, value in patch.items():
        if not isinstance(name, str) or not name:
            raise ArgumentError(f"argument 'patch': names are str ('layer/port'), received "
                                f"{name!r}.")
        if not (isinstance(value, Tensor) or callable(value)):
            raise ArgumentError(f"argument 'patch': '{name}' must be a tensor (the step's "
                                f"value) or a callable value → replacement, received "
                                f"{type(value).__name__}.")
        items.append((name, value))
    return items


def _unknown(argument: str, name: str, known: list[str]) -> ArgumentError:
    hint = close_matches(name, known) or (" Names look like " + ", ".join(
        f"'{n}'" for n in list(known)[:4]) + "." if known else "")
    return ArgumentError(f"argument '{argument}': '{name}' matches no name of this network "
                         f"(a layer output 'layer/port', or an attention layer's "
                         f"{'/'.join(INSIDE)}).{hint}")


def _kept(value: Tensor) -> Tensor:
    """The value as captured: a copy when it is a view (of a key/value cache, which later
    steps write), so that it stays what this step computed."""
    return value.clone() if isinstance(value, Tensor) and value._base is not None else value
