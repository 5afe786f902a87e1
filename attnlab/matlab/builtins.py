"""The base MATLAB functions a deep-learning script calls around its layers: disp, fprintf, size,
zeros, rng, tic/toc, error, dlarray, … Each takes the interpreter's context first (for printing and
state) and MATLAB values after it.

`DATA` names the functions that need data or train; `attnlab analyze` skips their statements.
`FILES` are those that read files, which the reader never does: their results come from the
caller (`run_file(path, workspace={...})`, `--set`).
"""
from __future__ import annotations

import math
import re
import time

import numpy as np

from .values import Cell, MatlabError, String, Struct

DATA = {"trainNetwork", "trainnet", "predict", "minibatchpredict", "classify", "forward",
        "imageDatastore", "load", "readtable", "readmatrix", "csvread", "xlsread", "audioread",
        "imread", "splitEachLabel", "matlabroot", "audioDatastore", "fileDatastore",
        "tabularTextDatastore", "datastore", "readall", "importdata", "japaneseVowelsTrainData",
        "japaneseVowelsTestData", "digitTrain4DArrayData", "digitTest4DArrayData"}
FILES = DATA - {"trainNetwork", "trainnet", "predict", "minibatchpredict", "classify", "forward"}


def _scalar(x):
    if isinstance(x, np.ndarray) and x.size == 1:
        x = x.reshape(()).item()
    elif isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and x.is_integer() and abs(x) < 2 ** 53:
        return int(x)
    return x


def _num(x):
    if isinstance(x, (bool, int, float, np.ndarray)):
        return x
    if hasattr(x, "detach"):                                 # a tensor, e.g. from dlarray
        return x.detach().cpu().numpy()
    raise MatlabError(f"expected a number or numeric array, received {type(x).__name__}")


def _size_args(args) -> tuple[int, ...]:
    dims = [int(v) for a in args for v in np.atleast_1d(_num(a)).ravel()]
    return tuple(dims * 2) if len(dims) == 1 else tuple(dims)


def _format(fmt: str, args) -> str:
    """sprintf/fprintf: MATLAB's format (a C format; the format is reused while values remain)."""
    values = []
    for a in args:
        if isinstance(a, np.ndarray):
            values.extend(_scalar(v) for v in a.ravel())
        elif isinstance(a, (list, tuple)):
            values.extend(a)
        else:
            values.append(a)
    fmt = (fmt.replace("\\n", "\n").replace("\\t", "\t").replace("\\\\", "\\")
           .replace("%%", "\x00"))
    specs = re.findall(r"%[-+ 0#]*\d*(?:\.\d+)?[diufeEgGsc]", fmt)
    if not specs:
        return fmt.replace("\x00", "%")
    out, i = [], 0
    while True:
        chunk = fmt
        for spec in specs:
            if i >= len(values):
                chunk = chunk[:chunk.index(spec)] if spec in chunk else chunk
                break
            v = values[i]
            kind = spec[-1]
            if kind in "diu":
                py = spec[:-1] + ("d" if float(v).is_integer() else "g")
                v = int(v) if float(v).is_integer() else float(v)
            elif kind in "feEgG":
                py, v = spec, float(v)
            elif kind == "c":
                py, v = spec[:-1] + "s", str(v)
            else:
                py, v = spec, v if isinstance(v, str) else _fmt_value(v)
            chunk = chunk.replace(spec, py % v, 1)
            i += 1
        out.append(chunk)
        if i >= len(values):
            break
    return "".join(out).replace("\x00", "%")


def _fmt_value(v) -> str:
    v = _scalar(v)
    return str(v) if not isinstance(v, float) else f"{v:g}"


def disp(ctx, x):
    ctx.print(x if isinstance(x, str) else _fmt_value(x) if isinstance(x, (int, float, np.ndarray))
              else repr(x))


def fprintf(ctx, fmt, *args):
    if not isinstance(fmt, str):
        raise MatlabError("fprintf: expected a format text first (writing to files is not "
                          "supported)")
    ctx.print(_format(fmt, args), end="")


def sprintf(ctx, fmt, *args):
    return _format(fmt, args)


def num2str(ctx, x, *args):
    return _fmt_value(x) if not args else _format(args[0], [x])


def error(ctx, *args):
    if not args:
        return
    ident = ""
    if len(args) > 1 and isinstance(args[0], str) and ":" in args[0] and "%" not in args[0]:
        ident, args = args[0], args[1:]
    raise MatlabError(_format(args[0], args[1:]) if len(args) > 1 else str(args[0]), ident)


def warning(ctx, *args):
    if args and isinstance(args[0], str) and args[0].lower() in ("off", "on", "query"):
        return                                         # warning('off', id): state only
    ctx.print("Warning: " + (_format(args[0], args[1:]) if args else ""))


def rng(ctx, seed=0, *args):
    """rng(seed), rng("default") (seed 0, as MATLAB), rng("shuffle") (left to the clock)."""
    import torch
    if isinstance(seed, str):
        if seed.lower() == "shuffle":
            return
        if seed.lower() != "default":
            raise MatlabError(f"rng: expected a seed, \"default\" or \"shuffle\", received {seed!r}")
        seed = 0
    seed = int(_scalar(seed))
    torch.manual_seed(seed)
    np.random.seed(seed % 2 ** 32)
    ctx.state["seed"] = seed


def tic(ctx):
    ctx.state["tic"] = time.perf_counter()


def toc(ctx, *args):
    elapsed = time.perf_counter() - ctx.state.get("tic", time.perf_counter())
    return elapsed


def _noop(ctx, *args, **kwargs):
    return None


def size(ctx, x, dim=None):
    shape = _shape(x)
    if dim is not None:
        d = int(_scalar(dim))
        return shape[d - 1] if d <= len(shape) else 1
    return np.array(shape, dtype=float)


def _shape(x) -> tuple[int, ...]:
    if isinstance(x, np.ndarray):
        return (1, x.shape[0]) if x.ndim == 1 else tuple(x.shape)
    if hasattr(x, "shape"):
        return tuple(x.shape)
    if isinstance(x, (list, str)):
        return (1, len(x)) if isinstance(x, str) or isinstance(x, Cell) else (len(x), 1)
    return (1, 1)


def numel(ctx, x):
    return int(np.prod(_shape(x)))


def length(ctx, x):
    shape = _shape(x)
    return 0 if 0 in shape else max(shape)


def isempty(ctx, x):
    return numel(ctx, x) == 0


def zeros(ctx, *args):
    return _array(np.zeros, args)


def ones(ctx, *args):
    return _array(np.ones, args)


def rand(ctx, *args):
    return _array(lambda s: np.random.rand(*s), args)


def randn(ctx, *args):
    return _array(lambda s: np.random.randn(*s), args)


def _array(make, args):
    args = [a for a in args if not isinstance(a, str)]       # 'single'/'like' class names
    shape = _size_args(args) if args else (1, 1)
    out = make(shape)
    return _scalar(out) if out.size == 1 else out.astype(np.float32 if False else np.float64)


def _elementwise(fn):
    def f(ctx, x, *args):
        return _scalar(fn(_num(x), *[_num(a) for a in args]))
    return f


def _reduce(fn):
    def f(ctx, x, *args):
        x = _num(x)
        if isinstance(x, np.ndarray) and x.ndim == 2 and 1 not in x.shape:
            return fn(x, axis=0)
        return _scalar(fn(np.ravel(x)))
    return f


def strcmp(ctx, a, b):
    return isinstance(a, str) and isinstance(b, str) and a == b


def strcmpi(ctx, a, b):
    return isinstance(a, str) and isinstance(b, str) and a.lower() == b.lower()


def strcat(ctx, *args):
    return "".join(a.rstrip() if not isinstance(a, String) else a for a in args)


def string(ctx, x):
    return String(x if isinstance(x, str) else _fmt_value(x))


def struct(ctx, *args):
    if len(args) % 2:
        raise MatlabError("struct: expected field–value pairs")
    return Struct((str(k), v) for k, v in zip(args[::2], args[1::2]))


def cell(ctx, *args):
    return Cell([None] * int(np.prod(_size_args(args)))) if args else Cell()


def isfield(ctx, s, name):
    return isinstance(s, Struct) and name in s


def fullfile(ctx, *parts):
    import os
    return os.path.join(*[str(p) for p in parts])


def dlarray(ctx, x, fmt=""):
    """dlarray(X, fmt) → a torch tensor in attnlab's layout: MATLAB's labelled dimensions
    ("CBT", "SSCB", "CB", "BTC", …) are permuted to B×T×C (sequences), B×C×H×W (images) or
    B×C (features)."""
    import torch
    t = torch.as_tensor(np.asarray(x) if not hasattr(x, "detach") else x, dtype=torch.float32)
    if not fmt:
        return t
    fmt = str(fmt).upper()
    if len(fmt) != t.ndim and not (len(fmt) > t.ndim and fmt.endswith("B")):
        raise MatlabError(f"dlarray: expected a format with one letter per dimension of the "
                          f"{t.ndim}-D array, received {fmt!r}")
    while t.ndim < len(fmt):
        t = t.unsqueeze(-1)                              # a trailing batch of one
    if set(fmt) - set("SCBTU"):
        raise MatlabError(f"dlarray: expected format letters among S, C, B, T, U, received {fmt!r}")
    spatial = [i for i, ch in enumerate(fmt) if ch == "S"]
    order = [fmt.index("B")] if "B" in fmt else []
    if "T" in fmt:
        order += [fmt.index("T")]
    order += [fmt.index("C")] if "C" in fmt else []
    order += spatial
    if "T" not in fmt and not spatial and "B" not in fmt:
        return t
    return t.permute(*order).contiguous()


def extractdata(ctx, x):
    return x.detach().cpu().numpy() if hasattr(x, "detach") else x


BASE = {
    "disp": disp, "display": disp, "fprintf": fprintf, "sprintf": sprintf, "num2str": num2str,
    "error": error, "warning": warning, "rng": rng, "gpurng": rng, "tic": tic, "toc": toc,
    "clc": _noop, "clear": _noop, "close": _noop, "figure": _noop, "hold": _noop,
    "format": _noop, "drawnow": _noop, "clearvars": _noop,
    "size": size, "numel": numel, "length": length, "isempty": isempty, "zeros": zeros,
    "ones": ones, "rand": rand, "randn": randn,
    "floor": _elementwise(np.floor), "ceil": _elementwise(np.ceil), "round": _elementwise(np.round),
    "sqrt": _elementwise(np.sqrt), "exp": _elementwise(np.exp), "log": _elementwise(np.log),
    "abs": _elementwise(np.abs), "mod": _elementwise(np.mod), "double": _elementwise(np.float64),
    "single": _elementwise(np.float32),
    "sum": _reduce(np.sum), "mean": _reduce(np.mean), "max": _reduce(np.max),
    "min": _reduce(np.min), "prod": _reduce(np.prod),
    "strcmp": strcmp, "strcmpi": strcmpi, "strcat": strcat, "string": string, "char": string,
    "struct": struct, "cell": cell, "isfield": isfield, "fullfile": fullfile,
    "dlarray": dlarray, "extractdata": extractdata,
}
CONSTANTS = {"true": True, "false": False, "pi": math.pi, "Inf": math.inf, "inf": math.inf,
             "NaN": math.nan, "nan": math.nan, "eps": float(np.finfo(float).eps)}
