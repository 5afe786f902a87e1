"""attnlab: attention networks as layer graphs, on PyTorch."""
from . import layers
from .analysis import Analysis, Issue
from .errors import (ArgumentError, AttnlabError, DataError, FormatError, NetworkError, SizeError,
                     TrainingError)
from .network import Connection, Network
from .sequences import Padded, pad_sequences
from .spec import Spec

__version__ = "0.1.0"

__all__ = [
    "layers", "Network", "Analysis", "Issue", "Connection", "Spec", "Padded", "pad_sequences",
    "AttnlabError", "ArgumentError", "NetworkError", "SizeError", "FormatError", "DataError", "TrainingError",
]
