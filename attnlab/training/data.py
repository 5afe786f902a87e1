"""In-memory training data: inputs and targets held as whole tensors, gathered per mini-batch.

Every input and every target becomes a `Field`: one tensor `N×…` for all N observations, with
variable-length sequences padded once to the longest and their lengths kept on the host. A
mini-batch is then one `index_select` per field and a slice to the batch's own longest sequence:
no Python loop over observations, no per-step host↔device traffic (the epoch's order lives on the
device, the lengths on the host).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from attnlab.core import batching as B
from attnlab.core.errors import DataError, close_matches
from ..graph.names import parse_port
from attnlab.core.sequences import Padded
from attnlab.core.spec import Spec
from .sampler import shard, usable


class Field:
    """One input or target for all observations.

    `data`: N×… (sequences N×T_max×…, zero-padded). `lengths`: host int64 array of N valid
    lengths for variable-length sequences, else None (then every observation is whole)."""

    def __init__(self, name: str, data: torch.Tensor, lengths: np.ndarray | None = None):
        self.name = name
        self.data = data
        # class targets some of which are ignored: host N×… mask of the targets that count
        self._counted: np.ndarray | None = None
        self._counts: np.ndarray | None = None
        self.set_lengths(lengths)
        # prediction units per observation-step (targets): positions a loss averages over
        self.time_axis = lengths is not None
        self.step_units = 1

    def set_lengths(self, lengths: np.ndarray | None) -> None:
        self.lengths = lengths
        dev = self.data.device
        self._lengths_dev = None if lengths is None else torch.as_tensor(lengths, device=dev)
        self._steps = None if lengths is None else torch.arange(self.data.shape[1], device=dev)
        self._count()

    def set_counted(self, counted: np.ndarray) -> None:
        """Marks which targets count (False: ignored, see TrainingOptions.ignore_index): the
        units of a batch are then the counted targets on its real steps, known on the host."""
        self._counted = counted
        self._count()

    def _count(self) -> None:
        counted = self._counted
        if counted is None:
            self._counts = None
            return
        if self.lengths is not None:
            valid = np.arange(counted.shape[1])[None, :] < self.lengths[:, None]
            counted = counted & valid.reshape(valid.shape + (1,) * (counted.ndim - 2))
        self._counts = counted.reshape(len(counted), -1).sum(1).astype(np.int64)

    def __len__(self) -> int:
        return self.data.shape[0]

    def to(self, device) -> "Field":
        self.data = self.data.to(device)
        if self._lengths_dev is not None and self._steps is not None:   # sequences
            self._lengths_dev = self._lengths_dev.to(device)
            self._steps = self._steps.to(device)
        return self

    def take(self, idx: torch.Tensor, idx_host: np.ndarray):
        """(B×… tensor, B×T mask or None) for the observations `idx` (on the data's device;
        `idx_host` is the same indices on the host, to size the batch without a sync)."""
        if self.lengths is None or self._steps is None or self._lengths_dev is None:  # whole
            return self.data.index_select(0, idx), None
        lens = self.lengths[idx_host]
        t = int(lens.max()) if len(lens) else 0
        x = self.data[:, :t].index_select(0, idx)                          # B×t×…
        if len(lens) and lens.min() == t:       # equal lengths: no padding to carry
            return x, None
        mask = self._steps[:t].unsqueeze(0) < self._lengths_dev.index_select(0, idx).unsqueeze(1)
        return x, mask                                                     # mask B×t

    def units(self, idx_host: np.ndarray) -> int:
        """Prediction units among `idx_host`: valid time steps (observations without a time
        axis), times the positions per step (e.g. pixels of a segmentation target); with
        ignored targets, the targets that count."""
        if self._counts is not None:
            return int(self._counts[idx_host].sum())
        if self.lengths is not None:
            steps = int(self.lengths[idx_host].sum())
        else:
            steps = len(idx_host) * (self.data.shape[1] if self.time_axis else 1)
        return steps * self.step_units


# --------------------------------------------------------------------------- inputs ---

def by_input_name(net, X) -> dict:
    """X (one input's data, or a dict by input name) → dict by input name."""
    names = net.input_names
    if isinstance(X, dict):
        unknown = [k for k in X if k not in names]
        missing = [k for k in names if k not in X]
        if unknown or missing:
            hint = "".join(close_matches(k, names) for k in unknown)
            raise DataError(f"inputs by name: the network's inputs are {', '.join(names)}; "
                            + (f"unknown {', '.join(map(repr, unknown))}.{hint} " if unknown else "")
                            + (f"missing {', '.join(map(repr, missing))}." if missing else ""))
        return {k: X[k] for k in names}
    if len(names) != 1:
        raise DataError(f"the network has {len(names)} inputs ({', '.join(names)}): give X as a dict "
                        "by input name, e.g. {" + ", ".join(f"'{n}': …" for n in names) + "}.")
    return {names[0]: X}


def input_spec(net, name: str) -> Spec | None:
    """The spec an input layer declares (None for a network sized by its data)."""
    layer = net.layer_map[parse_port(name)[0]]
    return layer.spec if layer.is_input else None


def to_field(name: str, x, spec: Spec | None, dtype, what: str = "input") -> Field:
    """Converts one input's data (tensor, array, list of sequences, Padded) into a Field,
    checking it against the input's spec."""
    if spec is not None and spec.labels == "BT":       # token ids: B×T int64, never cast
        x, mask = B.as_batch(x, spec, name, None)
        return Field(name, x, None if mask is None else _lengths(mask, name, what))
    lengths = None
    if isinstance(x, Padded):
        lengths = _lengths(x.mask, name, what)
        x = x.data
    elif isinstance(x, (list, tuple)):
        x, lengths = _from_list(name, x, spec, what)
    elif not isinstance(x, torch.Tensor):
        x = B.array_tensor(x, spec, name, what)
    B.check_values(x, spec, name, what)
    if x.is_floating_point() and dtype is not None and x.dtype != dtype:
        x = x.to(dtype)
    if spec is not None:
        check_shape(name, x, spec, what)
    field = Field(name, x, lengths)
    if x.is_floating_point():
        check_finite(field, what)
    return field


def _lengths(mask: torch.Tensor, name: str, what: str) -> np.ndarray:
    """Each sequence's length, from a padding mask that pads at the end (a Field keeps
    lengths only); other padding is refused rather than read as padding at the end."""
    lengths = mask.sum(1)
    steps = torch.arange(mask.shape[1], device=mask.device)
    if not bool(torch.equal(mask, steps.unsqueeze(0) < lengths.unsqueeze(1))):
        raise DataError(f"{what} '{name}': in-memory training takes sequences padded at their "
                        "end, and this padding mask marks padding before real steps (left "
                        "padding). Pad at the end, or give the batches as a Dataset / "
                        "DataLoader, which keeps each mask as it is.")
    return lengths.cpu().numpy().astype(np.int64)


def _from_list(name, seqs, spec, what):
    if not len(seqs):
        raise DataError(f"{what} '{name}': received an empty list.")
    items = [B.observation(s, i, spec, name, what) for i, s in enumerate(seqs)]
    first = items[0].dim()
    sequential = spec is None or spec.is_sequence
    if sequential and first in (1, 2) and (first == 2 or (spec is not None and spec.channels == 1)):
        tensors = items
        if any(t.dim() != first for t in tensors):
            raise DataError(f"{what} '{name}': the sequences have different numbers of dimensions; "
                            "give each as T_i×C.")
        tensors = [t.unsqueeze(-1) if t.dim() == 1 else t for t in tensors]
        widths = {t.shape[1] for t in tensors}
        if len(widths) > 1:
            raise DataError(f"{what} '{name}': the sequences have different channel counts "
                            f"{sorted(widths)}; every step needs the same channels.")
        lengths = np.array([t.shape[0] for t in tensors], dtype=np.int64)
        if lengths.min() == 0:
            raise DataError(f"{what} '{name}': sequence {int(np.argmin(lengths))} has 0 time steps; "
                            "every sequence needs at least one. Drop the empty sequences (and "
                            "their targets).")
        data = torch.nn.utils.rnn.pad_sequence(tensors, batch_first=True)   # N×T_max×C
        return data, (lengths if lengths.min() != lengths.max() else None)
    shapes = [tuple(t.shape) for t in items]
    bad = next((i for i, sh in enumerate(shapes) if sh != shapes[0]), None)
    if bad is not None:
        show = lambda sh: "×".join(map(str, sh)) or "a scalar"      # noqa: E731
        raise DataError(f"{what} '{name}': observation {bad} is {show(shapes[bad])}, observation 0 "
                        f"is {show(shapes[0])}; cannot stack them into one array. Give one array "
                        "N×…, or a list of T_i×C sequences for a sequence input.")
    return torch.stack(items), None


def check_shape(name: str, x: torch.Tensor, spec: Spec, what: str = "input") -> None:
    """DataError unless x (N×…) fits `spec` (every known size but the batch)."""
    if x.dim() == len(spec.labels) and all(
            s is None or i == 0 or s == n for i, (s, n) in enumerate(zip(spec.sizes, x.shape))):
        return
    got = "×".join(map(str, x.shape))
    raise DataError(f"{what} '{name}': expected {spec} ({spec.kind}), received {got}. "
                    f"{_shape_fix(x, spec)}".rstrip())


def _shape_fix(x, spec: Spec) -> str:
    if spec.is_sequence and x.dim() == 2 and spec.channels == 1:
        return "Add the channel dimension: x.unsqueeze(-1) (N×T → N×T×1)."
    if spec.is_sequence and x.dim() == 3 and x.shape[1] == spec.channels:
        return "Sequences are batch-first N×T×C in attnlab: use x.transpose(1, 2)."
    if spec.is_image and x.dim() == 4 and x.shape[-1] == spec.channels:
        return "Images are N×C×H×W in attnlab: use x.permute(0, 3, 1, 2)."
    if spec.channels is not None and x.dim() >= 2:
        layer = "SequenceInput" if spec.is_sequence else "ImageInput" if spec.is_image else "FeatureInput"
        size = f"({x.shape[1]}, H, W)" if spec.is_image else f"{x.shape[-1]}"
        return (f"The input layer was declared with {spec.channels} channels: change the data, or "
                f"the layer (e.g. {layer}({size})) to match.")
    return "Check the sizes the input layer was declared with."


def check_finite(field: Field, what: str = "input") -> None:
    """DataError naming the first observation with a NaN or Inf."""
    data = field.data
    if bool(torch.isfinite(data).all()):
        return
    bad = (~torch.isfinite(data)).reshape(len(data), -1).any(1).nonzero()[:, 0]
    kind = "NaN" if bool(torch.isnan(data).any()) else "Inf"
    raise DataError(f"{what} '{field.name}': {len(bad)} observation(s) contain {kind} or Inf values, "
                    f"the first is observation {int(bad[0])}. Remove or impute them (e.g. "
                    "torch.nan_to_num) before training.")


def count_of(fields: dict[str, Field], what: str) -> int:
    counts = {k: len(f) for k, f in fields.items()}
    if len(set(counts.values())) > 1:
        raise DataError(f"{what} differ in the number of observations: "
                        + ", ".join(f"'{k}' has {n}" for k, n in counts.items())
                        + ". Every input needs one entry per observation.")
    return next(iter(counts.values()))


# ---------------------------------------------------------------------------- batch ---

class Batch(NamedTuple):
    """One mini-batch (this process's part of it).

    `inputs`: input name → tensor or Padded. `targets`: output name → (target, mask or None).
    `units`: output name → prediction units (observations, or valid time steps) in the whole
    global batch: what the mean loss divides by, so that split across processes the sum of the
    parts equals the one-process mean. `size`: observations here; `local_units` the units
    here."""

    inputs: dict
    targets: dict
    units: dict
    size: int
    local_units: dict


class MemoryData:
    """Inputs and targets as Fields; `batch(...)` gathers one mini-batch."""

    def __init__(self, inputs: dict[str, Field], targets: dict[str, Field]):
        self.inputs = inputs
        self.targets = targets
        self.n = count_of(inputs, "the inputs")

    def __len__(self):
        return self.n

    def to(self, device) -> "MemoryData":
        for f in (*self.inputs.values(), *self.targets.values()):
            f.to(device)
        return self

    @property
    def lengths(self) -> np.ndarray | None:
        """Per-observation lengths of the first variable-length input (for sort_by_length)."""
        return next((f.lengths for f in self.inputs.values() if f.lengths is not None), None)

    def batch(self, idx: torch.Tensor, idx_host: np.ndarray, global_host: np.ndarray) -> Batch:
        inputs = {}
        for name, f in self.inputs.items():
            x, mask = f.take(idx, idx_host)
            inputs[name] = x if mask is None else Padded(x, mask)
        targets = {name: f.take(idx, idx_host) for name, f in self.targets.items()}
        units = {name: f.units(global_host) for name, f in self.targets.items()}
        local = units if global_host is idx_host else \
            {name: f.units(idx_host) for name, f in self.targets.items()}
        return Batch(inputs, targets, units, len(idx_host), local)

    def batches(self, epoch, start: int, rank: int, world: int, device, reduce: bool = True):
        """Yields (k, Batch) for batches k ≥ start of `epoch`: this process's part of each.
        (`reduce` is for DatasetData's signature: here global units come from host lengths.)"""
        order = torch.as_tensor(epoch.order, device=device)       # one upload per epoch
        for k in range(start, epoch.batches):
            lo, hi = epoch.batch(k)
            if not usable(lo, hi, world):
                continue
            a, b = shard(lo, hi, rank, world)
            glob = epoch.order[lo:hi]
            yield k, self.batch(order[a:b], epoch.order[a:b] if world > 1 else glob, glob)
