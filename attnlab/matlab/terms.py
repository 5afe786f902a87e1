"""attnlab's messages in MATLAB terms: attnlab layer names become the Deep Learning Toolbox
functions that make them, so a script's author reads the names they wrote."""
from __future__ import annotations

import re
from typing import Any

# attnlab name (as messages write it) → MATLAB; the longest names first so that "Index1d('last')"
# is replaced before "Index1d"
_TERMS = [
    ("Index1d('last')", 'indexing1dLayer("last")'), ("Index1d(\"last\")", 'indexing1dLayer("last")'),
    ("ImageToSequence", "imageToSequenceLayer (an attnlab addition: MATLAB has no layer that "
                        "turns an image into a sequence)"),
    ("GlobalAvgPool1d", "globalAveragePooling1dLayer"), ("GlobalMaxPool1d", "globalMaxPooling1dLayer"),
    ("GlobalAvgPool2d", "globalAveragePooling2dLayer"), ("GlobalMaxPool2d", "globalMaxPooling2dLayer"),
    ("SequenceInput", "sequenceInputLayer"), ("ImageInput", "imageInputLayer"),
    ("FeatureInput", "featureInputLayer"), ("SelfAttention", "selfAttentionLayer"),
    ("MultiHeadAttention", "selfAttentionLayer"), ("Attention", "attentionLayer"),
    ("Flatten", "flattenLayer"), ("Index1d", "indexing1dLayer"), ("Dense", "fullyConnectedLayer"),
    ("LayerNorm", "layerNormalizationLayer"), ("BatchNorm", "batchNormalizationLayer"),
    ("LSTM", "lstmLayer"), ("GRU", "gruLayer"), ("Conv1d", "convolution1dLayer"),
    ("Conv2d", "convolution2dLayer"), ("MaxPool2d", "maxPooling2dLayer"),
    ("AvgPool2d", "averagePooling2dLayer"), ("Concatenation", "concatenationLayer"),
    ("Addition", "additionLayer"),
]
_PATTERN = re.compile("|".join(rf"(?<![\w.]){re.escape(a)}(?![\w])" for a, _ in _TERMS))
_MAP = dict(_TERMS)


_CALL = re.compile(r"net\.(connect|disconnect)\(([^()]*)\)")
_ADD = re.compile(r"net\.add\(L\.(\w+)\(([^()]*)\)\)")
_FN = {"connect": "connectLayers", "disconnect": "disconnectLayers"}
# the layer type column of the analysis table
TYPES = {"Dropout": "dropoutLayer", "SpatialDropout": "spatialDropoutLayer", "Module": "functionLayer", "FrameFlatten": "flattenLayer", "SequenceFolding": "sequenceFoldingLayer", "SequenceUnfolding": "sequenceUnfoldingLayer", "ReLU": "reluLayer", "Softmax": "softmaxLayer",
         "GELU": "geluLayer", "Tanh": "tanhLayer", "Sigmoid": "sigmoidLayer",
         "LeakyReLU": "leakyReluLayer", "Embedding": "embeddingLayer", "WordEmbedding": "wordEmbeddingLayer",
         "PositionEmbedding": "positionEmbeddingLayer",
         "SinusoidalPositionEncoding": "sinusoidalPositionEncodingLayer",
         "Multiplication": "multiplicationLayer", "ImageToSequence": "imageToSequenceLayer",
         "PatchEmbedding": "patchEmbeddingLayer",
         "EmbeddingConcatenation": "embeddingConcatenationLayer", "Swish": "swishLayer",
         "GroupedConv2d": "groupedConvolution2dLayer",
         "TanhGELU": "geluLayer", "GroupNorm": "groupNormalizationLayer", "ELU": "eluLayer",
         "ClippedReLU": "clippedReluLayer", "Softplus": "softplusLayer",
         "CrossChannelNormalization": "crossChannelNormalizationLayer",
         "Resize2d": "resize2dLayer", "MatlabConcatenation": "concatenationLayer"}


# statements that add a layer: Concatenation(n) joins channels, which MATLAB's
# concatenationLayer(dim, n) would need a dim for; depthConcatenationLayer(n) takes n alone
_ADD_FN = {"Concatenation": "depthConcatenationLayer"}


def _add(m):
    kind, args = m.group(1), m.group(2).replace("name=", "Name=")
    fn = _ADD_FN.get(kind) or TYPES.get(kind) or _MAP.get(kind, kind)
    return f"net = addLayers(net, {fn}({args}))"


def in_matlab_terms(text: str) -> str:
    """Replaces attnlab layer names in a message by the MATLAB functions that make them."""
    text = _CALL.sub(lambda m: f"net = {_FN[m.group(1)]}(net, {m.group(2)})", text)
    text = _ADD.sub(_add, text)
    once: set[str] = set()

    def sub(m):
        word = m.group(0)
        out = _MAP[word]
        if "(" in out and " (an attnlab" in out:
            if word in once:                    # explain the addition once per message
                return out.split(" (")[0]
            once.add(word)
        return out
    return _PATTERN.sub(sub, text)


# layers after which a sequence has no time axis left: (attnlab type, MATLAB's words for it)
_REDUCERS = {"Index1d": "indexing1dLayer picks one time step", "GlobalAvgPool1d":
             "globalAveragePooling1dLayer averages over time", "GlobalMaxPool1d":
             "globalMaxPooling1dLayer takes the maximum over time", "AttentionPool1d":
             "attention pooling reduces time"}
_NEEDS_TIME = {"LSTM": "lstmLayer", "GRU": "gruLayer", "SelfAttention": "selfAttentionLayer",
               "Attention": "attentionLayer", "MultiHeadAttention": "selfAttentionLayer",
               "Conv1d": "convolution1dLayer", "Pool1d": "1-D pooling",
               "GlobalAvgPool1d": "globalAveragePooling1dLayer",
               "GlobalMaxPool1d": "globalMaxPooling1dLayer", "Index1d": "indexing1dLayer"}


def time_axis_gone(net, issue) -> str | None:
    """The message for a layer that needs sequences but is fed by one that removed the time
    axis (an indexing1dLayer before an lstmLayer): it says the time axis is gone, where, and
    how to keep it. None when the issue is something else."""
    if net is None or issue.layer is None or issue.kind not in ("format", "size"):
        return None
    layers = {l.name: l for l in net.layers}
    layer = layers.get(issue.layer)
    if layer is None or type(layer).__name__ not in _NEEDS_TIME:
        return None
    src = net.source(issue.layer, issue.port or layer.input_ports[0])
    if src is None or src[0] not in layers:
        return None
    before = layers[src[0]]
    kind = type(before).__name__
    why = _REDUCERS.get(kind)
    if why is None and kind in ("LSTM", "GRU") and getattr(before, "output_mode", "") == "last":
        why = f"{_NEEDS_TIME[kind]}(…, OutputMode=\"last\") returns the last time step only"
    if why is None:
        return None
    fn = _NEEDS_TIME[type(layer).__name__]
    fix = ("use OutputMode=\"sequence\" there" if kind in ("LSTM", "GRU") else
           f"move '{before.name}' after '{issue.layer}'")
    return (f"layer '{issue.layer}' ({fn}) port '{issue.port or layer.input_ports[0]}': the time "
            f"axis is gone: '{before.name}' before it ({why}), so it receives B×C features, "
            f"but {fn} reads sequences B×T×C. Keep the time axis up to {fn}: {fix}, or remove "
            f"'{before.name}'.")


def torch_only_biases(net) -> int:
    """The learnables torch's recurrent layers have beyond MATLAB's: the recurrent bias
    (bias_hh) of LSTMs, and of GRUs unless ResetGateMode is
    "recurrent-bias-after-multiplication" (where MATLAB has it too)."""
    extra = 0
    for layer in net.layers:
        kind = type(layer).__name__
        gates = {"LSTM": 4, "GRU": 3}.get(kind)
        if gates is None or (kind == "GRU" and layer.__dict__.get("_matlab_reset_gate_mode")
                             == "recurrent-bias-after-multiplication"):
            continue
        hidden = getattr(layer, "hidden", 0)
        extra += gates * hidden * (2 if getattr(layer, "bidirectional", False) else 1)
    return extra


def matlab_analysis(analysis, net=None):
    """The analysis in MATLAB terms: layer types as the functions that make them, messages
    naming MATLAB functions."""
    import dataclasses
    names = {a: b for a, b in _TERMS if "(" not in b}
    names.update(TYPES)
    issues = [dataclasses.replace(i, message=in_matlab_terms(
        time_axis_gone(net, i) or mixed_branches(net, i) or i.message)) for i in analysis.issues]
    types = {k: names.get(v, v) for k, v in analysis.types.items()}
    for layer in (net.layers if net is not None else ()):
        if getattr(layer, "bidirectional", False) and types.get(layer.name) == "lstmLayer":
            types[layer.name] = "bilstmLayer"
        if layer.__dict__.get("_matlab_type") and layer.name in types:
            types[layer.name] = layer.__dict__["_matlab_type"]
    return dataclasses.replace(analysis, issues=issues, types=types)


def unused_embedding_rows(net) -> int:
    """The values of the row 0 that embeddingLayer keeps so that MATLAB's 1-based indices work
    unchanged (MATLAB's Weights have maxIndex rows; wordEmbeddingLayer keeps numWords rows)."""
    return sum(int(getattr(l, "dim", 0)) for l in net.layers
               if l.__dict__.get("_matlab_unused_row"))


def matlab_count_note(net, analysis) -> str:
    """A line saying what MATLAB's analyzeNetwork would count, where it differs."""
    biases, rows = torch_only_biases(net), unused_embedding_rows(net)
    if not (biases or rows) or not analysis.total_learnables:
        return ""
    why = []
    if biases:
        why.append(f"PyTorch's LSTM/GRU keep a second bias vector per gate ({biases:,} values) "
                   "that MATLAB does not have (MATLAB's Bias reads as the sum of the two)")
    if rows:
        why.append(f"attnlab's embeddingLayer keeps a row 0 that MATLAB's 1-based indices never "
                   f"use ({rows:,} values; MATLAB's Weights are outputSize × maxIndex, the same "
                   "rows 1…maxIndex)")
    return (f"MATLAB counts {analysis.total_learnables - biases - rows:,} learnables: "
            + "; ".join(why) + ".")


def mixed_branches(net: Any, issue: Any) -> str | None:
    """The message for a concatenation (or addition) whose inputs disagree because one branch
    is a sequence and the other features: both sizes, and the usual fix, OutputMode="last" on
    the recurrent layer that ends the sequence branch. None when the issue is something else."""
    if net is None or issue.layer is None or issue.kind != "format":
        return None
    m = re.search(r"expected (\S+) \(as 'in1'\), received (\S+)\.", issue.message)
    layers = {l.name: l for l in net.layers}
    layer = layers.get(issue.layer)
    if m is None or layer is None:
        return None
    specs = {"in1": m.group(1), issue.port or "in2": m.group(2)}
    seq = [p for p, s in specs.items() if "T" in s.split("×")]
    feat = [p for p, s in specs.items() if "T" not in s.split("×")]
    if len(seq) != 1 or len(feat) != 1:
        return None
    kind = {"Concatenation": "concatenationLayer", "MatlabConcatenation": "concatenationLayer",
            "Addition": "additionLayer",
            "Multiplication": "multiplicationLayer"}.get(type(layer).__name__)
    if kind is None:
        return None

    def source(name, port):
        src = net.source(name, port)
        return src[0] if src is not None else None

    origin = {p: source(issue.layer, p) for p in specs}
    recurrent, name = None, origin[seq[0]]
    while name is not None and name in layers:
        l = layers[name]
        if type(l).__name__ in ("LSTM", "GRU"):
            recurrent = l
            break
        if len(l.input_ports) != 1:
            break
        name = source(name, l.input_ports[0])
    fix = (f"end the sequence branch with OutputMode=\"last\" on '{recurrent.name}' "
           f"({'bilstmLayer' if getattr(recurrent, 'bidirectional', False) else type(recurrent).__name__.lower() + 'Layer'}"
           f"({recurrent.hidden}, OutputMode=\"last\")), or a globalAveragePooling1dLayer"
           if recurrent is not None else
           "end the sequence branch with a globalAveragePooling1dLayer (or an lstmLayer with "
           "OutputMode=\"last\")")
    return (f"layer '{issue.layer}' ({kind}) port '{feat[0] if feat[0] != 'in1' else seq[0]}': "
            f"its inputs disagree: '{seq[0]}' receives a sequence {specs[seq[0]]} from "
            f"'{origin[seq[0]]}', '{feat[0]}' features {specs[feat[0]]} from '{origin[feat[0]]}'. "
            f"To join a sequence branch with a feature branch, {fix}.")
