"""Everything decided once before the first step: data, targets, heads, device.

A `Head` is one output with its loss and metrics, bound to the output's spec and target kind,
and the factor that turns a batch's units into the loss's denominator (channels for per-element
losses such as mse, 1 for per-unit losses such as crossentropy).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from attnlab.core.errors import ArgumentError, DataError, NetworkError
from ..graph.names import parse_port
from attnlab.core.precision import machine_devices  # noqa: F401 (re-exported)
from attnlab.core.precision import resolve_device as resolve_device_choice
from attnlab.core.spec import Spec
from . import data as D
from . import labels as lab
from . import targets as T
from .loader import DatasetData, HuggingFaceBatches, hugging_face_data, is_dataset
from .losses import Loss, make_loss
from .metrics import bind_metric, make_metric


@dataclass
class Head:
    output: str
    spec: Spec
    kind: str                     # "class" | "dense"
    loss: Loss
    loss_mult: int
    metrics: list = field(default_factory=list)        # (column name, Metric, multiplier)
    class_labels: list | None = None


def output_specs(net) -> dict[str, Spec]:
    analysis = net.analyze()
    analysis.raise_if_errors("train")
    specs = {}
    for name in net.output_names:
        layer, port = parse_port(name)
        ports = analysis.out_specs[layer]
        specs[name] = ports[port] if port in ports else next(iter(ports.values()))
    return specs


def losses_by_output(loss, outputs: list[str]) -> dict[str, Loss]:
    if isinstance(loss, dict):
        missing = [o for o in outputs if o not in loss]
        if missing or len(loss) != len(outputs):
            raise ArgumentError(f"loss by output name: the outputs are {', '.join(outputs)}; "
                                f"give one loss for each (missing {', '.join(missing) or 'none'}).")
        return {o: make_loss(loss[o]) for o in outputs}
    return {o: make_loss(loss) for o in outputs}


def known_labels(net, output: str, single: bool):
    labels = net.metadata.get("class_labels")
    if isinstance(labels, dict):
        return labels.get(output)
    return labels if single else None


def memory_data(net, X, Y, losses, specs, dtype, plans=None, what="training data",
                ignore_index: int | None = lab.HF_IGNORE):
    """X, Y in memory → (MemoryData, {output: TargetPlan}). With `plans` (the training
    data's), validation targets are read the same way and label values must be known.
    Class targets equal to `ignore_index` count nowhere (TrainingOptions.ignore_index)."""
    if Y is None:
        raise DataError(f"{what}: Y (the targets) is missing. Give X and Y, or a Dataset whose "
                        "items are (x, y).")
    ins = D.by_input_name(net, X)
    inputs = {k: D.to_field(k, v, D.input_spec(net, k), dtype) for k, v in ins.items()}
    n = D.count_of(inputs, "the inputs")
    ys = T.by_output_name(net, Y)
    fields, new_plans = {}, {}
    single = len(specs) == 1
    for out, y in ys.items():
        raw = T.raw_target(y, out)
        if len(raw) != n:
            xs = "X" if len(inputs) == 1 else "each input"
            raise DataError(f"{what}: {xs} has {n} observations but Y{'' if single else f'[{out!r}]'} "
                            f"has {len(raw)}. Give one target per observation.")
        kind = T.match(net, out, specs[out], losses[out], raw)
        known = plans[out].class_labels if plans else known_labels(net, out, single)
        plan = T.TargetPlan(out, specs[out], losses[out], kind, class_labels=known,
                            ignore_index=ignore_index)
        fields[out] = T.build(plan, raw, "validation targets" if plans else "targets")
        T.align_lengths(fields[out], inputs, what, T.followed_input(net, out))
        new_plans[out] = plan
    return D.MemoryData(inputs, fields), new_plans


def dataset_data(net, source, losses, specs, dtype, ignore_index: int | None = lab.HF_IGNORE):
    """A Dataset/DataLoader (or Hugging Face examples) → (DatasetData, plans), matching
    targets on its first items."""
    data = DatasetData(source, net.input_names, net.output_names,
                       HuggingFaceBatches.of(net, ignore_index))
    inputs, raw = data.first()
    plans = {}
    for out in net.output_names:
        if out not in raw:
            raise DataError(f"the Dataset's targets have no entry for output '{out}'.")
        y = raw[out]
        r = T.RawTarget(y.data, y.mask.sum(1).numpy()) if isinstance(y, D.Padded) else \
            T.RawTarget(torch.as_tensor(y))
        kind = T.match(net, out, specs[out], losses[out], r)
        plans[out] = T.TargetPlan(out, specs[out], losses[out], kind, ignore_index=ignore_index)
    data.plans, data.dtype = plans, dtype
    data.specs = {k: D.input_spec(net, k) for k in net.input_names}
    return data, plans


def heads(plans: dict, specs: dict, metric_names) -> list[Head]:
    """One Head per output, with its metrics' columns ("accuracy", or "out/accuracy" when the
    network has several outputs)."""
    out = []
    given = None if metric_names is None else [make_metric(m) for m in metric_names]
    for name, plan in plans.items():
        # by default, accuracy for the outputs trained as classifiers
        metrics = given if given is not None else \
            ([make_metric("accuracy")] if plan.loss.classification else [])
        spec = specs[name]
        channels = spec.channels or 1
        loss = plan.loss
        h = Head(name, spec, plan.kind, loss, channels if loss.per_element and plan.kind == "dense" else 1,
                 class_labels=plan.class_labels)
        logits = loss.bypass is not None
        for m in metrics:
            bound = bind_metric(m, plan.kind, loss.channel_dim, spec.channels, logits,
                                loss.name == "binary-crossentropy")
            if bound.per_element and plan.kind == "class":
                raise ArgumentError(f"metric '{m.name}' compares values, but output '{name}' is "
                                    "trained on class labels: use 'accuracy'.")
            col = bound.name if len(plans) == 1 else f"{name}/{bound.name}"
            h.metrics.append((col, bound, channels if bound.per_element else 1))
        out.append(h)
    return out


def load_data(net, X, Y, losses, specs, dtype, plans=None, what="training data",
              ignore_index: int | None = lab.HF_IGNORE):
    X = hugging_face_data(net, X, Y)
    if is_dataset(X):
        if Y is not None:
            raise DataError("a Dataset/DataLoader carries its targets: omit Y (its items are (x, y)).")
        return dataset_data(net, X, losses, specs, dtype, ignore_index)
    return memory_data(net, X, Y, losses, specs, dtype, plans, what, ignore_index)


def validation_source(net, vd, losses, specs, dtype, plans,
                      ignore_index: int | None = lab.HF_IGNORE):
    if vd is None:
        return None
    vd = hugging_face_data(net, vd, None)
    if is_dataset(vd):
        data, _ = dataset_data(net, vd, losses, specs, dtype, ignore_index)
        return data
    if not isinstance(vd, (tuple, list)) or len(vd) != 2:
        raise ArgumentError("validation_data must be (X, Y) or a Dataset/DataLoader of (x, y) items.")
    data, _ = memory_data(net, vd[0], vd[1], losses, specs, dtype, plans, "validation data",
                          ignore_index)
    return data


def initialize(net, X, seed: int | None):
    """Builds the network's parameters (seeded) unless it already has them. A network without
    input layers is sized by the first observations of X."""
    if net.initialized:
        return
    if seed is not None:
        torch.manual_seed(seed)
    if any(l.is_input for l in net.layers):
        net.initialize()
        return
    if is_dataset(X):
        inputs, _ = DatasetData(X, net.input_names, net.output_names).first()
    else:
        ins = D.by_input_name(net, X)
        inputs = {k: D.to_field(k, v, None, None).data[:2] for k, v in ins.items()}
    net.initialize(inputs)


def require_sized(net) -> None:
    """Before an optimizer is made: a network whose sizes are still unknown has no parameters
    yet, and an optimizer over none would train nothing."""
    if net.initialized:
        return
    raise NetworkError("train: the network's sizes are not known, so it has no parameters yet and "
                       "an optimizer made now would train nothing. Call net.initialize("
                       "example_inputs) first, with data of the sizes it will get (e.g. "
                       "net.initialize(torch.zeros(1, 10, 3))), or start the network with an "
                       "input layer that gives the sizes, e.g. L.SequenceInput(3).")


def float_dtype(net) -> torch.dtype:
    p = next((p for p in net.parameters() if p.is_floating_point()), None)
    return p.dtype if p is not None else torch.get_default_dtype()


def resolve_device(net, device, d) -> torch.device:
    """The device training runs on: the option (checked against this machine; "auto" is a
    GPU when there is one), else the process's GPU under torchrun, else where the network is."""
    if device is not None:
        dev = available_device(device)
        if d.active and dev.type == "cuda" and dev.index != d.local_rank:
            dev = torch.device("cuda", d.local_rank)       # one GPU per torchrun process
        return dev
    if d.active and torch.cuda.is_available():
        return torch.device("cuda", d.local_rank)
    if not net.initialized:     # don't build it here: initialize() builds it seeded
        target = getattr(net, "_target", None)
        return target[1] if target else torch.device("cpu")
    p = next(iter(net.parameters()), None)
    return p.device if p is not None else torch.device("cpu")


def available_device(device) -> torch.device:
    """torch.device for the option, or an ArgumentError when this machine (or this torch build)
    lacks it — instead of torch's AssertionError at the first .to()."""
    return resolve_device_choice(device, "device")
