"""Saving and loading networks: one zip file, no pickle (`save`, `load`, `register_module`).

One job a module:

- `format`: the file's layout (a zip of ``network.json`` and ``weights.safetensors``), the
  graph to JSON, and writing it (`save`);
- `schema`: the limits (`LIMITS`) and the checks of the JSON read from a file, input from
  anywhere;
- `archive`: the zip's members and the safetensors header and tensors, read as hostile input;
- `weights`: the file's tensors checked against the graph's, tied and copied in;
- `modules`: the allow-list of factories for `L.Module` layers (`register_module`);
- `loading`: `load`, which rebuilds the graph from the layer registry, then its weights;
- `messages`: how a file's strings and tensor names appear in messages.

A file is data, never code: nothing in it is unpickled, imported, evaluated or pasted into code.
"""
from .format import FORMAT, GRAPH_FILE, SHARED_VERSION, VERSION, WEIGHTS_FILE, save
from .loading import LAYER_PACKAGES, load
from .messages import _friendly  # noqa: F401  (network.py names tensors by layer)
from .modules import _MODULE_FACTORIES, register_module  # noqa: F401  (the registry itself)
from .schema import LIMITS

__all__ = ["save", "load", "register_module", "LIMITS", "LAYER_PACKAGES", "FORMAT", "VERSION",
           "SHARED_VERSION", "GRAPH_FILE", "WEIGHTS_FILE"]
