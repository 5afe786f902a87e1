"""Graph overhead: an attnlab Network against hand-written torch modules with the same weights,
forward + backward, in one run.

1. 24 tiny layers (12 Dense(16) + 12 ReLU) on B8×16: nearly all time is per-layer overhead.
2. The seed-1 answer network (LSTM encoder/decoder, cross-attention), B16, decoder 7, encoder 11.

Ratio = attnlab time / hand-written time (≤ 1.05 is the target).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import attnlab as al                     # noqa: E402
from attnlab import layers as L          # noqa: E402
from _common import interleaved, machine, write_section   # noqa: E402
from attnlab.cli.demos.seed1 import answer_network   # noqa: E402


class HandMLP(nn.Module):
    def __init__(self, width, depth):
        super().__init__()
        self.fcs = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        self.relu = nn.ReLU()

    def forward(self, x):
        for fc in self.fcs:
            x = self.relu(fc(x))
        return x


class HandSeed1(nn.Module):
    """The seed-1 answer written by hand, as a PyTorch user would."""

    def __init__(self, hidden=64, channels=256, heads=8):
        super().__init__()
        self.heads = heads
        self.lstm_dec = nn.LSTM(1, hidden, batch_first=True)
        self.norm_dec = nn.LayerNorm(hidden)
        self.query = nn.Linear(hidden, channels)
        self.lstm_enc = nn.LSTM(1, hidden, batch_first=True)
        self.norm_enc = nn.LayerNorm(hidden)
        self.key = nn.Linear(hidden, channels)
        self.value = nn.Linear(hidden, channels)

    def forward(self, xd, xe):
        q = self.query(self.norm_dec(self.lstm_dec(xd)[0]))
        kv = self.norm_enc(self.lstm_enc(xe)[0])
        k, v = self.key(kv), self.value(kv)
        b, tq, c = q.shape
        h = self.heads
        q = q.view(b, tq, h, c // h).transpose(1, 2)           # B×H×Tq×dk
        k = k.view(b, -1, h, c // h).transpose(1, 2)           # B×H×Tk×dk
        v = v.view(b, -1, h, c // h).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v)             # B×H×Tq×dk
        return y.transpose(1, 2).reshape(b, tq, c)              # B×Tq×C


def mlp_pair(width=16, depth=12):
    layers = [L.FeatureInput(width, name="x")]
    for i in range(depth):
        layers += [L.Dense(width, name=f"fc{i}"), L.ReLU(name=f"relu{i}")]
    net = al.Network(layers).initialize()
    hand = HandMLP(width, depth)
    with torch.no_grad():
        for i, fc in enumerate(hand.fcs):
            fc.weight.copy_(net.learnables[f"fc{i}/weight"])
            fc.bias.copy_(net.learnables[f"fc{i}/bias"])
    return net, hand


def seed1_pair():
    net = answer_network()
    net.initialize()
    hand = HandSeed1()
    pairs = {"lstm_dec": "lstm-decoder", "norm_dec": "layernorm-decoder", "query": "query",
             "lstm_enc": "lstm-encoder", "norm_enc": "key-value", "key": "fc-key", "value": "fc-value"}
    with torch.no_grad():
        for attr, layer in pairs.items():
            for pname, p in getattr(hand, attr).named_parameters():
                p.copy_(net.learnables[f"{layer}/{pname}"])
    return net, hand


def step(model, params, *xs):
    def run():
        for p in params:
            p.grad = None
        model(*xs).sum().backward()
    return run


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    torch.set_num_threads(2)
    torch.manual_seed(0)
    repeats = 7 if args.quick else 21
    rows = []

    net, hand = mlp_pair()
    x = torch.randn(8, 16)
    torch.testing.assert_close(net(x), hand(x))
    t = interleaved({"attnlab": step(net, list(net.parameters()), x),
                     "hand": step(hand, list(hand.parameters()), x)}, iters=200, repeats=repeats)
    rows.append(("24 tiny layers (12 Dense + 12 ReLU), B8×16", t))

    net, hand = seed1_pair()
    xd, xe = torch.randn(16, 7, 1), torch.randn(16, 11, 1)
    torch.testing.assert_close(net(xd, xe), hand(xd, xe), atol=1e-5, rtol=1e-5)
    t = interleaved({"attnlab": step(net, list(net.parameters()), xd, xe),
                     "hand": step(hand, list(hand.parameters()), xd, xe)}, iters=30, repeats=repeats)
    rows.append(("seed-1 answer (LSTM enc/dec + cross-attention), B16, Tq7, Tk11", t))

    lines = ["## Graph overhead (`benchmarks/overhead.py`)", "",
             f"Forward + backward, median of {repeats} interleaved runs; {machine()}.",
             "Same weights in both; outputs checked equal first.", "",
             "| network | attnlab | hand-written torch | ratio |", "|---|---|---|---|"]
    for name, t in rows:
        lines.append(f"| {name} | {t['attnlab'] * 1e6:.0f} µs | {t['hand'] * 1e6:.0f} µs | "
                     f"{t['attnlab'] / t['hand']:.3f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    write_section("overhead", text)


if __name__ == "__main__":
    main()
