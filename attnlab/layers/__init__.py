"""attnlab's layers: small descriptions with ports, a size rule and a module factory."""
from .attention import Attention, AttentionPool1d, MultiHeadAttention, SelfAttention
from .activations import SiLU, Swish, TanhGELU
from .base import LAYER_TYPES, Layer
from .combine import Addition, Concatenation, Multiplication
from .conv import Conv1d, Conv2d, GroupedConv2d
from .dense import (GELU, GLU, Dense, Dropout, LeakyReLU, ReLU, Sigmoid, Softmax, SpatialDropout,
                    Tanh)
from .embedding import Embedding
from .experts import MixtureOfExperts
from .inputs import FeatureInput, ImageInput, SequenceInput, TokenInput
from .module import Module
from .normalization import BatchNorm, GroupNorm, InputNormalization, LayerNorm, RMSNorm
from .position import (PositionEmbedding, RelativePositionBias, SinusoidalPositionEncoding,
                       TokenPositionEmbedding)
from .pooling import (AvgPool2d, Flatten, GlobalAvgPool1d, GlobalAvgPool2d, GlobalMaxPool1d,
                      GlobalMaxPool2d, Index1d, LastToken, MaxPool2d, Pool1d, SelectChannel)
from .recurrent import GRU, LSTM
from .scaling import Identity, Scaling
from .vision import EmbeddingConcatenation, ImageToSequence, PatchEmbedding

__all__ = [
    "Layer", "LAYER_TYPES",
    "SequenceInput", "ImageInput", "FeatureInput", "TokenInput",
    "Dense", "ReLU", "LeakyReLU", "GELU", "TanhGELU", "SiLU", "Swish", "Tanh", "Sigmoid", "Softmax",
    "GLU", "MixtureOfExperts", "Dropout", "SpatialDropout", "Scaling", "Identity",
    "Conv1d", "Conv2d", "GroupedConv2d", "LSTM", "GRU", "LayerNorm", "RMSNorm", "BatchNorm",
    "GroupNorm",
    "InputNormalization", "Pool1d", "MaxPool2d", "AvgPool2d", "GlobalAvgPool1d", "GlobalMaxPool1d", "GlobalAvgPool2d",
    "GlobalMaxPool2d", "Flatten", "Index1d", "LastToken", "SelectChannel",
    "Addition", "Concatenation", "Multiplication", "Embedding",
    "Attention", "SelfAttention", "MultiHeadAttention", "AttentionPool1d", "ImageToSequence",
    "PositionEmbedding", "SinusoidalPositionEncoding", "RelativePositionBias", "PatchEmbedding",
    "TokenPositionEmbedding",
    "EmbeddingConcatenation", "Module",
]


def __dir__():
    # tab completion shows the layers, not the modules they live in
    return sorted(__all__)
