"""Per-layer step logic for streaming: a registry of steppers, one module per family of layers.

A stream runs each layer that depends on a streamed input on the next t steps only. A layer
whose class declares `time_local = True` (Dense, activations, LayerNorm, Embedding, Addition,
…: each output step depends on the same input step only) needs nothing here: the program calls
its module on the new steps as they come. Layers that look along time keep state between calls
in a `Stepper`, registered once, next to the others of their family:

- `recurrent`: LSTM/GRU, the recurrent state (h, c), started from static state inputs when given;
- `attention` (with its `cache`): causal self-attention (and causal attention whose
  query/key/value are all streamed) keeps a key/value cache, preallocated and doubled when
  full; cross-attention with static keys/values projects them once;
- `convolution`: causal Conv1d keeps the last (kernel − 1)·dilation input steps as left
  context; position layers keep the position of the first new step;
- `local`: layers that are per-step only with some arguments or modes (BatchNorm in
  evaluation, Concatenation along channels, a wrapped torch module that checks out), and those
  that reduce the time axis (never).

A factory registered for a layer type (`register_stepper`, in `registry`) gets a
`LayerContext` and returns `PER_STEP`, a `Stepper`, a `Route` (for layers that only pass items
on), or raises `NotStreamable` with the reason and the fix. Factories are looked up along the
layer class's MRO, so `register_stepper` also covers subclasses, and a factory comes before the
class's `time_local`.

Steppers read the layer module's own parameters (e.g. `torch.nn.LSTM.forward(module, x, state)`),
so a stream needs no second model. Fused weights (self-attention's concatenated q/k/v
projection) are read when the stream is created and again at `reset()`.
"""
from .attention import CachedAttentionStepper, CrossAttentionStepper
from .cache import KVCache
from .convolution import CausalConv1dStepper, PositionEmbeddingStepper, SinusoidalStepper
from . import local  # noqa: F401  (registers BatchNorm, Concatenation, Module, pooling)
from .recurrent import RecurrentStepper
from .registry import (PER_STEP, LayerContext, NotStreamable, Route, Stepper, bound_forward,
                       embedding_of, linear_of, register_stepper, stepper_for)

__all__ = ["PER_STEP", "Route", "NotStreamable", "LayerContext", "Stepper", "register_stepper",
           "stepper_for", "bound_forward", "linear_of", "embedding_of", "KVCache",
           "RecurrentStepper", "CausalConv1dStepper", "PositionEmbeddingStepper",
           "SinusoidalStepper", "CachedAttentionStepper", "CrossAttentionStepper"]
