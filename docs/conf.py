"""Sphinx configuration of attnlab's documentation (`make docs`).

The build is strict (`-W --keep-going -n`, see the Makefile): any warning, an unresolved
cross-reference or a public name without a docstring (docs/_ext/attnlab_docs.py) fails it. It is
offline: no intersphinx inventories, no remote images, the theme ships its own assets.
"""
from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE.parent))

import attnlab  # noqa: E402  (the version comes from the package, its one source)

project = "attnlab"
author = "attnlab contributors"
copyright = "attnlab contributors, MIT licence"
release = attnlab.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "myst_parser",              # the pages are Markdown, readable on a code host as well
    "sphinx.ext.autodoc",       # the reference, from the docstrings
    "sphinx.ext.napoleon",      # NumPy-style docstrings
    "attnlab_docs",             # fails the build on a public name without a docstring
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
myst_enable_extensions = ["colon_fence"]
myst_heading_anchors = 3

# The reference: signatures with their annotations, members in source order.
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_typehints_format = "short"
autodoc_preserve_defaults = True
# classes named in annotations under `if TYPE_CHECKING:` (imports that would run upwards)
autodoc_type_aliases = {"Stream": "attnlab.stream.core.Stream",
                        "OnnxExport": "attnlab.io.onnx.export.OnnxExport",
                        "WeightedCrossEntropy": "attnlab.matlab.losses.WeightedCrossEntropy"}
autodoc_class_signature = "mixed"
# `config()` is the layers' serialisation hook (attnlab/io/format.py), not an API a user calls.
autodoc_default_options = {"members": True, "undoc-members": True,
                           "exclude-members": "forward,extra_repr,infer,build,step_module,config,"
                                              "stem,uses_mask,returns_mask,is_input"}
# attnlab's docstrings write `name` for code, as Markdown does.
default_role = "code"
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False
napoleon_use_ivar = True          # "Attributes" sections as fields (no duplicate targets)
# "Shape": a layer's size contract, one bullet per port
napoleon_custom_sections = ["Shape"]
python_use_unqualified_type_names = True

# Names in annotations that are not documented here (torch, numpy, the standard library) are
# written as plain text instead of failing the nitpicky build: there is no network for their
# inventories. Everything under attnlab must resolve.
nitpick_ignore_regex = [
    ("py:.*", r"(torch|numpy|np|collections|typing|pathlib|os|io|matplotlib|rich|pandas)(\..*)?"),
    ("py:.*", r"(Tensor|Module|Parameter|Path|PathLike|Figure|Axes|ndarray|Dataset|DataLoader"
              r"|device|dtype|Callable|Iterable|Iterator|Mapping|Sequence|Any|Literal|Optional"
              r"|Union|Self|TypeAlias|ArrayLike|StrPath)"),
    # choices written as NumPy-style parameter types ("auto" or float, int, optional)
    ("py:class", r'".*"|\'.*\'|optional'),
    # plain words in NumPy-style types ("sequence of tensors", "binary file", "callable")
    ("py:class", r"sequence|tensors?|arrays?|callable|(binary )?file|of"),
    # private helpers named in annotations (base classes of layer modules, the module dict)
    ("py:.*", r"attnlab\..*\._\w+|attnlab\.network(\.modules)?\.LayerModules"),
    # the graph base of Network (editing returns the network itself) and its layers tuple
    ("py:class", r"attnlab\.graph\.(Graph|LayerList)"),
    # what a stream captures, handed to Stream by net.stream (users never make a Stream)
    ("py:class", r"attnlab\.stream\.capture\.Capture"),
    ("py:.*", r"(int|float|str|bool|bytes|None|dict|list|tuple|set|object|type|slice)"),
]

html_theme = "furo"
html_title = f"attnlab {release}"
html_static_path: list[str] = []
html_show_sourcelink = False
html_copy_source = False
