"""Targets: matched to each output's spec and loss, and turned into Fields.

Class targets become int64 indices shaped like the output without its channel axis (N, or N×T
for one label per time step); dense targets (regression, probabilities, binary) take the
output's shape. A sequence output (B×T×C) given one target per observation is the most common
mistake (MATLAB's "sequence-to-label" question, seed 2): it gets a FormatError that names the
output layer and says where to reduce the time axis.
"""
from __future__ import annotations

import numpy as np
import torch

from attnlab.core.errors import DataError, FormatError
from ..graph.names import parse_port
from attnlab.core.sequences import Padded, as_tensor
from attnlab.core.spec import Spec
from . import labels as lab
from .data import Field, check_finite
from .losses import Loss


def by_output_name(net, Y, what: str = "Y") -> dict:
    names = net.output_names
    if isinstance(Y, dict):
        unknown = [k for k in Y if k not in names]
        missing = [k for k in names if k not in Y]
        if unknown or missing:
            raise DataError(f"{what} by output name: the network's outputs are {', '.join(names)}; "
                            + (f"unknown {', '.join(map(repr, unknown))}. " if unknown else "")
                            + (f"missing {', '.join(map(repr, missing))}." if missing else ""))
        return {k: Y[k] for k in names}
    if len(names) != 1:
        raise DataError(f"the network has {len(names)} outputs ({', '.join(names)}): give {what} as a "
                        "dict by output name.")
    return {names[0]: Y}


class RawTarget:
    """A target as given, normalised: `values` (numpy for labels, else a tensor) padded N×…,
    `lengths` for variable-length sequences, `rank` counting the batch axis."""

    def __init__(self, values, lengths=None):
        self.values = values
        self.lengths = lengths

    @property
    def rank(self) -> int:
        return self.values.ndim

    @property
    def shape(self) -> tuple:
        return tuple(self.values.shape)

    def __len__(self):
        return self.shape[0] if self.shape else 0


def raw_target(y, name: str) -> RawTarget:
    if isinstance(y, Padded):
        return RawTarget(y.data, y.mask.sum(1).cpu().numpy().astype(np.int64))
    if isinstance(y, torch.Tensor):
        return RawTarget(y.detach())
    if isinstance(y, (list, tuple)):
        if not len(y):
            raise DataError(f"targets for output '{name}': received an empty list.")
        if all(np.ndim(v) == 0 for v in y):
            return RawTarget(_array(list(y)))
        return _sequences(y, name)
    a = _array(y)
    return RawTarget(torch.as_tensor(a) if a.dtype.kind in "biuf" else a)


def _array(values) -> np.ndarray:
    if isinstance(values, torch.Tensor):
        return values.detach().cpu().numpy()
    a = np.asarray(values)
    if a.dtype.kind == "O":
        try:
            a = np.asarray(values, dtype=str) if all(isinstance(v, str) for v in a.reshape(-1)) else a
        except TypeError:
            pass
    return a


def _sequences(seqs, name) -> RawTarget:
    arrays = [_array(s) for s in seqs]
    lengths = np.array([len(a) for a in arrays], dtype=np.int64)
    if len({a.shape[1:] for a in arrays}) > 1:
        raise DataError(f"targets for output '{name}': the sequences have different shapes per step "
                        f"{sorted({a.shape[1:] for a in arrays})}.")
    if arrays[0].dtype.kind in "biuf":
        data = torch.nn.utils.rnn.pad_sequence([torch.as_tensor(a) for a in arrays], batch_first=True)
        return RawTarget(data, lengths)
    t = int(lengths.max())                                   # label values: pad with the first
    pad = np.full((len(arrays), t) + arrays[0].shape[1:], arrays[0].reshape(-1)[0], dtype=object)
    for i, a in enumerate(arrays):                           # one-time setup, not the hot path
        pad[i, :len(a)] = a
    return RawTarget(pad, lengths)


# --------------------------------------------------------------------- matching ---

class TargetPlan:
    """How one output's targets are read: `kind` "class" or "dense", whether a 1-D target gains
    a channel axis, the class labels in use."""

    def __init__(self, output: str, spec: Spec, loss: Loss, kind: str, add_channel: bool = False,
                 class_labels: list | None = None, ignore_index: int | None = lab.HF_IGNORE):
        self.output, self.spec, self.loss = output, spec, loss.bind(spec, kind)
        self.kind, self.add_channel, self.class_labels = kind, add_channel, class_labels
        # class targets equal to it count nowhere (TrainingOptions.ignore_index)
        self.ignore_index = ignore_index


def match(net, output: str, spec: Spec, loss: Loss, raw: RawTarget) -> str:
    """"class" or "dense" for these targets, or a FormatError/DataError saying why they do not
    fit the output."""
    out_rank = len(spec.labels)
    time_out = spec.is_sequence
    rank = raw.rank
    values = raw.values
    labelish = isinstance(values, np.ndarray) and lab.is_label_array(values) or \
        isinstance(values, torch.Tensor) and (not values.is_floating_point() or _whole(values))
    if time_out and rank == 1:
        raise seed2_error(net, output, spec, len(raw), loss.classification)
    if not time_out and raw.lengths is not None or (not time_out and rank == out_rank + 1
                                                   and spec.labels == "BC"):
        raise time_axis_error(output, spec, raw)
    if loss.classification and loss.name == "crossentropy":
        if rank == out_rank - 1 and labelish:
            return "class"
        if rank == out_rank and labelish and raw.shape[-1] == 1 and spec.channels not in (None, 1) \
                and raw.lengths is None and not _one_hot(values):
            raw.values = values[..., 0]                     # an N×1 column of class ids
            return "class"
        if rank == out_rank - 1 and _is_float(values) and not labelish:
            raise fractional_labels(output, values)
        if rank == out_rank and (_is_float(values) or raw.shape[-1] == spec.channels
                                 and _one_hot(values)):
            return "dense"                                  # probabilities, or one-hot ints
        if rank == out_rank and labelish and spec.labels == "BC":
            raise time_axis_error(output, spec, raw)        # N×T labels for a B×C output
        if time_out and rank == out_rank - 1:
            raise seed2_error(net, output, spec, len(raw), True)
    else:
        if rank == out_rank:
            return "dense"
        if rank == out_rank - 1 and spec.channels == 1:
            if time_out and raw.lengths is None and raw.shape[1] == 1:
                raise seed2_error(net, output, spec, len(raw), loss.classification)
            return "dense"
        if time_out and rank == out_rank - 1 and raw.shape[-1] == spec.channels:
            raise seed2_error(net, output, spec, len(raw), loss.classification)
    if not _is_float(values) and not labelish:
        raise DataError(f"targets for output '{output}': expected numbers, received {values.dtype}.")
    raise DataError(f"targets for output '{output}' ({spec}, {spec.kind}): received "
                    f"{'×'.join(map(str, raw.shape))}. {_fix(spec, loss)}")


def fractional_labels(output: str, values) -> DataError:
    """Class labels that are not whole numbers (the failure path: reads the values back)."""
    v = torch.as_tensor(values).reshape(len(values), -1).double()
    bad = ~torch.isfinite(v) | (v != v.round())
    i, j = (int(k) for k in bad.nonzero()[0])
    where = f"observation {i}" + (f", position {j}" if v.shape[1] > 1 else "")
    return DataError(f"targets for output '{output}': crossentropy needs class labels (whole numbers "
                     f"0…C-1, or any label values) or probabilities with one column per class; "
                     f"{where} is {float(v[i, j])}, not a whole number ({int(bad.sum())} such "
                     "target(s)). Round or map them to class labels, or use loss='mse' for "
                     "regression.")


def _one_hot(v) -> bool:
    v = torch.as_tensor(v) if isinstance(v, np.ndarray) and v.dtype.kind in "biuf" else v
    return isinstance(v, torch.Tensor) and bool(((v == 0) | (v == 1)).all()) and \
        bool((v.sum(-1) == 1).all())


def _whole(t: torch.Tensor) -> bool:
    return bool(torch.isfinite(t).all()) and bool((t == t.round()).all())


def _is_float(v) -> bool:
    return v.is_floating_point() if isinstance(v, torch.Tensor) else v.dtype.kind == "f"


def _fix(spec: Spec, loss: Loss) -> str:
    n = "×".join("N" if l == "B" else (l if s is None else str(s))
                 for l, s in zip(spec.labels, spec.sizes))
    if loss.name == "crossentropy":
        idx = "×".join("N" if l == "B" else (l if s is None else str(s))
                       for l, s in zip(spec.labels, spec.sizes) if l != "C")
        return f"Give class labels {idx} or probabilities {n}."
    return f"Give targets {n}, the output's shape."


def seed2_error(net, output: str, spec: Spec, n: int, labels: bool) -> FormatError:
    """The output keeps its time axis but the targets have one value per observation."""
    layer = parse_port(output)[0]
    anchor, follower = _reduce_point(net, layer)
    where = f"after '{anchor}'" + (f" (before '{follower}')" if follower else "")
    code = (f"net.disconnect('{anchor}', '{follower}'); net.add(L.GlobalAvgPool1d(name='pool')); "
            f"net.connect('{anchor}', 'pool'); net.connect('pool', '{follower}')" if follower else
            f"net.add(L.GlobalAvgPool1d(name='pool')); net.connect('{anchor}', 'pool')")
    what = "label" if labels else "target"
    err = FormatError(
        f"output '{output}' is a sequence {spec}: one prediction per time step, but the targets have "
        f"one {what} per observation ({n}). To predict one {what} per sequence, reduce the time "
        f"dimension: insert GlobalAvgPool1d, Index1d('last') or AttentionPool1d {where}, e.g. "
        f"{code}. (To predict per time step instead, give each observation a {what} for every step.)")
    err.layer, err.port = layer, None
    return err


def time_axis_error(output: str, spec: Spec, raw: RawTarget) -> FormatError:
    layer = parse_port(output)[0]
    err = FormatError(
        f"output '{output}' gives one prediction per observation ({spec}) but the targets have a time "
        f"axis ({'×'.join(map(str, raw.shape))}). For one prediction per time step keep the time axis: "
        "use LSTM(output_mode='sequence') and remove the pooling or Index1d before the output; for "
        "one per sequence give one target per observation.")
    err.layer, err.port = layer, None
    return err


def _reduce_point(net, layer: str) -> tuple[str, str | None]:
    """Walks back from `layer` over time-local layers (their class declares `time_local`:
    Dense, activations, normalisation, …) to the first layer that mixes time steps: the time
    reduction goes right after it."""
    sources: dict[str, list[str]] = {}
    for (dst, _), (src, _) in net.sources.items():
        sources.setdefault(dst, []).append(src)
    current, follower = layer, None
    for _ in range(len(net.layers)):
        if not getattr(net.layers[current], "time_local", False) or \
                len(sources.get(current, [])) != 1:
            break
        current, follower = sources[current][0], current
        if net.layers[current].is_input:
            return follower, None
    return current, follower


# --------------------------------------------------------------------- building ---

def build(plan_: TargetPlan, raw: RawTarget, what: str) -> Field:
    """Targets → a Field of class indices or dense values for the output of `plan_`."""
    spec, output = plan_.spec, plan_.output
    if plan_.kind == "class":
        return _class_field(plan_, raw, what)
    data = raw.values
    if not isinstance(data, torch.Tensor):
        if data.dtype.kind not in "biuf" and plan_.loss.name == "binary-crossentropy":
            idx, labels = lab.encode(data, 2, output, plan_.class_labels, what)
            plan_.class_labels = plan_.class_labels or labels
            data = idx
        data = as_tensor(np.asarray(data, dtype=np.float32) if data.dtype.kind == "O" else data)
    if data.dim() == len(spec.labels) - 1:
        data = data.unsqueeze(-1) if spec.labels.index("C") == len(spec.labels) - 1 else data.unsqueeze(1)
    data = data.to(torch.get_default_dtype()) if not data.is_floating_point() else data
    cd = spec.labels.index("C") if "C" in spec.labels else None
    if cd is not None and spec.channels is not None and data.shape[cd] != spec.channels:
        raise DataError(f"{what} for output '{output}': {data.shape[cd]} channel(s) per "
                        f"{'step' if spec.is_sequence else 'observation'}, the output has "
                        f"{spec.channels} ({spec}). Match the last layer's units to the targets.")
    field = Field(output, data, raw.lengths)
    check_finite(field, what)
    field.time_axis = spec.is_sequence
    inner = [s for i, s in enumerate(data.shape) if i != 0 and i != cd and not (spec.is_sequence and i == 1)]
    field.step_units = int(np.prod(inner, dtype=np.int64))
    return field


def _class_field(plan_: TargetPlan, raw: RawTarget, what: str) -> Field:
    """Class targets → a Field of class indices. Only real steps (not padding) holding a target
    other than the ignore_index are labels; every other slot gets `IGNORED`, and the Field
    counts the labels of each observation, so a loss averages over those alone."""
    spec, output = plan_.spec, plan_.output
    values = raw.values.cpu().numpy() if isinstance(raw.values, torch.Tensor) else raw.values
    counted = np.ones(values.shape, dtype=bool)
    if raw.lengths is not None:
        valid = np.arange(values.shape[1])[None, :] < raw.lengths[:, None]           # N×T
        counted &= valid.reshape(valid.shape + (1,) * (values.ndim - 2))
    skip = lab.ignored(values[counted], plan_.ignore_index, output, what)
    if skip.any():
        counted[counted] = ~skip
    if not counted.any() and "validation" not in what:
        raise DataError(f"{what} for output '{output}': every target equals ignore_index "
                        f"({plan_.ignore_index}), so the loss has nothing to learn from. Give some "
                        "labels, or set TrainingOptions ignore_index to None if that value is a "
                        "class.")
    flat, labels = lab.encode(values[counted], spec.channels or 0, output, plan_.class_labels, what)
    idx = np.full(values.shape, lab.IGNORED, dtype=np.int64)
    idx[counted] = flat
    if plan_.class_labels is None:
        plan_.class_labels = labels
    field = Field(output, torch.as_tensor(idx), raw.lengths)
    field.time_axis = spec.is_sequence
    field.step_units = int(np.prod(idx.shape[2 if spec.is_sequence else 1:], dtype=np.int64))
    if skip.any():
        field.set_counted(idx != lab.IGNORED)
    return field


def followed_input(net, output: str) -> str | None:
    """The network input whose time steps the sequence output `output` follows: the one whose
    padding mask reaches it. The compiled plan passes on the mask of each layer's first
    sequence input (an attention's query, not its key and value), so the walk back from the
    output takes that port at every layer. None when the walk ends elsewhere."""
    analysis = net.analyze()
    layers = net.layers
    sources = {dst: src for dst, (src, _) in net.sources.items()}
    names = set(net.input_names)
    current = parse_port(output)[0]
    for _ in range(len(layers) + 1):
        layer = layers[current]
        if layer.is_input:
            return current if current in names else None
        specs = analysis.in_specs.get(current) or {}
        port = next((p for p in layer.input_ports if p in specs and specs[p].is_sequence), None)
        if port is None:
            return None
        if (current, port) not in sources:       # an open port: an input of a layer-less network
            name = net.port_name(current, port, "input")
            return name if name in names else None
        current = sources[(current, port)]
    return None


def align_lengths(field: Field, inputs: dict[str, Field], what: str, follows: str | None = None) -> None:
    """Sequence targets and the input their output follows (`follows`, see `followed_input`)
    agree step for step: a padded target array adopts the input's lengths; given lengths must
    equal them. Other inputs (an encoder's keys and values) may have any lengths."""
    if not field.time_axis:
        return
    src = inputs.get(follows) if follows is not None else None
    if src is None:
        seq = [f for f in inputs.values() if f.lengths is not None]
        if len(seq) != 1:
            if field.lengths is None and seq:
                raise DataError(f"{what} for output '{field.name}': several inputs have variable "
                                "lengths; give the targets as a list of T_i×… sequences so each has "
                                "its own length.")
            return
        src = seq[0]
    if src.lengths is None:                      # the followed input has one length for all
        t = src.data.shape[1]
        if field.lengths is None:
            if field.data.shape[1] != t:
                raise DataError(f"{what} for output '{field.name}': {field.data.shape[1]} time steps, "
                                f"but input '{src.name}', whose steps the output follows, has {t}. "
                                "Give one target per step of that input.")
            return
        bad = np.nonzero(field.lengths != t)[0]
        if len(bad):
            i = int(bad[0])
            raise DataError(f"{what} for output '{field.name}': observation {i} has "
                            f"{field.lengths[i]} target steps but input '{src.name}', whose steps "
                            f"the output follows, has {t}. Give one target per step of that input.")
        field.set_lengths(None)                  # every observation whole: no mask to carry
        return
    if field.lengths is None:
        if field.data.shape[1] != src.data.shape[1]:
            raise DataError(f"{what} for output '{field.name}': {field.data.shape[1]} time steps, the "
                            f"input '{src.name}' has up to {src.data.shape[1]}. Give one target per "
                            "input step (a list of T_i×… sequences for variable lengths).")
        field.set_lengths(src.lengths)
        return
    bad = np.nonzero(field.lengths != src.lengths)[0]
    if len(bad):
        i = int(bad[0])
        raise DataError(f"{what} for output '{field.name}': observation {i} has {field.lengths[i]} "
                        f"target steps but input '{src.name}' has {src.lengths[i]} steps. A sequence "
                        "output needs one target per step of the input it follows.")
