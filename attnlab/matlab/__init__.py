"""MATLAB's Deep Learning Toolbox names, and a reader of MATLAB scripts, on attnlab.

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

Name–value options
------------------
Required arguments are positional, as in MATLAB. Options are MATLAB's name–value arguments,
given either as Python keywords (`OutputMode="last"`) or as MATLAB's positional pairs
(`lstmLayer(64, 'OutputMode', 'last')`); names match case-insensitively, as MATLAB does, and so do
the text values of options that choose among words (`OutputMode="Last"`). An unknown name raises
`ArgumentError` listing the valid ones. MATLAB's learn-rate and L2 factors
(`WeightLearnRateFactor=0`, `setLearnRateFactor`) become optimizer parameter groups when
training (factors.py). Weights by MATLAB name (`Weights`, `QueryWeights`, …) and
`WeightsInitializer`/`BiasInitializer` are presets applied when the network is built
(weights.py, docs/matlab.md).

Where attnlab differs from MATLAB
---------------------------------
- Layouts are PyTorch's, batch first: sequences B×T×C, images B×C×H×W, features B×C.
  `imageInputLayer([h w c])` takes MATLAB's order and makes `ImageInput((c, h, w))`.
- Input layers do not normalise: `Normalization="none"` only (MATLAB's image default is
  "zerocenter"); normalise the data before training. `MinLength` is accepted and not needed.
- Indices are converted: `indexing1dLayer(k)` (1-based) is `Index1d(k - 1)`;
  `embeddingLayer(d, maxIndex)` gets `maxIndex + 1` rows, so MATLAB's 1-based token indices work
  unchanged (row 0 is never used by them); `wordEmbeddingLayer(d, numWords)` is a `WordEmbedding`
  with MATLAB's numWords rows: word id k reads row k − 1, id 0 (doc2sequence's padding) a zero
  vector.
- Pooling: MATLAB's default `Stride` is 1 (attnlab's default is the pool size); the mapping
  passes MATLAB's value explicitly. Convolutions: MATLAB's default `Padding` is 0 ("valid").
- `concatenationLayer(dim, n)`: dim 1 is the channel dimension of MATLAB's "CB"/"CBT" data and
  maps to `dim="channel"`; images concatenate channels with `depthConcatenationLayer(n)`; the
  words "channel"/"time" are accepted too. (dim 3 is ambiguous — channels of images, time of
  sequences — and is refused with that explanation.)
- Legacy output layers: `classificationLayer` and `regressionLayer` make an `OutputLayer` marker.
  `addLayers`, `layerGraph` and `analyzeNetwork` drop it from the graph with a `MatlabNote`
  warning (attnlab networks end at their last layer; the loss is an argument of `trainnet`);
  `dlnetwork` refuses it, as MATLAB does (a NetworkError naming the layer and
  `trainnet(X, T, net, "mse", options)`). The legacy `trainNetwork(X, Y, layers, options)`
  reads the loss from it: classificationLayer → "crossentropy", regressionLayer → "mse".
- `trainnet` returns the trained network (as `net = trainnet(...)`); MATLAB's second output
  `info` is at `net.training_info`.
- `plot(net)` returns a matplotlib figure; `plot(net, "net.png")` also saves it.
  `analyzeNetwork` prints the analysis table and returns the `Analysis`.

Files: `layers.py` (layer functions), `output_layers.py` (classificationLayer, regressionLayer,
layer arrays), `networks.py` (dlnetwork, connectLayers, analyzeNetwork, predict),
`training_options.py` (trainingOptions), `training.py` (trainnet, trainNetwork, classify),
`confinement.py` (where a running script may write), `layouts.py` (MATLAB data formats →
attnlab's layouts), `_options.py` (name–value parsing), `weights.py` (weights by MATLAB name,
initializers); the script reader: `reader.py` (parse tree), `slicing.py` (what the networks need,
found before the run) with `slicing_walk.py`, `slicing_state.py` and `slicing_names.py`,
`interpreter.py` (running a script) with its parts `statements.py`, `assigning.py`,
`evaluating.py`, `indexing.py`, `calling.py`, `workspace_calls.py`, `script_functions.py`,
`skipping.py` (what analyze skips) and `script_values.py`, `builtins.py` (base MATLAB functions)
with `numeric.py` (reductions, sort, cat), `text.py` (formats, messages), `data_builtins.py`,
`cell_builtins.py` and `date_builtins.py`, `terms.py` (messages in MATLAB terms), `cli.py`
(`attnlab analyze/plot FILE.m`).
"""
from __future__ import annotations

from ._options import MatlabNote
from .layers import *  # noqa: F401,F403  (the layer functions, listed in layers.__all__)
from .layers import __all__ as _layer_names
from .networks import *  # noqa: F401,F403
from .networks import __all__ as _network_names
from .training_options import *  # noqa: F401,F403
from .training_options import __all__ as _training_option_names
from .training import *  # noqa: F401,F403
from .training import __all__ as _training_names
from .extras import *  # noqa: F401,F403
from .extras import __all__ as _extra_names
from .utility_layers import *  # noqa: F401,F403
from .utility_layers import __all__ as _utility_names
from .data import *  # noqa: F401,F403
from .data import __all__ as _data_names
from .factors import *  # noqa: F401,F403
from .factors import __all__ as _factor_names
from .mlayers import (ELU, ClippedReLU, CrossChannelNormalization, FrameFlatten, Resize2d,
                      SequenceFolding, SequenceUnfolding, Softplus, WordEmbedding)
# generic layer types the MATLAB functions make, defined in attnlab.layers
from ..layers import (EmbeddingConcatenation, GroupedConv2d, Identity, InputNormalization,
                      PatchEmbedding, Pool1d, Scaling, SpatialDropout, Swish, TanhGELU)
from .interpreter import ScriptError, run_code, run_file
from .reader import LimitError, Limits

__all__ = [*_layer_names, *_utility_names, *_data_names, *_factor_names, *_extra_names, *_network_names,
           *_training_option_names, *_training_names, "MatlabNote", "ScriptError",
           "InputNormalization", "Pool1d", "Scaling", "Identity", "GroupedConv2d",
           "SpatialDropout", "PatchEmbedding", "EmbeddingConcatenation", "Swish", "TanhGELU",
           "FrameFlatten", "SequenceFolding", "SequenceUnfolding", "WordEmbedding",
           "ELU", "ClippedReLU", "Softplus", "CrossChannelNormalization", "Resize2d",
           "run_code", "run_file", "Limits", "LimitError"]
