"""attnlab.training.datasets: shapes, splits and the missing-package error."""
import importlib.util

import numpy as np
import pytest

import attnlab as al
from attnlab.training import datasets as D


def needs(package):
    return pytest.mark.skipif(importlib.util.find_spec(package) is None,
                              reason=f"{package} is not installed (pip install 'attnlab[data]')")


@needs("sklearn")
def test_digits_stratified_80_20():
    d = D.digits()
    assert d.X_train.shape == (1437, 1, 8, 8) and d.X_test.shape == (360, 1, 8, 8)
    assert d.X_train.dtype == np.float32 and 0.0 <= d.X_train.min() and d.X_train.max() <= 1.0
    assert d.num_classes == 10 and d.class_names[3] == "3"
    # stratified: every class's share of the test part is its share of the whole, ±1 image
    whole = np.bincount(np.concatenate([d.y_train, d.y_test]))
    assert np.all(np.abs(np.bincount(d.y_test) - whole * 0.2) <= 1)
    again = D.digits()
    assert np.array_equal(again.y_test, d.y_test)                           # fixed seed
    assert not np.array_equal(D.digits(seed=1).y_test, d.y_test)


@needs("sktime")
def test_japanese_vowels_official_split_variable_lengths():
    v = D.japanese_vowels()
    assert len(v.X_train) == 270 and len(v.X_test) == 370
    assert all(s.ndim == 2 and s.shape[1] == 12 and s.dtype == np.float32
               for s in v.X_train + v.X_test)
    lengths = [len(s) for s in v.X_train + v.X_test]
    assert min(lengths) == 7 and max(lengths) == 29
    assert v.class_names == tuple(str(i) for i in range(1, 10))
    assert np.array_equal(np.bincount(v.y_train), [30] * 9)
    assert np.bincount(v.y_test).sum() == 370 and v.y_test.min() == 0 and v.y_test.max() == 8
    assert "270" in repr(v) or "sequences" in repr(v)


@needs("statsmodels")
def test_co2_weekly_gaps_filled():
    s = D.co2()
    assert len(s.values) == 2284 and s.test_steps == 52 and s.season == 52
    assert not np.isnan(s.values).any()
    assert s.filled.sum() == 59
    assert np.all(np.diff(s.dates).astype(int) == 7)                      # weekly, no holes
    assert str(s.test_dates[0]) == "2001-01-06" and str(s.test_dates[-1]) == "2001-12-29"
    assert len(s.train) == 2232 and np.array_equal(np.concatenate([s.train, s.test]), s.values)
    # a filled week lies between its neighbours
    i = int(np.flatnonzero(s.filled)[0])
    assert min(s.values[i - 1], s.values[i + 1]) - 1e-9 <= s.values[i] or s.filled[i + 1]


def test_roman_numerals_generated_500_500():
    r = D.roman_numerals()
    assert len(r.source_train) == len(r.source_test) == 500
    numbers = sorted(int(s) for s in r.source_train + r.source_test)
    assert numbers == list(range(1, 1001))
    for s, t in zip(r.source_train + r.source_test, r.target_train + r.target_test):
        assert D.to_roman(int(s)) == t
    assert r.target_vocab == tuple("CDILMVX") and r.source_vocab == tuple("0123456789")
    assert D.roman_numerals().source_train == r.source_train                 # fixed seed
    assert D.to_roman(1994) == "MCMXCIV" and D.to_roman(4) == "IV"


def test_missing_package_names_the_extra(monkeypatch):
    from attnlab.training.datasets import _common

    monkeypatch.setattr(_common.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(D.MissingDataPackageError, match=r"attnlab\[data\]") as e:
        D.japanese_vowels()
    assert isinstance(e.value, al.DataError) and isinstance(e.value, ImportError)

    def no_module(name):
        raise ModuleNotFoundError(f"No module named '{name}'")
    monkeypatch.setattr(_common.importlib, "import_module", no_module)
    with pytest.raises(ImportError, match=r"pip install 'attnlab\[data\]'.*scikit-learn"):
        D.digits()
