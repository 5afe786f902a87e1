"""Sphinx checks that keep the reference complete (loaded by docs/conf.py).

- Every public object autodoc renders (module, class, function, method, property) must have a
  docstring: an empty one is a warning, and the strict build turns it into a failure.
- Every name in `__all__` of `attnlab`, `attnlab.layers` and `attnlab.matlab` must appear in the
  reference (docs/api/*.md): a public name added to the package without a page entry fails too.
"""
from __future__ import annotations

import importlib
from typing import Any

from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)

PUBLIC_MODULES = ("attnlab", "attnlab.layers", "attnlab.matlab")
NEEDS_DOCSTRING = {"module", "class", "exception", "function", "method", "property"}


def _record(app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    documented = app.env.attnlab_documented  # type: ignore[attr-defined]
    documented.add(name)
    leaf = name.rsplit(".", 1)[-1]
    if what in NEEDS_DOCSTRING and not leaf.startswith("_") and not any(s.strip() for s in lines):
        logger.warning("public %s %s has no docstring: write one (NumPy style, see "
                       "docs/contributing.md)", what, name, type="attnlab", subtype="docstring")


def _init_env(app: Sphinx, env: Any, docnames: list[str]) -> None:
    env.attnlab_documented = set()
    # every page is read again, so the record of what the reference shows is complete
    docnames[:] = sorted(env.found_docs)


def _check_coverage(app: Sphinx, env: Any) -> None:
    # what autodoc rendered, and what a page describes by hand (``.. data::``)
    documented = env.attnlab_documented | set(env.get_domain("py").objects)
    for modname in PUBLIC_MODULES:
        module = importlib.import_module(modname)
        for public in getattr(module, "__all__", ()):
            if f"{modname}.{public}" not in documented:
                logger.warning("%s.%s is public (in __all__) but not in the API reference: add it "
                               "to docs/api/", modname, public, type="attnlab", subtype="coverage")


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("env-before-read-docs", _init_env)
    app.connect("autodoc-process-docstring", _record)
    app.connect("env-check-consistency", _check_coverage)
    return {"version": "1", "parallel_read_safe": False, "parallel_write_safe": True}
