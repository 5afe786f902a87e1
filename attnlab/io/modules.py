"""`L.Module` layers in files: the allow-list of factories (`register_module`) that remake
their torch modules, and the checks of a Module entry when loading. A file names only the
module's class (a plain identifier, never an import path); the code comes from the program."""
from __future__ import annotations

from typing import Any, Callable

from torch import nn

from attnlab.core.errors import ArgumentError, NetworkError
from attnlab.core.spec import Spec
from .messages import _show
from .schema import LIMITS, _IDENT, _SPEC_LABELS, _bad, _int, _string

_MODULE_FACTORIES: dict[str, Callable[[], nn.Module]] = {}


def register_module(name: str | type, factory: Callable[[], nn.Module] | None = None) -> Any:
    """Registers how to recreate the torch module of `L.Module` layers when loading.

    A saved file records the module's class name only (never code); `al.load` calls the factory
    registered for that name and loads the weights into the fresh module::

        al.register_module("Linear", lambda: nn.Linear(4, 3))
        al.register_module(MyBlock)              # a class whose constructor needs no arguments

        @al.register_module("MyBlock")           # or as a decorator
        def make_block(): return MyBlock(64)

    Parameters
    ----------
    name : str or type
        The module's class name, as a saved file records it, or the class itself.
    factory : Callable, optional
        Returns a fresh module of the same structure. Without it, a class `name` is its own
        factory, and a string `name` makes the call a decorator.

    Returns
    -------
    Callable
        The factory (or the decorator).
    """
    if isinstance(name, type) and factory is None:
        factory, name = name, name.__name__
    if not isinstance(name, str) or not name:
        raise ArgumentError(f"register_module(name, factory): name must be the module's class "
                            f"name as a string, got {name!r}")
    if factory is None:                                   # decorator form
        def deco(f):
            register_module(name, f)
            return f
        return deco
    if not callable(factory):
        raise ArgumentError(f"register_module('{name}', factory): factory must be callable (a "
                            f"class or a function returning an nn.Module), got {factory!r}")
    _MODULE_FACTORIES[name] = factory
    return factory


def _same_module(entry, net, where, at):
    """The Module layer, loaded before this one, whose torch module this one wraps too."""
    if "same_module_as" not in entry:
        return None
    here = f"{at}.same_module_as"
    first = _string(entry["same_module_as"], where, here, LIMITS["name_chars"])
    layer = net.layer_map.get(first) if net is not None else None
    if layer is None or layer.type_name != "Module":
        raise _bad(where, here, f"{_show(repr(first))} is not a Module layer before this one")
    return layer


def _module_config(cfg, where, at, name, modules, same=None):
    """`L.Module` entries name their module's class; the module itself comes only from a
    factory the program registered (an explicit allow-list): a file cannot name code to
    import or run."""
    cls_name = cfg.pop("module", None)
    if not isinstance(cls_name, str) or not _IDENT.match(cls_name):
        raise _bad(where, f"{at}.module", f"{_show(repr(cls_name))} is not a module class name: "
                   "a Module entry names a factory registered with al.register_module(), never "
                   "an import path")
    factory = modules.get(cls_name) or _MODULE_FACTORIES.get(cls_name)
    if same is not None:                      # the module of an earlier layer: no new one
        if type(same.module).__name__ != cls_name:
            raise _bad(where, f"{at}.module", f"{_show(repr(cls_name))} differs from the class "
                       f"'{type(same.module).__name__}' of layer '{same.name}', whose module "
                       "it names as its own")
        factory = lambda: same.module             # noqa: E731
    if factory is None:
        raise NetworkError(
            f"cannot load '{where}': layer '{name}' wraps a torch module of class "
            f"'{cls_name}', whose code a file cannot hold (attnlab never pickles or imports "
            f"what a file names). Tell attnlab how to make one before loading: "
            f"al.register_module('{cls_name}', lambda: {cls_name}(...)), or "
            f"al.load(path, modules={{'{cls_name}': ...}}). The weights then come from the file.")
    for key, lo, hi in (("num_inputs", 1, 1024), ("num_outputs", 1, 1024)):
        if key in cfg:
            _int(cfg[key], where, f"{at}.{key}", lo, hi)
    fmt = cfg.get("output_format")
    if fmt is not None:
        for i, f in enumerate(fmt if isinstance(fmt, (list, tuple)) else [fmt]):
            if not isinstance(f, str) or not f or any(c not in _SPEC_LABELS for c in f):
                raise _bad(where, f"{at}.output_format", f"{_show(repr(f))} is not a spec's labels")
    specs = cfg.get("output_specs")
    if specs is not None and (not isinstance(specs, list)
                              or not all(isinstance(s, Spec) for s in specs)):
        raise _bad(where, f"{at}.output_specs", "expected a list of specs")
    try:
        module = factory()
    except Exception as e:
        raise NetworkError(f"cannot load '{where}': the factory registered for module class "
                           f"'{cls_name}' (layer '{name}') raised {type(e).__name__}: {e}") from e
    if not isinstance(module, nn.Module):
        raise NetworkError(f"cannot load '{where}': the factory for '{cls_name}' returned "
                           f"{type(module).__name__}, not a torch.nn.Module.")
    cfg["module"] = module
    return cfg

