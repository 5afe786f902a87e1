"""Activation checkpointing (`TrainingOptions.checkpoint_activations`): each block's
activations recomputed in the backward pass instead of kept from the forward.

A block is a nested network (one layer whose module is a `Network`) or a repeated block of a
`from_pretrained` network: the layers whose names start with the same numbered prefix
("h.0.attn", "h.0.mlp.c_fc" → "h.0"; "model.layers.3.self_attn" → "model.layers.3"). The
forward walks the graph in the plan's order with the module calling convention; each run of
consecutive layers of one block goes through `torch.utils.checkpoint` (non-reentrant, the RNG
state restored for dropout), so its outputs are the same numbers and its gradients the same.
"""
from __future__ import annotations

import re
from typing import Any

import torch
from torch.utils.checkpoint import checkpoint

from attnlab.core.errors import ArgumentError
from attnlab.graph import Graph, codegen
from attnlab.graph.analysis import analyze
from attnlab.graph.convention import call, passed_masks

_NUMBERED = re.compile(r"^(.+?\.\d+)\.")


def block_of(name: str, layer: Any) -> str | None:
    """The block a layer belongs to: its own name for a nested network, the numbered prefix
    of a repeated block's layer ("h.0.attn" → "h.0"), else None."""
    if isinstance(layer, Graph):
        return name
    m = _NUMBERED.match(name)
    return m.group(1) if m else None


class Segment:
    """Consecutive layers of one block (or of none): what they read from before, what they
    make, and what of that is read after them."""

    def __init__(self, block: str | None, steps: list):
        self.block, self.steps = block, steps
        made = {(n, p) for n, layer, _ in steps for p in layer.output_ports}
        self.reads = list(dict.fromkeys(k for _, _, keys in steps for k in keys if k not in made))
        self.made = made
        self.hands_on: list = []


def segments(steps: list) -> list[Segment]:
    """`steps` (name, layer, input keys) grouped into runs of one block each."""
    out: list[Segment] = []
    for step in steps:
        block = block_of(step[0], step[1])
        if out and out[-1].block == block:
            out[-1].steps.append(step)
        else:
            out.append(Segment(block, [step]))
    return [Segment(s.block, s.steps) for s in out]


class CheckpointedForward:
    """`forward_with_masks` of `net` with each block checkpointed: (outputs, masks) by name."""

    def __init__(self, net: Any):
        self.net = net
        analysis = analyze(net, net.data_specs)
        self.in_specs, self.out_specs = analysis.in_specs, analysis.out_specs
        self.in_keys = [codegen.input_key(net, n) for n in net.input_names]
        self.out_keys = [k for _, k in codegen.output_keys(net)]
        self.segments = segments(list(codegen.walk(net, analysis.order)))
        later = set(self.out_keys)
        self.live: list[set] = []                 # the values still read after each segment
        for seg in reversed(self.segments):       # what each segment must hand on
            seg.hands_on = [k for k in sorted(seg.made, key=str) if k in later]
            self.live.append(set(later))
            later |= set(seg.reads)
        self.live.reverse()
        self.blocks = sorted({s.block for s in self.segments if s.block is not None})

    def __call__(self, inputs: Any):
        net = self.net
        flat = net._flatten_inputs((inputs,), {})
        try:
            outs, masks = self._run(flat)
        except (RuntimeError, IndexError, ValueError) as e:
            raise net._translate(e, flat[0::2]) from None
        names = net.output_names
        return dict(zip(names, outs)), dict(zip(names, masks))

    def _run(self, flat: list):
        vals = {k: flat[2 * i] for i, k in enumerate(self.in_keys)}
        masks = {k: flat[2 * i + 1] for i, k in enumerate(self.in_keys)}
        for i, seg in enumerate(self.segments):
            xs = [vals[k] for k in seg.reads]
            ms = [masks[k] for k in seg.reads]
            if seg.block is None or not torch.is_grad_enabled():
                got = self._segment(seg, xs, ms)
            else:
                got = checkpoint(self._segment, seg, xs, ms, use_reentrant=False)
            for k, (v, m) in zip(seg.hands_on, got):
                vals[k], masks[k] = v, m
            for k in [k for k in vals if k not in self.live[i]]:   # dropped after its last reader
                del vals[k], masks[k]
        return tuple(vals[k] for k in self.out_keys), tuple(masks[k] for k in self.out_keys)

    def _segment(self, seg: Segment, xs: list, ms: list) -> list:
        vals, masks = dict(zip(seg.reads, xs)), dict(zip(seg.reads, ms))
        mods = self.net.layer_modules
        for name, layer, keys in seg.steps:
            ins, ims = [vals[k] for k in keys], [masks[k] for k in keys]
            outs, returned = call(layer, mods[name], ins, ims)
            omasks = list(returned) if returned is not None else \
                passed_masks(layer, ims, self.in_specs[name], self.out_specs[name])
            for p, o, om in zip(layer.output_ports, outs, omasks):
                vals[(name, p)], masks[(name, p)] = o, om
        return [(vals[k], masks[k]) for k in seg.hands_on]


def checkpointed(net: Any) -> CheckpointedForward:
    """The checkpointed forward of `net`; a network without blocks is refused, since nothing
    would be recomputed."""
    fwd = CheckpointedForward(net)
    if not fwd.blocks:
        raise ArgumentError("TrainingOptions checkpoint_activations=True: the network has no "
                            "blocks to recompute. A block is a nested network (e.g. "
                            "al.blocks.transformer_encoder(...) used as a layer) or the layers "
                            "of one numbered prefix ('h.0.attn', 'h.0.mlp', …, as from_pretrained "
                            "names them). Rename the layers so, or leave the option False.")
    return fwd
