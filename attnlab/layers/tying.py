"""Tied weights: a layer whose `weight` is another layer's (`tied_to`), as GPT-2, BERT and T5
tie their output projection to the token embedding.

The tie is declared on the layer (``L.Dense(vocab, bias=False, tied_to="wte")``,
``L.Embedding(vocab, dim, tied_to="shared")``), so it is part of the graph: saved with it,
shown by `analyze()` (the weight listed once, as ``= wte/weight``), and made again whenever the
network builds its modules. The analysis checks each tie (`declared_ties`); the network makes
it (`tie_modules`), after which both layers hold the very same Parameter, so optimizers,
`.to()`, `state_dict` and the saved file (which stores it once) see one tensor.
"""
from __future__ import annotations

from typing import Any, Mapping

from torch import nn

from attnlab.core.errors import NetworkError, SizeError, close_matches
from attnlab.core import checks as check
from .base import check_name


class TiesWeight:
    """Mixin of the layers that take `tied_to` (Dense, Embedding): an untied layer's config
    leaves the argument out, so it is written and printed as before ties existed."""

    def config(self) -> dict:
        conf = super().config()  # type: ignore[misc]
        if conf.get("tied_to", "") is None:
            del conf["tied_to"]
        return conf


def tied_to_argument(owner, value) -> str | None:
    """The `tied_to` constructor argument: None or a layer name."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise check.fail(owner, "tied_to", "the name of the layer whose weight to share, or None",
                         value, "Use e.g. tied_to='wte' (an Embedding's name).")
    try:
        return check_name(value)
    except Exception as e:          # the name rules' own ArgumentError, named for this argument
        raise check.fail(owner, "tied_to", "a layer name", value, str(e).split(": ", 1)[-1]) \
            from None


def _root(layers: Mapping[str, Any], name: str) -> tuple[str | None, str | None]:
    """(the layer whose weight `name` ends up sharing, None) or (None, the problem)."""
    seen = [name]
    at = name
    while True:
        target = getattr(layers[at], "tied_to", None)
        if target is None:
            return at, None
        if target not in layers:
            hint = close_matches(target, list(layers))
            return None, (f"layer '{at}' ({layers[at].type_name}) argument 'tied_to': the network "
                          f"has no layer '{target}'.{hint} Name the Embedding (or Dense) whose "
                          "weight it shares, or add that layer.")
        if target in seen:
            ring = " → ".join(seen + [target])
            return None, (f"layer '{at}' ({layers[at].type_name}) argument 'tied_to': the ties "
                          f"form a cycle ({ring}), so no layer owns the weight. Remove tied_to "
                          "from one of them.")
        seen.append(target)
        at = target


def declared_ties(layers: Mapping[str, Any], learnables: Mapping[str, Mapping[str, tuple]]
                  ) -> tuple[dict[str, str], list[tuple[str, str, type]]]:
    """For the analysis: ({'layer/weight': 'owner/weight'} of the declared ties whose shapes
    fit, [(layer, message, error class)] of those that do not), from the learnables' shapes."""
    shared: dict[str, str] = {}
    problems: list[tuple[str, str, type]] = []
    for name, layer in layers.items():
        if getattr(layer, "tied_to", None) is None or name not in learnables:
            continue
        root, why = _root(layers, name)
        if root is None:
            problems.append((name, why or "", NetworkError))
            continue
        mine = learnables[name].get("weight")
        theirs = learnables.get(root, {}).get("weight")
        if theirs is None:
            if root in learnables:
                problems.append((name, f"layer '{name}' ({layer.type_name}) argument 'tied_to': "
                                 f"layer '{root}' ({layers[root].type_name}) has no weight to "
                                 "share. Tie it to an Embedding or a Dense.", NetworkError))
            continue                       # the owner's sizes are unknown: its own issue says why
        if mine is not None and tuple(mine) != tuple(theirs):
            problems.append((name, f"layer '{name}' ({layer.type_name}) argument 'tied_to': "
                             f"expected a weight of {_dims(mine)} to share, layer '{root}' "
                             f"({layers[root].type_name}) has {_dims(theirs)}. A tied output "
                             "projection needs Dense(vocab) on channels of the embedding's dim "
                             "(its weight vocab×dim is the embedding's).", SizeError))
            continue
        shared[f"{name}/weight"] = f"{root}/weight"
    return shared, problems


def tie_modules(layers: Mapping[str, Any], modules: Any) -> None:
    """Makes each tied layer's module hold its owner's `weight` Parameter (the analysis has
    checked the ties: a problem here is a NetworkError naming the layer). `modules` maps
    layer names to modules (`in` and `[]`), as `Network.layer_modules` does."""
    for name, layer in layers.items():
        if getattr(layer, "tied_to", None) is None or name not in modules:
            continue
        root, why = _root(layers, name)
        if root is None:
            raise NetworkError(why or f"layer '{name}' argument 'tied_to': no owner found.")
        owner = modules[root] if root in modules else None
        w = getattr(owner, "weight", None)
        mod = modules[name]
        if not isinstance(w, nn.Parameter) or getattr(mod, "weight", None) is None:
            raise NetworkError(f"layer '{name}' argument 'tied_to': layer '{root}' has no weight "
                               "to share. Tie it to an Embedding or a Dense.")
        if mod.weight is w:
            continue
        if mod.weight.shape != w.shape:
            raise SizeError(f"layer '{name}' argument 'tied_to': expected a weight of "
                            f"{_dims(mod.weight.shape)} to share, layer '{root}' has "
                            f"{_dims(w.shape)}.")
        mod.weight = w


def _dims(shape) -> str:
    return "×".join(map(str, shape))
