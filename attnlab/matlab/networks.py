"""Network functions: `dlnetwork`, `layerGraph`, `connectLayers`, `analyzeNetwork`, `predict`, …"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import os
from collections.abc import Sequence

import warnings
import weakref

import numpy as np
import torch

from attnlab.core.errors import ArgumentError, FormatError, NetworkError, SizeError, close_matches
from ..graph.names import format_port, parse_port
from ..network import Network
from ._options import MatlabNote, _flag, _int, _parse, _word, split_pairs
from .weights import apply_presets, getLayerWeights, setLayerWeights
from .layers import _layer_array
from .layers import LayerArray
from .layouts import auto_predictors

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from attnlab.graph.analysis import Analysis

__all__ = ['getLayerWeights', 'setLayerWeights', 'dlnetwork', 'layerGraph', 'addLayers', 'connectLayers', 'disconnectLayers', 'removeLayers', 'replaceLayer', 'analyzeNetwork', 'plot', 'initialize', 'predict', 'minibatchpredict', 'predictAndUpdateState', 'resetState']


# ========================================================================== networks ===

# the legacy output layers (classificationLayer, regressionLayer) of each network built here:
# not graph layers, but trainNetwork takes the loss from them
_OUTPUTS: "weakref.WeakKeyDictionary[Network, list]" = weakref.WeakKeyDictionary()


def output_layers(net: Network) -> list:
    return _OUTPUTS.get(net, [])


# MATLAB's default names where they differ from the layer's stem
_MATLAB_STEMS = {"SequenceInput": "sequenceinput", "ImageInput": "imageinput",
                 "GlobalAvgPool2d": "gapool", "GlobalMaxPool2d": "gmpool",
                 "GlobalAvgPool1d": "gapool1d", "GlobalMaxPool1d": "gmpool1d"}


def _stem(layer) -> str:
    kind = type(layer).__name__
    if kind == "Pool1d":                     # maxPooling1dLayer, averagePooling1dLayer
        return "maxpool1d" if getattr(layer, "mode", "") == "max" else "avgpool1d"
    return _MATLAB_STEMS.get(kind) or getattr(layer, "stem", "") or "layer"


def matlab_names(net: Network, layers: list) -> None:
    """MATLAB's default names for the unnamed layers of one layer array: the type's name
    ('fc', 'sequenceinput'); when the array has several unnamed layers of a type, all of them
    numbered from 1 ('conv_1', 'conv_2', …), as MATLAB names them."""
    stems = [_stem(l) if l.name is None else None for l in layers]
    counts: dict[str, int] = {}
    for s in stems:
        if s is not None:
            counts[s] = counts.get(s, 0) + 1
    taken = {l.name for l in net.layers} | {l.name for l in layers if l.name is not None}
    for layer, stem in zip(layers, stems):
        if stem is None:
            continue
        if counts[stem] == 1 and stem not in taken:
            name = stem
        else:
            i = 1
            while f"{stem}_{i}" in taken:
                i += 1
            name = f"{stem}_{i}"
        taken.add(name)
        layer.name = name


def _add(net: Network, layers, fn: str) -> Network:
    keep, dropped = _layer_array(layers, fn)
    matlab_names(net, keep)
    net.add(keep)
    if dropped:
        known = _OUTPUTS.setdefault(net, [])
        known.extend(d for d in dropped if all(d is not k for k in known))
    return net


def dlnetwork(*args: Any, **kwargs: Any) -> Network:
    """`dlnetwork()` (empty), `dlnetwork(layers)`, `dlnetwork(layers, X1, …)` (example inputs
    for a network without input layers), `dlnetwork(layers, Initialize=False)`.

    Like MATLAB, the network is initialised when it has input layers (or examples) and no
    unconnected inputs; a network with errors then raises NetworkError listing them."""
    _, o = _parse("dlnetwork", (), kwargs, {"Initialize": True, "OutputNames": None})
    if not args:
        net = Network()
        if o["OutputNames"] is not None:
            set_output_names(net, o["OutputNames"])
        return net
    layers, examples = args[0], args[1:]
    if isinstance(layers, Network):
        net = layers
        dropped = list(output_layers(net))
    else:
        import warnings
        from ._options import MatlabNote
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MatlabNote)
            keep, dropped = _layer_array(layers, "dlnetwork")
        net = Network()
        matlab_names(net, keep)
        net.add(keep)
    if o["OutputNames"] is not None:
        set_output_names(net, o["OutputNames"])
    if dropped:
        # MATLAB: "Layers must not contain output layers"; the network without them goes with
        # the error, so that `attnlab analyze` can go on and analyse it
        d = dropped[0]
        error = NetworkError(
            f"dlnetwork: layer '{d.name or d.kind}' ({d.kind}) is an output layer, and a "
            f"dlnetwork must not contain output layers (MATLAB refuses it too). Remove "
            f"{d.kind} from the layers and give the loss to training instead: "
            f"trainnet(X, T, net, \"{d.loss}\", options); or keep it and train the layer "
            "array with trainNetwork(X, Y, layers, options)")
        setattr(error, "network", net)
        setattr(error, "refused", True)
        raise error
    if _flag("dlnetwork", "Initialize", o["Initialize"]):
        try:
            _initialize_if_complete(net, examples)
        except (NetworkError, SizeError, FormatError) as e:
            setattr(e, "network", net)       # analyze goes on with it (MATLAB stops here)
            raise
    return net


def set_output_names(net: Network, names) -> Network:
    """MATLAB's `net.OutputNames = ["fc1", "lstm/hidden"]` and `dlnetwork(…, OutputNames=…)`:
    these layer outputs, inner ones too, become the network's outputs in this order (what
    `predict` returns and training's losses apply to); the choice is saved with the network."""
    values = [names] if isinstance(names, str) else list(names.tolist() if hasattr(names, "tolist")
                                                         else names)
    try:
        net.choose_outputs([str(v) for v in values])
    except NetworkError as e:
        raise ArgumentError(f"OutputNames: {str(e).partition(': ')[2]}") from None
    return net


def layerGraph(*args: Any) -> Network:
    """Legacy `layerGraph(layers)`: the network, not initialised."""
    net = Network()
    if args:
        _add(net, args[0], "layerGraph")
    return net


def _initialize_if_complete(net: Network, examples) -> None:
    has_inputs = any(l.is_input for l in net.layers)
    if not (has_inputs or examples):
        return
    analysis = net.analyze(*examples)
    if any(i.kind == "unconnected" for i in analysis.errors):
        return                       # MATLAB leaves such a network uninitialised
    net.initialize(*examples)
    apply_presets(net)


def addLayers(net: Network, layers: LayerArray) -> Network:
    """Adds a layer or a layer array (connected in order); returns the network."""
    _check_net(net, "addLayers")
    return _add(net, layers, "addLayers")


def connectLayers(net: Network, s: str, d: str) -> Network:
    """Connects "layer" or "layer/port" to "layer" or "layer/port"; returns the network."""
    _check_net(net, "connectLayers")
    out = next((o for o in output_layers(net) if isinstance(d, str) and o.name == d), None)
    if out is not None:                  # a classificationLayer as the target: remember its source
        out.source = parse_port(s)[0] if isinstance(s, str) else s
        return net
    net.connect(_normalized_source(net, _port_alias(net, s, "output")),
                _port_alias(net, d, "input"))
    _fold_frame(net, s, d)
    return net


def _port_alias(net: Network, ref, side: str):
    """"layer/name" with a port name MATLAB gave the layer (functionLayer's InputNames,
    OutputNames) → attnlab's port ("in2", "out1"); any other reference as it is."""
    if not isinstance(ref, str) or "/" not in ref:
        return ref
    layer_name, port = ref.split("/", 1)
    layer = next((l for l in net.layers if l.name == layer_name), None)
    names = layer.__dict__.get(f"_matlab_{side}_names") if layer is not None else None
    if layer is None or not names or port not in names:
        return ref
    ports = layer.input_ports if side == "input" else layer.output_ports
    return f"{layer_name}/{ports[names.index(port)]}"


def _fold_frame(net: Network, s, d) -> None:
    """A sequenceFoldingLayer connected from sequenceInputLayer([h w c]) folds frames h×w×c."""
    from .mlayers import SequenceFolding
    src, dst = (parse_port(str(x))[0] for x in (s, d))
    names = [l.name for l in net.layers]
    if src not in names or dst not in names:
        return
    fold, source = _layer(net, dst), _layer(net, src)
    frame = source.__dict__.get("_matlab_frame")
    if isinstance(fold, SequenceFolding) and fold.frame is None and frame is not None:
        fold.frame = [*frame, 1][:3] if len(frame) == 2 else list(frame)


def _normalized_source(net: Network, s):
    """An input layer whose data MATLAB normalises feeds its InputNormalization layer: a
    connection from the input starts there, as the normalisation is part of the input in MATLAB."""
    from .mlayers import InputNormalization
    if not isinstance(s, str) or "/" in s or s not in [l.name for l in net.layers]:
        return s
    layer = next(l for l in net.layers if l.name == s)
    if not layer.is_input or getattr(layer, "_matlab_normalization", None) is None:
        return s
    for c in net.connections:
        src, dst = parse_port(str(c.source))[0], parse_port(str(c.destination))[0]
        if src == s and isinstance(_layer(net, dst), InputNormalization):
            return dst
    return s


def _layer(net, name):
    return next((l for l in net.layers if l.name == name), None)


def disconnectLayers(net: Network, s: str, d: str) -> Network:
    """Removes the connection from `s` to `d` (``"layer/port"`` names, as `connectLayers`)."""
    _check_net(net, "disconnectLayers")
    net.disconnect(_port_alias(net, s, "output"), _port_alias(net, d, "input"))
    return net


def removeLayers(net: Network, layerNames: str | Sequence[str]) -> Network:
    """Removes a layer name or a list of names, with their connections."""
    _check_net(net, "removeLayers")
    names = [layerNames] if isinstance(layerNames, str) else list(layerNames)
    outs = output_layers(net)
    dropped = [o for o in outs if o.name in names]
    for o in dropped:
        outs.remove(o)
    names = [n for n in names if n not in {o.name for o in dropped}]
    if names:
        net.remove(*names)
    return net


def replaceLayer(net: Network, layerName: str, larray: LayerArray, *args: Any, **kwargs: Any) -> Network:
    """Replaces a layer by a layer or layer array; inputs go to the first new layer and outputs
    leave from the last, port by port (ReconnectBy "name" and "order" agree for one-port
    layers, the common case)."""
    _check_net(net, "replaceLayer")
    _, o = _parse("replaceLayer", args, kwargs, {"ReconnectBy": "name"})
    _word("replaceLayer", "ReconnectBy", o["ReconnectBy"], ("name", "order"))
    outputs = output_layers(net)
    old = next((o for o in outputs if o.name == layerName), None)
    if old is not None:                     # the classificationLayer kept beside the graph
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MatlabNote)
            keep, dropped = _layer_array(larray, "replaceLayer")
        if keep or len(dropped) != 1:
            raise ArgumentError(f"replaceLayer: '{layerName}' is an output layer "
                                f"({old.kind}); replace it by one output layer "
                                "(classificationLayer or regressionLayer), received "
                                f"{len(keep)} layers and {len(dropped)} output layers.")
        new = dropped[0]
        new.source = old.source
        outputs[outputs.index(old)] = new
        return net
    keep, dropped = _layer_array(larray, "replaceLayer")
    net.replace(layerName, keep)
    return net


def analyzeNetwork(net_or_layers: Network | LayerArray, *X: Any, **kwargs: Any) -> Analysis:
    """Prints the analysis table (layers, activation sizes, learnables, issues) and returns the
    `Analysis`. Takes a network or a layer array; `X` are example inputs for a network without
    input layers. Never raises for a bad graph."""
    _parse("analyzeNetwork", (), kwargs, {"TargetUsage": "dlnetwork"})
    from .terms import matlab_count_note
    net = net_or_layers if isinstance(net_or_layers, Network) else layerGraph(net_or_layers)
    analysis = net.analyze(*X)
    print(analysis.table())
    note = matlab_count_note(net, analysis)       # what MATLAB's analyzeNetwork would count
    if note:
        print(note)
    return analysis


def plot(net: Network, path: str | os.PathLike | None = None, **kwargs: Any) -> Figure:
    """Draws the network (a matplotlib Figure); saves it to `path` when given."""
    _check_net(net, "plot")
    return net.plot(path, **kwargs)


def initialize(net: Network, *X: Any) -> Network:
    """Builds the parameters (sizes from input layers, or from example inputs `X`)."""
    _check_net(net, "initialize")
    net.initialize(*X)
    apply_presets(net)
    return net


def predict(net: Network, *X: Any, **kwargs: Any) -> torch.Tensor | tuple[torch.Tensor, ...]:
    """Outputs in inference mode without gradients: one output, or a tuple in `Outputs` order
    (default: net.output_names), as MATLAB's `[Y1, …, YN] = predict(net, X1, …)`."""
    _check_net(net, "predict")
    options = {"Outputs": None, "Acceleration": "auto", **_SEQUENCE_OPTIONS}
    X, pairs = split_pairs(X, options)
    _, o = _parse("predict", pairs, kwargs, options)
    _sequence_options("predict", o)
    X = auto_predictors(net, X)                 # MATLAB's C×T sequences, as training reads them
    if _inner(net, o["Outputs"]):
        return _predict_inner(net, X, o["Outputs"], "predict", {})
    return _select_outputs(net, net.predict(*X), o["Outputs"], "predict")


def minibatchpredict(net: Network, *X: Any, **kwargs: Any) -> torch.Tensor | tuple[torch.Tensor, ...]:
    """`predict` in mini-batches of `MiniBatchSize` (default 128)."""
    _check_net(net, "minibatchpredict")
    options = {"MiniBatchSize": 128, "Outputs": None, "Acceleration": "auto",
               "ExecutionEnvironment": "auto", "UniformOutput": True, **_SEQUENCE_OPTIONS}
    X, pairs = split_pairs(X, options)
    _, o = _parse("minibatchpredict", pairs, kwargs, options)
    _sequence_options("minibatchpredict", o)
    bs = _int("minibatchpredict", "MiniBatchSize", o["MiniBatchSize"])
    X = auto_predictors(net, X)
    if _inner(net, o["Outputs"]):
        return _predict_inner(net, X, o["Outputs"], "minibatchpredict", {"batch_size": bs})
    y = net.predict(*X, batch_size=bs)
    return _select_outputs(net, y, o["Outputs"], "minibatchpredict")


# how predict, minibatchpredict and classify pad sequences of different lengths: attnlab
# pads each mini-batch to its longest sequence and masks the padding, on either side
_SEQUENCE_OPTIONS = {"SequenceLength": "longest", "SequencePaddingValue": 0,
                     "SequencePaddingDirection": "right", "InputDataFormats": "auto",
                     "OutputDataFormats": "auto"}


def _sequence_options(fn: str, o: dict) -> None:
    """Checks the sequence options of a prediction: "longest" (attnlab's masked padding) and
    either padding side (the masks give the same results); formats "auto" or MATLAB's words."""
    if not isinstance(o["SequenceLength"], str) or \
            _word(fn, "SequenceLength", o["SequenceLength"], ("longest", "shortest")) != "longest":
        raise ArgumentError(f"{fn}: expected SequenceLength \"longest\", received "
                            f"{o['SequenceLength']!r}: attnlab pads each mini-batch to its longest "
                            "sequence and masks the padding; truncate the sequences yourself for "
                            "\"shortest\" or a fixed length.")
    _word(fn, "SequencePaddingDirection", o["SequencePaddingDirection"], ("right", "left"))


def _names(outputs):
    return [outputs] if isinstance(outputs, str) else list(outputs)


def _inner(net, outputs) -> bool:
    """True when `Outputs` names a layer output inside the network (MATLAB allows any layer)."""
    return outputs is not None and any(n not in net.output_names for n in _names(outputs))


def _predict_inner(net, X, outputs, fn, kw) -> torch.Tensor | tuple[torch.Tensor, ...]:
    """Outputs of inner layers, as MATLAB's `predict(net, X, Outputs=["fc1", "lstm/hidden"])`:
    forward hooks on the named layers' modules record what they return during one prediction
    (the network's own forward stays as it is)."""
    names = _names(outputs)
    if not net.initialized:
        net.initialize(*X)
    apply_presets(net)
    mods, wanted = net.layer_modules, []
    layers = {l.name: l for l in net.layers}
    for n in names:
        lname, port = parse_port(n)
        layer = layers.get(lname)
        ports = getattr(layer, "output_ports", ())
        if layer is None or layer.is_input or (port and port not in ports):
            choices = [format_port(l.name, p, l.output_ports)
                       for l in net.layers if not l.is_input for p in l.output_ports]
            raise ArgumentError(f"{fn}: expected Outputs among the layer outputs "
                                f"({', '.join(choices)}), received '{n}'."
                                f"{close_matches(n, choices)}")
        wanted.append((n, lname, ports.index(port) if port else 0, layer))
    seen: dict[str, list] = {}

    def hook_for(lname, layer):
        def hook(module, args, out):
            if not module.training:
                seen.setdefault(lname, []).append(out)
        return hook
    handles = [mods[l].register_forward_hook(hook_for(l, layer))
               for l, layer in {w[1]: w[3] for w in wanted}.items()]
    try:
        net.predict(*X, **kw)
    finally:
        for h in handles:
            h.remove()
    picked = []
    for n, lname, i, layer in wanted:
        parts = [_port_value(o, i, layer) for o in seen.get(lname, [])]
        if not parts:
            raise ArgumentError(f"{fn}: layer '{lname}' did not run for these inputs; "
                                f"received no value for Outputs '{n}'.")
        picked.append(parts[0] if len(parts) == 1 else torch.cat(parts))
    return picked[0] if len(picked) == 1 else tuple(picked)


def _port_value(out, i, layer):
    if isinstance(layer, Network):                 # ((outputs,), (masks,))
        return out[0][i]
    if layer.returns_mask:
        out = out[0] if len(layer.output_ports) == 1 else out[0][i]
        return out
    return out[i] if len(layer.output_ports) > 1 else out


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


# ==================================================================== recurrent state ===
# MATLAB keeps a recurrent network's state in the network (net.State); attnlab runs it step by
# step with `Network.stream`. Each network's committed state is the inputs it has been given
# since its last reset, and a live stream at that state (replayed from them when a
# `[Y, state] = predict(...)` moved it on and the state was not kept).

class NetworkState:
    """MATLAB's `net.State` of a recurrent network: the inputs it has been given (in order)
    and the stream that holds the state after them. `net.State = state` makes it the
    network's."""

    def __init__(self, inputs: list, stream: Any):
        self.inputs, self.stream = list(inputs), stream

    def __repr__(self):
        steps = sum(int(x.shape[-2]) for x in self.inputs)
        return f"<network state after {steps} time step{'s' if steps != 1 else ''}>"


_STATES: "weakref.WeakKeyDictionary[Network, tuple[list, Any, bool]]" = weakref.WeakKeyDictionary()


def _steps(fn, net, X):
    """One sequence T×C → 1×T×C, a batch B×T×C as it is; (tensor, whether it was one)."""
    if len(X) != 1:
        raise ArgumentError(f"{fn}: expected one input (the next time steps), received "
                            f"{len(X)}.")
    x = torch.as_tensor(np.asarray(X[0]) if not isinstance(X[0], torch.Tensor) else X[0],
                        dtype=torch.float32)
    if x.dim() == 1:
        x = x.reshape(1, 1, -1)
        return x, "step"
    if x.dim() == 2:
        return x.unsqueeze(0), "one"
    if x.dim() == 3:
        return x, "batch"
    raise ArgumentError(f"{fn}: expected time steps T×C (one sequence) or B×T×C, received "
                        f"an array of {x.dim()} dimensions.")


def _fresh_stream(net, inputs):
    if not net.initialized:
        net.initialize()
    apply_presets(net)
    net.eval()
    s = net.stream()
    for x in inputs:
        s.step(x)
    return s


def _live(net):
    """(committed inputs, a stream at that state)."""
    inputs, stream, at_committed = _STATES.get(net, ([], None, True))
    if stream is None or not at_committed:
        stream = _fresh_stream(net, inputs)
    return inputs, stream


def _shape_back(y, how):
    y = y.detach().cpu().numpy()             # numbers a script indexes and stores: Y(t, :) = …
    return y[0, 0] if how == "step" else y[0] if how == "one" else y


def predictAndUpdateState(net: Network, *X: Any, **kwargs: Any) -> tuple[Network, Any]:
    """`[net, Y] = predictAndUpdateState(net, X)`: the outputs for the next time steps X (T×C
    for one sequence, B×T×C for a batch), starting from the state the earlier calls left; the
    network keeps the new state (`resetState` clears it). Step by step, each output equals
    what the whole sequence gives at that step (`Network.stream`)."""
    fn = "predictAndUpdateState"
    _check_net(net, fn)
    X, pairs = split_pairs(X, {"MiniBatchSize": 128, "ExecutionEnvironment": "auto",
                               "Acceleration": "auto", **_SEQUENCE_OPTIONS})
    _parse(fn, pairs, kwargs, {"MiniBatchSize": 128, "ExecutionEnvironment": "auto",
                               "Acceleration": "auto", **_SEQUENCE_OPTIONS})
    x, how = _steps(fn, net, X)
    inputs, stream = _live(net)
    with torch.no_grad():
        y = stream.step(x)
    _STATES[net] = (inputs + [x], stream, True)
    return net, _shape_back(y, how)


def resetState(net: Network) -> Network:
    """`net = resetState(net)`: the recurrent state back to its start (zeros)."""
    _check_net(net, "resetState")
    _STATES.pop(net, None)
    return net


def _predict_with_state(net: Network, *X: Any, **kwargs: Any) -> tuple:
    """`[Y, state] = predict(net, X)` (and `[Y1, …, YN, state]`): the outputs from the network's
    current state, and the state after X, which `net.State = state` keeps."""
    recurrent = any(type(l).__name__ in ("LSTM", "GRU") for l in net.layers)
    if not recurrent or kwargs or len(X) != 1:
        out = predict(net, *X, **kwargs)
        return (*(out if isinstance(out, tuple) else (out,)), NetworkState([], None))
    x, how = _steps("predict", net, X)
    inputs, stream = _live(net)
    with torch.no_grad():
        y = stream.step(x)
    _STATES[net] = (inputs, stream, False)   # the stream moved past the committed state
    ys = tuple(y.values()) if isinstance(y, dict) else (y,)
    return (*(_shape_back(v, how) for v in ys), NetworkState(inputs + [x], stream))


def set_state(net: Network, state: Any) -> None:
    """`net.State = state`: the state a `[Y, state] = predict(net, X)` returned."""
    if not isinstance(state, NetworkState):
        raise ArgumentError(f"net.State: expected the state that [Y, state] = predict(net, X) "
                            f"returns, received {type(state).__name__}.")
    if state.stream is None:
        return                                    # a network without recurrent layers
    _STATES[net] = (list(state.inputs), state.stream, True)


def get_state(net: Network) -> NetworkState:
    inputs, stream, at = _STATES.get(net, ([], None, True))
    return NetworkState(inputs, stream if at else None)


setattr(predict, "with_scores", _predict_with_state)
