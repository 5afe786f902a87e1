"""How a layer's module is called: one convention for the forward plan, a stream (its static
part and its per-step lines) and the ONNX exporter.

- The tensors at the input ports go positionally, in port order.
- Masks (one per input port: B×T bool, True = real step, or None) go by keyword: `masks=` for
  a layer that `uses_mask` or `returns_mask`, `_masks=` for a nested network (a `Graph`
  layer); other layers get none.
- A nested network returns `(outputs, masks)`, tuples over its output ports. A layer that
  `returns_mask` returns `(output, mask)` with one output port, `(outputs, masks)` with
  several. Any other layer returns one tensor, or a tuple with several output ports; its
  sequence outputs keep the padding mask of its first sequence input (`passed_masks`).

`convention(layer)` says which case a layer is; `call` runs a module by it, and `call_code` /
`targets_code` write the same call as generated code (`attnlab.graph.codegen`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from attnlab.graph.codegen import targets
from attnlab.graph import Graph


@dataclass(frozen=True)
class Convention:
    keyword: str | None      # the keyword the masks go by; None: the module takes none
    returns_masks: bool      # the module returns (outputs, masks)
    tuples: bool             # outputs (and returned masks) come as tuples


def convention(layer: Any) -> Convention:
    """The calling convention of `layer`'s module (see the module doc)."""
    several = len(layer.output_ports) > 1
    if isinstance(layer, Graph):
        return Convention("_masks", True, True)
    if layer.returns_mask:
        return Convention("masks", True, several)
    return Convention("masks" if layer.uses_mask else None, False, several)


def passed_masks(layer: Any, masks: Sequence, in_specs: dict, out_specs: dict,
                 none: Any = None) -> list:
    """The masks of the outputs of a layer that returns none: its first sequence input's mask
    for each sequence output, `none` for the others. `masks` are those of its input ports
    (tensors, or variable names in generated code, where `none` is "None")."""
    seq = next((m for p, m in zip(layer.input_ports, masks) if in_specs[p].is_sequence), none)
    return [seq if out_specs[p].is_sequence else none for p in layer.output_ports]


def call(layer: Any, module: Any, xs: Sequence, masks: Sequence) -> tuple[tuple, tuple | None]:
    """Runs `module` on the input tensors `xs` with their `masks`: (outputs, their masks), a
    tuple over the output ports each; the masks None when the module returns none (then
    `passed_masks` gives them)."""
    conv = convention(layer)
    r = module(*xs, **{conv.keyword: tuple(masks)}) if conv.keyword else module(*xs)
    if conv.returns_masks:
        outs, ms = r
        return (tuple(outs), tuple(ms)) if conv.tuples else ((outs,), (ms,))
    return (tuple(r) if conv.tuples else (r,)), None


def call_code(conv: Convention, fn: str, args: Sequence[str], masks: Sequence[str]) -> str:
    """`fn(a, b, masks=(k, None,))`: the call as generated code; `args`, `masks` and `fn` are
    variable names of the generated code (never names from the network)."""
    kw = f", {conv.keyword}=({', '.join(masks)},)" if conv.keyword else ""
    return f"{fn}({', '.join(args)}{kw})"


def targets_code(conv: Convention, outs: Sequence[str], masks: Sequence[str] | None) -> str:
    """The left-hand side that takes the call's result apart into the variables `outs` and,
    when the module returns masks, `masks` (None: they are dropped, `_`)."""
    if not conv.returns_masks:
        return targets(list(outs))
    if conv.tuples:
        return f"({', '.join(outs)},), " + (f"({', '.join(masks)},)" if masks is not None else "_")
    return f"{outs[0]}, " + (masks[0] if masks is not None else "_")
