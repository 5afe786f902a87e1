"""`compile=True`: a function run through `torch.compile`, with an eager fallback.

torch.compile compiles lazily, at the first call (and again for new shapes), so a failure
shows up there: a missing C++ compiler, an unsupported Python, an op Dynamo cannot trace. The
`Compiled` wrapper then runs the same call eagerly. If eager fails too, the failure is the
caller's (their data, their network) and eager's error propagates unchanged; if eager works,
the compiler was at fault: a `CompileWarning` names its reason and every later call runs eagerly.
A fallback call may have run part of the compiled forward first (BatchNorm's running statistics
can then move twice in that one step).

Modes: training and decoding use torch.compile's default mode (decoding with static shapes:
a compiled stream attends over its whole cache capacity with a mask and takes positions as a
tensor, so one graph serves every step); on CUDA, inference
takes "reduce-overhead" (CUDA graphs: launch overhead dominates small batches). A dict given as
`compile` overrides them (e.g. {"mode": "max-autotune"} or {"backend": "aot_eager"}).
"""
from __future__ import annotations

import warnings
from typing import Any, Callable

import torch


class CompileWarning(UserWarning):
    """torch.compile failed; attnlab runs eagerly instead (the message says why)."""


def _reason(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    first = next((line for line in text if line.strip()), "")
    return f"{type(e).__name__}: {first[:300]}" if first else type(e).__name__


def compile_options(compile, device: torch.device, purpose: str) -> dict:
    """torch.compile keyword arguments for `purpose` ("training", "inference", "decoding")."""
    kw: dict[str, object] = {}
    if purpose == "inference" and device.type == "cuda":
        kw["mode"] = "reduce-overhead"         # CUDA graphs: one per batch shape
    # decoding stays in the default mode: its caches are inputs the step writes into, which
    # CUDA graphs would copy at every replay
    if purpose == "decoding":
        kw["dynamic"] = False          # shapes from the cache capacity: one graph for all steps
    if isinstance(compile, dict):
        kw.update(compile)
    return kw


class Compiled:
    """Calls `fn` through torch.compile; falls back to `fn` itself (see the module doc)."""

    def __init__(self, fn, options: dict, purpose: str):
        self.eager = fn
        self.purpose = purpose
        self.reason: str | None = None       # why it fell back, None while compiled
        self.compiled: Callable[..., Any] | None = None
        try:
            self.compiled = torch.compile(fn, **options)
        except Exception as e:  # noqa: BLE001 — e.g. an unsupported Python: run eagerly
            self._fall_back(e)

    @property
    def active(self) -> bool:
        """True while calls go through the compiled function."""
        return self.reason is None

    def __call__(self, *args, **kwargs):
        if self.reason is not None:
            return self.eager(*args, **kwargs)
        try:
            return self.compiled(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 — rerun eagerly to tell compiler from caller
            out = self.eager(*args, **kwargs)      # the caller's own error propagates from here
            self._fall_back(e)
            return out

    def _fall_back(self, e: BaseException) -> None:
        self.reason = _reason(e)
        self.compiled = None
        warnings.warn(f"compile=True: torch.compile failed for {self.purpose} ({self.reason}); "
                      f"running {self.purpose} eagerly instead.", CompileWarning, stacklevel=3)


def maybe_compile(fn, compile, device: torch.device, purpose: str):
    """`fn` itself when compile is False, else a `Compiled` wrapper."""
    if compile is False or compile is None:
        return fn
    return Compiled(fn, compile_options(compile, device, purpose), purpose)
