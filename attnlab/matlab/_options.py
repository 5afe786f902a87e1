"""MATLAB name–value arguments → Python values: the parsing every attnlab.matlab function shares."""
from __future__ import annotations

import math
from typing import Any

from attnlab.core.errors import ArgumentError, close_matches


class MatlabNote(UserWarning):
    """A MATLAB construct that attnlab handles differently (e.g. a dropped classificationLayer)."""


# ====================================================================== option parsing ===

_HINTS = {
    "outputmode": "Only lstmLayer, bilstmLayer and gruLayer have OutputMode. To reduce the time "
                  "dimension after this layer, add indexing1dLayer(\"last\") or "
                  "globalAveragePooling1dLayer.",
    "sequencelength": "SequenceLength is a trainingOptions option (how mini-batches are padded), "
                      "not a layer's. To reduce the time dimension after this layer, add "
                      "indexing1dLayer(\"last\") or globalAveragePooling1dLayer.",
}

# MATLAB options without an attnlab counterpart, accepted at the value that changes nothing
_EMPTY = ("weights", "bias", "inputweights", "recurrentweights", "offset", "cellstate",
          "hiddenstate", "trainedmean", "trainedvariance", "mean", "standarddeviation", "min",
          "max", "queryweights", "keyweights", "valueweights", "outputweights", "scale")


def _record(name, value) -> bool:
    from .weights import record_option
    return record_option(name, value)


def _matlab_only(fn: str, name: str, value) -> bool:
    """True when `name` is a MATLAB option attnlab accepts only as a no-op; raises for any other
    value. False when attnlab does not know the name at all."""
    key = name.lower()
    if key.endswith(("learnratefactor", "l2factor")):
        if _record(name, value):           # kept with the layer being made (factors.py)
            return True
        if isinstance(value, (int, float)) and value == 1:
            return True
        raise ArgumentError(
            f"{fn}: expected {name}=1, received {value!r}: this function makes no layer to keep "
            "the factor. Set it on the layer: setLearnRateFactor(layer, \"Weights\", f).")
    if (key.endswith("initializer") or key in _EMPTY) and _record(name, value):
        return True                        # a preset of the layer being made (weights.py)
    if key.endswith("initializer"):
        raise ArgumentError(
            f"{fn}: expected no {name}, received {value!r}: attnlab initialises layers as PyTorch "
            "does. To set weights, initialize the network and copy into net.learnables, e.g. "
            "net.learnables['fc/weight'].data.copy_(W).")
    if key in _EMPTY:
        if value is None or (hasattr(value, "__len__") and len(value) == 0):
            return True
        raise ArgumentError(
            f"{fn}: expected no preset {name}, received a value: attnlab layers hold no tensors "
            "before initialisation. Initialize the network, then copy into net.learnables.")
    return False


def _parse(fn: str, args: tuple, kwargs: dict, options: dict[str, Any],
           positional: int = 0) -> tuple[list, dict[str, Any]]:
    """MATLAB arguments → (up to `positional` leading values, options by canonical name).

    Leading values are taken until a string that names an option (case-insensitively) starts the
    name–value pairs; the rest are pairs, then the Python keywords."""
    valid = {k.lower(): k for k in options}
    rest = list(args)
    pos: list = []
    while rest and len(pos) < positional and not (
            isinstance(rest[0], str) and rest[0].lower() in valid and len(rest) >= 2):
        pos.append(rest.pop(0))
    args = tuple(rest)
    if len(args) % 2:
        raise ArgumentError(
            f"{fn}: expected name–value pairs after the positional arguments, received "
            f"{args[-1]!r} without a value. Write options as Name=value or 'Name', value, e.g. "
            f"{fn}(..., {next(iter(options), 'Name')}=...).")
    out = dict(options)
    pairs = list(zip(args[::2], args[1::2])) + list(kwargs.items())
    for name, value in pairs:
        if not isinstance(name, str):
            raise ArgumentError(f"{fn}: expected an option name (text), received {name!r}. "
                                f"Options: {', '.join(options)}.")
        key = name.lower()
        prefixed = [k for k in valid if k.startswith(key)] if key else []
        if key in valid:
            out[valid[key]] = value
        elif _matlab_only(fn, name, value):
            pass
        elif len(prefixed) == 1:             # MATLAB matches a unique prefix: 'MaxEp', 5
            out[valid[prefixed[0]]] = value
        else:
            if len(prefixed) > 1:
                raise ArgumentError(
                    f"{fn}: '{name}' is the start of several options "
                    f"({', '.join(valid[k] for k in prefixed)}): write more of the name.")
            hint = _HINTS.get(key, "")
            raise ArgumentError(
                f"{fn}: expected an option among {', '.join(options) or 'none'}, received "
                f"'{name}'.{close_matches(name, options)} {hint}".rstrip())
    if "Name" in out and isinstance(out["Name"], str) and out["Name"] == "":
        out["Name"] = None                   # MATLAB's default name '': named automatically
    return pos, out


def split_pairs(args: tuple, options) -> tuple[tuple, tuple]:
    """(values, name–value pairs): the positional arguments up to the first text that names
    one of `options` (case-insensitively, or a unique prefix of one) and has a value after it,
    as MATLAB reads `classify(net, X, 'MiniBatchSize', 27, 'SequenceLength', 'longest')`."""
    names = [o.lower() for o in options]
    for i, a in enumerate(args):
        if isinstance(a, str) and i + 1 < len(args) and a and (
                a.lower() in names or sum(n.startswith(a.lower()) for n in names) == 1):
            return tuple(args[:i]), tuple(args[i:])
    return tuple(args), ()


def _word(fn: str, option: str, value, allowed: tuple[str, ...]) -> str:
    """A text option matched case-insensitively (MATLAB accepts "Last" for "last")."""
    if isinstance(value, str) and value.lower() in allowed:
        return value.lower()
    raise ArgumentError(f"{fn}: expected {option} to be one of "
                        f"{', '.join(repr(a) for a in allowed)}, received {value!r}."
                        + (close_matches(value, allowed) if isinstance(value, str) else ""))


def _flag(fn: str, option: str, value) -> bool:
    if isinstance(value, bool) or value in (0, 1):
        return bool(value)
    raise ArgumentError(f"{fn}: expected {option} to be true/false (or 1/0), received {value!r}.")


def _int(fn: str, what: str, value, least: int = 1) -> int:
    if hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        value = value.item()
    if isinstance(value, float) and value.is_integer():
        value = int(value)                 # MATLAB numbers are doubles: 64.0 means 64
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise ArgumentError(f"{fn}: expected {what} to be an integer ≥ {least}, received {value!r}.")
    return value


def _ints(fn: str, what: str, value, n: int, least: int = 1) -> tuple[int, ...]:
    """A MATLAB scalar or row vector of n integers (a scalar repeats)."""
    if _is_vector(value):
        vals = tuple(_int(fn, what, v, least) for v in _as_list(value))
        if len(vals) == 1:
            return vals * n
        if len(vals) != n:
            raise ArgumentError(f"{fn}: expected {what} as a scalar or {n} values, received "
                                f"{list(vals)}.")
        return vals
    return (_int(fn, what, value, least),) * n


def _pair(fn: str, what: str, value, least: int = 1) -> tuple[int, int]:
    """A MATLAB scalar or [a b] of integers as a pair."""
    a, b = _ints(fn, what, value, 2, least)
    return a, b


def _is_vector(value) -> bool:
    return isinstance(value, (list, tuple)) or (hasattr(value, "shape") and getattr(value, "ndim", 0) > 0)


def _as_list(value) -> list:
    return list(value.tolist() if hasattr(value, "tolist") else value)


def _auto(value):
    """MATLAB's "auto" → None."""
    return None if isinstance(value, str) and value.lower() == "auto" else value


def _inf_none(value):
    """MATLAB's Inf (no limit) → None."""
    return None if isinstance(value, (int, float)) and math.isinf(value) else value


def _normalization(fn: str, o: dict):
    """The input layer's Normalization options → None ("none") or the keyword arguments of
    `InputNormalization` (the layer placed right after the input)."""
    from .mlayers import NORMALIZATIONS
    value = o["Normalization"]
    if callable(value) and not isinstance(value, str):
        raise ArgumentError(f"{fn}: expected Normalization among {', '.join(NORMALIZATIONS)}, "
                            "received a function handle: normalise the data before training, or "
                            "add a functionLayer after the input.")
    method = _word(fn, "Normalization", value, NORMALIZATIONS)
    _word(fn, "NormalizationDimension", o["NormalizationDimension"], ("auto", "channel"))
    stats = {k: o[m] for k, m in (("mean", "Mean"), ("std", "StandardDeviation"), ("min", "Min"),
                                  ("max", "Max"))}
    stats = {k: v for k, v in stats.items()
             if v is not None and not (hasattr(v, "__len__") and len(v) == 0)}
    if method == "none":
        return None
    return {"method": method, **stats}


def _mask_option(fn: str, value):
    if isinstance(value, str):
        return None if _word(fn, "AttentionMask", value, ("none", "causal")) == "none" else "causal"
    raise ArgumentError(f"{fn}: expected AttentionMask \"none\" or \"causal\", received a custom "
                        "mask. Give a custom mask at run time through the layer's mask input "
                        "(HasPaddingMaskInput=true) or use al.attention(..., attention_mask=M).")


