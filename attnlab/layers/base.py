"""The layer base: a small description with ports, a size rule and a module factory.

A layer holds hyperparameters only. `infer` maps the specs arriving at its input ports to the
specs of its outputs (raising SizeError/FormatError that name the layer and port); `build` makes
the torch module that computes it. Modules return one tensor per output port (a tuple when
there are several). A layer that reads the padding masks sets `uses_mask`; its module then gets
`masks=` (one mask or None per input port, True = valid step). A layer that changes the time
axis sets `returns_mask`; its module returns `(outputs, masks)`.
"""
from __future__ import annotations

import inspect
import unicodedata
from typing import ClassVar, Iterable, TypeVar

from torch import nn

from ..errors import ArgumentError, AttnlabError, FormatError, SizeError, where
from ..spec import Spec

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


class Layer:
    """Base of every layer: a description with a name, ports, a size rule and a module factory.

    A subclass keeps its constructor arguments as attributes of the same name (what `config()`,
    `repr` and saving read), names its ports (`input_ports`, `output_ports`), maps input specs to
    output specs in `infer` (raising `SizeError`/`FormatError` made with `error`) and makes its
    torch module in `build`. It holds no tensors: the network builds the modules.

    Parameters
    ----------
    name : str, optional
        The layer's unique name in its network; without one, the network names it from its
        type (`fc`, `fc_1`, …).
    """

    uses_mask: ClassVar[bool] = False
    returns_mask: ClassVar[bool] = False
    is_input: ClassVar[bool] = False
    stem: ClassVar[str] = ""

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if not cls.__name__.startswith("_"):
            LAYER_TYPES[cls.__name__] = cls
        if not cls.__dict__.get("stem"):
            cls.stem = cls.__name__.lower()

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

    # -- description ----------------------------------------------------------------------
    @property
    def type_name(self) -> str:
        """The layer's type as shown in tables and messages (its class name)."""
        return type(self).__name__

    def config(self) -> dict:
        params = inspect.signature(type(self).__init__).parameters
        return {k: getattr(self, k) for k in params
                if k not in ("self", "name") and params[k].kind is not inspect.Parameter.VAR_KEYWORD}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.config().items())
        name = f", name={self.name!r}" if self.name else ""
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

