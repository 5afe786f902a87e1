"""Where and in which precision networks run: the `device` and `precision` choices shared by
`al.train` (TrainingOptions), `predict`, `classify`, `stream`, `generate` and `forecast`.

- device: None (where the network already is), "auto" (CUDA, else MPS, else the CPU), "cpu",
  "cuda", "cuda:N", "mps", a `torch.device`; MATLAB's ExecutionEnvironment "gpu" means "cuda".
  A device this machine lacks is an `ArgumentError` naming what is there, never a raw torch
  error at the first tensor.
- precision: "fp32" (default), "bf16", "fp16" (mixed precision through `torch.autocast`:
  matmuls and attention in the half type, reductions, losses and metrics in float32;
  parameters and optimizer state stay float32), "auto" (bf16 on CUDA devices that have it,
  fp16 on older CUDA devices and MPS, fp32 on the CPU, where autocast rarely pays).
  fp16 trains with a `torch.amp.GradScaler` (`make_scaler`), whose state checkpoints keep.

This module sits below the network, training and streaming (it imports none of them).
"""
from __future__ import annotations

import contextlib

import torch

from attnlab.core.errors import ArgumentError

PRECISIONS = ("fp32", "bf16", "fp16", "auto")
DEVICES = ("auto", "cpu", "cuda", "cuda:N", "mps")
_HALF = {"bf16": torch.bfloat16, "fp16": torch.float16}
# MATLAB ExecutionEnvironment values that name a device ("multi-gpu"/"parallel" are launches)
_MATLAB = {"gpu": "cuda"}


def _mps_available() -> bool:
    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())


def machine_devices() -> str:
    """What this machine offers, in words (for the errors below)."""
    have = ["cpu"]
    if torch.cuda.is_available():
        n = torch.cuda.device_count()
        have.append("cuda" if n == 1 else f"cuda:0…cuda:{n - 1}")
    if _mps_available():
        have.append("mps")
    return ", ".join(have)


def resolve_device(device, what: str = "device", default: torch.device | None = None) \
        -> torch.device:
    """A device choice → the torch.device to run on, checked against this machine.

    None gives `default` (or the CPU). Raises ArgumentError for an unknown choice or a device
    this machine does not have, naming `what` (e.g. "TrainingOptions device")."""
    if device is None:
        return default if default is not None else torch.device("cpu")
    if isinstance(device, torch.device):
        dev = device
    elif isinstance(device, str) and not isinstance(device, bool):
        text = _MATLAB.get(device.strip().lower(), device.strip().lower())
        if text == "auto":
            if torch.cuda.is_available():
                return torch.device("cuda", torch.cuda.current_device())
            return torch.device("mps") if _mps_available() else torch.device("cpu")
        try:
            dev = torch.device(text)
        except (RuntimeError, ValueError):
            raise ArgumentError(f"{what} must be one of {', '.join(map(repr, DEVICES))} (or a "
                                f"torch.device); got {device!r}.") from None
    else:
        raise ArgumentError(f"{what} must be one of {', '.join(map(repr, DEVICES))} (or a "
                            f"torch.device); got {type(device).__name__} {device!r}.")
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            build = "a CPU-only build" if torch.version.cuda is None else \
                f"built for CUDA {torch.version.cuda}, but no GPU or driver is visible"
            raise ArgumentError(f"{what} {str(device)!r}: CUDA is not available here (torch "
                                f"{torch.__version__}, {build}). This machine has: "
                                f"{machine_devices()}. Use device='cpu' or 'auto' "
                                "(ExecutionEnvironment='auto' in attnlab.matlab), or install a "
                                "CUDA build of torch on a machine with a GPU.")
        count = torch.cuda.device_count()
        if dev.index is not None and dev.index >= count:
            raise ArgumentError(f"{what} {str(device)!r}: This machine has {count} CUDA "
                                f"device(s), cuda:0 … cuda:{count - 1}. Pick one of them.")
        if dev.index is None:
            dev = torch.device("cuda", torch.cuda.current_device())
    elif dev.type == "mps":
        if not _mps_available():
            raise ArgumentError(f"{what} {str(device)!r}: Apple's MPS backend is not available "
                                "here (it needs an Apple-silicon Mac and a torch built with MPS)."
                                f" This machine has: {machine_devices()}. Use device='cpu' or "
                                "'auto'.")
    elif dev.type != "cpu":
        raise ArgumentError(f"{what} must be one of {', '.join(map(repr, DEVICES))}; got "
                            f"{str(device)!r} (attnlab runs on the CPU, CUDA GPUs and MPS). "
                            f"This machine has: {machine_devices()}.")
    return dev


def check_precision(precision, what: str = "precision") -> str:
    """Validates a precision choice where it enters (before any device is known)."""
    if not isinstance(precision, str) or precision not in PRECISIONS:
        from attnlab.core.errors import close_matches
        hint = close_matches(precision, PRECISIONS) if isinstance(precision, str) else ""
        raise ArgumentError(f"{what} must be one of {', '.join(map(repr, PRECISIONS))}; got "
                            f"{precision!r}.{hint}")
    return precision


def autocast_dtype(precision: str, device: torch.device, what: str = "precision") \
        -> torch.dtype | None:
    """The autocast dtype for `precision` on `device`, or None for plain float32."""
    check_precision(precision, what)
    if precision == "auto":
        if device.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float16 if device.type == "mps" else None
    if precision == "fp32":
        return None
    dtype = _HALF[precision]
    if not _autocast_supports(device.type, dtype):
        raise ArgumentError(f"{what} {precision!r}: torch {torch.__version__} has no "
                            f"{precision} autocast on {device.type}. Use precision='fp32'"
                            + (" or 'bf16'." if precision == "fp16" else "."))
    return dtype


def _autocast_supports(device_type: str, dtype: torch.dtype) -> bool:
    try:
        with torch.autocast(device_type, dtype=dtype):
            pass
    except (RuntimeError, ValueError, AssertionError):
        return False
    return True


def autocast(device: torch.device, dtype: torch.dtype | None):
    """The mixed-precision context of a forward pass (a no-op for float32)."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=dtype)


def make_scaler(device: torch.device, dtype: torch.dtype | None):
    """A GradScaler for fp16 training (fp16 gradients underflow without one); None otherwise."""
    if dtype is not torch.float16:
        return None
    return torch.amp.GradScaler(device.type)


def check_compile(value, what: str = "compile"):
    """compile: False, True, or a dict of torch.compile keyword arguments (mode, backend,
    fullgraph, dynamic, options)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, dict):
        allowed = {"mode", "backend", "fullgraph", "dynamic", "options"}
        extra = [k for k in value if k not in allowed]
        if extra:
            raise ArgumentError(f"{what}: unknown torch.compile argument(s) "
                                f"{', '.join(map(repr, extra))}; allowed: "
                                f"{', '.join(sorted(allowed))}.")
        return dict(value)
    raise ArgumentError(f"{what} must be True, False or a dict of torch.compile arguments; got "
                        f"{type(value).__name__} {value!r}.")
