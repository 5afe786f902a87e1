"""The Network: the only graph object, and a `torch.nn.Module`.

Editing (`add`, `connect`, …) never runs tensors. `analyze()` walks the graph once; the first call
(or `initialize`) builds the layer modules and compiles a plan that runs them in order.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from .analysis import Analysis, analyze as _analyze
from .compile import Plan, compile_plan
from .errors import AttnlabError, DataError, NetworkError, SizeError, close_matches
from .layers.base import Layer, check_name
from .batching import as_batch
from .sequences import Padded, pad_sequences
from .spec import Spec, spec_of_tensor_shape


class Connection(NamedTuple):
    source: str
    destination: str

    def __str__(self):
        return f"{self.source} → {self.destination}"


class LayerList(tuple):
    """The network's layers in order; also indexable by name."""

    def __getitem__(self, key):
        if isinstance(key, str):
            for layer in self:
                if layer.name == key:
                    return layer
            raise KeyError(f"no layer named '{key}'.{close_matches(key, [l.name for l in self])}")
        return tuple.__getitem__(self, key)


class Network(nn.Module, Layer):
    """A graph of named layers joined port to port. Call it with inputs by position (in
    `input_names` order) or as a dict by input name; several outputs come back as a dict."""

    stem = "network"
    uses_mask = True
    returns_mask = True

    def __init__(self, layers=None, name: str | None = None):
        nn.Module.__init__(self)
        self.name = check_name(name)
        self._layers: dict[str, Layer] = {}
        self._conns: dict[tuple[str, str], tuple[str, str]] = {}
        self.layer_modules = nn.ModuleDict()
        self._built: dict[str, tuple] = {}
        self._plan: Plan | None = None
        self._data_specs: dict[str, Spec] | None = None
        self._dtype = None
        self.metadata: dict = {}     # saved with the network (JSON): e.g. "class_labels"
        if layers is not None:
            self.add(layers)

    # ------------------------------------------------------------------------- editing ---
    def add(self, layers) -> "Network":
        """Adds a layer, or a list of layers connected in order (each first output to the next
        layer's first input). Returns the network, so calls can chain."""
        new = list(layers) if isinstance(layers, (list, tuple)) else [layers]
        for layer in new:
            if not isinstance(layer, Layer):
                raise NetworkError(f"add() takes attnlab layers, received {type(layer).__name__}. "
                                   "Wrap a torch module with L.Module(module).")
            if any(layer is l for l in self._layers.values()):
                raise NetworkError(f"layer '{layer.name}' is already in this network: a layer can be "
                                   "added once; create another layer to use it twice.")
        if len({id(l) for l in new}) != len(new):
            raise NetworkError("the same layer object appears twice in the list given to add(): "
                               "create a separate layer for each position.")
        taken = set(self._layers)
        names = []
        for layer in new:
            if layer.name is not None:
                if layer.name in taken:
                    raise NetworkError(f"duplicate layer name '{layer.name}': names are unique. "
                                       f"Rename one, e.g. name='{_fresh(layer.name, taken)}'.")
                taken.add(layer.name)
            names.append(layer.name)
        for i, layer in enumerate(new):
            if layer.name is None:
                names[i] = _fresh(layer.stem, taken, first_plain=True)
                taken.add(names[i])
        for a, b in zip(new, new[1:]):
            if not b.input_ports:
                raise NetworkError(f"layer '{names[new.index(b)]}' ({b.type_name}) has no input, so it "
                                   f"cannot follow '{names[new.index(a)]}' in a list. Start a new "
                                   "list with it.")
            if not a.output_ports:
                raise NetworkError(f"layer '{names[new.index(a)]}' has no output to connect.")
        for layer, name in zip(new, names):
            layer.name = name
            self._layers[name] = layer
        for a, b in zip(new, new[1:]):
            self._conns[(b.name, b.input_ports[0])] = (a.name, a.output_ports[0])
        self._changed()
        return self

    def connect(self, source: str, destination: str) -> "Network":
        """Connects an output ("layer" or "layer/port") to an input ("layer" or "layer/port")."""
        src, sport = self._resolve(source, "output")
        dst, dport = self._resolve(destination, "input")
        if (dst, dport) in self._conns:
            old = self._conns[(dst, dport)]
            raise NetworkError(f"layer '{dst}' port '{dport}': already connected from "
                               f"'{_fmt(self._layers[old[0]], old[0], old[1], 'output')}'. An input "
                               f"takes one source: net.disconnect('{old[0]}', '{dst}/{dport}') first, "
                               "or combine the sources with Addition or Concatenation.")
        self._conns[(dst, dport)] = (src, sport)
        self._changed()
        return self

    def disconnect(self, source: str, destination: str) -> "Network":
        src, sport = self._resolve(source, "output")
        dst, dport = self._resolve(destination, "input")
        if self._conns.get((dst, dport)) != (src, sport):
            have = [str(c) for c in self.connections if c.destination.split("/")[0] == dst]
            raise NetworkError(f"no connection {source} → {destination}. Connections into '{dst}': "
                               f"{', '.join(have) or 'none'}.")
        del self._conns[(dst, dport)]
        self._changed()
        return self

    def remove(self, *names: str) -> "Network":
        """Removes layers and every connection that touches them."""
        for n in names:
            self._layer(n)
        for n in names:
            del self._layers[n]
            self._built.pop(n, None)
            if n in self.layer_modules:
                del self.layer_modules[n]
        self._conns = {d: s for d, s in self._conns.items()
                       if d[0] not in names and s[0] not in names}
        self._changed()
        return self

    def replace(self, name: str, layers) -> "Network":
        """Replaces a layer by a layer or a list (connected in order); the old layer's input
        connections go to the first new layer and its output connections leave from the last."""
        old = self._layer(name)
        new = list(layers) if isinstance(layers, (list, tuple)) else [layers]
        first, last = new[0], new[-1]
        touching = {d: s for d, s in self._conns.items() if name in (d[0], s[0])}
        for (dst, port), (src, sport) in touching.items():
            if dst == name and old.input_ports.index(port) >= len(first.input_ports):
                raise NetworkError(f"replace('{name}'): its input '{port}' is connected but the new "
                                   f"layer {first.type_name} has only {len(first.input_ports)} input(s).")
            if src == name and old.output_ports.index(sport) >= len(last.output_ports):
                raise NetworkError(f"replace('{name}'): its output '{sport}' is connected but the new "
                                   f"layer {last.type_name} has only {len(last.output_ports)} output(s).")
        keep_order = list(self._layers)
        at = keep_order.index(name)
        saved = dict(self._conns)
        self.remove(name)
        if len(new) == 1 and new[0].name is None:
            new[0].name = name
        try:
            self.add(new)
        except AttnlabError:
            self._layers[name] = old   # put the old layer back so the network stays as it was
            self._conns = saved
            self._reorder(keep_order)
            raise
        order = keep_order[:at] + [l.name for l in new] + keep_order[at + 1:]
        self._reorder(order)
        # inputs of the old layer enter the first new layer, its outputs leave from the last
        # (both ends of a connection from the layer to itself move)
        for (dst, port), (src, sport) in touching.items():
            if dst == name:
                dst, port = first.name, first.input_ports[old.input_ports.index(port)]
            if src == name:
                src, sport = last.name, last.output_ports[old.output_ports.index(sport)]
            self._conns[(dst, port)] = (src, sport)
        self._changed()
        return self

    def _reorder(self, order):
        self._layers = {n: self._layers[n] for n in order if n in self._layers}

    def _changed(self):
        self._plan = None
        self._data_specs = None

    # --------------------------------------------------------------------- addressing ---
    def _layer(self, name: str) -> Layer:
        if name not in self._layers:
            raise NetworkError(f"unknown layer '{name}'.{close_matches(name, self._layers)} "
                               f"Layers: {', '.join(self._layers) or 'none'}.")
        return self._layers[name]

    def _resolve(self, ref: str, side: str) -> tuple[str, str]:
        if not isinstance(ref, str):
            raise NetworkError(f"a port is named by a string 'layer' or 'layer/port', got {ref!r}")
        name, _, port = ref.partition("/")
        layer = self._layer(name)
        ports = layer.output_ports if side == "output" else layer.input_ports
        if not ports:
            raise NetworkError(f"layer '{name}' ({layer.type_name}) has no {side}s"
                               + (": it is an input layer; connect from it instead." if side == "input" else "."))
        if not port:
            if side == "input" and len(ports) > 1:
                raise NetworkError(f"layer '{name}' has inputs {', '.join(repr(p) for p in ports)}: "
                                   f"name one, e.g. '{name}/{ports[0]}'.")
            return name, ports[0]
        if port not in ports:
            raise NetworkError(f"layer '{name}' has no {side} port '{port}'.{close_matches(port, ports)} "
                               f"Its {side}s: {', '.join(ports)}.")
        return name, port

    # ----------------------------------------------------------------------- views -----
    @property
    def layers(self) -> LayerList:
        return LayerList(self._layers.values())

    @property
    def connections(self) -> tuple[Connection, ...]:
        out = []
        for (dst, dport), (src, sport) in self._conns.items():
            out.append(Connection(_fmt(self._layers[src], src, sport, "output"),
                                  _fmt(self._layers[dst], dst, dport, "input")))
        return tuple(out)

    @property
    def input_names(self) -> list[str]:
        inputs = [n for n, l in self._layers.items() if l.is_input]
        if inputs:
            return inputs
        return [_fmt(l, n, p, "input") for n, l in self._layers.items()
                for p in l.input_ports if (n, p) not in self._conns]

    @property
    def output_names(self) -> list[str]:
        return [o[2] for o in self._dangling_outputs()]

    def _dangling_outputs(self):
        used = set(self._conns.values())
        return [(n, p, _fmt(l, n, p, "output")) for n, l in self._layers.items() if not l.is_input
                for p in l.output_ports if (n, p) not in used]

    @property
    def learnables(self) -> dict[str, nn.Parameter]:
        """'layer/param' → Parameter, for the layers built so far (after initialisation)."""
        out = {}
        for name in self._layers:
            mod = self.layer_modules[name] if name in self.layer_modules else None
            if mod is None:
                continue
            if isinstance(mod, Network):
                out.update({f"{name}/{k}": v for k, v in mod.learnables.items()})
            else:
                out.update({f"{name}/{k}": v for k, v in mod.named_parameters()})
        return out

    @property
    def initialized(self) -> bool:
        return self._plan is not None

    # -------------------------------------------------------------------- analysis -----
    def analyze(self, *example_inputs, **named) -> Analysis:
        """Checks the graph and infers every activation's size. Never raises for a bad graph.
        Without input layers, sizes come from example inputs (or the last call's data)."""
        specs = self._specs_from_data(example_inputs, named) if (example_inputs or named) \
            else self._data_specs
        return _analyze(self, specs)

    def _specs_from_data(self, args, kwargs) -> dict[str, Spec]:
        names = self.input_names
        if len(args) == 1 and isinstance(args[0], dict):
            given = args[0]
        elif kwargs:
            given = kwargs
        else:
            if len(args) != len(names):
                raise DataError(f"the network has {len(names)} input(s) ({', '.join(names)}), "
                                f"received {len(args)}. Pass one example per input.")
            given = dict(zip(names, args))
        specs = {}
        for name in names:
            if name not in given:
                raise DataError(f"missing example input '{name}'.{close_matches(name, given)}")
            x = given[name]
            if isinstance(x, Padded):
                x = x.data
            elif isinstance(x, (list, tuple)):
                x = pad_sequences(x).data if np.ndim(x[0]) == 2 else np.stack([np.asarray(v) for v in x])
            try:
                specs[name] = spec_of_tensor_shape(tuple(np.shape(x)))
            except ValueError as e:
                raise DataError(f"input '{name}': {e}; give B×C, B×T×C or B×C×H×W data.") from None
        return specs

    def _learnable_shapes(self, name, layer, specs):
        built = self._built.get(name)
        if built is not None and built[0] is layer and built[1] == specs and name in self.layer_modules:
            mod = self.layer_modules[name]
        elif isinstance(layer, Network):
            return {k: tuple(s) for k, s in _flat_learnables(layer.analyze_as_layer(specs)).items()}
        else:
            with torch.device("meta"):
                mod = layer.build(specs)
        if isinstance(mod, Network):
            return {k: tuple(v.shape) for k, v in mod.learnables.items()}
        return {k: tuple(v.shape) for k, v in mod.named_parameters()}

    def summary(self) -> str:
        """The analysis table, as Keras' `summary()` prints it."""
        text = self.analyze().table()
        print(text)
        return text

    # ------------------------------------------------------------------ initialising ---
    def initialize(self, *example_inputs, **named) -> "Network":
        """Builds every layer's parameters (like MATLAB's `initialize(net, X)`). Sizes come from
        the input layers, or from example inputs for a network without input layers."""
        self._prepare(example_inputs, named)
        return self

    def _prepare(self, args=(), kwargs=None) -> Plan:
        has_inputs = any(l.is_input for l in self._layers.values())
        specs = None
        if not has_inputs and self._layers:
            if not args and not kwargs:
                if self._data_specs is None:
                    raise NetworkError("this network has no input layers, so its sizes come from data: "
                                       "call it (or initialize) with example inputs first.")
                specs = self._data_specs
            else:
                specs = self._specs_from_data(args, kwargs)
        return self._compile(specs)

    def _compile(self, specs) -> Plan:
        """Analyse with these input sizes, build what is missing, generate the forward."""
        analysis = _analyze(self, specs)
        analysis.raise_if_errors("initialize", f"network '{self.name}'" if self.name else "the network")
        self._build_modules(analysis)
        self._plan = compile_plan(self, analysis)
        self._data_specs = specs
        self._set_io(analysis)
        self._dtype = None
        return self._plan

    def _build_modules(self, analysis: Analysis):
        ref = next((p for p in self.parameters()), None)
        for name in analysis.order:
            layer = self._layers[name]
            specs = analysis.in_specs[name]
            built = self._built.get(name)
            if built is not None and built[0] is layer and built[1] == specs and name in self.layer_modules:
                continue
            mod = layer.build(specs)
            if ref is not None:
                mod = mod.to(device=ref.device, dtype=ref.dtype if ref.is_floating_point() else None)
            self.layer_modules[name] = mod
            self._built[name] = (layer, specs)
        for name in list(self.layer_modules):
            if name not in self._layers:
                del self.layer_modules[name]

    def _set_io(self, analysis):
        self._in_names = self.input_names
        self._out_names = self.output_names
        self._input_specs = [self._input_spec(n, analysis) for n in self._in_names]
        # (labels, [(dim, size) to check]) per input: every known size but the batch
        self._input_checks = [(s.labels, [(i, n) for i, n in enumerate(s.sizes) if i and n is not None])
                              for s in self._input_specs]

    def _input_spec(self, name, analysis):
        layer_name, _, port = name.partition("/")
        layer = self._layers[layer_name]
        if layer.is_input:
            return layer.spec
        return analysis.in_specs[layer_name][port or layer.input_ports[0]]

    # ---------------------------------------------------------------- as a layer -------
    @property
    def input_ports(self):
        return tuple(self.input_names)

    @property
    def output_ports(self):
        return tuple(self.output_names)

    def analyze_as_layer(self, specs: dict[str, Spec]) -> Analysis:
        given = {}
        for name, spec in specs.items():
            layer = self._layers[name.partition("/")[0]]
            if layer.is_input:
                if not layer.spec.matches(spec):
                    raise self.error(SizeError, name, f"expected {layer.spec}, received {spec}.")
            else:
                given[name] = spec
        analysis = _analyze(self, given)
        analysis.raise_if_errors("use", f"network '{self.name}' as a layer")
        return analysis

    def infer(self, specs):
        analysis = self.analyze_as_layer(specs)
        return {o: analysis.out_specs[n][p] for n, p, o in self._dangling_outputs()}

    def build(self, specs):
        has_inputs = any(l.is_input for l in self._layers.values())
        self._compile(None if has_inputs else dict(specs))
        return self

    def config(self):
        return {}

    def __repr__(self):
        return (f"Network({len(self._layers)} layers, inputs={self.input_names}, "
                f"outputs={self.output_names})")

    # ------------------------------------------------------------------- running -------
    def forward(self, *args, _masks=None, **kwargs):
        plan = self._plan
        if _masks is not None:                              # inside another network's plan
            flat = [v for pair in zip(args, _masks) for v in pair]
            return plan.fn(plan.mods, *flat)
        if plan is None:
            plan = self._prepare(args, kwargs)
        flat = self._flatten_inputs(args, kwargs)
        try:
            outs, _ = plan.fn(plan.mods, *flat)
        except (RuntimeError, IndexError, ValueError) as e:
            raise self._translate(e) from e
        if len(outs) == 1:
            return outs[0]
        return dict(zip(self._out_names, outs))

    def forward_with_masks(self, *args, **kwargs):
        """(outputs, masks), each a dict by output name; masks are B×T (True = real step) for
        sequence outputs of padded batches, else None."""
        plan = self._plan or self._prepare(args, kwargs)
        flat = self._flatten_inputs(args, kwargs)
        try:
            outs, masks = plan.fn(plan.mods, *flat)
        except (RuntimeError, IndexError, ValueError) as e:
            raise self._translate(e) from e
        names = self._out_names
        return dict(zip(names, outs)), dict(zip(names, masks))

    def _flatten_inputs(self, args, kwargs):
        names = self._in_names
        if len(args) == 1 and isinstance(args[0], dict) and not kwargs:
            given = args[0]
        elif kwargs:
            if args:
                raise DataError("give the inputs either by position or by name, not both")
            given = kwargs
        else:
            if len(args) != len(names):
                raise DataError(f"the network has {len(names)} input(s) ({', '.join(names)}), received "
                                f"{len(args)} positional input(s). Pass them in this order, or as a "
                                "dict by input name.")
            given = None
        if given is not None:
            if len(given) != len(names) or any(k not in given for k in names):
                unknown = [k for k in given if k not in names]
                missing = [k for k in names if k not in given]
                hint = "".join(close_matches(k, names) for k in unknown)
                raise DataError(f"inputs by name: expected {', '.join(names)}; "
                                + (f"unknown {', '.join(unknown)}.{hint} " if unknown else "")
                                + (f"missing {', '.join(missing)}." if missing else ""))
            args = [given[k] for k in names]
        dtype = self._dtype or self._float_dtype()
        flat = []
        for x, name, spec, checks in zip(args, names, self._input_specs, self._input_checks):
            if type(x) is torch.Tensor and x.dim() == len(checks[0]) and \
                    all(x.shape[i] == n for i, n in checks[1]):       # the hot path: a right tensor
                flat += [x if x.dtype is dtype else x.to(dtype), None]
            else:
                flat += as_batch(x, spec, name, dtype)
        return flat

    def _float_dtype(self) -> torch.dtype:
        """The dtype inputs are cast to: the parameters' (cached until .to()/.double())."""
        p = next((p for p in self.parameters() if p.is_floating_point()), None)
        self._dtype = p.dtype if p is not None else torch.get_default_dtype()
        return self._dtype

    def _apply(self, fn, *a, **k):
        self._dtype = None  # .to()/.double() change the dtype inputs are cast to
        return super()._apply(fn, *a, **k)

    def _translate(self, e: Exception) -> AttnlabError:
        tb = e.__traceback__
        layer = None
        while tb is not None:
            if tb.tb_frame.f_code.co_name == "plan" and self._plan is not None:
                layer = self._plan.line_layers.get(tb.tb_lineno, layer)
            tb = tb.tb_next
        where_ = f"layer '{layer}': " if layer else ""
        kind = "a token id is outside the embedding's vocabulary" if isinstance(e, IndexError) \
            else "the computation failed"
        return DataError(f"{where_}{kind}: {e}. Check that the data fits the network "
                         "(print(net.analyze()) shows the sizes each layer expects).")

    def stream(self, static_inputs=None, **kw):
        """Step-wise execution (Trax `mode='predict'`): `s.step(x)` takes the next t ≥ 1 steps of
        the streamed inputs and returns exactly what the full forward gives at those steps."""
        from .stream import stream
        return stream(self, static_inputs, **kw)

    @torch.no_grad()
    def predict(self, *args, batch_size: int = 128, **kwargs):
        """Outputs in eval mode without gradients, in mini-batches. Sequence outputs of a list of
        variable-length sequences come back as a list of each sequence's valid steps."""
        from .batching import predict
        return predict(self, args, kwargs, batch_size)

    # ---------------------------------------------------------------- pictures, io -----
    def save(self, path) -> None:
        """One file: the graph as JSON and the weights as safetensors (no pickle)."""
        from .io import save
        save(self, path)

    def export_onnx(self, path, example_inputs=None, **kw):
        """An ONNX file with dynamic batch and sequence lengths and, per sequence input, a bool
        `<input>_mask` input (True = real step), checked with onnxruntime; returns an
        `OnnxExport` (input and output names, largest difference from PyTorch). See
        `attnlab.onnx_export.export_onnx` for the options."""
        from .io import export_onnx
        return export_onnx(self, path, example_inputs, **kw)

    def plot(self, path=None, **kw):
        from .viz.graph import plot_network
        return plot_network(self, path, **kw)

    def to_dot(self) -> str:
        from .viz.graph import to_dot
        return to_dot(self)

    def _repr_png_(self):           # Jupyter: a network displays as its picture
        from .viz.graph import network_png
        return network_png(self)

    def _repr_svg_(self):
        from .viz.graph import network_svg
        return network_svg(self)

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_plan"] = None  # generated code is rebuilt on the next call
        return state


# ------------------------------------------------------------------------- helpers ---

def _fmt(layer, name, port, side):
    ports = layer.output_ports if side == "output" else layer.input_ports
    return name if len(ports) == 1 else f"{name}/{port}"


def _fresh(stem, taken, first_plain=False):
    if first_plain and stem not in taken:
        return stem
    i = 1
    while f"{stem}_{i}" in taken:
        i += 1
    return f"{stem}_{i}"


def _flat_learnables(analysis):
    return {f"{n}/{p}": s for n, params in analysis.learnables.items() for p, s in params.items()}
