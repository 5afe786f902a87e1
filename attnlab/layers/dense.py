"""Dense layers, activations and dropout."""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn
from torch.nn import functional as F

from attnlab.core.spec import Spec
from attnlab.core import checks as check
from .base import Layer
from .tying import TiesWeight, tied_to_argument


class Dense(TiesWeight, Layer):
    """Fully connected layer [fullyConnectedLayer].

    Applied to each time step of a sequence; an image is flattened first, as MATLAB does.
    Learnables `weight` (out×in) and `bias`, laid out as in `torch.nn.Linear`.

    Parameters
    ----------
    out : int
        Channels out.
    bias : bool
        Whether to learn a bias.
    tied_to : str, optional
        The name of a layer (an `Embedding`) whose `weight` this layer shares: the output
        projection of a language model tied to its token embedding, e.g.
        ``Dense(vocab, bias=False, tied_to="wte")`` after channels of the embedding's dim.
        The weight is one Parameter of both layers: trained once, counted once by
        `analyze()` (listed as ``= wte/weight``), stored once in saved files.

    Shape
    -----
    - `in`: B×T×C, B×C or B×C×H×W
    - `out`: B×T×out, B×out or B×out (an image: C·H·W inputs per output)

    Examples
    --------
    >>> import torch, attnlab as al
    >>> from attnlab import layers as L
    >>> net = al.Network([L.FeatureInput(8), L.Dense(4, name="fc")])
    >>> tuple(net.learnables["fc/weight"].shape)
    (4, 8)
    """

    stem = "fc"
    time_local = True

    def __init__(self, out: int, bias: bool = True, name: str | None = None, *,
                 tied_to: str | None = None):
        super().__init__(name)
        self.out = check.integer(self, "out", out, example=64)
        self.bias = check.flag(self, "bias", bias)
        self.tied_to = tied_to_argument(self, tied_to)

    def infer(self, specs: dict[str, Spec]) -> Spec:
        s = specs["in"]
        self.require(s, "in", ("BTC", "BC", "BCSS"))
        cin = check.product(s.sizes[1:]) if s.is_image else s.channels
        check.learnables_fit(self, "in", "Use a smaller out, or reduce the input first.",
                             weight=(self.out, cin))
        if s.is_image:
            return Spec.features(self.out)
        return s.with_channels(self.out)

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        s = specs["in"]
        if s.is_image:
            return _FlattenLinear(check.known(self, "in", check.product(s.sizes[1:])), self.out,
                                  bias=self.bias)
        return nn.Linear(check.known(self, "in", s.channels), self.out, bias=self.bias)


class _FlattenLinear(nn.Linear):
    def forward(self, x):
        return F.linear(x.flatten(1), self.weight, self.bias)  # B×C×H×W → B×(CHW) → B×out


class _Elementwise(Layer):
    """Base of shape-preserving layers: any input spec → the same spec."""

    time_local = True

    def infer(self, specs: dict[str, Spec]) -> Spec:
        return specs["in"]


class ReLU(_Elementwise):
    """Rectified linear unit, max(x, 0), elementwise [reluLayer]. No learnables.

    Shape
    -----
    - `in`: any spec (B×T×C, B×C, B×C×H×W)
    - `out`: the same spec
    """

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return nn.ReLU()


class LeakyReLU(_Elementwise):
    """Leaky ReLU, x for x ≥ 0 and `negative_slope`·x below, elementwise [leakyReluLayer].

    Parameters
    ----------
    negative_slope : float
        The slope for negative inputs.

    Shape
    -----
    - `in`: any spec (B×T×C, B×C, B×C×H×W)
    - `out`: the same spec
    """

    def __init__(self, negative_slope: float = 0.01, name: str | None = None):
        super().__init__(name)
        self.negative_slope = check.real(self, "negative_slope", negative_slope,
                                         fix="Use e.g. negative_slope=0.01.")

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return nn.LeakyReLU(self.negative_slope)


class GELU(_Elementwise):
    """Gaussian error linear unit x·Φ(x), elementwise [geluLayer]. No learnables.

    Parameters
    ----------
    approximate : str
        "none" (the default): the exact x·Φ(x) with the Gaussian's distribution function, as
        `torch.nn.GELU()` and BERT's "gelu"; "tanh": the tanh approximation
        0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), as `torch.nn.GELU(approximate="tanh")` and
        GPT-2's "gelu_new".

    Shape
    -----
    - `in`: any spec (B×T×C, B×C, B×C×H×W)
    - `out`: the same spec

    Examples
    --------
    >>> import torch
    >>> from attnlab import layers as L
    >>> L.GELU(approximate="tanh")(torch.tensor([[0.0, 1.0]]))
    tensor([[0.0000, 0.8412]])
    """

    def __init__(self, approximate: str = "none", name: str | None = None):
        super().__init__(name)
        self.approximate = check.choice(self, "approximate", approximate, ("none", "tanh"))

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return nn.GELU(approximate=self.approximate)


class Tanh(_Elementwise):
    """Hyperbolic tangent, elementwise [tanhLayer]. No learnables.

    Shape
    -----
    - `in`: any spec (B×T×C, B×C, B×C×H×W)
    - `out`: the same spec
    """

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return nn.Tanh()


class Sigmoid(_Elementwise):
    """Logistic sigmoid 1 / (1 + e⁻ˣ), elementwise [sigmoidLayer]. No learnables.

    Shape
    -----
    - `in`: any spec (B×T×C, B×C, B×C×H×W)
    - `out`: the same spec
    """

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return nn.Sigmoid()


class Softmax(_Elementwise):
    """Softmax over the channels [softmaxLayer]: the last dimension of B×T×C and B×C, dimension 1
    of B×C×H×W.

    Training with ``loss="crossentropy"`` works from the logits before it, so a network may end
    in Softmax as in MATLAB without losing precision.

    Shape
    -----
    - `in`: B×T×C, B×C or B×C×H×W
    - `out`: the same spec
    """

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return nn.Softmax(dim=1 if specs["in"].is_image else -1)


class Dropout(_Elementwise):
    """Zeroes each element with probability `p` during training and scales the others by
    1/(1 − p); the identity in evaluation [dropoutLayer].

    Parameters
    ----------
    p : float
        The probability of zeroing, in [0, 1).

    Shape
    -----
    - `in`: any spec (B×T×C, B×C, B×C×H×W)
    - `out`: the same spec
    """

    def __init__(self, p: float = 0.5, name: str | None = None):
        super().__init__(name)
        self.p = check.probability(self, "p", p)

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return nn.Dropout(self.p)


class SpatialDropout(Layer):
    """Zeroes whole channels with probability `p` during training — each channel of
    each observation over all its time steps or pixels — and scales the others by 1/(1 − p);
    the identity in evaluation [spatialDropoutLayer].

    Parameters
    ----------
    p : float
        The probability of zeroing a channel, in [0, 1).

    Shape
    -----
    - `in`: B×T×C, B×C×H×W or B×C
    - `out`: the same spec
    """

    stem = "spatialdrop"

    def __init__(self, p: float = 0.5, name: str | None = None):
        super().__init__(name)
        self.p = check.probability(self, "p", p)

    def infer(self, specs: dict[str, Spec]) -> Spec:
        return specs["in"]

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        s = specs["in"]
        return _SpatialDropout(self.p, s.labels.index("C") if "C" in s.labels else
                               len(s.labels) - 1)


class _SpatialDropout(nn.Module):
    def __init__(self, p: float, cdim: int):
        super().__init__()
        self.p, self.cdim = p, cdim

    def forward(self, x):
        if not self.training or self.p == 0:
            return x
        shape = [1] * x.dim()
        shape[0], shape[self.cdim] = x.shape[0], x.shape[self.cdim]
        keep = (torch.rand(shape, device=x.device) >= self.p).to(x.dtype)
        return x * keep / (1.0 - self.p)


# GLU's activations: name → the function of the gate (aliases as configs spell them)
_GATES: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {"silu": F.silu, "gelu": F.gelu,
          "gelu-tanh": lambda x: F.gelu(x, approximate="tanh"),
          "relu": F.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh}
_GATE_ALIASES = {"swish": "silu", "gelu_tanh": "gelu-tanh", "gelu_new": "gelu-tanh",
                 "gelu_pytorch_tanh": "gelu-tanh"}


class GLU(Layer):
    """Gated linear unit, the feed-forward of Llama, Mistral and T5 v1.1:
    ``activation(gate(x)) * up(x)`` (SwiGLU with "silu", GeGLU with "gelu"), applied to each
    time step. A `Dense` after it is the down projection.

    Learnables `gate.weight` and `up.weight` (units×C each, out×in as `torch.nn.Linear`), and
    `gate.bias`, `up.bias` with ``bias=True``.

    Parameters
    ----------
    units : int
        Channels out (the feed-forward's inner size, `intermediate_size`, `d_ff`).
    activation : str
        The gate's activation: "silu" (also spelt "swish"), "gelu", "gelu-tanh" (also
        "gelu_tanh", "gelu_new", "gelu_pytorch_tanh"), "relu", "sigmoid" or "tanh".
    bias : bool
        Whether `gate` and `up` learn biases (Llama, Mistral and T5 have none).

    Shape
    -----
    - `in`: B×T×C or B×C
    - `out`: B×T×units or B×units

    Examples
    --------
    >>> import attnlab as al
    >>> from attnlab import layers as L
    >>> net = al.Network([L.SequenceInput(8), L.GLU(16, name="mlp"), L.Dense(8)])
    >>> [(k, tuple(v.shape)) for k, v in net.learnables.items()][:2]
    [('mlp/gate.weight', (16, 8)), ('mlp/up.weight', (16, 8))]
    """

    time_local = True

    def __init__(self, units: int, activation: str = "silu", bias: bool = False,
                 name: str | None = None):
        super().__init__(name)
        self.units = check.integer(self, "units", units, example=256)
        if isinstance(activation, str) and activation in _GATE_ALIASES:
            activation = _GATE_ALIASES[activation]
        self.activation = check.choice(self, "activation", activation, tuple(_GATES))
        self.bias = check.flag(self, "bias", bias)

    def infer(self, specs: dict[str, Spec]) -> Spec:
        s = specs["in"]
        self.require(s, "in", ("BTC", "BC"), "GLU maps each step's channels; flatten images "
                     "first (Flatten) or make them sequences (ImageToSequence).")
        check.learnables_fit(self, "in", "Use fewer units.", weight=(2 * self.units, s.channels))
        return s.with_channels(self.units)

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return _GLU(check.known(self, "in", specs["in"].channels), self.units, self.activation,
                    self.bias)


class _GLU(nn.Module):
    def __init__(self, cin: int, units: int, activation: str, bias: bool):
        super().__init__()
        self.gate = nn.Linear(cin, units, bias=bias)
        self.up = nn.Linear(cin, units, bias=bias)
        self.activation = activation
        self.act = _GATES[activation]

    def forward(self, x):
        return self.act(self.gate(x)) * self.up(x)          # B×T×C → B×T×units

    def extra_repr(self) -> str:
        return f"activation={self.activation!r}"
