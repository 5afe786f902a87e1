"""attnlab: attention networks as layer graphs, on PyTorch."""
import importlib

from . import layers
from attnlab.graph.analysis import Analysis, Issue
from attnlab.core.errors import (ArgumentError, AttnlabError, DataError, FormatError, NetworkError,
                                 SignatureError, SizeError, TrainingError)
from .network import Connection, Network
from attnlab.core.sequences import Padded, pad_sequences
from attnlab.core.spec import Spec

from ._version import __version__ as __version__

# The rest of the flat namespace, imported on first use (keeps `import attnlab` light).
_LAZY = {
    "attention": "attnlab.functional",
    "train": "attnlab.training", "TrainingOptions": "attnlab.training", "TrainingInfo": "attnlab.training",
    "classify": "attnlab.training", "launch": "attnlab.training.distributed",
    "Serial": "attnlab.combinators", "Parallel": "attnlab.combinators",
    "Branch": "attnlab.combinators", "Residual": "attnlab.combinators",
    "Select": "attnlab.combinators",
    "load": "attnlab.io", "register_module": "attnlab.io",
    "plot_attention": "attnlab.viz.attention",
    "generate": "attnlab.stream", "forecast": "attnlab.stream",
    "from_pretrained": "attnlab.pretrained",
    "Trace": "attnlab.network.tracing",
}
_SUBMODULES = {"blocks": "attnlab.blocks", "datasets": "attnlab.training.datasets",
               "matlab": "attnlab.matlab", "functional": "attnlab.functional",
               "pretrained": "attnlab.pretrained", "viz": "attnlab.viz",
               "explain": "attnlab.explain"}


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if name in _SUBMODULES:
        return importlib.import_module(_SUBMODULES[name])
    raise AttributeError(f"module 'attnlab' has no attribute '{name}'")


__all__ = [
    "layers", "Network", "Analysis", "Issue", "Connection", "Spec", "Padded", "pad_sequences",
    "AttnlabError", "ArgumentError", "NetworkError", "SizeError", "FormatError", "DataError",
    "TrainingError", "SignatureError", *_LAZY,
]


def __dir__():
    # tab completion shows the public API (the lazy names too), not the modules it is made of
    return sorted({*__all__, *_SUBMODULES, "__version__"})
