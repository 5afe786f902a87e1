"""Any torch module as a layer."""
from __future__ import annotations

import copy

import torch
from torch import nn

from ..errors import FormatError, SizeError
from ..spec import Spec
from . import _checks as check
from .base import Layer

_BY_NDIM = {2: "BC", 3: "BTC", 4: "BCSS"}
_FORMATS = ("BC", "BTC", "BCSS", "BT", "BHQK")


class Module(Layer):
    """Wraps a `torch.nn.Module` as a layer: in1..inN (or `in`) → out (or out1..outM).

    Output sizes are found by two trial runs on meta tensors (sizes that change with the batch or
    time length stay symbolic), or given as `output_specs` (a list of `Spec`). Output labels default
    to the input's when the rank is kept, else B×C / B×T×C / B×C×S×S by rank; `output_format`
    overrides them (e.g. "BTC")."""

    stem = "module"

    def __init__(self, module: nn.Module, num_inputs: int = 1, num_outputs: int = 1,
                 output_format=None, output_specs=None, name: str | None = None):
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
    def input_ports(self):
        return ("in",) if self.num_inputs == 1 else tuple(f"in{i + 1}" for i in range(self.num_inputs))

    @property
    def output_ports(self):
        return ("out",) if self.num_outputs == 1 else tuple(f"out{i + 1}" for i in range(self.num_outputs))

    def config(self):
        return {"module": type(self.module).__name__, "num_inputs": self.num_inputs,
                "num_outputs": self.num_outputs, "output_format": self.output_format}

    def infer(self, specs):
        ins = [specs[p] for p in self.input_ports]
        if self.output_specs is not None:
            return dict(zip(self.output_ports, self.output_specs))
        a = self._trial(ins, batch=2, time=5)
        b = self._trial(ins, batch=3, time=7)
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
                             f"the wrapped {type(self.module).__name__} failed on input {got}: {e}. "
                             "Check the sizes it expects, or give output_specs.") from e
        outs = outs if isinstance(outs, (tuple, list)) else (outs,)
        if len(outs) != self.num_outputs:
            raise self.error(SizeError, None, f"expected {self.num_outputs} output(s) from the wrapped "
                             f"{type(self.module).__name__}, received {len(outs)}. Set num_outputs.")
        return [tuple(o.shape) for o in outs]

    def build(self, specs):
        return self.module
