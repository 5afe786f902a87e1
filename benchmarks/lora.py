"""One LoRA fine-tuning step, attnlab's `net.add_lora` against `peft` + `transformers`.

A GPT-2-small-shaped random model (12 layers, 768 channels, 12 heads, 50257 tokens, dropout 0)
is built by `transformers`, saved in the Hugging Face layout and read back with
`al.from_pretrained`. attnlab adapts the query and value projections with rank 8 (alpha 16);
`peft` adapts GPT-2's fused `c_attn` (query, key and value in one matrix, the only way it can
reach GPT-2's query) with rank 8, its usual GPT-2 setup. Each side then runs the same step on
the same batch (B4×T128, next-token cross-entropy, AdamW over the adapters only): forward,
backward, optimizer step. The first losses are compared (the adapters' B starts at zero, so
both are the base model's loss), then the steps are timed in interleaved rounds and the peak
resident memory of a step is measured in alternating runs.

`--smoke` runs a tiny model, one round, and writes nothing (the suite runs it).
Needs the `hf` extra (transformers, peft).
"""
from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import attnlab as al                                                  # noqa: E402
from _common import (bench_main, interleaved_samples, load_note, machine,  # noqa: E402
                     ratio_cells)
from checkpoints import _peaks                                        # noqa: E402


def sizes(smoke: bool) -> dict:
    if smoke:
        return dict(n=2, h=32, heads=4, vocab=97, B=2, T=12)
    return dict(n=12, h=768, heads=12, vocab=50257, B=4, T=128)


def next_token_loss(logits, ids):
    return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))


def contenders(smoke: bool):
    import peft
    import transformers as hf
    hf.logging.set_verbosity_error()
    hf.utils.logging.disable_progress_bar()
    z = sizes(smoke)
    torch.manual_seed(0)
    config = hf.GPT2Config(n_layer=z["n"], n_embd=z["h"], n_head=z["heads"], vocab_size=z["vocab"],
                           n_positions=max(256, z["T"]), resid_pdrop=0.0, embd_pdrop=0.0,
                           attn_pdrop=0.0)
    model = hf.GPT2LMHeadModel(config)
    with tempfile.TemporaryDirectory() as d:
        model.save_pretrained(d)
        net = al.from_pretrained(d)
    net.add_lora(["h.*.attn/query", "h.*.attn/value"], rank=8, alpha=16)
    theirs = peft.get_peft_model(model, peft.LoraConfig(r=8, lora_alpha=16, target_modules=["c_attn"],
                                                        fan_in_fan_out=True, lora_dropout=0.0))
    net.train()
    theirs.train()
    ids = torch.randint(0, z["vocab"], (z["B"], z["T"]), generator=torch.Generator().manual_seed(1))
    opts = {"attnlab": torch.optim.AdamW([p for p in net.parameters() if p.requires_grad], lr=1e-4),
            "peft": torch.optim.AdamW([p for p in theirs.parameters() if p.requires_grad], lr=1e-4)}
    trained = {"attnlab": sum(p.numel() for p in net.parameters() if p.requires_grad),
               "peft": sum(p.numel() for p in theirs.parameters() if p.requires_grad)}

    def step_ours():
        loss = next_token_loss(net(ids), ids)
        loss.backward()
        opts["attnlab"].step()
        opts["attnlab"].zero_grad(set_to_none=True)
        return loss.detach()

    def step_theirs():
        loss = next_token_loss(theirs(input_ids=ids).logits, ids)
        loss.backward()
        opts["peft"].step()
        opts["peft"].zero_grad(set_to_none=True)
        return loss.detach()

    return step_theirs, step_ours, trained


def measure(smoke: bool, rounds: int) -> dict:
    step_theirs, step_ours, trained = contenders(smoke)
    first = (float(step_theirs()), float(step_ours()))          # B = 0: the base model's loss
    samples = interleaved_samples({"peft": step_theirs, "attnlab": step_ours}, iters=1, repeats=rounds)
    peaks = _peaks({"peft": step_theirs, "attnlab": step_ours}, torch.device("cpu"),
                   rounds=1 if smoke else 3)
    return dict(first=first, samples=samples, peaks=peaks, trained=trained)


def report(r: dict, before, after, rounds: int, smoke: bool) -> str:
    z = sizes(smoke)
    s = r["samples"]
    per_round, of_medians = ratio_cells(s["peft"], s["attnlab"])
    mp, ma = statistics.median(s["peft"]), statistics.median(s["attnlab"])
    pp, pa = r["peaks"]["peft"], r["peaks"]["attnlab"]
    mem = "–" if pp is None or pa is None else f"{pa / pp:.2f}×"
    mib = "–" if pp is None or pa is None else f"{pp:.0f} / {pa:.0f} MiB"
    return "\n".join([
        "## One LoRA fine-tuning step against peft (`benchmarks/lora.py`)", "",
        f"{machine()} · float32 · GPT-2-small-shaped random weights ({z['n']} layers, {z['h']} "
        f"channels, {z['vocab']} tokens), the same in both · B{z['B']}×T{z['T']}, next-token "
        "cross-entropy, AdamW over the adapters · attnlab: rank 8 on query and value; peft: rank "
        "8 on GPT-2's fused c_attn (its usual setup: peft cannot adapt the query alone) · "
        f"{rounds} interleaved rounds after a warm-up; ratio = peft's time / attnlab's (above 1: "
        "attnlab faster); peak = the resident set's growth during one step, the median of "
        "alternating runs.", "", load_note(before, after), "",
        "| step | peft median | attnlab median | ratio (range) | ratio of the medians | peak "
        "memory peft / attnlab | attnlab ÷ peft memory | trained values peft / attnlab | "
        "first loss peft / attnlab |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| forward + backward + AdamW | {mp * 1e3:.0f} ms | {ma * 1e3:.0f} ms | {per_round} | "
        f"{of_medians} | {mib} | {mem} | {r['trained']['peft']:,} / "
        f"{r['trained']['attnlab']:,} | {r['first'][0]:.6f} / {r['first'][1]:.6f} |"])


def main(argv=None):
    return bench_main("lora", __doc__, measure, report, 5, argv)


if __name__ == "__main__":
    main()
