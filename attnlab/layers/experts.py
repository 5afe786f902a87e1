"""A sparse mixture of experts: the feed-forward of Mixtral, each token computed by a few of
many SwiGLU experts that a learned router picks for it."""
from __future__ import annotations

import torch
from torch import nn

from attnlab.core import checks as check
from attnlab.core.spec import Spec
from .base import Layer
from .dense import _GATE_ALIASES, _GATES

# Each expert is three torch modules, made one by one (on the meta device whenever the analysis
# counts learnables): 10**9 experts is a typo that would take hours and tens of GB before any
# size rule ran. Published models use a few hundred at most (Mixtral 8, DeepSeek-V3 256, Qwen3-Next 512).
MAX_EXPERTS = 1024


class MixtureOfExperts(Layer):
    """Sparse mixture of experts, Mixtral's feed-forward (transformers' `MixtralSparseMoeBlock`).

    Each step's channels x are scored by a router (a linear map to `num_experts` logits,
    softmax over them); the step goes to the `top_k` experts of highest probability, and the
    output is the sum of those experts' outputs, each weighted by its probability divided by
    the sum of the top_k probabilities (a step's weights sum to 1). Expert e is a SwiGLU
    feed-forward, ``down_e(activation(gate_e(x)) * up_e(x))``. Only the chosen experts compute a
    step (one pass per expert over the steps routed to it); every expert's learnables get a
    gradient, zero where no step chose it. The routing weights are computed in float32, as
    transformers does. Each step is computed on its own, so the layer streams step by step.

    Learnables (no biases; out×in, as `torch.nn.Linear`): `router.weight`
    (num_experts×C), and for each expert e = 0…num_experts−1 `experts.{e}.gate.weight` and
    `experts.{e}.up.weight` (units×C) and `experts.{e}.down.weight` (C×units).

    Parameters
    ----------
    num_experts : int
        The experts (Mixtral: `num_local_experts`, 8), at most `MAX_EXPERTS` (1024).
    units : int
        Each expert's inner size (Mixtral: `intermediate_size`).
    top_k : int
        The experts each step goes to, at most num_experts (Mixtral: `num_experts_per_tok`, 2).
    activation : str
        The gate's activation, as `GLU`'s: "silu" (also spelt "swish"), "gelu", "gelu-tanh",
        "relu", "sigmoid" or "tanh".

    Shape
    -----
    - `in`: B×T×C or B×C
    - `out`: the same spec (B×T×C or B×C)

    Examples
    --------
    >>> import attnlab as al
    >>> from attnlab import layers as L
    >>> net = al.Network([L.SequenceInput(8), L.MixtureOfExperts(4, 16, top_k=2, name="moe")])
    >>> [(k, tuple(v.shape)) for k, v in net.learnables.items()][:4]
    [('moe/router.weight', (4, 8)), ('moe/experts.0.gate.weight', (16, 8)), ('moe/experts.0.up.weight', (16, 8)), ('moe/experts.0.down.weight', (8, 16))]
    """

    stem = "moe"
    time_local = True

    def __init__(self, num_experts: int, units: int, top_k: int = 2, activation: str = "silu",
                 name: str | None = None):
        super().__init__(name)
        self.num_experts = check.integer(self, "num_experts", num_experts, most=MAX_EXPERTS,
                                         example=8)
        self.units = check.integer(self, "units", units, example=256)
        self.top_k = check.integer(self, "top_k", top_k, most=self.num_experts, example=2)
        if isinstance(activation, str) and activation in _GATE_ALIASES:
            activation = _GATE_ALIASES[activation]
        self.activation = check.choice(self, "activation", activation, tuple(_GATES))

    def infer(self, specs: dict[str, Spec]) -> Spec:
        s = specs["in"]
        self.require(s, "in", ("BTC", "BC"), "MixtureOfExperts maps each step's channels; "
                     "flatten images first (Flatten) or make them sequences (ImageToSequence).")
        check.learnables_fit(self, "in", "Use fewer experts or units.",
                             experts=(self.num_experts, 3 * self.units, s.channels))
        return s

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return _MixtureOfExperts(check.known(self, "in", specs["in"].channels), self.num_experts,
                                 self.units, self.top_k, self.activation)


class _Expert(nn.Module):
    """One SwiGLU expert: down(act(gate(x)) * up(x))."""

    def __init__(self, channels: int, units: int, activation: str):
        super().__init__()
        self.gate = nn.Linear(channels, units, bias=False)
        self.up = nn.Linear(channels, units, bias=False)
        self.down = nn.Linear(units, channels, bias=False)
        self.act = _GATES[activation]

    def forward(self, x):
        return self.down(self.act(self.gate(x)) * self.up(x))


class _MixtureOfExperts(nn.Module):
    def __init__(self, channels: int, num_experts: int, units: int, top_k: int,
                 activation: str):
        super().__init__()
        self.router = nn.Linear(channels, num_experts, bias=False)
        self.experts = nn.ModuleList(_Expert(channels, units, activation)
                                     for _ in range(num_experts))
        self.top_k = top_k
        self.activation = activation

    def route(self, x):
        """(the router's logits N×E, each step's top_k weights N×k in float32, renormalised,
        and its top_k experts N×k) for the steps x N×C."""
        logits = self.router(x)
        weights, chosen = torch.softmax(logits.float(), dim=-1).topk(self.top_k, dim=-1)
        return logits, weights / weights.sum(dim=-1, keepdim=True), chosen

    def forward(self, x):                                       # B×T×C (or B×C) → the same
        steps = x.reshape(-1, x.shape[-1])                      # N×C
        _, weights, chosen = self.route(steps)
        out = torch.zeros_like(steps)
        for e, expert in enumerate(self.experts):               # a pass per expert, not per step
            step, slot = torch.where(chosen == e)               # the steps routed to expert e
            y = expert(steps[step]) * weights[step, slot].unsqueeze(-1)
            out = out.index_add(0, step, y.to(out.dtype))
        return out.reshape(x.shape)

    def extra_repr(self) -> str:
        return f"top_k={self.top_k}, activation={self.activation!r}"
