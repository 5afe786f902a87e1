"""The layers' torch modules of a network: built when the sizes are known, sized from a state
dict for a lazy network, and moved with the network.

A network whose input sizes are known builds its layer modules on first need: the first call,
or the first `parameters()`, `state_dict()`, `to()`, `train()`/`eval()`, …, so PyTorch habits
(optimizer before the first call, `net.eval()` then `net(x)`) hold. A network without input
layers stays lazy until `initialize(example_inputs)` or its first call, like `LazyLinear`;
`load_state_dict` (its own or a parent module's) builds it from the state dict's shapes. Until
then its `parameters()` are the ones known so far (none), whoever asks, as torch's lazy modules
answer; the first such question warns once that an optimizer made from them would train
nothing, and `al.train` sizes the network from its data (or refuses) before it builds one.
`ModuleHost` holds this for `attnlab.network.Network`.
"""
from __future__ import annotations

import warnings
from typing import Any, Iterator, cast

import torch
from torch import nn

from attnlab.graph.analysis import Analysis, analyze as _analyze
from attnlab.core.errors import ArgumentError, AttnlabError, NetworkError, SizeError
from attnlab.graph import LAYER_AUTHOR_HELPERS, Graph
from attnlab.graph.names import module_path, parse_learnable
from attnlab.layers.base import LAYER_TYPES, Layer
from attnlab.core.spec import Spec

__all__ = ["LayerModules", "ModuleGroup", "ModuleHost"]


class _Edited:
    """A container of a network's modules that counts its edits (`stamp`, one count shared by
    the network's `LayerModules` and all its groups), so that the compiled forward calls the
    module that is there now: one replaced after the network was built (peft's
    `get_peft_model` and `merge_and_unload`, `setattr`, `layer_modules[name] = module`) makes
    the plan be made again at the next call."""

    _stamp: list[int]

    def _edited(self) -> None:
        stamp = self.__dict__.get("_stamp")
        if stamp is not None:
            stamp[0] += 1

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        if name in self.__dict__.get("_modules", ()):
            self._edited()

    def __delattr__(self, name: str) -> None:
        mine = name in self.__dict__.get("_modules", ())
        super().__delattr__(name)
        if mine:
            self._edited()

    def add_module(self, name: str, module: nn.Module | None) -> None:
        super().add_module(name, module)            # type: ignore[misc]
        self._edited()


class ModuleGroup(_Edited, nn.Module):
    """A container that dotted layer names make under `Network.layer_modules`: the module of
    layer 'h.0.attn' sits in group 'h', in its group '0', as in a Hugging Face model
    (`graph.names.module_path`). It holds modules and groups, nothing of its own, and is never
    called."""

    def __init__(self, stamp: list[int]) -> None:
        super().__init__()
        self._stamp = stamp


class LayerModules(_Edited, nn.ModuleDict):
    """The built modules by layer name. A layer's module sits at its name's module path
    (`graph.names.module_path`): 'h.0.attn' in the groups 'h' and '0', so `named_parameters()`,
    `state_dict()` and `get_submodule` spell it `layer_modules.h.0.attn`; every lookup here
    takes the layer's own name, and iterating gives the layers, never the groups."""

    def __init__(self) -> None:
        super().__init__()
        self._stamp = [0]

    def _slot(self, name: str, make: bool = False) -> tuple[nn.Module, str] | None:
        """The container that holds (or will hold, with `make`) the module of layer `name`,
        and its key there; None when the path is not there."""
        *groups, last = module_path(name)
        at: nn.Module = self
        for i, part in enumerate(groups):
            inner = at._modules.get(part)
            if inner is None and make:
                inner = ModuleGroup(self._stamp)
                at.add_module(part, inner)
            if not isinstance(inner, ModuleGroup):
                if inner is not None and make:     # Graph.add refuses such names first
                    raise NetworkError(f"layer '{name}': layer_modules."
                                       f"{'.'.join(groups[:i + 1])} holds a layer's module, not "
                                       "a container. Rename one of the two layers.")
                return None
            at = inner
        return at, last

    def __getitem__(self, name: str) -> nn.Module:
        slot = self._slot(name) if isinstance(name, str) else None
        module = slot[0]._modules.get(slot[1]) if slot is not None else None
        if module is None or isinstance(module, ModuleGroup):
            raise KeyError(name)
        return module

    def __setitem__(self, name: str, module: nn.Module) -> None:
        at, last = cast(tuple, self._slot(name, make=True))
        if isinstance(at._modules.get(last), ModuleGroup):
            raise NetworkError(f"layer '{name}': layer_modules.{name} is the container of other "
                               "layers' modules. Rename one of them.")
        at.add_module(last, module)

    def __delitem__(self, name: str) -> None:
        self[name]                                  # a KeyError when it is not there
        path = module_path(name)
        chain: list[nn.Module] = [self]
        for part in path[:-1]:
            chain.append(cast(nn.Module, chain[-1]._modules[part]))
        del chain[-1]._modules[path[-1]]
        for holder, part, group in zip(reversed(chain[:-1]), reversed(path[:-1]),
                                       reversed(chain[1:])):
            if group._modules:
                break
            del holder._modules[part]                # an empty group goes with its last layer
        self._edited()

    def __contains__(self, name) -> bool:
        try:
            self[name]
        except KeyError:
            return False
        return True

    def _walk(self, at: nn.Module | None = None, prefix: str = "") -> Iterator[tuple[str, nn.Module]]:
        for key, m in (self if at is None else at)._modules.items():
            if isinstance(m, ModuleGroup):
                yield from self._walk(m, f"{prefix}{key}.")
            elif m is not None:
                yield prefix + key, m

    def __len__(self) -> int:
        return sum(1 for _ in self._walk())

    def keys(self):
        return [n for n, _ in self._walk()]

    def items(self):
        return list(self._walk())

    def values(self):
        return [m for _, m in self._walk()]

    def __iter__(self):
        return iter(self.keys())

    def clear(self) -> None:
        self._modules.clear()
        self._edited()


class ModuleHost(nn.Module, Graph):
    """A graph that is a `torch.nn.Module` holding its layers' modules (`layer_modules`), built
    when the sizes are known. `attnlab.network.Network` adds the plan and running."""

    # a layer name's part that one of these containers has as an attribute would be shadowed
    _reserved_parts = frozenset(dir(LayerModules())) | frozenset(dir(ModuleGroup([0])))
    _layers: dict[str, Layer]
    _plan: Any
    _built: dict[str, tuple]
    _data_specs: dict[str, Spec] | None
    _dtype: torch.dtype | None
    _target: tuple | None
    _build_tried: bool
    _lazy_warned: bool
    _from_state: set[str]

    def _finish(self, analysis: Analysis, specs: dict[str, Spec] | None) -> Any:
        """Builds the modules and compiles the plan (the Network does)."""
        raise NotImplementedError

    @property
    def data_specs(self) -> dict[str, Spec] | None:
        """The input sizes taken from data (a network without input layers that has run, been
        initialised or been loaded), by input name; None for a network with input layers or
        before its sizes are known."""
        return self._data_specs

    def __dir__(self):
        # a network is a layer, but the helpers for writing layer kinds are not its API
        return sorted(n for n in super().__dir__() if n not in LAYER_AUTHOR_HELPERS)

    def _forget(self, name):
        self._built.pop(name, None)
        mods = cast(LayerModules, self._modules["layer_modules"])
        if name in mods:
            del mods[name]
    # -- the modules, built when the sizes are known ------------------------------------------
    @property
    def layer_modules(self) -> LayerModules:
        """The layers' torch modules by layer name (built first if the sizes are known)."""
        self._ensure_built()
        return cast(LayerModules, self._modules["layer_modules"])

    @layer_modules.setter
    def layer_modules(self, value):
        nn.Module.__setattr__(self, "layer_modules", value)

    def _has_input_layers(self) -> bool:
        return any(l.is_input for l in self._layers.values())

    def _ensure_built(self) -> None:
        """Builds modules and plan once the sizes are known; quiet when they are not (a lazy
        network warns once that it has no parameters yet)."""
        d = self.__dict__
        if d.get("_plan") is not None or d.get("_build_tried", True):
            return
        self._build_tried = True
        specs = self._data_specs if not self._has_input_layers() else None
        if specs is None and not self._has_input_layers():
            specs = self._nested_input_specs()
            if specs is None:
                return
        analysis = _analyze(self, specs)
        if analysis.ok:
            self._finish(analysis, specs)

    def _nested_input_specs(self) -> dict[str, Spec] | None:
        """Sizes of a network without input layers whose every open port is an input layer of a
        nested network (so the sizes are known after all); else None."""
        specs = {}
        for name in self.input_names:
            lname, port = self.port_of(name)
            layer = self._layers[lname]
            inner: Any = layer.layer_map.get(port) if isinstance(layer, Graph) else None
            if inner is None or not inner.is_input:
                return None
            specs[name] = inner.spec
        return specs or None

    def _warn_lazy(self):
        """Once per network, whoever asks: a network of unknown sizes has no parameters yet."""
        if not self._lazy_warned and self._sizes_unknown():
            self._lazy_warned = True
            warnings.warn("this network has no input layers and has not run yet, so its sizes, and "
                          "with them its parameters, are not known: its parameter list is empty "
                          "for now (an optimizer made from it would train nothing). Call "
                          "net.initialize(example_inputs) (or run it once) before making an "
                          "optimizer or moving it, or start the network with an input layer, e.g. "
                          "L.SequenceInput(3).", UserWarning, stacklevel=3)

    def _sizes_unknown(self) -> bool:
        """True for a network without input layers that has no modules yet and no way to size
        them (it has neither run nor been initialised): its parameter list is empty."""
        return (self._plan is None and bool(self._layers) and not self._has_input_layers()
                and not len(cast(LayerModules, self._modules["layer_modules"]))
                and self._data_specs is None and self._nested_input_specs() is None)

    def parameters(self, recurse: bool = True) -> Iterator[nn.Parameter]:
        """torch's `parameters()`, after building the modules if the sizes are known; for a
        network of unknown sizes, the parameters known so far (none), with a warning once."""
        self._ensure_built()
        self._warn_lazy()
        return super().parameters(recurse)

    def named_parameters(self, *a: Any, **k: Any) -> Iterator[tuple[str, nn.Parameter]]:
        """As `parameters()`, with names."""
        self._ensure_built()
        self._warn_lazy()
        return super().named_parameters(*a, **k)

    def named_buffers(self, *a: Any, **k: Any) -> Iterator[tuple[str, torch.Tensor]]:
        self._ensure_built()
        return super().named_buffers(*a, **k)

    def named_children(self) -> Iterator[tuple[str, nn.Module]]:
        self._ensure_built()
        return super().named_children()

    def named_modules(self, *a: Any, **k: Any) -> Iterator[tuple[str, nn.Module]]:
        self._ensure_built()
        return super().named_modules(*a, **k)

    def state_dict(self, *a: Any, **k: Any) -> dict[str, Any]:  # type: ignore[override]
        self._ensure_built()
        self._warn_lazy()
        return super().state_dict(*a, **k)

    def load_state_dict(self, *a: Any, **k: Any) -> Any:
        self._ensure_built()
        return super().load_state_dict(*a, **k)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        """Called by torch's `load_state_dict` (this network's or a parent module's) before it
        loads the layers' modules: a lazy network builds its modules from the state dict's
        shapes first, as torch's Lazy modules do, and sizes that do not fit are a SizeError
        naming the layer, the learnable and both shapes."""
        self._ensure_built()
        mods = cast(LayerModules, self._modules["layer_modules"])
        if not len(mods) and self._layers and not self._has_input_layers() and \
                any(k.startswith(prefix + "layer_modules.") for k in state_dict):
            self._build_from_state(state_dict, prefix)
        self._check_state_sizes(state_dict, prefix)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)

    def _check_state_sizes(self, state_dict, prefix):
        from attnlab.io import _friendly
        mine = nn.Module.state_dict(self, keep_vars=True)
        bad = []
        for key, t in mine.items():
            given = state_dict.get(prefix + key)
            if isinstance(given, torch.Tensor) and isinstance(t, torch.Tensor) and \
                    tuple(given.shape) != tuple(t.shape):
                name = _friendly(self, key)
                layer, param = parse_learnable(name)
                kind = "learnable" if isinstance(t, nn.Parameter) else "buffer"
                bad.append((layer, f"layer '{layer}' {kind} '{param}': expected "
                                   f"{_dims(t.shape)} (the network's), received "
                                   f"{_dims(given.shape)} (the state dict's)"))
        if bad:
            listing = "; ".join(b for _, b in bad[:6]) + (f"; and {len(bad) - 6} more" if len(bad) > 6 else "")
            err = SizeError(f"load_state_dict: {len(bad)} tensor(s) do not fit the network: "
                            f"{listing}. The state dict was saved from a network of other sizes: "
                            "build this one with the same sizes (layer arguments and input "
                            "channels), or leave those keys out and load with strict=False.")
            err.layer, err.port = bad[0][0], None
            raise err

    def _build_from_state(self, state_dict, prefix):
        """The modules of a network without input layers, sized from a state dict: the input
        sizes whose learnables have exactly the state dict's shapes. When several fit (a Dense
        takes B×C and B×T×C alike) the modules are built and the first call's data chooses
        among them; when none does, a NetworkError says to initialise with example inputs."""
        from attnlab.graph.analysis import flat_learnables
        from attnlab.io import _friendly
        shapes = {_friendly(self, k[len(prefix):]): tuple(v.shape) for k, v in state_dict.items()
                  if k.startswith(prefix) and isinstance(v, torch.Tensor)}
        fits = []
        for specs in _candidate_specs(self.input_names, shapes):
            analysis = _analyze(self, specs)
            if not analysis.ok:
                continue
            learn = flat_learnables(analysis)
            if learn and all(shapes.get(k) == tuple(s) for k, s in learn.items()):
                fits.append((specs, analysis))
        if not fits:
            raise NetworkError(
                "load_state_dict: this network has no input layers and has not run yet, and no "
                "input size makes its learnables match the state dict's shapes, so it cannot "
                "be built to receive them. Call net.initialize(example_inputs) first, with data "
                "of the sizes it was trained on (e.g. net.initialize(torch.zeros(1, 10, 3))).")
        specs, analysis = fits[0]
        with torch.random.fork_rng(devices=[]):   # loading must not move the caller's RNG
            if len(fits) == 1:
                self._finish(analysis, specs)
            else:
                self._build_modules(analysis)
                self._build_tried = True
        _mark_loaded(self)

    def to(self, *args: Any, **kwargs: Any) -> Any:
        """`torch.nn.Module.to`: moves and/or casts the parameters and buffers. A device this
        torch build or machine lacks (CUDA on a CPU-only build, a CUDA index past the last GPU,
        MPS off a Mac) is an `ArgumentError` naming it and the devices there are."""
        try:
            device = torch._C._nn._parse_to(*args, **kwargs)[0]
        except (TypeError, RuntimeError, ValueError):
            device = None                     # torch's own message, from super().to below
        if device is not None:
            _check_device(device, f"net.to({_show_args(args, kwargs)})")
        return super().to(*args, **kwargs)

    def cuda(self, device: Any = None) -> Any:
        """`torch.nn.Module.cuda`, with the device checked as `to` checks it."""
        if isinstance(device, torch.device):
            dev = device
        elif isinstance(device, int) and not isinstance(device, bool):
            dev = torch.device("cuda", device)
        else:
            dev = torch.device("cuda") if device is None else torch.device(device)
        _check_device(dev, "net.cuda()" if device is None else f"net.cuda({device!r})")
        return super().cuda(device)

    def __prepare_scriptable__(self):
        """torch.jit.script calls this first: say plainly that TorchScript is not supported."""
        raise NetworkError(
            "torch.jit.script(net): TorchScript cannot compile an attnlab Network (its forward is "
            "Python generated per graph, taking inputs by position or by input name and padding "
            "masks beside them). Use torch.compile(net) for speed (or compile=True in al.train "
            "and net.predict), torch.jit.trace(net.eval(), example_inputs) for a TorchScript "
            "graph of fixed structure, or net.export_onnx(path) to run it outside Python.")

    def _apply(self, fn, *a, **k):
        self._ensure_built()
        # remember where and in which dtype modules built later belong
        probe = fn(torch.empty(0))
        self._target = (probe.dtype, probe.device)
        self._dtype = None  # .to()/.double() change the dtype inputs are cast to
        return super()._apply(fn, *a, **k)

    def _built_module(self, name, layer, specs):
        """The module already built for this layer at these sizes, or None (analysis reads its
        learnables from it instead of building one on the meta device)."""
        built = self._built.get(name)
        mods = cast(LayerModules, self._modules["layer_modules"])
        if built is not None and built[0] is layer and built[1] == specs and name in mods:
            return mods[name]
        return None

    def _build_modules(self, analysis: Analysis):
        mods = cast(LayerModules, self._modules["layer_modules"])
        ref = next((p for m in mods.values() for p in m.parameters()), None)
        dtype, device = (ref.dtype, ref.device) if ref is not None else self._target or (None, None)
        for name in analysis.order:
            layer = self._layers[name]
            specs = analysis.in_specs[name]
            if self._built_module(name, layer, specs) is not None:
                continue
            if name in self.__dict__.get("_from_state", ()) and name in mods:
                self._keep_loaded(name, layer, specs, mods[name])
                continue
            mod = layer.build(specs)
            if device is not None:
                mod = mod.to(device=device, dtype=dtype if dtype is not None and dtype.is_floating_point
                             else None)
            mod.train(self.training)             # a module takes the network's mode when built
            mods[name] = mod
            self._built[name] = (layer, specs)
        for name in list(mods.keys()):
            if name not in self._layers:
                del mods[name]

    def _keep_loaded(self, name, layer, specs, mod):
        """A module whose weights came from a state dict before the sizes were known stays, if
        these sizes build the same module; else a NetworkError (never replace loaded weights)."""
        if isinstance(layer, Graph):    # a nested network: it rebuilds itself by these rules
            layer.build(specs)
            self._built[name] = (layer, specs)
            self._from_state = self._from_state - {name}
            return
        fresh, why = None, ""
        try:
            with torch.device("meta"):
                fresh = layer.build(specs)
        except (AttnlabError, RuntimeError, ValueError, TypeError) as e:
            why = str(e)
        if fresh is None or not _same_structure(mod, fresh):
            sizes = ", ".join(f"{p}: {s}" for p, s in specs.items())
            raise NetworkError(
                f"layer '{name}': its weights were loaded from a state dict, and the data now "
                f"given ({sizes}) needs a module of other sizes{': ' + why if why else ''}. Call the "
                "network with data of the sizes it was trained on, or call net.initialize("
                "example_inputs) before load_state_dict.")
        self._built[name] = (layer, specs)
        self._from_state = self._from_state - {name}


LAYER_TYPES.pop("ModuleHost", None)   # saved and loaded as a Network, never on its own


def _dims(shape) -> str:
    return "×".join(map(str, shape)) or "scalar"


def _candidate_specs(names, shapes, limit: int = 256):
    """Input specs to try for a lazy network's inputs: B×C and B×T×C with each size that
    occurs in the state dict's tensors (at most `limit` combinations)."""
    import itertools
    sizes = sorted({d for s in shapes.values() for d in s if d > 0})
    one = [Spec(labels, (None,) * (len(labels) - 1) + (c,)) for c in sizes for labels in ("BC", "BTC")]
    if not names or len(one) ** len(names) > limit:
        return
    for combo in itertools.product(one, repeat=len(names)):
        yield dict(zip(names, combo))


def _check_device(device: torch.device, what: str) -> None:
    """A device this torch build or machine lacks, as an ArgumentError (torch raises a bare
    AssertionError for CUDA on a CPU-only build)."""
    from attnlab.core.precision import DEVICES, _mps_available, machine_devices
    choices = ", ".join(map(repr, DEVICES))
    if device.type == "cuda":
        if not torch.cuda.is_available():
            why = (f"this torch build ({torch.__version__}) has no CUDA" if torch.version.cuda is None
                   else f"torch {torch.__version__} is built for CUDA {torch.version.cuda}, but no "
                        "GPU or driver is visible")
            raise ArgumentError(
                f"{what}: cannot move the network to device '{device}': {why}. This machine has: "
                f"{machine_devices()}. Keep it on the CPU (net.to('cpu')), or install a CUDA build "
                "of torch on a machine with a GPU; al.train, predict and stream take "
                f"device= {choices} and pick what is there with 'auto'.")
        count = torch.cuda.device_count()
        if device.index is not None and device.index >= count:
            raise ArgumentError(f"{what}: cannot move the network to device '{device}': this "
                                f"machine has {count} CUDA device(s), cuda:0 … cuda:{count - 1}.")
    elif device.type == "mps" and not _mps_available():
        raise ArgumentError(
            f"{what}: cannot move the network to device 'mps': Apple's MPS backend is not "
            f"available here (it needs an Apple-silicon Mac and a torch built with MPS). This "
            f"machine has: {machine_devices()}. Use net.to('cpu'); al.train, predict and stream "
            f"take device= {choices}.")


def _show_args(args, kwargs) -> str:
    parts = [repr(str(a)) if isinstance(a, torch.device) else repr(a) for a in args]
    parts += [f"{k}={v!r}" for k, v in kwargs.items()]
    return ", ".join(parts)[:80]


def _same_structure(a: nn.Module, b: nn.Module) -> bool:
    """Whether two modules compute alike: the same classes, tensor names and shapes, and the
    same plain attributes (e.g. nn.Linear's sizes, an Embedding's squeeze flag)."""
    if type(a) is not type(b):
        return False
    sa = {k: tuple(v.shape) for k, v in a.state_dict(keep_vars=True).items()}
    sb = {k: tuple(v.shape) for k, v in b.state_dict(keep_vars=True).items()}
    if sa != sb:
        return False
    ma, mb = dict(a.named_modules()), dict(b.named_modules())
    if ma.keys() != mb.keys():
        return False
    for k, m in ma.items():
        n = mb[k]
        if type(m) is not type(n):
            return False
        plain = lambda mod: {key: v for key, v in vars(mod).items()      # noqa: E731
                             if not key.startswith("_") and key != "training"
                             and not isinstance(v, (torch.Tensor, nn.Module))}
        try:
            if plain(m) != plain(n):
                return False
        except (RuntimeError, ValueError, TypeError):   # attributes that do not compare
            return False
    return True


def _mark_loaded(net) -> None:
    """Marks the modules of `net` and of its nested networks as loaded from a state dict."""
    net._from_state = set(net._layers)
    for mod in cast(LayerModules, net._modules["layer_modules"]).values():
        if isinstance(mod, ModuleHost):
            _mark_loaded(mod)
