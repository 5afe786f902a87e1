"""`al.train`: the epoch loop, with validation, early stopping, logging and checkpoints.

The loop body per iteration is: gather the batch (index_select), its forward and backward
(`accumulation_steps` of them), the update, append the step's device record, advance the
progress bar. Everything that reads tensors on the host —
logging, the divergence check, validation, checkpoints — happens at fixed iteration counts, the
same on every process, so collectives under DDP stay in step.
"""
from __future__ import annotations

import contextlib
import functools
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from attnlab.core import precision as P
from attnlab.core.torch_compile import maybe_compile
from attnlab.core.errors import ArgumentError, DataError, TrainingError
from . import checkpoint as ck
from . import distributed as dd
from . import fsdp
from . import setup as S
from ..layers.recurrent import carried
from .finite import ActivationWatch, NonFinite, diverged, first_nonfinite
from .history import Recorder, TrainingInfo
from .losses import trained_from_logits
from .optim import clipper, current_lr, make_optimizer, make_scheduler
from .options import TrainingOptions, make_options
from .pieces import Pieces, make_pieces
from .plots import Plotter
from .progress import TensorBoard, describe_trainable, make_progress
from .sampler import EpochOrder, draw_epoch, usable
from .resuming import resume
from .state import State, snapshot
from .accumulation import Accumulation, steps_per_epoch
from .checkpointing import checkpointed
from .step import backward, evaluate, update


@dataclass
class Placement:
    """Where the run computes: the process group (`d`), this process's device and the device
    collectives run on (`cdev`); `sharded` under strategy="fsdp" with several processes."""
    d: dd.Dist
    device: torch.device
    cdev: torch.device
    sharded: fsdp.Sharded | None = None


@dataclass
class Feed:
    """The data: training and validation sources (`Any`: tensors or a Dataset path), the
    output heads (loss and metrics per output), batches per epoch and the generator that
    draws each epoch's order."""
    data: Any
    val: Any
    heads: list
    batches_per_epoch: int
    generator: torch.Generator
    pieces: Pieces | None = None        # sequence_length: each batch cut along time


@dataclass
class Optimisation:
    """What one step runs: the (maybe compiled) forward, the optimizer and its schedule
    (`sched_unit`: "iteration" or "epoch"), gradient clipping, the activation watch of
    check_finite, and mixed precision (`amp`: an autocast factory, None for fp32; fp16's
    GradScaler)."""
    fwd: Any
    opt: torch.optim.Optimizer
    scheduler: Any
    sched_unit: str
    clip: Any
    watch: ActivationWatch | None
    amp: Any = None
    scaler: Any = None


@dataclass
class Reporting:
    """Progress and logging: the recorder of step records, the TrainingInfo it fills, the
    progress display (`Any`: a duck), TensorBoard and the training-progress plot."""
    recorder: Recorder
    info: TrainingInfo
    progress: Any
    board: TensorBoard
    plotter: Plotter | None


@dataclass
class Run:
    """What one call of `train` works with (built once, read by the helpers below), in parts."""
    net: Any
    o: TrainingOptions
    place: Placement
    feed: Feed
    optim: Optimisation
    report: Reporting


def train(net: Any, X: Any, Y: Any = None, loss: Any = "crossentropy",
          options: TrainingOptions | None = None, **overrides: Any) -> TrainingInfo:
    """Trains `net` in place.

    Parameters
    ----------
    net : Network
        The network; its parameters are updated where they are.
    X : tensor, array, list, Padded, dict, Dataset or DataLoader
        The inputs: N×… (a tensor or array), a list of variable-length T_i×C sequences,
        `al.Padded`, a dict of those by input name, or a torch `Dataset`/`DataLoader` of (x, y)
        items (then `Y` is omitted).
    Y : optional
        The targets: class labels (ints or any values; N, or per time step N×T or a list of T_i),
        values shaped like the output (N×C, N×T×C, a list of T_i×C), or a dict by output name.
    loss : str, callable or dict
        "crossentropy" (from the logits, also when the network ends in Softmax), "mse", "mae",
        "huber", "binary-crossentropy", a callable (outputs, targets) → mean loss, or a dict of
        those by output name.
    options : TrainingOptions, optional
        The options; keyword `overrides` change some of them (``al.train(net, X, Y,
        max_epochs=5)``).

    Returns
    -------
    TrainingInfo
        The history: losses and metrics per iteration and validation, the stop reason.
    """
    o = make_options(options, overrides)
    d = dd.setup(o.device)
    info = _train(net, X, Y, loss, o, d)
    d.barrier()                           # every process is done with this call's collectives
    return info


def _train(net, X, Y, loss, o, d) -> TrainingInfo:
    t0 = time.perf_counter()
    run, st = _prepare(net, X, Y, loss, o, d)
    info = run.report.info
    was_training = net.training
    net.train()
    elapsed_before = info.elapsed_s
    try:
        carry = run.feed.pieces.carry if run.feed.pieces is not None else None
        with trained_from_logits(net, {h.output: h.loss for h in run.feed.heads}), \
                carried(net, carry):
            _loop(run, st)
            _finish(run, st)
    finally:
        if run.place.sharded is not None:
            run.place.sharded.release()          # plain full parameters in every process
        net.train(was_training)
        run.report.progress.close()
        run.report.board.close()
        if run.optim.watch is not None:
            run.optim.watch.remove()
    info.elapsed_s = elapsed_before + time.perf_counter() - t0
    return info


def _prepare(net, X, Y, loss, o, d) -> tuple[Run, State]:
    """Everything before the first step: device, seed, initialisation, data and targets,
    optimizer, schedule, the first epoch's order, and the checkpoint to resume from."""
    device = S.resolve_device(net, o.device, d)
    cdev = dd.collective_device(d, device)
    seed = o.seed if o.seed is not None else d.broadcast_int(
        int(torch.randint(0, 2 ** 31 - 1, (1,))), cdev)
    S.initialize(net, X, seed)
    S.require_sized(net)
    net.to(device)
    data, val, heads = _data(net, X, Y, loss, o, d, device, cdev)
    torch.manual_seed(seed + d.rank)            # dropout differs across processes, not data order
    generator = torch.Generator().manual_seed(seed)
    params = [p for p in net.parameters() if p.requires_grad]
    if not params:
        raise TrainingError("train: nothing to train: the network has no learnable with "
                            "requires_grad=True (all frozen, or no learnable layers). Unfreeze the "
                            "layers to train, e.g. net.requires_grad_(True) or "
                            "p.requires_grad_(True) for p in net.layer_modules['fc'].parameters().")
    half = P.autocast_dtype(o.precision, device, "TrainingOptions precision")
    amp = None if half is None else functools.partial(P.autocast, device, half)
    scaler = P.make_scaler(device, half)
    recompute = checkpointed(net) if o.checkpoint_activations else None
    sharded = None
    if o.strategy == "fsdp" and d.active:
        fsdp.check(o, scaler)
        sharded = fsdp.Sharded(dd.Forward(net, recompute), net, device, half)
        params = sharded.parameters()              # the optimizer is made over the shards
    try:
        return _prepare_steps(net, o, d, device, cdev, seed, data, val, heads, generator,
                              params, half, amp, scaler, recompute, sharded)
    except BaseException:
        if sharded is not None:
            sharded.release()
        raise


def _prepare_steps(net, o, d, device, cdev, seed, data, val, heads, generator, params, half,
                   amp, scaler, recompute, sharded) -> tuple[Run, State]:
    """The optimizer, the schedule, the first epoch's order, the checkpoint to resume from and
    the module the loop calls."""
    opt = make_optimizer(params, o)
    first = draw_epoch(len(data), o.batch_size, o.shuffle, generator, lengths=data.lengths,
                       sort_by_length=o.sort_by_length)
    per_epoch = len(_trained_batches(first, d.world))
    if per_epoch == 0:
        raise DataError(f"{len(data)} observation(s) cannot be split across {d.world} processes: "
                        "give at least one observation per process.")
    pieces = make_pieces(net, heads, o, d.world, data)
    if pieces is not None:
        # iterations are pieces: the first epoch's count (the same every epoch where it matters)
        per_epoch = pieces.per_epoch(first, data) or per_epoch
    per_epoch = steps_per_epoch(per_epoch, o.accumulation_steps)     # iterations: optimizer steps
    scheduler, unit = make_scheduler(opt, o, per_epoch)
    info = TrainingInfo()
    names = [col for h in heads for col, _, _ in h.metrics]
    finish = [m.finish for h in heads for _, m, _ in h.metrics]
    recorder = Recorder(info, names, finish, lambda t: d.sum_(t.to(cdev)))
    st = State(order=first)
    for what in ("checkpoint_dir", "log_dir"):
        if getattr(o, what) and d.main:
            _make_folder(what, getattr(o, what))
    if o.resume:
        resume(st, net, opt, scheduler, generator, recorder, info, o, scaler, per_epoch, sharded)
    plot_path = _plot_path(o) if o.plots == "training-progress" and d.main else None
    info.plot_file = str(plot_path) if plot_path else None
    root = sharded.fwd if sharded is not None else dd.wrap(net, d, device, recompute)
    fwd = maybe_compile(root, o.compile, device, "training")
    run = Run(net, o, Placement(d, device, cdev, sharded),
              Feed(data, val, heads, per_epoch, generator, pieces),
              Optimisation(fwd, opt, scheduler, unit, clipper(params, o),
                           ActivationWatch(net) if o.check_finite else None, amp, scaler),
              Reporting(recorder, info, make_progress(o.verbose, d.main),
                        TensorBoard(o.log_dir if d.main else None),
                        Plotter(plot_path) if plot_path else None))
    return run, st


def _data(net, X, Y, loss, o, d, device, cdev):
    """(training data, validation data or None, heads), checked and on the device; class label
    values go into net.metadata."""
    specs = S.output_specs(net)
    losses = S.losses_by_output(loss, list(specs))
    dtype = S.float_dtype(net)
    data, plans = S.load_data(net, X, Y, losses, specs, dtype, ignore_index=o.ignore_index)
    val = S.validation_source(net, o.validation_data, losses, specs, dtype, plans, o.ignore_index)
    _store_labels(net, plans)
    for src in (data, val):
        if src is not None:
            _place(src, device, d, cdev)
    return data, val, S.heads(plans, specs, o.metrics)


# ------------------------------------------------------------------------- the loop ---

def _loop(r: Run, st: State) -> None:
    o, at, step, rep = r.o, r.place, r.optim, r.report
    rep.progress.start(o.max_epochs * r.feed.batches_per_epoch, o.max_epochs, st.iteration,
                       describe_trainable(r.net))
    acc = Accumulation(o.accumulation_steps)
    # one gradient all-reduce per optimizer step: micro-batches before a group's last keep
    # their gradients. Pieces sync at every one (which piece is a batch's last is not known),
    # and so does a run without groups: there the sync never changes, nothing to set per step
    grouped = acc.n > 1 and r.feed.pieces is None
    while st.epoch < o.max_epochs and not st.stop_reason:
        k = st.batch
        last = _last_batch(st.order, at.d.world)
        for k, whole in r.feed.data.batches(st.order, st.batch, at.d.rank, at.d.world, at.device):
            for batch, trains in _pieces(r, whole):
                if not trains:
                    _advance(r, batch)
                    continue
                sync = acc.count + 1 >= acc.n or k == last
                try:
                    with dd.gradient_sync(step.fwd, sync) if grouped else contextlib.nullcontext():
                        record, denominators = backward(step.fwd, batch, r.feed.heads,
                                                        at.d.world, step.watch, at.d, at.cdev,
                                                        step.amp, step.scaler, acc.scale)
                except NonFinite as e:
                    raise diverged(st.iteration + 1, st.epoch + 1, e.loss, current_lr(step.opt),
                                   e.layer, checked=True) from None
                acc.add(record, denominators, sum(batch.units.values()))
                if acc.full:
                    _step(r, st, acc, k)
                if st.stop_reason:
                    break
            if st.stop_reason:
                break
        if st.stop_reason:
            break
        if acc.count:                 # the epoch's last, shorter group still steps
            _step(r, st, acc, k)
            if st.stop_reason:
                break
        _end_epoch(r, st)


def _trained_batches(order: EpochOrder, world: int) -> list[int]:
    """The indices of the epoch's batches that train (one too small to split is skipped)."""
    return [k for k in range(order.batches) if usable(*order.batch(k), world)]


def _last_batch(order: EpochOrder | None, world: int) -> int:
    """The index of the epoch's last batch that trains, -1 where none does."""
    ks = _trained_batches(order, world) if order is not None else []
    return ks[-1] if ks else -1


def _step(r: Run, st: State, acc: Accumulation, k: int) -> None:
    """One optimizer step on the micro-batches gathered: the update, the iteration count,
    the schedule, the progress record, and what happens after an iteration."""
    step, rep = r.optim, r.report
    lr = current_lr(step.opt)
    update(step.opt, step.clip, step.scaler, acc.correction)
    record, denominators, units = acc.take()
    st.iteration += 1
    st.batch = k + 1
    if step.scheduler is not None and step.sched_unit == "iteration":
        step.scheduler.step()
    rep.recorder.add(record, st.iteration, st.epoch + 1, lr, units, denominators)
    rep.progress.advance(st.iteration, st.epoch)
    _after_iteration(r, st)


def _pieces(r: Run, batch):
    """The (batch, trains) pairs one mini-batch is trained as: itself, or its pieces along
    time (TrainingOptions.sequence_length). A stop between pieces ends the mini-batch."""
    if r.feed.pieces is None:
        yield batch, True
        return
    yield from r.feed.pieces.split(batch)


@torch.no_grad()
def _advance(r: Run, batch) -> None:
    """A piece with nothing to learn from: the forward alone, to advance the carried state."""
    if r.optim.amp is None:
        r.optim.fwd(batch.inputs)
    else:
        with r.optim.amp():
            r.optim.fwd(batch.inputs)


def _after_iteration(r: Run, st: State) -> None:
    o, it = r.o, st.iteration
    if it % o.verbose_frequency == 0:
        _log(r)
    if r.feed.val is not None and it % o.validation_frequency == 0:
        _validate(r, st)
    if o.output_fn is not None:
        stop = bool(o.output_fn(_Progress(st, r)))
        if r.place.d.any_(stop, r.place.cdev):
            st.stop_reason = "output-function"
    if o.checkpoint_dir and o.checkpoint_frequency_unit == "iteration" and \
            it % o.checkpoint_frequency == 0:
        _checkpoint(r, st)


def _end_epoch(r: Run, st: State) -> None:
    o = r.o
    if r.optim.scheduler is not None and r.optim.sched_unit == "epoch":
        r.optim.scheduler.step()
    _log(r)
    r.report.recorder.end_epoch(st.epoch + 1)
    st.epoch += 1
    st.batch = 0
    # the next epoch's order is drawn after the last epoch too: a checkpoint of a finished run
    # then holds the order (and the generator) a longer run has here, so that resuming with a
    # larger max_epochs continues exactly as that run
    st.order = draw_epoch(len(r.feed.data), o.batch_size, o.shuffle, r.feed.generator, previous=st.order,
                          lengths=r.feed.data.lengths, sort_by_length=o.sort_by_length)
    if o.checkpoint_dir and o.checkpoint_frequency_unit == "epoch" and \
            st.epoch % o.checkpoint_frequency == 0:
        _checkpoint(r, st)


def _finish(r: Run, st: State) -> None:
    """End of training. The final checkpoint comes first, so that it holds exactly the state
    an uninterrupted run has here; the closing validation and the partial epoch's row are
    for this call's report only."""
    o = r.o
    _log(r)
    if o.checkpoint_dir and st.iteration > 0:
        last = ck.checkpoints(o.checkpoint_dir)
        due = not last or not last[-1].name.endswith(f"{st.iteration:09d}.safetensors")
        if r.place.sharded is not None:            # a collective: rank 0's listing decides
            due = bool(r.place.d.broadcast_int(int(due), r.place.cdev))
        if due:
            _checkpoint(r, st)
        found = ck.checkpoints(o.checkpoint_dir)
        r.report.info.checkpoint = str(found[-1]) if found else None
    if st.stop_reason and st.batch > 0 and r.report.recorder.epoch_weight:
        r.report.recorder.end_epoch(st.epoch + 1)               # the epoch training stopped in
    if r.feed.val is not None and st.last_validation != st.iteration and st.iteration > 0:
        _validate(r, st, early_stop=False)
    r.report.info.stop_reason = st.stop_reason or "max-epochs"
    r.report.info.best_iteration = st.best_iteration
    r.report.info.best_validation_loss = None if math.isinf(st.best_loss) else st.best_loss
    if o.validation_patience is not None and st.best_weights is not None:
        r.net.load_state_dict(st.best_weights)           # the best validation loss's weights
    if r.report.plotter is not None:
        r.report.plotter.update(r.report.info, final=True)
    wrote = f"; training progress plotted in {Path(r.report.info.plot_file).resolve()}" \
        if r.report.info.plot_file else ""
    r.report.progress.message(f"done: {r.report.info.stop_reason}, {st.iteration} iteration(s){wrote}")


# ------------------------------------------------------------------------ helpers ---

def _log(r: Run) -> None:
    rows = r.report.recorder.flush()
    if not rows:
        return
    bad = first_nonfinite(rows)
    if bad is not None:
        raise diverged(bad["iteration"], bad["epoch"], bad["loss"], bad["learning_rate"])
    r.report.progress.log(rows[-1])
    r.report.board.log(rows)
    if r.report.plotter is not None:
        r.report.plotter.update(r.report.info)


def _validate(r: Run, st: State, early_stop: bool = True) -> None:
    _log(r)
    at = r.place
    if at.sharded is None:
        row = evaluate(r.net, r.feed.val, r.feed.heads, r.o.batch_size, at.d, at.device, at.cdev,
                       r.optim.amp, r.feed.pieces)
    else:
        # each forward gathers across processes, so every process runs the same batches: the
        # whole validation data, each alone (no sum across processes)
        row = evaluate(r.net, r.feed.val, r.feed.heads, r.o.batch_size, dd.Dist(), at.device,
                       at.cdev, r.optim.amp, r.feed.pieces, forward=r.optim.fwd)
        at.sharded.reshard()
    st.last_validation = st.iteration
    epoch = st.epoch + 1 if st.batch > 0 or st.epoch == 0 else st.epoch    # of the last step
    full = {"iteration": st.iteration, "epoch": epoch, **row}
    r.report.info.append("validation", full)
    r.report.progress.validation(full)
    r.report.board.log([full], prefix="validation")
    if r.o.validation_patience is None:
        return
    if row["loss"] < st.best_loss:
        st.best_loss, st.best_iteration, st.bad_validations = row["loss"], st.iteration, 0
        st.best_weights = {k: v.detach().clone() for k, v in r.net.state_dict().items()}
    elif early_stop:
        st.bad_validations += 1
        if st.bad_validations >= r.o.validation_patience:
            st.stop_reason = "validation-patience"


def _checkpoint(r: Run, st: State) -> None:
    _log(r)
    if r.place.sharded is not None:
        _checkpoint_sharded(r, st, r.place.sharded)
        return
    if not r.place.d.main:
        return
    tensors, meta = snapshot(st, r.net, r.optim.opt, r.optim.scheduler, r.feed.generator,
                             r.report.recorder, r.report.info, r.o.to_json(), r.optim.scaler)
    ck.save(r.o.checkpoint_dir, st.iteration, tensors, meta, r.o.checkpoint_keep)


def _checkpoint_sharded(r: Run, st: State, sharded: fsdp.Sharded) -> None:
    """fsdp: every process writes its shards, then rank 0 the checkpoint file (the rest)."""
    directory = Path(str(r.o.checkpoint_dir))
    path = ck.path_for(directory, st.iteration)
    fsdp.write(fsdp.folder_for(path), sharded.fwd, r.optim.opt, st.best_weights)
    if not r.place.d.main:
        return
    tensors, meta = snapshot(fsdp.without_best(st), fsdp.Weightless(r.net),
                             fsdp.StatelessOptimizer(r.optim.opt), r.optim.scheduler,
                             r.feed.generator, r.report.recorder, r.report.info, r.o.to_json(),
                             r.optim.scaler)
    meta["sharded"] = {"folder": fsdp.folder_for(path).name, "best": st.best_weights is not None}
    ck.save(directory, st.iteration, tensors, meta, r.o.checkpoint_keep)
    fsdp.remove_unlisted(directory, ck.checkpoints(directory))


def _place(source, device, d, cdev) -> None:
    if hasattr(source, "to"):
        source.to(device)
    elif d.active:                               # Dataset path: sum each batch's units
        def units_sum(u):
            return int(d.sum_(torch.tensor([float(u)], device=cdev)).item())
        source.units_sum = units_sum


def _store_labels(net, plans: dict) -> None:
    labelled = {k: p.class_labels for k, p in plans.items() if p.class_labels is not None}
    if not labelled:
        return
    if len(plans) == 1:
        net.metadata["class_labels"] = next(iter(labelled.values()))
    else:
        net.metadata["class_labels"] = labelled


def _make_folder(what: str, folder) -> None:
    """Creates an output folder before the first step, so that a folder that cannot be made
    stops the run at once instead of at its first checkpoint."""
    try:
        Path(folder).mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ArgumentError(f"TrainingOptions {what} '{folder}': cannot create the folder "
                            f"({e.strerror or e}). Give a folder you can write to.") from None


def _plot_path(o: TrainingOptions) -> Path:
    if o.plots_file:
        return Path(o.plots_file)
    folder = Path(o.log_dir or o.checkpoint_dir or ".")
    folder.mkdir(parents=True, exist_ok=True)
    return folder / "training-progress.png"


class _Progress:
    """What `output_fn` receives after each iteration."""

    def __init__(self, st: State, r: Run):
        self.epoch, self.iteration = st.epoch, st.iteration
        self.learning_rate = current_lr(r.optim.opt)
        self._r = r

    @property
    def loss(self) -> float | None:
        """This iteration's loss (reads it from the device: a sync); None before any."""
        rec = self._r.report.recorder.pending[-1] if self._r.report.recorder.pending else None
        if rec is None:
            return self._r.report.info.final_loss
        return float(rec[0]) * self._r.place.d.world

    @property
    def info(self) -> TrainingInfo:
        return self._r.report.info
