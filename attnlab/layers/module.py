"""Any torch module as a layer."""
from __future__ import annotations

import copy
from typing import Callable, Sequence

import torch
from torch import nn

from attnlab.core.errors import FormatError, SizeError
from attnlab.core.spec import Spec
from attnlab.core import checks as check
from .base import Layer

_BY_NDIM = {2: "BC", 3: "BTC", 4: "BCSS"}
_FORMATS = ("BC", "BTC", "BCSS", "BT", "BHQK")


class Module(Layer):
    """Any `torch.nn.Module` as a layer.

    Output sizes come from two trial runs on meta tensors (sizes that change with the batch or
    the time length stay symbolic), or from `output_specs`. Output labels default to the input's
    when the rank is kept, else B×C, B×T×C or B×C×S×S by rank; `output_format` overrides them.
    Save/load recreates the module through `attnlab.register_module`: register its class
    before `net.save` (which refuses an unregistered one, naming it) and before `al.load`.

    Parameters
    ----------
    module : torch.nn.Module
        The module; its parameters are the layer's learnables.
    num_inputs, num_outputs : int
        The numbers of tensors `forward` takes and returns.
    output_format : str or list of str, optional
        The labels of the outputs, e.g. "BTC" (one per output when there are several).
    output_specs : Spec or list of Spec, optional
        The output specs, instead of the trial runs.
    lengths : Callable, optional
        For a module that changes the time length: the valid lengths out (an int64 tensor B) from
        the valid lengths in, e.g. ``lambda n: n // 2``. Without it the lengths are found by trial runs.

    Shape
    -----
    - `in` (or `in1` … `in{num_inputs}`): any spec
    - `out` (or `out1` … `out{num_outputs}`): as the module computes them

    Examples
    --------
    >>> import torch, attnlab as al
    >>> from attnlab import layers as L
    >>> net = al.Network([L.SequenceInput(4), L.Module(torch.nn.Linear(4, 6))])
    >>> net(torch.randn(2, 3, 4)).shape
    torch.Size([2, 3, 6])
    """

    stem = "module"

    def __init__(self, module: nn.Module, num_inputs: int = 1, num_outputs: int = 1,
                 output_format: str | Sequence[str] | None = None,
                 output_specs: Spec | Sequence[Spec] | None = None,
                 lengths: Callable[[torch.Tensor], torch.Tensor] | None = None,
                 name: str | None = None):
        super().__init__(name)
        if not isinstance(module, nn.Module):
            raise check.fail(self, "module", "a torch.nn.Module", module,
                             "Wrap a module, e.g. L.Module(nn.Linear(8, 4)); for a function, "
                             "write a small nn.Module whose forward calls it.")
        self.module = module
        self.num_inputs = check.integer(self, "num_inputs", num_inputs, most=check.MAX_PORTS)
        self.num_outputs = check.integer(self, "num_outputs", num_outputs, most=check.MAX_PORTS)
        self.output_format = self._check_format(output_format)
        self.output_specs = self._check_specs(output_specs)
        if lengths is not None and not callable(lengths):
            raise check.fail(self, "lengths", "None or a callable (the valid lengths, an int64 "
                             "tensor B → the output's valid lengths)", lengths,
                             "E.g. lengths=lambda n: n // 2 for a pooling of 2 over time.")
        self.lengths = lengths
        self._time_changes = lengths is not None   # found by the trial runs in infer()

    @property  # a ClassVar on Layer, per instance here
    def returns_mask(self) -> bool:  # type: ignore[override]
        """A module that changes the time length returns the padding mask of its new length
        (see `_NewLengthMask`); one that keeps it passes the input's mask on, as any layer."""
        return self._time_changes

    def _check_format(self, fmt):
        if fmt is None or (isinstance(fmt, str) and fmt in _FORMATS):
            return fmt
        allowed = f"None, one of {', '.join(map(repr, _FORMATS))}"
        if isinstance(fmt, (list, tuple)) and not isinstance(fmt, str):
            if len(fmt) == self.num_outputs and all(f in _FORMATS for f in fmt
                                                    if isinstance(f, str)) \
                    and all(isinstance(f, str) for f in fmt):
                return list(fmt)
            raise check.fail(self, "output_format", f"{allowed}, or a list of {self.num_outputs} "
                             "of them (one per output)", fmt)
        hint = check.close_matches(fmt, _FORMATS) if isinstance(fmt, str) else ""
        raise check.fail(self, "output_format", f"{allowed} or a list of them (one per output)",
                         fmt, hint.strip())

    def _check_specs(self, specs):
        if specs is None:
            return None
        if isinstance(specs, Spec):
            specs = [specs]
        if not isinstance(specs, (list, tuple)) or len(specs) != self.num_outputs or not all(
                isinstance(s, Spec) for s in specs):
            raise check.fail(self, "output_specs", f"None or a list of {self.num_outputs} Spec "
                             "(one per output)", specs,
                             "E.g. output_specs=[al.Spec.sequence(16)] for one B×T×16 output.")
        return list(specs)

    @property
    def input_ports(self) -> tuple[str, ...]:
        return ("in",) if self.num_inputs == 1 else tuple(f"in{i + 1}" for i in range(self.num_inputs))

    @property
    def output_ports(self) -> tuple[str, ...]:
        return ("out",) if self.num_outputs == 1 else tuple(f"out{i + 1}" for i in range(self.num_outputs))

    def config(self) -> dict:
        return {"module": type(self.module).__name__, "num_inputs": self.num_inputs,
                "num_outputs": self.num_outputs, "output_format": self.output_format}

    def infer(self, specs: dict[str, Spec]) -> dict[str, Spec]:
        ins = [specs[p] for p in self.input_ports]
        if self.output_specs is not None:
            return dict(zip(self.output_ports, self.output_specs))
        a = self._trial(ins, batch=2, time=5)
        b = self._trial(ins, batch=3, time=7)
        self._time_changes = self.lengths is not None or _changes_time(ins, a, b)
        out = {}
        for port, sa, sb in zip(self.output_ports, a, b):
            fmt = self.output_format or (ins[0].labels if len(sa) == len(ins[0].labels)
                                         else _BY_NDIM.get(len(sa), "B" + "C" * (len(sa) - 1)))
            if isinstance(fmt, (list, tuple)):
                fmt = fmt[self.output_ports.index(port)]
            if len(fmt) != len(sa):
                raise self.error(FormatError, port, f"expected an output of {len(fmt)} dimensions "
                                 f"({'×'.join(fmt)}, from output_format), received one of "
                                 f"{len(sa)} dimensions. Give an output_format of that rank, e.g. "
                                 f"{_BY_NDIM.get(len(sa), 'B' + 'C' * (len(sa) - 1))!r}.")
            out[port] = Spec(fmt, tuple(x if x == y else None for x, y in zip(sa, sb)))
        return out

    def _trial(self, ins, batch, time):
        shapes = [s.concrete(batch, time) for s in ins]
        try:
            try:
                mod = copy.deepcopy(self.module).to("meta")
                outs = mod(*[torch.empty(sh, device="meta") for sh in shapes])
            except NotImplementedError:  # an op without a meta kernel: run it for real, small
                with torch.no_grad():
                    outs = self.module(*[torch.zeros(sh) for sh in shapes])
        except Exception as e:  # translated, with the cause chained
            got = ", ".join(map(str, ins))
            raise self.error(SizeError, self.input_ports[0],
                             f"the wrapped {type(self.module).__name__} failed on input {got}: "
                             f"{str(e).rstrip('. ')}. "
                             "Check the sizes it expects, or give output_specs.") from e
        outs = outs if isinstance(outs, (tuple, list)) else (outs,)
        if len(outs) != self.num_outputs:
            raise self.error(SizeError, None, f"expected {self.num_outputs} output(s) from the wrapped "
                             f"{type(self.module).__name__}, received {len(outs)}. Set num_outputs.")
        return [tuple(o.shape) for o in outs]

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        if not self._time_changes:
            return self.module
        first = next((s for s in (specs[p] for p in self.input_ports) if s.is_sequence), None)
        return _NewLengthMask(self.module, first, self.lengths)


def _changes_time(ins, a, b) -> bool:
    """Whether the trial outputs (shapes `a`, `b` at two time lengths) have a time axis of
    another length than the first sequence input's."""
    seq = next((i for i, s in enumerate(ins) if s.is_sequence and s.labels == "BTC"), None)
    if seq is None:
        return False
    ta, tb = ins[seq].concrete(2, 5)[1], ins[seq].concrete(3, 7)[1]
    return any(len(sa) == 3 and (sa[1], sb[1]) != (ta, tb) for sa, sb in zip(a, b))


class _NewLengthMask(nn.Module):
    """Runs a wrapped module that changes the time length and gives its sequence outputs the
    padding mask of the new length: `(outputs, masks)`, as layers with `returns_mask` do.

    The wrapper shares the wrapped module's parameters, buffers and children (the same dicts),
    so parameter names, `state_dict` and `.to()` are exactly the wrapped module's. A sequence of
    valid length L keeps the output steps the module gives a sequence of length L alone: the
    `lengths` callable when given, else a table L → output length found once per padded length
    by trial runs on meta tensors (no host sync per call)."""

    inner: nn.Module                 # set with object.__setattr__: not children (see __init__)
    probe: nn.Module | None

    def __init__(self, module: nn.Module, spec: Spec | None, lengths=None):
        super().__init__()
        object.__setattr__(self, "inner", module)        # not a child: its dicts are ours
        self._parameters, self._buffers, self._modules = \
            module._parameters, module._buffers, module._modules
        self.spec, self.lengths_fn = spec, lengths
        self.table = torch.zeros(0, dtype=torch.long)     # table[L] = output length
        object.__setattr__(self, "probe", None)          # a meta copy, made on first use

    def train(self, mode: bool = True):
        self.inner.train(mode)
        return super().train(mode)

    def forward(self, *xs, masks=None):
        outs = self.inner(*xs)
        many = isinstance(outs, (tuple, list))
        outs = tuple(outs) if many else (outs,)
        mask = next((m for m in (masks or ()) if m is not None), None)
        if mask is None:
            return (outs if many else outs[0]), ((None,) * len(outs) if many else None)
        valid = mask.sum(1)                                          # B, on the device
        new = self.lengths_fn(valid) if self.lengths_fn is not None else \
            self._table(mask.shape[1], xs).to(valid.device)[valid]
        oms = tuple(torch.arange(o.shape[1], device=o.device).unsqueeze(0) < new.unsqueeze(1)
                    if o.dim() == 3 else None for o in outs)
        return (outs, oms) if many else (outs[0], oms[0])

    def _table(self, t: int, xs) -> torch.Tensor:
        if len(self.table) > t:
            return self.table
        probe = self.probe
        if probe is None:
            try:
                probe = copy.deepcopy(self.inner).to("meta")
            except (NotImplementedError, RuntimeError):    # cannot live on meta: a CPU copy
                probe = copy.deepcopy(self.inner).cpu()
            object.__setattr__(self, "probe", probe)
        ref = next(probe.parameters(), None)
        dev = ref.device if ref is not None else torch.device("meta")
        rows = []
        for n in range(len(self.table), t + 1):
            shapes = [(1, n) + tuple(x.shape[2:]) if x.dim() == 3 else (1,) + tuple(x.shape[1:])
                      for x in xs]
            dtypes = [ref.dtype if ref is not None and x.is_floating_point() else x.dtype for x in xs]
            try:
                with torch.no_grad():
                    o = probe(*[torch.zeros(sh, device=dev, dtype=d) for sh, d in zip(shapes, dtypes)])
                o = o[0] if isinstance(o, (tuple, list)) else o
                rows.append(o.shape[1] if n else 0)
            except (RuntimeError, ValueError, IndexError):  # too short for the module: no valid step
                rows.append(0)
        self.table = torch.cat([self.table, torch.tensor(rows, dtype=torch.long)])
        return self.table
