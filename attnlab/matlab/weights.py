"""Weights by MATLAB name (Weights, Bias, InputWeights, RecurrentWeights, QueryWeights, …) in
MATLAB's shapes, and MATLAB's WeightsInitializer/BiasInitializer.

attnlab layers hold no tensors: the network builds each layer's torch module once the sizes are
known. So a weight or initializer given to a layer before that (`fullyConnectedLayer(2,
Weights=W)`, `layers(2).Bias = b`, `WeightsInitializer="he"`) is kept here as a *preset*, and
`apply_presets(net)` writes it into the built module; the attnlab.matlab functions that build a
network (dlnetwork, initialize, trainnet, …) call it. A built network's weights are read and
written with `getLayerWeights(net, name)` / `setLayerWeights(net, name, Weights=W)`.

MATLAB stores data channel-first and column-major; the conversions below are the only place
that knows the two layouts (docs/matlab.md, "Weights by MATLAB name", lists the shapes).
"""
from __future__ import annotations

import contextvars
import functools
import math
import weakref
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from attnlab.core.errors import ArgumentError, SizeError, close_matches

if TYPE_CHECKING:                          # annotations only: no import at run time
    from ..network import Network

__all__ = ["getLayerWeights", "setLayerWeights"]

INITIALIZERS = ("glorot", "he", "narrow-normal", "zeros", "ones", "orthogonal", "unit-forget-gate")

# layer → {"weights": {MATLAB name: array}, "init": {MATLAB option: word}}; weak: presets die with
# their layer. `_applied` remembers which built module got them, so a rebuild applies them again.
_presets: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_applied: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_owner: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_collecting: contextvars.ContextVar = contextvars.ContextVar("matlab_presets", default=None)


# ============================================================ MATLAB name ↔ torch parameter ===
# Each entry: MATLAB name → (torch parameter names, description of MATLAB's shape,
# to_matlab(tensors) → tensor, from_matlab(tensor, shapes of the torch parameters) → tensors).

def _who(layer) -> str:
    return f"layer '{layer.name}'" if layer.name else f"a {type(layer).__name__} layer"


def _col(t):
    return t.reshape(-1, 1)


def _dense():
    return {"Weights": (("weight",), "OutputSize×InputSize", lambda w: w, lambda v, s: (v,)),
            "Bias": (("bias",), "OutputSize×1", _col, lambda v, s: (v.reshape(s[0]),))}


def _conv1d():
    return {"Weights": (("weight",), "FilterSize×NumChannels×NumFilters",
                        lambda w: w.permute(2, 1, 0), lambda v, s: (v.permute(2, 1, 0),)),
            "Bias": (("bias",), "1×NumFilters", lambda b: b.reshape(1, -1),
                     lambda v, s: (v.reshape(s[0]),))}


def _conv2d():
    return {"Weights": (("weight",), "FilterSize(1)×FilterSize(2)×NumChannels×NumFilters",
                        lambda w: w.permute(2, 3, 1, 0), lambda v, s: (v.permute(3, 2, 0, 1),)),
            "Bias": (("bias",), "1×1×NumFilters", lambda b: b.reshape(1, 1, -1),
                     lambda v, s: (v.reshape(s[0]),))}


def _lstm(bidirectional: bool):
    # MATLAB and torch stack the gates in the same order (input, forget, cell candidate,
    # output). MATLAB has one bias, torch two that add up: set, the recurrent one becomes 0.
    # bilstmLayer stacks the forward direction above the backward one.
    dirs = ("_l0", "_l0_reverse") if bidirectional else ("_l0",)
    n = 8 if bidirectional else 4

    def names(kind):
        return tuple(f"{kind}{d}" for d in dirs)

    def split(v, s):
        return tuple(v.split([x[0] for x in s]))

    def bias_get(*bs):
        return _col(torch.cat([bs[i] + bs[i + len(dirs)] for i in range(len(dirs))]))

    def bias_set(v, s):
        parts = v.reshape(-1).split([x[0] for x in s[:len(dirs)]])
        return (*parts, *(torch.zeros(x) for x in s[len(dirs):]))

    return {"InputWeights": (names("weight_ih"), f"{n}*NumHiddenUnits×InputSize",
                             lambda *w: torch.cat(w), split),
            "RecurrentWeights": (names("weight_hh"), f"{n}*NumHiddenUnits×NumHiddenUnits",
                                 lambda *w: torch.cat(w), split),
            "Bias": (names("bias_ih") + names("bias_hh"), f"{n}*NumHiddenUnits×1",
                     bias_get, bias_set)}


def _grouped(fpg):
    # MATLAB: FilterSize(1)×FilterSize(2)×NumChannelsPerGroup×NumFiltersPerGroup×NumGroups;
    # torch: (NumGroups·NumFiltersPerGroup)×NumChannelsPerGroup×FilterSize(1)×FilterSize(2)
    def to_m(w):
        g = w.shape[0] // fpg
        return w.reshape(g, fpg, *w.shape[1:]).permute(3, 4, 2, 1, 0)

    return {"Weights": (("weight",), "FilterSize(1)×FilterSize(2)×NumChannelsPerGroup×"
                        "NumFiltersPerGroup×NumGroups", to_m,
                        lambda v, s: (v.permute(4, 3, 2, 0, 1).reshape(s[0]),)),
            "Bias": (("bias",), "1×1×NumFiltersPerGroup×NumGroups",
                     lambda b: b.reshape(-1, fpg).t().reshape(1, 1, fpg, -1),
                     lambda v, s: (v.reshape(fpg, -1).t().reshape(s[0]),))}


def _gru(layer):
    # MATLAB and torch stack the gates in the same order (reset, update, candidate). With
    # ResetGateMode "recurrent-bias-after-multiplication" (what torch computes) MATLAB's Bias is
    # 6·H: the input biases above the recurrent ones; with the default "after-multiplication"
    # it is 3·H, read as their sum (exact: setting it zeroes the recurrent biases).
    dirs = ("_l0", "_l0_reverse") if getattr(layer, "bidirectional", False) else ("_l0",)

    def names(kind):
        return tuple(f"{kind}{d}" for d in dirs)

    def split(v, s):
        return tuple(v.split([x[0] for x in s]))

    six = layer.__dict__.get("_matlab_reset_gate_mode") == "recurrent-bias-after-multiplication"
    n = len(dirs)
    if six:
        bias = (names("bias_ih") + names("bias_hh"), "6*NumHiddenUnits×1",
                lambda *bs: _col(torch.cat(bs)), lambda v, s: split(v.reshape(-1), s))
    else:
        bias = (names("bias_ih") + names("bias_hh"), "3*NumHiddenUnits×1",
                lambda *bs: _col(torch.cat([bs[i] + bs[i + n] for i in range(n)])),
                lambda v, s: (*v.reshape(-1).split([x[0] for x in s[:n]]),
                              *(torch.zeros(x) for x in s[n:])))
    return {"InputWeights": (names("weight_ih"), "3*NumHiddenUnits×InputSize",
                             lambda *w: torch.cat(w), split),
            "RecurrentWeights": (names("weight_hh"), "3*NumHiddenUnits×NumHiddenUnits",
                                 lambda *w: torch.cat(w), split),
            "Bias": bias}


def _norm():
    return {"Scale": (("weight",), "NumChannels×1", _col, lambda v, s: (v.reshape(s[0]),)),
            "Offset": (("bias",), "NumChannels×1", _col, lambda v, s: (v.reshape(s[0]),))}


def _embedding():
    # attnlab keeps MATLAB's 1-based indices: row 0 of torch's table is never used by them
    return {"Weights": (("weight",), "OutputSize×MaxIndex", lambda w: w[1:].t(),
                        lambda v, s: (torch.cat([torch.zeros(1, s[0][1], dtype=v.dtype), v.t()]),))}


def _attention(layer):
    out = {}
    options = layer.options
    for matlab, torch_name, rows in (("Query", "query", "NumKeyChannels"),
                                     ("Key", "key", "NumKeyChannels"),
                                     ("Value", "value", "NumValueChannels"),
                                     ("Output", "output", "OutputSize")):
        cols = "NumValueChannels" if matlab == "Output" else "InputSize"
        out[f"{matlab}Weights"] = ((f"{torch_name}.weight",), f"{rows}×{cols}",
                                   lambda w: w, lambda v, s: (v,))
        has_bias = options.output_has_bias if matlab == "Output" else options.projection_bias
        if has_bias:                       # projection_bias / output_bias may leave it out
            out[f"{matlab}Bias"] = ((f"{torch_name}.bias",), f"{rows}×1", _col,
                                    lambda v, s: (v.reshape(s[0]),))
    return out


def _table(layer) -> dict:
    kind = type(layer).__name__
    if kind == "Dense":
        return _dense()
    if kind == "Conv1d":
        return _conv1d()
    if kind == "Conv2d":
        return _conv2d()
    if kind == "LSTM":
        return _lstm(bool(getattr(layer, "bidirectional", False)))
    if kind == "SelfAttention":
        return _attention(layer)
    if kind == "GRU":
        return _gru(layer)
    if kind in ("LayerNorm", "BatchNorm", "GroupNorm"):
        return _norm()
    if kind == "Embedding":
        return _embedding()
    if kind == "WordEmbedding":                  # weight row k-1 is the vector of word id k
        return {"Weights": (("weight",), "Dimension×NumWords", lambda w: w.t(),
                            lambda v, s: (v.t(),))}
    if kind == "PatchEmbedding":
        return _conv2d()
    if kind == "GroupedConv2d":
        return _grouped(layer.filters_per_group)
    if kind == "EmbeddingConcatenation":
        return {"Weights": (("weight",), "NumChannels×1", _col, lambda v, s: (v.reshape(s[0]),))}
    return {}


# which MATLAB initializer option sets which weights, per layer type (MATLAB's defaults are
# attnlab's own initialisation, so only a given option changes anything)
def _init_targets(layer) -> dict[str, tuple[str, ...]]:
    table = _table(layer)
    weights = tuple(k for k in table if k.endswith("Weights"))
    biases = tuple(k for k in table if k.endswith("Bias"))
    if type(layer).__name__ in ("LayerNorm", "BatchNorm", "GroupNorm"):
        return {"ScaleInitializer": ("Scale",), "OffsetInitializer": ("Offset",)}
    if type(layer).__name__ in ("LSTM", "GRU"):
        return {"InputWeightsInitializer": ("InputWeights",),
                "RecurrentWeightsInitializer": ("RecurrentWeights",),
                "BiasInitializer": biases}
    return {"WeightsInitializer": weights, "BiasInitializer": biases} if table else {}


# ======================================================================== reading, writing ===

def _module_params(net, name):
    mods = net.layer_modules
    if name not in mods:
        raise ArgumentError(f"layer '{name}': not built yet; initialize the network first "
                            f"(initialize(net, X) or dlnetwork with an input layer).")
    return dict(mods[name].named_parameters())


def _get(net, layer, mname):
    tnames, _, to_m, _ = _table(layer)[mname]
    params = _module_params(net, layer.name)
    with torch.no_grad():
        return to_m(*(params[t] for t in tnames)).detach().cpu().numpy().copy()


def _check_name(layer, mname, what="property"):
    table = _table(layer)
    if mname not in table:
        known = ", ".join(table) or "none (it has no weights attnlab maps by MATLAB name)"
        raise ArgumentError(f"{_who(layer)} ({type(layer).__name__}): no {what} "
                            f"'{mname}'; weights by MATLAB name: {known}."
                            f"{close_matches(mname, list(table))}")
    return table[mname]


def _as_tensor(layer, mname, value):
    try:
        return torch.as_tensor(np.asarray(value, dtype=np.float64), dtype=torch.float64)
    except (TypeError, ValueError):
        raise ArgumentError(f"{_who(layer)} {mname}: expected a numeric array, received "
                            f"{type(value).__name__}.") from None


def _set(net, layer, mname, value):
    tnames, shape_text, to_m, from_m = _check_name(layer, mname)
    params = _module_params(net, layer.name)
    targets = [params[t] for t in tnames]
    with torch.no_grad():
        expected = tuple(to_m(*targets).shape)
        v = _as_tensor(layer, mname, value)
        is_vector = sum(d > 1 for d in expected) <= 1
        if tuple(v.shape) != expected and not (is_vector and v.squeeze().ndim <= 1
                                              and v.numel() == math.prod(expected)):
            raise SizeError(f"{_who(layer)} {mname}: expected "
                            f"{'×'.join(map(str, expected))} ({shape_text}), received "
                            f"{'×'.join(map(str, v.shape)) or 'a scalar'}. Give MATLAB's shape "
                            f"(read it with getLayerWeights(net, \"{layer.name}\")).")
        v = v.reshape(expected)
        for p, new in zip(targets, from_m(v, [tuple(p.shape) for p in targets])):
            p.copy_(new.to(p.dtype))


def _layer_of(net, name):
    if not isinstance(name, str):
        raise ArgumentError(f"expected a layer name (text), received {type(name).__name__}.")
    for layer in net.layers:
        if layer.name == name:
            return layer
    raise ArgumentError(f"the network has no layer '{name}'."
                        f"{close_matches(name, [l.name for l in net.layers])}")


def getLayerWeights(net: Network, layerName: str) -> dict[str, np.ndarray]:
    """An attnlab addition: the weights of layer `layerName` of a built network by MATLAB name,
    as numpy arrays in MATLAB's shapes (copies: changing them changes nothing)."""
    layer = _layer_of(net, layerName)
    return {k: _get(net, layer, k) for k in _table(layer)}


def setLayerWeights(net: Network, layerName: str, **weights: Any) -> Network:
    """An attnlab addition: `net = setLayerWeights(net, "fc", Weights=W, Bias=b)` copies
    MATLAB-shaped arrays into layer `layerName` of a built network; returns the network."""
    layer = _layer_of(net, layerName)
    for k in weights:
        _check_name(layer, k)
    for k, v in weights.items():
        _set(net, layer, k, v)
    return net


# ===================================================================== properties of layers ===

def remember_owner(net, layers):
    """`net.Layers` hands out the network's own layer objects: remember whose they are, so
    `net.Layers(2).Weights` reads from that network's modules."""
    for layer in layers:
        _owner[layer] = weakref.ref(net)
    return layers


def _built_owner(layer):
    ref = _owner.get(layer)
    net = ref() if ref is not None else None
    if net is not None and net.initialized and layer.name in net.layer_modules:
        return net
    return None


def layer_weights(layer) -> dict:
    """MATLAB properties of a layer (name → getter): from its built network, else the preset,
    else [] as MATLAB shows an uninitialised weight."""
    table = _table(layer)
    props = {}
    for k in table:
        def get(k=k):
            net = _built_owner(layer)
            if net is not None:
                return _get(net, layer, k)
            preset = _presets.get(layer, {}).get("weights", {})
            return np.asarray(preset[k]) if k in preset else np.zeros((0, 0))
        props[k] = get
    for opt in _init_targets(layer):
        props[opt] = lambda opt=opt: _presets.get(layer, {}).get("init", {}).get(opt, "default")
    return props


def set_layer_weight(layer, name, value):
    """`layer.Weights = W` on a layer not yet in a built network (MATLAB's layers are values:
    a dlnetwork's own are read-only, as in MATLAB)."""
    if name in _init_targets(layer):
        preset_initializer(layer, name, value)
        return
    _check_name(layer, name, "settable property")
    if _built_owner(layer) is not None:
        raise ArgumentError(f"{_who(layer)} {name}: the layers of a built network are "
                            f"read-only, as in MATLAB. Use net = setLayerWeights(net, "
                            f"\"{layer.name}\", {name}=value).")
    _preset_weight(layer, name, value)


def _preset_weight(layer, name, value):
    v = np.asarray(_as_tensor(layer, name, value).numpy())
    if v.size == 0:
        _presets.setdefault(layer, {}).setdefault("weights", {}).pop(name, None)
        return
    _presets.setdefault(layer, {}).setdefault("weights", {})[name] = v
    _applied.pop(layer, None)


def preset_initializer(layer, option, value):
    targets = _init_targets(layer)
    if option not in targets:
        raise ArgumentError(f"{_who(layer)} ({type(layer).__name__}): no option "
                            f"'{option}'; initializer options: {', '.join(targets) or 'none'}."
                            f"{close_matches(option, list(targets))}")
    if callable(value) and not isinstance(value, str):
        # a function of the weights' size, in MATLAB's shape: @(sz) 0.01*randn(sz) in a
        # script (run by the interpreter), or any Python callable
        _presets.setdefault(layer, {}).setdefault("init", {})[option] = value
        _applied.pop(layer, None)
        return
    word = value.lower() if isinstance(value, str) else value
    allowed = INITIALIZERS if option == "BiasInitializer" and type(layer).__name__ == "LSTM" \
        else INITIALIZERS[:-1]
    if word not in allowed:
        raise ArgumentError(f"{_who(layer)} {option}: expected one of "
                            f"{', '.join(repr(a) for a in allowed)}, received {value!r}. "
                            "or a function handle @(sz) … that returns an array of size sz."
                            + (close_matches(value, allowed) if isinstance(value, str) else ""))
    _presets.setdefault(layer, {}).setdefault("init", {})[option] = word
    _applied.pop(layer, None)


# ================================================================ presets from constructors ===

def collect_presets(fn):
    """Wraps a MATLAB layer function: its weight and initializer options (`Weights=W`,
    `WeightsInitializer="he"`) become presets of the layer it returns."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        token = _collecting.set([])
        try:
            layer = fn(*args, **kwargs)
            found = _collecting.get()
        finally:
            _collecting.reset(token)
        from .factor_store import set_factor, split_option
        for name, value in found:
            factor = split_option(name)
            if factor is not None:           # WeightLearnRateFactor=2, BiasL2Factor=0, …
                set_factor(layer, factor[0], factor[1], value, fn.__name__, name)
                continue
            canon = next((k for k in (*_table(layer), *_init_targets(layer))
                          if k.lower() == name.lower()), None)
            if canon is None:
                raise ArgumentError(f"{fn.__name__}: expected an option of this layer, received "
                                    f"'{name}'; weight options: "
                                    f"{', '.join((*_table(layer), *_init_targets(layer))) or 'none'}.")
            set_layer_weight(layer, canon, value)
        return layer
    return wrapper


def record_option(name: str, value) -> bool:
    """Called by the option parser for weight/initializer options: True when a layer function
    is collecting them (the value is kept for its layer)."""
    found = _collecting.get()
    if found is None:
        return False
    found.append((name, value))
    return True


# =========================================================================== applying them ===

def _initialize(t: torch.Tensor, word: str, forget_rows: int = 0):
    with torch.no_grad():
        if word == "glorot":
            torch.nn.init.xavier_uniform_(t) if t.ndim >= 2 else t.uniform_(
                -math.sqrt(3 / t.numel()), math.sqrt(3 / t.numel()))
        elif word == "he":
            torch.nn.init.kaiming_normal_(t, nonlinearity="relu")
        elif word == "narrow-normal":
            t.normal_(0.0, 0.01)
        elif word == "zeros":
            t.zero_()
        elif word == "ones":
            t.fill_(1.0)
        elif word == "orthogonal":
            torch.nn.init.orthogonal_(t)
        elif word == "unit-forget-gate":    # MATLAB's LSTM bias default: 1 for the forget gate
            t.zero_()
            t.view(-1, 4, forget_rows)[:, 1] = 1.0


def _matlab_shape(net, layer, mname) -> tuple[int, ...]:
    tnames, _, to_m, _ = _table(layer)[mname]
    params = _module_params(net, layer.name)
    with torch.no_grad():
        return tuple(to_m(*(params[t] for t in tnames)).shape)


def _call_initializer(layer, option, mname, fn, shape):
    """Runs an initializer function with the weights' MATLAB size: a script's `@(sz) …` gets
    it as a row vector, a Python callable as a tuple of ints."""
    from .values import Lambda
    arg = np.array(shape, dtype=float) if isinstance(fn, Lambda) else tuple(shape)
    try:
        value = fn(arg)
    except Exception as e:               # the user's function: say whose it was, keep the cause
        raise ArgumentError(f"{_who(layer)} {option}: the initializer function failed for "
                            f"{mname} of size {'×'.join(map(str, shape))}: {e}") from e
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    return value


def has_presets(net) -> bool:
    return any(_presets.get(layer) for layer in net.layers)


def apply_presets(net) -> None:
    """Writes the layers' preset initializers, then preset weights, into the built modules of
    `net` (once per built module)."""
    if not net.initialized:
        return
    mods = net.layer_modules
    for layer in net.layers:
        preset = _presets.get(layer)
        if not preset or layer.name not in mods or _applied.get(layer) is mods[layer.name]:
            continue
        table = _table(layer)
        params = dict(mods[layer.name].named_parameters())
        for option, word in preset.get("init", {}).items():
            if callable(word):
                for mname in _init_targets(layer)[option]:
                    _set(net, layer, mname, _call_initializer(layer, option, mname, word,
                                                              _matlab_shape(net, layer, mname)))
                continue
            for mname in _init_targets(layer)[option]:
                tensors = [params[t] for t in table[mname][0]]
                if mname == "Bias" and type(layer).__name__ in ("LSTM", "GRU") and \
                        len(table["Bias"][0]) > 0 and not table["Bias"][1].startswith("6"):
                    tensors[len(tensors) // 2:] = [t.data.zero_() for t in tensors[len(tensors) // 2:]]
                    tensors = tensors[:len(tensors) // 2]
                for t in tensors:
                    _initialize(t.data, word, t.shape[0] // 4)
        for mname, value in preset.get("weights", {}).items():
            _set(net, layer, mname, value)
        _applied[layer] = mods[layer.name]


def copy_layer(layer):
    """A copy of a layer with its presets and learn-rate/L2 factors (MATLAB's layers are
    values: `b = a; b.Name = "x"` leaves `a` as it was). A copy belongs to no network."""
    import copy
    new = copy.copy(layer)
    if "_matlab_factors" in layer.__dict__:
        new.__dict__["_matlab_factors"] = copy.deepcopy(layer.__dict__["_matlab_factors"])
    preset = _presets.get(layer)
    if preset:
        _presets[new] = {k: dict(v) for k, v in preset.items()}
    return new
