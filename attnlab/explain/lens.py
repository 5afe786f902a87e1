"""The logit lens (nostalgebraist 2020): each block's residual output read through the final
norm and the head, the layers after the last block, as if the network stopped there."""
from __future__ import annotations

from typing import Any

import torch

from attnlab.core.errors import NetworkError
from attnlab.explain.inputs import as_dict, called, token_labels
from attnlab.explain.mixing import attention_layers
from attnlab.explain.results import LogitLens
from attnlab.graph import codegen
from attnlab.graph.analysis import analyze
from attnlab.graph.convention import call
from attnlab.graph.names import format_port
from attnlab.training.checkpointing import block_of

EXPECTED = ("logit_lens expects a causal language model: token ids in, repeated blocks of "
            "causal attention (from_pretrained's 'h.0', 'layers.0', … or nested networks), "
            "then the layers of the head, logits B×T×V out")


class Lens:
    """The parts of a causal LM the lens reads: each block's output key, in order, and the
    head (name, layer, input keys) from the last block's output to the logits."""

    def __init__(self, net: Any):
        analysis = analyze(net, net.data_specs)
        steps = list(codegen.walk(net, analysis.order))
        ends: dict[str, tuple[int, tuple[str, str]]] = {}
        for i, (name, layer, _) in enumerate(steps):
            block = block_of(name, layer)
            if block is not None:
                ends[block] = (i, (name, layer.output_ports[0]))
        self._check(net, analysis, ends)
        self.blocks = list(ends)
        self.keys = [k for _, k in ends.values()]
        last = max(i for i, _ in ends.values())
        self.head, known = [], {self.keys[-1]}
        for name, layer, keys in steps[last + 1:]:
            if all(k in known for k in keys):
                self.head.append((name, layer, keys))
                known |= {(name, p) for p in layer.output_ports}
        outs = [k for _, k in codegen.output_keys(net)]
        if len(outs) != 1 or outs[0] not in known:
            raise NetworkError(f"{EXPECTED}; the output of {called(net)} is not made from the "
                               f"last block's output ('{self.keys[-1][0]}') by the layers "
                               "after it alone.")
        self.out = outs[0]

    @staticmethod
    def _check(net: Any, analysis: Any, ends: dict) -> None:
        tokens = [n for n in net.input_names if n in net.token_inputs]
        attention = attention_layers(net)
        causal = [n for n in attention
                  if getattr(_layer(net, n), "attention_mask", None) == "causal"]
        found = []
        if not tokens:
            found.append("no token input")
        if not ends:
            found.append("no blocks")
        if not causal or len(causal) != len(attention):
            found.append("attention that is not causal" if attention else "no attention")
        outs = codegen.output_keys(net)
        if len(outs) != 1 or not analysis.out_specs[outs[0][1][0]][outs[0][1][1]].is_sequence:
            found.append(f"{len(outs)} outputs" if len(outs) != 1 else "an output that is not "
                         "a sequence")
        if found:
            raise NetworkError(f"{EXPECTED}; {called(net)} has {', '.join(found)}. Use "
                               "al.explain.rollout or integrated_gradients for other networks.")

    def apply(self, net: Any, value: torch.Tensor) -> torch.Tensor:
        """A block's output through the head: the logits it would give."""
        vals = {self.keys[-1]: value}
        mods = net.layer_modules
        for name, layer, keys in self.head:
            outs, _ = call(layer, mods[name], [vals[k] for k in keys], [None] * len(keys))
            vals.update({(name, p): o for p, o in zip(layer.output_ports, outs)})
        return vals[self.out]


def _layer(net: Any, full: str) -> Any:
    """The layer named `full` ("outer/inner" inside nested networks)."""
    layer = net
    for part in full.split("/"):
        layer = layer.layer_map[part]
    return layer


def logit_lens(net: Any, inputs: Any) -> LogitLens:
    """The logit lens: each block's residual output through the layers after the last block
    (the final norm and the head), as if the network stopped there.

    Parameters
    ----------
    net : Network
        A causal language model: token ids in, blocks of causal attention, logits out.
    inputs : tensor or dict
        Token ids, B×T.

    Returns
    -------
    LogitLens
        ``logits``, blocks×B×T×V (the last block's equal the network's logits), and the
        table of top tokens, ``top(k)``.
    """
    lens = Lens(net)
    given = as_dict(net, inputs, "logit_lens")
    names = [format_port(n, p) for n, p in lens.keys]
    with torch.no_grad():
        trace = net.trace(given, capture=names)
        logits = torch.stack([lens.apply(net, trace[n]) for n in names])
    tokens = [n for n in net.input_names if n in net.token_inputs]
    return LogitLens(logits, lens.blocks, token_labels(net, given, tokens[0]))

