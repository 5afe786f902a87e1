"""What a trace asks of one attention module: the values of its inside to keep, and those to
replace.

An attention module has the attribute `probe` (None by default: attention runs exactly as
without it, on the fused kernel). With a `Probe` there, its `attend` stage hands the probe
each of these values, the ports of the inside of attention:

- `query`: B×H×Tq×dk, the queries after projection and the rotary embedding;
- `key`: B×Hkv×Tk×dk, the keys likewise. With grouped-query attention (`num_kv_heads`) the
  key has the key/value heads, Hkv of them, as they are computed and cached (before they are
  shared by the query heads); H otherwise;
- `scores`: B×H×Tq×Tk, the softmax weights that multiply the values (0 at padded or masked
  keys; before dropout), one per query head as transformers' `output_attentions`;
- `heads`: B×Tq×H×dv, each head's output before the output projection.

`probe.wants(port)` says whether the probe asks for a port (only then is the value made: a
probe that does not want `scores` leaves the fused kernel running); `probe(port, value)`
keeps the value when it is captured and returns what replaces it: the patch tensor, or a
patch callable's result, else the value itself. A replacement must have the value's size,
dtype and device: anything else is refused, naming the layer and port.
"""
from __future__ import annotations

from typing import Any, Callable, Collection, Mapping, Optional, Union

from torch import Tensor

from attnlab.core.errors import ArgumentError, SizeError, where

__all__ = ["Probe", "PORTS", "Patch", "checked_patch"]

PORTS = ("query", "key", "scores", "heads")      # the inside of attention, in order of use

# a patch: the tensor that replaces a value, or a function of the value giving it
Patch = Union[Tensor, Callable[[Tensor], Tensor]]


def _size(t: Tensor) -> str:
    return "×".join(str(s) for s in t.shape) if t.dim() else "a scalar"


def _at(err: Exception, layer: Optional[str], port: str) -> Exception:
    err.layer, err.port = layer, port       # type: ignore[attr-defined]
    return err


def checked_patch(layer: Optional[str], port: str, value: Tensor, new: Any,
                  by_call: bool) -> Tensor:
    """`new` when it may replace `value` (a tensor of its size, dtype and device), else the
    error naming the layer and port, expected against received. `by_call`: `new` is what a
    patch function returned (else the patch itself)."""
    what = "the patch function returned" if by_call else "the patch is"
    if not isinstance(new, Tensor):
        raise _at(ArgumentError(
            f"{where(layer, port)}expected a tensor of size {_size(value)}, but {what} "
            f"{type(new).__name__}. Give a tensor (or return one from the patch function)."),
            layer, port)
    if new.shape != value.shape:
        raise _at(SizeError(
            f"{where(layer, port)}expected a patch of size {_size(value)}, but {what} a tensor "
            f"of size {_size(new)}. Give the port's own size: capture it first to see it."),
            layer, port)
    if new.dtype != value.dtype or new.device != value.device:
        raise _at(ArgumentError(
            f"{where(layer, port)}expected a patch of dtype {value.dtype} on {value.device}, "
            f"but {what} a tensor of dtype {new.dtype} on {new.device}. Convert it with "
            f".to({value.dtype}) and move it with .to('{value.device}')."), layer, port)
    return new


class Probe:
    """The ports of one attention module that a trace captures (`capture`, a collection of
    port names) and patches (`patch`, port name → tensor or callable); the captured values
    land in `captured` (port → tensor), kept with their graph so that gradients flow through
    them. `layer`: the layer's name, for errors. `record`: called as `record(port, value)`
    for each captured value too (a trace collecting several modules' values)."""

    def __init__(self, capture: Collection[str] = (), patch: Optional[Mapping[str, Patch]] = None,
                 layer: Optional[str] = None,
                 record: Optional[Callable[[str, Tensor], None]] = None) -> None:
        patch = dict(patch or {})
        for port in list(capture) + list(patch):
            if port not in PORTS:
                raise ArgumentError(f"{where(layer, port)}attention offers the ports "
                                    f"{', '.join(PORTS)}, received '{port}'. Name one of them.")
        self.capture = frozenset(capture)
        self.patch = patch
        self.layer = layer
        self.record = record
        self.captured: dict[str, Tensor] = {}

    def wants(self, port: str) -> bool:
        """Whether this probe captures or patches `port`."""
        return port in self.capture or port in self.patch

    def __call__(self, port: str, value: Tensor) -> Tensor:
        """The value of `port` kept (when captured) and replaced (when patched)."""
        if port in self.capture:
            self.captured[port] = value
            if self.record is not None:
                self.record(port, value)
        given = self.patch.get(port)
        if given is None:
            return value
        new = given(value) if callable(given) else given
        return checked_patch(self.layer, port, value, new, callable(given))

    def __repr__(self) -> str:
        return (f"Probe(layer={self.layer!r}, capture={sorted(self.capture)}, "
                f"patch={sorted(self.patch)})")
