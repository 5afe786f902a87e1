"""`stream(net, static_inputs)` and the `Stream` it returns."""
from __future__ import annotations

import functools

import numpy as np
import torch
from torch import Tensor

from attnlab.core import precision as P
from attnlab.core.batching import check_values
from attnlab.graph.codegen import layer_at
from attnlab.core.errors import ArgumentError, AttnlabError, DataError, NetworkError, close_matches
from attnlab.core.sequences import follows_hugging_face, hugging_face_inputs
from attnlab.core.torch_compile import maybe_compile
from .capture import Capture
from .program import Static, Streamed, build_program
from .steppers import Stepper

_HALF = (torch.float16, torch.bfloat16)
_IDS = (torch.int64, torch.int32)     # token ids an Embedding-only input takes as they are


def stream(net, static_inputs: dict | None = None, *, capacity: int = 64, device=None,
           precision: str = "fp32", compile=False, capture=None, patch=None,
           _caller: str = "stream") -> "Stream":
    """Step-wise execution of `net` (Trax's predict mode, without a second model).

    `static_inputs`: a dict by input name of the inputs given whole (e.g. an encoder's
    sequence; tensors, lists of variable-length sequences or `Padded`). Everything that
    depends on them only is computed once, here. The other inputs are *streamed*: each
    `Stream.step(x)` gives their next t ≥ 1 steps (B×t×C) and returns the outputs at those
    positions, exactly what the full forward pass gives there. An input read by Embedding
    layers only also takes its token ids as integers (int64/int32, B×t×1), which skips the
    conversion to floats and back: `y.argmax(-1, keepdim=True)` is the next step.

    Per-layer state: LSTM/GRU states, key/value caches of causal self-attention (preallocated,
    `capacity` steps at first, doubled when full), cross-attention keys/values from static
    inputs, positions of position layers, the left context of causal Conv1d.

    Raises NetworkError, listing every layer that cannot run step by step on the streamed time
    axis (non-causal self-attention, bidirectional recurrences, pooling over time, …) with a
    fix. The stream runs the modules in their current mode: call `net.eval()` first for
    deterministic outputs (dropout). Weights are read live, except self-attention's fused
    q/k/v projection, read at creation and at `reset()`.

    `device` (None: where the network is; "auto", "cpu", "cuda", "cuda:N", "mps") moves the
    network there (as `net.to`); steps given elsewhere are copied there, outputs stay there.
    `precision` "fp32" | "bf16" | "fp16" | "auto" runs each step under torch.autocast (caches
    in the half type, outputs returned as float32). `compile=True` runs the step through
    torch.compile (falling back to eager with a warning), a dict passes torch.compile arguments.
    A compiled stream keeps static shapes: its caches hold `capacity` steps from the start
    (zeros), every step attends over all of them with a mask, and positions enter as a
    tensor, so one graph serves every decoding step (another for each prefill length, and
    one more each time the caches double).

    `capture`: names or fnmatch patterns of values to keep at each step, as `net.trace`
    names them (a layer output "layer/port", "outer/inner/port" inside a nested network, an
    attention layer's "layer/scores", "layer/heads", "layer/query", "layer/key"); the last
    step's are in `Stream.captured`. `patch`: {name: tensor | callable} replaces a value at
    every step (a tensor of the step's size, or a callable value → replacement). Either one
    runs the step eagerly (not with `compile`); without them the step is exactly as fast.
    """
    P.check_precision(precision, "stream precision")
    P.check_compile(compile, "stream compile")
    if static_inputs is not None and not isinstance(static_inputs, dict):
        raise ArgumentError(f"static_inputs must be a dict by input name, the inputs given whole "
                            f"(e.g. {{'encoder-input': x}}), or None; received "
                            f"{type(static_inputs).__name__}. The streamed inputs go to "
                            "step(x); a prompt for al.generate is its start= argument.")
    if not isinstance(capacity, int) or isinstance(capacity, bool) or capacity < 1:
        raise ArgumentError(f"stream capacity must be a positive int (key/value cache steps), "
                            f"got {capacity!r}")
    if device is not None:
        net.to(P.resolve_device(device, "stream device"))
    if not net.initialized:
        net.initialize()
    analysis = net.analyze()
    analysis.raise_if_errors("stream")
    names = list(net.input_names)
    static_inputs = dict(static_inputs or {})
    if follows_hugging_face(net):         # T5's encoder: input_ids with its attention_mask
        static_inputs = hugging_face_inputs(
            static_inputs, names, [n for n in net.token_inputs if n in static_inputs])
    unknown = [k for k in static_inputs if k not in names]
    if unknown:
        hint = "".join(close_matches(k, names) for k in unknown)
        raise DataError(f"static_inputs: unknown input(s) {', '.join(map(repr, unknown))}.{hint} "
                        f"The network's inputs: {', '.join(names)}.")
    dtype = net.input_dtype
    ref = next(iter(net.parameters()), None)
    run_on = ref.device if ref is not None else torch.device("cpu")
    half = P.autocast_dtype(precision, run_on, "stream precision")
    specs = net.input_specs
    ids = {n: n in net.token_inputs for n in specs}      # token ids: kept integers
    static, batch = {}, None
    for name, x in static_inputs.items():
        from attnlab.core.batching import as_batch   # the forward pass's own input conversion and checks
        value, mask = as_batch(x, specs[name], name, dtype, ids[name])
        value, mask = value.to(run_on), None if mask is None else mask.to(run_on)
        if batch is not None and value.shape[0] != batch:
            raise DataError(f"static_inputs differ in batch size: '{name}' has {value.shape[0]}, "
                            f"another has {batch}. Give every input one entry per observation.")
        batch = value.shape[0]
        static[name] = Static(value, mask)
    streamed = [n for n in names if n not in static]
    if not streamed:
        raise NetworkError("every input is in static_inputs, so there is nothing to stream: "
                           "leave the input that arrives step by step (e.g. the decoder's) out "
                           "of static_inputs, or run net(...) for a whole-sequence pass.")
    for n in streamed:
        if specs[n].labels not in ("BTC", "BT"):
            raise NetworkError(f"input '{n}' is {specs[n]} ({specs[n].kind}): only sequences "
                               "(B×T×C, or B×T token ids) can be streamed. Pass it in "
                               "static_inputs.")
    static_shapes = compile is not False and compile is not None
    taps = Capture(net, capture, patch, _caller)      # _caller: whose words it refuses in
    if taps and static_shapes:
        raise ArgumentError("stream: capture and patch run the step eagerly (a value kept or "
                            "replaced at every step is no part of a compiled graph); leave "
                            "compile out to capture, or capture out to compile.")
    with P.autocast(run_on, half):       # static layers (encoders) in the step's precision
        program = build_program(net, static, capacity, static_shapes=static_shapes,
                                analysis=analysis, capture=taps)
    if program.problems:
        lines = "\n".join(f"  - {i.message}" for i in program.problems)
        given = f" (static: {', '.join(map(repr, static))})" if static else ""
        raise NetworkError(f"cannot stream the network on {', '.join(map(repr, streamed))}{given}: "
                           f"{len(program.problems)} layer(s) cannot run step by step:\n{lines}",
                           program.problems)
    return Stream(net, program, [specs[n] for n in program.streamed_inputs], batch, dtype,
                  run_on, half, compile, taps if taps else None)


class Stream:
    """A network run step by step: `step(x)` takes the next t steps of the streamed inputs and
    returns the outputs for them; `reset()` starts again from step 0 (static inputs kept).

    Outputs are what `net(...)` returns (a tensor, or a dict by output name); outputs that
    depend on static inputs only come back whole at every step. A step that raises changes
    nothing: the stream stays at its position, every layer's state as it was."""

    def __init__(self, net, program, specs, batch, dtype, device=None, half=None, compile=False,
                 capture: Capture | None = None):
        self.net = net
        self._program = program
        self._capture = capture
        self._device = device if device is not None else torch.device("cpu")
        self._half = half
        fn = program.fn if half is None else _autocast_step(program.fn, self._device, half)
        self._fn = maybe_compile(fn, compile, self._device, "decoding")
        self._fn_last = None                        # `step(x, last=True)`'s, made on first use
        self._names = list(program.streamed_inputs)
        self._channels = [s.channels for s in specs]
        self._tokens = [s.labels == "BT" for s in specs]        # B×t token ids (TokenInput)
        # per input, the dtypes a step takes without a conversion
        self._dtypes = [_IDS if tok else (dtype,) + (_IDS if n in program.ids_inputs else ())
                        for n, tok in zip(self._names, self._tokens)]
        self._out_names = [o for o, _ in program.outputs]
        self._single_in = len(self._names) == 1
        self._single_out = len(self._out_names) == 1
        self._static_batch = self._batch = batch
        self._dtype = dtype
        self._on_cpu = self._device.type == "cpu"
        self._limit = program.limit
        self._pos = 0
        self._static = program.static_shapes
        self._act_dtype = half if half is not None else dtype     # what the caches hold
        # a failed step is undone (`_undo`): the steppers that need a snapshot before each
        # step, and those that go back by the position alone
        steppers = list(program.steppers.values())
        self._snapshots = [_protocol(s, "snapshot") for s in steppers
                           if getattr(s, "needs_snapshot", True)]
        self._restores = [_protocol(s, "restore") for s in steppers
                          if getattr(s, "needs_snapshot", True)]
        self._rewinds = [_protocol(s, "restore") for s in steppers
                         if not getattr(s, "needs_snapshot", True)]

    # -- views ------------------------------------------------------------------------------
    @property
    def input_names(self) -> list[str]:
        """The streamed inputs, in the order `step` takes them positionally."""
        return list(self._names)

    @property
    def output_names(self) -> list[str]:
        return list(self._out_names)

    @property
    def position(self) -> int:
        """Steps taken since creation or the last reset: the position of the next step."""
        return self._pos

    @property
    def batch_size(self) -> int | None:
        """B, fixed by static inputs or by the first step (None before that)."""
        return self._batch

    @property
    def steppers(self) -> dict:
        """Layer name → the `Stepper` holding its state (e.g. `.cache` of a self-attention, a
        `KVCache`; `.state` of an LSTM); layers of nested networks as 'outer/inner'."""
        return dict(self._program.steppers)

    @property
    def device(self) -> torch.device:
        """Where the steps run (and their outputs are)."""
        return self._device

    @property
    def compiled(self) -> bool:
        """True while steps run through torch.compile (False: eager, or fell back)."""
        return bool(getattr(self._fn, "active", False))

    @property
    def captured(self) -> dict[str, Tensor]:
        """The values `capture=` asked for, name → tensor, as the last step computed them
        (empty before the first step and after `reset()`): a layer output B×t×C for the t
        new steps; an attention layer's "scores" B×H×t×Tk, the new queries against every
        key the cache holds (Tk: the steps so far, fewer with a sliding window), "query"
        B×H×t×dk, "key" B×Hkv×Tk×dk (the cached keys after rotary; Hkv: the key/value
        heads), "heads" B×t×H×dv. A value computed once from static inputs is there whole
        from the start. After a step that is refused, still the last successful step's."""
        return {} if self._capture is None else self._capture.values()

    @property
    def source(self) -> str:
        """The generated step code (for the curious and for debugging)."""
        return self._program.source

    def __repr__(self):
        return (f"Stream(streamed={self._names}, outputs={self._out_names}, "
                f"position={self._pos})")

    # -- running ----------------------------------------------------------------------------
    def reset(self) -> "Stream":
        """Forgets every step: caches emptied (their memory kept), recurrent states back to
        their initial values, position 0. Static inputs and what was computed from them stay."""
        self._program.reset()
        if self._capture is not None:
            self._capture.reset()
        self._pos = 0
        self._batch = self._static_batch
        return self

    def step(self, x, last: bool = False):
        """x: B×t×C (the one streamed input) or a dict by streamed input name → the outputs at
        positions `position … position + t − 1`: B×t×C' each (a tensor, or a dict by output
        name when the network has several outputs).

        `last=True`: the outputs at the last new step only, B×1×C' (what `step(x)[:, -1:]`
        gives); the layers after the last one that looks along time (a language model's
        final norm and head) run on that step alone, so a prompt's prefill never makes the
        logits of its other positions.

        A step that is refused (an input that does not fit, a position past a
        `PositionEmbedding`'s length, a failure inside a layer, an interrupt) changes nothing:
        every layer's state is as before it, so the next step goes on from `position`."""
        batch, snaps = self._batch, [take() for take in self._snapshots]
        if self._capture is not None:
            self._capture.begin()
        try:
            outs, t = self._run(x, last)
        except BaseException as e:
            self._undo(batch, snaps)
            if isinstance(e, AttnlabError):
                _say_unchanged(e)
            elif isinstance(e, (RuntimeError, IndexError, ValueError)):
                raise self._translate(e) from None      # torch's error stays as __context__
            raise
        if self._capture is not None:
            self._capture.commit()
        self._pos += t
        return outs[0] if self._single_out else dict(zip(self._out_names, outs))

    def _run(self, x, last=False):
        """The step's checks and its program: (the outputs, t)."""
        if self._single_in and not isinstance(x, dict):
            xs = (self._check(x, 0),)
        else:
            xs = self._by_name(x)
        t = xs[0].shape[1]
        pos = self._pos
        if pos + t > self._limit:
            raise DataError(f"step {pos + t - 1}: a static sequence read step by step has only "
                            f"{self._limit} steps. Give longer static sequences, or reset().")
        if self._static:       # sized here, outside the traced step; positions as a tensor
            self._program.prepare(pos + t, xs[0].shape[0], self._device, self._act_dtype)
            pos = torch.arange(pos, pos + t, device=self._device)
            xs = tuple(map(_canonical, xs))
        # no gradients, as torch.no_grad() does, without its context-manager object (a
        # decoding step is a few hundred µs; the object costs about 1 µs of it)
        grad = torch.is_grad_enabled()
        if grad:
            torch._C._set_grad_enabled(False)
        try:
            if last and t > 1:
                return self._last(pos, t, xs), t
            return self._fn(pos, t, *xs), t
        finally:
            if grad:
                torch._C._set_grad_enabled(True)

    def _last(self, pos, t, xs):
        """The outputs at the last of the t new steps (see `step`)."""
        if self._static or self._program.last is None:       # one traced graph: slice after
            outs = self._fn(pos, t, *xs)
            return tuple(o[:, -1:] if isinstance(v, Streamed) else o
                         for o, (_, v) in zip(outs, self._program.outputs))
        if self._fn_last is None:
            fn = self._program.last()
            self._fn_last = fn if self._half is None else _autocast_step(fn, self._device,
                                                                         self._half)
        return self._fn_last(pos, t, *xs)

    def _undo(self, batch, snaps) -> None:
        """Every stepper back to where it was before the step that failed (see `Stepper`)."""
        self._batch = batch
        for restore, snap in zip(self._restores, snaps):
            restore(snap, self._pos)
        for restore in self._rewinds:
            restore(None, self._pos)

    __call__ = step

    # -- input checks -----------------------------------------------------------------------
    def _check(self, x, i):
        if type(x) is Tensor and x.dim() == (2 if self._tokens[i] else 3):
            b, t = x.shape[0], x.shape[1]
            if b == self._batch and (self._tokens[i] or x.shape[2] == self._channels[i]) and t \
                    and x.dtype in self._dtypes[i] and \
                    (x.is_cpu if self._on_cpu else x.device == self._device):
                return x                                   # the hot path: a right tensor
        return self._convert(x, i)

    def _convert(self, x, i):
        name, c = self._names[i], self._channels[i]
        if not isinstance(x, Tensor):
            try:
                x = torch.as_tensor(np.asarray(x))
            except (TypeError, ValueError) as e:
                raise DataError(f"input '{name}': expected a B×t×{c} tensor, received "
                                f"{type(x).__name__} ({e}).") from None
        if x.is_complex() or x.is_meta or (x.dim() and not x.numel()):
            check_values(x, None, name)          # metadata only: the step stays sync-free
        if self._tokens[i]:
            return self._convert_ids(x, name)
        shape = "×".join(map(str, x.shape))
        if x.dim() != 3:
            fix = ("Add the channel dimension: x.unsqueeze(-1) (B×t → B×t×1)." if x.dim() == 2
                   and c == 1 else "A single sequence needs a batch dimension: x.unsqueeze(0)."
                   if x.dim() == 2 else "Give B×t×C: batch, new steps, channels.")
            raise DataError(f"input '{name}': expected B×t×{c}, received {shape}. {fix}")
        if c is not None and x.shape[2] != c:
            raise DataError(f"input '{name}': expected B×t×{c}, received {shape}. "
                            + ("Sequences are batch-first B×t×C in attnlab: use x.transpose(1, 2)."
                               if x.shape[1] == c else "Check the input's channels."))
        if x.shape[1] == 0:
            raise DataError(f"input '{name}': received {shape}, zero steps. Give t ≥ 1 steps.")
        if self._batch is None:
            self._batch = x.shape[0]
        elif x.shape[0] != self._batch:
            raise DataError(f"input '{name}': expected batch size {self._batch} (as "
                            f"{'the static inputs' if self._static_batch else 'the first step'}), "
                            f"received {shape}. A stream keeps one batch; reset() (or a new "
                            "stream) for another.")
        dtype = x.dtype if x.dtype in self._dtypes[i] else self._dtype
        if x.dtype != dtype or x.device != self._device:
            x = x.to(self._device, dtype, non_blocking=True)
        return x

    def _convert_ids(self, x, name):
        """B×t token ids (B×t×1 too) for a TokenInput: int64, on the stream's device."""
        from attnlab.core.batching import token_ids
        shape = "×".join(map(str, x.shape))
        if x.dim() == 3 and x.shape[2] == 1:
            x = x.squeeze(2)
        if x.dim() != 2 or x.shape[1] == 0:
            fix = ("One sequence needs a batch dimension: ids.unsqueeze(0)." if x.dim() == 1 else
                   "Give t ≥ 1 steps." if x.dim() == 2 else "Give B×t ids: batch, new steps.")
            raise DataError(f"input '{name}': expected B×t token ids, received {shape}. {fix}")
        self._check_batch(x.shape[0], name, shape)
        if x.dtype not in _IDS:
            x = token_ids(x, name)
        return x if x.device == self._device else x.to(self._device, non_blocking=True)

    def _check_batch(self, b, name, shape):
        if self._batch is None:
            self._batch = b
        elif b != self._batch:
            raise DataError(f"input '{name}': expected batch size {self._batch} (as "
                            f"{'the static inputs' if self._static_batch else 'the first step'}), "
                            f"received {shape}. A stream keeps one batch; reset() (or a new "
                            "stream) for another.")

    def _by_name(self, given):
        if not isinstance(given, dict):
            raise DataError(f"this stream has {len(self._names)} streamed inputs "
                            f"({', '.join(self._names)}): give them as a dict by name.")
        if set(given) != set(self._names):
            extra = [k for k in given if k not in self._names]
            missing = [k for k in self._names if k not in given]
            hint = "".join(close_matches(k, self._names) for k in extra)
            raise DataError("step inputs by name: expected " + ", ".join(self._names) + "; "
                            + (f"unexpected {', '.join(extra)} (static inputs are given once, "
                               f"to stream()).{hint} " if extra else "")
                            + (f"missing {', '.join(missing)}." if missing else ""))
        xs = tuple(self._check(given[n], i) for i, n in enumerate(self._names))
        if len({x.shape[1] for x in xs}) > 1:
            raise DataError("streamed inputs advance together: give each the same number of new "
                            "steps, received " + ", ".join(f"'{n}' {x.shape[1]}"
                                                           for n, x in zip(self._names, xs)) + ".")
        return xs

    def _translate(self, e: Exception) -> DataError:
        # the innermost line of a stream program names the layer
        layer = layer_at(e.__traceback__, kind="stream")
        where = f"layer '{layer}': " if layer else ""
        text = " ".join(str(e).split())[:500]
        return DataError(f"{where}the step failed; torch says: {text}. Check that the data fits the "
                         f"network (print(net.analyze()) shows the sizes each layer expects). "
                         f"{_UNCHANGED}")


_UNCHANGED = ("The stream is unchanged (still at the position before this step): give the step "
              "again, corrected.")


def _say_unchanged(e: AttnlabError) -> None:
    """Adds to a refused step's error that the stream did not move."""
    if e.args and isinstance(e.args[0], str) and _UNCHANGED not in e.args[0]:
        e.args = (f"{e.args[0].rstrip()} {_UNCHANGED}",) + e.args[1:]


def _protocol(stepper, method: str):
    """`stepper.snapshot` or `.restore`; `Stepper`'s own (its attributes) for a stepper that
    does not derive from it."""
    bound = getattr(stepper, method, None)
    return bound if bound is not None else functools.partial(getattr(Stepper, method), stepper)


def _canonical(x: Tensor) -> Tensor:
    """x with the strides of a fresh contiguous tensor: torch.compile guards on strides, and
    a step sliced from a prompt (`prompt[:, -1:]`) has another batch stride than one made by
    argmax, though both are contiguous."""
    if not x.is_contiguous():
        return x.contiguous()
    if x.dim() == 2:                                       # B×t token ids
        return x if x.stride() == (x.shape[1], 1) else x.as_strided(x.shape, (x.shape[1], 1))
    b, t, c = x.shape
    stride = (t * c, c, 1)
    return x if x.stride() == stride else x.as_strided(x.shape, stride)


def _autocast_step(fn, device, half):
    """The step under autocast, its half-precision outputs returned as float32."""
    def step(pos, t, *xs):
        with torch.autocast(device.type, dtype=half):
            outs = fn(pos, t, *xs)
        return tuple(o.float() if isinstance(o, Tensor) and o.dtype in _HALF else o for o in outs)
    return step
