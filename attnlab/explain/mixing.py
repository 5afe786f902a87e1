"""The graph walk of attention rollout and relevance: for each value of a network, a
token-mixing matrix to the positions of the inputs.

A value's `Mix` holds, for each *basis* (a set of positions where tokens enter the network: a
sequence input, or the sequence a layer makes from something else, such as the patches of an
image or the steps after a class token), a B×T×Tbasis matrix: how much of each basis position
the value's steps carry. The walk follows the graph in the plan's order:

- an attention layer: its head-mean weights (B×Tq×Tk) times the matrix of its value input;
- an `Addition`: the mean (rollout) or the sum (relevance) of its inputs' matrices, each
  distinct matrix once: `x + attn(x)` gives 0.5·I + 0.5·A (Abnar & Zuidema) or I + Ā
  (Chefer et al.), and `x + mlp(x)` keeps x's matrix, as both papers' formulas do; inputs that
  carry no token (a position embedding) do not count; inputs that are all unmixed
  identities (the token, type and position embeddings of one sequence) stay one identity;
- a time-local layer: its (first) input's matrix, unchanged;
- a recurrent layer (LSTM, GRU): unchanged too. Its own mixing along time is not attention
  and has no weights to follow, so rollout measures what attention moves and reads each
  recurrent step as carrying its own step: a choice, written here and in the docs;
- a position term (`PositionEmbedding`, `SinusoidalPositionEncoding`,
  `TokenPositionEmbedding`): no token, no matrix;
- a layer that makes a sequence from something that is not one (patches of an image), or
  prepends steps to an unmixed sequence (a class token): a new basis, its own positions;
- a layer whose output is not a sequence (pooling, `Index1d`): no matrix;
- a layer that passes values on unchanged (`keeps_ids`: a combinator's ports, a pick of
  items): their matrices, unchanged;
- a nested network: walked inside, its layers named "outer/inner".
Any other layer that looks along time (a convolution over time, a pooling that keeps time)
is refused, naming it: its mixing has no weights here, and a guess would be a different
result, silently.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import torch
from torch import Tensor

from attnlab.core.errors import NetworkError
from attnlab.graph import Graph, codegen
from attnlab.graph.analysis import analyze
from attnlab.layers.attention_base import _Heads
from attnlab.layers.combine import Addition
from attnlab.layers.position import (PositionEmbedding, SinusoidalPositionEncoding,
                                     TokenPositionEmbedding)
from attnlab.layers.recurrent import _Recurrent

# layers whose output is a function of positions alone: they carry no token
POSITION_TERMS = (PositionEmbedding, SinusoidalPositionEncoding, TokenPositionEmbedding)

Weights = Callable[[str], Tensor]     # attention layer's full name → B×Tq×Tk weights


class Mix:
    """A value's token mixing: basis → B×T×Tbasis matrix, None standing for the identity of
    an unmixed sequence (its size is known only once a matrix meets it)."""

    def __init__(self, terms: dict[str, Optional[Tensor]]):
        self.terms = terms

    @property
    def fresh(self) -> bool:
        """An unmixed sequence: the identity of one basis."""
        return len(self.terms) == 1 and next(iter(self.terms.values())) is None

    @staticmethod
    def identity(basis: str) -> "Mix":
        return Mix({basis: None})

    def weighted(self, w: Tensor) -> "Mix":
        """w (B×Tq×Tk) applied to this value's steps: w · M for each basis."""
        return Mix({b: w if m is None else torch.bmm(w, m.to(w.dtype))
                    for b, m in self.terms.items()})


def _dense(m: Optional[Tensor], like: Tensor) -> Tensor:
    """m, the identity made explicit in the size of `like` (B×T×T) when it is None."""
    if m is not None:
        return m
    b, t = like.shape[0], like.shape[1]
    return torch.eye(t, dtype=like.dtype, device=like.device).expand(b, t, t)


def combine(mixes: list[Optional[Mix]], mean: bool) -> Optional[Mix]:
    """The mix of an addition of values with these mixes (see the module doc)."""
    distinct: list[Mix] = []
    for m in mixes:
        if m is not None and not any(m is d for d in distinct):
            distinct.append(m)
    if not distinct:
        return None
    if all(m.fresh for m in distinct):
        return distinct[0]
    like = next(t for m in distinct for t in m.terms.values() if t is not None)
    terms: dict[str, Tensor] = {}
    for m in distinct:
        for b, t in m.terms.items():
            t = _dense(t, like)
            terms[b] = terms[b] + t if b in terms else t
    scale = 1.0 / len(distinct) if mean else 1.0
    return Mix({b: t * scale for b, t in terms.items()})


class Walk:
    """One walk of `net`: `weights(name)` gives each attention layer's weights (by its full
    name, "outer/inner" inside a nested network); `mean`: additions average (rollout) or sum
    (relevance). `last` is the mix of the last value the walk mixed, `attention` the attention
    layers met, in order."""

    def __init__(self, weights: Weights, mean: bool):
        self.weights, self.mean = weights, mean
        self.last: Optional[Mix] = None
        self.attention: list[str] = []

    def run(self, net: Any, inputs: dict[str, Optional[Mix]], specs: Optional[dict] = None,
            prefix: str = "") -> dict:
        """The mixes of `net`'s values, from those of its inputs (by input name; missing: a
        sequence input is a basis of its own, named after it). `specs`: the input specs of a
        nested network, by input name."""
        analysis = analyze(net, specs if specs is not None else net.data_specs)
        vals: dict = {}
        for n in net.input_names:
            key = codegen.input_key(net, n)
            given = inputs.get(n, Mix.identity(prefix + n))
            vals[key] = given if _input_spec(n, key, analysis).is_sequence else None
        for name, layer, keys in codegen.walk(net, analysis.order):
            ins = [vals.get(k) for k in keys]
            outs = self.layer(prefix + name, layer, ins, analysis.in_specs[name],
                              analysis.out_specs[name])
            for p, m in zip(layer.output_ports, outs):
                vals[(name, p)] = m
            mixed = [m for m in outs if m is not None and not m.fresh]
            if mixed:
                self.last = mixed[0]
        return vals

    def layer(self, name: str, layer: Any, ins: list, in_specs: dict, out_specs: dict) -> list:
        """The mixes of a layer's outputs, one per output port."""
        ports = layer.output_ports
        seq_out = [out_specs[p].is_sequence for p in ports]
        if isinstance(layer, Graph):
            return self.nested(name, layer, ins, in_specs)
        if isinstance(layer, _Heads):
            return [self.attend(name, layer, ins) if p == "out" else None for p in ports]
        if isinstance(layer, POSITION_TERMS) or not any(seq_out):
            return [None] * len(ports)
        passed = _passed_on(layer, ins, in_specs, out_specs)
        if passed is not None:
            return passed
        if isinstance(layer, Addition) or (layer.time_local and len(ins) > 1):
            return [combine(ins, self.mean) if s else None for s in seq_out]
        seq_in = [m for m, p in zip(ins, layer.input_ports) if in_specs[p].is_sequence]
        if layer.time_local or isinstance(layer, _Recurrent):
            first = next((m for m in seq_in if m is not None), None)
            return [first if s else None for s in seq_out]
        if not seq_in or all(m is None or m.fresh for m in seq_in):
            return [Mix.identity(name) if s else None for s in seq_out]   # new positions
        raise NetworkError(
            f"layer '{name}' ({type(layer).__name__}) mixes time steps in a way that has no "
            "attention weights to follow, after attention has mixed them. Rollout and "
            "relevance follow attention layers, additions, time-local and recurrent layers; "
            "explain a network whose other layers along time come before its first attention.")

    def attend(self, name: str, layer: Any, ins: list) -> Optional[Mix]:
        """An attention layer's output: its weights times its value input's mix."""
        self.attention.append(name)
        port = "value" if "value" in layer.input_ports else "in"
        source = ins[layer.input_ports.index(port)]
        if source is None:
            return None
        return source.weighted(self.weights(name))

    def nested(self, name: str, inner: Any, ins: list, in_specs: dict) -> list:
        """A nested network's outputs, walked inside (its input ports are its input names)."""
        given = dict(zip(inner.input_names, ins))
        specs = {n: in_specs[p] for n, p in zip(inner.input_names, inner.input_ports)}
        vals = self.run(inner, given, specs, prefix=name + "/")
        return [vals.get(k) for _, k in codegen.output_keys(inner)]


def _passed_on(layer: Any, ins: list, in_specs: dict, out_specs: dict) -> Optional[list]:
    """The mixes of a layer that passes its values on unchanged (`keeps_ids`): a combinator's
    port (one input, the same spec out) or a pick of items (`indices`); None for others."""
    if not getattr(layer, "keeps_ids", False):
        return None
    indices = getattr(layer, "indices", None)
    if isinstance(indices, (list, tuple)) and len(indices) == len(layer.output_ports):
        return [ins[i] for i in indices]
    if len(ins) == 1 and len(layer.output_ports) == 1 and \
            in_specs[layer.input_ports[0]] == out_specs[layer.output_ports[0]]:
        return list(ins)
    return None


def _input_spec(name: str, key: tuple, analysis: Any) -> Any:
    """The spec of network input `name`: an input layer's output, or an open port's input."""
    if key[0] != "<in>":
        return analysis.out_specs[key[0]][key[1]]
    layer, _, port = name.partition("/")
    specs = analysis.in_specs[layer]
    return specs[port] if port else next(iter(specs.values()))


def attention_layers(net: Any, prefix: str = "") -> list[str]:
    """The full names of `net`'s attention layers, nested ones "outer/inner", in graph order."""
    analysis = analyze(net, net.data_specs)
    found: list[str] = []
    for name, layer, _ in codegen.walk(net, analysis.order):
        if isinstance(layer, Graph):
            found += attention_layers(layer, prefix + name + "/")
        elif isinstance(layer, _Heads):
            found.append(prefix + name)
    return found
