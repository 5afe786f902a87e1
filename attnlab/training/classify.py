"""`al.classify`: predicted class labels, in the label values seen in training."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from attnlab.core.batching import predict
from attnlab.core.errors import ArgumentError, DataError
from .labels import LABEL_TYPES
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
        training used indices. When the output has more channels than training saw labels, the
        choice is among the labelled classes.

    Raises
    ------
    DataError
        When no label can be given: the output is NaN, `net.metadata["class_labels"]` is empty
        or not a list of labels, or a one-score output says "yes" to a single label.
    """
    names = net.output_names
    if output is None:
        output = names[0]
    elif not isinstance(output, str) or output not in names:
        raise ArgumentError(f"classify: unknown output {output!r}; outputs: {', '.join(names)}")
    labels = _labels(net, output)             # checked before running: a bad entry fails fast
    scores = predict(net, (X,), {}, batch_size, device, precision, compile)
    if isinstance(scores, dict):
        scores = scores[output]
    threshold = 0.5 if final_module(net, output, nn.Sigmoid) is not None else 0.0
    if isinstance(scores, list):
        return [_decide(s, labels, threshold, output, i) for i, s in enumerate(scores)]
    return _decide(scores, labels, threshold, output)


_WHERE = "net.metadata['class_labels']"


def _labels(net, output: str) -> np.ndarray | None:
    """The label of each class index of `output` (None: the indices are the labels)."""
    labels = net.metadata.get("class_labels")
    where = _WHERE
    if isinstance(labels, dict):
        labels = labels.get(output)
        where = f"{_WHERE}[{output!r}]"
    if labels is None:
        return None
    if not isinstance(labels, (list, tuple)) or \
            not all(isinstance(v, LABEL_TYPES) for v in labels):
        raise DataError(f"classify: {where} must be a list of label values, one per class in "
                        f"class order, found {_short(labels)}. Set it to that list, or delete it "
                        "to get class indices.")
    if not labels:
        raise DataError(f"classify: {where} is empty: training saw no label for output "
                        f"'{output}' (every target ignored?), so no class has a label to give. "
                        "Train on labelled targets, or delete the entry to get class indices.")
    if len({type(v) for v in labels}) > 1:        # mixed kinds: keep each value as it is
        return np.array(list(labels), dtype=object)
    return np.asarray(labels)


def _decide(scores: torch.Tensor, labels: np.ndarray | None, threshold: float, output: str,
            seq: int | None = None) -> np.ndarray:
    """scores …×C (channel last; B×C×H×W images use dim 1) → label per position. With more
    channels than labels, the choice is among the channels that have one (the classes that
    training named; the others were never a target)."""
    if not scores.is_floating_point():
        scores = scores.float()
    if scores.dim() < 2 and seq is None:           # one score per observation: a decision
        scores = scores.unsqueeze(-1)
    cd = 1 if scores.dim() == 4 else scores.dim() - 1
    where = f"output '{output}'" + (f" (sequence {seq})" if seq is not None else "")
    channels = scores.shape[cd]
    if channels == 0:
        raise DataError(f"classify: {where} has 0 channels: there is no class to choose. Give the "
                        "last layer one unit per class.")
    _check_finite(scores, where)
    if channels == 1:
        idx = (scores.squeeze(cd) > threshold).long()
        if labels is not None and len(labels) < 2 and bool((idx == 1).any()):
            raise DataError(f"classify: {where} gives one score, a yes/no decision, but "
                            f"{_WHERE} holds only {len(labels)} label ({_short(list(labels))}): "
                            "training saw one class only, so a 'yes' has no label. Train on "
                            "targets of both classes, or delete the entry to get 0/1.")
    else:
        if labels is not None and len(labels) < channels:
            scores = scores.narrow(cd, 0, len(labels))
        idx = scores.argmax(cd)
    found = idx.cpu().numpy()
    return labels[found] if labels is not None else found


def _check_finite(scores: torch.Tensor, where: str) -> None:
    """A NaN score has no largest class: classify would name one at random."""
    bad = torch.isnan(scores)
    if not bool(bad.any()):
        return
    first = int(bad.reshape(len(scores), -1).any(1).nonzero()[0, 0]) if scores.dim() else 0
    raise DataError(f"classify: {where} is NaN for observation {first} (and "
                    f"{int(bad.reshape(len(scores), -1).any(1).sum()) - 1} more), so no class can "
                    "be chosen. The weights or the inputs hold NaN or Inf: check the inputs, and "
                    "retrain with check_finite=True if training diverged.")


def _short(v, n: int = 60) -> str:
    text = repr(v)
    return text if len(text) <= n else text[: n - 1] + "…"
