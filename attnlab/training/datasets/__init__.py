"""Data sets for attnlab's demos, loaded offline from files that ship inside packages.

    >>> from attnlab import datasets
    >>> d = datasets.digits()              # Classification: X_train N×1×8×8, y_train, …
    >>> v = datasets.japanese_vowels()     # lists of T_i×12 sequences, official 270/370 split
    >>> s = datasets.co2()                 # TimeSeries: weekly ppm, last 52 weeks held out
    >>> r = datasets.roman_numerals()      # Translation: '123' → 'CXXIII', 500/500

digits needs scikit-learn, japanese_vowels sktime, co2 statsmodels: `pip install 'attnlab[data]'`.
A missing one raises `MissingDataPackageError` (an `al.DataError` and an `ImportError`) that
says so."""
from attnlab.training.datasets._common import (Classification, MissingDataPackageError, TimeSeries,
                                               Translation)
from attnlab.training.datasets.loaders import co2, digits, japanese_vowels, roman_numerals, to_roman

__all__ = ["digits", "japanese_vowels", "co2", "roman_numerals", "to_roman", "Classification",
           "TimeSeries", "Translation", "MissingDataPackageError"]
