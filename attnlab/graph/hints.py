"""A wrong argument to a graph edit, in words, and the fix: what was given instead of a layer
or a name (`Graph.add`, `connect`, `remove`, `replace`, …), and how to give what was meant."""
from __future__ import annotations

from typing import Mapping

from attnlab.layers.base import Layer


def described(value) -> str:
    """A wrong value in words: its type, and its repr when short."""
    if value is None:
        return "None"
    if isinstance(value, Layer):
        return f"layer '{value.name}' ({value.type_name})" if value.name else \
            f"a {value.type_name} layer"
    kind = type(value).__name__
    if type(value).__module__.startswith("torch"):
        if hasattr(value, "dim") and hasattr(value, "shape"):
            return f"a tensor of size {'×'.join(map(str, value.shape)) or '()'}"
        return f"a torch {'module' if hasattr(value, 'forward') else 'object'} {kind}"
    text = repr(value)
    return f"{text} ({kind})" if len(text) <= 40 else f"a {kind}"


def layer_fix(value) -> str:
    """How to give a layer instead of `value`."""
    if hasattr(value, "forward") and hasattr(value, "parameters"):          # a torch module
        return f"A torch module must be wrapped: L.Module({_module_text(value)})."
    if isinstance(value, type) and issubclass(value, Layer):
        return f"Make a layer of it first, e.g. {value.__name__}(...)."
    if isinstance(value, (list, tuple)):
        return "Give the layers in one flat list."
    return "Give a layer such as L.Dense(4), or a list of them."


def _module_text(value) -> str:
    kind = type(value)
    where_ = "torch.nn." if kind.__module__.startswith("torch.nn") else ""
    text = repr(value)
    return f"{where_}{text}" if "\n" not in text and len(text) <= 60 else f"{where_}{kind.__name__}(...)"


def name_fix(layers: Mapping[str, Layer], value, form: str) -> str:
    """The fix for a non-string where a layer (or port) name belongs, among `layers` (by name)."""
    if isinstance(value, Layer) and value.name is not None and \
            layers.get(value.name) is value:
        return f"Name the layer by its name: {form.format(value.name)}."
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(layers):
        name = list(layers)[value]
        use = f": {form.format(name)}" if form != "'{}'" else ""
        return f"Layers are named, not numbered: layer {value} is '{name}'{use}."
    names = ", ".join(list(layers)[:10])
    return f"Name a layer by its name (layers: {names or 'none'})."
