"""More Deep Learning Toolbox layer functions: 1-D pooling, `inputLayer(size, format)`,
`functionLayer`, `identityLayer`, `networkLayer`, `scalingLayer`."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import math

from torch import nn

from .. import layers as L
from attnlab.core.errors import ArgumentError
from ..network import Network
from ._options import _as_list, _flag, _int, _ints, _is_vector, _parse, _word
from ._types import Size
from ..layers import (EmbeddingConcatenation, GroupedConv2d, GroupNorm, Identity, PatchEmbedding,
                      Pool1d, Scaling, SpatialDropout, Swish)
from .layers import LayerArray
from .mlayers import (ELU, ClippedReLU, CrossChannelNormalization, Resize2d, SequenceFolding,
                      SequenceUnfolding, Softplus)

__all__ = ["maxPooling1dLayer", "averagePooling1dLayer", "inputLayer", "functionLayer",
           "identityLayer", "networkLayer", "scalingLayer", "patchEmbeddingLayer",
           "embeddingConcatenationLayer", "swishLayer", "sequenceFoldingLayer",
           "sequenceUnfoldingLayer", "groupedConvolution2dLayer", "spatialDropoutLayer"]


def _pool1d(fn, mode, poolSize, args, kwargs):
    _, o = _parse(fn, args, kwargs, {"Name": None, "Stride": 1, "Padding": 0, "PaddingValue": 0})
    if o["PaddingValue"] not in (0, 0.0) and mode == "average":
        raise ArgumentError(f"{fn}: expected PaddingValue=0, received {o['PaddingValue']!r}: "
                            "attnlab averages zero padding.")
    pad = o["Padding"]
    if not isinstance(pad, str):
        vals = _as_list(pad) if _is_vector(pad) else [pad]
        pad = [_int(fn, "Padding", v, least=0) for v in vals]
    size = _as_list(poolSize)[0] if _is_vector(poolSize) else poolSize
    stride = _as_list(o["Stride"])[0] if _is_vector(o["Stride"]) else o["Stride"]
    return Pool1d(mode, _int(fn, "poolSize", size), _int(fn, "Stride", stride), pad,
                  name=o["Name"])


def maxPooling1dLayer(poolSize: Size, *args: Any, **kwargs: Any) -> Pool1d:
    """`maxPooling1dLayer(k)`: max over windows of k time steps, B×T×C → B×T'×C; MATLAB's
    defaults Stride 1 and Padding 0; Padding "same", p or [before after]."""
    return _pool1d("maxPooling1dLayer", "max", poolSize, args, kwargs)


def averagePooling1dLayer(poolSize: Size, *args: Any, **kwargs: Any) -> Pool1d:
    """`averagePooling1dLayer(k)`: the mean over windows of k time steps (zero padding counts)."""
    return _pool1d("averagePooling1dLayer", "average", poolSize, args, kwargs)


def _size(v):
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else v


def inputLayer(inputSize: Size | Sequence[float], inputFormat: str | None = None, *args: Any,
               **kwargs: Any) -> L.SequenceInput | L.ImageInput | L.FeatureInput:
    """`inputLayer(size, format)`: one size per letter of the format, NaN where it varies.
    "CBT"/"CT"/"BTC" → sequenceInputLayer (B×T×C), "SSCB"/"SSC" → imageInputLayer (B×C×H×W),
    "CB"/"BC"/"C" → featureInputLayer (B×C)."""
    fn = "inputLayer"
    _, o = _parse(fn, args, kwargs, {"Name": None})
    if inputFormat is None or not isinstance(inputFormat, str) or not inputFormat:
        raise ArgumentError(f"{fn}: expected a data format such as \"CBT\" (sequences), \"SSCB\" "
                            f"(images) or \"CB\" (features), received {inputFormat!r}: attnlab "
                            "networks take formatted data.")
    fmt = inputFormat.upper()
    sizes = _as_list(inputSize) if _is_vector(inputSize) else [inputSize]
    if len(sizes) != len(fmt):
        raise ArgumentError(f"{fn}: expected one size per letter of the format \"{fmt}\" "
                            f"({len(fmt)}), received {len(sizes)} sizes {sizes}.")
    if set(fmt) - set("SCBT") or any(fmt.count(c) > 1 for c in "CBT") or "C" not in fmt:
        raise ArgumentError(f"{fn}: expected a format of S, C, B and T with one C (e.g. \"CBT\", "
                            f"\"SSCB\", \"CB\"), received \"{inputFormat}\".")
    by = {c: _size(s) for c, s in zip(fmt, sizes)}
    channels = _int(fn, "the channel size (C)", by["C"])
    spatial = [_size(s) for c, s in zip(fmt, sizes) if c == "S"]
    if "T" in fmt and not spatial:
        t = by["T"]
        return L.SequenceInput(channels, None if t is None else _int(fn, "the time size (T)", t),
                               name=o["Name"])
    if len(spatial) == 2 and "T" not in fmt:
        h, w = (_int(fn, "the spatial sizes (S)", s) for s in spatial)
        return L.ImageInput((channels, h, w), name=o["Name"])
    if not spatial and "T" not in fmt:
        return L.FeatureInput(channels, name=o["Name"])
    raise ArgumentError(f"{fn}: expected sequences (\"CBT\"), 2-D images (\"SSCB\") or features "
                        f"(\"CB\"), received \"{inputFormat}\": attnlab has no such data layout.")


class _Function(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)

    def __deepcopy__(self, memo):
        return _Function(self.fn)      # the function is shared: it holds code, not weights


def functionLayer(fun: Callable[..., Any], *args: Any, **kwargs: Any) -> L.Module:
    """`functionLayer(@(X) …)` or a Python callable on torch tensors (attnlab layout), NumInputs
    inputs and NumOutputs outputs; sizes are found by a trial run. It cannot be saved to a file
    (it holds code): register its module before `al.load` (see attnlab.io)."""
    fn = "functionLayer"
    _, o = _parse(fn, args, kwargs, {"Name": None, "NumInputs": None, "NumOutputs": None,
                                     "Formattable": False, "Acceleratable": False,
                                     "Acceleration": "auto", "Description": "",
                                     "InputNames": None, "OutputNames": None})
    if not callable(fun):
        raise ArgumentError(f"{fn}: expected a function handle (@(X) …) or a Python callable, "
                            f"received {type(fun).__name__}.")
    _flag(fn, "Formattable", o["Formattable"])
    _flag(fn, "Acceleratable", o["Acceleratable"])
    names = {side: None if o[f"{side}Names"] is None else
             [str(v) for v in ([o[f"{side}Names"]] if isinstance(o[f"{side}Names"], str)
                               else _as_list(o[f"{side}Names"]))] for side in ("Input", "Output")}
    counts = {}
    for side in ("Input", "Output"):
        given, named = o[f"Num{side}s"], names[side]
        count = _int(fn, f"Num{side}s", given) if given is not None else \
            len(named) if named else 1
        if named is not None and len(named) != count:
            raise ArgumentError(f"{fn}: expected {count} {side}Names (one per "
                                f"{side.lower()}), received {len(named)}.")
        counts[side] = count
    layer = L.Module(_Function(fun), num_inputs=counts["Input"], num_outputs=counts["Output"],
                     name=o["Name"])
    for side in ("Input", "Output"):          # MATLAB's port names: connectLayers uses them
        if names[side]:
            layer.__dict__[f"_matlab_{side.lower()}_names"] = names[side]
    return layer


def identityLayer(*args: Any, **kwargs: Any) -> Identity:
    """`identityLayer`: passes its input through (a named junction in a graph)."""
    _, o = _parse("identityLayer", args, kwargs, {"Name": None})
    return Identity(name=o["Name"])


def scalingLayer(*args: Any, **kwargs: Any) -> Scaling:
    """`scalingLayer(Scale=s, Bias=b)`: Y = s .* X + b, fixed (not learned); scalars or one value
    per channel."""
    _, o = _parse("scalingLayer", args, kwargs, {"Name": None, "Scale": 1, "Bias": 0})
    return Scaling(o["Scale"], o["Bias"], name=o["Name"])


def networkLayer(net: Network | LayerArray, *args: Any, **kwargs: Any) -> Network:
    """`networkLayer(net)`: a dlnetwork used as one layer of another network (its inputs and
    outputs become the layer's ports)."""
    fn = "networkLayer"
    _, o = _parse(fn, args, kwargs, {"Name": None, "InputNames": None, "OutputNames": None})
    if isinstance(net, (list, tuple)):
        from .networks import dlnetwork
        net = dlnetwork(net, Initialize=False)
    if not isinstance(net, Network):
        raise ArgumentError(f"{fn}: expected a dlnetwork or a layer array, received "
                            f"{type(net).__name__}.")
    if o["Name"] is not None:
        net.name = str(o["Name"])
    return net


# ================================================================ vision transformers ===

def patchEmbeddingLayer(patchSize: Size, outputSize: int, *args: Any, **kwargs: Any) -> PatchEmbedding:
    """`patchEmbeddingLayer(patchSize, outputSize)`: an image B×C×H×W → the sequence of its
    patches B×T×outputSize (MATLAB keeps them as a spatial dimension, attnlab as time steps);
    SpatialFlattenMode "column-major" (MATLAB's default) or "row-major"."""
    fn = "patchEmbeddingLayer"
    _, o = _parse(fn, args, kwargs, {"Name": None, "SpatialFlattenMode": "column-major"})
    size = [_int(fn, "patchSize", v) for v in (_as_list(patchSize) if _is_vector(patchSize)
                                               else [patchSize] * 2)]
    if len(size) == 1:
        size = size * 2
    mode = o["SpatialFlattenMode"]
    mode = mode.lower() if isinstance(mode, str) else mode
    return PatchEmbedding(tuple(size), _int(fn, "outputSize", outputSize), mode, name=o["Name"])


def embeddingConcatenationLayer(*args: Any, **kwargs: Any) -> EmbeddingConcatenation:
    """`embeddingConcatenationLayer`: prepends a learned vector (the class token) to each
    sequence, B×T×C → B×(T+1)×C; read it back with indexing1dLayer("first")."""
    _, o = _parse("embeddingConcatenationLayer", args, kwargs, {"Name": None})
    return EmbeddingConcatenation(name=o["Name"])


def swishLayer(*args: Any, **kwargs: Any) -> Swish:
    """`swishLayer`: x·sigmoid(x), any shape."""
    _, o = _parse("swishLayer", args, kwargs, {"Name": None})
    return Swish(name=o["Name"])


def groupedConvolution2dLayer(filterSize: Any, numFiltersPerGroup: int, numGroups: Any, *args: Any,
                              **kwargs: Any) -> GroupedConv2d:
    """`groupedConvolution2dLayer(filterSize, numFiltersPerGroup, numGroups)`, numGroups a
    number or "channel-wise" (one group per input channel: a depthwise convolution). MATLAB's
    defaults Padding 0, Stride 1; Padding "same", p, [p q] or symmetric [t b l r]."""
    fn = "groupedConvolution2dLayer"
    from .layers import _padding2d, _padding_value
    _, o = _parse(fn, args, kwargs, {"Name": None, "Stride": 1, "DilationFactor": 1,
                                     "Padding": 0, "PaddingValue": 0, "NumChannelsPerGroup": "auto"})
    _padding_value(fn, o["PaddingValue"])
    if isinstance(numGroups, str):
        if numGroups.lower() != "channel-wise":
            raise ArgumentError(f"{fn}: expected numGroups to be a number or \"channel-wise\", "
                                f"received {numGroups!r}.")
        groups = None
    else:
        groups = _int(fn, "numGroups", numGroups)
    return GroupedConv2d(_ints(fn, "filterSize", filterSize, 2),
                         _int(fn, "numFiltersPerGroup", numFiltersPerGroup), groups,
                         stride=_ints(fn, "Stride", o["Stride"], 2),
                         padding=_padding2d(fn, o["Padding"]),
                         dilation=_ints(fn, "DilationFactor", o["DilationFactor"], 2),
                         name=o["Name"])


from .weights import collect_presets as _collect  # noqa: E402
groupedConvolution2dLayer = _collect(groupedConvolution2dLayer)
patchEmbeddingLayer = _collect(patchEmbeddingLayer)
embeddingConcatenationLayer = _collect(embeddingConcatenationLayer)


# ============================================================ sequences of images ===

def sequenceFoldingLayer(*args: Any, **kwargs: Any) -> SequenceFolding:
    """`sequenceFoldingLayer`: the frames of the image sequence of `sequenceInputLayer([h w c])`
    folded into the batch (its outputs `out`, the images, and `miniBatchSize`, for the
    sequenceUnfoldingLayer). The frame size comes from the input layer it follows."""
    _, o = _parse("sequenceFoldingLayer", args, kwargs, {"Name": None})
    return SequenceFolding(name=o["Name"])


def sequenceUnfoldingLayer(*args: Any, **kwargs: Any) -> SequenceUnfolding:
    """`sequenceUnfoldingLayer`: the folded frames (input `in`) back into the sequences of
    input `miniBatchSize`, connected with connectLayers(lgraph, "fold/miniBatchSize",
    "unfold/miniBatchSize"); each frame flattened as MATLAB's flattenLayer does."""
    _, o = _parse("sequenceUnfoldingLayer", args, kwargs, {"Name": None})
    return SequenceUnfolding(name=o["Name"])


def spatialDropoutLayer(*args: Any, **kwargs: Any) -> SpatialDropout:
    """`spatialDropoutLayer`, `spatialDropoutLayer(Probability=p)` (default 0.5): whole channels
    dropped during training, over all time steps or pixels (`SpatialDropout`)."""
    pos, o = _parse("spatialDropoutLayer", args, kwargs, {"Name": None, "Probability": 0.5},
                    positional=1)
    p = pos[0] if pos else o["Probability"]
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p < 1:
        raise ArgumentError(f"spatialDropoutLayer: expected Probability in [0, 1), received "
                            f"{p!r}.")
    return SpatialDropout(float(p), name=o["Name"])


# ================================================= normalisation and more activations ===

def groupNormalizationLayer(numGroups: int | str, *args: Any, **kwargs: Any) -> GroupNorm:
    """`groupNormalizationLayer(numGroups)` → `L.GroupNorm(numGroups, eps=Epsilon)`: each
    observation's channels in numGroups groups, each normalised over its channels and all
    time steps or pixels; numGroups "all-channels" (one group) or "channel-wise" (one per
    channel). Learnables Scale, Offset (C each)."""
    fn = "groupNormalizationLayer"
    _, o = _parse(fn, args, kwargs, {"Name": None, "Epsilon": 1e-5})
    groups = numGroups.lower() if isinstance(numGroups, str) else _int(fn, "numGroups",
                                                                         numGroups)
    if isinstance(groups, str) and groups not in ("all-channels", "channel-wise"):
        raise ArgumentError(f"{fn}: expected numGroups to be a positive integer, "
                            f"\"all-channels\" or \"channel-wise\", received {numGroups!r}.")
    return GroupNorm(groups, eps=_positive(fn, "Epsilon", o["Epsilon"]), name=o["Name"])


def instanceNormalizationLayer(*args: Any, **kwargs: Any) -> GroupNorm:
    """`instanceNormalizationLayer` → `L.GroupNorm("channel-wise")`: each channel of each
    observation normalised over its time steps or pixels. Learnables Scale, Offset."""
    fn = "instanceNormalizationLayer"
    _, o = _parse(fn, args, kwargs, {"Name": None, "Epsilon": 1e-5})
    layer = GroupNorm("channel-wise", eps=_positive(fn, "Epsilon", o["Epsilon"]),
                      name=o["Name"])
    layer.__dict__["_matlab_type"] = fn
    layer.__dict__["stem"] = "instancenorm"
    return layer


def _positive(fn, what, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ArgumentError(f"{fn}: expected {what} to be a positive number, received "
                            f"{value!r}.")
    return float(value)


def eluLayer(*args: Any, **kwargs: Any) -> ELU:
    """`eluLayer(alpha)` (default 1): x for x > 0, alpha·(exp(x) − 1) below."""
    pos, o = _parse("eluLayer", args, kwargs, {"Name": None, "Alpha": 1.0}, positional=1)
    return ELU(_positive("eluLayer", "alpha", pos[0] if pos else o["Alpha"]), name=o["Name"])


def clippedReluLayer(ceiling: float, *args: Any, **kwargs: Any) -> ClippedReLU:
    """`clippedReluLayer(ceiling)`: min(max(x, 0), ceiling)."""
    _, o = _parse("clippedReluLayer", args, kwargs, {"Name": None})
    return ClippedReLU(_positive("clippedReluLayer", "ceiling", ceiling), name=o["Name"])


def softplusLayer(*args: Any, **kwargs: Any) -> Softplus:
    """`softplusLayer`: log(1 + exp(x))."""
    _, o = _parse("softplusLayer", args, kwargs, {"Name": None})
    return Softplus(name=o["Name"])


def crossChannelNormalizationLayer(windowChannelSize: int, *args: Any,
                                   **kwargs: Any) -> CrossChannelNormalization:
    """`crossChannelNormalizationLayer(windowChannelSize, Alpha=1e-4, Beta=0.75, K=2)`: local
    response normalisation across channels."""
    fn = "crossChannelNormalizationLayer"
    _, o = _parse(fn, args, kwargs, {"Name": None, "Alpha": 1e-4, "Beta": 0.75, "K": 2.0})
    return CrossChannelNormalization(_int(fn, "windowChannelSize", windowChannelSize),
                                     float(o["Alpha"]), float(o["Beta"]), float(o["K"]),
                                     name=o["Name"])


def resize2dLayer(*args: Any, **kwargs: Any) -> Resize2d:
    """`resize2dLayer(Scale=s)` or `resize2dLayer(OutputSize=[h w])`, Method "nearest"
    (default) or "bilinear", with MATLAB's default half-pixel geometry and "round" rounding."""
    fn = "resize2dLayer"
    _, o = _parse(fn, args, kwargs, {"Name": None, "Scale": None, "OutputSize": None,
                                     "Method": "nearest", "GeometricTransformMode": "half-pixel",
                                     "NearestRoundingMode": "round",
                                     "EnableReferenceInput": False})
    method = _word(fn, "Method", o["Method"], ("nearest", "bilinear"))
    _word(fn, "GeometricTransformMode", o["GeometricTransformMode"], ("half-pixel",))
    _word(fn, "NearestRoundingMode", o["NearestRoundingMode"], ("round",))
    if _flag(fn, "EnableReferenceInput", o["EnableReferenceInput"]):
        raise ArgumentError(f"{fn}: attnlab has no counterpart of EnableReferenceInput=true "
                            "(resizing to a second input's size); give OutputSize.")
    scale, size = o["Scale"], o["OutputSize"]
    if (scale is None) == (size is None):
        raise ArgumentError(f"{fn}: expected Scale or OutputSize (one of them), received "
                            f"{'both' if scale is not None else 'neither'}.")
    if scale is not None:
        values = _as_list(scale) if _is_vector(scale) else [scale, scale]
        return Resize2d(scale=[float(v) for v in values[:2]] * (2 if len(values) == 1 else 1),
                        method=method, name=o["Name"])
    return Resize2d(size=[_int(fn, "OutputSize", v) for v in _as_list(size)][:2],
                    method=method, name=o["Name"])


# ================================================ layers attnlab has no counterpart of ===

# MATLAB layer functions attnlab cannot build exactly: refused by name (what attnlab has instead)
_NO_COUNTERPART = {
    "transposedConv1dLayer": "upsample with resize2dLayer or functionLayer",
    "transposedConv2dLayer": "upsample with resize2dLayer followed by convolution2dLayer",
    "transposedConv3dLayer": "attnlab has no 3-D layers",
    "convolution3dLayer": "attnlab has no 3-D layers", "image3dInputLayer": "attnlab has no 3-D layers",
    "maxPooling3dLayer": "attnlab has no 3-D layers", "averagePooling3dLayer": "attnlab has no 3-D layers",
    "globalAveragePooling3dLayer": "attnlab has no 3-D layers",
    "globalMaxPooling3dLayer": "attnlab has no 3-D layers",
    "lstmProjectedLayer": "use lstmLayer", "gruProjectedLayer": "use gruLayer",
    "preluLayer": "use leakyReluLayer (a fixed slope)", "maxUnpooling2dLayer": "",
    "crop2dLayer": "", "crop3dLayer": "", "depthToSpace2dLayer": "", "spaceToDepthLayer": "",
    "pixelClassificationLayer": "", "dicePixelClassificationLayer": "", "focalLossLayer": "",
    "complexToRealLayer": "", "realToComplexLayer": "", "stftLayer": "", "istftLayer": "",
    "cwtLayer": "", "modwtLayer": "", "roiInputLayer": "", "roiMaxPooling2dLayer": "",
    "pointCloudInputLayer": "", "peepholeLSTMLayer": "use lstmLayer",
    "resize3dLayer": "attnlab has no 3-D layers", "fourierLayer": "",
}


def _refused(name: str, instead: str) -> Callable[..., NoReturn]:
    def make(*args: Any, **kwargs: Any) -> NoReturn:        # it only ever refuses
        raise ArgumentError(f"{name}: attnlab has no counterpart of {name}"
                            + (f" ({instead})" if instead else "") + ".")
    make.__name__ = name
    make.__doc__ = f"`{name}`: refused — attnlab has no counterpart of it."
    return make


globals().update({name: _refused(name, why) for name, why in _NO_COUNTERPART.items()})

groupNormalizationLayer = _collect(groupNormalizationLayer)
instanceNormalizationLayer = _collect(instanceNormalizationLayer)
__all__ += ["groupNormalizationLayer", "instanceNormalizationLayer", "eluLayer",
            "clippedReluLayer", "softplusLayer", "crossChannelNormalizationLayer",
            "resize2dLayer", *_NO_COUNTERPART]
