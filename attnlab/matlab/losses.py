"""The losses of MATLAB's output layers that attnlab's core does not name: classificationLayer's
ClassWeights."""
from __future__ import annotations

import torch
from torch.nn import functional as F

from attnlab.core.errors import DataError
from ..training.losses import CrossEntropy, Loss


class WeightedCrossEntropy(CrossEntropy):
    """classificationLayer's ClassWeights: −(1/N) Σₙ w_cₙ log softmax(zₙ)_cₙ, MATLAB's weighted
    cross-entropy (normalised by the number of observations, not by the weights)."""

    def __init__(self, weights, spec=None, kind="dense"):
        super().__init__(spec, kind)
        self.weights = torch.as_tensor(weights, dtype=torch.float32)

    def terms(self, out, target):
        """The weighted cross-entropy of each observation (or step)."""
        cd = self.channel_dim % out.dim()
        w = self.weights.to(out.device, out.dtype)
        if w.numel() != out.shape[cd]:
            raise DataError(f"classificationLayer: expected ClassWeights with one value per class "
                            f"({out.shape[cd]} network outputs), received {w.numel()}.")
        if self.kind == "class":
            logits = out if cd == 1 else out.movedim(cd, 1)
            return F.cross_entropy(logits, target, weight=w, reduction="none")
        shape = [1] * out.dim()
        shape[cd] = -1
        return -(target * w.view(shape) * F.log_softmax(out, dim=cd)).sum(cd)

    def sum(self, out, target, mask, local_units=None):
        """The sum of the terms over the valid observations (MATLAB's normalisation)."""
        return Loss.sum(self, out, target, mask, local_units)
