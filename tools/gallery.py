"""The pictures in docs/, made reproducibly: `python tools/gallery.py docs` (from the repository's
root, with attnlab installed). A tool of the repository, not part of the installed package.

- `seed1-answer.png`: the encoder–decoder of the seed-1 answer (cross-attention, ports labelled);
- `seed1-question.png`: the network of the seed-1 question, its cycle in red;
- `network-60.png`: a 64-layer transformer-style encoder (`transformer_network`), to show that
  big graphs stay readable;
- `network-60-lr.png`: two blocks of it drawn left to right;
- `attention-heads.png`: the weights of a two-head causal self-attention over a sentence
  (`attention_example`): one head matches equal words, the other looks one token back.
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

import torch


def transformer_network(blocks: int = 5, channels: int = 32, heads: int = 4):
    """A pre-norm transformer encoder written out layer by layer, MATLAB style: separate Dense
    layers make the query, key and value of an `Attention` layer, and `Addition` layers make the
    residual connections. 12 layers per block, plus input, embedding, pooling and head
    (64 layers for 5 blocks)."""
    import attnlab as al
    from attnlab import layers as L

    net = al.Network()
    net.add([L.SequenceInput(1, name="tokens"), L.Embedding(100, channels, name="embed")])
    prev = "embed"
    for b in range(1, blocks + 1):
        p = f"b{b}-"
        net.add([L.LayerNorm(name=p + "norm1"), L.Dense(channels, name=p + "query"),
                 L.Attention(heads, name=p + "attention")])
        net.connect(prev, p + "norm1")
        for part in ("key", "value"):
            net.add(L.Dense(channels, name=p + part))
            net.connect(p + "norm1", p + part)
            net.connect(p + part, f"{p}attention/{part}")
        net.add([L.Dense(channels, name=p + "proj"), L.Addition(2, name=p + "add1")])
        net.connect(p + "attention", p + "proj")
        net.disconnect(p + "proj", p + "add1/in1")
        net.connect(prev, p + "add1/in1")
        net.connect(p + "proj", p + "add1/in2")
        net.add([L.LayerNorm(name=p + "norm2"), L.Dense(4 * channels, name=p + "ffn1"),
                 L.GELU(name=p + "gelu"), L.Dense(channels, name=p + "ffn2"),
                 L.Addition(2, name=p + "add2")])
        net.connect(p + "add1", p + "norm2")
        net.disconnect(p + "ffn2", p + "add2/in1")
        net.connect(p + "add1", p + "add2/in1")
        net.connect(p + "ffn2", p + "add2/in2")
        prev = p + "add2"
    net.add([L.GlobalAvgPool1d(name="pool"), L.Dense(10, name="classes")])
    net.connect(prev, "pool")
    return net


def attention_example():
    """(weights 1×2×T×T, tokens): a causal two-head self-attention over a sentence, with
    hand-made queries and keys: head 0 attends to earlier copies of the same word, head 1 to
    the previous token."""
    from attnlab.functional import attention

    tokens = "the cat sat on the mat because the cat was tired".split()
    t, d = len(tokens), 16
    vocab = {w: i for i, w in enumerate(dict.fromkeys(tokens))}
    g = torch.Generator().manual_seed(3)
    words = torch.nn.functional.normalize(torch.randn(len(vocab), d, generator=g), dim=1)
    content = words[[vocab[w] for w in tokens]]                          # T×d
    pos = torch.arange(t, dtype=torch.float32)[:, None]
    freq = torch.exp(-math.log(30.0) * torch.arange(0, d, 2) / d)
    angle = pos * freq                                                   # T×d/2
    here = torch.cat([angle.sin(), angle.cos()], 1)
    back = torch.cat([(angle - freq).sin(), (angle - freq).cos()], 1)   # the position before
    q = torch.cat([content * 4.0, back * 3.6], 1)[None]                 # 1×T×2d: two heads
    k = torch.cat([content * 4.0, here * 3.6], 1)[None]
    _, w = attention(q, k, k, num_heads=2, attention_mask="causal", need_weights=True)
    return w, tokens


def main(out="docs") -> list[Path]:
    import matplotlib
    matplotlib.use("Agg")
    from attnlab.cli.demos.seed1 import answer_network, question_network
    from attnlab.viz.attention import plot_attention

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = []

    def keep(p):
        written.append(p)
        print(f"wrote {p}")

    answer_network().plot(out / "seed1-answer.png", dpi=130)
    keep(out / "seed1-answer.png")
    question_network().plot(out / "seed1-question.png", dpi=130)
    keep(out / "seed1-question.png")
    big = transformer_network()
    big.plot(out / "network-60.png", dpi=100)
    keep(out / "network-60.png")
    transformer_network(blocks=2).plot(out / "network-60-lr.png", direction="LR", sizes=False,
                                       dpi=100)
    keep(out / "network-60-lr.png")
    w, tokens = attention_example()
    plot_attention(w, tokens, tokens, path=out / "attention-heads.png",
                   title="causal self-attention: head 0 matches words, head 1 looks one back")
    keep(out / "attention-heads.png")
    return written


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs")
