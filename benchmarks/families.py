"""The forward pass of every family `al.from_pretrained` reads, against `transformers`.

For each family with a `transformers` counterpart (gpt2, llama, mistral, bert, vit, t5, qwen2,
qwen3, gemma, gemma2, phi3, gpt_neox, opt, mixtral, roberta, distilbert) a tiny but not
trivial random model (4 layers, 256 channels, 4 heads, 2 key/value heads where the family
has them, 1024 inner channels, 4096 tokens) is built by `transformers` from its config, saved
in the Hugging Face layout and read back with `al.from_pretrained`. Then, in one run: the
outputs are compared (logits within 1e-4 of their largest magnitude), and the forward pass at
B1×T128 (ViT: a 96×96 image in 8×8 patches, 145 tokens; T5: 128 encoder and 128 decoder
tokens) is timed in interleaved rounds, transformers then attnlab in each round.

`--smoke` runs every family at tiny sizes, one round, and writes nothing (the suite runs it).
Needs the `hf` extra (transformers).
"""
from __future__ import annotations

import argparse
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
from _common import (interleaved_samples, load_average, load_note, machine,  # noqa: E402
                     ratio_cells, write_section)

T = 128


def sizes(smoke: bool) -> dict:
    if smoke:
        return dict(h=32, n=2, heads=4, kv=2, inner=64, vocab=97, image=16, T=12)
    return dict(h=256, n=4, heads=4, kv=2, inner=1024, vocab=4096, image=96, T=T)


def families(smoke: bool) -> dict:
    """family → (its config, the transformers class, the kind of input)."""
    import transformers as hf
    hf.logging.set_verbosity_error()
    hf.utils.logging.disable_progress_bar()
    z = sizes(smoke)
    h, n, heads, kv, inner, vocab = z["h"], z["n"], z["heads"], z["kv"], z["inner"], z["vocab"]
    dec = dict(hidden_size=h, num_hidden_layers=n, num_attention_heads=heads,
               num_key_value_heads=kv, intermediate_size=inner, vocab_size=vocab,
               max_position_embeddings=512, pad_token_id=0)
    enc = dict(hidden_size=h, num_hidden_layers=n, num_attention_heads=heads,
               intermediate_size=inner, vocab_size=vocab, max_position_embeddings=514)
    return {
        "gpt2": (hf.GPT2Config(n_layer=n, n_embd=h, n_head=heads, n_inner=inner,
                               vocab_size=vocab, n_positions=512), "GPT2LMHeadModel", "ids"),
        "llama": (hf.LlamaConfig(**dec), "LlamaForCausalLM", "ids"),
        "mistral": (hf.MistralConfig(**dec), "MistralForCausalLM", "ids"),
        "qwen2": (hf.Qwen2Config(**dec), "Qwen2ForCausalLM", "ids"),
        "qwen3": (hf.Qwen3Config(**dec, head_dim=h // heads), "Qwen3ForCausalLM", "ids"),
        "gemma": (hf.GemmaConfig(**dec, head_dim=h // heads), "GemmaForCausalLM", "ids"),
        "gemma2": (hf.Gemma2Config(**dec, head_dim=h // heads), "Gemma2ForCausalLM", "ids"),
        "phi3": (hf.Phi3Config(**dec), "Phi3ForCausalLM", "ids"),
        "gpt_neox": (hf.GPTNeoXConfig(hidden_size=h, num_hidden_layers=n,
                                      num_attention_heads=heads, intermediate_size=inner,
                                      vocab_size=vocab, max_position_embeddings=512),
                     "GPTNeoXForCausalLM", "ids"),
        "opt": (hf.OPTConfig(hidden_size=h, num_hidden_layers=n, num_attention_heads=heads,
                             ffn_dim=inner, vocab_size=vocab, max_position_embeddings=512,
                             word_embed_proj_dim=h), "OPTForCausalLM", "ids"),
        "mixtral": (hf.MixtralConfig(**dec, num_local_experts=4, num_experts_per_tok=2),
                    "MixtralForCausalLM", "ids"),
        "bert": (hf.BertConfig(**enc), "BertForMaskedLM", "ids"),
        "roberta": (hf.RobertaConfig(**enc, pad_token_id=1), "RobertaForMaskedLM", "ids"),
        "distilbert": (hf.DistilBertConfig(dim=h, n_layers=n, n_heads=heads, hidden_dim=inner,
                                           vocab_size=vocab, max_position_embeddings=512),
                       "DistilBertForMaskedLM", "ids"),
        "vit": (hf.ViTConfig(hidden_size=h, num_hidden_layers=n, num_attention_heads=heads,
                             intermediate_size=inner, image_size=z["image"], patch_size=8,
                             num_labels=10), "ViTForImageClassification", "image"),
        "t5": (hf.T5Config(d_model=h, d_kv=h // heads, d_ff=inner, num_layers=n,
                           num_heads=heads, vocab_size=vocab, decoder_start_token_id=0),
               "T5ForConditionalGeneration", "seq2seq"),
    }


def inputs(kind: str, config, t: int) -> dict:
    """The forward arguments, by their Hugging Face names (attnlab's inputs have the same)."""
    g = torch.Generator().manual_seed(1)
    if kind == "image":
        return {"pixel_values": torch.randn(1, 3, config.image_size, config.image_size,
                                            generator=g)}
    # ids from 3 on: no padding id (RoBERTa counts positions past its padding id 1)
    ids = {"input_ids": torch.randint(3, config.vocab_size, (1, t), generator=g)}
    if kind == "seq2seq":
        ids["decoder_input_ids"] = torch.randint(3, config.vocab_size, (1, t), generator=g)
    return ids


def _logits(out):
    return out["logits"] if isinstance(out, dict) else out


def measure(family, config, cls, kind, t, rounds, iters) -> dict:
    import transformers as hf
    torch.manual_seed(0)
    model = getattr(hf, cls)(config).eval()
    with tempfile.TemporaryDirectory() as d:
        model.save_pretrained(d)
        net = al.from_pretrained(d).eval()
    xs = inputs(kind, config, t)
    with torch.inference_mode():
        ref = model(**xs).logits
        got = _logits(net(xs if len(xs) > 1 else next(iter(xs.values()))))
        diff = ((got - ref).abs().max() / ref.abs().max()).item()
        one = next(iter(xs.values()))
        fns = {"transformers": lambda: model(**xs).logits,
               "attnlab": (lambda: net(xs)) if len(xs) > 1 else (lambda: net(one))}
        samples = interleaved_samples(fns, iters, rounds)
    tokens = (config.image_size // 8) ** 2 + 1 if kind == "image" else t
    row = dict(family=family, cls=cls, diff=diff, samples=samples, tokens=tokens, kind=kind)
    if cls.endswith(("ForCausalLM", "LMHeadModel", "ForConditionalGeneration")):
        row.update(decode(model, net, kind, config, rounds, iters))
    return row


def decode(model, net, kind, config, rounds, iters, prompt=16, new=32) -> dict:
    """Greedy decoding of `new` tokens after a prompt (T5: after an encoder input of that
    length), no stop id on either side; the tokens are compared first."""
    ids = torch.randint(3, config.vocab_size, (1, prompt), generator=torch.Generator().manual_seed(2))
    hf_kw = dict(max_new_tokens=new, min_new_tokens=new, do_sample=False, eos_token_id=None,
                 pad_token_id=0, attention_mask=torch.ones_like(ids))

    def hf_call():
        with torch.no_grad():
            out = model.generate(ids, **hf_kw)
        return out[:, 1:] if kind == "seq2seq" else out[:, prompt:]

    def ours_call():
        if kind == "seq2seq":
            return al.generate(net, 0, new, static_inputs={"input_ids": ids}, stop=None).tokens
        return al.generate(net, ids, new, stop=None).tokens

    same = torch.equal(hf_call(), ours_call())
    dec = interleaved_samples({"transformers": hf_call, "attnlab": ours_call}, iters, rounds)
    return dict(same=same, dec=dec)


def report(rows, before, after, rounds, iters) -> str:
    lines = ["## Every family's forward pass against transformers (`benchmarks/families.py`)",
             "",
             f"{time.strftime('%Y-%m-%d')} · {machine()} · transformers "
             f"{__import__('transformers').__version__} · float32 · random weights, the same "
             f"in both · B1, T{T} (ViT: 145 patch tokens; T5: {T} encoder + {T} decoder "
             f"tokens) · 4 layers, 256 channels, 4 heads (2 key/value heads where the family "
             f"has them), 1024 inner channels, 4096 tokens · {rounds} interleaved rounds of "
             f"{iters} calls each after a warm-up; ratio = transformers' time / attnlab's in "
             "the same round (above 1: attnlab faster), median and range over the rounds.",
             "", load_note(before, after), "",
             "Greedy decoding (causal LMs and T5): a 16-token prompt (T5: encoder input), 32 "
             "new tokens, no stop id on either side, the tokens compared first.", "",
             "| family | transformers class | transformers median (fastest) | attnlab median "
             "(fastest) | ratio (range) | ratio of the medians | logits diff | decode 32 "
             "tokens: ratio (range) | same tokens |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        s = r["samples"]
        cells = [f"{statistics.median(s[k]) * 1e3:.1f} ms ({min(s[k]) * 1e3:.1f})"
                 for k in ("transformers", "attnlab")]
        per_round, of_medians = ratio_cells(s["transformers"], s["attnlab"])
        dec, same = "–", "–"
        if "dec" in r:
            dec = ratio_cells(r["dec"]["transformers"], r["dec"]["attnlab"])[0]
            same = "yes" if r["same"] else "NO"
        lines.append(f"| {r['family']} | `{r['cls']}` | {cells[0]} | {cells[1]} | "
                     f"{per_round} | {of_medians} | {r['diff']:.1e} | {dec} | {same} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, one round; writes nothing")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--only", nargs="*", help="these families only (still written)")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: "
                    "torch's); 1 keeps rounds steadier where other processes share the cores")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)     # 1 on a loaded machine: steadier rounds
    rounds, iters = (1, 1) if args.smoke else (args.rounds, args.iters)
    before = load_average()
    rows = []
    for family, (config, cls, kind) in families(args.smoke).items():
        if args.only and family not in args.only:
            continue
        rows.append(measure(family, config, cls, kind, sizes(args.smoke)["T"], rounds, iters))
        print(family, f"{rows[-1]['diff']:.1e}", flush=True)
    text = report(rows, before, load_average(), rounds, iters)
    print(text)
    if not args.smoke:
        write_section("families", text)
    return rows


if __name__ == "__main__":
    main()
