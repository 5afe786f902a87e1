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

# MATLAB's graphics and GPU-state functions: they change no value a network depends on, so the
# reader runs them as no-ops (`attnlab plot FILE.m` draws the networks)
GRAPHICS = {
    "xlabel", "ylabel", "zlabel", "title", "subtitle", "sgtitle", "legend", "grid", "subplot",
    "axis", "xlim", "ylim", "zlim", "xticks", "yticks", "xticklabels", "yticklabels", "colorbar",
    "colormap", "set", "gca", "gcf", "box", "text", "annotation", "saveas", "savefig",
    "exportgraphics", "tiledlayout", "nexttile", "scatter", "scatter3", "histogram", "bar",
    "barh", "imshow", "imagesc", "image", "montage", "surf", "mesh", "line", "area", "stem",
    "stairs", "errorbar", "pie", "heatmap", "confusionchart", "plotconfusion", "plotroc",
    "view", "shg", "movegui", "uifigure", "gpuDevice", "pause", "beep", "commandwindow",
    "dbstop", "more", "diary", "profile", "addpath", "rmpath", "savepath", "delete",
}
# MATLAB functions the reader does not run (statistics, preprocessing, tables, text analytics,
# pretrained networks, …): `attnlab analyze` skips their statements, naming them; `run_file`
# asks for their results in the workspace
OUTSIDE = {
    "mapminmax", "normalize", "zscore", "rescale", "cvpartition", "training", "test",
    "crossval", "table2array", "array2table", "cell2mat", "num2cell", "cellfun", "arrayfun",
    "table", "height", "width", "head", "tail", "rmmissing", "fillmissing", "ismissing",
    "standardizeMissing", "movmean", "smoothdata", "interp1", "detrend", "resample", "filter",
    "buffer", "cat", "horzcat", "vertcat", "squeeze", "permute", "circshift", "flip", "fliplr",
    "flipud", "sort", "sortrows", "unique", "find", "cumsum", "cumprod", "diff", "std", "var",
    "median", "mode", "corrcoef", "cov", "histcounts", "discretize", "isnan", "isinf", "nnz",
    "grp2idx", "onehotencode", "onehotdecode", "countcats", "dummyvar", "bayesopt",
    "optimizableVariable", "bestPoint", "perfcurve", "rocmetrics", "confusionmat", "rmse",
    "mse", "mae", "crossentropy", "l2loss", "huber", "writematrix", "writetable", "writecell",
    "save", "csvwrite", "xlswrite", "dlmwrite", "fopen", "fclose", "fread", "fwrite", "fgetl",
    "fgets", "fscanf", "textscan", "jsondecode", "jsonencode", "exist", "isfile", "isfolder",
    "dir", "mkdir", "tempdir", "tempname", "pwd", "datetime", "seconds", "minutes", "hours",
    "days", "now", "clock", "datestr", "tokenizedDocument", "wordEncoding", "doc2sequence",
    "preprocessText", "doclength", "fastTextWordEmbedding", "activations", "resetState",
    "resnet18", "resnet50", "resnet101", "googlenet", "squeezenet", "alexnet", "vgg16", "vgg19",
    "mobilenetv2", "efficientnetb0", "inceptionv3", "imagePretrainedNetwork", "bert",
    "augmentedImageDatastore", "imageDataAugmenter", "transform", "shuffle", "partition",
    "minibatchqueue", "hasdata", "next", "read", "reset", "imresize", "im2single", "im2double",
    "rgb2gray", "mat2gray", "spectrogram", "stft", "cwt", "fft", "ifft", "pca", "kmeans",
    "knnsearch", "fitcsvm", "fitlm", "predictAndUpdateState", "confusion", "str2double",
    "str2num", "int2str", "mat2str", "regexp", "regexprep", "strsplit", "strjoin", "strrep",
    "contains", "startsWith", "endsWith", "lower", "upper", "strtrim", "split", "join",
    "replace", "input", "keyboard",
}


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
    values: list = []
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
        if isinstance(x, np.ndarray) and x.size == 0 and fn in (np.max, np.min):
            return np.zeros(0)                       # max([]) is [] in MATLAB
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


def randperm(ctx, n, k=None):
    p = np.random.permutation(int(_scalar(n))) + 1
    return p[:int(_scalar(k))] if k is not None else p


def reshape(ctx, x, *dims):
    """reshape(X, m, n, …) or reshape(X, [m n …]), column-major as MATLAB; [] infers one size."""
    sizes = []
    for d in dims:
        d = _num(d) if not (isinstance(d, np.ndarray) and d.size == 0) else d
        if isinstance(d, np.ndarray) and d.size == 0:
            sizes.append(-1)
        else:
            sizes.extend(int(v) for v in np.atleast_1d(d).ravel())
    arr = np.asarray(_num(x), dtype=float)
    arr = arr.reshape(1, -1) if arr.ndim == 1 else arr
    try:
        return arr.reshape(sizes, order="F")
    except ValueError as e:
        raise MatlabError(f"reshape: the number of elements must not change ({e})") from None


def linspace(ctx, a, b, n=100):
    return np.linspace(float(_scalar(a)), float(_scalar(b)), int(_scalar(n)))


def _layer_items(x):
    """The layers of a layer or layer array, or None for any other value."""
    from ..layers.base import Layer
    if isinstance(x, Layer):
        return [x]
    if isinstance(x, list) and not isinstance(x, Cell) and x and \
            all(isinstance(v, Layer) for v in x):
        return list(x)
    return None


def repmat(ctx, x, *reps):
    counts = _size_args(reps)
    layers = _layer_items(x)
    if layers is not None:                      # repmat(block, 3, 1): the layers n times, copies
        import copy
        out = [copy.copy(v) for _ in range(int(np.prod(counts))) for v in layers]
        for v, original in zip(out, layers * int(np.prod(counts))):
            v.__dict__["_matlab_copy_of"] = original.__dict__.get("_matlab_copy_of", original)
        return out
    if isinstance(x, str):
        return x * int(np.prod(counts))
    arr = np.asarray(_num(x))
    arr = arr.reshape(1, -1) if arr.ndim == 1 else np.atleast_2d(arr)
    out = np.tile(arr, counts)
    return _scalar(out) if out.size == 1 else out


def _any_all(fn):
    def f(ctx, x, *args):
        return bool(fn(np.asarray(_num(x))))
    return f


class Namespace:
    """A MATLAB package path such as `parallel.gpu`: its functions only set GPU state
    (`parallel.gpu.rng(seed)` seeds like `rng`)."""

    def __init__(self, path: str):
        self.path = path

    def field(self, name: str):
        return Namespace(f"{self.path}.{name}")

    def call(self, ctx, *args):
        if self.path.endswith(".rng") and args:
            rng(ctx, args[0])
        return None


NAMESPACES = {"parallel": Namespace("parallel"), "matlab": Namespace("matlab")}


def extractdata(ctx, x):
    return x.detach().cpu().numpy() if hasattr(x, "detach") else x


BASE = {
    "disp": disp, "display": disp, "fprintf": fprintf, "sprintf": sprintf, "num2str": num2str,
    "error": error, "warning": warning, "rng": rng, "gpurng": rng, "tic": tic, "toc": toc,
    "canUseGPU": lambda ctx: _can_use_gpu(), "clc": _noop, "clear": _noop, "close": _noop, "figure": _noop, "hold": _noop,
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
    "dlarray": dlarray, "extractdata": extractdata, "randperm": randperm, "reshape": reshape,
    "linspace": linspace, "repmat": repmat, "any": _any_all(np.any), "all": _any_all(np.all),
    **{name: _noop for name in GRAPHICS},
}
CONSTANTS = {"true": True, "false": False, "pi": math.pi, "Inf": math.inf, "inf": math.inf,
             "NaN": math.nan, "nan": math.nan, "eps": float(np.finfo(float).eps)}
def _can_use_gpu() -> bool:
    import torch
    return bool(torch.cuda.is_available())


