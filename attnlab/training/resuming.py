"""Resuming from a checkpoint (`TrainingOptions.resume`): the newest checkpoint read back so
that the next step is the one an uninterrupted run takes, with the checks that refuse a
checkpoint this run cannot continue exactly and the warnings for options that changed.
"""
from __future__ import annotations

import warnings

from attnlab.core.errors import TrainingError
from . import checkpoint as ck
from . import fsdp
from .optim import current_lr
from .options import DEFAULT_LEARNING_RATE, TrainingOptions
from .state import restore


def resume(st, net, opt, scheduler, generator, recorder, info, o, scaler=None,
           per_epoch: int = 1, sharded: fsdp.Sharded | None = None) -> None:
    """Restores the newest checkpoint of `o.checkpoint_dir` into the run's state, network,
    optimizer, schedule and random states (nothing when there is none); refuses one written
    with other solver, batch or seed, or by a run sharded otherwise."""
    found = ck.load_latest(o.checkpoint_dir)
    if found is None:
        return                                   # nothing to resume: start from the beginning
    tensors, meta, path = found
    _check_same_solver(meta, o, path)
    _check_same_layout(meta, sharded, path)
    relaid = _resume_layout(st, net, opt, scheduler, generator, recorder, info, o, scaler,
                            per_epoch, found)
    if sharded is None:
        return
    lrs = [g["lr"] for g in opt.param_groups]
    st.best_weights = fsdp.read(path.parent / meta["sharded"]["folder"], sharded.fwd, opt, net,
                                bool(meta["sharded"].get("best")))
    if relaid:                                   # this run's schedule, not the shards' rates
        for g, lr in zip(opt.param_groups, lrs):
            g["lr"] = lr


def _check_same_layout(meta: dict, sharded, path) -> None:
    """A sharded checkpoint holds no weights in its file, a plain one no shards: each is
    resumed by a run of its own kind only."""
    was = bool(meta.get("sharded"))
    if was == (sharded is not None):
        return
    then, now = ("sharded (strategy='fsdp' under torchrun)", "without sharding") if was else \
        ("without sharding", "sharded (strategy='fsdp' under torchrun)")
    raise TrainingError(f"checkpoint '{path}' was written {then}, and this run trains {now}, so "
                        "it cannot continue exactly. Resume with the strategy and launch it was "
                        "written with, or give another checkpoint_dir to start afresh.")


def _resume_layout(st, net, opt, scheduler, generator, recorder, info, o, scaler, per_epoch,
                   found) -> bool:
    """Restores the checkpoint `found`; under fsdp `net` and `opt` are the file's stand-ins
    (the weights and optimizer state come from the shards). True when the schedule was laid
    out anew (max_epochs changed)."""
    tensors, meta, path = found
    if meta.get("sharded"):
        net, opt = fsdp.Weightless(net), fsdp.StatelessOptimizer(opt)
    saved = meta.get("options") if isinstance(meta.get("options"), dict) else {}
    _warn_changed(saved, o, path)
    then = saved.get("max_epochs")
    relaid = (scheduler is not None and isinstance(then, int) and then != o.max_epochs
              and _schedule_layout(o.replace(max_epochs=then), per_epoch) != _schedule_layout(o, per_epoch))
    if not relaid:
        restore(tensors, meta, st, net, opt, scheduler, generator, recorder, info, path, scaler)
        return False
    # the schedule's shape depends on max_epochs: this run's schedule, at the checkpoint's step
    fresh = [g["lr"] for g in opt.param_groups]
    restore(tensors, meta, st, net, opt, None, generator, recorder, info, path, scaler)
    saved_lr = current_lr(opt)
    for g, lr in zip(opt.param_groups, fresh):
        g["lr"] = lr
    with warnings.catch_warnings():          # torch's "step() before optimizer.step()"
        warnings.simplefilter("ignore", UserWarning)
        for _ in range(st.iteration):
            scheduler.step()
    warnings.warn(
        f"train: resuming from '{path}' with max_epochs {o.max_epochs} (it was written by a run of "
        f"{then}): learning_rate_schedule '{o.learning_rate_schedule}' is laid out over max_epochs, "
        f"so it cannot continue as an uninterrupted {o.max_epochs}-epoch run would have from the "
        f"start. Training goes on along the {o.max_epochs}-epoch schedule from iteration "
        f"{st.iteration} (learning rate {current_lr(opt):.3g} now, {saved_lr:.3g} when the checkpoint "
        f"was written). For resumes equal to an uninterrupted run, use a schedule that does not "
        f"depend on max_epochs ('piecewise', 'warmup', 'none') or train with the final max_epochs "
        f"from the start.", UserWarning, stacklevel=7)
    return True


# options that shape the steps: changed on resume, the run is neither the checkpoint's run
# continued nor an uninterrupted run with the new options. The optimizer's saved state holds
# the hyperparameters in _KEPT, so there the checkpoint's values stay in effect.
_TRAJECTORY = ("learning_rate", "l2", "momentum", "gradient_decay", "squared_gradient_decay",
               "epsilon", "learning_rate_schedule", "learning_rate_drop_period",
               "learning_rate_drop_factor", "warmup_iterations", "warmup_fraction",
               "schedule_step", "shuffle", "sort_by_length", "gradient_threshold",
               "gradient_threshold_method", "precision", "ignore_index", "sequence_length")
_KEPT = ("learning_rate", "l2", "momentum", "gradient_decay", "squared_gradient_decay", "epsilon")


def _effective(options: dict, key: str):
    v = options.get(key)
    if key == "learning_rate" and v is None:
        return DEFAULT_LEARNING_RATE.get(options.get("solver", ""))
    if key == "squared_gradient_decay" and v is None:
        return 0.9 if options.get("solver") == "rmsprop" else 0.999
    return v


def _warn_changed(saved: dict, o: TrainingOptions, path) -> None:
    """Warns when the options that shape the steps differ from the checkpoint's."""
    now = o.to_json()
    changed = [k for k in _TRAJECTORY if k in saved and _effective(saved, k) != _effective(now, k)]
    if not changed:
        return
    kept = [k for k in changed if k in _KEPT]
    parts = "; ".join(f"{k} {_effective(saved, k)!r} then, {_effective(now, k)!r} now" for k in changed)
    fate = (f"The optimizer's saved state keeps the checkpoint's {', '.join(kept)}"
            + ("; the others take effect from here" if len(kept) < len(changed) else "")
            if kept else "They take effect from here")
    warnings.warn(
        f"train: resuming from '{path}' with other options than it was written with ({parts}), "
        f"so training continues neither as that run would have nor as an uninterrupted run with "
        f"these options. {fate}. Resume with the checkpoint's options to continue exactly, or give "
        f"another checkpoint_dir to start afresh.", UserWarning, stacklevel=8)


def _schedule_layout(o: TrainingOptions, per_epoch: int):
    """What of the built-in schedule's shape depends on max_epochs (None: nothing)."""
    s = o.learning_rate_schedule
    if not isinstance(s, str) or s in ("none", "piecewise"):
        return None
    total = max(1, o.max_epochs * per_epoch)
    warm = min(o.warmup_iterations, total - 1)
    return {"cosine": (total,), "warmup": (warm,), "warmup-cosine": (warm, total)}.get(s)


# options whose change makes the saved optimizer state or data order meaningless; others
# (max_epochs to train on, validation, plots, …) may change between runs
_FIXED_ON_RESUME = ("solver", "batch_size", "seed")


def _check_same_solver(meta: dict, o: TrainingOptions, path) -> None:
    saved = meta.get("options") if isinstance(meta, dict) else None
    if not isinstance(saved, dict):
        return                                    # restore() reports a damaged checkpoint
    now = o.to_json()
    changed = [f"{k} {saved[k]!r} then, {now.get(k)!r} now" for k in _FIXED_ON_RESUME
               if k in saved and saved[k] != now.get(k)]
    if changed:
        raise TrainingError(f"checkpoint '{path}' was written by a run with other options ("
                            + "; ".join(changed) + "), so it cannot continue exactly. Resume with "
                            "the options it was written with (max_epochs may grow), or give "
                            "another checkpoint_dir to start afresh.")
