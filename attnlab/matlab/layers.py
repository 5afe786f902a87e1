"""The Deep Learning Toolbox layer functions (`lstmLayer`, `selfAttentionLayer`, …) → attnlab layers."""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from .. import layers as L
from attnlab.core.errors import ArgumentError
from ..layers.base import Layer
from ._options import (MatlabNote, _as_list, _auto, _flag, _int, _ints, _is_vector, _pair,
                       _mask_option, _normalization, _parse, _word)
from ._types import Size

__all__ = ['sequenceInputLayer', 'imageInputLayer', 'featureInputLayer', 'lstmLayer', 'bilstmLayer', 'gruLayer', 'attentionLayer', 'selfAttentionLayer', 'fullyConnectedLayer', 'convolution1dLayer', 'convolution2dLayer', 'maxPooling2dLayer', 'averagePooling2dLayer', 'globalAveragePooling1dLayer', 'globalMaxPooling1dLayer', 'globalAveragePooling2dLayer', 'globalMaxPooling2dLayer', 'flattenLayer', 'indexing1dLayer', 'positionEmbeddingLayer', 'sinusoidalPositionEncodingLayer', 'embeddingLayer', 'wordEmbeddingLayer', 'layerNormalizationLayer', 'batchNormalizationLayer', 'dropoutLayer', 'reluLayer', 'leakyReluLayer', 'geluLayer', 'tanhLayer', 'sigmoidLayer', 'softmaxLayer', 'additionLayer', 'multiplicationLayer', 'concatenationLayer', 'depthConcatenationLayer', 'classificationLayer', 'regressionLayer', 'OutputLayer']


# ============================================================================= inputs ===

def sequenceInputLayer(inputSize: Size, *args: Any, **kwargs: Any) -> L.SequenceInput:
    """`sequenceInputLayer(numChannels)` → `L.SequenceInput(numChannels)`: data B×T×C."""
    _, o = _parse("sequenceInputLayer", args, kwargs,
                  {"Name": None, "Normalization": "none", "MinLength": 1,
                   "SplitComplexInputs": False, "NormalizationDimension": "auto", **_STATS})
    norm = _normalization("sequenceInputLayer", o)
    if _flag("sequenceInputLayer", "SplitComplexInputs", o["SplitComplexInputs"]):
        raise ArgumentError("sequenceInputLayer: expected SplitComplexInputs=false, received "
                            "true: attnlab takes real data; split real and imaginary parts into "
                            "channels yourself.")
    frame = None
    if _is_vector(inputSize) and len(_as_list(inputSize)) > 1:
        # a sequence of images [h w c]: attnlab's sequences are B×T×C, so each frame arrives
        # flattened (B×T×(h·w·c)); the flattenLayer that follows in MATLAB then keeps it
        frame = tuple(_int("sequenceInputLayer", "inputSize", v) for v in _as_list(inputSize))
        if len(frame) not in (2, 3):
            raise ArgumentError(f"sequenceInputLayer: expected the number of channels or an "
                                f"image size [h w c], received {list(frame)}.")
        inputSize = int(np.prod(frame))
    if _is_vector(inputSize):
        inputSize = _as_list(inputSize)[0]
    _int("sequenceInputLayer", "MinLength", o["MinLength"])
    layer = _normalized(L.SequenceInput(_int("sequenceInputLayer", "inputSize", inputSize),
                                        name=o["Name"]), norm)
    if frame is not None:
        layer.__dict__["_matlab_frame"] = frame
        warnings.warn(f"sequenceInputLayer({list(frame)}): a sequence of "
                      f"{'×'.join(map(str, frame))} images, which attnlab reads as "
                      f"B×T×{inputSize}: give each frame flattened in MATLAB's column-major "
                      "order (h fastest, c slowest: from B×T×h×w×c, "
                      "X.permute(0, 1, 4, 3, 2).reshape(B, T, -1)); a "
                      "flattenLayer after it keeps the sequence as it is", MatlabNote,
                      stacklevel=2)
    return layer


def imageInputLayer(inputSize: Size, *args: Any, **kwargs: Any) -> L.ImageInput:
    """`imageInputLayer([h w c])` → `L.ImageInput((c, h, w))`: data B×C×H×W (PyTorch layout).
    `[h w]` means one channel."""
    _, o = _parse("imageInputLayer", args, kwargs,
                  {"Name": None, "Normalization": "none", "NormalizationDimension": "auto",
                   "SplitComplexInputs": False, "DataAugmentation": "none", **_STATS})
    norm = _normalization("imageInputLayer", o)   # MATLAB's default zerocenter: see above
    size = _as_list(inputSize) if _is_vector(inputSize) else None
    if size is None or len(size) not in (2, 3):
        raise ArgumentError(f"imageInputLayer: expected [h w c] (MATLAB order), received "
                            f"{inputSize!r}. For 28×28 grey images: imageInputLayer([28 28 1]) — "
                            "in Python imageInputLayer([28, 28, 1]).")
    h, w, c = (size + [1])[:3]
    return _normalized(L.ImageInput((_int("imageInputLayer", "channels", c),
                                     _int("imageInputLayer", "height", h),
                                     _int("imageInputLayer", "width", w)), name=o["Name"]), norm)


def featureInputLayer(numFeatures: int, *args: Any, **kwargs: Any) -> L.FeatureInput:
    """`featureInputLayer(n)` → `L.FeatureInput(n)`: data B×C."""
    _, o = _parse("featureInputLayer", args, kwargs,
                  {"Name": None, "Normalization": "none", "NormalizationDimension": "auto",
                   "SplitComplexInputs": False, **_STATS})
    norm = _normalization("featureInputLayer", o)
    return _normalized(L.FeatureInput(_int("featureInputLayer", "numFeatures", numFeatures),
                                      name=o["Name"]), norm)


_STATS = {"Mean": None, "StandardDeviation": None, "Min": None, "Max": None}


def _normalized(layer, norm):
    """Marks an input layer whose data MATLAB normalises: a network built from it gets an
    `InputNormalization` layer right after it (`_layer_array`)."""
    if norm is not None:
        from .mlayers import InputNormalization
        InputNormalization(**norm, name=_norm_name(layer))      # checks the statistics now
        layer._matlab_normalization = norm
    return layer


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
    layer = cls(_int(fn, "numHiddenUnits", numHiddenUnits),
                output_mode=_word(fn, "OutputMode", o["OutputMode"], ("sequence", "last")),
                bidirectional=bidirectional,
                has_state_inputs=_flag(fn, "HasStateInputs", o["HasStateInputs"]),
                has_state_outputs=_flag(fn, "HasStateOutputs", o["HasStateOutputs"]),
                name=o["Name"])
    if bidirectional:
        setattr(layer, "stem", "bilstm")     # unnamed, it is 'bilstm', 'bilstm_1', as in MATLAB
    if gru:                                  # the shape of MATLAB's Bias follows it (weights.py)
        layer.__dict__["_matlab_reset_gate_mode"] = o["ResetGateMode"].lower()
    return layer


def lstmLayer(numHiddenUnits: int, *args: Any, **kwargs: Any) -> L.LSTM:
    """`lstmLayer(H, OutputMode="sequence"|"last")` → `L.LSTM(H, output_mode=...)`."""
    return _recurrent("lstmLayer", L.LSTM, numHiddenUnits, args, kwargs)


def bilstmLayer(numHiddenUnits: int, *args: Any, **kwargs: Any) -> L.LSTM:
    """`bilstmLayer(H)` → `L.LSTM(H, bidirectional=True)`: 2·H channels out."""
    return _recurrent("bilstmLayer", L.LSTM, numHiddenUnits, args, kwargs, bidirectional=True)


def gruLayer(numHiddenUnits: int, *args: Any, **kwargs: Any) -> L.GRU:
    """`gruLayer(H)` → `L.GRU(H)` (PyTorch's GRU, MATLAB's
    ResetGateMode="recurrent-bias-after-multiplication")."""
    return _recurrent("gruLayer", L.GRU, numHiddenUnits, args, kwargs, gru=True)


# ========================================================================== attention ===

def attentionLayer(numHeads: int, *args: Any, **kwargs: Any) -> L.Attention:
    """`attentionLayer(numHeads)` → `L.Attention(numHeads)`: inputs query, key, value (+ mask),
    output out (+ scores); no learnables."""
    fn = "attentionLayer"
    _heads_given(fn, numHeads, "attentionLayer(8)")
    _, o = _parse(fn, args, kwargs,
                  {"Name": None, "Scale": "auto", "HasPaddingMaskInput": False,
                   "HasScoresOutput": False, "AttentionMask": "none", "DropoutProbability": 0.0})
    return L.Attention(_int(fn, "numHeads", numHeads), scale=_scale(fn, o["Scale"]),
                       attention_mask=_mask_option(fn, o["AttentionMask"]),
                       dropout=float(o["DropoutProbability"]),
                       has_padding_mask_input=_flag(fn, "HasPaddingMaskInput", o["HasPaddingMaskInput"]),
                       has_scores_output=_flag(fn, "HasScoresOutput", o["HasScoresOutput"]),
                       name=o["Name"])


def selfAttentionLayer(numHeads: int, numKeyChannels: int, *args: Any, **kwargs: Any) -> L.SelfAttention:
    """`selfAttentionLayer(numHeads, numKeyChannels)` → `L.SelfAttention(numHeads,
    numKeyChannels)`: B×T×C → B×T×OutputSize (default C); NumValueChannels defaults to
    numKeyChannels. Learnables query, key, value, output (weight out×in, bias)."""
    fn = "selfAttentionLayer"
    _heads_given(fn, numHeads, "selfAttentionLayer(8, 64)")
    if isinstance(numKeyChannels, str):
        raise ArgumentError(f"{fn}: numKeyChannels is missing: expected selfAttentionLayer(numHeads, "
                            f"numKeyChannels, …) with a positive integer second, received "
                            f"'{numKeyChannels}'. For example selfAttentionLayer(8, 64).")
    _, o = _parse(fn, args, kwargs,
                  {"Name": None, "NumValueChannels": "auto", "OutputSize": "auto",
                   "HasPaddingMaskInput": False, "HasScoresOutput": False,
                   "AttentionMask": "none", "DropoutProbability": 0.0})
    value, out = _auto(o["NumValueChannels"]), _auto(o["OutputSize"])
    heads, keys = _int(fn, "numHeads", numHeads), _int(fn, "numKeyChannels", numKeyChannels)
    for what, channels in (("numKeyChannels", keys),
                           ("NumValueChannels", None if value is None else _int(fn, "NumValueChannels", value))):
        if channels is not None and heads > 0 and channels % heads:
            raise ArgumentError(f"{fn}: {what} ({channels}) must be a multiple of numHeads "
                                f"({heads}), received {fn}({heads}, {keys}, …): each head gets "
                                f"{what}/numHeads channels. For example "
                                + (f"{fn}({heads}, {heads * max(1, round(channels / heads))})."
                                   if what == "numKeyChannels" else
                                   f"{fn}({heads}, {keys}, NumValueChannels="
                                   f"{heads * max(1, round(channels / heads))})."))
    return L.SelfAttention(
        heads, keys,
        value_channels=None if value is None else _int(fn, "NumValueChannels", value),
        output_channels=None if out is None else _int(fn, "OutputSize", out),
        attention_mask=_mask_option(fn, o["AttentionMask"]),
        dropout=float(o["DropoutProbability"]),
        has_padding_mask_input=_flag(fn, "HasPaddingMaskInput", o["HasPaddingMaskInput"]),
        has_scores_output=_flag(fn, "HasScoresOutput", o["HasScoresOutput"]),
        name=o["Name"])


def _heads_given(fn, numHeads, example):
    """MATLAB code often starts with an option (attentionLayer('SequenceLength','last')): the
    required numHeads is missing, whatever else is wrong."""
    if isinstance(numHeads, str):
        from ._options import _HINTS
        hint = _HINTS.get(numHeads.lower(), "")
        raise ArgumentError(f"{fn}: numHeads is missing: expected the number of heads (a positive "
                            f"integer) as the first argument, received '{numHeads}'. Write "
                            f"{example}, options after it. {hint}".rstrip())


def _scale(fn, value):
    if isinstance(value, str):
        return _word(fn, "Scale", value, ("auto",))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise ArgumentError(f"{fn}: expected Scale \"auto\" or a number, received {value!r}.")


# ====================================================================== dense and conv ===

def fullyConnectedLayer(outputSize: int, *args: Any, **kwargs: Any) -> L.Dense:
    """`fullyConnectedLayer(n)` → `L.Dense(n)`: per time step on sequences; flattens images."""
    _, o = _parse("fullyConnectedLayer", args, kwargs,
                  {"Name": None, "OperationDimension": "auto"})
    _word("fullyConnectedLayer", "OperationDimension", o["OperationDimension"], ("auto",))
    return L.Dense(_int("fullyConnectedLayer", "outputSize", outputSize), name=o["Name"])


def convolution1dLayer(filterSize: Size, numFilters: int, *args: Any, **kwargs: Any) -> L.Conv1d:
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


def convolution2dLayer(filterSize: Size, numFilters: int, *args: Any, **kwargs: Any) -> L.Conv2d:
    """`convolution2dLayer(k, n)` → `L.Conv2d(k, n, padding="valid")` on B×C×H×W.
    MATLAB's defaults: Padding 0 ("valid") unless "same", Stride 1. Padding p, [p q] (top/bottom,
    left/right) or [t b l r] with t == b and l == r."""
    fn = "convolution2dLayer"
    _, o = _parse(fn, args, kwargs,
                  {"Name": None, "Stride": 1, "DilationFactor": 1, "Padding": 0,
                   "PaddingValue": 0, "NumChannels": "auto"})
    _padding_value(fn, o["PaddingValue"])
    return L.Conv2d(_pair(fn, "filterSize", filterSize), _int(fn, "numFilters", numFilters),
                    stride=_pair(fn, "Stride", o["Stride"]), padding=_padding2d(fn, o["Padding"]),
                    dilation=_pair(fn, "DilationFactor", o["DilationFactor"]), name=o["Name"])


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


def maxPooling2dLayer(poolSize: Size, *args: Any, **kwargs: Any) -> L.MaxPool2d:
    """`maxPooling2dLayer(k)` → `L.MaxPool2d(k, stride=1)` (MATLAB's default Stride is 1)."""
    return _pool2d("maxPooling2dLayer", L.MaxPool2d, poolSize, args, kwargs)


def averagePooling2dLayer(poolSize: Size, *args: Any, **kwargs: Any) -> L.AvgPool2d:
    """`averagePooling2dLayer(k)` → `L.AvgPool2d(k, stride=1)` (MATLAB's default Stride is 1)."""
    return _pool2d("averagePooling2dLayer", L.AvgPool2d, poolSize, args, kwargs)


def _simple(fn, cls, args, kwargs, **options):
    _, o = _parse(fn, args, kwargs, {"Name": None, **options})
    return cls(name=o["Name"]), o


def globalAveragePooling1dLayer(*args: Any, **kwargs: Any) -> L.GlobalAvgPool1d:
    """→ `L.GlobalAvgPool1d()`: B×T×C → B×C, padding skipped."""
    return _simple("globalAveragePooling1dLayer", L.GlobalAvgPool1d, args, kwargs)[0]


def globalMaxPooling1dLayer(*args: Any, **kwargs: Any) -> L.GlobalMaxPool1d:
    """→ `L.GlobalMaxPool1d()`: B×T×C → B×C, padding skipped."""
    return _simple("globalMaxPooling1dLayer", L.GlobalMaxPool1d, args, kwargs)[0]


def globalAveragePooling2dLayer(*args: Any, **kwargs: Any) -> L.GlobalAvgPool2d:
    """→ `L.GlobalAvgPool2d()`: B×C×H×W → B×C."""
    return _simple("globalAveragePooling2dLayer", L.GlobalAvgPool2d, args, kwargs)[0]


def globalMaxPooling2dLayer(*args: Any, **kwargs: Any) -> L.GlobalMaxPool2d:
    """→ `L.GlobalMaxPool2d()`: B×C×H×W → B×C."""
    return _simple("globalMaxPooling2dLayer", L.GlobalMaxPool2d, args, kwargs)[0]


def flattenLayer(*args: Any, **kwargs: Any) -> L.Flatten:
    """→ `L.Flatten()`: B×C×H×W → B×(C·H·W). Before attention on images use ImageToSequence."""
    return _simple("flattenLayer", L.Flatten, args, kwargs)[0]


def indexing1dLayer(*args: Any, **kwargs: Any) -> L.Index1d:
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

def positionEmbeddingLayer(outputSize: int, maxPosition: int, *args: Any, **kwargs: Any) -> L.PositionEmbedding:
    """`positionEmbeddingLayer(outputSize, maxPosition)` → `L.PositionEmbedding(maxPosition,
    outputSize)`: B×T×C → B×T×outputSize, the embedding only (add it with additionLayer)."""
    fn = "positionEmbeddingLayer"
    _, o = _parse(fn, args, kwargs, {"Name": None, "PositionDimension": "auto"})
    _word(fn, "PositionDimension", o["PositionDimension"], ("auto", "temporal"))
    return L.PositionEmbedding(_int(fn, "maxPosition", maxPosition),
                               _int(fn, "outputSize", outputSize), name=o["Name"])


def sinusoidalPositionEncodingLayer(outputSize: int, *args: Any, **kwargs: Any) -> L.SinusoidalPositionEncoding:
    """`sinusoidalPositionEncodingLayer(outputSize)` → `L.SinusoidalPositionEncoding(outputSize)`
    (positions 0…T−1)."""
    fn = "sinusoidalPositionEncodingLayer"
    _, o = _parse(fn, args, kwargs, {"Name": None, "Positions": "auto"})
    _word(fn, "Positions", o["Positions"], ("auto",))
    return L.SinusoidalPositionEncoding(_int(fn, "outputSize", outputSize), name=o["Name"])


def embeddingLayer(outputSize: int, maxIndex: int, *args: Any, **kwargs: Any) -> L.Embedding:
    """`embeddingLayer(outputSize, maxIndex)` → `L.Embedding(maxIndex + 1, outputSize)`: MATLAB's
    indices 1…maxIndex work unchanged."""
    fn = "embeddingLayer"
    _, o = _parse(fn, args, kwargs, {"Name": None, "MaskIndex": None})
    if o["MaskIndex"] not in (None, []):
        raise ArgumentError(f"{fn}: expected no MaskIndex, received {o['MaskIndex']!r}: padding "
                            "travels as a mask with variable-length sequences in attnlab.")
    layer = L.Embedding(_int(fn, "maxIndex", maxIndex) + 1, _int(fn, "outputSize", outputSize),
                        name=o["Name"])
    layer.__dict__["_matlab_unused_row"] = True      # row 0: MATLAB counts maxIndex rows
    return layer


def wordEmbeddingLayer(dimension: int, numWords: int, *args: Any, **kwargs: Any) -> Layer:
    """`wordEmbeddingLayer(dimension, numWords)` → `WordEmbedding(numWords, dimension)`:
    MATLAB's learnable count (numWords × dimension); word ids 1…numWords as doc2sequence
    gives them, 0 (its padding) a zero vector, others per `OOVMode` ("error", "map-to-last")."""
    fn = "wordEmbeddingLayer"
    _, o = _parse(fn, args, kwargs, {"Name": None, "OOVMode": "error"})
    oov = _word(fn, "OOVMode", o["OOVMode"], ("error", "map-to-last"))
    from .mlayers import WordEmbedding
    return WordEmbedding(_int(fn, "numWords", numWords), _int(fn, "dimension", dimension),
                         oov=oov, name=o["Name"])


# ====================================================== normalisation and activations ===

def layerNormalizationLayer(*args: Any, **kwargs: Any) -> Layer:
    """→ `L.LayerNorm(eps=Epsilon)` (default 1e-5, as MATLAB) for OperationDimension "auto"
    and "spatial-channel" (channels of sequences and features; channels and pixels of images);
    "channel-only" (channels at each step or pixel) and "batch-excluded" (everything but the
    batch: channels and time steps of sequences too) are `L.GroupNorm` with one group."""
    fn = "layerNormalizationLayer"
    _, o = _parse(fn, args, kwargs, {"Name": None, "Epsilon": 1e-5, "OperationDimension": "auto"})
    how = _word(fn, "OperationDimension", o["OperationDimension"],
                ("auto", "channel-only", "spatial-channel", "batch-excluded"))
    if how in ("auto", "spatial-channel"):
        return L.LayerNorm(eps=float(o["Epsilon"]), name=o["Name"])
    layer = L.GroupNorm(1, eps=float(o["Epsilon"]), positions=how == "batch-excluded",
                        name=o["Name"])
    layer.__dict__["_matlab_type"] = "layerNormalizationLayer"
    layer.__dict__["stem"] = "layernorm"
    return layer


def batchNormalizationLayer(*args: Any, **kwargs: Any) -> L.BatchNorm:
    """→ `L.BatchNorm(eps=Epsilon, momentum=MeanDecay)` (MATLAB's decay is PyTorch's momentum;
    VarianceDecay must equal MeanDecay)."""
    fn = "batchNormalizationLayer"
    _, o = _parse(fn, args, kwargs,
                  {"Name": None, "Epsilon": 1e-5, "MeanDecay": 0.1, "VarianceDecay": 0.1})
    if o["VarianceDecay"] != o["MeanDecay"]:
        raise ArgumentError(f"{fn}: expected VarianceDecay equal to MeanDecay {o['MeanDecay']}, "
                            f"received {o['VarianceDecay']}: PyTorch's batch norm has one momentum.")
    return L.BatchNorm(eps=float(o["Epsilon"]), momentum=float(o["MeanDecay"]), name=o["Name"])


def dropoutLayer(*args: Any, **kwargs: Any) -> L.Dropout:
    """`dropoutLayer(p)` → `L.Dropout(p)` (default 0.5)."""
    pos, o = _parse("dropoutLayer", args, kwargs, {"Name": None, "Probability": 0.5}, positional=1)
    return L.Dropout(float(pos[0] if pos else o["Probability"]), name=o["Name"])


def reluLayer(*args: Any, **kwargs: Any) -> L.ReLU:
    """reluLayer(Name=…) → `attnlab.layers.ReLU`."""
    return _simple("reluLayer", L.ReLU, args, kwargs)[0]


def leakyReluLayer(*args: Any, **kwargs: Any) -> L.LeakyReLU:
    """`leakyReluLayer(scale)` → `L.LeakyReLU(scale)` (default 0.01)."""
    pos, o = _parse("leakyReluLayer", args, kwargs, {"Name": None, "Scale": 0.01}, positional=1)
    return L.LeakyReLU(float(pos[0] if pos else o["Scale"]), name=o["Name"])


def geluLayer(*args: Any, **kwargs: Any) -> L.GELU:
    """→ `L.GELU()` (the exact GELU, Approximation "none"); Approximation "tanh" → the tanh
    approximation (`TanhGELU`)."""
    layer, o = _simple("geluLayer", L.GELU, args, kwargs, Approximation="none")
    if _word("geluLayer", "Approximation", o["Approximation"], ("none", "tanh")) == "tanh":
        from .vit_layers import TanhGELU
        return TanhGELU(name=o["Name"])
    return layer


def tanhLayer(*args: Any, **kwargs: Any) -> L.Tanh:
    """tanhLayer(Name=…) → `attnlab.layers.Tanh`."""
    return _simple("tanhLayer", L.Tanh, args, kwargs)[0]


def sigmoidLayer(*args: Any, **kwargs: Any) -> L.Sigmoid:
    """sigmoidLayer(Name=…) → `attnlab.layers.Sigmoid`."""
    return _simple("sigmoidLayer", L.Sigmoid, args, kwargs)[0]


def softmaxLayer(*args: Any, **kwargs: Any) -> L.Softmax:
    """→ `L.Softmax()` over channels. trainnet's "crossentropy" stays stable after it."""
    return _simple("softmaxLayer", L.Softmax, args, kwargs)[0]


# ========================================================================== combining ===

def additionLayer(numInputs: int, *args: Any, **kwargs: Any) -> L.Addition:
    """`additionLayer(n)` → `L.Addition(n)`: inputs in1…inN."""
    _, o = _parse("additionLayer", args, kwargs, {"Name": None})
    return L.Addition(_int("additionLayer", "numInputs", numInputs, 2), name=o["Name"])


def multiplicationLayer(numInputs: int, *args: Any, **kwargs: Any) -> L.Multiplication:
    """`multiplicationLayer(n)` → `L.Multiplication(n)`: inputs in1…inN."""
    _, o = _parse("multiplicationLayer", args, kwargs, {"Name": None})
    return L.Multiplication(_int("multiplicationLayer", "numInputs", numInputs, 2), name=o["Name"])


def concatenationLayer(dim: int | str, numInputs: int, *args: Any, **kwargs: Any) -> Layer:
    """`concatenationLayer(dim, n)` → `MatlabConcatenation(n, dim)`: `dim` counts MATLAB's
    dimensions of the data it receives ("CBT": 1 channels, 2 batch, 3 time; "CB": 1 channels;
    "SSCB": 3 channels), resolved when the network is analysed — dim 2 of sequences (their
    batch) is a network error, as MATLAB's analysis reports it. The words "channel" and
    "time" (an attnlab addition) make `L.Concatenation` directly."""
    fn = "concatenationLayer"
    _, o = _parse(fn, args, kwargs, {"Name": None})
    n = _int(fn, "numInputs", numInputs, 2)
    if isinstance(dim, str):
        return L.Concatenation(n, dim=_word(fn, "dim", dim, ("channel", "time")), name=o["Name"])
    from .mlayers import MatlabConcatenation
    return MatlabConcatenation(n, _int(fn, "dim", dim), name=o["Name"])


def depthConcatenationLayer(numInputs: int, *args: Any, **kwargs: Any) -> L.Concatenation:
    """`depthConcatenationLayer(n)` → `L.Concatenation(n, dim="channel")`."""
    _, o = _parse("depthConcatenationLayer", args, kwargs, {"Name": None})
    return L.Concatenation(_int("depthConcatenationLayer", "numInputs", numInputs, 2),
                           dim="channel", name=o["Name"])


# weight and initializer options (Weights=W, WeightsInitializer="he") become presets of the layer
from .weights import collect_presets as _collect  # noqa: E402
for _fn in ("lstmLayer", "bilstmLayer", "gruLayer", "fullyConnectedLayer", "convolution1dLayer",
            "convolution2dLayer", "selfAttentionLayer", "layerNormalizationLayer",
            "batchNormalizationLayer", "embeddingLayer", "wordEmbeddingLayer",
            "positionEmbeddingLayer"):
    globals()[_fn] = _collect(globals()[_fn])


# the legacy output layers and layer arrays (output_layers.py), imported from here too
from .output_layers import (LayerArray, OutputLayer, _classes, _layer_array, _norm_name,  # noqa: E402,F401
                            classificationLayer, regressionLayer)
