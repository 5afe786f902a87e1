"""The layer types of MATLAB's vision-transformer code [patchEmbeddingLayer,
embeddingConcatenationLayer, swishLayer, geluLayer(Approximation="tanh")]: they are generic and
live in `attnlab.layers` (vision.py, activations.py); re-exported here for MATLAB-side code."""
from __future__ import annotations

from ..layers.activations import Swish, TanhGELU
from ..layers.vision import EmbeddingConcatenation, PatchEmbedding

__all__ = ["PatchEmbedding", "EmbeddingConcatenation", "Swish", "TanhGELU"]
