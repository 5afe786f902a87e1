"""A network's plan: its forward pass as a plain Python function, generated once per graph edit.

The generated code calls each layer's module in topological order with local variables, as a
hand-written `forward` would: no dict lookups or graph walking per call. Masks travel beside
sequence activations as their own variables (None when the batch has no padding); each call
follows the module calling convention (`attnlab.graph.convention`).

The code is written and run by `attnlab.graph.codegen`: it holds only identifiers made there (`m3`,
`v7`, `x0`, …); layer names and specs, which come from users and files, stay in the side
table `Plan.line_layers` (line → layer) and never enter the code, not even a comment.

A traced plan (`build_plan(net, analysis, taps, modules)`, for `net.trace`) is the same code
with one more line after each value a trace asks for: `v7 = m9(3, v7)`, the tap called with
the value's index in `taps` (a literal made here), which keeps the value and returns it or its
replacement. Values not asked for cost nothing; `modules` replaces some layers' modules (a
nested network's own traced plan).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

from attnlab.graph import codegen
from attnlab.graph.analysis import Analysis
from attnlab.graph.convention import call_code, convention, passed_masks, targets_code


@dataclass
class Plan:
    fn: Callable                         # fn(mods, x0, k0, x1, k1, …) → (outputs, masks)
    mods: tuple
    source: str
    line_layers: dict[int, str]          # line number in the source → layer name
    filename: str = ""                   # the generated file (tracebacks name it)


def build_plan(net, analysis: Analysis, taps: Sequence[codegen.Key] = (),
               tap: Optional[Callable[[int, Any], Any]] = None,
               modules: Optional[dict[str, Any]] = None) -> Plan:
    """The plan of `net` as `analysis` found it (its modules built). A traced plan: `tap` is
    called as `tap(i, value)` on the value of each key `taps[i]` (a layer's output port, or
    an input's key) right after it is made, and its result stands for the value from then on;
    `modules` calls these modules instead of the layers' own (by layer name)."""
    var: dict[codegen.Key, str] = {}        # (layer, port) → tensor variable
    mvar: dict[codegen.Key, str] = {}       # (layer, port) → mask variable or "None"
    args = []
    mods = codegen.Refs("m")
    tapped = {k: i for i, k in enumerate(taps)}
    tap_fn = mods.add(tap) if tap is not None else ""
    opening = []                            # the inputs' taps, first thing in the body
    for i, name in enumerate(net.input_names):
        args += [f"x{i}", f"k{i}"]
        key = codegen.input_key(net, name)
        var[key], mvar[key] = f"x{i}", f"k{i}"
        if key in tapped:
            opening.append(f"x{i} = {tap_fn}({tapped[key]}, x{i})")

    names = codegen.Names("v")
    steps = []                              # (layer, call line, variables it reads, it makes)
    for name, layer, keys in codegen.walk(net, analysis.order):
        ins, ims = [var[k] for k in keys], [mvar[k] for k in keys]
        fn = mods.add((modules or {}).get(name, net.layer_modules[name]))
        outs = [names.new() for _ in layer.output_ports]
        conv = convention(layer)
        if conv.returns_masks:
            omasks = [codegen.mask_var(o) for o in outs]
        else:
            omasks = passed_masks(layer, ims, analysis.in_specs[name], analysis.out_specs[name],
                                  none="None")
        made = outs + (omasks if conv.returns_masks else [])
        line = f"{targets_code(conv, outs, omasks)} = {call_code(conv, fn, ins, ims)}"
        for o, port in zip(outs, layer.output_ports):      # on the layer's line: its errors
            if (name, port) in tapped:
                line += f"; {o} = {tap_fn}({tapped[(name, port)]}, {o})"
        steps.append((name, f"{line}  # layer {fn[1:]}", ins + ims, made))
        for o, om, port in zip(outs, omasks, layer.output_ports):
            var[(name, port)], mvar[(name, port)] = o, om

    keys = [k for _, k in codegen.output_keys(net)]
    # an activation is dropped after the last layer that reads it, as a hand-written forward's
    # locals go out of scope: inference then holds a few activations at a time, not all of them
    kept = {var[k] for k in keys} | {mvar[k] for k in keys}
    last = {v: i for i, (_, _, _, made) in enumerate(steps) for v in made}
    last.update({v: i for i, (_, _, reads, _) in enumerate(steps) for v in reads if v in last})
    dying: dict[int, list[str]] = {}        # step → the activations it reads last
    for v, j in last.items():
        if v not in kept:
            dying.setdefault(j, []).append(v)
    body = codegen.Source()
    for line in opening:
        body.line(line, indent=4)
    for i, (name, line, _, made) in enumerate(steps):
        body.line(line, layer=name, indent=4)
        dead = sorted(dying.get(i, ()), key=lambda v: (v[0], int(v[1:])))
        if dead:
            body.line(f"del {', '.join(dead)}", indent=4)
    src = codegen.Source()
    src.line(f"def plan(mods, {', '.join(args)}):")
    src.line('"""generated by attnlab.graph.plan"""', indent=4)
    src.line(codegen.unpack(mods.names(), "mods"), indent=4)
    src.extend(body)
    src.line(f"return ({', '.join(var[k] for k in keys)},), ({', '.join(mvar[k] for k in keys)},)",
             indent=4)
    gen = codegen.define(src, "plan")
    return Plan(fn=gen.namespace["plan"], mods=tuple(mods.items), source=gen.source,
                line_layers=gen.line_layers, filename=gen.filename)
