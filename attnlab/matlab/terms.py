"""attnlab's messages in MATLAB terms: attnlab layer names become the Deep Learning Toolbox
functions that make them, so a script's author reads the names they wrote."""
from __future__ import annotations

import re

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
TYPES = {"Dropout": "dropoutLayer", "ReLU": "reluLayer", "Softmax": "softmaxLayer",
         "GELU": "geluLayer", "Tanh": "tanhLayer", "Sigmoid": "sigmoidLayer",
         "LeakyReLU": "leakyReluLayer", "Embedding": "embeddingLayer",
         "PositionEmbedding": "positionEmbeddingLayer",
         "SinusoidalPositionEncoding": "sinusoidalPositionEncodingLayer",
         "Multiplication": "multiplicationLayer", "ImageToSequence": "imageToSequenceLayer"}


def _add(m):
    kind, args = m.group(1), m.group(2).replace("name=", "Name=")
    fn = TYPES.get(kind) or _MAP.get(kind, kind)
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
