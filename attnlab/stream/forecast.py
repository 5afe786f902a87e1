"""`forecast`: closed-loop regression on a stream (each prediction fed back as the next input)."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch
from torch import Tensor

from attnlab.core.errors import ArgumentError, DataError, SizeError

from .core import stream
from .decode import _eval_mode, _one_streamed_input, _output_picker


def forecast(net: Any, history: Tensor | np.ndarray, steps: int,
             static_inputs: dict | None = None, feedback: Callable | None = None,
             output: str | None = None, device: str | torch.device | None = None,
             precision: str = "fp32", compile: bool | dict = False) -> Tensor:
    """Closed-loop forecasting with a sequence-to-sequence regression network (each output step
    predicts the next input step): prefill with the history, then feed each prediction back.

    Parameters
    ----------
    history
        B×T×C (or one T×C sequence) of observed steps.
    steps
        How many steps to predict.
    feedback
        ``feedback(prediction B×1×C') → next input B×1×C``; by default the prediction
        itself (then C' must equal C).
    device, precision, compile
        As for `Network.stream` (the prediction comes back on `device`).

    Returns
    -------
    Tensor
        B×steps×C' (steps×C' for a T×C history): the prediction after the history's last
        step, then each one after feeding the previous one back.
    """
    if not isinstance(steps, int) or steps < 1:
        raise ArgumentError(f"forecast steps must be a positive int, got {steps!r}")
    h = _history(history)
    single = h.dim() == 2
    if single:
        h = h.unsqueeze(0)                                            # T×C → 1×T×C
    with _eval_mode(net):
        s = stream(net, static_inputs, capacity=h.shape[1] + steps, device=device,
                   precision=precision, compile=compile)
        _one_streamed_input(s, "forecast")
        pick = _output_picker(s, output)
        p = pick(s.step(h))[:, -1:]                                   # B×1×C'
        if feedback is None and p.shape[-1] != s._channels[0]:
            raise SizeError(f"forecast feeds predictions back as inputs, but the network maps "
                            f"{s._channels[0]} input channels to {p.shape[-1]} output channels. "
                            "Give feedback=lambda y: <B×1×C input> to build the next input.")
        out = p.new_empty(p.shape[0], steps, p.shape[2])
        out[:, :1] = p
        for i in range(1, steps):
            p = pick(s.step(p if feedback is None else feedback(p)))[:, -1:]
            out[:, i:i + 1] = p
    return out[0] if single else out


def _history(history) -> Tensor:
    if isinstance(history, (list, tuple)) and history and not np.isscalar(history[0]):
        lengths = {len(h) for h in history}
        if len(lengths) > 1:
            raise DataError(f"forecast: histories of different lengths ({sorted(lengths)}): a "
                            "streamed batch advances all sequences together. Forecast each "
                            "length group separately.")
        history = np.stack([np.asarray(h) for h in history])
    x = history if isinstance(history, Tensor) else torch.as_tensor(np.asarray(history))
    if x.dim() not in (2, 3):
        raise DataError(f"forecast: history must be B×T×C or T×C, received "
                        f"{'×'.join(map(str, x.shape))}.")
    return x
