"""Cross-validation of the vowels demo's choices on the 270 TRAINING utterances only.

    python tools/vowels_cv.py '{"lr": 3e-3, "dropout": 0.3}' [--folds 5] [--members 3]
        [--split-seed S | --split-seed blocked] [--first-seed K] [--tta K] [--save FILE.npz]
    python tools/vowels_cv.py --combine A.npz[:N] B.npz[:N] …

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

from attnlab.cli.demos import _common as C
from attnlab.cli.demos.baselines import logistic_sequences

import vowels_search as V


def cross_validate(config: dict | list, folds: int = 5, members: int = 3, epochs: int = V.EPOCHS,
                   split_seed: int | None = 0, warps: tuple = (0.85, 1.0, 1.15),
                   first_seed: int = 0, tta: int = 0) -> dict:
    """`config` is one dict of `train_network` keywords, or a list of them that the members
    take in turn (member k the (k mod len)-th) with seed `first_seed` + k; `split_seed` None
    makes the folds blocked (`fold_splits`). Returns the scores and `probabilities`, the
    members' held-out class probabilities (members × 270 × 9), from which any ensemble of them
    can be scored afterwards; with `tta` = K, also `tta_probabilities`, each member's over the
    held-out utterance itself and K copies changed as its training draws are
    (`V.augmented_scores`, the copies drawn from seed 1000 + the member's seed), and `tta`,
    their scores."""
    configs = config if isinstance(config, list) else [config]
    data = al.datasets.japanese_vowels()
    X, y = data.X_train, data.y_train
    probs = np.zeros((members, len(y), 9))
    tta_probs = np.zeros_like(probs) if tta else None
    base, warped = [], []
    for tr, te in fold_splits(y, folds, split_seed):
        views = [V.member_view(cfg, [X[i] for i in tr], [X[i] for i in te]) for cfg in configs]
        nets = []
        for s in range(members):
            Xtr, Xte = views[s % len(configs)]
            net = V.train_network(Xtr, y[tr], None, None, epochs, seed=first_seed + s,
                                  verbose=False,
                                  **configs[s % len(configs)])[0]
            probs[s, te] = C.ensemble_scores([net], Xte).numpy()
            if tta_probs is not None:
                cfg = configs[s % len(configs)]
                changer = V.Augmented(Xtr, y[tr], 1000 + first_seed + s, length=cfg.get("length"),
                                      delta=cfg.get("delta", 0), **cfg.get("augment", {}))
                tta_probs[s, te] = V.augmented_scores([net], Xte, changer, tta).numpy()
            nets.append(net)
        if len(configs) == 1 and not configs[0].get("length"):    # warping a fixed length: no
            warped.append(int(np.sum(V.warped_classify(nets, views[0][1], warps) == y[te])))
        b = logistic_sequences([X[i] for i in tr], y[tr], [X[i] for i in te], y[te])
        base.append(np.sum(b["predictions"] == y[te]))
    return {**held_out_scores(probs, y), "probabilities": probs, "tta_probabilities": tta_probs,
            "tta": held_out_scores(tta_probs, y) if tta_probs is not None else None,
            "warped_errors": len(y) - int(np.sum(warped)) if warped else None,
            "logistic": float(np.sum(base)) / len(y)}


def fold_splits(y: np.ndarray, folds: int, split_seed: int | None) -> list:
    """(training, held-out) index pairs of stratified folds: shuffled with `split_seed`, or,
    with None, blocked: fold k holds the k-th of `folds` runs of consecutive utterances of each
    speaker (the training file lists each speaker's utterances in recording order)."""
    from sklearn.model_selection import StratifiedKFold
    split = (StratifiedKFold(folds) if split_seed is None else
             StratifiedKFold(folds, shuffle=True, random_state=split_seed))
    return list(split.split(np.zeros(len(y)), y))


def held_out_scores(probs: np.ndarray, y: np.ndarray) -> dict:
    """Scores of members' held-out probabilities (members × n × classes): the members alone,
    the ensemble of all (mean probability; accuracy, errors, log loss) and the errors of the
    ensembles of the first 1, 2, … members."""
    n, members = len(y), len(probs)
    errors = [int(np.sum(probs[:k + 1].mean(0).argmax(-1) != y)) for k in range(members)]
    p_true = probs.mean(0)[np.arange(n), y]
    return {"single": float(np.mean(probs.argmax(-1) == y[None])),
            "ensemble": 1 - errors[-1] / n, "ensemble_errors": errors[-1],
            "errors_by_members": errors,
            "log_loss": float(np.mean(-np.log(np.clip(p_true, 1e-12, None))))}


def combine(specs: list[str]) -> str:
    """The scores of an ensemble of members saved by `--save` runs ("FILE.npz:N" takes the
    first N members of FILE) over the same fold set."""
    parts, splits = [], set()
    for spec in specs:
        path, _, n = spec.rpartition(":")
        if not n.isdigit():                  # no ":N": the whole file
            path, n = spec, ""
        try:
            saved = np.load(path)
            probs, split = saved["probabilities"], int(saved["split_seed"])
        except (OSError, ValueError, KeyError) as e:
            raise SystemExit(f"--combine: expected a file that `vowels_cv --save` wrote, received "
                             f"{path!r} ({type(e).__name__}: {e}). Give the path of a --save "
                             "file, optionally followed by :N.") from None
        if n and not 1 <= int(n) <= len(probs):
            raise SystemExit(f"--combine: expected N from 1 to {len(probs)} (the members in "
                             f"{path!r}), received {spec!r}. Use {path}:{len(probs)} or less.")
        splits.add(split)
        parts.append(probs[:int(n)] if n else probs)
    if len(splits) > 1:
        raise SystemExit(f"--combine: the files hold different fold sets {sorted(splits)}; "
                         "held-out probabilities combine only over the same folds")
    r = held_out_scores(np.concatenate(parts), al.datasets.japanese_vowels().y_train)
    return (f"{' + '.join(specs)} split={_split_name(splits.pop())}: single {100 * r['single']:.2f} % "
            f"ensemble {100 * r['ensemble']:.2f} % ({r['ensemble_errors']} errors, log loss "
            f"{r['log_loss']:.4f})")


def _split_seed(text: str) -> int | None:
    if text == "blocked":
        return None
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer seed or 'blocked', received "
                                         f"{text!r}") from None


def _copies(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number of copies ≥ 0, received "
                                         f"{text!r}")
    return int(text)


def _split_name(seed: int | None) -> str:
    return "blocked" if seed is None or seed < 0 else str(seed)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("configs", nargs="*", help="JSON dicts of train_network keywords (or lists "
                   "of them, which the members take in turn)")
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--members", type=int, default=3)
    p.add_argument("--epochs", type=int, default=V.EPOCHS)
    p.add_argument("--first-seed", type=int, default=0, help="member k trains with seed "
                   "FIRST_SEED + k (to spread the members of one ensemble over runs)")
    p.add_argument("--split-seed", type=_split_seed, default=0, help="the folds' shuffle seed, "
                   "or 'blocked' for folds of consecutive utterances of each speaker")
    p.add_argument("--tta", type=_copies, default=0, metavar="K", help="also score each member "
                   "with test-time augmentation (the utterance and K changed copies); --save "
                   "then writes those probabilities to FILE-tta.npz as well")
    p.add_argument("--save", metavar="FILE.npz", help="write the members' held-out "
                   "probabilities (members × 270 × 9) there, to score ensembles of them later")
    p.add_argument("--combine", nargs="+", metavar="FILE.npz[:N]", help="score, without "
                   "training, the ensemble of the first N members (all without :N) of each "
                   "file that --save wrote for the same fold set")
    a = p.parse_intermixed_args(argv)        # options may come before or after the configs
    if a.combine:
        print(combine(a.combine))
        return
    if not a.configs:
        p.error("give configs to cross-validate, or --combine FILES")
    warps = (0.85, 1.0, 1.15)
    with C.demo_threads():
        for index, text in enumerate(a.configs):
            t0 = time.perf_counter()
            try:
                config = json.loads(text)
            except json.JSONDecodeError as e:
                p.error(f"config {index + 1}: expected a JSON dict (or list of dicts) of "
                        f"train_network keywords, received {text!r} ({e}). Quote it for the "
                        """shell, with double quotes inside: '{"lr": 3e-3}'""")
            r = cross_validate(config, a.folds, a.members, a.epochs, a.split_seed, warps,
                               a.first_seed, a.tta)
            print(f"{text} folds={a.folds} members={a.members} epochs={a.epochs} "
                  f"split={_split_name(a.split_seed)}: single {100 * r['single']:.2f} % ensemble "
                  f"{100 * r['ensemble']:.2f} % ({r['ensemble_errors']} errors, log loss "
                  f"{r['log_loss']:.4f}; with 1, 2, … members "
                  f"{r['errors_by_members']}; over warps {warps}: {r['warped_errors']} errors) logistic "
                  f"{100 * r['logistic']:.2f} % [{time.perf_counter() - t0:.0f} s]", flush=True)
            if (t := r["tta"]) is not None:
                print(f"  with test-time augmentation ({a.tta} copies): ensemble "
                      f"{100 * t['ensemble']:.2f} % ({t['ensemble_errors']} errors, log loss "
                      f"{t['log_loss']:.4f}; with 1, 2, … members {t['errors_by_members']})",
                      flush=True)
            if a.save:
                name = (a.save if len(a.configs) == 1 else f"{a.save}-{index}").removesuffix(".npz")
                for suffix, key in (("", "probabilities"), ("-tta", "tta_probabilities")):
                    if r[key] is not None:
                        np.savez(f"{name}{suffix}.npz", probabilities=r[key], config=text,
                                 split_seed=-1 if a.split_seed is None else a.split_seed)


if __name__ == "__main__":
    main()
