"""Step-wise execution (Trax's predict mode): `stream`, `generate`, `forecast`.

`stream(net, static_inputs)` turns a causal network into a `Stream` whose `step(x)` takes the
next t ≥ 1 steps of the streamed inputs and returns the outputs at those positions, exactly
what the full forward pass gives there, carrying per-layer state (LSTM/GRU states, key/value
caches of causal self-attention, cross-attention keys/values computed once from static inputs).
`generate` and `forecast` are decoding loops built on it. A layer whose class declares
`time_local = True` streams as it is; `register_stepper` teaches streaming to layer types that
look along time (see `attnlab.stream.steppers`).

`Network.stream` calls it:

    def stream(self, static_inputs=None):
        from .stream import stream
        return stream(self, static_inputs)
"""
from .core import Stream, stream
from .decode import Generated, generate
from .forecast import forecast
from .steppers import (PER_STEP, KVCache, LayerContext, NotStreamable, Route, Stepper,
                       register_stepper)

__all__ = ["stream", "Stream", "generate", "forecast", "Generated", "register_stepper", "Stepper",
           "LayerContext", "NotStreamable", "PER_STEP", "Route", "KVCache"]
