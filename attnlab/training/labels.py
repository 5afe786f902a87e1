"""Class labels: any values (ints, strings, bools) ↔ class indices 0..K-1.

Integer labels that already are indices (0 ≤ y < K, K the output's channels) are used as they
are. Any other labels — strings, or ints like {1, 2, 3} or {-1, 1} — are sorted and numbered,
and the sorted values are kept in `net.metadata["class_labels"]` so that `al.classify` returns
them and a saved network remembers them.

Targets equal to the training's `ignore_index` (-100 by default, Hugging Face's convention for
padding and prompt positions) are no class: they are left out of the labels found, and their
class index is `IGNORED`, which the loss and the metrics skip.
"""
from __future__ import annotations

from numbers import Integral, Real

import numpy as np

from attnlab.core.errors import DataError

# what a class label may be: an int, a bool, a string (or bytes), a whole real number
LABEL_TYPES = (str, bytes, bool, np.bool_, Integral, Real)

# the class index of an ignored target: torch's cross_entropy skips it by default
IGNORED = -100
# Hugging Face's value for "no label here": never a class, whatever ignore_index says
HF_IGNORE = -100


def ignored(values: np.ndarray, ignore_index: int | None, output: str,
            what: str = "targets") -> np.ndarray:
    """A boolean array shaped like `values`: True where the target equals `ignore_index`.

    A target of -100 that is not the ignore_index (ignore_index None or another value) is a
    DataError: it is Hugging Face's mark for a position without a label, and trained as a
    class it would renumber every other class."""
    found = _equal(values, ignore_index) if ignore_index is not None else \
        np.zeros(values.shape, dtype=bool)
    if ignore_index != HF_IGNORE:
        stray = _equal(values, HF_IGNORE)
        if stray.any():
            setting = "None" if ignore_index is None else repr(ignore_index)
            raise DataError(f"{what} for output '{output}': {int(stray.sum())} target(s) equal "
                            f"{HF_IGNORE}, the value Hugging Face gives positions without a label "
                            f"(padding, prompts), but TrainingOptions ignore_index is {setting}, "
                            f"so {HF_IGNORE} would be trained as a class. Set ignore_index=-100 "
                            "(the default) to leave those targets out of the loss and the "
                            "metrics, or replace them with real labels.")
    return found


def _equal(values: np.ndarray, value: int) -> np.ndarray:
    """Elementwise `values == value` for numbers (1.0 equals 1; bools and strings never do)."""
    kind = values.dtype.kind
    if kind in "iuf":
        return values == value
    if kind != "O":
        return np.zeros(values.shape, dtype=bool)
    flat = values.reshape(-1).tolist()
    hits = [not isinstance(v, (bool, np.bool_)) and isinstance(v, (Integral, Real))
            and _key(v) == value for v in flat]
    return np.array(hits, dtype=bool).reshape(values.shape)


def is_label_array(a: np.ndarray) -> bool:
    """True when `a` holds label values rather than real numbers: ints, bools, strings, objects,
    or floats that are all whole numbers."""
    if a.dtype.kind in "iubUSO":
        return True
    return a.dtype.kind == "f" and a.size > 0 and bool(np.all(np.isfinite(a))) and \
        bool(np.all(a == np.round(a)))


def to_python(v):
    """A numpy scalar → the plain Python value (JSON-able)."""
    return v.item() if isinstance(v, np.generic) else v


def encode(values: np.ndarray, channels: int, output: str, known: list | None,
           what: str = "targets") -> tuple[np.ndarray, list | None]:
    """Label values (any shape) → (int64 indices of the same shape, class labels or None).

    `known`: the class labels fixed earlier (by training, or the network's metadata); values
    outside them are a DataError naming them."""
    flat = values.reshape(-1)
    check_kinds(flat, output, what)
    if known is not None:
        return _map(values, known, output, what), known
    if not flat.size:                        # every target ignored: no labels to find
        return np.zeros(values.shape, dtype=np.int64), None
    if flat.dtype.kind in "iuf" and flat.size and flat.min() >= 0 and flat.max() < channels:
        return values.astype(np.int64), None
    try:
        classes = np.unique(flat)
    except TypeError:                                    # mixed types: order by text
        classes = np.array(sorted(set(flat.tolist()), key=str), dtype=object)
    if len(classes) > channels:
        shown = ", ".join(repr(to_python(c)) for c in classes[:8]) + (", …" if len(classes) > 8 else "")
        kind = "regression targets" if flat.dtype.kind == "f" else "labels"
        raise DataError(f"{what}: {len(classes)} distinct classes ({shown}) but output '{output}' has "
                        f"{channels} channel(s), one per class. Give the last Dense layer before "
                        f"the output {len(classes)} units"
                        + (f", or, for {kind}, use loss='mse'." if flat.dtype.kind == "f" else "."))
    labels = [to_python(c) for c in classes]
    return _map(values, labels, output, what), labels


def check_kinds(flat: np.ndarray, output: str, what: str = "targets") -> None:
    """DataError unless every label is an int, a bool, a string or a real number: complex
    numbers (which have no order, and which saving could not write), None, lists, dicts … are
    refused, naming the dtype or the type. Object arrays are read once, at setup."""
    kind = flat.dtype.kind
    if kind in "biufUS":
        return
    items = flat.tolist()
    if kind == "O":
        bad = next((v for v in items if not isinstance(v, LABEL_TYPES)), _FINE)
        if bad is _FINE:
            return
        received = f"{'None' if bad is None else type(bad).__name__} values in an object array"
    else:
        bad = next((v for v in items if v != 0), items[0] if items else None)
        received = f"dtype {flat.dtype}"
    fix = ("Give real labels: e.g. y.real.astype(int) when the imaginary parts are 0, or strings."
           if isinstance(bad, complex) else "Give one int, string or bool per observation.")
    raise DataError(f"{what} for output '{output}': expected class labels (ints, strings or "
                    f"bools), received {received} (e.g. {bad!r:.40}). {fix}")


_FINE = object()


def _map(values: np.ndarray, labels: list, output: str, what: str) -> np.ndarray:
    index = {_key(v): i for i, v in enumerate(labels)}
    flat = values.reshape(-1).tolist()
    out = np.fromiter((index.get(_key(v), -1) for v in flat), dtype=np.int64, count=len(flat))
    if (out < 0).any():
        unknown = sorted({repr(v) for v, i in zip(flat, out) if i < 0})
        shown = ", ".join(unknown[:8]) + (", …" if len(unknown) > 8 else "")
        known = ", ".join(repr(v) for v in labels[:12]) + (", …" if len(labels) > 12 else "")
        fix = ("Remove those observations, or train with every class present." if "validation" in what
               else "The network keeps the classes of its earlier training in "
                    "net.metadata['class_labels']: delete that entry to train on new classes.")
        raise DataError(f"{what} for output '{output}': label value(s) {shown} were not among the "
                        f"training classes ({known}). {fix}")
    return out.reshape(values.shape)


def _key(v):
    # 1 and 1.0 name the same class; numpy scalars compare as Python values
    v = to_python(v)
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v
