"""MATLAB data formats ("CTB", "BTC", "SSCB", "CB", …) turned into attnlab's batch-first layouts.

attnlab reads sequences as B×T×C, images as B×C×H×W and features as B×C; a cell array holds one
observation per cell (a sequence T×C). `InputDataFormats` / `TargetDataFormats` of
trainingOptions (or trainnet) name the dimensions of the data as given, and the data are
permuted to attnlab's layout before training:

- a label per dimension: "S" spatial, "C" channel, "B" batch (observation), "T" time,
  "U" unspecified (a dimension of size 1); "SS" are height then width;
- a numeric array has one label per dimension (MATLAB drops trailing dimensions of size 1:
  a missing last label is a dimension of size 1);
- a cell array of observations: each cell is labelled by the format without "B"
  ("CTB": each cell C×T).

With "auto" (the default) data are read as attnlab reads them, except one MATLAB habit that
cannot be mistaken: a cell array of C×T sequences for a network whose sequence input has C
channels (every cell has C rows and not every cell C columns) is read as MATLAB reads it, and
its sequence targets (R×T cells of the same lengths) with it.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from attnlab.core.errors import ArgumentError, DataError
from .values import Cell

_LABELS = set("SCBTU")


def parse_formats(fn: str, option: str, value: Any) -> list[str] | None:
    """The formats of an InputDataFormats/TargetDataFormats value, one per input; None for
    "auto". An unknown label, or a format without its channel and batch dimensions, is an
    ArgumentError naming the option and the value."""
    values = [value] if isinstance(value, str) else list(value) \
        if isinstance(value, (list, tuple)) else None
    if not values or not all(isinstance(v, str) and v for v in values):
        raise ArgumentError(f"{fn}: expected {option} \"auto\" or MATLAB data formats such as "
                            f"\"CTB\", \"SSCB\" or \"CB\", received {value!r}.")
    if all(v.lower() == "auto" for v in values):
        return None
    out = []
    for v in values:
        f = v.upper()
        bad = sorted(set(f) - _LABELS)
        if v.lower() == "auto" or bad:
            raise ArgumentError(f"{fn}: expected {option} \"auto\" or MATLAB data formats such as "
                                f"\"CTB\", \"SSCB\" or \"CB\", received {value!r}"
                                + (f" (unknown label {', '.join(bad)}: labels are S, C, B, T, U)"
                                   if bad else "") + ".")
        problems = [f"{k} {n} times" for k, n in (("C", f.count("C")), ("B", f.count("B")),
                                                   ("T", f.count("T"))) if n > 1]
        if f.count("C") != 1 or f.count("B") != 1 or problems or f.count("S") > 2 or \
                ("T" in f and "S" in f):
            why = "; ".join(problems) or ("it needs one C and one B" if f.count("C") != 1 or
                                          f.count("B") != 1 else
                                          "attnlab reads sequences (T) or up to two spatial "
                                          "dimensions (S, SS), not both")
            raise ArgumentError(f"{fn}: {option} \"{v}\" is not a data format attnlab reads: "
                                f"{why}. Expected one label per dimension, such as \"CTB\", "
                                "\"SSCB\" or \"CB\".")
        out.append(f)
    return out


def _target(fmt: str) -> str:
    """attnlab's layout for data labelled `fmt`: B×T×C, B×C×H×W, B×T×C for one S, B×C."""
    if "T" in fmt:
        return "BTC"
    s = fmt.count("S")
    return "BCSS" if s == 2 else "BSC" if s == 1 else "BC"


def _permute(x, fmt: str, fn: str, option: str, what: str):
    """Array `x` labelled `fmt` → attnlab's layout (U dimensions of size 1 dropped)."""
    ndim = x.ndim
    if ndim < len(fmt):                      # MATLAB drops trailing singleton dimensions
        x = x.reshape(tuple(x.shape) + (1,) * (len(fmt) - ndim))
    if x.ndim != len(fmt):
        raise DataError(f"{fn}: {option} \"{fmt}\" names {len(fmt)} dimensions, and the "
                        f"{what} have {x.ndim} (size {'×'.join(map(str, x.shape))}). Give one "
                        "label per dimension.")
    for i, label in enumerate(fmt):
        if label == "U" and x.shape[i] != 1:
            raise DataError(f"{fn}: {option} \"{fmt}\": dimension {i + 1} of the {what} is "
                            f"\"U\" (unspecified) and has size {x.shape[i]}; attnlab drops "
                            "only U dimensions of size 1. Label it S, C, B or T.")
    keep = [i for i, label in enumerate(fmt) if label != "U"]
    labels = "".join(fmt[i] for i in keep)
    x = x.reshape([x.shape[i] for i in keep])
    target = _target(fmt)
    spatial = [i for i, label in enumerate(labels) if label == "S"]
    order = []
    for label in target:
        order.append(spatial.pop(0) if label == "S" else labels.index(label))
    if torch.is_tensor(x):
        return x.permute(*order).contiguous()
    return np.ascontiguousarray(np.transpose(x, order))


def _observations(data, fmt: str, fn: str, option: str, what: str):
    """A cell array of observations, each labelled by `fmt` without B → each in attnlab's
    layout without B (a sequence T×C)."""
    inner = fmt.replace("B", "")
    out = []
    for k, x in enumerate(data):
        arr = x if torch.is_tensor(x) else np.asarray(x)
        one = _permute(arr[None] if torch.is_tensor(arr) else arr[np.newaxis], "B" + inner, fn,
                       option, f"{what} {{{k + 1}}}")
        out.append(one[0])
    return Cell(out) if isinstance(data, Cell) else out


def _arranged(data, fmt: str, fn: str, option: str, what: str):
    if isinstance(data, (list, tuple)) and not isinstance(data, str):
        return _observations(data, fmt, fn, option, what)
    if torch.is_tensor(data) or isinstance(data, np.ndarray):
        return _permute(data, fmt, fn, option, what)
    raise DataError(f"{fn}: {option} \"{fmt}\" needs the {what} as a numeric array or a cell "
                    f"array of observations, received {type(data).__name__}.")


def _input_kinds(net) -> dict[str, str]:
    """Input name → "sequence", "image", "features" (what each input layer reads)."""
    kinds = {}
    for layer in net.layers:
        if layer.name in net.input_names:
            t = type(layer).__name__
            kinds[layer.name] = {"SequenceInput": "sequence", "ImageInput": "image",
                                 "FeatureInput": "features"}.get(t, "")
    return kinds


_KIND_OF = {"BTC": "sequence", "BCSS": "image", "BSC": "sequence", "BC": "features"}
_SHOWN = {"sequence": "sequences (B×T×C)", "image": "images (B×C×H×W)", "features": "features (B×C)"}


def arrange(fn: str, net, X, T, options):
    """(X, T) permuted from the options' InputDataFormats/TargetDataFormats to attnlab's
    layouts; with "auto", MATLAB's C×T cell arrays of sequences read as MATLAB reads them."""
    inputs = options.__dict__.get("_matlab_input_formats")
    targets = options.__dict__.get("_matlab_target_formats")
    kinds = _input_kinds(net)
    if inputs is not None:
        names = list(net.input_names)
        if len(inputs) != len(names):
            raise ArgumentError(f"{fn}: InputDataFormats gives {len(inputs)} formats "
                                f"({', '.join(inputs)}) for a network with {len(names)} inputs "
                                f"({', '.join(names)}). Give one format per input.")
        for name, fmt in zip(names, inputs):
            want = kinds.get(name)
            if want and _KIND_OF[_target(fmt)] != want:
                raise ArgumentError(f"{fn}: InputDataFormats \"{fmt}\" gives "
                                    f"{_SHOWN[_KIND_OF[_target(fmt)]]}, and input '{name}' reads "
                                    f"{_SHOWN[want]}. Give the format of the data as they are "
                                    "(e.g. \"CTB\" for sequences, \"SSCB\" for images, \"CB\" "
                                    "for features).")
        if isinstance(X, dict):
            X = {k: _arranged(v, inputs[names.index(k)], fn, "InputDataFormats",
                              f"predictors of '{k}'") if k in names else v for k, v in X.items()}
        elif len(names) == 1:
            X = _arranged(X, inputs[0], fn, "InputDataFormats", "predictors")
    elif len(kinds) == 1 and next(iter(kinds.values())) == "sequence":
        X, T = _auto_sequences(net, X, T, transpose_targets=targets is None)
    if targets is not None and T is not None:
        if len(targets) != 1:
            raise ArgumentError(f"{fn}: TargetDataFormats gives {len(targets)} formats "
                                f"({', '.join(targets)}); attnlab reads one target format.")
        if isinstance(T, (list, tuple, np.ndarray)) or torch.is_tensor(T):
            T = _arranged(T, targets[0], fn, "TargetDataFormats", "targets")
    return X, T


def _matrices(data) -> bool:
    return isinstance(data, (list, tuple)) and len(data) > 0 and all(
        (isinstance(x, np.ndarray) or torch.is_tensor(x)) and x.ndim == 2 for x in data)


def _auto_sequences(net, X, T, transpose_targets: bool):
    """MATLAB's cell array of C×T sequences (C the input's channels, not every cell C×C)
    → T×C cells; its R×T sequence targets with it."""
    if not _matrices(X):
        return X, T
    layer = next(l for l in net.layers if l.name in net.input_names)
    c = int(getattr(layer, "channels", 0) or 0)
    if not c or not all(x.shape[0] == c for x in X) or all(x.shape[1] == c for x in X):
        return X, T
    lengths = [x.shape[1] for x in X]
    X = _transposed(X)
    if transpose_targets and _matrices(T) and len(T) == len(lengths) and \
            all(t.shape[1] == n for t, n in zip(T, lengths)):
        T = _transposed(T)
    return X, T


def _transposed(data):
    out = [x.T.contiguous() if torch.is_tensor(x) else np.ascontiguousarray(x.T) for x in data]
    return Cell(out) if isinstance(data, Cell) else out


def auto_predictors(net, X: tuple) -> tuple:
    """The predictors of predict/classify, read as training reads them with "auto": MATLAB's
    C×T sequences (a cell array of them, or one matrix) for a network whose one input is a
    sequence of C channels → T×C."""
    kinds = _input_kinds(net)
    if len(X) != 1 or len(kinds) != 1 or next(iter(kinds.values())) != "sequence":
        return X
    x = X[0]
    if (isinstance(x, np.ndarray) or torch.is_tensor(x)) and x.ndim == 2:
        seqs, _ = _auto_sequences(net, [x], None, False)
        return (seqs[0],)
    return (_auto_sequences(net, x, None, False)[0],)
