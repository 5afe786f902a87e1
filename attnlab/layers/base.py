"""The layer base: a small description with ports, a size rule and a module factory.

A layer holds hyperparameters only. `infer` maps the specs arriving at its input ports to the
specs of its outputs (raising SizeError/FormatError that name the layer and port); `build` makes
the torch module that computes it. Modules return one tensor per output port (a tuple when
there are several). A layer that reads the padding masks sets `uses_mask`; its module then gets
`masks=` (one mask or None per input port, True = valid step). A layer that changes the time
axis sets `returns_mask`; its module returns `(outputs, masks)`.

A layer is also callable on tensors, as a Keras layer is: `L.Dense(4)(x)` infers the input
specs from the tensors' shapes, builds the module on the first call, keeps it as
`layer.module` and reuses it on later calls.
"""
from __future__ import annotations

import functools
import inspect
import unicodedata
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterable, TypeVar

import torch
from torch import nn

from attnlab.core import calls
from attnlab.core.errors import (ArgumentError, AttnlabError, DataError, FormatError, NetworkError,
                                 SignatureError, SizeError, close_matches, where)
from attnlab.core.spec import Spec, spec_of_tensor_shape

LAYER_TYPES: dict[str, type["Layer"]] = {}

_E = TypeVar("_E", bound=AttnlabError)

MAX_NAME_LENGTH = 200


def check_name(name):
    """A layer name: a non-empty printable string without '/', at most MAX_NAME_LENGTH long.
    Names are data: they never enter generated code, so these rules are for the people who read
    them (tables, pictures, error messages) and for the 'layer/port' addressing."""
    if name is None:
        return None
    if not isinstance(name, str):
        raise ArgumentError(f"layer name {name!r} ({type(name).__name__}) is not valid: a layer name "
                            "is a string, e.g. name='fc1'.")
    if not name or name.isspace():
        raise ArgumentError("layer name '' is not valid: give a non-empty name, e.g. name='fc1', or "
                            "leave it out for an automatic one.")
    if len(name) > MAX_NAME_LENGTH:
        raise ArgumentError(f"layer name {name[:40]!r}… is not valid: it has {len(name)} characters, "
                            f"the most is {MAX_NAME_LENGTH}.")
    for i, ch in enumerate(name):
        if ch == "/":
            raise ArgumentError(f"layer name {name!r} is not valid: '/' (at position {i}) separates a "
                                "layer from its port, as in 'cross-attention/key'. Use another "
                                "character, e.g. '-' or '_'.")
        if not ch.isprintable():
            label = unicodedata.name(ch, None) or {"\n": "LINE FEED", "\r": "CARRIAGE RETURN",
                                                    "\t": "TAB"}.get(ch, "control character")
            raise ArgumentError(f"layer name {name!r} is not valid: character U+{ord(ch):04X} "
                                f"({label.lower()}) at position {i} is not printable. Layer names are "
                                "printable text on one line.")
    if name[0].isspace() or name[-1].isspace():
        raise ArgumentError(f"layer name {name!r} is not valid: it starts or ends with a space.")
    return name


class _NoModuleError(NetworkError, AttributeError):
    """`layer.module` before the layer was called (also an AttributeError, so hasattr works)."""


class _CalledModule:
    """`layer.module`: the module a call on tensors built (a non-data descriptor, so a layer
    that keeps a module of its own under that name, `L.Module`, shows that one)."""

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        state = obj.__dict__.get("_called")
        if state is None:
            raise _NoModuleError(f"{_label(obj)} has no module yet: call it on tensors first "
                                 f"(e.g. layer(x)), which builds it, or put it in an al.Network "
                                 "(net.layer_modules[name]).")
        return state[0]


class Layer:
    """Base of every layer: a description with a name, ports, a size rule and a module factory.

    A subclass keeps its constructor arguments as attributes of the same name (what `config()`,
    `repr` and saving read), names its ports (`input_ports`, `output_ports`), maps input specs to
    output specs in `infer` (raising `SizeError`/`FormatError` made with `error`) and makes its
    torch module in `build`. It holds no tensors: the network builds the modules.

    How a layer behaves along time is declared on its class. `time_local = True` says that each
    output step depends on the same input step only (Dense, activations, LayerNorm, Embedding,
    Addition, …), as the layer computes in evaluation mode. That is all such a layer needs to
    stream (`net.stream()` calls its module on the new steps) and for target matching to look
    through it for where a time reduction goes. The default, False, claims nothing: a layer that
    looks along time (recurrent, attention, convolution, positions) streams through a stepper
    registered with `attnlab.stream.register_stepper`, which also decides for layers whose
    time-locality depends on their arguments or mode (BatchNorm in training normalises over
    batch and time; Concatenation along time).

    Parameters
    ----------
    name : str, optional
        The layer's unique name in its network; without one, the network names it from its
        type (`fc`, `fc_1`, …).
    """

    uses_mask: ClassVar[bool] = False
    returns_mask: ClassVar[bool] = False
    is_input: ClassVar[bool] = False
    time_local: ClassVar[bool] = False    # each output step depends on the same input step only
    stem: ClassVar[str] = ""

    if TYPE_CHECKING:
        module: nn.Module          # the module built by the first call on tensors
    else:
        module = _CalledModule()

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if not cls.__name__.startswith("_"):
            LAYER_TYPES[cls.__name__] = cls
        if not cls.__dict__.get("stem"):
            cls.stem = cls.__name__.lower()
        init = cls.__dict__.get("__init__")
        if init is not None and not getattr(init, "_checks_call", False):
            setattr(cls, "__init__", _recorded_init(_checked_init(init), cls))

    def __init__(self, name: str | None = None):
        self.name = check_name(name)

    # a subclass with other ports overrides these (a class attribute or a property)
    @property
    def input_ports(self) -> tuple[str, ...]:
        """The names of the input ports, in order (`in` for a single input)."""
        return ("in",)

    @property
    def output_ports(self) -> tuple[str, ...]:
        """The names of the output ports, in order (`out` for a single output)."""
        return ("out",)

    # -- the rule and the factory ---------------------------------------------------------
    def infer(self, specs: dict[str, Spec]) -> Spec | dict[str, Spec]:
        """The size rule: the specs of the output ports from those at the input ports, by port name.

        Raises `SizeError` or `FormatError` (made with `error`) when the inputs do not fit."""
        raise NotImplementedError

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        """The torch module that computes the layer for these input specs (called once, at initialisation)."""
        raise NotImplementedError

    def infer_all(self, specs: dict[str, Spec]) -> dict[str, Spec]:
        """`infer`, always as a dict by output port name."""
        out = self.infer(specs)
        if isinstance(out, Spec):
            return {self.output_ports[0]: out}
        return out

    # -- called on tensors, as a Keras layer ------------------------------------------------
    def __call__(self, *inputs: Any, training: bool | None = None, **by_port: Any) -> Any:
        """Runs the layer on tensors: `L.Dense(4)(x)`, `L.MultiHeadAttention(8, 256)(q, k, v)`.

        Inputs come in port order (`input_ports`) or by port name (`layer(q, key=k, value=v)`).
        The input specs are read from the tensors' shapes (B×C, B×T×C, B×C×H×W; a 2-D integer
        or boolean tensor is B×T, token ids or a padding mask). The first call builds the
        module, on the inputs' device (and in their floating dtype), and keeps it as
        `layer.module`: its parameters are the layer's learnables, trainable as any module's.
        Later calls reuse it; inputs whose sizes would need other learnables are refused.
        `training` runs this call in training (True) or evaluation (False) mode; None keeps the
        module's mode (torch's default: training). The output is a tensor, or a tuple in
        `output_ports` order when the layer has several. Inputs carry no padding mask here:
        put the layer in a Network to run padded batches.

        A Network builds its own modules for its layers: a layer of a network, called
        directly, does not run with the network's weights (`net.layer_modules[name]` is the
        network's module); to carry a called layer's weights into a network,
        `net.layer_modules[name].load_state_dict(layer.module.state_dict())`.
        """
        ports = self.input_ports
        label = _label(self)
        if self.is_input:
            raise SignatureError(f"{label} is an input layer: it takes no tensors. Call the "
                                 "layer after it on the data, e.g. L.Dense(4)(x), or put both in "
                                 "an al.Network.")
        if training is not None and not isinstance(training, bool):
            raise ArgumentError(f"{label} call argument 'training': expected True, False or None, "
                                f"received {training!r}. Use training=False for inference.")
        given = _inputs_by_port(self, label, ports, inputs, by_port)
        xs = [given[p] for p in ports]
        specs = {p: _spec_of(self, p, x) for p, x in zip(ports, xs)}
        mod = _called_module(self, specs, xs)
        ref = next((t for t in (mod.parameters()) if t.is_floating_point()), None)
        if ref is not None:
            xs = [x.to(ref.dtype) if x.is_floating_point() and x.dtype != ref.dtype else x
                  for x in xs]
        kw = {"masks": (None,) * len(ports)} if self.uses_mask or self.returns_mask else {}
        was = mod.training
        if training is not None:
            mod.train(training)
        try:
            out = mod(*xs, **kw)
        except (RuntimeError, IndexError, ValueError) as e:
            if isinstance(e, AttnlabError):
                raise
            text = " ".join(str(e).split())[:500]
            raise DataError(f"{label}: running it failed; torch says: {text}. Check that the "
                            "inputs fit the layer (sizes, dtypes, one device).") from e
        finally:
            if training is not None:
                mod.train(was)
        if self.returns_mask:
            out = out[0]
        if isinstance(out, list):
            out = tuple(out)
        if len(self.output_ports) == 1 and isinstance(out, tuple) and len(out) == 1:
            return out[0]
        return out

    # -- description ----------------------------------------------------------------------
    @property
    def type_name(self) -> str:
        """The layer's type as shown in tables and messages (its class name)."""
        return type(self).__name__

    def config(self) -> dict:
        """The constructor's arguments by name, `name` aside: `type(layer)(**layer.config(),
        name=layer.name)` builds the same layer again (what saving writes and `repr` shows).

        The options are those of the constructor and those it passed on to its parent's
        through `*args` (under the parent's names) and `**kwargs`, as given at construction.
        Each value is read from the attribute of its name (so a changed attribute shows), else
        from the attribute of the parent's parameter it was passed on to unchanged (a
        subclass's `heads` given to `num_heads`). Raises NetworkError naming the option when it
        cannot be told: an argument kept under another name, positional `*args` passed on
        changed."""
        positional, options = _built_with(self)
        if positional:
            err = NetworkError(f"{_label(self)}: {_positional_problem(self, positional)}")
            err.layer, err.port = self.name, None
            raise err
        return options

    def __repr__(self) -> str:
        positional: tuple = ()
        try:                                    # a subclass's own config() has the last word
            options = self.config()
        except NetworkError:                    # what it cannot name: shown as it was given
            positional, options = _built_with(self, strict=False)
        args = ", ".join([repr(v) for v in positional] + [f"{k}={v!r}" for k, v in options.items()])
        name = (", " if args else "") + f"name={self.name!r}" if self.name else ""
        return f"{self.type_name}({args}{name})"

    # -- errors that teach ----------------------------------------------------------------
    def error(self, cls: type[_E], port: str | None, message: str) -> _E:
        """An error of class `cls` whose message starts with this layer and `port` (``layer 'fc' port 'in': …``)."""
        err = cls(where(self.name, port) + message)
        err.layer, err.port = self.name, port
        return err

    def require(self, spec: Spec, port: str, labels: Iterable[str], fix: str = "") -> None:
        """Raise FormatError unless `spec` has one of the allowed label strings."""
        labels = tuple(labels)
        if spec.labels not in labels:
            allowed = " or ".join(_label_text(l) for l in labels)
            raise self.error(FormatError, port,
                             f"expected {allowed}, received {spec} ({spec.kind}). {fix}".rstrip())

    def require_channels(self, spec: Spec, port: str, channels: int | None, fix: str = "") -> None:
        """Raise SizeError unless `spec` has `channels` channels (None accepts any)."""
        if channels is not None and spec.channels is not None and spec.channels != channels:
            raise self.error(SizeError, port,
                             f"expected {spec.with_channels(channels)}, received {spec}. {fix}".rstrip())


def _label_text(labels: str) -> str:
    return "×".join(labels)


# -- calling a layer on tensors --------------------------------------------------------------

def _label(layer) -> str:
    name = getattr(layer, "name", None)
    return f"layer '{name}' ({type(layer).__name__})" if name else f"{type(layer).__name__} layer"


def _inputs_by_port(layer, label, ports, inputs, by_port) -> dict:
    listed = ", ".join(ports)
    if len(inputs) > len(ports):
        raise SignatureError(f"{label}: expected {len(ports)} input(s) ({listed}), received "
                             f"{len(inputs)}. Pass one tensor per input port, in this order or by "
                             "port name.")
    given = dict(zip(ports, inputs))
    for port, x in by_port.items():
        if port not in ports:
            hint = close_matches(port, ports)
            if port == "mask" and hasattr(layer, "has_padding_mask_input"):
                hint += " Make the layer with has_padding_mask_input=True for a 'mask' input."
            raise SignatureError(f"{label}: no input port '{port}'.{hint} Its inputs: {listed}.")
        if port in given:
            raise SignatureError(f"{label}: input '{port}' given twice, by position and by name. "
                                 "Give it once.")
        given[port] = x
    missing = [p for p in ports if p not in given]
    if missing:
        fix = "Pass them in port order or by name"
        if "key" in missing and "value" in given or "value" in missing and "key" in given:
            fix = ("For keys and values from one sequence pass it twice, e.g. layer(q, kv, kv); "
                   "or pass the inputs by name")
        raise SignatureError(f"{label}: missing input(s) {', '.join(missing)}; it takes "
                             f"{listed}. {fix}, e.g. layer({', '.join(ports)}).")
    return given


def _spec_of(layer, port: str, x) -> Spec:
    if not isinstance(x, torch.Tensor):
        if type(x).__module__ == "numpy" and hasattr(x, "shape"):
            raise DataError(f"{_label(layer)} input '{port}': expected a torch.Tensor, received a "
                            "numpy array. Convert it with torch.as_tensor(x).")
        raise DataError(f"{_label(layer)} input '{port}': expected a torch.Tensor (B×C, B×T×C "
                        f"or B×C×H×W), received {type(x).__name__}. Convert it with "
                        "torch.as_tensor(x).")
    if x.dim() == 2 and (port == "mask" or not x.is_floating_point()):
        return Spec("BT", (None, None))                  # token ids or a padding mask
    try:
        return spec_of_tensor_shape(tuple(x.shape))
    except ValueError:
        size = "×".join(map(str, x.shape)) or "a scalar"
        fix = "Add a batch dimension with x.unsqueeze(0)." if x.dim() < 2 else \
            "Reshape it to B×C, B×T×C or B×C×H×W."
        raise DataError(f"{_label(layer)} input '{port}': expected B×C, B×T×C or B×C×H×W, "
                        f"received {size} ({x.dim()} dimensions). {fix}") from None


def _shapes(mod: nn.Module) -> dict:
    return {k: tuple(v.shape) for k, v in mod.state_dict().items() if isinstance(v, torch.Tensor)}


def _called_module(layer, specs: dict, xs) -> nn.Module:
    """The module of a layer called on tensors: built on the first call, then reused for every
    input size that needs learnables of the same shapes."""
    key = tuple((p, s.labels, s.sizes) for p, s in specs.items())
    state = layer.__dict__.get("_called")
    if state is not None and key in state[1]:
        return state[0]
    layer.infer_all(specs)                          # the size rule names the layer and port
    if state is None:
        mod = layer.build(specs)
        ref = next((x for x in xs if x.is_floating_point()), xs[0] if xs else None)
        if ref is not None:
            mod = mod.to(device=ref.device)
            if ref.is_floating_point() and any(p.is_floating_point() and p.dtype != ref.dtype
                                               for p in mod.parameters()):
                mod = mod.to(dtype=ref.dtype)
        layer.__dict__["_called"] = (mod, {key}, specs)
        return mod
    mod, accepted, first = state
    with torch.device("meta"):
        trial = layer.build(specs)
    if _shapes(trial) != _shapes(mod):
        port = next((p for p in specs if first.get(p) != specs[p]), next(iter(specs)))
        raise layer.error(SizeError, port, f"expected {first[port]} (the size of the first call, "
                          f"which built the layer's learnables), received {specs[port]}. A layer's "
                          "learnables have one size: make another layer for inputs of this size.")
    accepted.add(key)
    return mod


# -- constructor arguments that do not fit ---------------------------------------------------

def _checked_init(init: Callable) -> Callable:
    """`init`, turning Python's TypeError for a call that does not fit its signature (an
    unknown keyword, a missing or extra argument) into a SignatureError that names the layer
    type, the argument, a close match, and the layers that do take it."""
    return calls.checked(init, lambda args: type(args[0]).__name__,
                         lambda args, arg: _others_taking(arg, type(args[0])))


def _others_taking(argument: str, owner: type) -> list[str]:
    """Where else `argument` is a constructor argument: public layer types, and al.attention."""
    found = []
    for name, cls in sorted(LAYER_TYPES.items()):
        if cls is owner or issubclass(owner, cls) or not cls.__module__.startswith("attnlab.layers"):
            continue
        try:
            names = {p.name for p in calls.parameters(cls.__init__)}
        except (TypeError, ValueError):
            continue
        if argument in names:
            found.append(f"L.{name}")
    from ..functional import attention            # below the layers: no import cycle
    if argument in inspect.signature(attention).parameters:
        found.append("al.attention")
    return found


# -- what a layer was built with -------------------------------------------------------------

def _recorded_init(init: Callable, owner: type) -> Callable:
    """`init` (the constructor `owner` defines), keeping the arguments of each call made while
    the layer is built: the outermost call first, then the parents' constructors it calls
    (`super().__init__(...)`). `config()` reads them for options a subclass takes through
    `*args`/`**kwargs` and passes on, which no attribute of its own names."""

    @functools.wraps(init)
    def call(self, *args: Any, **kwargs: Any) -> None:
        if isinstance(self, nn.Module):    # a Network: its config is its graph, and its
            init(self, *args, **kwargs)    # arguments (layer lists) are not kept alive
            return
        d = self.__dict__
        depth = d.get("_init_depth", 0)
        if not depth:                                    # a new construction: a new record
            d["_init_calls"] = []
        d["_init_calls"].append((owner, args, kwargs))
        d["_init_depth"] = depth + 1
        try:
            init(self, *args, **kwargs)
        finally:
            if depth:
                d["_init_depth"] = depth
            else:
                del d["_init_depth"]

    return call


_MISSING = object()
_NAMED = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def _built_with(layer, strict: bool = True) -> tuple[tuple, dict]:
    """(positional values whose options cannot be named, the options by name) of `layer`: the
    named parameters of its constructor, then what it passed on through `*args` (named by the
    parent constructor that took them) and `**kwargs`, each read by `_option` (or, unless
    `strict`, as given when it cannot be read)."""
    calls = layer.__dict__.get("_init_calls")
    if calls:
        owner, args, kwargs = calls[0]
        sig = inspect.signature(owner.__dict__["__init__"])
        try:
            bound = sig.bind(layer, *args, **kwargs).arguments
        except TypeError:                              # a signature that hides the real one
            calls = None
    if not calls:                                      # made without its constructor
        return (), {k: _option(layer, k, _MISSING, (), strict) for k in _own_names(type(layer))}
    params = list(sig.parameters.values())[1:]
    takes_keywords = any(p.kind is p.VAR_KEYWORD for p in params)
    options: dict = {}
    unnamed: tuple = ()
    for p in params:
        given = bound.get(p.name, _MISSING)
        if p.kind is p.VAR_POSITIONAL and given is not _MISSING and given:
            names = _passed_on(calls, 0, len(args) - len(given), len(given))
            if names is None or not takes_keywords or any(n in options for n in names):
                unnamed = tuple(given)
            else:
                options.update((n, _option(layer, n, v, calls, strict)) for n, v in zip(names, given)
                               if n != "name")
        elif p.kind is p.VAR_KEYWORD and given is not _MISSING:
            options.update((k, _option(layer, k, v, calls, strict)) for k, v in given.items()
                           if k != "name")
        elif p.kind in _NAMED and p.name != "name":
            options[p.name] = _option(layer, p.name, p.default if given is _MISSING else given,
                                      calls, strict)
    return unnamed, options


def _option(layer, name: str, given, calls, strict: bool = True):
    """The option `name`, given as `given` at construction: the layer's attribute of that name
    (so that a changed attribute shows), else the attribute of the parent constructor's
    parameter that took `given` unchanged (a subclass's `heads` passed on as `num_heads`).
    Raises NetworkError naming the option when neither says what it is now."""
    value = getattr(layer, name, _MISSING)
    if value is _MISSING and given is not _MISSING:
        value = _followed(layer, calls, 1, given)
    if value is _MISSING and not strict:
        return given
    if value is _MISSING:
        raise NetworkError(f"{_label(layer)}: its config() cannot read its argument '{name}': "
                           f"{type(layer).__name__} keeps no attribute of that name, nor passes "
                           "it on unchanged to a parent constructor that does. Keep each "
                           f"constructor argument as an attribute of the same name (self.{name} = "
                           f"{name}), or override config().")
    return value


def _followed(layer, calls, i: int, given):
    """The attribute of the parameter that the i-th recorded constructor call (or a later one)
    bound to the very object `given`; _MISSING when none did, or several disagree."""
    if i >= len(calls):
        return _MISSING
    owner, args, kwargs = calls[i]
    try:
        bound = inspect.signature(owner.__dict__["__init__"]).bind(layer, *args, **kwargs)
    except TypeError:
        return _MISSING
    params = bound.signature.parameters
    taken = []
    for key, v in list(bound.arguments.items())[1:]:
        kind = params[key].kind
        if kind is inspect.Parameter.VAR_KEYWORD:
            taken += [(k, x) for k, x in v.items() if x is given]
        elif kind is not inspect.Parameter.VAR_POSITIONAL and v is given:
            taken.append((key, v))
    found = []
    for key, _ in taken:
        if key == "name":
            continue
        value = getattr(layer, key, _MISSING)
        found.append(_followed(layer, calls, i + 1, given) if value is _MISSING else value)
    found = [f for f in found if f is not _MISSING]
    if not found or any(not _same_value(f, found[0]) for f in found[1:]):
        return _MISSING
    return found[0]


def _same_value(a, b) -> bool:
    if a is b:
        return True
    plain = (int, float, str, bool, type(None))
    return type(a) is type(b) and isinstance(a, plain) and a == b


def _passed_on(calls, i: int, start: int, count: int) -> list[str] | None:
    """The parameter names that the positional arguments start…start+count−1 of the i-th
    recorded constructor call set, found by following them, unchanged (the same objects),
    into the parent constructors it called; None when they cannot be followed."""
    owner, args, _ = calls[i]
    params = list(inspect.signature(owner.__dict__["__init__"]).parameters.values())[1:]
    fixed = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    names: list[str] = []
    j = start
    while j < start + count and j < len(fixed):
        if fixed[j].kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD:
            return None                                 # positional-only: no keyword for it
        names.append(fixed[j].name)
        j += 1
    rest = start + count - j                            # those that went into its *args
    if not rest:
        return names
    if i + 1 >= len(calls):
        return None
    values, parent = args[j:j + rest], calls[i + 1][1]
    found = [o for o in range(len(parent) - rest, -1, -1)
             if all(parent[o + k] is v for k, v in enumerate(values))]
    if not found:                                       # passed on changed, or not at all
        return None
    more = _passed_on(calls, i + 1, found[0], rest)
    return None if more is None else names + more


def _own_names(cls) -> list[str]:
    params = inspect.signature(cls.__init__).parameters
    return [k for k, p in params.items() if k not in ("self", "name") and p.kind in _NAMED]


def _positional_problem(layer, values: tuple) -> str:
    cls = type(layer).__name__
    shown = ", ".join(repr(v)[:40] for v in values)
    return (f"its config() cannot tell which options the positional arguments *args ({shown}) of "
            f"{cls}.__init__ set: it passes them on changed, not at all, or to a constructor "
            "that cannot take them by name, so a saved file could not say what they were. "
            f"Give {cls}.__init__ named parameters for them (e.g. def __init__(self, num_heads, "
            "key_channels, **kwargs)), kept as attributes of the same name, or pass *args on "
            f"unchanged with **kwargs (super().__init__(*args, **kwargs)), or override "
            f"{cls}.config().")


# layers without a constructor of their own (ReLU, Flatten, …) take Layer's: check it too
setattr(Layer, "__init__", _recorded_init(_checked_init(Layer.__dict__["__init__"]), Layer))
