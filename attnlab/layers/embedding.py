"""Token embeddings."""
from __future__ import annotations

from torch import nn

from ..spec import Spec
from . import _checks as check
from .base import Layer


class Embedding(Layer):
    """Token ids to vectors [wordEmbeddingLayer]: B×T×1 (or B×T) integer-valued → B×T×dim.
    Learnable `weight` (vocab×dim)."""

    def __init__(self, vocab: int, dim: int, name: str | None = None):
        super().__init__(name)
        self.vocab = check.integer(self, "vocab", vocab, example=1000)
        self.dim = check.integer(self, "dim", dim, example=64)

    def infer(self, specs):
        s = specs["in"]
        self.require(s, "in", ("BTC", "BT"), "Embedding reads token ids, one channel per step.")
        check.learnables_fit(self, "in", "Use a smaller vocab or dim.", weight=(self.vocab, self.dim))
        if s.labels == "BTC":
            self.require_channels(s, "in", 1, "Token ids come as one channel: SequenceInput(1).")
        return Spec.sequence(self.dim, s.time)

    def build(self, specs):
        return _Embedding(self.vocab, self.dim, squeeze=specs["in"].labels == "BTC")


class _Embedding(nn.Embedding):
    def __init__(self, vocab, dim, squeeze):
        super().__init__(vocab, dim)
        self.squeeze = squeeze

    def forward(self, x):
        if self.squeeze:
            x = x.squeeze(-1)                       # B×T×1 → B×T
        return super().forward(x.long())            # B×T×dim
