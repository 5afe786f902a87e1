"""Cross-validation of the vowels demo's choices on the 270 TRAINING utterances only.

    python -m attnlab.demos.vowels_cv '{"lr": 3e-3, "dropout": 0.3}' [--folds 5] [--members 3]

Each fold standardises with its own training utterances, trains `members` networks (seeds
0, 1, …) with the given `train_network` keywords and scores, on the held-out utterances, the
members alone and their ensemble (mean probability); logistic regression (the demo's baseline)
is scored on the same folds for reference. The test split is never loaded into a score."""
from __future__ import annotations

import argparse
import json
import time

import numpy as np

import attnlab as al

from . import _common as C
from .baselines import logistic_sequences
from . import vowels as V


def cross_validate(config: dict, folds: int = 5, members: int = 3, epochs: int = V.EPOCHS,
                   split_seed: int = 0, warps: tuple = (0.85, 1.0, 1.15)) -> dict:
    from sklearn.model_selection import StratifiedKFold

    data = al.datasets.japanese_vowels()
    X, y = data.X_train, data.y_train
    single, base, warped = [], [], []
    ensemble: list[list[int]] = [[] for _ in range(members)]     # of the first k + 1 members
    for tr, te in StratifiedKFold(folds, shuffle=True, random_state=split_seed).split(
            np.zeros(len(y)), y):
        std = V.standardizer([X[i] for i in tr], phase=bool(config.get("phase")),
                             length=config.get("length"))
        Xtr, Xte = std([X[i] for i in tr]), std([X[i] for i in te])
        nets = [V.train_network(Xtr, y[tr], None, None, epochs, seed=s, verbose=False,
                                **config)[0] for s in range(members)]
        single += [np.sum(C.ensemble_classify([n], Xte) == y[te]) for n in nets]
        warped.append(int(np.sum(V.warped_classify(nets, Xte, warps) == y[te])))
        for k in range(members):
            ensemble[k].append(int(np.sum(C.ensemble_classify(nets[:k + 1], Xte) == y[te])))
        b = logistic_sequences([X[i] for i in tr], y[tr], [X[i] for i in te], y[te])
        base.append(np.sum(b["predictions"] == y[te]))
    n = len(y)
    return {"single": float(np.sum(single)) / (n * members),
            "ensemble": float(np.sum(ensemble[-1])) / n,
            "ensemble_errors": int(n - np.sum(ensemble[-1])),
            "errors_by_members": [int(n - np.sum(e)) for e in ensemble],
            "warped_errors": int(n - np.sum(warped)), "logistic": float(np.sum(base)) / n}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("configs", nargs="+", help="JSON dicts of train_network keywords")
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--members", type=int, default=3)
    p.add_argument("--epochs", type=int, default=V.EPOCHS)
    p.add_argument("--split-seed", type=int, default=0)
    a = p.parse_intermixed_args(argv)        # options may come before or after the configs
    warps = (0.85, 1.0, 1.15)
    with C.demo_threads():
        for text in a.configs:
            t0 = time.perf_counter()
            r = cross_validate(json.loads(text), a.folds, a.members, a.epochs, a.split_seed, warps)
            print(f"{text} folds={a.folds} members={a.members} epochs={a.epochs} "
                  f"split={a.split_seed}: single {100 * r['single']:.2f} % ensemble "
                  f"{100 * r['ensemble']:.2f} % ({r['ensemble_errors']} errors; with 1, 2, … members "
                  f"{r['errors_by_members']}; over warps {warps}: {r['warped_errors']} errors) logistic "
                  f"{100 * r['logistic']:.2f} % [{time.perf_counter() - t0:.0f} s]", flush=True)


if __name__ == "__main__":
    main()
