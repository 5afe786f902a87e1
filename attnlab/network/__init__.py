"""The Network: a `Graph` that is a `torch.nn.Module`, with its compiled plan and running.

Editing (`add`, `connect`, …) lives in attnlab.graph and never runs tensors; building the
layers' modules (lazily, from a state dict, moved with `to()`) in attnlab.network.modules.
Here: analysis and initialisation, the compiled forward, the network used as a layer, and the
doors to the engines (stream, predict, save, ONNX, pictures).
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch
from torch import nn

from attnlab.graph.analysis import Analysis, analyze as _analyze
from attnlab.core.batching import as_batch, id_inputs, input_problem, unknown_inputs
from attnlab.graph.codegen import layer_at
from attnlab.core.errors import AttnlabError, DataError, NetworkError, SizeError, close_matches
from attnlab.graph import Connection, Graph, LayerList
from attnlab.graph.names import parse_port, under_layer
from attnlab.layers.base import Layer
from attnlab.layers.tying import tie_modules
from attnlab.network import freezing
from attnlab.network.modules import LayerModules, ModuleHost
from attnlab.graph.plan import Plan, build_plan
from attnlab.core.sequences import (Padded, follows_hugging_face, hugging_face_inputs,
                                    hugging_face_positional, positional_order,
                                    pad_sequences)
from attnlab.core.spec import Spec, spec_of_tensor_shape

if TYPE_CHECKING:                  # for annotations only: these modules sit below this one
    from matplotlib.figure import Figure

    from attnlab.io.onnx.export import OnnxExport
    from attnlab.stream.core import Stream

__all__ = ["Network", "Connection", "LayerList"]


# the front end that writes a network from `al.from_pretrained` back in its own layout
_HUGGING_FACE_LAYOUT = "attnlab.pretrained"

class Network(ModuleHost):
    """A graph of named layers joined port to port. Call it with inputs by position (in
    `input_names` order) or as a dict by input name; several outputs come back as a dict."""

    stem = "network"
    uses_mask = True
    returns_mask = True

    def __init__(self, layers: Layer | list | None = None, name: str | None = None):
        nn.Module.__init__(self)
        Graph.__init__(self, name)
        self.layer_modules = LayerModules()
        self._built: dict[str, tuple] = {}
        self._plan: Plan | None = None
        # the modules' edits (shared with layer_modules) and their count when the plan was made
        self._edits: list[int] = cast(LayerModules, self._modules["layer_modules"])._stamp
        self._made = -1
        self._data_specs: dict[str, Spec] | None = None
        self._dtype: torch.dtype | None = None
        self._target: tuple | None = None        # (dtype, device) of the last .to()/.double()/…
        self._build_tried = False
        self._lazy_warned = False
        self._from_state: set[str] = set()       # layers whose modules a state dict sized
        self._as_layer: dict = {}                # input specs → Analysis, for use as a layer
        self.metadata: dict = {}     # saved with the network (JSON): e.g. "class_labels"
        if layers is not None:
            self.add(layers)

    # -- edits (attnlab.graph) drop what they invalidate ------------------------------------
    def _changed(self):
        self._plan = None
        self._data_specs = self._data_specs if not self._has_input_layers() else None
        self._build_tried = False
        self._as_layer = {}

    def train(self, mode: bool = True) -> Network:
        self._ensure_built()
        return super().train(mode)

    @property
    def learnables(self) -> dict[str, nn.Parameter]:
        """'layer/param' → Parameter (after initialisation; nested networks' flattened)."""
        out = {}
        mods = self.layer_modules
        for name in self._layers:
            if name not in mods:
                continue
            mod = mods[name]
            if isinstance(mod, Network):
                out.update(under_layer(name, mod.learnables))
            else:
                out.update(under_layer(name, dict(mod.named_parameters())))
        return out

    def freeze(self, *patterns: str) -> list[str]:
        """Stops training the learnables matching any `fnmatch` pattern (``"h.*.attn/*"``,
        ``"wte/weight"``, or a layer name alone for all its learnables); returns the sorted
        names frozen, tied ones included. A pattern matching nothing is an ArgumentError."""
        return freezing.set_trainable(self, patterns, False)

    def unfreeze(self, *patterns: str) -> list[str]:
        """Trains again the learnables matching the patterns (as `freeze`); returns their names."""
        return freezing.set_trainable(self, patterns, True)

    @property
    def initialized(self) -> bool:
        """True once the modules and parameters exist (see `initialize`)."""
        return self._plan is not None

    # -------------------------------------------------------------------- analysis -----
    def analyze(self, *example_inputs: Any, **named: Any) -> Analysis:
        """Checks the graph and infers every activation's size; never raises for a bad graph.

        Parameters
        ----------
        *example_inputs, **named
            Only for a network without input layers: data whose sizes to use (by position or
            by input name). Without them the sizes come from the input layers, or from the data
            of the last call.

        Returns
        -------
        Analysis
            Printable as a table (layer, type, activation sizes, learnables); `issues`, `ok`.
        """
        specs = self._specs_from_data(example_inputs, named) if (example_inputs or named) \
            else self._data_specs if self._data_specs is not None else self._nested_input_specs()
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

    def summary(self) -> str:
        """The analysis table, as Keras' `summary()` prints it."""
        text = self.analyze().table()
        print(text)
        return text

    # ------------------------------------------------------------------ initialising ---
    def initialize(self, *example_inputs: Any, **named: Any) -> Network:
        """Builds every layer's modules and parameters, as MATLAB's `initialize(net, X)`.

        Parameters
        ----------
        *example_inputs, **named
            For a network without input layers: data giving the sizes (by position or by input
            name). A network with input layers needs none.

        Returns
        -------
        Network
            The network itself.

        Raises
        ------
        NetworkError
            Listing every issue of the analysis, when there are errors.
        """
        self._prepare(example_inputs, named)
        return self

    @torch.compiler.disable
    def _prepare(self, args=(), kwargs=None) -> Plan:
        specs = None
        if not self._has_input_layers() and self._layers:
            if args or kwargs:
                specs = self._specs_from_data(args, kwargs)
            elif self._data_specs is not None:
                specs = self._data_specs
            else:
                specs = self._nested_input_specs()
                if specs is None:
                    raise NetworkError("this network has no input layers, so its sizes come from "
                                       "data: call it (or initialize) with example inputs first.")
        return self._compile(specs)

    @torch.compiler.disable
    def _replan(self) -> Plan:
        """The plan made again, at the sizes it had, after a module in `layer_modules` was
        replaced (peft's LoRA wrappers, an assignment): it calls the modules there now."""
        self._plan = None
        return self._compile(self._data_specs)

    def _compile(self, specs) -> Plan:
        """Analyse with these input sizes, build what is missing, generate the forward."""
        analysis = _analyze(self, specs)
        analysis.raise_if_errors("initialize", f"network '{self.name}'" if self.name else "the network")
        return self._finish(analysis, specs)

    def _build_modules(self, analysis):
        super()._build_modules(analysis)
        # layers declared tied_to another hold its weight Parameter (made again after rebuilds)
        tie_modules(self._layers, cast(LayerModules, self._modules["layer_modules"]))

    def _finish(self, analysis, specs) -> Plan:
        self._build_tried = True          # build_plan reads layer_modules: don't build twice
        self._build_modules(analysis)
        self._plan = build_plan(self, analysis)
        self._made = self._edits[0]
        self._data_specs = specs
        self._set_io(analysis)
        self._dtype = None
        return self._plan

    def _set_io(self, analysis):
        self._in_names = self.input_names
        self._out_names = self.output_names
        self._input_specs = [self._input_spec(n, analysis) for n in self._in_names]
        # (labels, [(dim, size) to check]) per input: every known size but the batch
        self._input_checks = [(s.labels, [(i, n) for i, n in enumerate(s.sizes) if i and n is not None])
                              for s in self._input_specs]
        self._input_ids = id_inputs(self)     # per input: token ids, never cast to the float dtype

    def _input_spec(self, name, analysis):
        layer_name, port = self.port_of(name)
        layer: Any = self._layers[layer_name]      # an input layer has .spec
        if layer.is_input:
            return layer.spec
        return analysis.in_specs[layer_name][port]

    # -- what the engines read of the compiled inputs (after initialisation) -----------------
    @property
    def input_specs(self) -> dict[str, Spec]:
        """Each input's spec by input name, as the forward pass checks it (initialises the
        network first if it is not)."""
        if self._plan is None:
            self._prepare()
        return dict(zip(self._in_names, self._input_specs))

    @property
    def token_inputs(self) -> tuple[str, ...]:
        """The inputs whose values are token ids, kept int64 and never cast to `input_dtype`
        (initialises the network first if it is not)."""
        if self._plan is None:
            self._prepare()
        return tuple(n for n, ids in zip(self._in_names, self._input_ids) if ids)

    @property
    def input_dtype(self) -> torch.dtype:
        """The float dtype that inputs are cast to, the parameters' (the default dtype before
        there are any)."""
        return self._dtype or self._float_dtype()

    # ---------------------------------------------------------------- as a layer -------
    @property
    def input_ports(self) -> tuple[str, ...]:
        """The open input ports, as `input_names` (when used as a layer)."""
        return tuple(self.input_names)

    @property
    def output_ports(self) -> tuple[str, ...]:
        """The open output ports, as `output_names` (when used as a layer)."""
        return tuple(self.output_names)

    def analyze_as_layer(self, specs: dict[str, Spec]) -> Analysis:
        """The analysis of this network used as a layer with these input sizes (cached until
        the next edit, so nested networks are analysed once each: linear in the depth)."""
        key = tuple(sorted((n, s, s.computed) for n, s in specs.items()))   # computed: not ids
        cached = self._as_layer.get(key)
        if cached is not None:
            return cached
        given = {}
        for name, spec in specs.items():
            layer: Any = self._layers[parse_port(name)[0]]      # an input layer has .spec
            if layer.is_input:
                if not layer.spec.matches(spec):
                    raise self.error(SizeError, name, f"expected {layer.spec}, received {spec}.")
            else:
                given[name] = spec
        analysis = _analyze(self, given)
        analysis.raise_if_errors("use", f"network '{self.name}' as a layer")
        self._as_layer[key] = analysis
        return analysis

    def infer(self, specs: dict[str, Spec]) -> dict[str, Spec]:
        analysis = self.analyze_as_layer(specs)
        return {o: analysis.out_specs[n][p] for n, p, o in self._dangling_outputs()}

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        self._compile(None if self._has_input_layers() else dict(specs))
        return self

    def config(self) -> dict:
        return {}

    # Hugging Face tools (peft's merge_and_unload) read `model.config` as a model configuration
    # and call its `to_dict()`: a network answers with peft's own stand-in for "no such config"
    config.to_dict = lambda: {"model_type": "custom"}    # type: ignore[attr-defined]

    def __repr__(self):
        return (f"Network({len(self._layers)} layers, inputs={self.input_names}, "
                f"outputs={self.output_names})")

    # ------------------------------------------------------------------- running -------
    def forward(self, *args: Any, _masks: Any = None, **kwargs: Any) -> Any:
        plan = self._plan
        if plan is not None and self._edits[0] != self._made:
            plan = self._replan()
        if _masks is not None:                              # inside another network's plan
            flat = [v for pair in zip(args, _masks) for v in pair]
            built = cast(Plan, plan)                        # the outer plan built this one
            return built.fn(built.mods, *flat)
        if plan is None:
            plan = self._prepare(args, kwargs)
        flat = self._flatten_inputs(args, kwargs)
        try:
            outs, _ = plan.fn(plan.mods, *flat)
        except (RuntimeError, IndexError, ValueError) as e:
            raise self._translate(e, flat[0::2]) from None  # torch's error stays as __context__
        if len(outs) == 1:
            return outs[0]
        return dict(zip(self._out_names, outs))

    def forward_with_masks(self, *args: Any, **kwargs: Any) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor | None]]:
        """(outputs, masks), each a dict by output name; masks are B×T (True = real step) for
        sequence outputs of padded batches, else None."""
        plan = self._plan
        if plan is not None and self._edits[0] != self._made:
            plan = self._replan()
        plan = plan or self._prepare(args, kwargs)
        flat = self._flatten_inputs(args, kwargs)
        try:
            outs, masks = plan.fn(plan.mods, *flat)
        except (RuntimeError, IndexError, ValueError) as e:
            raise self._translate(e, flat[0::2]) from None  # torch's error stays as __context__
        names = self._out_names
        return dict(zip(names, outs)), dict(zip(names, masks))

    def _flatten_inputs(self, args, kwargs):
        names = self._in_names
        if len(args) == 1 and isinstance(args[0], dict) and not kwargs:
            given = args[0]
        elif args and not isinstance(args[0], dict) and self._reads_as_transformers(args, kwargs):
            given = hugging_face_positional(self, args, kwargs, names)
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
            if follows_hugging_face(self):      # attention_mask beside the ids, and the like
                given = hugging_face_inputs(given, names, self.token_inputs)
            if len(given) != len(names) or any(k not in given for k in names):
                raise unknown_inputs(given, names)
            args = [given[k] for k in names]
        dtype = self._dtype or self._float_dtype()
        flat = []
        for x, name, spec, checks, ids in zip(args, names, self._input_specs, self._input_checks,
                                              self._input_ids):
            want = torch.int64 if ids else dtype
            if type(x) is torch.Tensor and x.dtype is want and x.dim() == len(checks[0]) and \
                    x.numel() and all(x.shape[i] == n for i, n in checks[1]):   # the hot path
                flat += [x, None]
            else:
                flat += as_batch(x, spec, name, dtype, ids)
        return flat

    def _reads_as_transformers(self, args, kwargs) -> bool:
        """Whether inputs by position are read in transformers' order (a network from
        `al.from_pretrained`), where that order and the network's own could differ: a
        positional call that means the same either way takes the plain path."""
        if not follows_hugging_face(self):
            return False
        names = self._in_names
        return bool(kwargs) or len(args) != len(names) or \
            positional_order(self, names)[:len(args)] != tuple(names)

    def _float_dtype(self) -> torch.dtype:
        """The dtype inputs are cast to: the parameters' (cached until .to()/.double())."""
        p = next((p for p in nn.Module.parameters(self) if p.is_floating_point()), None)
        target = self._target[0] if self._target and self._target[0].is_floating_point else None
        self._dtype = p.dtype if p is not None else target or torch.get_default_dtype()
        return self._dtype

    def _translate(self, e: Exception, values=()) -> AttnlabError:
        """A torch error while running the plan → a DataError naming the input to blame (a meta
        tensor, one on another device) or the layer whose line failed, with torch's text quoted
        inside; it is raised `from None` by the caller, so this message is the last one read."""
        p = next((p for p in nn.Module.parameters(self)), None)
        blame = input_problem(self._in_names, self._input_specs, values,
                              p.device if p is not None else None)
        if blame is not None:
            return blame
        # the line of this network's own plan (a nested network's line names that layer)
        layer = layer_at(e.__traceback__, (self._plan.filename,)) if self._plan else None
        where_ = f"layer '{layer}' ({self._layers[layer].type_name}): " \
            if layer in self._layers else ""
        text = " ".join(str(e).split())[:500]
        return DataError(f"{where_}running it failed; torch says: {text}. Check that the data fits "
                         "the network: print(net.analyze()) shows the sizes each layer expects.")

    def add_lora(self, targets: str | list[str], rank: int = 8, alpha: float = 16,
                 dropout: float = 0.0) -> list[tuple[str, str | None]]:
        """LoRA adapters on the targets' linear maps ('h.*.attn/query', a Dense layer's name),
        everything else frozen; returns the (layer, projection) adapted (network/lora.py)."""
        from attnlab.network import lora
        return lora.add_lora(self, targets, rank, alpha, dropout)

    def merge_lora(self) -> list[tuple[str, str | None]]:
        """Folds the LoRA adapters into the weights (W + scaling·B·A), removes them and thaws
        what add_lora froze; returns the (layer, projection) merged (network/lora.py)."""
        from attnlab.network import lora
        return lora.merge_lora(self)

    def save_adapter(self, path: str | os.PathLike) -> None:
        """Writes the LoRA adapters in peft's layout (network/lora_files.py)."""
        from attnlab.network import lora_files
        lora_files.save_adapter(self, path)

    def load_adapter(self, path: str | os.PathLike) -> list[tuple[str, str | None]]:
        """Adds the LoRA adapter peft saved in `path` (network/lora_files.py)."""
        from attnlab.network import lora_files
        return lora_files.load_adapter(self, path)

    def trace(self, *args: Any, capture: Any = (), patch: Any = None, **kwargs: Any) -> Any:
        """Runs the network on the inputs (as its forward takes them) and returns a `Trace`:
        `.outputs`, and the values named by the `fnmatch` patterns of `capture` ("layer/port",
        "outer/inner/port"; each attention layer's "layer/query", "layer/key",
        "layer/scores", "layer/heads"), with `patch` (name → tensor, or a function of the
        value) replacing values as they are made (network/tracing.py)."""
        from attnlab.network import tracing
        return tracing.trace(self, args, kwargs, capture, patch)

    def stream(self, static_inputs: dict[str, Any] | None = None, **kw: Any) -> Stream:
        """Step-wise execution (Trax `mode='predict'`): `s.step(x)` takes the next t ≥ 1 steps of
        the streamed inputs and returns exactly what the full forward gives at those steps."""
        from attnlab.stream import stream
        return stream(self, static_inputs, **kw)

    @torch.no_grad()
    def predict(self, *args: Any, batch_size: int = 128, **kwargs: Any) -> Any:
        """Outputs in eval mode, without gradients, in mini-batches (the mode is restored after).

        Parameters
        ----------
        *args
            The inputs, as for calling the network: by position or (in `**kwargs`) by input
            name; tensors, arrays, lists of variable-length sequences or `al.Padded`.
        batch_size : int
            Observations per forward pass.
        **kwargs
            Inputs by name, and the options `device` (where to compute; None: where the network
            is), `precision` ("fp32", "bf16", "fp16", "auto": autocast, outputs in float32) and
            `compile` (torch.compile the forward; eager with a warning when it cannot).

        Returns
        -------
        tensor, list or dict
            One output: a tensor (a list of each sequence's valid steps when the inputs were a
            list of sequences); several: a dict by output name. On the CPU unless the inputs
            were CUDA/MPS tensors.
        """
        from attnlab.core.batching import predict
        return predict(self, args, kwargs, batch_size)

    # ---------------------------------------------------------------- pictures, io -----
    def save(self, path: str | os.PathLike) -> None:
        """One file: the graph as JSON and the weights as safetensors (no pickle)."""
        from attnlab.io import save
        from attnlab.network.lora import refuse_adapters
        refuse_adapters(self, "net.save")
        save(self, path)

    def save_pretrained(self, path: str | os.PathLike, dtype: torch.dtype | None = None) -> None:
        """For a network from `al.from_pretrained`: its Hugging Face folder (config.json and
        model.safetensors, the original tensor names, dtypes and shapes); see
        `attnlab.pretrained.save_pretrained`."""
        # the Hugging Face layout is a front end's (attnlab.pretrained, a level above the
        # network): reached by name when called, as `attnlab.from_pretrained` is, so that the
        # network never imports a front end
        import importlib
        from attnlab.network.lora import refuse_adapters
        refuse_adapters(self, "net.save_pretrained")
        importlib.import_module(_HUGGING_FACE_LAYOUT).save_pretrained(self, path, dtype)

    def export_onnx(self, path: str | os.PathLike, example_inputs: Any = None, **kw: Any) -> OnnxExport:
        """An ONNX file with dynamic batch and sequence lengths and, per sequence input, a bool
        `<input>_mask` input (True = real step), checked with onnxruntime; returns an
        `OnnxExport` (input and output names, largest difference from PyTorch). See
        `attnlab.io.onnx.export.export_onnx` for the options."""
        from attnlab.io.onnx.export import export_onnx
        return export_onnx(self, path, example_inputs, **kw)

    def plot(self, path: str | os.PathLike | None = None, **kw: Any) -> Figure:
        """A picture of the graph (a matplotlib figure), saved to `path` when given.

        Options (`direction="TB"|"LR"`, `sizes=True`): see :doc:`/pictures`."""
        from attnlab.viz.graph import plot_network
        return plot_network(self, path, **kw)

    def to_dot(self) -> str:
        """The graph in Graphviz's DOT language (text; no Graphviz needed to make it)."""
        from attnlab.viz.graph import to_dot
        return to_dot(self)

    def view(self, path: str | os.PathLike | None = None, **kw: Any) -> Any:
        """The interactive page of the network (graph, analysis, attention); see
        `attnlab.viz.view.view` for the options."""
        from attnlab.viz.view import view
        return view(self, path, **kw)

    def _repr_html_(self):          # Jupyter: the same page as `attnlab view`
        from attnlab.viz.view import notebook_html
        return notebook_html(self)

    def _repr_png_(self):           # a network displays as its picture where HTML is not shown
        from attnlab.viz.graph import network_png
        return network_png(self)

    def _repr_svg_(self):
        from attnlab.viz.graph import network_svg
        return network_svg(self)

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_plan"] = None  # generated code is rebuilt on the next call
        return state

