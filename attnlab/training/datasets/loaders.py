"""The data sets of attnlab's demos. All load offline, from files that ship inside packages
(scikit-learn, sktime, statsmodels: `pip install 'attnlab[data]'`) or are generated."""
from __future__ import annotations

import numpy as np

from attnlab.training.datasets._common import (Classification, TimeSeries, Translation, package_dir,
                                               require)


def digits(test_size: float = 0.2, seed: int = 0) -> Classification:
    """scikit-learn's 8×8 handwritten digits (1,797 images, 10 classes), split stratified by class
    into train and test (`test_size`, shuffled with `seed`).

    Images are float32 N×1×8×8 scaled to [0, 1] (the raw pixels are 0…16); labels 0…9."""
    datasets = require("sklearn.datasets", "scikit-learn", "digits")
    model_selection = require("sklearn.model_selection", "scikit-learn", "digits")
    raw = datasets.load_digits()
    X = (raw.images.astype(np.float32) / 16.0)[:, None]                     # N×1×8×8
    y = raw.target.astype(np.int64)
    Xtr, Xte, ytr, yte = model_selection.train_test_split(
        X, y, test_size=test_size, stratify=y, random_state=seed)
    return Classification("digits", Xtr, ytr, Xte, yte, tuple(str(d) for d in range(10)),
                          "scikit-learn's optical recognition of handwritten digits (UCI): "
                          "8×8 images of 0…9, stratified split.")


def _read_ts(path) -> tuple[list[np.ndarray], list[str]]:
    """A multivariate .ts file (sktime/UEA format): each data line holds the channels separated
    by ':' (values by ','), then the class label."""
    seqs, labels = [], []
    in_data = False
    for line in open(path, encoding="utf-8"):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if not in_data:
            in_data = line.lower() == "@data"
            continue
        *channels, label = line.split(":")
        seqs.append(np.array([[float(v) for v in ch.split(",")] for ch in channels],
                             dtype=np.float32).T)                            # T×C
        labels.append(label.strip())
    return seqs, labels


def japanese_vowels() -> Classification:
    """UCI Japanese Vowels (as shipped by sktime): nine male speakers say the vowel pair /ae/;
    each utterance is a sequence of 7–29 steps of 12 LPC cepstrum coefficients. The official
    split: 270 training utterances (30 per speaker) and 370 test utterances.

    `X_train`/`X_test` are lists of T_i×12 float32 arrays (lengths kept); labels are the speakers
    0…8 (`class_names` "1"…"9")."""
    folder = package_dir("sktime", "Japanese Vowels") / "datasets" / "data" / "JapaneseVowels"
    files = [folder / f"JapaneseVowels_{part}.ts" for part in ("TRAIN", "TEST")]
    for f in files:
        if not f.exists():
            from attnlab.training.datasets._common import MissingDataPackageError, EXTRA
            raise MissingDataPackageError(f"the installed sktime has no {f.name} (looked in "
                                          f"{folder}). Reinstall the data extra: {EXTRA}.")
    (Xtr, ltr), (Xte, lte) = (_read_ts(f) for f in files)
    names = tuple(sorted(set(ltr), key=int))
    index = {n: i for i, n in enumerate(names)}
    ytr = np.array([index[l] for l in ltr], dtype=np.int64)
    yte = np.array([index[l] for l in lte], dtype=np.int64)
    return Classification("japanese_vowels", Xtr, ytr, Xte, yte, names,
                          "UCI Japanese Vowels: 9 speakers, 12 LPC cepstrum channels, 7–29 steps; "
                          "official 270/370 split.")


def co2(test_weeks: int = 52) -> TimeSeries:
    """Mauna Loa weekly atmospheric CO₂ in ppm (statsmodels), March 1958 – December 2001:
    2,284 weeks; the 59 weeks without a measurement are filled by linear interpolation
    (`filled` marks them). The last `test_weeks` weeks (all of 2001) are the test part."""
    folder = package_dir("statsmodels", "CO2") / "datasets" / "co2"
    day_list, value_list = [], []
    with open(folder / "co2.csv", encoding="utf-8") as f:
        next(f)                                                              # date,co2
        for line in f:
            d, _, v = line.strip().partition(",")
            day_list.append(np.datetime64(f"{d[:4]}-{d[4:6]}-{d[6:8]}"))
            value_list.append(float(v) if v.strip() else np.nan)
    dates = np.array(day_list, dtype="datetime64[D]")
    values = np.array(value_list, dtype=np.float64)
    missing = np.isnan(values)
    steps = np.arange(len(values))
    values[missing] = np.interp(steps[missing], steps[~missing], values[~missing])
    return TimeSeries("co2", dates, values, test_weeks, season=52, units="ppm", filled=missing,
                      description="Mauna Loa weekly CO₂ (ppm), 1958–2001, gaps interpolated.")


_ROMAN = ((1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"),
          (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"))


def to_roman(n: int) -> str:
    """The Roman numeral of 1 ≤ n ≤ 3999 (e.g. 1994 → 'MCMXCIV')."""
    if not 1 <= n <= 3999:
        raise ValueError(f"Roman numerals cover 1…3999, got {n}")
    out = []
    for value, letters in _ROMAN:
        count, n = divmod(n, value)
        out.append(letters * count)
    return "".join(out)


def roman_numerals(n: int = 1000, train: int = 500, seed: int = 0) -> Translation:
    """Decimal numbers to Roman numerals, as MATLAB's sequence-to-sequence attention example:
    the numbers 1…n, shuffled with `seed`, the first `train` for training and the rest for
    testing. Sources are decimal strings ('123'), targets Roman numerals ('CXXIII')."""
    numbers = np.random.default_rng(seed).permutation(np.arange(1, n + 1))
    src = [str(int(k)) for k in numbers]
    tgt = [to_roman(int(k)) for k in numbers]
    return Translation("roman_numerals", src[:train], tgt[:train], src[train:], tgt[train:],
                       tuple(sorted(set("".join(src)))), tuple(sorted(set("".join(tgt)))),
                       f"Decimal → Roman numerals for 1…{n}: {train} train, {n - train} test.")
