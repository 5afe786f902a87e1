"""Training: `al.train(net, X, Y, loss=..., options=al.TrainingOptions(...))` → `TrainingInfo`,
and `al.classify`.

Modules: `options` (TrainingOptions), `data`/`targets`/`labels`/`loader` (inputs and targets in
memory or from a Dataset), `sampler` (epoch order, per-process split), `losses`/`metrics`
(sums over valid units), `step` (the hot path and validation), `loop` (epochs, validation,
early stopping, logging, checkpoints), `state`/`checkpoint` (exact resume, atomic safetensors),
`distributed` (DDP under torchrun), `progress`/`plots`/`history` (what the user sees).
"""
from .classify import classify
from .history import TrainingInfo
from .loop import train
from .options import TrainingOptions

__all__ = ["train", "TrainingOptions", "TrainingInfo", "classify"]


# `import attnlab.train` binds the *package* to `attnlab.train`, shadowing the lazily exported
# function of the same name: make the package callable (with train's signature and help) so
# `al.train(net, X, Y, ...)` works in either case.
import inspect as _inspect
import sys as _sys
import types as _types


class _CallablePackage(_types.ModuleType):
    def __call__(self, *args, **kwargs):
        return train(*args, **kwargs)


__signature__ = _inspect.signature(train)
__doc__ += "\nal.train" + str(__signature__) + "\n\n    " + train.__doc__
_sys.modules[__name__].__class__ = _CallablePackage
