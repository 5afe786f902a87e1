"""Generating from a batch of 8 real prompts, `al.generate` against `transformers' generate`.

A GPT-2-shaped and a Llama-shaped random model (4 layers, 256 channels, 4096 tokens) are built
by `transformers`, saved in the Hugging Face layout and read back with `al.from_pretrained`.
Eight prompts of different lengths (7 to 30 tokens) are padded on the left with an
`attention_mask`, as a tokenizer pads them for generation, and each side generates 64 new
tokens (no stop id, so both run every step) three ways: greedy, sampling (temperature 0.8,
top_p 0.9, the same seed on both sides) and beam search (4 beams). The tokens are compared
first (they must be equal), then the calls are timed in interleaved rounds, transformers then
attnlab in each round.

`--smoke` runs tiny models, one round, and writes nothing (the suite runs it).
Needs the `hf` extra (transformers).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import attnlab as al                                                  # noqa: E402
from _common import (interleaved_samples, load_average, load_note, machine,  # noqa: E402
                     ratio_cells, write_section)

LENGTHS = (12, 30, 7, 22, 16, 9, 28, 19)
WAYS = {"greedy": dict(),
        "sample": dict(strategy="sample", temperature=0.8, top_p=0.9),
        "beam": dict(strategy="beam", num_beams=4)}


def sizes(smoke: bool) -> dict:
    if smoke:
        return dict(h=32, n=2, heads=4, kv=2, inner=64, vocab=97, new=6)
    return dict(h=256, n=4, heads=4, kv=2, inner=1024, vocab=4096, new=64)


def models(smoke: bool) -> dict:
    import transformers as hf
    hf.logging.set_verbosity_error()
    hf.utils.logging.disable_progress_bar()
    z = sizes(smoke)
    return {
        "GPT-2-shaped": hf.GPT2LMHeadModel(hf.GPT2Config(
            n_layer=z["n"], n_embd=z["h"], n_head=z["heads"], n_inner=z["inner"],
            vocab_size=z["vocab"], n_positions=256, pad_token_id=0, eos_token_id=None)),
        "Llama-shaped": hf.LlamaForCausalLM(hf.LlamaConfig(
            hidden_size=z["h"], num_hidden_layers=z["n"], num_attention_heads=z["heads"],
            num_key_value_heads=z["kv"], intermediate_size=z["inner"], vocab_size=z["vocab"],
            max_position_embeddings=256, pad_token_id=0, eos_token_id=None)),
    }


def prompts(vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Eight prompts padded on the left, and their attention mask (1 at real tokens)."""
    g = torch.Generator().manual_seed(0)
    t = max(LENGTHS)
    ids = torch.zeros(len(LENGTHS), t, dtype=torch.long)
    mask = torch.zeros(len(LENGTHS), t, dtype=torch.long)
    for i, n in enumerate(LENGTHS):
        ids[i, t - n:] = torch.randint(3, vocab, (n,), generator=g)
        mask[i, t - n:] = 1
    return ids, mask


def hf_arguments(way: dict, new: int) -> dict:
    out = dict(max_new_tokens=new, min_new_tokens=new, pad_token_id=0, eos_token_id=None,
               do_sample=way.get("strategy") == "sample", num_beams=way.get("num_beams", 1))
    out.update({k: v for k, v in way.items() if k in ("temperature", "top_p")})
    if out["do_sample"]:
        out["top_k"] = 50                        # transformers' default, which attnlab takes too
    return out


def measure(name, model, smoke, rounds, iters) -> list[dict]:
    z = sizes(smoke)
    model.eval()
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp)
        net = al.from_pretrained(tmp)
    ids, mask = prompts(z["vocab"])
    rows = []
    for way, kw in WAYS.items():
        theirs_kw = hf_arguments(kw, z["new"])

        def hf_call():
            torch.manual_seed(0)
            with torch.no_grad():
                return model.generate(ids, attention_mask=mask, **theirs_kw)[:, ids.shape[1]:]

        def ours_call():
            torch.manual_seed(0)
            return al.generate(net, ids, attention_mask=mask, max_new_tokens=z["new"],
                               stop=None, **kw).tokens

        same = torch.equal(hf_call(), ours_call())
        samples = interleaved_samples({"transformers": hf_call, "attnlab": ours_call},
                                      iters=iters, repeats=rounds)
        rows.append(dict(model=name, way=way, same=same, samples=samples))
        print(name, way, "same tokens" if same else "DIFFERENT TOKENS", flush=True)
    return rows


def report(rows, before, after, rounds, iters, new) -> str:
    lines = [
        "## Generating from a batch of prompts against transformers (`benchmarks/generation.py`)",
        "",
        f"{machine()} · float32 · random weights, the same in both · 8 prompts of "
        f"{min(LENGTHS)}–{max(LENGTHS)} tokens padded on the left with an attention_mask, "
        f"{new} new tokens each (no stop id) · 4 layers, 256 channels, 4 heads (Llama: 2 "
        f"key/value heads), 4096 tokens · {rounds} interleaved rounds of {iters} calls after a "
        "warm-up; ratio = transformers' time / attnlab's in the same round (above 1: attnlab "
        "faster), median and range over the rounds.", "", load_note(before, after), "",
        "| model | decoding | transformers median | attnlab median | ratio (range) | "
        "ratio of the medians | same tokens |",
        "|---|---|---|---|---|---|---|"]
    for r in rows:
        hf_t, ours_t = r["samples"]["transformers"], r["samples"]["attnlab"]
        per_round, of_medians = ratio_cells(hf_t, ours_t)
        mh, mo = statistics.median(hf_t), statistics.median(ours_t)
        lines.append(f"| {r['model']} | {r['way']} | {mh * 1e3:.0f} ms | {mo * 1e3:.0f} ms | "
                     f"{per_round} | {of_medians} | {'yes' if r['same'] else 'NO'} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--smoke", action="store_true", help="tiny models, one round; writes nothing")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=1)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args, _ = ap.parse_known_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    rounds, iters = (1, 1) if args.smoke else (args.rounds, args.iters)
    before = load_average()
    torch.manual_seed(0)
    rows = [row for name, model in models(args.smoke).items()
            for row in measure(name, model, args.smoke, rounds, iters)]
    text = report(rows, before, load_average(), rounds, iters, sizes(args.smoke)["new"])
    print(text)
    if not args.smoke:
        write_section("generation", text)
    return rows


if __name__ == "__main__":
    main()
