"""The seed-1 encoder–decoder: an LSTM encoder feeds key and value of a cross-attention whose
query comes from an LSTM decoder with its own input. Builds it, prints its analysis, runs it on
random data and writes its plot; then shows the question's network, the cycle attnlab finds,
and the network after the cycle message's advice."""
from __future__ import annotations

from pathlib import Path

import torch

import attnlab as al
from attnlab import layers as L


def answer_network(channels: int = 256, heads: int = 8) -> al.Network:
    net = al.Network()
    net.add([L.SequenceInput(1, name="decoder-input"),
             L.LSTM(64, output_mode="sequence", name="lstm-decoder"),
             L.LayerNorm(name="layernorm-decoder"),
             L.Dense(channels, name="query"),
             L.Attention(num_heads=heads, name="cross-attention")])
    net.add([L.SequenceInput(1, name="encoder-input"),
             L.LSTM(64, name="lstm-encoder"), L.LayerNorm(name="key-value"),
             L.Dense(channels, name="fc-key")])
    net.connect("fc-key", "cross-attention/key")
    net.add(L.Dense(channels, name="fc-value"))
    net.connect("key-value", "fc-value")
    net.connect("fc-value", "cross-attention/value")
    return net


def question_network() -> al.Network:
    """The network of the seed-1 question, written as its MATLAB code writes it."""
    net = al.Network()
    net.add([L.SequenceInput(1, name="input"), L.LSTM(64, name="lstm_encoder"),
             L.Dropout(0.2, name="dropout_1"), L.LayerNorm(name="batchnormal_1"),
             L.Dense(256, name="key"), L.Attention(8, name="cross-attention"), L.LayerNorm(),
             L.LSTM(64, name="lstm_decoder"), L.Dropout(0.2, name="dropout_2"),
             L.LayerNorm(name="batchnormal_2"), L.Dense(64, name="fc"), L.Dense(1, name="fc_out")])
    net.connect("key", "cross-attention/key")
    net.disconnect("key", "cross-attention/query")
    net.add(L.Dense(256, name="value"))
    net.connect("batchnormal_1", "value")
    net.connect("value", "cross-attention/value")
    net.add(L.Dense(256, name="query"))
    net.connect("lstm_decoder", "query")
    net.connect("query", "cross-attention/query")
    return net


def fixed_network(decoder_channels: int = 1) -> al.Network:
    """The question's network after the cycle message's advice: the decoder LSTM reads its own
    input (`decoder_channels` per step, e.g. the previous step's target), the LayerNorm stays
    on the attention's output, and that output joins the decoder's before the head."""
    net = question_network()
    net.disconnect("layernorm", "lstm_decoder")
    net.add(L.SequenceInput(decoder_channels, name="decoder-input"))
    net.connect("decoder-input", "lstm_decoder")
    net.add(L.Concatenation(2, name="context"))
    net.disconnect("lstm_decoder", "dropout_2")
    net.connect("lstm_decoder", "context/in1")
    net.connect("layernorm", "context/in2")
    net.connect("context", "dropout_2")
    return net


def run(out: Path, epochs: int | None = None, seed: int = 0) -> dict:
    """Nothing is trained: `epochs` is unused; `seed` draws the random inputs."""
    out.mkdir(parents=True, exist_ok=True)
    net = answer_network()
    print(net.analyze())
    torch.manual_seed(seed)
    xd, xe = torch.randn(4, 7, 1), torch.randn(4, 11, 1)
    y = net({"decoder-input": xd, "encoder-input": xe})
    print(f"decoder 4×7×1 + encoder 4×11×1 → output {'×'.join(map(str, y.shape))}")
    net.plot(out / "seed1-answer.png")
    q = question_network()
    analysis = q.analyze()
    print("\nThe question's network:")
    for issue in analysis.errors:
        print(" ", issue)
    q.plot(out / "seed1-question.png")
    fixed = fixed_network()
    fixed_analysis = fixed.analyze()
    print(f"\nAfter the advice: {len(fixed_analysis.issues)} issue(s), inputs "
          f"{', '.join(fixed.input_names)}, output {', '.join(fixed.output_names)}")
    print(f"\nwrote {out / 'seed1-answer.png'} and {out / 'seed1-question.png'}")
    return {"output_shape": list(y.shape), "question_errors": [i.message for i in analysis.errors],
            "fixed_issues": [i.message for i in fixed_analysis.issues]}
