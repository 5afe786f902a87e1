"""The base MATLAB functions a deep-learning script calls around its layers: disp, fprintf, size,
zeros, rng, tic/toc, error, dlarray, … Each takes the interpreter's context first (for printing and
state) and MATLAB values after it.

`DATA` names the functions that need data or train; `attnlab analyze` skips their statements.
`FILES` are those that read files, which the reader never does: their results come from the
caller (`run_file(path, workspace={...})`, `--set`).
"""
from __future__ import annotations

import math
import time

import numpy as np

from . import numeric as N
from .budget import Exhausted, check_chars, check_elements  # noqa: F401  (B.Exhausted elsewhere)
from .numeric import _num, _scalar  # noqa: F401  (read by the other base-function modules)
from .values import Cell, MatlabError, Struct, matlab_shape as _shape


DATA = {"trainNetwork", "trainnet", "predict", "minibatchpredict", "classify", "forward",
        "predictAndUpdateState",
        "imageDatastore", "load", "readtable", "readmatrix", "csvread", "xlsread", "audioread",
        "imread", "splitEachLabel", "matlabroot", "audioDatastore", "fileDatastore",
        "tabularTextDatastore", "datastore", "readall", "importdata", "japaneseVowelsTrainData",
        "japaneseVowelsTestData", "digitTrain4DArrayData", "digitTest4DArrayData"}
FILES = DATA - {"trainNetwork", "trainnet", "predict", "minibatchpredict", "classify", "forward",
               "predictAndUpdateState"}

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
    "stackedplot", "plot3", "semilogx", "semilogy", "loglog", "fill", "patch", "xline", "yline",
}
# MATLAB functions the reader does not run (statistics, preprocessing, tables, text analytics,
# pretrained networks, …): `attnlab analyze` skips their statements, naming them; `run_file`
# asks for their results in the workspace
OUTSIDE = {
    "mapminmax", "normalize", "zscore", "rescale", "cvpartition", "training", "test",
    "crossval", "table2array", "array2table", "cell2mat", "num2cell", "cellfun", "arrayfun",
    "table", "height", "width", "head", "tail", "rmmissing", "fillmissing", "ismissing",
    "standardizeMissing", "movmean", "smoothdata", "interp1", "detrend", "resample", "filter",
    "buffer", "squeeze", "permute", "circshift", "flip", "fliplr",
    "flipud", "sortrows", "find", "cumsum", "cumprod", "diff",
    "median", "mode", "corrcoef", "cov", "histcounts", "discretize", "isnan", "isinf", "nnz",
    "grp2idx", "onehotencode", "onehotdecode", "dummyvar", "bayesopt",
    "optimizableVariable", "bestPoint", "perfcurve", "rocmetrics", "confusionmat", "rmse",
    "mse", "mae", "crossentropy", "l2loss", "huber", "writematrix", "writetable", "writecell",
    "save", "csvwrite", "xlswrite", "dlmwrite", "fopen", "fclose", "fread", "fwrite", "fgetl",
    "fgets", "fscanf", "textscan", "jsondecode", "jsonencode", "exist", "isfile", "isfolder",
    "dir", "mkdir", "tempdir", "tempname", "pwd", "datetime", "seconds", "minutes", "hours",
    "days", "now", "clock", "datestr", "tokenizedDocument", "wordEncoding", "doc2sequence",
    "preprocessText", "doclength", "fastTextWordEmbedding", "activations",
    "resnet18", "resnet50", "resnet101", "googlenet", "squeezenet", "alexnet", "vgg16", "vgg19",
    "mobilenetv2", "efficientnetb0", "inceptionv3", "imagePretrainedNetwork", "bert",
    "augmentedImageDatastore", "imageDataAugmenter", "transform", "shuffle", "partition",
    "minibatchqueue", "hasdata", "next", "read", "reset", "imresize", "im2single", "im2double",
    "rgb2gray", "mat2gray", "spectrogram", "stft", "cwt", "fft", "ifft", "pca", "kmeans",
    "knnsearch", "fitcsvm", "fitlm", "confusion", "str2double",
    "str2num", "int2str", "mat2str", "regexp", "regexprep", "strsplit", "strjoin", "strrep",
    "contains", "startsWith", "endsWith", "lower", "upper", "strtrim", "split", "join",
    "replace", "input", "keyboard",
}


def _size_args(args, fn: str = "size", square: bool = True) -> tuple[int, ...]:
    """MATLAB size arguments (n, or m, n, …, or [m n …]) → a shape: whole numbers, a negative
    size counting as 0 (as MATLAB); NaN, Inf and fractions are refused. One number n is the
    square n×n (as zeros(n)) unless `square` is False."""
    dims = []
    for a in args:
        if isinstance(a, str):
            raise MatlabError(f"{fn}: expected sizes (whole numbers), received the text {a!r}")
        for v in np.atleast_1d(_num(a)).ravel():
            if isinstance(v, (bool, np.bool_)):
                v = int(v)
            try:
                f = float(v)
            except (TypeError, ValueError):
                raise MatlabError(f"{fn}: expected sizes (whole numbers), received "
                                  f"{type(v).__name__}") from None
            if not math.isfinite(f) or not f.is_integer():
                raise MatlabError(f"{fn}: sizes must be whole numbers, received {_fmt_value(f)}")
            dims.append(max(int(f), 0))
    return tuple(dims * 2) if len(dims) == 1 and square else tuple(dims)


def _product(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def rng(ctx, seed=0, *args):
    """rng(seed), rng("default") (seed 0, as MATLAB), rng("shuffle") (left to the clock)."""
    import torch
    if isinstance(seed, str):
        if seed.lower() == "shuffle":
            return
        if seed.lower() != "default":
            raise MatlabError(f"rng: expected a seed, \"default\" or \"shuffle\", received {seed!r}")
        seed = 0
    seed = _scalar(_num(seed))
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2 ** 32:
        raise MatlabError(f"rng: expected a seed, a whole number from 0 to 2^32-1, received "
                          f"{_fmt_value(seed)}")
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
        d = _scalar(_num(dim))
        if not isinstance(d, int) or isinstance(d, bool) or d < 1:
            raise MatlabError(f"size(x, dim): expected a dimension ≥ 1, received "
                              f"{_fmt_value(d)}")
        return shape[d - 1] if d <= len(shape) else 1
    return np.array(shape, dtype=float)


def numel(ctx, x):
    return int(np.prod(_shape(x)))


def length(ctx, x):
    shape = _shape(x)
    return 0 if 0 in shape else max(shape)


def isempty(ctx, x):
    return numel(ctx, x) == 0


def zeros(ctx, *args):
    return _array(np.zeros, args, ctx, "zeros")


def ones(ctx, *args):
    return _array(np.ones, args, ctx, "ones")


def rand(ctx, *args):
    return _array(lambda s: np.random.rand(*s), args, ctx, "rand")


def randn(ctx, *args):
    return _array(lambda s: np.random.randn(*s), args, ctx, "randn")


def _array(make, args, ctx=None, fn="zeros"):
    args = [a for a in args if not isinstance(a, str)]       # 'single'/'like' class names
    shape = _size_args(args, fn) if args else (1, 1)
    if ctx is not None:
        check_elements(ctx, _product(shape), f"{fn}({', '.join(map(str, shape))})")
    out = make(shape)
    return _scalar(out) if out.size == 1 else out.astype(np.float32 if False else np.float64)


def _elementwise(fn):
    def f(ctx, x, *args):
        return _scalar(fn(_num(x), *[_num(a) for a in args]))
    return f


def struct(ctx, *args):
    """struct('a', 1, 'b', 'x') is one struct; a cell array value makes a struct array of its
    size, each element taking its cell ({1, 2}: 1×2), the other values (and one-cell values,
    {{1, 2}}: the cell array {1, 2}) given to every element, as MATLAB does."""
    if len(args) % 2:
        raise MatlabError("struct: expected field–value pairs")
    names = [str(k) for k in args[::2]]
    values = list(args[1::2])
    sizes = {len(v) for v in values if isinstance(v, Cell) and len(v) != 1}
    if len(sizes) > 1:
        raise MatlabError("struct: the cell array values must be of one size (or hold one "
                          "value each)")
    if not sizes:
        return Struct((k, v[0] if isinstance(v, Cell) else v) for k, v in zip(names, values))
    n = sizes.pop()
    from .objects import StructArray
    return StructArray(Struct((k, v[i] if isinstance(v, Cell) and len(v) == n else
                               v[0] if isinstance(v, Cell) else v)
                              for k, v in zip(names, values)) for i in range(n))


def cell(ctx, *args):
    if not args:
        return Cell()
    shape = _size_args(args, "cell")
    n = _product(shape)
    check_elements(ctx, n, "the cell array")
    out = Cell([None] * n)
    out.__dict__["_count"] = 1 + n               # what the interpreter's size check counts
    return out.with_dims(shape) if len(shape) == 2 else out


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
    if not hasattr(x, "detach"):
        x = _num(x)
        if isinstance(x, np.ndarray) and x.dtype.kind not in "biuf":
            raise MatlabError(f"dlarray: expected a numeric array, received an array of "
                              f"{x.dtype}")
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
    (n,) = _size_args([n], "randperm", square=False)
    check_elements(ctx, n, f"randperm({n})")
    if k is not None and not 0 <= _size_args([k], "randperm", square=False)[0] <= n:
        raise MatlabError(f"randperm(n, k): expected k between 0 and n = {n}, received "
                          f"{_fmt_value(k)}")
    p = np.random.permutation(n) + 1
    return p[:int(_scalar(k))] if k is not None else p


def reshape(ctx, x, *dims):
    """reshape(X, m, n, …) or reshape(X, [m n …]), column-major as MATLAB; [] infers one size."""
    sizes = []
    for d in dims:
        d = _num(d) if not (isinstance(d, np.ndarray) and d.size == 0) else d
        if isinstance(d, np.ndarray) and d.size == 0:
            sizes.append(-1)
        else:
            sizes.extend(_size_args([d], "reshape", square=False))
    arr = np.asarray(_num(x), dtype=float)
    arr = arr.reshape(1, -1) if arr.ndim == 1 else arr
    try:
        return arr.reshape(sizes, order="F")
    except ValueError as e:
        raise MatlabError(f"reshape: the number of elements must not change ({e})") from None


def linspace(ctx, a, b, n=100):
    (count,) = _size_args([np.floor(_num(n))], "linspace", square=False)
    check_elements(ctx, count, f"linspace(…, {count})")
    return np.linspace(float(_scalar(_num(a))), float(_scalar(_num(b))), count)


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
    if not reps:
        raise MatlabError("repmat: expected repmat(A, n) or repmat(A, m, n), received no counts")
    counts = _size_args(reps, "repmat")
    if isinstance(x, str):
        n = _product(counts)
        check_chars(ctx, n * len(x), "repmat's text")
        return x * n
    layers = _layer_items(x)
    if layers is not None:                      # repmat(block, 3, 1): the layers n times, copies
        import copy
        n = _product(counts)
        check_elements(ctx, n * len(layers), "repmat's layer array")
        out = [copy.copy(v) for _ in range(n) for v in layers]
        for v, original in zip(out, layers * n):
            v.__dict__["_matlab_copy_of"] = original.__dict__.get("_matlab_copy_of", original)
        return out
    if isinstance(x, (list, Cell)):
        raise MatlabError(f"repmat: expected a number, array or text, received "
                          f"{type(x).__name__}")
    arr = np.asarray(_num(x))
    arr = arr.reshape(1, -1) if arr.ndim == 1 else np.atleast_2d(arr)
    check_elements(ctx, _product(counts) * arr.size, "repmat's array")
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


def _containers():
    from .objects import Containers
    return Containers()


NAMESPACES = {"parallel": Namespace("parallel"), "matlab": Namespace("matlab"),
              "containers": _containers()}


def _can_use_gpu() -> bool:
    import torch
    return bool(torch.cuda.is_available())


def extractdata(ctx, x):
    return x.detach().cpu().numpy() if hasattr(x, "detach") else x


# text and messages (text.py), reached through this module as the interpreter does
from .text import (_fmt_value, _format, char, disp, error, fprintf, num2str,  # noqa: E402,F401
                   sprintf, strcat, strcmp, strcmpi, string, warning)

def _in_calling(ctx, *args, **kwargs):
    """evalin, assignin, feval and exist read the running workspace: the interpreter's
    workspace calls run them (workspace_calls.py); listed here so that they are known names."""
    raise MatlabError("this function runs inside the interpreter only")


BASE = {
    "evalin": _in_calling, "assignin": _in_calling, "feval": _in_calling,
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
    "sum": N.reduction(np.sum), "mean": N.reduction(np.mean), "prod": N.reduction(np.prod),
    "max": N.extreme(np.maximum), "min": N.extreme(np.minimum), "std": N.spread(np.std),
    "var": N.spread(np.var), "sort": N.sort, "cat": N.cat,
    "horzcat": lambda ctx, *a: N.cat(ctx, 2, *a), "vertcat": lambda ctx, *a: N.cat(ctx, 1, *a),
    "strcmp": strcmp, "strcmpi": strcmpi, "strcat": strcat, "string": string, "char": char,
    "struct": struct, "cell": cell, "isfield": isfield, "fullfile": fullfile,
    "dlarray": dlarray, "extractdata": extractdata, "randperm": randperm, "reshape": reshape,
    "linspace": linspace, "repmat": repmat, "any": _any_all(np.any), "all": _any_all(np.all),
    **{name: _noop for name in GRAPHICS},
}
# cell arrays, maps, tables, classes, text and dates (data_builtins.py with cell_builtins.py and
# date_builtins.py): run, not skipped
from .data_builtins import FUNCTIONS as _DATA_FUNCTIONS  # noqa: E402
BASE.update(_DATA_FUNCTIONS)
OUTSIDE.difference_update(_DATA_FUNCTIONS)
CONSTANTS = {"true": True, "false": False, "pi": math.pi, "Inf": math.inf, "inf": math.inf,
             "NaN": math.nan, "nan": math.nan, "eps": float(np.finfo(float).eps)}
