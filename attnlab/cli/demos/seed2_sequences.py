"""Seed 2, the follow-ups — self-attention on 1-D signals (sequenceInputLayer), with an LSTM, and
"selfAttentionLayer can't process a sequence-to-label problem".

Self-attention keeps the time dimension: B×T×C in, B×T×C out. For one label per sequence, reduce
time after it — `globalAveragePooling1dLayer` (mean of the valid steps), `indexing1dLayer("last")`
(each sequence's own last step) or attnlab's `AttentionPool1d` (a learned query attends over the
steps). Without that, the classifier gives one prediction per time step and the labels do not fit.
Padding of variable-length sequences is masked everywhere: attention ignores padded keys, pooling
and "last" skip them.

Also answered: "does selfAttentionLayer apply softmax and scaling?" — yes, softmax(QKᵀ/√dk)·V per
head; `check_formula()` recomputes a layer's output by hand.

Each network is written with `attnlab.matlab` and idiomatically; the two build the same graph.
Data: synthetic 1-channel signals of 12–32 steps whose class is their frequency.

    python -m attnlab.cli.demos.seed2_sequences [--small]
"""
from __future__ import annotations

import argparse
import functools
from pathlib import Path
from typing import Any, Callable, cast
import math

import numpy as np
import torch

import attnlab as al
from attnlab import layers as L
from attnlab.matlab import (additionLayer, connectLayers, dlnetwork, fullyConnectedLayer,
                            globalAveragePooling1dLayer, indexing1dLayer, initialize,
                            layerNormalizationLayer, lstmLayer, predict, selfAttentionLayer,
                            sequenceInputLayer, sinusoidalPositionEncodingLayer, softmaxLayer,
                            trainingOptions, trainnet)

from attnlab.cli.demos._compare import assert_same_graph

POOLS = ("gap", "last", "attnpool")


# ---------------------------------------------------------------------------- data ----

def signals(n: int, classes: int = 3, seed: int = 0):
    """n sequences (T_i×1 float32 arrays, T_i in 12…32) and labels: class k oscillates with
    period 4·(k + 1) steps, at a random phase, with noise."""
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for i in range(n):
        k = i % classes
        t = np.arange(rng.integers(12, 33))
        x = np.sin(2 * np.pi * t / (4 * (k + 1)) + rng.uniform(0, 2 * np.pi))
        xs.append((x + 0.2 * rng.standard_normal(len(t))).astype(np.float32)[:, None])
        ys.append(k)
    return xs, np.array(ys)


# --------------------------------------------------- self-attention, sequence-to-label ---

def _pool_matlab(pool):
    if pool == "gap":
        return globalAveragePooling1dLayer(Name="pool")
    if pool == "last":
        return indexing1dLayer("last", Name="pool")
    return L.AttentionPool1d(4, name="pool")       # attnlab's layer: MATLAB has no name for it


def _pool_attnlab(pool):
    return {"gap": L.GlobalAvgPool1d, "last": lambda name: L.Index1d("last", name=name),
            "attnpool": lambda name: L.AttentionPool1d(4, name=name)}[pool](name="pool")


def attention_classifier_matlab(pool="gap", d=32, numClasses=3):
    """sequenceInputLayer → fc (1 → d channels) + sinusoidal positions → selfAttentionLayer →
    layer norm → reduce time → fc → softmax. The position encoding is added with additionLayer,
    as in MATLAB's transformer examples."""
    layers = [
        sequenceInputLayer(1, Name="input"),
        fullyConnectedLayer(d, Name="embed"),
        sinusoidalPositionEncodingLayer(d, Name="position"),
        additionLayer(2, Name="add"),
        selfAttentionLayer(4, d, Name="self-attention"),
        layerNormalizationLayer(Name="norm"),
        _pool_matlab(pool),                          # B×T×d → B×d: one vector per sequence
        fullyConnectedLayer(numClasses, Name="fc"),
        softmaxLayer(Name="softmax")]
    net = dlnetwork(layers)                          # add/in2 is still open: not initialised yet
    net = connectLayers(net, "embed", "add/in2")
    net = initialize(net)
    return net


def attention_classifier_attnlab(pool="gap", d=32, classes=3) -> al.Network:
    net = al.Network([
        L.SequenceInput(1, name="input"), L.Dense(d, name="embed"),
        L.SinusoidalPositionEncoding(d, name="position"), L.Addition(2, name="add"),
        L.SelfAttention(4, d, name="self-attention"), L.LayerNorm(name="norm"),
        _pool_attnlab(pool), L.Dense(classes, name="fc"), L.Softmax(name="softmax")])
    net.connect("embed", "add/in2")
    return net


# ------------------------------------------------------------------- with an LSTM -----

def lstm_attention_matlab(d=32, numClasses=3):
    """An LSTM gives each step its context (and order); self-attention then relates the steps."""
    layers = [
        sequenceInputLayer(1, Name="input"),
        lstmLayer(d, OutputMode="sequence", Name="lstm"),
        selfAttentionLayer(4, d, Name="self-attention"),
        globalAveragePooling1dLayer(Name="pool"),
        fullyConnectedLayer(numClasses, Name="fc"),
        softmaxLayer(Name="softmax")]
    return dlnetwork(layers)


def lstm_attention_attnlab(d=32, classes=3) -> al.Network:
    return al.Network([
        L.SequenceInput(1, name="input"), L.LSTM(d, output_mode="sequence", name="lstm"),
        L.SelfAttention(4, d, name="self-attention"), L.GlobalAvgPool1d(name="pool"),
        L.Dense(classes, name="fc"), L.Softmax(name="softmax")])


# ------------------------------------------------- the sequence-to-label mistake -------

def without_pooling_matlab(d=32, numClasses=3):
    """The network of the "can't process sequence-to-label" question: nothing reduces time."""
    layers = [
        sequenceInputLayer(1, Name="input"),
        fullyConnectedLayer(d, Name="embed"),
        selfAttentionLayer(4, d, Name="self-attention"),
        fullyConnectedLayer(numClasses, Name="fc"),
        softmaxLayer(Name="softmax")]
    return dlnetwork(layers)


def without_pooling_attnlab(d=32, classes=3) -> al.Network:
    return al.Network([L.SequenceInput(1, name="input"), L.Dense(d, name="embed"),
                       L.SelfAttention(4, d, name="self-attention"), L.Dense(classes, name="fc"),
                       L.Softmax(name="softmax")])


# ---------------------------------------------- "does it apply softmax and scaling?" ---

def check_formula(channels=8, heads=2, steps=5) -> float:
    """Recomputes a selfAttentionLayer's output as softmax(Q Kᵀ / √dk) V per head, heads
    concatenated, then the output projection. Returns the largest difference."""
    net = al.Network([L.SequenceInput(channels, name="x"), L.SelfAttention(heads, channels,
                                                                            name="sa")])
    x = torch.randn(2, steps, channels)
    with torch.no_grad():
        return _formula_difference(net, x, heads, steps, channels)


def _formula_difference(net, x, heads, steps, channels):
    y = net(x)
    p = {k.split("/")[1]: v for k, v in net.learnables.items()}
    q = x @ p["query.weight"].T + p["query.bias"]
    k = x @ p["key.weight"].T + p["key.bias"]
    v = x @ p["value.weight"].T + p["value.bias"]
    dk = channels // heads
    split = lambda t: t.reshape(2, steps, heads, dk).transpose(1, 2)        # B×heads×T×dk
    a = torch.softmax(split(q) @ split(k).transpose(-1, -2) / math.sqrt(dk), dim=-1)
    merged = (a @ split(v)).transpose(1, 2).reshape(2, steps, channels)
    manual = merged @ p["output.weight"].T + p["output.bias"]
    return float((manual - y).abs().max())


# ---------------------------------------------------------------------------- train ----

def fit(net, X, T, epochs, lr=0.01):
    options = trainingOptions("adam", InitialLearnRate=lr, MaxEpochs=epochs, MiniBatchSize=32,
                              Shuffle="every-epoch", Verbose=False, L2Regularization=0)
    return trainnet(X, T, net, "crossentropy", options)


def accuracy(net, X, T) -> float:
    scores = cast(torch.Tensor, predict(net, X))         # one output: a tensor
    return float((scores.argmax(1).numpy() == T).mean())


def main(small: bool = False) -> dict:
    d, n, epochs = (8, 64, 2) if small else (32, 600, 30)
    X, T = signals(n)
    Xv, Tv = signals(n // 3, seed=1)
    torch.manual_seed(0)
    result: dict[str, Any] = {"formula_error": check_formula()}
    print(f"selfAttentionLayer = softmax(QKᵀ/√dk)·V per head, then the output projection: "
          f"largest difference to the layer {result['formula_error']:.1e}\n")

    builds: dict[str, tuple[Callable[[], Any], Callable[[], Any]]] = {
        f"attention+{p}": (functools.partial(attention_classifier_matlab, p, d),
                           functools.partial(attention_classifier_attnlab, p, d)) for p in POOLS}
    builds["lstm+attention"] = (lambda: lstm_attention_matlab(d), lambda: lstm_attention_attnlab(d))
    builds["no pooling"] = (lambda: without_pooling_matlab(d), lambda: without_pooling_attnlab(d))
    nets = {}
    for name, (matlab, idiomatic) in builds.items():
        nets[name] = matlab()
        assert_same_graph(nets[name], idiomatic(), f"seed 2 follow-up '{name}'")

    bad = nets.pop("no pooling")
    out_spec = bad.analyze().out_specs["softmax"]["out"]
    print(f"Without pooling the network ends in {out_spec}: one prediction per time step, not "
          "per sequence. Reduce time after the attention (globalAveragePooling1dLayer, "
          "indexing1dLayer(\"last\") or AttentionPool1d).")
    result["no_pooling_output"] = str(out_spec)
    try:
        fit(bad, X, T, 1)
        result["no_pooling_error"] = None
    except al.AttnlabError as e:
        result["no_pooling_error"] = e
        print(f"trainnet says: {type(e).__name__}: {e}\n")
    for name, net in nets.items():
        before = accuracy(net, Xv, Tv)
        fit(net, X, T, epochs)
        result[name] = (before, accuracy(net, Xv, Tv))
        print(f"{name:>20}: validation accuracy {before:.2f} → {result[name][1]:.2f}")
    return result


def run(out: Path, epochs: int | None = None, seed: int = 0) -> dict:
    """`attnlab demo seed2-sequences`: `main` at full size (it writes no files; `epochs` and
    `seed` are unused: the script trains 30 epochs from seed 0)."""
    return main()


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--small", action="store_true")
    main(p.parse_args().small)
