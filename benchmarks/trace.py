"""What looking inside costs: `net.trace` against a plain forward.

A 4-layer GPT-2-shaped random model (768 channels, 12 heads, 50257 tokens, dropout 0) is
built by `transformers`, saved in the Hugging Face layout and read back with
`al.from_pretrained`. Three contenders run the same batch without gradients: the plain
forward `net(input_ids=ids)`; `net.trace(..., capture=["*/scores"])`, the weights of every
attention layer (the explicit attention path in every layer instead of the fused kernel);
and `capture=["*"]`, every value the network offers (each layer's output and each attention
layer's query, key, scores and heads). Before timing, the traced outputs are compared with
the plain forward's. Times are medians of interleaved rounds; the goal is the scores of
every attention layer within 1.5× a plain forward. One causal self-attention layer of the
same shape, alone, is timed the same way (a module with and without a probe asking for its
scores): the worst case, where nothing else in the network hides the explicit path's cost.

`--smoke` runs a tiny model, one round, and writes nothing (the suite runs it).
Needs the `hf` extra (transformers).
"""
from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import attnlab as al                                                  # noqa: E402
from _common import (bench_main, interleaved_samples, load_note, machine,  # noqa: E402
                     ratio_cells)

GOAL = 1.5          # the scores of every attention layer: at most this × a plain forward


def sizes(smoke: bool) -> dict:
    if smoke:
        return dict(n=2, h=32, heads=4, vocab=97, B=1, lengths=(8,))
    return dict(n=4, h=768, heads=12, vocab=50257, B=1, lengths=(128, 512))


def network(smoke: bool):
    import transformers as hf
    hf.logging.set_verbosity_error()
    hf.utils.logging.disable_progress_bar()
    z = sizes(smoke)
    torch.manual_seed(0)
    config = hf.GPT2Config(n_layer=z["n"], n_embd=z["h"], n_head=z["heads"],
                           vocab_size=z["vocab"], n_positions=max(z["lengths"]),
                           resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    with tempfile.TemporaryDirectory() as d:
        hf.GPT2LMHeadModel(config).save_pretrained(d)
        return al.from_pretrained(d).eval()


def contenders(net, ids) -> dict:
    def plain():
        return net(input_ids=ids)

    def scores():
        return net.trace(input_ids=ids, capture=["*/scores"])

    def everything():
        return net.trace(input_ids=ids, capture=["*"])
    return {"forward": plain, "scores": scores, "all": everything}


def layer_contenders(z: dict, t: int) -> dict:
    """One causal self-attention layer alone: plain, and with a probe asking for its scores."""
    from attnlab.functional.modules import SelfAttentionModule
    from attnlab.functional.probe import Probe
    torch.manual_seed(0)
    m = SelfAttentionModule(z["h"], z["heads"], z["h"], attention_mask="causal").eval()
    x = torch.randn(z["B"], t, z["h"])

    def plain():
        m.probe = None
        return m(x)

    def scores():
        m.probe = Probe(capture=("scores",))
        return m(x)
    return {"forward": plain, "scores": scores}


def measure(smoke: bool, rounds: int) -> list[dict]:
    net = network(smoke)
    z = sizes(smoke)
    rows = []
    for t in z["lengths"]:
        ids = torch.randint(0, z["vocab"], (z["B"], t), generator=torch.Generator().manual_seed(1))
        fns = contenders(net, ids)
        layer = layer_contenders(z, t)
        with torch.no_grad():
            ref = fns["forward"]()
            traced = {k: fns[k]() for k in ("scores", "all")}
            diff = max(float((tr.outputs - ref).abs().max()) for tr in traced.values())
            diff_layer = float((layer["scores"]() - layer["forward"]()).abs().max())
            counts = {k: len(tr) for k, tr in traced.items()}
            samples = interleaved_samples(fns, iters=1, repeats=rounds)
            alone = interleaved_samples(layer, iters=3, repeats=rounds)
        rows.append(dict(T=t, diff=diff, counts=counts, samples=samples, layer=alone,
                         diff_layer=diff_layer))
    return rows


def report(rows: list[dict], before, after, rounds: int, smoke: bool) -> str:
    z = sizes(smoke)
    lines = [
        "## Looking inside: `net.trace` against a plain forward (`benchmarks/trace.py`)", "",
        f"{machine()} · float32, no gradients · GPT-2-shaped random weights ({z['n']} layers, "
        f"{z['h']} channels, {z['heads']} heads, {z['vocab']} tokens) read with "
        f"`al.from_pretrained` · B{z['B']} · {rounds} interleaved rounds after a warm-up; "
        "ratio = the trace's time / the plain forward's (the goal for `*/scores`: at most "
        f"{GOAL}×). `*/scores` takes the explicit attention path in every layer (the fused "
        "kernel cannot give the weights); `*` keeps every value the network offers.", "",
        load_note(before, after), "",
        "| T | capture | values kept | median | ratio (range) | ratio of the medians | "
        "largest output difference |",
        "|---|---|---|---|---|---|---|"]
    for r in rows:
        s = r["samples"]
        lines.append(f"| {r['T']} | (plain forward) | 0 | "
                     f"{statistics.median(s['forward']) * 1e3:.1f} ms | 1 | 1 | – |")
        for key, label in (("scores", "`*/scores`"), ("all", "`*`")):
            per_round, of_medians = ratio_cells(s[key], s["forward"])
            lines.append(f"| {r['T']} | {label} | {r['counts'][key]} | "
                         f"{statistics.median(s[key]) * 1e3:.1f} ms | {per_round} | "
                         f"{of_medians} | {r['diff']:.1e} |")
        a = r["layer"]
        per_round, of_medians = ratio_cells(a["scores"], a["forward"])
        lines.append(f"| {r['T']} | one attention layer alone: plain | 0 | "
                     f"{statistics.median(a['forward']) * 1e3:.1f} ms | 1 | 1 | – |")
        lines.append(f"| {r['T']} | one attention layer alone: its scores | 1 | "
                     f"{statistics.median(a['scores']) * 1e3:.1f} ms | {per_round} | "
                     f"{of_medians} | {r['diff_layer']:.1e} |")
    return "\n".join(lines)


def main(argv=None):
    return bench_main("trace", __doc__, measure, report, 7, argv)


if __name__ == "__main__":
    main()
