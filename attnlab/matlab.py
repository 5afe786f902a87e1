"""MATLAB's Deep Learning Toolbox names, on attnlab (DESIGN §2, "MATLAB compatibility").

Every function here returns the same objects as attnlab's own API (`attnlab.layers` layers, an
`al.Network`, `al.TrainingOptions`), so MATLAB code ports line by line and mixes freely with
idiomatic attnlab::

    from attnlab.matlab import *
    net = dlnetwork()
    layers = [sequenceInputLayer(1, Name="decoder-input"),
              lstmLayer(64, 'OutputMode', 'sequence', Name='lstm-decoder'),
              attentionLayer(8, Name="cross-attention")]
    net = addLayers(net, layers)           # MATLAB functions return the network: keep the habit
    net = connectLayers(net, "fc-key", "cross-attention/key")
    analyzeNetwork(net)

Arguments
---------
Required arguments are positional, as in MATLAB. Options are MATLAB's name–value arguments,
given either as Python keywords (`OutputMode="last"`) or as MATLAB's positional pairs
(`lstmLayer(64, 'OutputMode', 'last')`); names match case-insensitively, as MATLAB does, and so do
the text values of options that choose among words (`OutputMode="Last"`). An unknown name raises
`ArgumentError` listing the valid ones. MATLAB's learn-rate and L2 factors are accepted at their
default 1; initializers and preset weights are refused with a pointer to `net.learnables`.

Where attnlab differs from MATLAB
---------------------------------
- Layouts are PyTorch's, batch first: sequences B×T×C, images B×C×H×W, features B×C.
  `imageInputLayer([h w c])` takes MATLAB's order and makes `ImageInput((c, h, w))`.
- Input layers do not normalise: `Normalization="none"` only (MATLAB's image default is
  "zerocenter"); normalise the data before training. `MinLength` is accepted and not needed.
- Indices are converted: `indexing1dLayer(k)` (1-based) is `Index1d(k - 1)`;
  `embeddingLayer(d, maxIndex)` and `wordEmbeddingLayer(d, numWords)` get `maxIndex + 1` rows, so
  MATLAB's 1-based token indices work unchanged (row 0 is never used by them).
- Pooling: MATLAB's default `Stride` is 1 (attnlab's default is the pool size); the mapping
  passes MATLAB's value explicitly. Convolutions: MATLAB's default `Padding` is 0 ("valid").
- `concatenationLayer(dim, n)`: dim 1 is the channel dimension of MATLAB's "CB"/"CBT" data and
  maps to `dim="channel"`; images concatenate channels with `depthConcatenationLayer(n)`; the
  words "channel"/"time" are accepted too. (dim 3 is ambiguous — channels of images, time of
  sequences — and is refused with that explanation.)
- Legacy output layers: `classificationLayer` and `regressionLayer` make an `OutputLayer` marker.
  `dlnetwork`, `addLayers`, `layerGraph` and `analyzeNetwork` drop it from the graph with a
  `MatlabNote` warning (attnlab networks end at their last layer; the loss is an argument of
  `trainnet`). The legacy `trainNetwork(X, Y, layers, options)` reads the loss from it:
  classificationLayer → "crossentropy", regressionLayer → "mse".
- `trainnet` returns the trained network (as `net = trainnet(...)`); MATLAB's second output
  `info` is at `net.training_info`.
- `plot(net)` returns a matplotlib figure; `plot(net, "net.png")` also saves it.
  `analyzeNetwork` prints the analysis table and returns the `Analysis`.
"""
from __future__ import annotations

import math
import warnings
from typing import Any

from . import layers as L
from .errors import ArgumentError, NetworkError, close_matches
from .layers.base import Layer
from .network import Network

__all__ = [
    # inputs
    "sequenceInputLayer", "imageInputLayer", "featureInputLayer",
    # recurrent, attention, dense, convolution
    "lstmLayer", "bilstmLayer", "gruLayer", "attentionLayer", "selfAttentionLayer",
    "fullyConnectedLayer", "convolution1dLayer", "convolution2dLayer",
    # pooling and reshaping
    "maxPooling2dLayer", "averagePooling2dLayer", "globalAveragePooling1dLayer",
    "globalMaxPooling1dLayer", "globalAveragePooling2dLayer", "globalMaxPooling2dLayer",
    "flattenLayer", "indexing1dLayer",
    # positions, embeddings, normalisation, activations
    "positionEmbeddingLayer", "sinusoidalPositionEncodingLayer", "embeddingLayer",
    "wordEmbeddingLayer", "layerNormalizationLayer", "batchNormalizationLayer", "dropoutLayer",
    "reluLayer", "leakyReluLayer", "geluLayer", "tanhLayer", "sigmoidLayer", "softmaxLayer",
    # combining
    "additionLayer", "concatenationLayer", "depthConcatenationLayer", "multiplicationLayer",
    # legacy output layers
    "classificationLayer", "regressionLayer", "OutputLayer", "MatlabNote",
    # networks
    "dlnetwork", "layerGraph", "addLayers", "connectLayers", "disconnectLayers", "removeLayers",
    "replaceLayer", "analyzeNetwork", "plot", "initialize", "predict", "minibatchpredict",
    # training
    "trainingOptions", "trainnet", "trainNetwork", "classify",
]


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
          "max", "queryweights", "keyweights", "valueweights", "outputweights")


def _matlab_only(fn: str, name: str, value) -> bool:
    """True when `name` is a MATLAB option attnlab accepts only as a no-op; raises for any other
    value. False when attnlab does not know the name at all."""
    key = name.lower()
    if key.endswith(("learnratefactor", "l2factor")):
        if value == 1:
            return True
        raise ArgumentError(
            f"{fn}: expected {name}=1, received {value!r}: attnlab has no per-layer learning-rate "
            "or L2 factors. Give the optimizer parameter groups from net.learnables instead.")
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
    args = list(args)
    pos = []
    while args and len(pos) < positional and not (
            isinstance(args[0], str) and args[0].lower() in valid and len(args) >= 2):
        pos.append(args.pop(0))
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
        if key in valid:
            out[valid[key]] = value
        elif not _matlab_only(fn, name, value):
            hint = _HINTS.get(key, "")
            raise ArgumentError(
                f"{fn}: expected an option among {', '.join(options) or 'none'}, received "
                f"'{name}'.{close_matches(name, options)} {hint}".rstrip())
    return pos, out


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


def _normalization(fn: str, value) -> None:
    if isinstance(value, str) and value.lower() == "none":
        return
    raise ArgumentError(
        f"{fn}: expected Normalization=\"none\", received {value!r}: attnlab input layers do not "
        "normalise. Normalise the data before training, e.g. X = (X - X.mean(0)) / X.std(0).")


def _mask_option(fn: str, value):
    if isinstance(value, str):
        return None if _word(fn, "AttentionMask", value, ("none", "causal")) == "none" else "causal"
    raise ArgumentError(f"{fn}: expected AttentionMask \"none\" or \"causal\", received a custom "
                        "mask. Give a custom mask at run time through the layer's mask input "
                        "(HasPaddingMaskInput=true) or use al.attention(..., attention_mask=M).")


# ============================================================================= inputs ===

def sequenceInputLayer(inputSize, *args, **kwargs) -> L.SequenceInput:
    """`sequenceInputLayer(numChannels)` → `L.SequenceInput(numChannels)`: data B×T×C."""
    _, o = _parse("sequenceInputLayer", args, kwargs,
                  {"Name": None, "Normalization": "none", "MinLength": 1,
                   "SplitComplexInputs": False, "NormalizationDimension": "auto"})
    _normalization("sequenceInputLayer", o["Normalization"])
    if _flag("sequenceInputLayer", "SplitComplexInputs", o["SplitComplexInputs"]):
        raise ArgumentError("sequenceInputLayer: expected SplitComplexInputs=false, received "
                            "true: attnlab takes real data; split real and imaginary parts into "
                            "channels yourself.")
    if _is_vector(inputSize) and len(_as_list(inputSize)) > 1:
        raise ArgumentError(
            f"sequenceInputLayer: expected the number of channels, received the size "
            f"{_as_list(inputSize)} (a sequence of images). attnlab sequences are B×T×C: turn "
            "each frame into a vector first (e.g. flatten it), or use imageInputLayer.")
    if _is_vector(inputSize):
        inputSize = _as_list(inputSize)[0]
    _int("sequenceInputLayer", "MinLength", o["MinLength"])
    return L.SequenceInput(_int("sequenceInputLayer", "inputSize", inputSize), name=o["Name"])


def imageInputLayer(inputSize, *args, **kwargs) -> L.ImageInput:
    """`imageInputLayer([h w c])` → `L.ImageInput((c, h, w))`: data B×C×H×W (PyTorch layout).
    `[h w]` means one channel."""
    _, o = _parse("imageInputLayer", args, kwargs,
                  {"Name": None, "Normalization": "none", "NormalizationDimension": "auto",
                   "SplitComplexInputs": False})
    _normalization("imageInputLayer", o["Normalization"])   # MATLAB's default zerocenter: see above
    size = _as_list(inputSize) if _is_vector(inputSize) else None
    if size is None or len(size) not in (2, 3):
        raise ArgumentError(f"imageInputLayer: expected [h w c] (MATLAB order), received "
                            f"{inputSize!r}. For 28×28 grey images: imageInputLayer([28 28 1]) — "
                            "in Python imageInputLayer([28, 28, 1]).")
    h, w, c = (size + [1])[:3]
    return L.ImageInput((_int("imageInputLayer", "channels", c), _int("imageInputLayer", "height", h),
                         _int("imageInputLayer", "width", w)), name=o["Name"])


def featureInputLayer(numFeatures, *args, **kwargs) -> L.FeatureInput:
    """`featureInputLayer(n)` → `L.FeatureInput(n)`: data B×C."""
    _, o = _parse("featureInputLayer", args, kwargs,
                  {"Name": None, "Normalization": "none", "NormalizationDimension": "auto",
                   "SplitComplexInputs": False})
    _normalization("featureInputLayer", o["Normalization"])
    return L.FeatureInput(_int("featureInputLayer", "numFeatures", numFeatures), name=o["Name"])


# ========================================================================== recurrent ===

def _recurrent(fn, cls, numHiddenUnits, args, kwargs, bidirectional=False, gru=False):
    options = {"Name": None, "OutputMode": "sequence", "HasStateInputs": False,
               "HasStateOutputs": False, "StateActivationFunction": "tanh",
               "GateActivationFunction": "sigmoid"}
    if gru:
        options["ResetGateMode"] = "after-multiplication"
    _, o = _parse(fn, args, kwargs, options)
    _word(fn, "StateActivationFunction", o["StateActivationFunction"], ("tanh",))
    _word(fn, "GateActivationFunction", o["GateActivationFunction"], ("sigmoid",))
    if gru:
        # PyTorch's GRU (cuDNN's) applies the reset gate after the recurrent multiplication
        _word(fn, "ResetGateMode", o["ResetGateMode"],
              ("after-multiplication", "recurrent-bias-after-multiplication"))
    return cls(_int(fn, "numHiddenUnits", numHiddenUnits),
               output_mode=_word(fn, "OutputMode", o["OutputMode"], ("sequence", "last")),
               bidirectional=bidirectional,
               has_state_inputs=_flag(fn, "HasStateInputs", o["HasStateInputs"]),
               has_state_outputs=_flag(fn, "HasStateOutputs", o["HasStateOutputs"]),
               name=o["Name"])


def lstmLayer(numHiddenUnits, *args, **kwargs) -> L.LSTM:
    """`lstmLayer(H, OutputMode="sequence"|"last")` → `L.LSTM(H, output_mode=...)`."""
    return _recurrent("lstmLayer", L.LSTM, numHiddenUnits, args, kwargs)


def bilstmLayer(numHiddenUnits, *args, **kwargs) -> L.LSTM:
    """`bilstmLayer(H)` → `L.LSTM(H, bidirectional=True)`: 2·H channels out."""
    return _recurrent("bilstmLayer", L.LSTM, numHiddenUnits, args, kwargs, bidirectional=True)


def gruLayer(numHiddenUnits, *args, **kwargs) -> L.GRU:
    """`gruLayer(H)` → `L.GRU(H)` (PyTorch's GRU, MATLAB's
    ResetGateMode="recurrent-bias-after-multiplication")."""
    return _recurrent("gruLayer", L.GRU, numHiddenUnits, args, kwargs, gru=True)


# ========================================================================== attention ===

def attentionLayer(numHeads, *args, **kwargs) -> L.Attention:
    """`attentionLayer(numHeads)` → `L.Attention(numHeads)`: inputs query, key, value (+ mask),
    output out (+ scores); no learnables."""
    fn = "attentionLayer"
    _, o = _parse(fn, args, kwargs,
                  {"Name": None, "Scale": "auto", "HasPaddingMaskInput": False,
                   "HasScoresOutput": False, "AttentionMask": "none", "DropoutProbability": 0.0})
    return L.Attention(_int(fn, "numHeads", numHeads), scale=_scale(fn, o["Scale"]),
                       attention_mask=_mask_option(fn, o["AttentionMask"]),
                       dropout=float(o["DropoutProbability"]),
                       has_padding_mask_input=_flag(fn, "HasPaddingMaskInput", o["HasPaddingMaskInput"]),
                       has_scores_output=_flag(fn, "HasScoresOutput", o["HasScoresOutput"]),
                       name=o["Name"])


def selfAttentionLayer(numHeads, numKeyChannels, *args, **kwargs) -> L.SelfAttention:
    """`selfAttentionLayer(numHeads, numKeyChannels)` → `L.SelfAttention(numHeads,
    numKeyChannels)`: B×T×C → B×T×OutputSize (default C); NumValueChannels defaults to
    numKeyChannels. Learnables query, key, value, output (weight out×in, bias)."""
    fn = "selfAttentionLayer"
    _, o = _parse(fn, args, kwargs,
                  {"Name": None, "NumValueChannels": "auto", "OutputSize": "auto",
                   "HasPaddingMaskInput": False, "HasScoresOutput": False,
                   "AttentionMask": "none", "DropoutProbability": 0.0})
    value, out = _auto(o["NumValueChannels"]), _auto(o["OutputSize"])
    return L.SelfAttention(
        _int(fn, "numHeads", numHeads), _int(fn, "numKeyChannels", numKeyChannels),
        value_channels=None if value is None else _int(fn, "NumValueChannels", value),
        output_channels=None if out is None else _int(fn, "OutputSize", out),
        attention_mask=_mask_option(fn, o["AttentionMask"]),
        dropout=float(o["DropoutProbability"]),
        has_padding_mask_input=_flag(fn, "HasPaddingMaskInput", o["HasPaddingMaskInput"]),
        has_scores_output=_flag(fn, "HasScoresOutput", o["HasScoresOutput"]),
        name=o["Name"])


def _scale(fn, value):
    if isinstance(value, str):
        return _word(fn, "Scale", value, ("auto",))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise ArgumentError(f"{fn}: expected Scale \"auto\" or a number, received {value!r}.")


# ====================================================================== dense and conv ===

def fullyConnectedLayer(outputSize, *args, **kwargs) -> L.Dense:
    """`fullyConnectedLayer(n)` → `L.Dense(n)`: per time step on sequences; flattens images."""
    _, o = _parse("fullyConnectedLayer", args, kwargs,
                  {"Name": None, "OperationDimension": "auto"})
    _word("fullyConnectedLayer", "OperationDimension", o["OperationDimension"], ("auto",))
    return L.Dense(_int("fullyConnectedLayer", "outputSize", outputSize), name=o["Name"])


def convolution1dLayer(filterSize, numFilters, *args, **kwargs) -> L.Conv1d:
    """`convolution1dLayer(k, n)` → `L.Conv1d(k, n, padding="valid")` over time (B×T×C).
    Padding: 0 (MATLAB's default, "valid"), "same", "causal", p or [p p]."""
    fn = "convolution1dLayer"
    _, o = _parse(fn, args, kwargs,
                  {"Name": None, "Stride": 1, "DilationFactor": 1, "Padding": 0,
                   "PaddingValue": 0, "NumChannels": "auto"})
    _padding_value(fn, o["PaddingValue"])
    pad = o["Padding"]
    if isinstance(pad, str):
        pad = _word(fn, "Padding", pad, ("same", "causal"))
    else:
        before, after = _ints(fn, "Padding", pad, 2, least=0)
        if before != after:
            raise ArgumentError(f"{fn}: expected equal padding on both sides, received "
                                f"[{before} {after}]. Use Padding=\"causal\" for left-only padding.")
        pad = "valid" if before == 0 else before
    return L.Conv1d(_int(fn, "filterSize", _first(filterSize)), _int(fn, "numFilters", numFilters),
                    stride=_int(fn, "Stride", _first(o["Stride"])),
                    padding=pad, dilation=_int(fn, "DilationFactor", _first(o["DilationFactor"])),
                    name=o["Name"])


def convolution2dLayer(filterSize, numFilters, *args, **kwargs) -> L.Conv2d:
    """`convolution2dLayer(k, n)` → `L.Conv2d(k, n, padding="valid")` on B×C×H×W.
    MATLAB's defaults: Padding 0 ("valid") unless "same", Stride 1. Padding p, [p q] (top/bottom,
    left/right) or [t b l r] with t == b and l == r."""
    fn = "convolution2dLayer"
    _, o = _parse(fn, args, kwargs,
                  {"Name": None, "Stride": 1, "DilationFactor": 1, "Padding": 0,
                   "PaddingValue": 0, "NumChannels": "auto"})
    _padding_value(fn, o["PaddingValue"])
    return L.Conv2d(_ints(fn, "filterSize", filterSize, 2), _int(fn, "numFilters", numFilters),
                    stride=_ints(fn, "Stride", o["Stride"], 2), padding=_padding2d(fn, o["Padding"]),
                    dilation=_ints(fn, "DilationFactor", o["DilationFactor"], 2), name=o["Name"])


def _first(value):
    return _as_list(value)[0] if _is_vector(value) and len(_as_list(value)) == 1 else value


def _padding_value(fn, value):
    if value != 0:
        raise ArgumentError(f"{fn}: expected PaddingValue=0, received {value!r}: attnlab pads "
                            "with zeros.")


def _padding2d(fn, pad):
    if isinstance(pad, str):
        return _word(fn, "Padding", pad, ("same",))
    vals = _as_list(pad) if _is_vector(pad) else [pad]
    vals = [_int(fn, "Padding", v, least=0) for v in vals]
    if len(vals) == 1:
        vals = vals * 2
    elif len(vals) == 4:
        t, b, l, r = vals
        if t != b or l != r:
            raise ArgumentError(f"{fn}: expected symmetric padding [t b l r] with t == b and "
                                f"l == r, received {vals}. Pad the data, or use Padding=\"same\".")
        vals = [t, l]
    elif len(vals) != 2:
        raise ArgumentError(f"{fn}: expected Padding as p, [p q] or [t b l r], received {vals}.")
    return "valid" if vals == [0, 0] else tuple(vals)


# ======================================================================== pooling etc. ===

def _pool2d(fn, cls, poolSize, args, kwargs):
    _, o = _parse(fn, args, kwargs, {"Name": None, "Stride": 1, "Padding": 0,
                                     "HasUnpoolingOutputs": False, "PaddingValue": 0})
    if _flag(fn, "HasUnpoolingOutputs", o["HasUnpoolingOutputs"]):
        raise ArgumentError(f"{fn}: expected HasUnpoolingOutputs=false, received true: attnlab "
                            "has no unpooling layer.")
    pad = o["Padding"]
    if isinstance(pad, str):
        raise ArgumentError(f"{fn}: expected numeric Padding, received {pad!r}: attnlab pools "
                            "with explicit padding. Give Padding=p (pixels on each side).")
    pad = _padding2d(fn, pad)
    # MATLAB's default Stride is 1, attnlab's is the pool size: pass it explicitly
    return cls(_ints(fn, "poolSize", poolSize, 2), stride=_ints(fn, "Stride", o["Stride"], 2),
               padding=(0, 0) if pad == "valid" else pad, name=o["Name"])


def maxPooling2dLayer(poolSize, *args, **kwargs) -> L.MaxPool2d:
    """`maxPooling2dLayer(k)` → `L.MaxPool2d(k, stride=1)` (MATLAB's default Stride is 1)."""
    return _pool2d("maxPooling2dLayer", L.MaxPool2d, poolSize, args, kwargs)


def averagePooling2dLayer(poolSize, *args, **kwargs) -> L.AvgPool2d:
    """`averagePooling2dLayer(k)` → `L.AvgPool2d(k, stride=1)` (MATLAB's default Stride is 1)."""
    return _pool2d("averagePooling2dLayer", L.AvgPool2d, poolSize, args, kwargs)


def _simple(fn, cls, args, kwargs, **options):
    _, o = _parse(fn, args, kwargs, {"Name": None, **options})
    return cls(name=o["Name"]), o


def globalAveragePooling1dLayer(*args, **kwargs) -> L.GlobalAvgPool1d:
    """→ `L.GlobalAvgPool1d()`: B×T×C → B×C, padding skipped."""
    return _simple("globalAveragePooling1dLayer", L.GlobalAvgPool1d, args, kwargs)[0]


def globalMaxPooling1dLayer(*args, **kwargs) -> L.GlobalMaxPool1d:
    """→ `L.GlobalMaxPool1d()`: B×T×C → B×C, padding skipped."""
    return _simple("globalMaxPooling1dLayer", L.GlobalMaxPool1d, args, kwargs)[0]


def globalAveragePooling2dLayer(*args, **kwargs) -> L.GlobalAvgPool2d:
    """→ `L.GlobalAvgPool2d()`: B×C×H×W → B×C."""
    return _simple("globalAveragePooling2dLayer", L.GlobalAvgPool2d, args, kwargs)[0]


def globalMaxPooling2dLayer(*args, **kwargs) -> L.GlobalMaxPool2d:
    """→ `L.GlobalMaxPool2d()`: B×C×H×W → B×C."""
    return _simple("globalMaxPooling2dLayer", L.GlobalMaxPool2d, args, kwargs)[0]


def flattenLayer(*args, **kwargs) -> L.Flatten:
    """→ `L.Flatten()`: B×C×H×W → B×(C·H·W). Before attention on images use ImageToSequence."""
    return _simple("flattenLayer", L.Flatten, args, kwargs)[0]


def indexing1dLayer(*args, **kwargs) -> L.Index1d:
    """`indexing1dLayer(index)` → `L.Index1d(...)`: B×T×C → B×C. index "first" (MATLAB's
    default), "last" (each sequence's own last valid step) or a 1-based integer k (→ k − 1)."""
    fn = "indexing1dLayer"
    pos, o = _parse(fn, args, kwargs, {"Name": None, "Index": "first", "HasPaddingMaskInput": False},
                    positional=1)
    index = pos[0] if pos else o["Index"]
    if _flag(fn, "HasPaddingMaskInput", o["HasPaddingMaskInput"]):
        raise ArgumentError(f"{fn}: expected HasPaddingMaskInput=false, received true: in attnlab "
                            "the padding mask travels with the sequence, so \"last\" already "
                            "skips padding.")
    if isinstance(index, str):
        index = _word(fn, "index", index, ("first", "last"))
    else:
        index = _int(fn, "index (1-based)", index) - 1
    return L.Index1d(index, name=o["Name"])


# ============================================================ positions and embeddings ===

def positionEmbeddingLayer(outputSize, maxPosition, *args, **kwargs) -> L.PositionEmbedding:
    """`positionEmbeddingLayer(outputSize, maxPosition)` → `L.PositionEmbedding(maxPosition,
    outputSize)`: B×T×C → B×T×outputSize, the embedding only (add it with additionLayer)."""
    fn = "positionEmbeddingLayer"
    _, o = _parse(fn, args, kwargs, {"Name": None, "PositionDimension": "auto"})
    _word(fn, "PositionDimension", o["PositionDimension"], ("auto", "temporal"))
    return L.PositionEmbedding(_int(fn, "maxPosition", maxPosition),
                               _int(fn, "outputSize", outputSize), name=o["Name"])


def sinusoidalPositionEncodingLayer(outputSize, *args, **kwargs) -> L.SinusoidalPositionEncoding:
    """`sinusoidalPositionEncodingLayer(outputSize)` → `L.SinusoidalPositionEncoding(outputSize)`
    (positions 0…T−1)."""
    fn = "sinusoidalPositionEncodingLayer"
    _, o = _parse(fn, args, kwargs, {"Name": None, "Positions": "auto"})
    _word(fn, "Positions", o["Positions"], ("auto",))
    return L.SinusoidalPositionEncoding(_int(fn, "outputSize", outputSize), name=o["Name"])


def embeddingLayer(outputSize, maxIndex, *args, **kwargs) -> L.Embedding:
    """`embeddingLayer(outputSize, maxIndex)` → `L.Embedding(maxIndex + 1, outputSize)`: MATLAB's
    indices 1…maxIndex work unchanged."""
    fn = "embeddingLayer"
    _, o = _parse(fn, args, kwargs, {"Name": None, "MaskIndex": None})
    if o["MaskIndex"] not in (None, []):
        raise ArgumentError(f"{fn}: expected no MaskIndex, received {o['MaskIndex']!r}: padding "
                            "travels as a mask with variable-length sequences in attnlab.")
    return L.Embedding(_int(fn, "maxIndex", maxIndex) + 1, _int(fn, "outputSize", outputSize),
                       name=o["Name"])


def wordEmbeddingLayer(dimension, numWords, *args, **kwargs) -> L.Embedding:
    """`wordEmbeddingLayer(dimension, numWords)` → `L.Embedding(numWords + 1, dimension)`: word
    indices 1…numWords work unchanged."""
    fn = "wordEmbeddingLayer"
    _, o = _parse(fn, args, kwargs, {"Name": None, "OOVMode": "error"})
    _word(fn, "OOVMode", o["OOVMode"], ("error",))
    return L.Embedding(_int(fn, "numWords", numWords) + 1, _int(fn, "dimension", dimension),
                       name=o["Name"])


# ====================================================== normalisation and activations ===

def layerNormalizationLayer(*args, **kwargs) -> L.LayerNorm:
    """→ `L.LayerNorm(eps=Epsilon)` (default 1e-5, as MATLAB)."""
    fn = "layerNormalizationLayer"
    _, o = _parse(fn, args, kwargs, {"Name": None, "Epsilon": 1e-5, "OperationDimension": "auto"})
    _word(fn, "OperationDimension", o["OperationDimension"], ("auto", "channel-only", "spatial-channel"))
    return L.LayerNorm(eps=float(o["Epsilon"]), name=o["Name"])


def batchNormalizationLayer(*args, **kwargs) -> L.BatchNorm:
    """→ `L.BatchNorm(eps=Epsilon, momentum=MeanDecay)` (MATLAB's decay is PyTorch's momentum;
    VarianceDecay must equal MeanDecay)."""
    fn = "batchNormalizationLayer"
    _, o = _parse(fn, args, kwargs,
                  {"Name": None, "Epsilon": 1e-5, "MeanDecay": 0.1, "VarianceDecay": 0.1})
    if o["VarianceDecay"] != o["MeanDecay"]:
        raise ArgumentError(f"{fn}: expected VarianceDecay equal to MeanDecay {o['MeanDecay']}, "
                            f"received {o['VarianceDecay']}: PyTorch's batch norm has one momentum.")
    return L.BatchNorm(eps=float(o["Epsilon"]), momentum=float(o["MeanDecay"]), name=o["Name"])


def dropoutLayer(*args, **kwargs) -> L.Dropout:
    """`dropoutLayer(p)` → `L.Dropout(p)` (default 0.5)."""
    pos, o = _parse("dropoutLayer", args, kwargs, {"Name": None, "Probability": 0.5}, positional=1)
    return L.Dropout(float(pos[0] if pos else o["Probability"]), name=o["Name"])


def reluLayer(*args, **kwargs) -> L.ReLU:
    return _simple("reluLayer", L.ReLU, args, kwargs)[0]


def leakyReluLayer(*args, **kwargs) -> L.LeakyReLU:
    """`leakyReluLayer(scale)` → `L.LeakyReLU(scale)` (default 0.01)."""
    pos, o = _parse("leakyReluLayer", args, kwargs, {"Name": None, "Scale": 0.01}, positional=1)
    return L.LeakyReLU(float(pos[0] if pos else o["Scale"]), name=o["Name"])


def geluLayer(*args, **kwargs) -> L.GELU:
    """→ `L.GELU()` (the exact GELU: Approximation "none")."""
    layer, o = _simple("geluLayer", L.GELU, args, kwargs, Approximation="none")
    _word("geluLayer", "Approximation", o["Approximation"], ("none",))
    return layer


def tanhLayer(*args, **kwargs) -> L.Tanh:
    return _simple("tanhLayer", L.Tanh, args, kwargs)[0]


def sigmoidLayer(*args, **kwargs) -> L.Sigmoid:
    return _simple("sigmoidLayer", L.Sigmoid, args, kwargs)[0]


def softmaxLayer(*args, **kwargs) -> L.Softmax:
    """→ `L.Softmax()` over channels. trainnet's "crossentropy" stays stable after it."""
    return _simple("softmaxLayer", L.Softmax, args, kwargs)[0]


# ========================================================================== combining ===

def additionLayer(numInputs, *args, **kwargs) -> L.Addition:
    """`additionLayer(n)` → `L.Addition(n)`: inputs in1…inN."""
    _, o = _parse("additionLayer", args, kwargs, {"Name": None})
    return L.Addition(_int("additionLayer", "numInputs", numInputs, 2), name=o["Name"])


def multiplicationLayer(numInputs, *args, **kwargs) -> L.Multiplication:
    """`multiplicationLayer(n)` → `L.Multiplication(n)`: inputs in1…inN."""
    _, o = _parse("multiplicationLayer", args, kwargs, {"Name": None})
    return L.Multiplication(_int("multiplicationLayer", "numInputs", numInputs, 2), name=o["Name"])


def concatenationLayer(dim, numInputs, *args, **kwargs) -> L.Concatenation:
    """`concatenationLayer(1, n)` → `L.Concatenation(n, dim="channel")` (dim 1 is the channel
    dimension of MATLAB's "CB"/"CBT" data); "channel"/"time" are accepted as dim too."""
    fn = "concatenationLayer"
    _, o = _parse(fn, args, kwargs, {"Name": None})
    if isinstance(dim, str):
        which = _word(fn, "dim", dim, ("channel", "time"))
    elif dim == 1:
        which = "channel"
    else:
        raise ArgumentError(
            f"{fn}: expected dim 1 (channels of \"CB\"/\"CBT\" data), received {dim!r}. MATLAB's "
            "dim 3 is the channels of images but the time of sequences: for image channels use "
            "depthConcatenationLayer(n); for time write concatenationLayer(\"time\", n).")
    return L.Concatenation(_int(fn, "numInputs", numInputs, 2), dim=which, name=o["Name"])


def depthConcatenationLayer(numInputs, *args, **kwargs) -> L.Concatenation:
    """`depthConcatenationLayer(n)` → `L.Concatenation(n, dim="channel")`."""
    _, o = _parse("depthConcatenationLayer", args, kwargs, {"Name": None})
    return L.Concatenation(_int("depthConcatenationLayer", "numInputs", numInputs, 2),
                           dim="channel", name=o["Name"])


# ==================================================================== output layers ===

class OutputLayer:
    """A legacy MATLAB output layer (classificationLayer, regressionLayer): not part of an
    attnlab graph. `loss` is what `trainNetwork` passes to training."""

    def __init__(self, kind: str, loss: str, name: str | None):
        self.kind, self.loss, self.name = kind, loss, name

    def __repr__(self):
        return f"{self.kind}(Name={self.name!r})  # loss {self.loss!r}, dropped from attnlab graphs"


def classificationLayer(*args, **kwargs) -> OutputLayer:
    """Legacy: dropped from the graph (with a MatlabNote); the loss is "crossentropy"."""
    _, o = _parse("classificationLayer", args, kwargs,
                  {"Name": None, "Classes": "auto", "ClassWeights": "none"})
    if not (isinstance(o["ClassWeights"], str) and o["ClassWeights"].lower() == "none"):
        raise ArgumentError("classificationLayer: expected ClassWeights=\"none\", received "
                            f"{o['ClassWeights']!r}: give trainnet a weighted loss callable instead.")
    return OutputLayer("classificationLayer", "crossentropy", o["Name"])


def regressionLayer(*args, **kwargs) -> OutputLayer:
    """Legacy: dropped from the graph (with a MatlabNote); the loss is "mse"."""
    _, o = _parse("regressionLayer", args, kwargs, {"Name": None, "ResponseNames": None})
    return OutputLayer("regressionLayer", "mse", o["Name"])


def _layer_array(layers, fn: str) -> tuple[list, list[OutputLayer]]:
    """A MATLAB layer array (a list, nested lists concatenated) → (attnlab layers, dropped
    output layers)."""
    flat: list = []

    def walk(x):
        if isinstance(x, (list, tuple)):
            for y in x:
                walk(y)
        else:
            flat.append(x)

    walk(layers)
    keep, dropped = [], []
    for x in flat:
        if isinstance(x, OutputLayer):
            dropped.append(x)
        elif isinstance(x, Layer):
            keep.append(x)
        else:
            raise ArgumentError(f"{fn}: expected layers, received {type(x).__name__}. Build layers "
                                "with the *Layer functions (or attnlab.layers).")
    for d in dropped:
        warnings.warn(f"{fn}: {d.kind} '{d.name or d.kind}' is not added: attnlab networks end at "
                      f"their last layer, and the loss is an argument of training — "
                      f"trainnet(X, T, net, \"{d.loss}\", options).", MatlabNote, stacklevel=3)
    return keep, dropped


# ========================================================================== networks ===

def dlnetwork(*args, **kwargs) -> Network:
    """`dlnetwork()` (empty), `dlnetwork(layers)`, `dlnetwork(layers, X1, …)` (example inputs
    for a network without input layers), `dlnetwork(layers, Initialize=False)`.

    Like MATLAB, the network is initialised when it has input layers (or examples) and no
    unconnected inputs; a network with errors then raises NetworkError listing them."""
    _, o = _parse("dlnetwork", (), kwargs, {"Initialize": True, "OutputNames": None})
    if o["OutputNames"] is not None:
        raise ArgumentError("dlnetwork: expected no OutputNames, received "
                            f"{o['OutputNames']!r}: an attnlab network's outputs are its "
                            "unconnected layer outputs (net.output_names).")
    if not args:
        return Network()
    layers, examples = args[0], args[1:]
    if isinstance(layers, Network):
        net = layers
    else:
        net = Network()
        net.add(_layer_array(layers, "dlnetwork")[0])
    if _flag("dlnetwork", "Initialize", o["Initialize"]):
        _initialize_if_complete(net, examples)
    return net


def layerGraph(*args) -> Network:
    """Legacy `layerGraph(layers)`: the network, not initialised."""
    net = Network()
    if args:
        net.add(_layer_array(args[0], "layerGraph")[0])
    return net


def _initialize_if_complete(net: Network, examples) -> None:
    has_inputs = any(l.is_input for l in net.layers)
    if not (has_inputs or examples):
        return
    analysis = net.analyze(*examples)
    if any(i.kind == "unconnected" for i in analysis.errors):
        return                       # MATLAB leaves such a network uninitialised
    net.initialize(*examples)


def addLayers(net: Network, layers) -> Network:
    """Adds a layer or a layer array (connected in order); returns the network."""
    _check_net(net, "addLayers")
    net.add(_layer_array(layers, "addLayers")[0])
    return net


def connectLayers(net: Network, s: str, d: str) -> Network:
    """Connects "layer" or "layer/port" to "layer" or "layer/port"; returns the network."""
    _check_net(net, "connectLayers")
    return net.connect(s, d)


def disconnectLayers(net: Network, s: str, d: str) -> Network:
    _check_net(net, "disconnectLayers")
    return net.disconnect(s, d)


def removeLayers(net: Network, layerNames) -> Network:
    """Removes a layer name or a list of names, with their connections."""
    _check_net(net, "removeLayers")
    names = [layerNames] if isinstance(layerNames, str) else list(layerNames)
    return net.remove(*names)


def replaceLayer(net: Network, layerName: str, larray, *args, **kwargs) -> Network:
    """Replaces a layer by a layer or layer array; inputs go to the first new layer and outputs
    leave from the last, port by port (ReconnectBy "name" and "order" agree for one-port
    layers, the common case)."""
    _check_net(net, "replaceLayer")
    _, o = _parse("replaceLayer", args, kwargs, {"ReconnectBy": "name"})
    _word("replaceLayer", "ReconnectBy", o["ReconnectBy"], ("name", "order"))
    return net.replace(layerName, _layer_array(larray, "replaceLayer")[0])


def analyzeNetwork(net_or_layers, *X, **kwargs):
    """Prints the analysis table (layers, activation sizes, learnables, issues) and returns the
    `Analysis`. Takes a network or a layer array; `X` are example inputs for a network without
    input layers. Never raises for a bad graph."""
    _parse("analyzeNetwork", (), kwargs, {"TargetUsage": "dlnetwork"})
    net = net_or_layers if isinstance(net_or_layers, Network) else layerGraph(net_or_layers)
    analysis = net.analyze(*X)
    print(analysis.table())
    return analysis


def plot(net: Network, path=None, **kwargs):
    """Draws the network (a matplotlib Figure); saves it to `path` when given."""
    _check_net(net, "plot")
    return net.plot(path, **kwargs)


def initialize(net: Network, *X) -> Network:
    """Builds the parameters (sizes from input layers, or from example inputs `X`)."""
    _check_net(net, "initialize")
    return net.initialize(*X)


def predict(net: Network, *X, **kwargs):
    """Outputs in inference mode without gradients: one output, or a tuple in `Outputs` order
    (default: net.output_names), as MATLAB's `[Y1, …, YN] = predict(net, X1, …)`."""
    _check_net(net, "predict")
    _, o = _parse("predict", (), kwargs, {"Outputs": None, "Acceleration": "auto"})
    return _select_outputs(net, net.predict(*X), o["Outputs"], "predict")


def minibatchpredict(net: Network, *X, **kwargs):
    """`predict` in mini-batches of `MiniBatchSize` (default 128)."""
    _check_net(net, "minibatchpredict")
    _, o = _parse("minibatchpredict", (), kwargs,
                  {"MiniBatchSize": 128, "Outputs": None, "Acceleration": "auto",
                   "ExecutionEnvironment": "auto", "UniformOutput": True})
    y = net.predict(*X, batch_size=_int("minibatchpredict", "MiniBatchSize", o["MiniBatchSize"]))
    return _select_outputs(net, y, o["Outputs"], "minibatchpredict")


def _select_outputs(net, y, outputs, fn):
    if not isinstance(y, dict):
        if outputs is not None:
            names = [outputs] if isinstance(outputs, str) else list(outputs)
            _known_outputs(net, names, fn)
        return y
    names = list(y) if outputs is None else ([outputs] if isinstance(outputs, str) else list(outputs))
    _known_outputs(net, names, fn)
    picked = tuple(y[n] for n in names)
    return picked[0] if len(picked) == 1 else picked


def _known_outputs(net, names, fn):
    for n in names:
        if n not in net.output_names:
            raise ArgumentError(f"{fn}: expected Outputs among {', '.join(net.output_names)}, "
                                f"received '{n}'.{close_matches(n, net.output_names)} Only "
                                "unconnected layer outputs are network outputs.")


def _check_net(net, fn):
    if not isinstance(net, Network):
        raise ArgumentError(f"{fn}: expected a network (dlnetwork), received "
                            f"{type(net).__name__}. Create one with net = dlnetwork.")


# ========================================================================== training ===

_SOLVERS = ("sgdm", "adam", "rmsprop", "adamw")

# MATLAB trainingOptions name → attnlab TrainingOptions field (DESIGN §2 and attnlab.training)
_TRAINING = {
    "InitialLearnRate": "learning_rate", "MaxEpochs": "max_epochs", "MiniBatchSize": "batch_size",
    "Shuffle": "shuffle", "ValidationData": "validation_data",
    "ValidationFrequency": "validation_frequency", "ValidationPatience": "validation_patience",
    "Metrics": "metrics", "Plots": "plots", "Verbose": "verbose",
    "VerboseFrequency": "verbose_frequency", "CheckpointPath": "checkpoint_dir",
    "CheckpointFrequency": "checkpoint_frequency",
    "CheckpointFrequencyUnit": "checkpoint_frequency_unit",
    "GradientThreshold": "gradient_threshold", "GradientThresholdMethod": "gradient_threshold_method",
    "L2Regularization": "l2", "Momentum": "momentum", "GradientDecayFactor": "gradient_decay",
    "SquaredGradientDecayFactor": "squared_gradient_decay", "Epsilon": "epsilon",
    "LearnRateSchedule": "learning_rate_schedule", "LearnRateDropPeriod": "learning_rate_drop_period",
    "LearnRateDropFactor": "learning_rate_drop_factor", "ExecutionEnvironment": "device",
    "OutputFcn": "output_fn",
}
# MATLAB options accepted at the value that matches what attnlab does
_TRAINING_NOOP = {
    "SequenceLength": ("longest",), "SequencePaddingValue": (0,), "SequencePaddingDirection": ("right",),
    "ResetInputNormalization": (True, False), "BatchNormalizationStatistics": ("auto", "population", "moving"),
    "OutputNetwork": ("auto", "last-iteration"), "InputDataFormats": ("auto",),
    "TargetDataFormats": ("auto",), "DispatchInBackground": (False,),
    "PreprocessingEnvironment": ("serial",), "Acceleration": ("auto",),
}
# MATLAB's defaults, where they differ from attnlab's
_MATLAB_TRAINING_DEFAULTS = {"shuffle": "once", "l2": 1e-4}


def trainingOptions(solverName, *args, **kwargs):
    """`trainingOptions("adam", MaxEpochs=5, ...)` → `al.TrainingOptions(solver="adam",
    max_epochs=5, ...)`, with MATLAB's defaults (Shuffle "once", L2Regularization 1e-4,
    MaxEpochs 30, MiniBatchSize 128, learning rate 0.01 for sgdm, else 0.001).
    Inf (ValidationPatience, GradientThreshold) means no limit; Plots "none" means none."""
    fn = "trainingOptions"
    from .training import TrainingOptions
    solver = _word(fn, "solverName", solverName, _SOLVERS)
    options = {k: None for k in _TRAINING}
    options.update({k: None for k in _TRAINING_NOOP})
    _, o = _parse(fn, args, kwargs, options)
    fields = {f for f in getattr(TrainingOptions, "__dataclass_fields__", {})}
    values: dict[str, Any] = {"solver": solver}
    values.update({k: v for k, v in _MATLAB_TRAINING_DEFAULTS.items() if k in fields})
    for matlab, value in o.items():
        if value is None:
            continue
        if matlab in _TRAINING_NOOP:
            _training_noop(fn, matlab, value)
            continue
        field = _TRAINING[matlab]
        if fields and field not in fields:
            raise ArgumentError(f"{fn}: expected an option attnlab's TrainingOptions supports, "
                                f"received {matlab} (attnlab's '{field}' is not there). Leave it out.")
        values[field] = _training_value(fn, matlab, value)
    try:
        return TrainingOptions(**values)
    except ArgumentError as e:
        raise ArgumentError(f"{fn}: {e}") from None


def _training_value(fn, matlab, value):
    if matlab in ("ValidationPatience", "GradientThreshold"):
        value = _inf_none(value)
        return value if value is None or matlab == "GradientThreshold" else _int(fn, matlab, value)
    if matlab in ("MaxEpochs", "MiniBatchSize", "ValidationFrequency", "VerboseFrequency",
                  "CheckpointFrequency", "LearnRateDropPeriod"):
        return _int(fn, matlab, value)
    if matlab == "Verbose":
        return _flag(fn, matlab, value)
    if matlab == "Plots":
        word = _word(fn, matlab, value, ("none", "training-progress"))
        return None if word == "none" else word
    if matlab == "LearnRateSchedule" and isinstance(value, str):
        word = value.lower()
        return None if word == "none" else word
    if matlab == "ExecutionEnvironment":
        word = _word(fn, matlab, value, ("auto", "cpu", "gpu"))
        return {"auto": None, "cpu": "cpu", "gpu": "cuda"}[word]
    if matlab == "ValidationData" and isinstance(value, list) and len(value) == 2:
        return tuple(value)                               # MATLAB's {X, Y}
    if matlab == "Metrics":
        vals = [value] if isinstance(value, str) else list(value)
        return [v.lower() if isinstance(v, str) else v for v in vals]
    if matlab in ("Shuffle", "CheckpointFrequencyUnit", "GradientThresholdMethod") and isinstance(value, str):
        return value.lower()
    if matlab in ("InitialLearnRate", "L2Regularization", "Momentum", "GradientDecayFactor",
                  "SquaredGradientDecayFactor", "Epsilon", "LearnRateDropFactor"):
        return float(value)
    return value


def _training_noop(fn, matlab, value):
    allowed = _TRAINING_NOOP[matlab]
    v = value.lower() if isinstance(value, str) else value
    if v not in allowed:
        raise ArgumentError(
            f"{fn}: expected {matlab} to be {' or '.join(repr(a) for a in allowed)}, received "
            f"{value!r}: that is what attnlab does (mini-batches are padded at the end to their "
            "longest sequence, with a mask).")


_LOSSES = {"crossentropy": "crossentropy", "index-crossentropy": "crossentropy",
           "binary-crossentropy": "binary-crossentropy", "mse": "mse",
           "mean-squared-error": "mse", "l2loss": "mse", "l1loss": "mae", "mae": "mae",
           "mean-absolute-error": "mae", "huber": "huber"}


def _loss(fn, lossFcn):
    if callable(lossFcn):
        return lossFcn
    return _LOSSES[_word(fn, "lossFcn", lossFcn, tuple(_LOSSES))]


def trainnet(*args):
    """`net = trainnet(X, T, net, lossFcn, options)` or `trainnet(data, net, lossFcn, options)`
    (a torch Dataset/DataLoader) → `al.train(net, X, T, loss=..., options=...)`. Trains `net`
    in place and returns it; MATLAB's `info` output is `net.training_info`.
    lossFcn: "crossentropy", "index-crossentropy", "binary-crossentropy", "mse"
    ("mean-squared-error", "l2loss"), "l1loss"/"mae", "huber", or a callable."""
    fn = "trainnet"
    if len(args) == 5:
        X, T, net, lossFcn, options = args
        data = (X, T)
    elif len(args) == 4:
        X, net, lossFcn, options = args
        data = (X,)
    else:
        raise ArgumentError(f"{fn}: expected (X, T, net, lossFcn, options) or (data, net, lossFcn, "
                            f"options), received {len(args)} arguments.")
    _check_net(net, fn)
    from .training import TrainingOptions, train
    if not isinstance(options, TrainingOptions):
        raise ArgumentError(f"{fn}: expected options from trainingOptions(...), received "
                            f"{type(options).__name__}.")
    info = train(net, *data, loss=_loss(fn, lossFcn), options=options)
    net.training_info = info
    return net


def trainNetwork(*args):
    """Legacy `net = trainNetwork(X, Y, layers, options)` or `trainNetwork(data, layers,
    options)`: builds the network from the layer array (its classificationLayer or
    regressionLayer gives the loss), trains it and returns it."""
    fn = "trainNetwork"
    if len(args) == 4:
        X, Y, layers, options = args
        data = (X, Y)
    elif len(args) == 3:
        X, layers, options = args
        data = (X,)
    else:
        raise ArgumentError(f"{fn}: expected (X, Y, layers, options) or (data, layers, options), "
                            f"received {len(args)} arguments.")
    if isinstance(layers, Network):
        raise ArgumentError(f"{fn}: expected a layer array ending in classificationLayer or "
                            "regressionLayer, received a network. Use trainnet(X, T, net, loss, "
                            "options) with a network.")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MatlabNote)       # the output layer is used right here
        keep, dropped = _layer_array(layers, fn)
    if len(dropped) != 1:
        raise NetworkError(f"{fn}: expected one output layer (classificationLayer or "
                           f"regressionLayer) in the layer array, received {len(dropped)}. Add "
                           "one, or use trainnet(X, T, net, lossFcn, options).")
    net = Network()
    net.add(keep)
    return trainnet(*data, net, dropped[0].loss, options)


def classify(net: Network, *X, **kwargs):
    """Legacy `YPred = classify(net, X)` → `al.classify(net, X)`: class labels."""
    _check_net(net, "classify")
    _parse("classify", (), kwargs, {"MiniBatchSize": 128})
    from .training import classify as _classify
    return _classify(net, *X)
