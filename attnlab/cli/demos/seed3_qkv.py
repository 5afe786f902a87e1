"""Seed 3 — Trax's AttentionQKV: "what is the purpose of the three parallel dense layers?"

    def AttentionQKV(d_feature, n_heads=1, dropout=0.0, mode='train'):
      return cb.Serial(
          cb.Parallel(core.Dense(d_feature), core.Dense(d_feature), core.Dense(d_feature)),
          PureAttention(n_heads=n_heads, dropout=dropout, mode=mode),
          core.Dense(d_feature))

The three Dense layers are the learned query, key and value projections of "Attention is all you
need" (W_Q, W_K, W_V): they map the incoming hidden states into the space where each head
compares queries with keys; `PureAttention` splits the channels into heads and computes
softmax(QKᵀ/√dk)·V per head; the last Dense is the output projection W_O. Written literally
with attnlab's combinators it *is* `L.MultiHeadAttention(n_heads, d)` — the same four linear
maps — which this script checks numerically (keys and values of another length than the
queries, with padding). In self-attention q, k and v are the same hidden states:
`Serial(Select([0, 0, 0]), AttentionQKV)` equals `L.SelfAttention`.

Three spellings of the same computation:
- `attention_qkv_trax`: the Trax code, literally, with `al.Serial`/`al.Parallel`;
- `attention_qkv_matlab`: MATLAB's way (fullyConnectedLayer ×3, attentionLayer, connectLayers);
- `attention_qkv_attnlab`: the same explicit graph in idiomatic attnlab (and `multi_head`, the
  one-layer form you would normally write).

    python -m attnlab.cli.demos.seed3_qkv [--small]
"""
from __future__ import annotations

import argparse
from pathlib import Path

import torch

import attnlab as al
from attnlab import layers as L
from attnlab.matlab import (addLayers, attentionLayer, connectLayers, dlnetwork,
                            fullyConnectedLayer)

from attnlab.cli.demos._compare import assert_same_graph


def attention_qkv_trax(d_feature: int, n_heads: int = 1) -> al.Network:
    """Trax's AttentionQKV, line by line: inputs in1, in2, in3 (q, k, v) → out (B×Tq×d)."""
    return al.Serial(
        al.Parallel(
            L.Dense(d_feature),
            L.Dense(d_feature),
            L.Dense(d_feature),
        ),
        L.Attention(n_heads),                    # PureAttention: no learnables
        L.Dense(d_feature),
    )


def attention_qkv_matlab(d: int, numHeads: int = 1) -> al.Network:
    """The same computation as a MATLAB dlnetwork without input layers (its inputs are the
    open ports: query, key, value)."""
    net = dlnetwork()
    net = addLayers(net, [fullyConnectedLayer(d, Name="query"),
                          attentionLayer(numHeads, Name="attention"),
                          fullyConnectedLayer(d, Name="output")])
    net = addLayers(net, fullyConnectedLayer(d, Name="key"))
    net = addLayers(net, fullyConnectedLayer(d, Name="value"))
    net = connectLayers(net, "key", "attention/key")
    net = connectLayers(net, "value", "attention/value")
    return net


def attention_qkv_attnlab(d: int, heads: int = 1) -> al.Network:
    net = al.Network([L.Dense(d, name="query"), L.Attention(heads, name="attention"),
                      L.Dense(d, name="output")])
    net.add(L.Dense(d, name="key"))
    net.add(L.Dense(d, name="value"))
    net.connect("key", "attention/key")
    net.connect("value", "attention/value")
    return net


def multi_head(d: int, heads: int = 1) -> al.Network:
    """What one normally writes: MultiHeadAttention (inputs mha/query, mha/key, mha/value)."""
    return al.Network([L.MultiHeadAttention(heads, d, name="mha")])


# -- weights: one set of four linear maps, three layouts ------------------------------------

TRAX_NAMES = {"query": "parallel/fc", "key": "parallel/fc_1", "value": "parallel/fc_2",
              "output": "fc"}


def copy_weights(mha: al.Network, trax: al.Network | None = None, graph: al.Network | None = None):
    """MultiHeadAttention's query/key/value/output (weight out×in, bias, as nn.Linear) → the
    Trax-style combinators and the explicit graph. All networks must be initialised."""
    src = mha.learnables
    with torch.no_grad():
        for m, trax_name in TRAX_NAMES.items():
            for p in ("weight", "bias"):
                if trax is not None:
                    trax.learnables[f"{trax_name}/{p}"].copy_(src[f"mha/{m}.{p}"])
                if graph is not None:
                    graph.learnables[f"{m}/{p}"].copy_(src[f"mha/{m}.{p}"])


def compare(d=16, heads=4, cq=16, ck=12, cv=10, seed=0) -> dict:
    """Max |difference| of the three forms against MultiHeadAttention, on padded batches with
    keys/values of other lengths than the queries."""
    g = torch.Generator().manual_seed(seed)
    q = [torch.randn(t, cq, generator=g) for t in (5, 2, 4)]
    k_len = (7, 3, 1)
    k = [torch.randn(t, ck, generator=g) for t in k_len]
    v = [torch.randn(t, cv, generator=g) for t in k_len]
    mha, trax = multi_head(d, heads), attention_qkv_trax(d, heads)
    graph = attention_qkv_attnlab(d, heads)
    ref = mha(q, k, v)                          # the first call sizes and builds each network
    trax(q, k, v)
    graph({"query": q, "key": k, "value": v})
    copy_weights(mha, trax, graph)
    out = {"trax": (trax(q, k, v) - ref).abs().max().item(),
           "graph": (graph({"query": q, "key": k, "value": v}) - ref).abs().max().item()}
    # self-attention: the same hidden states as query, key and value
    self_qkv = al.Serial(al.Select([0, 0, 0]), attention_qkv_trax(cq, heads))
    sa = al.Network([L.SelfAttention(heads, cq, name="sa")])
    ref_sa = sa(q)
    self_qkv(q)
    inner = self_qkv.layers["serial"]
    with torch.no_grad():
        for m, trax_name in TRAX_NAMES.items():
            for p in ("weight", "bias"):
                inner.learnables[f"{trax_name}/{p}"].copy_(sa.learnables[f"sa/{m}.{p}"])
    out["self"] = (self_qkv(q) - ref_sa).abs().max().item()
    return out


def main(small: bool = False) -> dict:
    d, heads = (16, 4) if small else (64, 8)
    assert_same_graph(attention_qkv_matlab(d, heads), attention_qkv_attnlab(d, heads),
                      "seed 3: MATLAB form vs attnlab graph")
    trax = attention_qkv_trax(d, heads)
    print(f"AttentionQKV({d}, n_heads={heads}) as combinators: inputs {trax.input_names}, "
          f"outputs {trax.output_names}")
    trax(torch.randn(2, 3, d), torch.randn(2, 5, d), torch.randn(2, 5, d))
    print(trax.analyze().table())
    diffs = compare(d, heads, cq=d, ck=d - 4, cv=d - 6)
    names = {"trax": "Serial(Parallel(Dense×3), Attention, Dense) − MultiHeadAttention",
             "graph": "MATLAB-style graph − MultiHeadAttention",
             "self": "Serial(Select([0, 0, 0]), AttentionQKV) − SelfAttention"}
    for form, diff in diffs.items():
        print(f"max |{names[form]}|: {diff:.1e}")
    return diffs


def run(out: Path, epochs: int | None = None, seed: int = 0) -> dict:
    """`attnlab demo seed3-qkv`: `main` at full size (nothing is trained and no file is
    written; `epochs` and `seed` are unused)."""
    return main()


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--small", action="store_true")
    main(p.parse_args().small)
