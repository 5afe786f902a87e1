"""Classical baselines fitted beside each demo's attention network, on the same split, so that a
reader sees whether attention earned its place."""
from __future__ import annotations

import functools
import warnings

import numpy as np

from attnlab.training.datasets._common import require


def svm_digits(X_train, y_train, X_test, y_test) -> dict:
    """An RBF support-vector machine on the raw pixels; C chosen among 1, 3, 10, 30 by 5-fold
    cross-validation on the training part (gamma "scale")."""
    svm = require("sklearn.svm", "scikit-learn", "digits baseline")
    ms = require("sklearn.model_selection", "scikit-learn", "digits baseline")
    flat_train = X_train.reshape(len(X_train), -1)
    search = ms.GridSearchCV(svm.SVC(kernel="rbf", gamma="scale"), {"C": [1, 3, 10, 30]}, cv=5)
    search.fit(flat_train, y_train)
    pred = search.best_estimator_.predict(X_test.reshape(len(X_test), -1))
    c = search.best_params_["C"]
    return {"name": f"RBF SVM (C={c}, chosen by 5-fold CV on train)",
            "accuracy": float(np.mean(pred == y_test)), "predictions": pred}


@functools.lru_cache(maxsize=4096)
def _plan(n_old: int, n_new: int):
    """What np.interp works out from the grids of n_old and n_new points from 0 to 1: the
    left neighbour j of each new point, the spacing and offset (as column vectors) and the new
    points that take a value as it is (an exact hit or the last point), with the index of it."""
    old, new = np.linspace(0.0, 1.0, n_old), np.linspace(0.0, 1.0, n_new)
    j = np.clip(np.searchsorted(old, new, side="right") - 1, 0, max(n_old - 2, 0))
    exact = np.where(new >= old[-1], n_old - 1, np.where(new == old[j], j, -1))
    kept = np.flatnonzero(exact >= 0)
    plan = (j, j + 1 if n_old > 1 else j, (old[j + 1] - old[j])[:, None] if n_old > 1 else None,
            (new - old[j])[:, None], kept, exact[kept])
    for a in plan:                          # shared by every call with these lengths
        if a is not None:
            a.flags.writeable = False
    return plan


def resample(seq: np.ndarray, length: int) -> np.ndarray:
    """A T×C sequence linearly interpolated to `length`×C: for finite values the very numbers
    that `np.interp` gives channel by channel (the same operations, for all channels at once:
    the vowels demo resamples every utterance it draws)."""
    seq = np.asarray(seq, dtype=np.float64)
    j, j1, dx, offset, kept, source = _plan(len(seq), int(length))
    if dx is None:                                    # one step: every point takes its value
        return seq[j].copy()
    y0 = seq[j]                                                        # length×C
    out = (seq[j1] - y0) / dx * offset + y0
    out[kept] = seq[source]
    return out


def logistic_sequences(X_train, y_train, X_test, y_test, length: int = 20) -> dict:
    """Logistic regression on sequences resampled to `length` steps, flattened and standardised."""
    lm = require("sklearn.linear_model", "scikit-learn", "vowels baseline")
    pre = require("sklearn.preprocessing", "scikit-learn", "vowels baseline")
    pipe = require("sklearn.pipeline", "scikit-learn", "vowels baseline")
    flat = lambda X: np.stack([resample(s, length).ravel() for s in X])
    clf = pipe.make_pipeline(pre.StandardScaler(), lm.LogisticRegression(max_iter=5000))
    clf.fit(flat(X_train), y_train)
    pred = clf.predict(flat(X_test))
    return {"name": f"logistic regression (resampled to {length} steps)",
            "accuracy": float(np.mean(pred == y_test)), "predictions": pred}


def rmse(a, b) -> float:
    return float(np.sqrt(np.mean((np.asarray(a) - np.asarray(b)) ** 2)))


def seasonal_forecasts(train: np.ndarray, steps: int, season: int) -> dict:
    """Seasonal naive (the same week a season earlier), seasonal naive with drift (plus the
    mean change over the last season: mean of y_t − y_{t−season} over the last `season` steps),
    and additive Holt–Winters (statsmodels, additive trend and season), each `steps` ahead."""
    hw = require("statsmodels.tsa.holtwinters", "statsmodels", "CO2 baseline")
    train = np.asarray(train, dtype=np.float64)
    reps = int(np.ceil(steps / season))
    naive = np.tile(train[-season:], reps)[:steps]
    drift = np.mean(train[-season:] - train[-2 * season:-season])           # per season
    horizon = np.arange(steps) // season + 1
    with_drift = naive + drift * horizon
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = hw.ExponentialSmoothing(train, trend="add", seasonal="add",
                                        seasonal_periods=season).fit()
        holt_winters = np.asarray(model.forecast(steps))
    return {"seasonal_naive": naive, "seasonal_naive_drift": with_drift,
            "holt_winters": holt_winters}
