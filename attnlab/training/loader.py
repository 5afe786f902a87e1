"""Training from a torch `Dataset` or `DataLoader` (targets come with the data: Y is omitted).

Each item is `(x, y)`: x a tensor/array (or a dict by input name), y a target (or a dict by
output name). Items are collated per batch: equal shapes are stacked, variable-length sequences
padded into `Padded` with their mask. attnlab drives the order (shuffle, exact resume, the
per-process split) through `DistributedBatchSampler`; a DataLoader contributes its dataset,
batch_size, collate_fn, num_workers and pin_memory.

A network from `al.from_pretrained` also trains on Hugging Face's data: items that are dicts
(`input_ids`, `attention_mask`, `labels`, …), batched by the DataLoader's collate_fn (a data
collator) or padded here, or one such batch given whole. `HuggingFaceBatches` turns each batch
into inputs and targets as the model class's own loss reads them (see its doc).
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset

from attnlab.core.errors import DataError
from attnlab.core.sequences import (HUGGING_FACE, MASK_KEYS, Padded, as_tensor,
                                    follows_hugging_face, hugging_face_inputs)
from . import labels as lab
from .data import Batch, check_shape
from .sampler import DistributedBatchSampler, EpochOrder, usable


def is_dataset(x) -> bool:
    return isinstance(x, (Dataset, DataLoader))


class DatasetData:
    """A map-style dataset read in mini-batches chosen by attnlab's sampler. `hf`: how the
    network reads Hugging Face batches (`HuggingFaceBatches`), for a network that takes them."""

    def __init__(self, source, input_names: list[str], output_names: list[str],
                 hf: "HuggingFaceBatches | None" = None):
        loader = source if isinstance(source, DataLoader) else None
        self.dataset = loader.dataset if loader else source
        if isinstance(self.dataset, IterableDataset):
            raise DataError("an IterableDataset has no length or order to shuffle and resume: give "
                            "a map-style Dataset (with __len__ and __getitem__).")
        try:
            self.n = len(self.dataset)  # type: ignore[arg-type]  # no __len__: caught below
        except TypeError:
            raise DataError("the Dataset has no __len__: attnlab needs the number of observations "
                            "to form epochs.") from None
        if self.n == 0:
            raise DataError("the Dataset is empty.")
        self.batch_size = loader.batch_size if loader and loader.batch_size else None
        self.collate = loader.collate_fn if loader and not _default_collate(loader) else None
        self.num_workers = loader.num_workers if loader else 0
        self.pin_memory = loader.pin_memory if loader else False
        self.input_names, self.output_names = input_names, output_names
        self.hf = hf
        self.lengths = None
        # set once the targets are matched (setup): TargetPlans, input specs, float dtype, and
        # the sum of a batch's units over processes
        self.plans: dict = {}               # by output name, set by setup
        self.specs: dict = {}
        self.dtype: torch.dtype | None = None
        self.units_sum = lambda u: u

    def __len__(self):
        return self.n

    def _collate(self, items):
        if self.hf is not None and items and isinstance(items[0], Mapping):
            batch = self.collate(items) if self.collate is not None else collate_examples(items)
            return self.hf.split(batch)
        if self.collate is None:
            for it in items[:1]:          # one item per batch tells: a Dataset gives one kind
                check_item(it)
        if self.collate is not None:
            x, y = self.collate(items)
        else:
            x = stack([it[0] for it in items], self.input_names, "input")
            y = stack([it[1] for it in items], self.output_names, "target")
        return by_name(x, self.input_names), by_name(y, self.output_names)

    def raw_batches(self, epoch: EpochOrder, start: int, rank: int, world: int):
        """Yields (inputs, raw targets) of this process's part of each batch from `start`."""
        sampler = DistributedBatchSampler(epoch, start, rank, world)
        loader = DataLoader(self.dataset, batch_sampler=sampler, collate_fn=self._collate,
                            num_workers=self.num_workers, pin_memory=self.pin_memory)
        yield from loader

    def batches(self, epoch: EpochOrder, start: int, rank: int, world: int, device,
                reduce: bool = True):
        """Yields (k, Batch) like MemoryData.batches (set `plans`, `specs`, `dtype`,
        `units_sum` first). `reduce=False` (validation, where processes see different numbers
        of batches) keeps each batch's units local: no collective per batch."""
        ks = [k for k in range(start, epoch.batches) if usable(*epoch.batch(k), world)]
        units_sum = self.units_sum if reduce else (lambda u: u)
        for k, (inputs, raw) in zip(ks, self.raw_batches(epoch, start, rank, world)):
            yield k, to_batch(inputs, raw, self.plans, self.specs, device, self.dtype, units_sum)

    def first(self):
        """The first two observations, collated (to size and check the network)."""
        return self._collate([self.dataset[i] for i in range(min(2, self.n))])


def check_item(item) -> None:
    """A Dataset item must be a pair (x, y); a bare tensor (a Dataset of inputs only, or
    TensorDataset(X) without Y) gets a DataError saying how to pair it."""
    if isinstance(item, (tuple, list)) and len(item) == 2:
        return
    if isinstance(item, (tuple, list)):
        got = f"a {type(item).__name__} of {len(item)}"
    elif isinstance(item, (torch.Tensor, np.ndarray)):
        got = f"a bare {type(item).__name__} {'×'.join(map(str, item.shape)) or 'scalar'}"
    else:
        got = f"a {type(item).__name__}"
    raise DataError(f"Dataset items must be (x, y) pairs: input and target; item 0 is {got}. "
                    "Pair them, e.g. torch.utils.data.TensorDataset(X, Y), or return (x, y) from "
                    "__getitem__; x and y may be dicts by input and output name.")


def _default_collate(loader) -> bool:
    from torch.utils.data._utils.collate import default_collate
    return loader.collate_fn is default_collate


def by_name(v, names: list[str]) -> dict:
    if isinstance(v, dict):
        return v
    if len(names) != 1:
        raise DataError(f"the network has {len(names)} inputs/outputs ({', '.join(names)}): each "
                        "Dataset item needs a dict by name for them.")
    return {names[0]: v}


def stack(values: list, names: list[str], what: str):
    """Collates one part of the items: dicts by name, tensors stacked, variable-length
    sequences padded into Padded."""
    if isinstance(values[0], dict):
        return {k: _stack([v[k] for v in values], k, what) for k in values[0]}
    return _stack(values, names[0] if len(names) == 1 else what, what)


def _stack(values, name, what):
    if isinstance(values[0], str) or (isinstance(values[0], np.ndarray) and values[0].dtype.kind in "USO"):
        raise DataError(f"{what} '{name}': a Dataset must give numbers (class indices for labels), "
                        f"received {type(values[0]).__name__} {values[0]!r}. Map label values to "
                        "indices in the Dataset, or train from in-memory arrays, which accept any labels.")
    tensors = [as_tensor(v) for v in values]
    shapes = {t.shape for t in tensors}
    if len(shapes) == 1:
        return torch.stack(tensors)
    if all(t.dim() >= 1 for t in tensors) and len({t.shape[1:] for t in tensors}) == 1:
        lengths = torch.tensor([t.shape[0] for t in tensors])
        data = torch.nn.utils.rnn.pad_sequence(tensors, batch_first=True)
        mask = torch.arange(data.shape[1]).unsqueeze(0) < lengths.unsqueeze(1)
        return Padded(data, mask)
    raise DataError(f"{what} '{name}': the items have shapes {sorted(tuple(s) for s in shapes)[:4]} "
                    "that neither stack nor pad (sequences must differ only in length).")


def class_targets(y: torch.Tensor, mask: torch.Tensor | None, plan, name: str):
    """A batch's class indices (CPU) → (indices with every target that does not count set to
    `IGNORED`, the number that count). Targets equal to the ignore_index and padding do not
    count; a counted index outside the output's classes is a DataError naming it."""
    values = y.cpu().numpy()
    counted = np.ones(values.shape, dtype=bool)
    if mask is not None:
        m = mask.cpu().numpy()
        counted &= m.reshape(m.shape + (1,) * (values.ndim - m.ndim))
    counted[counted] = ~lab.ignored(values[counted], plan.ignore_index, name)
    real = values[counted]
    channels = plan.spec.channels
    if real.size and channels and (real.min() < 0 or real.max() >= channels):
        bad = int(real[(real < 0) | (real >= channels)][0])
        mark = (f"give positions without a label the value {plan.ignore_index} (ignore_index)"
                if plan.ignore_index is not None else
                "set TrainingOptions ignore_index to the value of positions without a label")
        raise DataError(f"targets for output '{name}': class index {bad} in a Dataset batch, but "
                        f"the output has {channels} classes (0…{channels - 1}). A Dataset gives "
                        f"class indices: map its labels to 0…{channels - 1}, or {mark}.")
    if not counted.all():
        y = y.masked_fill(torch.from_numpy(~counted).to(y.device), lab.IGNORED)
    return y, int(counted.sum())


def to_batch(inputs: dict, raw: dict, plans: dict, specs: dict, device, dtype, units_sum) -> Batch:
    """A collated (CPU) batch → a Batch on `device`, targets converted by their TargetPlans.
    `units_sum(local) -> global` adds the units of all processes (identity for one)."""
    ins = {}
    for name, x in inputs.items():
        mask = None
        if isinstance(x, Padded):
            x, mask = x
            if bool(mask.all()):
                mask = None
        x = as_tensor(x)
        if specs.get(name) is not None:
            check_shape(name, x, specs[name])
        x = x.to(device, dtype if x.is_floating_point() else None, non_blocking=True)
        ins[name] = x if mask is None else Padded(x, mask.to(device, non_blocking=True))
    targets, units, local = {}, {}, {}
    for name, y in raw.items():
        plan = plans[name]
        mask = None
        if isinstance(y, Padded):
            y, mask = y
        y = as_tensor(y)
        if plan.kind == "class":
            y, local[name] = class_targets(y.long(), mask, plan, name)   # on the CPU: no sync
        else:
            if y.dim() == len(plan.spec.labels) - 1:
                y = y.unsqueeze(-1)
            y = y.to(dtype)
            n_steps = int(mask.sum()) if mask is not None else y.shape[0] * (
                y.shape[1] if plan.spec.is_sequence else 1)
            local[name] = n_steps * int(np.prod(y.shape[2 if plan.spec.is_sequence else 1:-1] or [1]))
        targets[name] = (y.to(device, non_blocking=True),
                         None if mask is None else mask.to(device, non_blocking=True))
    for name in local:
        units[name] = units_sum(local[name])
    size = next(iter(targets.values()))[0].shape[0]
    return Batch(ins, targets, units, size, local)


# -- Hugging Face's batches ------------------------------------------------------------------

# what a key is padded with when the examples of a batch differ in length (DataCollatorWithPadding's
# values: labels never count there, masks say padding, ids are masked out)
_PAD = {"labels": -100}


def collate_examples(items: list) -> dict:
    """Hugging Face examples (dicts of 1-D id sequences, or one label each) → one batch dict:
    equal shapes stacked; sequences of different lengths padded at their end (`labels` with
    -100, everything else with 0), with the `attention_mask` (`decoder_attention_mask`) they
    need made where the examples hold none."""
    keys = list(items[0])
    for i, it in enumerate(items):
        if not isinstance(it, Mapping) or list(it) != keys:
            got = sorted(it) if isinstance(it, Mapping) else type(it).__name__
            raise DataError(f"Hugging Face examples: item {i} has keys {got}, item 0 "
                            f"{sorted(keys)}; every example needs the same keys.")
    batch, padded = {}, {}
    for k in keys:
        values = [as_tensor(it[k]) for it in items]
        if len({tuple(v.shape) for v in values}) == 1:
            batch[k] = torch.stack(values)
            continue
        if any(v.dim() != 1 for v in values):
            shapes = sorted({tuple(v.shape) for v in values})[:4]
            raise DataError(f"Hugging Face examples: '{k}' has shapes {shapes}, which neither "
                            "stack nor pad (one 1-D sequence per example pads).")
        batch[k] = torch.nn.utils.rnn.pad_sequence(values, batch_first=True,
                                                   padding_value=_PAD.get(k, 0))
        padded[k] = torch.tensor([len(v) for v in values])
    for ids, mask in (("input_ids", "attention_mask"),
                      ("decoder_input_ids", "decoder_attention_mask")):
        if ids in padded and mask not in batch:
            steps = torch.arange(batch[ids].shape[1])
            batch[mask] = (steps.unsqueeze(0) < padded[ids].unsqueeze(1)).long()
    return batch


class HuggingFaceBatches:
    """Hugging Face batches — dicts of `input_ids`, `attention_mask`, `labels`, … as data
    collators make them — as a network's inputs and targets, read as the model class's own
    loss reads them, so that a step's loss is `model(**batch).loss`:

    - the masks join the inputs they pad (`attnlab.core.sequences.hugging_face_inputs`: the
      one rule the forward pass uses too);
    - `labels` are the targets of the network's one output. A causal LM's (`labels`
      "next-token" in the network's Hugging Face record) are shifted inside, as
      transformers' loss does: the logits of step t are scored against the label of step
      t + 1, the last step against none. Other heads' labels line up with their logits as
      given (one per token, or one per sequence);
    - labels equal to `ignore_index` (-100) count nowhere. A label that would count where
      the prediction comes from a padded step (attention_mask 0) is refused: transformers
      would score the logits of that step, which attnlab leaves unspecified — pad on the
      right for training, or give such labels -100."""

    def __init__(self, net, ignore_index: int | None):
        self.input_names, self.output_names = list(net.input_names), list(net.output_names)
        self.tokens = list(net.token_inputs)
        self.labels = net.metadata[HUGGING_FACE].get("labels")
        self.ignore_index = ignore_index

    @classmethod
    def of(cls, net, ignore_index: int | None) -> "HuggingFaceBatches | None":
        """For a network that takes Hugging Face's inputs, else None."""
        return cls(net, ignore_index) if follows_hugging_face(net) else None

    def split(self, batch) -> tuple[dict, dict]:
        """(inputs by name, targets by output name) of one batch."""
        if not isinstance(batch, Mapping):
            raise DataError(f"a Hugging Face batch is a dict (input_ids, attention_mask, "
                            f"labels, …); the collate_fn returned {type(batch).__name__}.")
        batch = dict(batch)
        if "labels" not in batch:
            raise DataError(f"the Hugging Face batch has no 'labels' (keys: "
                            f"{', '.join(sorted(batch))}): training needs them, as "
                            "model(**batch).loss does. A causal LM's labels are its input_ids "
                            "(DataCollatorForLanguageModeling(tokenizer, mlm=False) makes them).")
        if len(self.output_names) != 1 or self.labels not in ("next-token", "aligned"):
            raise DataError(self._no_labels())
        labels = as_tensor(batch.pop("labels"))
        if labels.is_floating_point():
            labels = labels.long() if bool((labels == labels.round()).all()) else labels
        inputs = hugging_face_inputs(batch, self.input_names, self.tokens)
        unknown = [k for k in inputs if k not in self.input_names]
        if unknown:
            raise DataError(f"the Hugging Face batch has key(s) {', '.join(map(repr, unknown))} "
                            f"that the network does not take: its inputs are "
                            f"{', '.join(self.input_names)} (with {', '.join(MASK_KEYS)}). "
                            "Drop them from the batch (remove_unused_columns).")
        if self.labels == "next-token" and labels.dim() == 2:
            labels = torch.cat((labels[:, 1:], labels.new_full((labels.shape[0], 1), -100)), 1)
        self._check_padding(labels, inputs)
        return inputs, {self.output_names[0]: labels}

    def _check_padding(self, labels: torch.Tensor, inputs: dict) -> None:
        """Refuses a label that counts at a step whose prediction comes from padding."""
        # the labels line up with the decoder's steps where there is a decoder (T5)
        ids = inputs.get("decoder_input_ids", inputs.get("input_ids"))
        mask = ids.mask if isinstance(ids, Padded) else None
        if mask is None or tuple(mask.shape) != tuple(labels.shape):
            return
        counted = labels != self.ignore_index if self.ignore_index is not None else \
            torch.ones_like(labels, dtype=torch.bool)
        bad = counted & ~mask.to(labels.device)
        if bool(bad.any()):
            i, t = (int(v) for v in bad.nonzero()[0])
            shifted = self.labels == "next-token"
            where = f"the label of step {t + 1}, scored from step {t}" if shifted else \
                f"the label of step {t}"
            raise DataError(f"labels: observation {i}: {where}, a padded step (attention_mask "
                            "0), would count: transformers scores the logits of that step, "
                            "which attnlab leaves unspecified. Pad on the right for training "
                            "(tokenizer.padding_side = \"right\"), or give that label -100.")

    def _no_labels(self) -> str:
        if len(self.output_names) != 1:
            return (f"the network has outputs {', '.join(self.output_names)}, so a batch's "
                    "'labels' fit none of them: load a model class with a head (e.g. "
                    "BertForMaskedLM, LlamaForCausalLM) to train on labels.")
        return ("this network's Hugging Face record says nothing of how its 'labels' meet the "
                "logits (it was saved by an older attnlab): load it again with "
                "al.from_pretrained(folder).")


class Examples(Dataset):
    """Hugging Face examples held in a list (dicts by key, one per observation), as the
    map-style dataset attnlab draws its batches from."""

    def __init__(self, items: list):
        self.items = items

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def hugging_face_data(net, X, Y):
    """For a network that takes Hugging Face's data, with no Y: a list of example dicts, or
    one batch given whole (a dict with `labels`: its rows), as a dataset of examples.
    Anything else as it is."""
    if Y is not None or not follows_hugging_face(net):
        return X
    if isinstance(X, Mapping) and "labels" in X:
        return Examples(batch_examples(X))
    if isinstance(X, list) and X and all(isinstance(x, Mapping) for x in X):
        return Examples(X)
    return X


def batch_examples(batch: Mapping) -> list[dict]:
    """One Hugging Face batch given whole (B×T tensors by key) → its B rows as examples,
    padding kept (they stack back into the same batch)."""
    rows = {k: as_tensor(v) for k, v in batch.items()}
    n = {k: int(v.shape[0]) if v.dim() else -1 for k, v in rows.items()}
    first = next(iter(n.values()))
    if first < 0 or any(v != first for v in n.values()):
        raise DataError(f"the Hugging Face batch's entries differ in their first dimension "
                        f"({', '.join(f'{k}: {v}' for k, v in n.items())}): each needs one row "
                        "per observation.")
    return [{k: v[i] for k, v in rows.items()} for i in range(first)]
