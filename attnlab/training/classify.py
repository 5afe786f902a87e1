"""`al.classify`: predicted class labels, in the label values seen in training."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from ..batching import predict
from ..errors import ArgumentError
from .losses import final_module


def classify(net: Any, X: Any, batch_size: int = 128, output: str | None = None,
             device: str | torch.device | None = None, precision: str = "fp32",
             compile: bool | str = False) -> np.ndarray | list[np.ndarray]:
    """Class labels for `X`.

    Parameters
    ----------
    net : Network
        A classifier: its output has one channel per class (or one channel for a binary decision:
        threshold 0.5 after a final Sigmoid, else 0).
    X : tensor, array, list or dict
        Anything `net.predict` takes: a tensor, a list of variable-length sequences, a dict by
        input name.
    batch_size : int
        Observations per forward pass.
    output : str, optional
        Which output, for a network with several.
    device, precision, compile
        As for `Network.predict`.

    Returns
    -------
    numpy.ndarray or list of numpy.ndarray
        N labels for one prediction per observation, N×T for a padded batch of sequence outputs,
        or a list of per-sequence arrays when `X` is a list of sequences. The labels are the values
        training saw (`net.metadata["class_labels"]`: strings, ints, …), or class indices when
        training used indices.
    """
    names = net.output_names
    if output is None:
        output = names[0]
    elif output not in names:
        raise ArgumentError(f"classify: unknown output '{output}'; outputs: {', '.join(names)}")
    scores = predict(net, (X,), {}, batch_size, device, precision, compile)
    if isinstance(scores, dict):
        scores = scores[output]
    labels = _labels(net, output)
    threshold = 0.5 if final_module(net, output, nn.Sigmoid) is not None else 0.0
    if isinstance(scores, list):
        return [_decide(s, labels, threshold) for s in scores]
    return _decide(scores, labels, threshold)


def _labels(net, output):
    labels = net.metadata.get("class_labels")
    if isinstance(labels, dict):
        labels = labels.get(output)
    return None if labels is None else np.asarray(labels)


def _decide(scores: torch.Tensor, labels, threshold: float) -> np.ndarray:
    """scores …×C (channel last; B×C×H×W images use dim 1) → label per position."""
    cd = 1 if scores.dim() == 4 else scores.dim() - 1
    if scores.shape[cd] == 1:
        idx = (scores.squeeze(cd) > threshold).long()
    else:
        idx = scores.argmax(cd)
    found = idx.cpu().numpy()
    return labels[found] if labels is not None else found
