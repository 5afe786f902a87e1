#!/usr/bin/env python
"""Attention benchmarks (CPU, float32): speed, efficiency and memory of attnlab's attention.

    python benchmarks/attention.py            # full run (a few minutes on 2 cores)
    python benchmarks/attention.py --quick    # fewer repeats and a shorter memory search

Measures, in one run:
  1. SelfAttentionModule training step (forward + backward) against a hand-written module
     (four nn.Linear around F.scaled_dot_product_attention) and nn.MultiheadAttention
     (batch_first, training mode);
  2. inference at T=2048 against nn.MultiheadAttention's eval fast path;
  3. the attention core's GFLOP/s against the machine's float32 matmul GFLOP/s;
  4. peak memory of one training step at T=8192 for the fused path and textbook attention;
  5. the longest sequence one SelfAttentionModule trains on within 8 GiB, fused vs textbook.
Results are printed and written to benchmarks/RESULTS.md between the attention markers.
"""
from __future__ import annotations

import argparse
import datetime
import gc
import json
import math
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from attnlab.functional import SelfAttentionModule, attention  # noqa: E402

THREADS = 2
GiB = 1 << 30
MiB = 1 << 20
BEGIN, END = "<!-- attention:begin -->", "<!-- attention:end -->"
RESULTS = ROOT / "benchmarks" / "RESULTS.md"


# --------------------------------------------------------------------------------------------
# the contenders
# --------------------------------------------------------------------------------------------

class HandWritten(nn.Module):
    """What one writes by hand: four nn.Linear around F.scaled_dot_product_attention."""

    def __init__(self, E, H):
        super().__init__()
        self.H = H
        self.q, self.k, self.v, self.o = (nn.Linear(E, E) for _ in range(4))

    def forward(self, x):
        B, T, E = x.shape
        q = self.q(x).view(B, T, self.H, -1).transpose(1, 2)  # B×H×T×dk
        k = self.k(x).view(B, T, self.H, -1).transpose(1, 2)
        v = self.v(x).view(B, T, self.H, -1).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v)
        return self.o(y.transpose(1, 2).reshape(B, T, E))


class Textbook(SelfAttentionModule):
    """Naive attention, as in the textbook: softmax(QKᵀ/√dk)V with the T×T scores in memory."""

    def forward(self, x):
        B, T, _ = x.shape
        H = self.num_heads
        q = self.query(x).view(B, T, H, -1).transpose(1, 2)  # B×H×T×dk
        k = self.key(x).view(B, T, H, -1).transpose(1, 2)
        v = self.value(x).view(B, T, H, -1).transpose(1, 2)
        a = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)  # B×H×T×T
        return self.output((a @ v).transpose(1, 2).reshape(B, T, -1))


def copy_weights(ours: SelfAttentionModule, hand: HandWritten, mha: nn.MultiheadAttention):
    with torch.no_grad():
        for a, b in ((ours.query, hand.q), (ours.key, hand.k), (ours.value, hand.v),
                     (ours.output, hand.o)):
            b.weight.copy_(a.weight)
            b.bias.copy_(a.bias)
        mha.in_proj_weight.copy_(torch.cat([ours.query.weight, ours.key.weight,
                                            ours.value.weight]))
        mha.in_proj_bias.copy_(torch.cat([ours.query.bias, ours.key.bias, ours.value.bias]))
        mha.out_proj.weight.copy_(ours.output.weight)
        mha.out_proj.bias.copy_(ours.output.bias)


# --------------------------------------------------------------------------------------------
# timing
# --------------------------------------------------------------------------------------------

class OtherLoad:
    """CPU time that other processes used while a section ran, in cores (0 = quiet machine).

    Timings on 2 shared cores are only meaningful when nothing else runs: this makes any
    interference visible in the report instead of silently skewing it."""

    def __init__(self):
        self.t0, self.busy0, self.own0 = time.perf_counter(), self._busy(), self._own()

    @staticmethod
    def _busy() -> float:
        try:
            with open("/proc/stat") as f:
                v = [int(x) for x in f.readline().split()[1:]]
        except OSError:
            return float("nan")
        user, nice, system, idle, iowait, irq, softirq = v[:7]
        return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")

    @staticmethod
    def _own() -> float:
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system

    def cores(self) -> float:
        wall = time.perf_counter() - self.t0
        other = (self._busy() - self.busy0) - (self._own() - self.own0)
        return max(0.0, other / wall) if wall > 0 else 0.0


QUIET = 0.15        # other processes may use at most this many cores during a timed round
REJECTED = {"rounds": 0, "kept_busy": 0}


WAIT_BUDGET = [180.0]  # seconds the whole run may spend waiting for a quiet machine


def wait_quiet(max_wait: float = 30.0) -> None:
    """Wait (up to max_wait s, within the run's budget) until other processes leave the CPUs
    alone for half a second."""
    t0 = time.perf_counter()
    deadline = t0 + min(max_wait, WAIT_BUDGET[0])
    while time.perf_counter() < deadline:
        mon = OtherLoad()
        time.sleep(0.5)
        if mon.cores() < QUIET:
            break
    WAIT_BUDGET[0] = max(0.0, WAIT_BUDGET[0] - (time.perf_counter() - t0))


def time_interleaved(fns: dict, warmup: int, repeats: int, rewarm: bool = False) -> dict:
    """Median seconds per call of each function.

    Calls are interleaved (the order alternating) so that drift in the machine's speed hits
    every contender alike. A round during which other processes used the CPUs (this machine
    is shared) is discarded and redone once the machine is quiet again; if it never gets
    quiet, the busy rounds are kept and counted in the report. With `rewarm`, each timed call
    follows an untimed one of the same function, so that no contender pays for the caches
    another has just evicted (a large matmul evicts everything)."""
    for _ in range(warmup):
        for f in fns.values():
            f()
    names = list(fns)
    clean = {name: [] for name in fns}
    busy = {name: [] for name in fns}
    for attempt in range(4 * repeats):
        if len(clean[names[0]]) >= repeats:
            break
        if WAIT_BUDGET[0] <= 0 and attempt >= repeats:
            break  # the machine stays busy: stop redoing rounds, keep the run's length bounded
        mon = OtherLoad()
        got = {}
        for name in (names if attempt % 2 == 0 else names[::-1]):
            if rewarm:
                fns[name]()
            t0 = time.perf_counter()
            fns[name]()
            got[name] = time.perf_counter() - t0
        # /proc/stat counts in clock ticks: allow three ticks of rounding on short rounds
        tick_slack = 3 / os.sysconf("SC_CLK_TCK") / max(sum(got.values()), 1e-9)
        dest = clean if mon.cores() <= max(QUIET, tick_slack) else busy
        for name, t in got.items():
            dest[name].append(t)
        if dest is busy:
            REJECTED["rounds"] += 1
            wait_quiet()
    if len(clean[names[0]]) < max(3, repeats // 2):
        REJECTED["kept_busy"] += len(busy[names[0]])
        clean = {name: clean[name] + busy[name] for name in names}
    return {name: statistics.median(ts) for name, ts in clean.items()}


def training_step(module, x, grad, call):
    params = list(module.parameters())

    def step():
        for p in params:
            p.grad = None
        x.grad = None
        call(module, x).backward(grad)
    return step


def bench_training(configs, repeats, warmup):
    rows = []
    for B, T, E, H in configs:
        torch.manual_seed(0)
        ours = SelfAttentionModule(E, H, E).train()
        hand = HandWritten(E, H).train()
        mha = nn.MultiheadAttention(E, H, batch_first=True).train()
        copy_weights(ours, hand, mha)
        x = torch.randn(B, T, E, requires_grad=True)
        g = torch.randn(B, T, E)
        fns = {
            "attnlab": training_step(ours, x, g, lambda m, x: m(x)),
            "attnlab-separate-proj": training_step(
                ours, x, g, lambda m, x: super(SelfAttentionModule, m).forward(x, x, x)),
            "hand": training_step(hand, x, g, lambda m, x: m(x)),
            "mha": training_step(mha, x, g, lambda m, x: m(x, x, x, need_weights=False)[0]),
        }
        t = time_interleaved(fns, warmup, repeats)
        rows.append(dict(B=B, T=T, E=E, H=H, **{k: v * 1e3 for k, v in t.items()}))
        print(f"  train B{B} T{T} E{E} H{H}: " + ", ".join(
            f"{k} {v * 1e3:.1f} ms" for k, v in t.items()), flush=True)
    return rows


def mha_uses_fast_path(mha, x) -> bool:
    """True if nn.MultiheadAttention ran its native fused kernel (its eval fast path)."""
    real, calls = torch._native_multi_head_attention, []

    def spy(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)
    torch._native_multi_head_attention = spy
    try:
        with torch.inference_mode():
            mha(x, x, x, need_weights=False)
    finally:
        torch._native_multi_head_attention = real
    return bool(calls)


def bench_inference(B, T, E, H, repeats, warmup):
    torch.manual_seed(0)
    ours = SelfAttentionModule(E, H, E).eval()
    hand = HandWritten(E, H).eval()
    mha = nn.MultiheadAttention(E, H, batch_first=True).eval()
    copy_weights(ours, hand, mha)
    x = torch.randn(B, T, E)
    fast = mha_uses_fast_path(mha, x)
    res = {}
    for ctx_name, ctx in (("inference_mode", torch.inference_mode), ("no_grad", torch.no_grad)):
        with ctx():
            t = time_interleaved({"attnlab": lambda: ours(x),
                                  "mha": lambda: mha(x, x, x, need_weights=False)},
                                 warmup, repeats)
        res[ctx_name] = {k: v * 1e3 for k, v in t.items()}
        print(f"  inference ({ctx_name}) B{B} T{T}: attnlab {t['attnlab'] * 1e3:.1f} ms, "
              f"mha {t['mha'] * 1e3:.1f} ms", flush=True)
    return dict(B=B, T=T, E=E, H=H, mha_fast_path=fast, **res)


def bench_core(configs, matmul_n, repeats, warmup):
    """GFLOP/s of attention() alone (on projected q, k, v; reshapes included), and of a large
    float32 matmul timed in the same interleaved loop, so both see the same machine state.

    Nominal FLOPs: forward 2 matmuls, QKᵀ and AV: 4·B·H·T²·dk; backward 4 matmuls
    (dV, dA, dQ, dK) = 2× forward, so a training step counts 3× forward. Recomputation inside
    the kernel and the softmax are not counted: this is useful work only."""
    a, b = torch.randn(matmul_n, matmul_n), torch.randn(matmul_n, matmul_n)
    rows, mm = [], []
    for B, T, E, H in configs:
        torch.manual_seed(0)
        q, k, v = (torch.randn(B, T, E, requires_grad=True) for _ in range(3))
        g = torch.randn(B, T, E)
        flops = 4 * B * H * T * T * (E // H)

        def fwd():
            with torch.inference_mode():
                attention(q, k, v, H)

        def fwd_bwd():
            q.grad = k.grad = v.grad = None
            attention(q, k, v, H).backward(g)
        t = time_interleaved({"fwd": fwd, "fwd_bwd": fwd_bwd, "mm": lambda: torch.mm(a, b)},
                             warmup, repeats, rewarm=True)
        mm_gflops = 2 * matmul_n ** 3 / t["mm"] / 1e9
        mm.append(mm_gflops)
        row = dict(B=B, T=T, E=E, H=H, fwd_ms=t["fwd"] * 1e3, fwd_bwd_ms=t["fwd_bwd"] * 1e3,
                   fwd_gflops=flops / t["fwd"] / 1e9, fwd_bwd_gflops=3 * flops / t["fwd_bwd"] / 1e9,
                   matmul_gflops=mm_gflops)
        rows.append(row)
        print(f"  core B{B} T{T}: forward {row['fwd_gflops']:.0f} GFLOP/s, "
              f"forward+backward {row['fwd_bwd_gflops']:.0f} GFLOP/s; "
              f"matmul {mm_gflops:.0f} GFLOP/s", flush=True)
    return rows, max(mm)


# --------------------------------------------------------------------------------------------
# memory: one training step in a fresh child process
# --------------------------------------------------------------------------------------------

def _proc_status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def child(args) -> None:
    """Run one training step and print a JSON line: ok, seconds, peak extra memory."""
    spec = json.loads(args.child)
    torch.set_num_threads(THREADS)
    B, T, E, H = spec["B"], spec["T"], spec["E"], spec["H"]
    cls = Textbook if spec["impl"] == "naive" else SelfAttentionModule
    mod = cls(E, H, E).train()
    # a tiny step first: thread pools and kernel caches are set up outside the measurement
    small = torch.randn(B, 64, E, requires_grad=True)
    mod(small).sum().backward()
    mod.zero_grad(set_to_none=True)
    x = torch.randn(B, T, E, requires_grad=True)
    g = torch.randn(B, T, E)
    gc.collect()
    rss0 = _proc_status("VmRSS")
    try:  # writing 5 to clear_refs resets the peak RSS (VmHWM) to the current RSS
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        hwm_method = "VmHWM reset"
    except OSError:
        hwm_method = "ru_maxrss (not resettable)"
    if spec.get("limit_bytes"):
        # cap the address space the step may add; allocations beyond it fail cleanly
        vm = _proc_status("VmSize")
        resource.setrlimit(resource.RLIMIT_AS, (vm + spec["limit_bytes"], resource.RLIM_INFINITY))
    result = dict(spec, ok=True, hwm_method=hwm_method)
    t0 = time.perf_counter()
    try:
        mod(x).backward(g)
    except (RuntimeError, MemoryError) as e:
        msg = str(e)
        wanted = re.search(r"allocate (\d+) bytes", msg)
        if wanted:  # torch's allocator message is long; keep what it means
            msg = f"out of memory: allocating {int(wanted.group(1)) / GiB:.1f} GiB failed"
        result.update(ok=False, error=msg.splitlines()[0][:160])
    result["seconds"] = time.perf_counter() - t0
    peak = _proc_status("VmHWM") if hwm_method == "VmHWM reset" else \
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    result["peak_extra_bytes"] = peak - rss0
    print("RESULT " + json.dumps(result), flush=True)


def run_child(spec: dict, timeout: float) -> dict:
    wait_quiet()  # step times decide how far the search goes: take them on a quiet machine
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)]
    env = dict(os.environ, OMP_NUM_THREADS=str(THREADS))
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return dict(spec, ok=False, error=f"timed out after {timeout:.0f} s", seconds=timeout)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    tail = (p.stderr.strip().splitlines() or ["no output"])[-1][:160]
    return dict(spec, ok=False, error=f"child exited with {p.returncode}: {tail}")


def bench_peak_memory(T, E, H, B):
    out = {}
    for impl in ("fused", "naive"):
        r = run_child(dict(impl=impl, T=T, E=E, H=H, B=B), timeout=300)
        out[impl] = r
        peak = f"{r['peak_extra_bytes'] / MiB:.0f} MiB" if "peak_extra_bytes" in r else "?"
        print(f"  peak memory T{T} {impl}: {peak} ({'ok' if r['ok'] else r['error']}, "
              f"{r.get('seconds', 0):.1f} s)", flush=True)
    return out


def bench_longest(E, H, B, limit_bytes, time_cap, t_max):
    """Double T from 1024 until the step fails within the memory limit or gets too slow."""
    out = {}
    for impl in ("naive", "fused"):
        attempts, T = [], 1024
        while T <= t_max:
            r = run_child(dict(impl=impl, T=T, E=E, H=H, B=B, limit_bytes=limit_bytes),
                          timeout=max(4 * time_cap, 120))
            attempts.append(r)
            print(f"  longest {impl} T{T}: {'ok' if r['ok'] else 'FAILED: ' + r['error']} "
                  f"({r.get('seconds', 0):.1f} s, peak +"
                  f"{r.get('peak_extra_bytes', 0) / MiB:.0f} MiB)", flush=True)
            if not r["ok"] or r["seconds"] > time_cap:
                break
            # time grows ~4× per doubling of T: do not start a step that would run past the cap
            if 4 * r["seconds"] > time_cap:
                attempts.append(dict(impl=impl, T=2 * T, ok=None,
                                     error=f"not attempted: would take about "
                                           f"{4 * r['seconds']:.0f} s > {time_cap:.0f} s"))
                print(f"  longest {impl} T{2 * T}: not attempted "
                      f"(~{4 * r['seconds']:.0f} s expected)", flush=True)
                break
            T *= 2
        ok = [a["T"] for a in attempts if a["ok"]]
        stop = attempts[-1]
        if stop["ok"] is None:
            limited_by = "time (next step too slow)"
        elif stop["ok"] is False:
            memoryish = any(w in stop["error"].lower() for w in ("alloc", "memory"))
            limited_by = "memory" if memoryish else "error"
        else:
            limited_by = "time" if stop["seconds"] > time_cap else "search range"
        out[impl] = dict(largest=max(ok) if ok else None, attempts=attempts,
                         limited_by=limited_by)
    return out


# --------------------------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------------------------

def cpu_name() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def mark(ok: bool) -> str:
    return "met" if ok else "**not met**"


def report(r: dict, quick: bool) -> str:
    L = []
    L.append("## Attention (`benchmarks/attention.py`)")
    L.append("")
    L.append(f"{datetime.date.today()} · {cpu_name()} · {THREADS} threads · torch "
             f"{torch.__version__} · float32 · medians of {r['repeats']} interleaved repeats "
             f"after warm-up{' · --quick' if quick else ''}.")
    L.append("")
    L.append(f"Timed rounds during which other processes used the CPUs: {REJECTED['rounds']}, "
             f"of which {REJECTED['kept_busy']} were kept for want of quiet ones and the rest "
             f"discarded and redone.")
    L.append("")
    busy = {k: v for k, v in r["other_load"].items() if v > 0.2}
    L.append("Other processes' CPU use while each section ran (in cores; 0 = quiet machine): "
             + ", ".join(f"{k} {v:.2f}" for k, v in r["other_load"].items()) + "."
             + (f" (The machine was busy during {', '.join(busy)}: timed rounds run while "
                f"others used the CPUs were redone, see above; the memory figures do not "
                f"depend on load, and the step times in the memory tables do.)" if busy else ""))
    L.append("")
    L.append("### Targets")
    L.append("")
    L.append("| target | result | |")
    L.append("|---|---|---|")
    for t in r["targets"]:
        L.append(f"| {t['target']} | {t['result']} | {mark(t['ok'])} |")
    L.append("")
    L.append("### Training step (forward + backward), ms")
    L.append("")
    L.append("| B | T | E | H | attnlab SelfAttention | same, 3 separate input projections | "
             "hand-written (4 Linear + SDPA) | nn.MultiheadAttention | vs hand | vs MHA |")
    L.append("|---|---|---|---|---|---|---|---|---|---|")
    for x in r["training"]:
        L.append(f"| {x['B']} | {x['T']} | {x['E']} | {x['H']} | {x['attnlab']:.1f} | "
                 f"{x['attnlab-separate-proj']:.1f} | {x['hand']:.1f} | {x['mha']:.1f} | "
                 f"{x['attnlab'] / x['hand']:.3f}× | {x['attnlab'] / x['mha']:.3f}× |")
    L.append("")
    inf = r["inference"]
    L.append(f"### Inference at T={inf['T']} (B{inf['B']}, E{inf['E']}, H{inf['H']}), ms")
    L.append("")
    L.append("| context | attnlab SelfAttention (eval) | nn.MultiheadAttention (eval) | speed-up |")
    L.append("|---|---|---|---|")
    for ctx in ("inference_mode", "no_grad"):
        a, m = inf[ctx]["attnlab"], inf[ctx]["mha"]
        L.append(f"| torch.{ctx}() | {a:.1f} | {m:.1f} | {m / a:.2f}× |")
    L.append("")
    L.append(f"nn.MultiheadAttention took its eval fast path "
             f"(`torch._native_multi_head_attention` was called): "
             f"{'yes' if inf['mha_fast_path'] else 'NO'}.")
    L.append("")
    L.append(f"### Attention core efficiency (float32 matmul: {r['matmul_gflops']:.0f} GFLOP/s, "
             f"{r['matmul_n']}×{r['matmul_n']} mm, best of the interleaved measurements)")
    L.append("")
    L.append("| B | T | E | H | forward ms | forward GFLOP/s | % of matmul | fwd+bwd ms | "
             "fwd+bwd GFLOP/s | % of matmul |")
    L.append("|---|---|---|---|---|---|---|---|---|---|")
    for x in r["core"]:
        L.append(f"| {x['B']} | {x['T']} | {x['E']} | {x['H']} | {x['fwd_ms']:.1f} | "
                 f"{x['fwd_gflops']:.0f} | {100 * x['fwd_gflops'] / r['matmul_gflops']:.0f} % | "
                 f"{x['fwd_bwd_ms']:.1f} | {x['fwd_bwd_gflops']:.0f} | "
                 f"{100 * x['fwd_bwd_gflops'] / r['matmul_gflops']:.0f} % |")
    L.append("")
    L.append("FLOPs are nominal useful work: forward 4·B·H·T²·dk (QKᵀ and AV), a training step "
             "3× that; the softmax and any recomputation in the kernel are not counted.")
    L.append("")
    pm = r["peak_memory"]
    f, n = pm["fused"], pm["naive"]
    L.append(f"### Peak memory of one training step, T={f['T']} (B{f['B']}, E{f['E']}, "
             f"H{f['H']})")
    L.append("")
    L.append("| attention | peak extra memory | step time |")
    L.append("|---|---|---|")
    for name, x in (("attnlab (fused SDPA)", f), ("textbook softmax(QKᵀ/√dk)V", n)):
        L.append(f"| {name} | {x['peak_extra_bytes'] / MiB:.0f} MiB | {x.get('seconds', 0):.2f} s"
                 f"{'' if x['ok'] else ' (failed: ' + x['error'] + ')'} |")
    L.append("")
    L.append("Method: each step runs in a fresh child process. After a tiny warm-up step (so that "
             "thread pools and kernel caches are not counted) the child records its resident "
             "set (VmRSS), resets the kernel's peak-RSS counter (`echo 5 > /proc/self/clear_refs`"
             ") and, after forward and backward, reads the peak (VmHWM). Peak extra memory = "
             "VmHWM − VmRSS before the step: everything the step itself needed, activations, "
             "gradients and temporaries. (tracemalloc cannot see torch's allocations, and torch's "
             "CPU allocator returns large blocks to the system, so RSS follows live tensors.) "
             f"Measured with: {f.get('hwm_method', '?')}.")
    L.append("")
    lo = r["longest"]
    L.append(f"### Longest sequence trainable within {r['limit_gib']} GiB "
             f"(one SelfAttention, B1, E128, H4; one step)")
    L.append("")
    L.append("| attention | largest T | stopped by | attempts (T: time, peak extra) |")
    L.append("|---|---|---|---|")
    for name, key in (("textbook softmax(QKᵀ/√dk)V", "naive"), ("attnlab (fused SDPA)", "fused")):
        x = lo[key]
        att = "; ".join(
            f"{a['T']}: " + (f"{a['seconds']:.1f} s, {a['peak_extra_bytes'] / GiB:.2f} GiB"
                             if a["ok"] else a["error"]) for a in x["attempts"])
        L.append(f"| {name} | {x['largest']} | {x['limited_by']} | {att} |")
    L.append("")
    L.append(f"Method: each attempt runs in a child process whose address space is capped "
             f"(`RLIMIT_AS`) at its size after set-up plus {r['limit_gib']} GiB, so an allocation "
             f"beyond the budget fails cleanly (a RuntimeError from torch's allocator) instead of "
             f"swapping; T doubles from 1024 until a step fails or a step would take longer "
             f"than {r['time_cap']:.0f} s (time grows about 4× per doubling).")
    return "\n".join(L)


def write_results(section: str) -> None:
    block = f"{BEGIN}\n{section}\n{END}"
    if RESULTS.exists():
        text = RESULTS.read_text(encoding="utf-8")
        if BEGIN in text and END in text and text.index(BEGIN) < text.index(END):
            head, rest = text.split(BEGIN, 1)
            tail = rest.split(END, 1)[1]
            text = head + block + tail
        else:
            text = text.rstrip("\n") + "\n\n" + block + "\n"
    else:
        text = "# Benchmark results\n\nEach benchmark script rewrites its own section.\n\n" \
               + block + "\n"
    tmp = RESULTS.with_suffix(".md.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(RESULTS)


# --------------------------------------------------------------------------------------------

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats, shorter memory search")
    ap.add_argument("--no-write", action="store_true", help="print only; leave RESULTS.md alone")
    ap.add_argument("--max-wait", type=float, default=WAIT_BUDGET[0], metavar="S",
                    help="seconds the run may spend in all waiting for other processes to "
                         "leave the CPUs alone (default %(default)s)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    torch.set_num_threads(THREADS)
    WAIT_BUDGET[0] = args.max_wait
    quick = args.quick
    repeats, warmup = (5, 2) if quick else (15, 3)
    t_start = time.perf_counter()
    r = dict(repeats=repeats, limit_gib=8, time_cap=10.0 if quick else 60.0)

    load = r["other_load"] = {}
    print("training step (forward + backward)", flush=True)
    wait_quiet()
    mon = OtherLoad()
    r["training"] = bench_training([(32, 128, 256, 8), (8, 512, 256, 8), (2, 2048, 256, 8)],
                                   repeats, warmup)
    load["training"] = mon.cores()
    print("inference", flush=True)
    wait_quiet()
    mon = OtherLoad()
    r["inference"] = bench_inference(2, 2048, 256, 8, repeats, warmup)
    load["inference"] = mon.cores()
    print("attention core vs matmul", flush=True)
    wait_quiet()
    mon = OtherLoad()
    r["matmul_n"] = 2048 if quick else 4096
    r["core"], r["matmul_gflops"] = bench_core([(8, 512, 256, 8), (2, 2048, 256, 8)],
                                               r["matmul_n"], repeats, warmup)
    load["core"] = mon.cores()
    print("peak memory", flush=True)
    mon = OtherLoad()
    r["peak_memory"] = bench_peak_memory(8192, 128, 4, 1)
    print("longest sequence within 8 GiB", flush=True)
    r["longest"] = bench_longest(128, 4, 1, 8 * GiB, r["time_cap"],
                                 t_max=16384 if quick else 1 << 20)
    load["memory"] = mon.cores()
    print("  other processes' CPU use (cores): " + ", ".join(
        f"{k} {v:.2f}" for k, v in load.items()), flush=True)

    targets = []
    for x in r["training"]:
        q = x["attnlab"] / x["hand"]
        targets.append(dict(target=f"train T{x['T']}: ≤ 1.05× hand-written",
                            result=f"{q:.3f}×", ok=q <= 1.05))
        q = x["attnlab"] / x["mha"]
        targets.append(dict(target=f"train T{x['T']}: ≤ 1.0× nn.MultiheadAttention",
                            result=f"{q:.3f}×", ok=q <= 1.0))
    inf = r["inference"]["inference_mode"]
    s = inf["mha"] / inf["attnlab"]
    targets.append(dict(target="inference T2048: ≥ 1.5× faster than MHA eval fast path",
                        result=f"{s:.2f}×", ok=s >= 1.5))
    for x in r["core"]:
        for kind in ("fwd", "fwd_bwd"):
            p = x[f"{kind}_gflops"] / r["matmul_gflops"]
            targets.append(dict(target=f"core T{x['T']} {kind.replace('_', '+')}: ≥ 50 % of "
                                       f"matmul GFLOP/s", result=f"{100 * p:.0f} %", ok=p >= 0.5))
    pm = r["peak_memory"]
    ratio = pm["fused"]["peak_extra_bytes"] / pm["naive"]["peak_extra_bytes"]
    targets.append(dict(target="peak memory T8192: fused ≤ ¼ of naive",
                        result=f"{pm['fused']['peak_extra_bytes'] / MiB:.0f} MiB vs "
                               f"{pm['naive']['peak_extra_bytes'] / MiB:.0f} MiB "
                               f"({ratio:.3f}×)",
                        ok=ratio <= 0.25 and pm["fused"]["ok"] and pm["naive"]["ok"]))
    r["targets"] = targets

    section = report(r, quick)
    print()
    print(section)
    print(f"\n(total {time.perf_counter() - t_start:.0f} s)")
    if not args.no_write:
        write_results(section)
        print(f"written to {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
