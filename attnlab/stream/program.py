"""A network and its static inputs → a step program, generated as Python code once per stream.

One walk over the analysed graph, in topological order, splits the layers in two:

- *static* layers (every input given whole in `static_inputs`, or computed from those only) run
  once, here, under `torch.no_grad()`: encoders, their key/value projections, ….
- *streamed* layers (some input depends on a streamed input) get a line in a generated
  function `step(pos, t, x0, x1, …)` that runs them on the t new steps, in order, with local
  variables, as the network's plan (`attnlab.graph.plan`) does for the forward pass: per-step layers
  call their module directly, stateful ones call their stepper (`attnlab.stream.steppers`). A
  nested `Network` layer gets a program of its own, called as one line.

Both parts call modules by the one calling convention (`attnlab.graph.convention`); the code is
written and run by `attnlab.graph.codegen`, which keeps layer names out of it.

Every layer that cannot stream is collected as an `Issue` (the caller raises them together).
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Callable, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.graph import codegen
from attnlab.graph.analysis import Issue
from attnlab.graph.convention import call, call_code, convention, passed_masks, targets_code
from attnlab.core.errors import DataError
from ..graph import Graph
from ..graph.names import learnable_name, under_layer
from ..layers.combine import _Sum
from ..layers.embedding import Embedding, _Embedding
from .capture import INSIDE, PROBED, Capture
from .steppers import (PER_STEP, LayerContext, NotStreamable, Route, bound_forward,
                       embedding_of, stepper_for)


@dataclass(frozen=True)
class Static:
    """A value known at stream creation: the tensor and its padding mask (None: no padding)."""

    value: Tensor
    mask: Tensor | None = None


@dataclass(frozen=True)
class Streamed:
    """A value computed at every step: the name of its variable in the generated code."""

    var: str


@dataclass
class Program:
    """The generated step function of one network and what it needs.

    `fn(pos, t, *xs)`: xs are the streamed inputs (B×t×C each, in input order), pos the
    position of their first step; returns the outputs in output order (the streamed ones only
    when built with `with_static_outputs=False`)."""

    fn: Callable
    source: str
    outputs: list[tuple[str, Static | Streamed]]       # output name → value
    streamed_inputs: list[str]
    resets: list[Callable] = field(default_factory=list)
    steppers: dict[str, object] = field(default_factory=dict)   # layer name → its Stepper
    limit: float = float("inf")        # steps available in static sequences read step by step
    problems: list[Issue] = field(default_factory=list)
    line_layers: dict[int, str] = field(default_factory=dict)
    # streamed inputs read by Embedding layers only: integer token ids pass to them unconverted
    ids_inputs: frozenset = frozenset()
    # static shapes (a compiled stream): `fn(positions, t, *xs)` takes the new steps' positions
    # as a 1-D int64 tensor, after `prepare(end, batch, device, dtype)` sized every buffer
    static_shapes: bool = False
    prepares: list[Callable] = field(default_factory=list)
    # `last()` → the step function that returns only the last new step of each streamed
    # output (B×1×C'), running the per-step layers after the last layer that looks along time
    # on that step alone (see `_last_only`); made on first use. None for nested programs.
    last: Callable[[], Callable] | None = None

    def prepare(self, end: int, batch: int, device, dtype) -> None:
        for p in self.prepares:
            p(end, batch, device, dtype)

    def reset(self) -> None:
        for r in self.resets:
            r()


def build_program(net, static: dict[str, Static], capacity: int = 64,
                  with_static_outputs: bool = True, static_shapes: bool = False,
                  analysis=None, capture: Capture | None = None, prefix: str = "") -> Program:
    """The program streaming `net` with the inputs named in `static` given whole;
    `static_shapes` for one that torch.compile traces once (see `Program`); `analysis`: the
    network's, when the caller has it already. `capture`: the values a step captures and
    patches (its layers named with `prefix` before them, inside a nested network); without
    one, the program has no taps at all."""
    return _Builder(net, static, capacity, static_shapes, analysis, capture,
                    prefix).build(with_static_outputs)


class _Builder:
    def __init__(self, net, static: dict[str, Static], capacity: int,
                 static_shapes: bool = False, analysis=None, capture: Capture | None = None,
                 prefix: str = "") -> None:
        self.net, self.static, self.capacity = net, static, capacity
        self.static_shapes = static_shapes
        self.capture = capture if capture else None
        self.prefix = prefix
        self.prepares: list[Callable] = []
        self.analysis = analysis if analysis is not None else net.analyze()
        self.analysis.raise_if_errors("stream")
        self.values: dict[tuple[str, str], Static | Streamed] = {}
        self.callables = codegen.Refs("f")    # modules, step methods, nested programs
        self.constants = codegen.Refs("c")    # static tensors the step code reads
        self.names = codegen.Names("v")
        self.body = codegen.Source()
        self.line_layers: dict[int, str] = {}
        self.resets: list[Callable] = []
        self.steppers: dict[str, object] = {}
        self.problems: list[Issue] = []
        self.limit = float("inf")
        self.uses: dict[str, list] = {}    # streamed variable → the layers reading it
        # each line of step code, for `_last_only`
        self.entries: list[_Entry] = []

    # -- the walk ---------------------------------------------------------------------------
    def build(self, with_static_outputs: bool) -> Program:
        net = self.net
        args = []
        for i, name in enumerate(net.input_names):
            key = codegen.input_key(net, name)
            if name in self.static:
                self.values[key] = self.static[name]
            else:
                self.values[key] = Streamed(f"x{i}")
                args.append(name)
            if key[0] != "<in>":
                self._tap(key[0], [key[1]])
        for name, layer, keys in codegen.walk(net, self.analysis.order):
            ins = {}
            for p, key in zip(layer.input_ports, keys):
                value = ins[p] = self.values[key]
                if isinstance(value, Streamed):
                    self.uses.setdefault(value.var, []).append(layer)
            outs: list[Static | Streamed]
            if all(isinstance(v, Static) for v in ins.values()):
                outs = list(self._run_static(name, layer, ins))
            else:
                outs = self._stream_layer(name, layer, ins)
            for port, v in zip(layer.output_ports, outs):
                self.values[(name, port)] = v
            self._tap(name, layer.output_ports)
        outputs = [(oname, self.values[key]) for oname, key in codegen.output_keys(net)]
        returned = [self._ref(v) for _, v in outputs
                    if with_static_outputs or isinstance(v, Streamed)]
        fn, source = self._compile(args, returned, self.body)
        line_layers = self.line_layers          # the step's (`last` compiles another)
        entries, streamed = self.entries, [isinstance(v, Streamed) for _, v in outputs]

        def make_last() -> Callable:
            lines, rets = _last_only(entries, returned, streamed)
            src = codegen.Source()
            for layer, text in lines:
                src.line(text, layer=layer)
            return self._compile(args, rets, src)[0]
        # with taps, `step(x, last=True)` runs the whole step and slices: every value captured
        # is then the same whatever `last` says
        last = make_last if with_static_outputs and self.capture is None else None
        returned_vars = {v.var for _, v in outputs if isinstance(v, Streamed)}
        ids = frozenset(a for i, a in enumerate(net.input_names) if a in args and
                        f"x{i}" not in returned_vars and self.uses.get(f"x{i}") and
                        all(type(u) is Embedding for u in self.uses[f"x{i}"]))
        return Program(fn, source, outputs, args, self.resets, self.steppers, self.limit,
                       self.problems, line_layers, ids, self.static_shapes, self.prepares,
                       last)

    # -- static layers: run once ------------------------------------------------------------
    def _run_static(self, name, layer, ins) -> list[Static]:
        """Runs a layer whose inputs are all static, by the calling convention of the forward
        pass (masks in, masks out), and returns its outputs. A nested network whose own
        layers are captured or patched runs as a program of its own, all its inputs static,
        so that its taps and probes see them."""
        if isinstance(layer, Graph) and self.capture is not None and \
                self.capture.within(self.prefix + name):
            sub = build_program(layer, dict(ins), self.capacity, capture=self.capture,
                                prefix=learnable_name(self.prefix + name, ""))
            return [cast(Static, v) for _, v in sub.outputs]
        module = self.net.layer_modules[name]
        xs = [ins[p].value for p in layer.input_ports]
        ms = [ins[p].mask for p in layer.input_ports]
        probe = self._probe(name, static=True)
        try:
            with torch.no_grad():
                if probe is None:
                    outs, masks = call(layer, module, xs, ms)
                else:
                    outs, masks = _probed(functools.partial(call, layer, module), module,
                                          probe)(xs, ms)
        except (RuntimeError, IndexError, ValueError) as e:
            raise DataError(f"layer '{name}': computing it from the static inputs failed: {e}. "
                            "Check that static_inputs fit the network (print(net.analyze()) "
                            "shows the sizes each layer expects).") from e
        if masks is None:
            masks = tuple(passed_masks(layer, ms, self.analysis.in_specs[name],
                                       self.analysis.out_specs[name]))
        return [Static(o, m) for o, m in zip(outs, masks)]

    # -- streamed layers: one line of step code each -----------------------------------------
    def _stream_layer(self, name, layer, ins) -> list[Static | Streamed]:
        if isinstance(layer, Graph):
            return self._nested(name, layer, ins)
        ctx = LayerContext(
            name=name, layer=layer, module=self.net.layer_modules[name],
            in_specs=self.analysis.in_specs[name], out_specs=self.analysis.out_specs[name],
            static={p: (v.value, v.mask) for p, v in ins.items() if isinstance(v, Static)},
            streamed=tuple(p for p in layer.input_ports if isinstance(ins[p], Streamed)),
            capacity=self.capacity)
        try:
            kind = stepper_for(ctx)
            if isinstance(kind, Route):
                return [ins[p] for p in kind.sources]
            if kind is PER_STEP:
                text = self._per_step_call(ctx, ins)
                per_step = not any(
                    isinstance(v, Static) and ctx.in_specs[p].is_sequence for p, v in ins.items())
            else:
                per_step = False
                text = self._stepper_call(kind, ctx, ins)
        except NotStreamable as e:
            self._problem(name, layer, e)
            return [Streamed("None") for _ in layer.output_ports]
        outs = [self.names.new() for _ in layer.output_ports]
        # a module's masks out are dropped (`_`): streamed steps carry no padding
        lhs = targets_code(convention(layer), outs, None) if kind is PER_STEP \
            else codegen.targets(outs)
        self._line(name, f"{lhs} = {text}")     # names and specs stay out of the code
        reads = [v.var for v in ins.values() if isinstance(v, Streamed)]
        self.entries.append(_Entry(name, f"{lhs} = {text}", reads, outs, per_step))
        return [Streamed(o) for o in outs]

    def _per_step_call(self, ctx, ins) -> str:
        """`fj(a, c0[:, pos:pos + t], masks=(None, None,))`: the module on the new steps; a
        static sequence input is read at the same positions as the streamed steps."""
        args = []
        for p in ctx.layer.input_ports:
            v = ins[p]
            if isinstance(v, Streamed):
                args.append(v.var)
                continue
            c = self._const(v.value)
            if ctx.in_specs[p].is_sequence:
                if v.mask is not None:
                    raise NotStreamable(f"its static input '{p}' is padded, and padding is not "
                                        "carried along the streamed steps",
                                        "give that static input without padding (equal lengths)")
                self.limit = min(self.limit, v.value.shape[1])
                args.append(f"{c}.index_select(1, pos)" if self.static_shapes
                            else f"{c}[:, pos:pos + t]")
            else:
                args.append(c)
        conv = convention(ctx.layer)
        if conv.keyword is None:
            inline = self._inline(ctx.module, args)
            if inline is not None:
                return inline
        # streamed steps carry no padding: every mask is None
        return call_code(conv, self._callable(bound_forward(ctx.module)), args,
                         ["None"] * len(ctx.layer.input_ports))

    def _inline(self, module, args) -> str | None:
        """The common per-step modules written as their torch function on the module's own
        Parameter objects (read live: optimizer steps, load_state_dict and .to() update them
        in place), skipping nn.Module's call and attribute lookups: a decoding step runs ~20
        of them. None for anything else (or a module with hooks, which must run)."""
        if bound_forward(module) is module:                   # hooks: call the module
            return None
        kind = type(module)
        if kind is nn.Linear:
            bias = "None" if module.bias is None else self._const(module.bias)
            return f"{self._callable(F.linear)}({args[0]}, {self._const(module.weight)}, {bias})"
        if kind is nn.LayerNorm and module.elementwise_affine and module.bias is not None:
            # torch.layer_norm is what F.layer_norm calls after its Python-level checks
            return (f"{self._callable(torch.layer_norm)}({args[0]}, "
                    f"{self._const(tuple(module.normalized_shape))}, {self._const(module.weight)}"
                    f", {self._const(module.bias)}, {self._const(float(module.eps))}, "
                    f"{self._const(torch.backends.cudnn.enabled)})")
        if kind is nn.GELU:
            return f"{self._callable(F.gelu)}({args[0]}, approximate={self._const(module.approximate)})"
        if kind is nn.ReLU and not module.inplace:
            return f"{self._callable(F.relu)}({args[0]})"
        if kind is _Embedding:
            return f"{self._callable(embedding_of(module))}({args[0]})"
        if kind is _Sum and len(args) >= 2:
            return " + ".join(args)
        if kind is nn.Identity:
            return args[0]
        if kind is nn.Dropout:
            # the identity in eval mode, read live at each step (a checkpoint's GPT-2 has 25
            # of them: ~15 µs a call each through F.dropout's checks); its forward in training
            return (f"{args[0]} if not {self._const(module)}.training else "
                    f"{self._callable(bound_forward(module))}({args[0]})")
        return None

    def _stepper_call(self, stepper, ctx, ins) -> str:
        self.resets.append(stepper.reset)
        self.steppers[ctx.name] = stepper
        step, wants_pos = stepper.step, stepper.needs_pos
        probe = self._probe(ctx.name)
        if probe is not None:          # through the module's `attend`, which reads the probe
            step = _probed(getattr(stepper, "probed_step", step), ctx.module, probe)
        if self.static_shapes:
            self.prepares.append(stepper.prepare)
            step, wants_pos = stepper.static_step, wants_pos or stepper.static_needs_pos
        args = (["pos"] if wants_pos else []) + [ins[p].var for p in ctx.streamed]
        return f"{self._callable(step)}({', '.join(args)})"

    def _nested(self, name, layer, ins) -> list[Static | Streamed]:
        """A Network used as a layer streams with a program of its own (one line here)."""
        static = {p: v for p, v in ins.items() if isinstance(v, Static)}
        sub = build_program(layer, static, self.capacity, with_static_outputs=False,
                            static_shapes=self.static_shapes, capture=self.capture,
                            prefix=learnable_name(self.prefix + name, ""))
        self.prepares += sub.prepares
        for issue in sub.problems:
            self.problems.append(Issue("error", "stream", f"inside '{name}': {issue.message}",
                                       issue.layer, issue.port))
        self.limit = min(self.limit, sub.limit)
        self.resets.append(sub.reset)
        self.steppers.update(under_layer(name, sub.steppers))
        streamed_outs = [(o, v) for o, v in sub.outputs if isinstance(v, Streamed)]
        if not streamed_outs:
            return [v for _, v in sub.outputs]
        outs = [self.names.new() for _ in streamed_outs]
        args = ["pos", "t"] + [ins[p].var for p in sub.streamed_inputs]
        line = f"{', '.join(outs)}, = {self._callable(sub.fn)}({', '.join(args)})"
        self._line(name, line)
        self.entries.append(_Entry(name, line, [ins[p].var for p in sub.streamed_inputs], outs,
                                   False))
        new = iter(outs)
        return [Streamed(next(new)) if isinstance(v, Streamed) else v for _, v in sub.outputs]

    # -- capture and patch --------------------------------------------------------------------
    def _tap(self, name: str, ports) -> None:
        """Each captured or patched output of layer `name` through its tap: a static value
        once, here; a streamed one by a line of step code (`v9 = f4(v8)`, a new variable,
        so that a patch reaches the layers after it and no other)."""
        if self.capture is None:
            return
        for port in ports:
            if not self.capture.touches(self.prefix + name, port) or \
                    port in INSIDE and isinstance(self.net.layer_modules[name], PROBED):
                continue             # an attention layer's scores output: its probe's
            value = self.values[(name, port)]
            if isinstance(value, Static):
                tap = self.capture.tap(self.prefix + name, port, static=True)
                self.values[(name, port)] = Static(tap(value.value), value.mask)
            elif value.var != "None":                       # "None": a layer that cannot stream
                out = self.names.new()
                text = f"{out} = {self._callable(self.capture.tap(self.prefix + name, port))}" \
                    f"({value.var})"
                self._line(name, text)
                self.entries.append(_Entry(name, text, [value.var], [out], False))
                self.values[(name, port)] = Streamed(out)

    def _probe(self, name: str, static: bool = False):
        """The probe of attention layer `name` when its inside is captured or patched."""
        if self.capture is None or not self.capture.inside(self.prefix + name):
            return None
        return self.capture.probe(self.prefix + name, static)

    def _problem(self, name, layer, e: NotStreamable):
        self.problems.append(Issue("error", "stream", f"layer '{name}' ({layer.type_name}): "
                                   f"{e.reason}. Fix: {e.fix}.", name))

    # -- code -------------------------------------------------------------------------------
    def _callable(self, fn) -> str:
        return self.callables.add(fn)

    def _const(self, value) -> str:
        return self.constants.add(value)

    def _ref(self, v) -> str:
        return v.var if isinstance(v, Streamed) else self._const(v.value)

    def _line(self, name, text):
        self.body.line(text, layer=name)

    def _compile(self, args, returned, body: codegen.Source) -> tuple[Callable, str]:
        """Builds `step` as the closure of a generated factory: the callables and constants
        are closure cells, so the step reads them as fast as locals. The same structure with
        the same layer names shares its code and its line table (names stay out of the source;
        they are part of the key)."""
        free = self.callables.names() + self.constants.names()
        xs = [f"x{self.net.input_names.index(a)}" for a in args]
        src = codegen.Source()
        src.line(f"def make({', '.join(free)}):")
        src.line(f"def step(pos, t{''.join(', ' + x for x in xs)}):", indent=4)
        src.line('"""generated by attnlab.stream"""', indent=8)
        if body.lines:
            src.extend(_dropping(body, returned), indent=8)
        else:
            src.line("pass", indent=8)
        src.line(f"return ({''.join(r + ', ' for r in returned)})", indent=8)
        src.line("return step", indent=4)
        gen = codegen.define(src, "stream", share=True)
        self.line_layers = gen.line_layers
        return gen.namespace["make"](*self.callables.items, *self.constants.items), gen.source


def _probed(run: Callable, module, probe) -> Callable:
    """`run` with `probe` set on the attention module for the duration of each call (the
    module's `attend` reads it), and the module's own probe put back after."""
    def probed(*args):
        before = getattr(module, "probe", None)
        module.probe = probe
        try:
            return run(*args)
        finally:
            module.probe = before
    return probed


@dataclass(frozen=True)
class _Entry:
    """One line of step code: the layer it runs, its text, the streamed variables it reads and
    writes, and whether it runs per step (a time-local module, no static sequence read at
    the steps' positions: its output at a step depends on its inputs at that step alone)."""

    layer: str
    text: str
    reads: list[str]
    writes: list[str]
    per_step: bool


def _last_only(entries: list[_Entry], returned: list[str],
               streamed: list[bool]) -> tuple[list[tuple[str, str]], list[str]]:
    """The step's lines and returned values when only the last new step of each output is
    wanted: per-step lines whose outputs feed no layer that looks along time (the tail after
    the last attention: a language model's final norm and head) read the last step of their
    inputs (`v[:, -1:]`) and compute it alone; streamed outputs come back B×1×C'. The
    prefill of a prompt then makes its logits for the last position only, as transformers'
    generate does."""
    whole: set[str] = set()          # variables some line needs at every new step
    tail: set[int] = set()
    for i in range(len(entries) - 1, -1, -1):
        e = entries[i]
        if e.per_step and not whole.intersection(e.writes):
            tail.add(i)
        else:
            whole.update(e.reads)
    lines: list[tuple[str, str]] = []
    last: set[str] = set()           # variables that hold the last step alone
    for i, e in enumerate(entries):
        text = e.text
        if i in tail:
            for var in dict.fromkeys(e.reads):
                if var not in last:
                    if f"{var}l" not in last:
                        lines.append((e.layer, f"{var}l = {var}[:, -1:]"))
                        last.add(f"{var}l")
                    text = _rename(text, var, f"{var}l")
            last.update(e.writes)
        lines.append((e.layer, text))
    rets = [r if not s or r in last else f"{r}[:, -1:]" for r, s in zip(returned, streamed)]
    return lines, rets


_VAR = re.compile(r"\bv\d+l?\b")          # a step's own variables (v3; v3l, its last step)


def _dropping(body: codegen.Source, returned: list[str]) -> codegen.Source:
    """`body` with `del v…` after the line that reads each variable last (as the forward
    plan does): a prefill then holds a few activations at a time, as a hand-written forward
    whose locals go out of scope, not every layer's until the step returns (all of them
    alive at once: several MiB for a 16-token prompt of a small Llama)."""
    kept = {v for r in returned for v in _VAR.findall(r)}
    last: dict[str, int] = {}
    for i, text in enumerate(body.lines):
        for v in _VAR.findall(text):
            last[v] = i
    dying: dict[int, list[str]] = {}
    for v, i in last.items():
        if v not in kept:
            dying.setdefault(i, []).append(v)
    out = codegen.Source()
    for i, text in enumerate(body.lines):
        out.line(text, layer=body.layers.get(i + 1))
        if i in dying:
            out.line(f"del {', '.join(dying[i])}")
    return out


def _rename(text: str, var: str, new: str) -> str:
    """`var` → `new` where it stands as a whole name in generated code (v1 is not v12)."""
    return re.sub(rf"\b{var}\b", new, text)
