"""Looking inside a network: `net.trace(inputs, capture=[patterns], patch={name: …})`.

Every value a trace can reach has a name, listed and selected by graph/sites.py (the same
names a stream captures): each layer's output `"layer/port"` (or `"layer"` alone for its only
output), a nested network's `"outer/inner/port"`, and each attention layer's inside,
`"layer/query"`, `"layer/key"` (B×H×T×dk after rotary; the keys with the key/value heads under
grouped-query attention), `"layer/scores"` (B×H×Tq×Tk, the softmax weights, 0 at padded keys)
and `"layer/heads"` (B×Tq×H×dv, before the output projection).

Captures are `fnmatch` patterns over these names; patches are names (or patterns) to a tensor
of the value's size or a function of the value returning one. Only what is asked for is kept
or touched: attention's inside through a `Probe` set on the module for the call (the fused
kernel runs wherever the weights are not asked for), layer outputs through a traced plan
(graph/plan.py) that calls a tap on the asked values alone. Captured values keep their
autograd graph (unless the caller runs under `torch.no_grad()`), so gradients flow through a
trace.
"""
from __future__ import annotations

import weakref
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence, Union

from torch import Tensor

from attnlab.core.errors import ArgumentError, AttnlabError, close_matches
from attnlab.functional.probe import Patch, Probe, checked_patch
from attnlab.graph.analysis import analyze
from attnlab.graph.codegen import input_key
from attnlab.graph.plan import Plan, build_plan
from attnlab.graph.sites import Site, Sites, capture_patterns, patch_items

__all__ = ["Trace", "trace", "names"]


def _size(t: Any) -> str:
    if isinstance(t, Tensor):
        return "×".join(str(s) for s in t.shape) if t.dim() else "a scalar"
    return type(t).__name__


class Trace(Mapping[str, Tensor]):
    """What a trace kept: `outputs` (what the network gives for these inputs with the
    patches applied: a tensor, or a dict by output name), and each captured value by name
    (`t["h.0.attn/scores"]`; a single-output layer's value also by the layer's name alone).
    `list(t)` gives the names captured, in the order the network made them."""

    def __init__(self, outputs: Any, values: dict[str, Tensor], aliases: dict[str, str]):
        self.outputs = outputs
        self._values = values
        self._aliases = aliases

    def _name(self, name: str) -> str:
        return name if name in self._values else self._aliases.get(name, name)

    def __getitem__(self, name: str) -> Tensor:
        key = self._name(name)
        if key not in self._values:
            raise ArgumentError(f"trace: nothing captured under '{name}'."
                                + close_matches(name, list(self._values))
                                + " Capture it: net.trace(inputs, capture=[name]); list(trace) "
                                  "shows the names captured.")
        return self._values[key]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._name(name) in self._values

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        if isinstance(self.outputs, dict):
            outs = ", ".join(f"{k}: {_size(v)}" for k, v in self.outputs.items())
        else:
            outs = _size(self.outputs)
        width = max((len(n) for n in self._values), default=0)
        rows = "".join(f"\n  {n:<{width}}  {_size(v)}" for n, v in self._values.items())
        return f"Trace(outputs {outs}; {len(self)} captured{':' if rows else ''}{rows})"


# -- the names a network offers (graph/sites.py) ------------------------------------------

def _analysis(net: Any):
    """The analysis the network's plan was made from (at the sizes it had)."""
    return analyze(net, net._data_specs)


# network → (the plan its names were read from, its Catalogue): beside the network rather
# than on it, so that copying or pickling a network never meets generated code
_CATALOGUES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def catalogue(net: Any) -> Catalogue:
    """The network's names, made once per plan (a graph edit makes them anew)."""
    held = _CATALOGUES.get(net)
    if held is not None and held[0] is net._plan:
        return held[1]
    made = Catalogue(net)
    _CATALOGUES[net] = (net._plan, made)
    return made


class Catalogue(Sites):
    """The network's names in a trace's words, with the traced plans made for them."""

    def __init__(self, net: Any) -> None:
        super().__init__(net, "trace")
        # traced plans by the layer outputs they tap, with their taps: made once each
        self.plans: dict[frozenset[str], tuple[Plan, list[_Tap]]] = {}


def names(net: Any) -> list[str]:
    """Every name `net.trace` can capture or patch, in the order the network makes them."""
    if net._plan is None:
        net._prepare()
    return list(catalogue(net).sites)


# -- running -------------------------------------------------------------------------------

class _Asked:
    """What one call asks: per name, captured or not and its patch."""

    def __init__(self, catalogue: Catalogue, capture: Any, patch: Any) -> None:
        self.capture: set[str] = set()
        for pat in capture_patterns(capture, "trace"):
            self.capture.update(catalogue.select(pat, "capture pattern"))
        self.patch: dict[str, Patch] = {}
        for pat, value in patch_items(patch, "trace"):
            for name in catalogue.select(pat, "patch name"):
                self.patch[name] = value
        self.sites = {n: catalogue.sites[n] for n in catalogue.sites
                      if n in self.capture or n in self.patch}


def _untouched(name: str, site: Site, value: Any) -> Any:
    return value


class _Tap:
    """The tap of one traced plan: value i is `names[i]`'s, handed to `call` (name, site,
    value), which a trace sets for its run: it keeps the value and returns its replacement."""

    def __init__(self, names: list[str], sites: list[Site]) -> None:
        self.names, self.sites = names, sites
        self.call: Callable[[str, Site, Any], Any] = _untouched

    @property
    def busy(self) -> bool:
        """Whether a trace is running through this tap (a patch function tracing again)."""
        return self.call is not _untouched

    def __call__(self, i: int, value: Any) -> Any:
        return self.call(self.names[i], self.sites[i], value)


class _Nested:
    """A nested network's traced plan, called as the outer plan calls that network's module
    (inputs by position, their masks by `_masks=`)."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan

    def __call__(self, *xs: Any, _masks: Any) -> Any:
        flat = [v for pair in zip(xs, _masks) for v in pair]
        return self.plan.fn(self.plan.mods, *flat)


def _traced_plan(net: Any, asked: dict[str, Site], depth: int, taps: list[_Tap]) -> Plan:
    """`net`'s plan with taps on the asked layer outputs at this depth of `path`, and the
    nested networks holding asked outputs replaced by their own traced plans."""
    mine = [(n, s) for n, s in asked.items() if len(s.path) == depth + 1]
    keys = []
    for n, s in mine:
        layer = net.layer_map[s.path[-1]]
        keys.append(input_key(net, s.path[-1]) if layer.is_input else (s.path[-1], s.port))
    tap = _Tap([n for n, _ in mine], [s for _, s in mine])
    taps.append(tap)
    nested = {}
    for lname in {s.path[depth] for s in asked.values() if len(s.path) > depth + 1}:
        inner = {n: s for n, s in asked.items()
                 if len(s.path) > depth + 1 and s.path[depth] == lname}
        nested[lname] = _Nested(_traced_plan(net.layer_modules[lname], inner, depth + 1, taps))
    return build_plan(net, _analysis(net), keys, tap, nested)


def trace(net: Any, args: tuple, kwargs: dict, capture: Union[str, Sequence[str]] = (),
          patch: Optional[Mapping[str, Patch]] = None) -> Trace:
    """`net.trace`: run `net` on the inputs (`args`, `kwargs` as its forward takes them) with
    the values asked for captured and patched (see the module doc)."""
    plan = net._plan if net._plan is not None else net._prepare(args, kwargs)
    if net._edits[0] != net._made:
        plan = net._replan()
    names_ = catalogue(net)
    asked = _Asked(names_, capture, patch)
    values: dict[str, Tensor] = {}

    def keep(name: str, site: Site, value: Any) -> Any:
        if name in asked.capture:
            values[name] = value
        given = asked.patch.get(name)
        if given is None:
            return value
        new = given(value) if callable(given) else given
        return checked_patch(site.layer, site.port, value, new, callable(given))

    outputs_asked = {n: s for n, s in asked.sites.items() if not s.inside}
    taps: list[_Tap] = []
    if outputs_asked:
        key = frozenset(outputs_asked)
        held = names_.plans.get(key)
        if held is not None and not any(t.busy for t in held[1]):
            plan, taps = held
        else:             # made once; anew while that one runs (a trace inside a patch)
            plan = _traced_plan(net, outputs_asked, 0, taps)
            names_.plans.setdefault(key, (plan, taps))
    probes = _probes(net, asked, values)
    try:
        for tap in taps:
            tap.call = keep
        outs = _run(net, plan, args, kwargs)
    finally:
        _restore(probes)
        for tap in taps:
            tap.call = _untouched
    ordered = {n: values[n] for n in sorted(values, key=names_.order.__getitem__)}
    return Trace(outs, ordered, names_.aliases)


def _probes(net: Any, asked: _Asked, values: dict[str, Tensor]) -> list[tuple[Any, Any]]:
    """Sets a Probe on each attention module asked about, which keeps its captured values in
    `values` by name; returns (module, its probe before) for each, to restore."""
    by_layer: dict[tuple[str, ...], dict[str, str]] = {}       # path → port → name
    for name, site in asked.sites.items():
        if site.inside:
            by_layer.setdefault(site.path, {})[site.port] = name
    done: list[tuple[Any, Any]] = []
    try:
        for path, ports in by_layer.items():
            module = _module(net, path)
            probe = Probe(capture=[p for p, n in ports.items() if n in asked.capture],
                          patch={p: asked.patch[n] for p, n in ports.items() if n in asked.patch},
                          layer="/".join(path),
                          record=_keeper(values, ports))
            done.append((module, module.probe))
            module.probe = probe
    except BaseException:
        _restore(done)
        raise
    return done


def _keeper(values: dict[str, Tensor], ports: dict[str, str]) -> Callable[[str, Tensor], None]:
    """Keeps a probe's captured value of `port` in `values` under its full name."""
    def keep(port: str, value: Tensor) -> None:
        values[ports[port]] = value
    return keep


def _restore(done: list[tuple[Any, Any]]) -> None:
    for module, before in reversed(done):
        module.probe = before


def _module(net: Any, path: tuple[str, ...]) -> Any:
    mod = net
    for part in path:
        mod = mod.layer_modules[part]
    return mod


def _run(net: Any, plan: Plan, args: tuple, kwargs: dict) -> Any:
    """The network's forward through `plan`, as `net(*args, **kwargs)` gives it."""
    flat = net._flatten_inputs(args, kwargs)
    try:
        outs, _ = plan.fn(plan.mods, *flat)
    except AttnlabError:
        raise
    except (RuntimeError, IndexError, ValueError) as e:
        raise net._translate(e, flat[0::2]) from None
    if len(outs) == 1:
        return outs[0]
    return dict(zip(net._out_names, outs))

