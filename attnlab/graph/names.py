"""The names of a graph's parts, each written and read in one place: a port's ("layer/port"),
a learnable's ("layer/param"), the module path a layer's name stands for; and the index of the
names a graph uses, which `Graph.add` asks for defaults and clashes. Nothing here holds a
graph: these are the rules its editing, analysis, files and engines share."""
from __future__ import annotations

from typing import Callable, Mapping, Sequence


def parse_port(ref: str) -> tuple[str, str]:
    """A port's name, "layer/port" or "layer", as (layer, port); port is "" when not named.
    The one place a port name is read (a layer name never holds '/')."""
    layer, _, port = ref.partition("/")
    return layer, port


def format_port(layer: str, port: str, ports: Sequence[str] | None = None) -> str:
    """The name of port `port` of layer `layer`: "layer/port", or "layer" alone when `ports`
    (the layer's ports on that side) is that one port. `ports=None` always names the port.
    The one place a port name is written."""
    return layer if ports is not None and len(ports) == 1 else f"{layer}/{port}"


def learnable_name(layer: str, param: str) -> str:
    """The name of a layer's learnable (or of any entry kept per layer, such as a stepper),
    "layer/param"; a nested network's entries keep their own names after its layer's
    ("block/self_attn/query.weight"). The one place such a name is written."""
    return f"{layer}/{param}"


def parse_learnable(name: str) -> tuple[str, str]:
    """A learnable's name as (the layer, nested layers joined, and the parameter)."""
    layer, _, param = name.rpartition("/")
    return layer, param


def under_layer(layer: str, entries: Mapping) -> dict:
    """`entries` (parameter → value) named after `layer`, as `learnable_name` writes them."""
    return {learnable_name(layer, k): v for k, v in entries.items()}


def module_path(name: str) -> tuple[str, ...]:
    """Where a layer's module sits under `Network.layer_modules`: the parts of its name between
    dots, each part but the last a container, as a Hugging Face model nests its modules
    ('h.0.attn' → 'h', '0', 'attn'). So `named_parameters()`, `state_dict()` keys and
    `get_submodule` spell a layer's name exactly ('layer_modules.h.0.attn.query.weight'); a
    name without dots is one part. The one place a layer name becomes a module path (`Graph.add`
    refuses names whose paths cannot be)."""
    return tuple(name.split("."))


def legacy_module_key(name: str) -> str:
    """The one key under which earlier attnlab kept a layer's module, each '.' of the name
    written as U+2024 (ONE DOT LEADER): how files and checkpoints saved then name weights.
    Read only, to load them (`attnlab.io.messages.legacy_keys`)."""
    return name.replace(".", "\u2024")


def module_containers(name: str) -> list[str]:
    """The containers a layer's module sits in, as layer-name prefixes: 'h.0.attn' → 'h', 'h.0'."""
    parts = module_path(name)
    return [".".join(parts[:i]) for i in range(1, len(parts))]


class NameIndex:
    """What `Graph.add` asks of the names in use, kept up to date edit by edit (so that adding
    a layer does not cost time in proportion to the layers already there): the containers that
    dotted names make (`module_path`: 'h' and 'h.0' for 'h.0.attn'), each with the layers under
    it, and, per stem, the suffix from which to look for the next free default name ("relu_7":
    every "relu_1" … "relu_6" is taken)."""

    __slots__ = ("under", "start", "count")

    def __init__(self, names=()):
        self.under: dict[str, dict[str, None]] = {}     # container → the layers under it
        self.start: dict[str, int] = {}
        self.count = 0
        for n in names:
            self.added(n)

    def __len__(self) -> int:
        return self.count

    def added(self, name: str) -> None:
        self.count += 1
        for c in module_containers(name):
            self.under.setdefault(c, {})[name] = None

    def removed(self, name: str) -> None:
        self.count -= 1
        for c in module_containers(name):
            below = self.under[c]
            del below[name]
            if not below:
                del self.under[c]
        stem, _, suffix = name.rpartition("_")
        if stem in self.start and suffix.isascii() and suffix.isdigit():
            self.start[stem] = min(self.start[stem], int(suffix))      # free again

    def fresh(self, stem: str, taken: Callable[[str], bool], first_plain: bool = False) -> str:
        """The default name for a layer of this stem: the stem itself (`first_plain`) or
        "stem_i" with the least i ≥ 1 not `taken`, as if counted from 1 each time."""
        if first_plain and not taken(stem):
            return stem
        i = self.start.get(stem, 1)
        while taken(f"{stem}_{i}"):
            i += 1
        self.start[stem] = i            # all below are taken; i itself maybe next
        return f"{stem}_{i}"
