"""GPU benchmarks in one run, prepared so that a session with a CUDA machine runs
`python benchmarks/gpu.py` once (under 8 minutes) and gets the GPU section of RESULTS.md.

1. attention training step (forward + backward): attnlab `SelfAttention` against four
   nn.Linear + SDPA by hand and `nn.MultiheadAttention`, T 512 / 2048 / 8192, fp32 and bf16
   (autocast); aims: ≤ 1.02× hand, ≥ 1.2× faster than MHA.
2. `al.train` against the hand-written loop, eager and `compile=True` (the hand loop eager and
   compiled too); aim: al.train compiled ≥ 1.3× the hand eager loop.
3. decoding 512 tokens: `net.stream()` (eager and compiled) against recomputing the prefix;
   aim ≥ 20×.
4. peak memory of a training step (`torch.cuda.max_memory_allocated`) against textbook
   softmax(QKᵀ)V attention.

`--smoke` runs every code path at tiny sizes on whatever device there is (the CPU here) and
writes nothing unless `--out` is given: the suite runs it so the script cannot rot before a GPU
session needs it. Every section checks its outputs against its reference before timing.
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import attnlab as al                                  # noqa: E402
from attnlab import layers as L                       # noqa: E402
from _common import write_section                     # noqa: E402
from decoding import decode_recompute, decode_stream, decoder   # noqa: E402

BUDGET_S = 7 * 60          # sections left when time runs out are reported as skipped


class Hand(nn.Module):
    """Four nn.Linear around F.scaled_dot_product_attention, as one writes it by hand."""

    def __init__(self, E, H):
        super().__init__()
        self.h = H
        self.q, self.k, self.v, self.o = (nn.Linear(E, E) for _ in range(4))

    def forward(self, x, naive=False):
        b, t, e = x.shape
        q, k, v = (m(x).view(b, t, self.h, -1).transpose(1, 2) for m in (self.q, self.k, self.v))
        if naive:                                   # the textbook: T×T scores in memory
            a = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1) @ v
        else:
            a = F.scaled_dot_product_attention(q, k, v)
        return self.o(a.transpose(1, 2).reshape(b, t, e))


def attention_net(E, H) -> al.Network:
    return al.Network([L.SequenceInput(E, name="x"), L.SelfAttention(H, E, name="attn")])


def copies(net, E, H, device):
    """Hand and nn.MultiheadAttention with the network's weights."""
    p = net.learnables
    hand, mha = Hand(E, H).to(device), nn.MultiheadAttention(E, H, batch_first=True).to(device)
    with torch.no_grad():
        for n, m in (("query", hand.q), ("key", hand.k), ("value", hand.v), ("output", hand.o)):
            m.weight.copy_(p[f"attn/{n}.weight"])
            m.bias.copy_(p[f"attn/{n}.bias"])
        mha.in_proj_weight.copy_(torch.cat([p[f"attn/{n}.weight"] for n in ("query", "key", "value")]))
        mha.in_proj_bias.copy_(torch.cat([p[f"attn/{n}.bias"] for n in ("query", "key", "value")]))
        mha.out_proj.weight.copy_(p["attn/output.weight"])
        mha.out_proj.bias.copy_(p["attn/output.bias"])
    return hand, mha


# -- timing ----------------------------------------------------------------------------------

def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fns: dict, device, repeats: int, warmup: int = 2) -> dict:
    """Median seconds per call of each function, interleaved, synchronised around each call."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    sync(device)
    samples = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            sync(device)
            t0 = time.perf_counter()
            fn()
            sync(device)
            samples[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in samples.items()}


def autocast(device, precision):
    if precision == "fp32":
        return torch.autocast(device.type, enabled=False)
    return torch.autocast(device.type, dtype=torch.bfloat16)


# -- 1. attention training step --------------------------------------------------------------

def bench_attention(device, sizes, precisions, repeats, E=256, H=8):
    rows = []
    for T, B in sizes:
        torch.manual_seed(0)
        net = attention_net(E, H).initialize().to(device).train()
        hand, mha = copies(net, E, H, device)
        x = torch.randn(B, T, E, device=device)
        with torch.no_grad():
            ref = hand(x)
            assert torch.allclose(net(x), ref, atol=1e-4), "attnlab and hand differ"
            assert torch.allclose(mha(x, x, x, need_weights=False)[0], ref, atol=1e-4)
        for prec in precisions:
            def step(call, params):
                def run():
                    for p in params:
                        p.grad = None
                    with autocast(device, prec):
                        y = call()
                    y.float().sum().backward()
                return run
            fns = {"attnlab": step(lambda: net(x), list(net.parameters())),
                   "hand": step(lambda: hand(x), list(hand.parameters())),
                   "mha": step(lambda: mha(x, x, x, need_weights=False)[0], list(mha.parameters()))}
            t = timed(fns, device, repeats)
            rows.append(dict(T=T, B=B, precision=prec, **{k: v * 1e3 for k, v in t.items()}))
            print(f"  attention T{T} B{B} {prec}: " + ", ".join(f"{k} {v * 1e3:.2f} ms"
                                                             for k, v in t.items()), flush=True)
    return rows


# -- 2. al.train against the hand loop -------------------------------------------------------

def classifier(E, H, classes):
    return al.Network([L.SequenceInput(E, name="x"), L.SelfAttention(H, E, name="attn"),
                       L.LayerNorm(name="norm"), L.Dense(4 * E, name="up"), L.GELU(name="gelu"),
                       L.Dense(E, name="down"), L.GlobalAvgPool1d(name="pool"),
                       L.Dense(classes, name="fc")])


class HandClassifier(nn.Module):
    def __init__(self, net, E, H, classes):
        super().__init__()
        self.attn, _ = copies(net, E, H, "cpu")
        self.norm, self.up, self.down = nn.LayerNorm(E), nn.Linear(E, 4 * E), nn.Linear(4 * E, E)
        self.fc = nn.Linear(E, classes)
        with torch.no_grad():
            p = net.learnables
            for n in ("norm", "up", "down", "fc"):
                getattr(self, n).weight.copy_(p[f"{n}/weight"])
                getattr(self, n).bias.copy_(p[f"{n}/bias"])

    def forward(self, x):
        return self.fc(self.down(F.gelu(self.up(self.norm(self.attn(x))))).mean(1))


def bench_train(device, N, T, E, H, B, epochs, repeats, compile_kw):
    classes = 4
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, classes, (N,), generator=g)
    x = torch.randn(N, T, E, generator=g)
    x[torch.arange(N), :, y] += 1.0
    xd, yd = x.to(device), y.to(device)
    torch.manual_seed(0)
    base = classifier(E, H, classes).initialize()
    iters = epochs * math.ceil(N / B)

    def al_run(comp):
        net = classifier(E, H, classes).initialize()
        net.load_state_dict(base.state_dict())
        opts = al.TrainingOptions(solver="adam", learning_rate=1e-3, max_epochs=epochs,
                                  batch_size=B, verbose=False, metrics=[], device=str(device),
                                  compile=compile_kw if comp else False)
        # a first call compiles (and warms up); the timed calls reuse Dynamo's cache
        return lambda: al.train(net, xd, yd, options=opts)

    def hand_run(comp):
        model = HandClassifier(base, E, H, classes).to(device)
        fwd = torch.compile(model, **(compile_kw if isinstance(compile_kw, dict) else {})) \
            if comp else model
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)

        def run():
            for _ in range(epochs):
                perm = torch.randperm(N, device=device)
                for i in range(0, N, B):
                    idx = perm[i:i + B]
                    opt.zero_grad(set_to_none=True)
                    F.cross_entropy(fwd(xd[idx]), yd[idx]).backward()
                    opt.step()
            sync(device)
        return run

    fns = {"al.train": al_run(False), "al.train compile": al_run(True),
           "hand": hand_run(False), "hand compile": hand_run(True)}
    t = timed(fns, device, repeats, warmup=1)
    rows = {k: iters / v for k, v in t.items()}             # iterations per second
    print("  train: " + ", ".join(f"{k} {v:.1f} it/s" for k, v in rows.items()), flush=True)
    return rows, iters


# -- 3. decoding -----------------------------------------------------------------------------

def bench_decoding(device, steps, repeats, compile_kw, dim=256, depth=2):
    torch.manual_seed(0)
    net = decoder(dim=dim, heads=8, depth=depth).eval()
    net.initialize()
    net.to(device)
    start = torch.zeros(1, 1, 1, device=device)

    def compiled_stream(n):
        s = net.stream(capacity=n, compile=compile_kw)
        x, toks = start, []
        for _ in range(n):
            tok = s.step(x)[:, -1].argmax(-1)
            toks.append(tok)
            x = tok.float().view(-1, 1, 1)
        return torch.stack(toks, 1)

    with torch.no_grad():
        ref, _ = decode_recompute(net, start, min(steps, 32))
        same = bool(torch.equal(decode_stream(net, start, min(steps, 32))[0], ref))
        same_c = bool(torch.equal(compiled_stream(min(steps, 32)), ref))
        fns = {"stream": lambda: decode_stream(net, start, steps),
               "stream compile": lambda: compiled_stream(steps),
               "recompute": lambda: decode_recompute(net, start, steps)}
        t = timed(fns, device, repeats, warmup=1)
    ms = {k: v / steps * 1e3 for k, v in t.items()}
    print("  decoding: " + ", ".join(f"{k} {v:.3f} ms/token" for k, v in ms.items()), flush=True)
    return ms, same and same_c


# -- 4. peak memory --------------------------------------------------------------------------

def bench_memory(device, T, E=128, H=4):
    if device.type != "cuda":
        return None
    torch.manual_seed(0)
    net = attention_net(E, H).initialize().to(device)
    hand, _ = copies(net, E, H, device)
    x = torch.randn(1, T, E, device=device)
    out = {}
    for name, call in (("attnlab", lambda: net(x)), ("naive", lambda: hand(x, naive=True))):
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        call().sum().backward()
        torch.cuda.synchronize(device)
        out[name] = (torch.cuda.max_memory_allocated(device) - before) / 2 ** 20
        for p in list(net.parameters()) + list(hand.parameters()):
            p.grad = None
    print(f"  peak memory T{T}: attnlab {out['attnlab']:.0f} MiB, naive {out['naive']:.0f} MiB",
          flush=True)
    return out


# -- the report ------------------------------------------------------------------------------

def met(ok: bool) -> str:
    return "met" if ok else "**not met**"


def report(device, info, att, train, decoding, memory, skipped, elapsed) -> str:
    lines = ["## GPU (`benchmarks/gpu.py`)", "",
             f"{info}; median of interleaved repeats, synchronised; {elapsed:.0f} s in all.", ""]
    targets = []
    if att:
        lines += ["### Attention training step (forward + backward), ms", "",
                  "| T | B | precision | attnlab SelfAttention | hand (4 Linear + SDPA) | "
                  "nn.MultiheadAttention | vs hand | MHA / attnlab |", "|---|---|---|---|---|---|---|---|"]
        for r in att:
            vh, vm = r["attnlab"] / r["hand"], r["mha"] / r["attnlab"]
            lines.append(f"| {r['T']} | {r['B']} | {r['precision']} | {r['attnlab']:.2f} | "
                         f"{r['hand']:.2f} | {r['mha']:.2f} | {vh:.3f}× | {vm:.2f}× |")
            targets.append((f"attention T{r['T']} {r['precision']}: ≤ 1.02× hand", f"{vh:.3f}×",
                            vh <= 1.02))
            targets.append((f"attention T{r['T']} {r['precision']}: ≥ 1.2× faster than MHA",
                            f"{vm:.2f}×", vm >= 1.2))
        lines.append("")
    if train:
        rates, iters = train
        lines += [f"### `al.train` against the hand loop ({iters} iterations a call), iterations/s", "",
                  "| trainer | it/s | vs hand eager |", "|---|---|---|"]
        for k, v in rates.items():
            lines.append(f"| {k} | {v:.1f} | {v / rates['hand']:.2f}× |")
        r = rates["al.train compile"] / rates["hand"]
        targets.append(("al.train compile=True: ≥ 1.3× the hand eager loop", f"{r:.2f}×", r >= 1.3))
        lines.append("")
    if decoding:
        ms, same = decoding
        lines += ["### Decoding (2-layer decoder E256, greedy), ms a token", "",
                  "| decoder | ms/token | vs recompute |", "|---|---|---|"]
        for k, v in ms.items():
            lines.append(f"| {k} | {v:.3f} | {ms['recompute'] / v:.1f}× |")
        lines += ["", f"Tokens identical to recomputation: {'yes' if same else '**NO**'}.", ""]
        best = ms["recompute"] / min(ms["stream"], ms["stream compile"])
        targets.append(("decoding: ≥ 20× recompute", f"{best:.1f}×", best >= 20))
    if memory:
        lines += ["### Peak memory of one training step (`torch.cuda.max_memory_allocated`)", "",
                  "| attention | peak extra MiB |", "|---|---|",
                  f"| attnlab (fused SDPA) | {memory['attnlab']:.0f} |",
                  f"| textbook softmax(QKᵀ)V | {memory['naive']:.0f} |", ""]
    if targets:
        lines[4:4] = ["### Targets", "", "| target | result | |", "|---|---|---|"] + \
            [f"| {a} | {b} | {met(c)} |" for a, b, c in targets] + [""]
    if skipped:
        lines += [f"Skipped (time budget or device): {', '.join(skipped)}.", ""]
    return "\n".join(lines)


def main(argv=None) -> str:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, any device, no RESULTS.md")
    ap.add_argument("--device", default=None, help="default: cuda when there is one, else cpu")
    ap.add_argument("--compile-backend", default=None, help="torch.compile backend (default inductor)")
    ap.add_argument("--out", default=None, help="write the report here instead of RESULTS.md")
    ap.add_argument("--budget", type=float, default=BUDGET_S,
                    help="seconds; sections left when it runs out are reported as skipped")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type != "cuda" and not args.smoke:
        raise SystemExit("benchmarks/gpu.py measures a CUDA GPU; use --smoke to try it elsewhere")
    compile_kw = {"backend": args.compile_backend} if args.compile_backend else True
    if args.smoke:
        sizes, precisions, reps = [(16, 2)], ["fp32", "bf16"], 2
        train_kw = dict(N=32, T=8, E=16, H=2, B=16, epochs=1, repeats=1)
        dec_kw = dict(steps=8, repeats=1, dim=16, depth=1)
        mem_T = 64
    else:
        sizes, precisions, reps = [(512, 16), (2048, 4), (8192, 1)], ["fp32", "bf16"], 7
        train_kw = dict(N=4096, T=64, E=256, H=8, B=64, epochs=1, repeats=3)
        dec_kw = dict(steps=512, repeats=3)
        mem_T = 8192
    torch.backends.cuda.matmul.allow_tf32 = False         # fp32 means fp32 in the fp32 rows
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    info = (f"{name}, torch {torch.__version__}" + (f", CUDA {torch.version.cuda}"
                                                      if device.type == "cuda" else ""))
    print(f"benchmarks/gpu.py on {info}{' (smoke)' if args.smoke else ''}", flush=True)
    skipped, att, train, dec, mem = [], None, None, None, None

    def left() -> bool:
        return time.perf_counter() - t0 < args.budget

    att = bench_attention(device, sizes, precisions, reps)
    if left():
        train = bench_train(device, compile_kw=compile_kw, **train_kw)
    else:
        skipped.append("al.train")
    if left():
        dec = bench_decoding(device, compile_kw=compile_kw, **dec_kw)
    else:
        skipped.append("decoding")
    if left():
        mem = bench_memory(device, mem_T)
        if mem is None:
            skipped.append("peak memory (CUDA only)")
    else:
        skipped.append("peak memory")
    text = report(device, info, att, train, dec, mem, skipped, time.perf_counter() - t0)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    elif not args.smoke:
        write_section("gpu", text)
    return text


if __name__ == "__main__":
    main()
