"""Two processes training one GPT-2-shaped model: `strategy="fsdp"` against `"ddp"`.

A GPT-2-small-shaped but smaller random model (4 blocks, 256 channels, 4 heads, 50257 tokens,
dropout 0) is built by `transformers`, saved in the Hugging Face layout and read back with
`al.from_pretrained` in each process. Each strategy runs in its own `al.launch(2)` (torchrun,
gloo on the CPU): `al.train` with AdamW on a global batch of B8×T128 (4 sequences a process),
next-token cross-entropy, for a few optimizer steps. Per process it reports:

- the bytes of parameters + gradients + optimizer state that the process holds at the
  optimizer step (its shards under fsdp, everything under ddp; gradients counted as large as
  the trained parameters they belong to), measured on the tensors after a step;
- the resident set while training (after the last step) and its peak over the whole run
  (the peak includes loading the whole model, which every process does before sharding);
- the time per optimizer step (median over the steps after the first).

`--smoke` runs a tiny model and writes nothing.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import attnlab as al                                                  # noqa: E402
from _common import load_average, machine, write_section  # noqa: E402


def sizes(smoke: bool) -> dict:
    if smoke:
        return dict(n=2, h=32, heads=4, vocab=97, B=4, T=12, steps=3)
    return dict(n=4, h=256, heads=4, vocab=50257, B=8, T=128, steps=5)


def write_model(folder: Path, z: dict) -> None:
    import transformers as hf
    hf.logging.set_verbosity_error()
    hf.utils.logging.disable_progress_bar()
    torch.manual_seed(0)
    config = hf.GPT2Config(n_layer=z["n"], n_embd=z["h"], n_head=z["heads"], vocab_size=z["vocab"],
                           n_positions=max(256, z["T"]), resid_pdrop=0.0, embd_pdrop=0.0,
                           attn_pdrop=0.0)
    hf.GPT2LMHeadModel(config).save_pretrained(folder)


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20


class Probe:
    """Reads the optimizer the loop makes, and the clock and memory after each step."""

    def __init__(self):
        from attnlab.training import loop
        self.loop, self.make = loop, loop.make_optimizer
        self.opt = None
        self.times: list[float] = []
        self.held = 0
        self.rss = 0.0
        loop.make_optimizer = self._make

    def _make(self, params, o):
        self.opt = self.make(params, o)
        return self.opt

    def after_step(self, net):
        from torch.distributed.tensor import DTensor

        def nbytes(t):
            t = t.to_local() if isinstance(t, DTensor) else t
            return t.numel() * t.element_size()
        self.times.append(time.perf_counter())
        params = list(net.parameters())
        state = [v for s in self.opt.state.values() for v in s.values() if isinstance(v, torch.Tensor)]
        self.held = (sum(nbytes(p) for p in params) + sum(nbytes(p) for p in params if p.requires_grad)
                     + sum(nbytes(t) for t in state))
        self.rss = _rss_mib()
        return False


def worker(strategy: str, folder: str, out: str, smoke: bool) -> None:
    torch.set_num_threads(1)
    z = sizes(smoke)
    net = al.from_pretrained(folder)
    ids = torch.randint(0, z["vocab"], (z["B"] * z["steps"], z["T"]),
                        generator=torch.Generator().manual_seed(1))
    probe = Probe()
    o = al.TrainingOptions(solver="adamw", learning_rate=1e-4, max_epochs=1, batch_size=z["B"],
                           shuffle="never", verbose=False, seed=0, strategy=strategy,
                           output_fn=lambda s: probe.after_step(net))
    t0 = time.perf_counter()
    al.train(net, {"input_ids": ids, "labels": ids}, options=o)
    steps = [b - a for a, b in zip([t0] + probe.times, probe.times)][1:]
    row = {"held_mib": probe.held / 2 ** 20, "rss_mib": probe.rss,
           "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
           "step_s": statistics.median(steps),
           "params": sum(p.numel() for p in net.parameters())}
    Path(out, f"{strategy}-{os.environ.get('RANK', '0')}.json").write_text(json.dumps(row))


def measure(smoke: bool) -> dict:
    z = sizes(smoke)
    rows: dict = {}
    with tempfile.TemporaryDirectory() as d:
        write_model(Path(d) / "model", z)
        for strategy in ("ddp", "fsdp"):
            argv = [__file__, "--worker", strategy, str(Path(d) / "model"), d] + \
                (["--smoke"] if smoke else [])
            rc = al.launch(2, argv, exit=False)
            if rc != 0:
                raise SystemExit(f"the {strategy} run failed (exit status {rc})")
            rows[strategy] = [json.loads(Path(d, f"{strategy}-{r}.json").read_text())
                              for r in (0, 1)]
    return rows


def _load(before, after) -> str:
    """How busy the machine was: the two strategies ran one after the other, not interleaved,
    so under load their times are only roughly comparable."""
    if before is None or after is None:
        return "Load during the run not known."
    lo, hi = sorted((before, after))
    return (f"1-minute load average {lo:.1f}–{hi:.1f} on {os.cpu_count()} CPUs; the two "
            "strategies ran one after the other (not interleaved), so where the load exceeds the "
            "CPUs the times are noisy. The resident set counts what the allocator kept: memory "
            "freed by sharding is not always returned to the system.")


def report(rows: dict, before, after, smoke: bool) -> str:
    z = sizes(smoke)

    def cell(strategy, key, fmt):
        return " / ".join(fmt.format(r[key]) for r in rows[strategy])
    ddp, fsdp = rows["ddp"], rows["fsdp"]
    ratio = statistics.mean(f["held_mib"] / d["held_mib"] for f, d in zip(fsdp, ddp))
    lines = [
        "## Two processes: FSDP against DDP (`benchmarks/fsdp.py`)", "",
        f"{machine()} · 2 processes (`al.launch(2)`, gloo on the CPU, 1 thread each) · float32 · "
        f"GPT-2-shaped random weights ({z['n']} blocks, {z['h']} channels, {z['heads']} heads, "
        f"{z['vocab']} tokens: {ddp[0]['params']:,} parameters) from `al.from_pretrained` · AdamW, "
        f"global batch B{z['B']}×T{z['T']} (B{z['B'] // 2} a process), next-token cross-entropy, "
        f"{z['steps']} steps · per process, rank 0 / rank 1: held = parameters + gradients + AdamW "
        "state that the process holds at the optimizer step (counted on its tensors after a "
        "step); RSS while training = resident set after the last step; peak RSS = over the whole "
        "run, including loading the whole model, which every process does before sharding; "
        "time = median seconds per optimizer step after the first.", "",
        _load(before, after), "",
        "| strategy | held (MiB) | RSS while training (MiB) | peak RSS (MiB) | time per step |",
        "|---|---|---|---|---|"]
    for name in ("ddp", "fsdp"):
        lines.append(f"| {name} | {cell(name, 'held_mib', '{:.0f}')} | {cell(name, 'rss_mib', '{:.0f}')} | "
                     f"{cell(name, 'peak_rss_mib', '{:.0f}')} | {cell(name, 'step_s', '{:.2f} s')} |")
    lines += ["", f"fsdp holds {ratio:.2f}× of what ddp holds per process (1/N = 0.50 for N = 2)."]
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--smoke", action="store_true", help="a tiny model; writes nothing")
    ap.add_argument("--worker", nargs=3, metavar=("STRATEGY", "MODEL", "OUT"), help=argparse.SUPPRESS)
    args, _ = ap.parse_known_args(argv)
    if args.worker:
        worker(*args.worker, smoke=args.smoke)
        return None
    before = load_average()
    rows = measure(args.smoke)
    text = report(rows, before, load_average(), args.smoke)
    print(text)
    if not args.smoke:
        write_section("fsdp", text)
    return rows


if __name__ == "__main__":
    main()
