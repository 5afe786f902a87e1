"""Loaded checkpoints against `transformers` on the same random weights.

Two models as people run them today: a GPT-2-small-sized one (12 layers, 768 channels, 12 heads,
learned positions) and a Llama-style one (grouped heads, rotary, SwiGLU, RMSNorm). Each is
built by `transformers` from its config with random weights, saved in the Hugging Face layout
and read back with `al.from_pretrained`; then, in one run:

- the forward pass at B1×T512 (`model(input_ids).logits` against `net(input_ids)`);
- greedy decoding of 128 tokens after a 16-token prompt (`model.generate` with its cache
  against `al.generate`, which streams with the key/value cache; no stop id in either, so both
  make all 128), and attnlab recomputing the whole prefix for every token (once), the cost the
  cache saves;
- peak memory of each above the weights: `torch.cuda.max_memory_allocated` on a GPU; on a CPU
  the growth of the resident set while it runs, sampled by a thread (median of 3, the two
  alternating); and the peak while `from_pretrained` loads the folder, in a fresh process.

Times come from interleaved rounds (transformers, then attnlab, in each round), so that load
from other processes hits both alike: the table gives the medians, the fastest, and the
median and range of the per-round ratios. Outputs are checked first (logits within 1e-4 of
their largest magnitude, the same tokens).
`--smoke` runs every path at tiny sizes on the CPU and writes nothing (the suite runs it).
Needs the `hf` extra (transformers).
"""
from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import attnlab as al                                  # noqa: E402
from _common import (interleaved_samples, load_average, load_note, machine,  # noqa: E402
                     ratio_spread, write_section)


def configs(smoke: bool) -> dict:
    import transformers as hf
    hf.logging.set_verbosity_error()
    hf.utils.logging.disable_progress_bar()
    if smoke:
        return {
            "GPT-2 (tiny)": hf.GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=97,
                                          n_positions=64, bos_token_id=0, eos_token_id=0),
            "Llama-style (tiny)": hf.LlamaConfig(num_hidden_layers=2, hidden_size=32,
                                                 num_attention_heads=4, num_key_value_heads=2,
                                                 intermediate_size=64, vocab_size=97,
                                                 max_position_embeddings=64),
        }
    return {
        "GPT-2 small (12×768, 12 heads)": hf.GPT2Config(n_layer=12, n_embd=768, n_head=12,
                                                        vocab_size=50257, n_positions=1024),
        "Llama-style (12×768, 12 heads, 4 kv heads, SwiGLU 2048)": hf.LlamaConfig(
            num_hidden_layers=12, hidden_size=768, num_attention_heads=12,
            num_key_value_heads=4, intermediate_size=2048, vocab_size=32000,
            max_position_embeddings=2048),
    }


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def _once(fn, device) -> float:
    """Seconds one call takes (a run too long to repeat)."""
    _sync(device)
    t0 = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - t0


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _peak_cpu(fn) -> float | None:
    """MiB the resident set grows by while `fn` runs, sampled every millisecond by a thread
    (freed heap is handed back to the system first, so that runs do not hide each other);
    None where there is no /proc."""
    if not os.path.exists("/proc/self/statm"):
        return None
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    base = peak = _rss()
    done = threading.Event()

    def sample():
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _rss())
            time.sleep(0.001)

    watcher = threading.Thread(target=sample, daemon=True)
    watcher.start()
    try:
        fn()
    finally:
        done.set()
        watcher.join()
    return (max(peak, _rss()) - base) / 2**20


def _peak(fn, device) -> float | None:
    if device.type != "cuda":
        return _peak_cpu(fn)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - base) / 2**20


_LOAD = """
import sys, torch
torch.set_num_threads(1)
import attnlab as al, transformers as hf
hf.logging.set_verbosity_error()

def status(key):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(key + ":"))

base = status("VmRSS")
with open("/proc/self/clear_refs", "w") as f:       # the peak (VmHWM) back to the current RSS
    f.write("5")
m = al.from_pretrained(sys.argv[2]) if sys.argv[1] == "attnlab" else \\
    hf.AutoModelForCausalLM.from_pretrained(sys.argv[2])
print((status("VmHWM") - base) / 1024)
"""


def load_peak(folder, which: str) -> float | None:
    """MiB the peak resident set grows by while `which` loads the saved folder, in a fresh
    process (so that nothing read before counts): the kernel's peak (VmHWM) is reset once the
    libraries are imported (their own peak would hide a smaller load), then read after the
    load. None off Linux."""
    import subprocess
    if sys.platform != "linux":
        return None
    out = subprocess.run([sys.executable, "-c", _LOAD, which, str(folder)], check=True,
                         capture_output=True, text=True, env={**os.environ,
                                                              "PYTHONPATH": str(HERE.parent)})
    return float(out.stdout.strip().splitlines()[-1])


def recompute(net, prompt, n):
    """Greedy decoding without a cache: the whole prefix through the network for each token."""
    ids = prompt
    for _ in range(n):
        nxt = net(ids)[:, -1].argmax(-1, keepdim=True)
        ids = torch.cat([ids, nxt], 1)
    return ids[:, prompt.shape[1]:]


def measure(name, config, device, T, n_new, repeats):
    import transformers as hf
    torch.manual_seed(0)
    model = hf.AutoModelForCausalLM.from_config(config).eval()
    with tempfile.TemporaryDirectory() as d:
        model.save_pretrained(d)
        net = al.from_pretrained(d)
        weights = sum(f.stat().st_size for f in Path(d).glob("*.safetensors")) / 2**20
        m_load = {k: load_peak(d, k) for k in ("transformers", "attnlab")}
    model, net = model.to(device), net.to(device).eval()
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, config.vocab_size, (1, T), generator=g).to(device)
    prompt = ids[:, :16]

    with torch.inference_mode():
        ref = model(ids).logits
        got = net(ids)
        diff = (got - ref).abs().max().item() / ref.abs().max().item()
        if diff > 1e-4:
            raise SystemExit(f"{name}: logits differ by {diff:.2e} of their largest magnitude")
        hf_generate = dict(attention_mask=torch.ones_like(prompt), max_new_tokens=n_new,
                           do_sample=False, eos_token_id=None, pad_token_id=0)
        hf_tokens = model.generate(prompt, **hf_generate)[:, 16:]
        al_tokens = al.generate(net, start=prompt, max_new_tokens=n_new).tokens
        same = int(hf_tokens.shape == al_tokens.shape and
                   bool((hf_tokens.cpu() == al_tokens.cpu()).all()))

        fwd = {"transformers": lambda: model(ids).logits, "attnlab": lambda: net(ids)}
        dec = {"transformers": lambda: model.generate(prompt, **hf_generate),
               "attnlab": lambda: al.generate(net, start=prompt, max_new_tokens=n_new)}
        sync = torch.cuda.synchronize if device.type == "cuda" else None
        t_fwd = interleaved_samples(fwd, 1, repeats, sync=sync)
        t_dec = interleaved_samples(dec, 1, repeats, sync=sync)
        t_re = _once(lambda: recompute(net, prompt, n_new), device)
        m_fwd = _peaks(fwd, device)
        m_dec = _peaks(dec, device)
    return dict(name=name, diff=diff, same=same, fwd=t_fwd, dec=t_dec, recompute=t_re,
                m_fwd=m_fwd, m_dec=m_dec, weights=weights, m_load=m_load)


def _peaks(fns: dict, device, rounds: int = 3) -> dict:
    """The median peak of each function over `rounds` alternating runs."""
    got: dict = {k: [] for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            got[k].append(_peak(fn, device))
    return {k: None if None in v else statistics.median(v) for k, v in got.items()}


def _mib(x):
    return "–" if x is None else f"{x:.1f} MiB"


def report(rows, device, T, n_new, repeats, load) -> str:
    dev = torch.cuda.get_device_name() if device.type == "cuda" else machine()
    lines = ["## Checkpoints against transformers (`benchmarks/checkpoints.py`)", "",
             f"{time.strftime('%Y-%m-%d')} · {dev} · transformers "
             f"{__import__('transformers').__version__} · float32 · random weights, the same "
             f"in both · {repeats} interleaved rounds after a warm-up (transformers, then "
             "attnlab, in each). Times: median (fastest). Ratio = transformers' time / "
             "attnlab's in the same round (above 1: attnlab faster): median (range), and the "
             "ratio of the two median times (under load the two can disagree: a round's two "
             "runs share its load, the medians come from different rounds).", "",
             load_note(*load) if device.type != "cuda" else "", "",
             f"| model | forward B1×T{T}: transformers | attnlab | ratio | greedy {n_new} "
             "tokens after 16: transformers | attnlab | ratio | attnlab recomputing the "
             "prefix (once) | cache speed-up | logits diff | same tokens |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    mem = ["", "Memory: the growth of the resident set (on a GPU: allocated memory) while each "
           "runs, median of 3 alternating runs; loading (`from_pretrained`) in a fresh process "
           "each, the growth of its peak resident set while the folder is read. Both map the "
           "file, so the first run touches the weights' pages; the runs measured come after "
           "it. Ratio = attnlab / transformers (below 1: attnlab uses less).", "",
             "| model | weights | load peak: transformers | attnlab | ratio | attnlab / "
             f"weights | forward T{T}: transformers | attnlab | ratio | greedy decoding: "
             "transformers | attnlab | ratio |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        f, d = r["fwd"], r["dec"]
        lines.append(
            f"| {r['name']} | {_ms(f['transformers'])} | {_ms(f['attnlab'])} | "
            f"{_spread(f)} | {_ms(d['transformers'])} | {_ms(d['attnlab'])} | "
            f"{_spread(d)} | {r['recompute'] * 1e3:.0f} ms | "
            f"{r['recompute'] / statistics.median(d['attnlab']):.1f}× | "
            f"{r['diff']:.1e} | {'yes' if r['same'] else 'no'} |")
        ld, mf, md = r["m_load"], r["m_fwd"], r["m_dec"]
        mem.append(
            f"| {r['name']} | {r['weights']:.0f} MiB | {_mib(ld['transformers'])} | "
            f"{_mib(ld['attnlab'])} | {_ratio(ld['attnlab'], ld['transformers'])} | "
            f"{_ratio(ld['attnlab'], r['weights'])} | {_mib(mf['transformers'])} | "
            f"{_mib(mf['attnlab'])} | {_ratio(mf['attnlab'], mf['transformers'])} | "
            f"{_mib(md['transformers'])} | {_mib(md['attnlab'])} | "
            f"{_ratio(md['attnlab'], md['transformers'])} |")
    return "\n".join(lines + mem)


def _ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1e3:.0f} ms ({min(samples) * 1e3:.0f})"


def _spread(samples: dict) -> str:
    med, lo, hi = ratio_spread(samples["transformers"], samples["attnlab"])
    of_medians = statistics.median(samples["transformers"]) / statistics.median(
        samples["attnlab"])
    return f"{med:.2f}× ({lo:.2f}–{hi:.2f}; of the medians {of_medians:.2f}×)"


def _ratio(a, b):
    return "–" if a is None or not b else f"{a / b:.2f}×"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--smoke", action="store_true", help="tiny sizes on the CPU; writes nothing")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: "
                    "torch's); 1 keeps rounds steadier where other processes share the cores")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)     # 1 on a loaded machine: steadier rounds
    device = torch.device("cpu" if args.smoke else args.device)
    T, n_new = (24, 6) if args.smoke else (512, 128)
    repeats = 1 if args.smoke else args.repeats
    before = load_average()
    rows = [measure(name, cfg, device, T, n_new, repeats)
            for name, cfg in configs(args.smoke).items()]
    text = report(rows, device, T, n_new, repeats, (before, load_average()))
    print(text)
    if not args.smoke:
        write_section("checkpoints", text)
    return rows


if __name__ == "__main__":
    main()
