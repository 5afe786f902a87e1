"""What a stream captures and patches at each step: `net.stream(capture=[patterns],
patch={name: tensor | callable})`.

Names are those of a trace, listed and selected by graph/sites.py: a layer's output
`"layer/port"` (or `"layer"` alone for its only output, under which it is then captured too),
a nested network's `"outer/inner/port"`, and each attention layer's inside, `"layer/query"`,
`"layer/key"`, `"layer/scores"`, `"layer/heads"`. `captured` gives them in the trace's order.

`Capture` resolves the names once, at stream creation, into what the step program needs:
for a layer output, a tap (`tap(key)`: a function the generated step calls on that value
alone, so names never enter the code); for an attention layer's inside, a probe that the
layer's stepper sets on its module for the duration of a step (the module's `attend` reads
it). Values computed once from static inputs are captured (and patched) once, at creation.
"""
from __future__ import annotations

from typing import Callable, Iterable

from torch import Tensor

from attnlab.functional.probe import PORTS as INSIDE, Patch, Probe, checked_patch
from ..graph.sites import PROBED, Sites, capture_patterns, patch_items

__all__ = ["Capture", "INSIDE", "PROBED"]

Key = tuple[str, str]          # (layer, nested layers joined by "/", port)


class Capture:
    """The names a stream captures and patches, resolved once, and the values of its last
    step: `values()` (name → tensor), the static ones included."""

    def __init__(self, net, capture: Iterable[str] | None, patch: dict | None,
                 caller: str = "stream") -> None:
        patterns, given = capture_patterns(capture, caller), patch_items(patch, caller)
        self.wanted: dict[Key, list[str]] = {}     # key → the names it is captured under
        self.patches: dict[Key, tuple[str, Patch]] = {}    # key → (its name, the patch)
        self.place: Callable[[str], int] = lambda name: 0   # nothing asked: nothing to order
        if patterns or given:          # the names (an analysis) are read only when asked
            self._resolve(Sites(net, caller), patterns, given)
        self.static: dict[str, Tensor] = {}       # captured once, at stream creation
        self.current: dict[str, Tensor] = {}      # the step being run
        self.last: dict[str, Tensor] = {}         # the last step that succeeded

    def _resolve(self, names: Sites, patterns: list[str],
                 given: list[tuple[str, Patch]]) -> None:
        def key(name: str) -> Key:
            return names.sites[name].layer, names.sites[name].port

        for pattern in patterns:
            # a layer's name alone captures its one output under that name too
            alias = pattern if pattern in names.aliases else None
            for n in names.select(pattern, "capture pattern"):
                under = self.wanted.setdefault(key(n), [])
                if (alias or n) not in under:
                    under.append(alias or n)
        for pattern, value in given:
            for n in names.select(pattern, "patch name"):
                self.patches[key(n)] = (n, value)
        self.place = names.place

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
        """The captured values by name, in the order the network makes them (a trace's)."""
        got = {**self.static, **self.last}
        return {n: got[n] for n in sorted(got, key=self.place)}


def _kept(value: Tensor) -> Tensor:
    """The value as captured: a copy when it is a view (of a key/value cache, which later
    steps write), so that it stays what this step computed."""
    return value.clone() if isinstance(value, Tensor) and value._base is not None else value
