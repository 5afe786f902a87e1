"""Training (the package behind `al.train`; named apart from the function so an import of the
package never shadows it): `al.train(net, X, Y, loss=..., options=al.TrainingOptions(...))` → `TrainingInfo`,
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

