"""Seed 1 — "When I use attentionLayer to input QKV, MATLAB tells me there is a net circle error."

The question's LSTM–attention–LSTM network computes the attention's query from the decoder LSTM,
which itself reads the attention's output: a cycle. The answer gives the decoder its own input,
so the encoder feeds only key and value (`answer_network`, the README's first example).

    attnlab demo seed1 --out demo-out          # the analysis, and the pictures of both networks
    python -m attnlab.cli.demos.seed1 [--small] [--out DIR]

The second form also ports the question's and the answer's MATLAB code line by line with
`attnlab.matlab` (`question_matlab`, `answer_matlab`) and checks that each builds the same graph
as its idiomatic version here."""
from __future__ import annotations

import argparse
from pathlib import Path

import torch

import attnlab as al
from attnlab import layers as L
from attnlab.matlab import (addLayers, analyzeNetwork, attentionLayer, connectLayers,
                            disconnectLayers, dlnetwork, dropoutLayer, fullyConnectedLayer,
                            layerNormalizationLayer, lstmLayer, plot, sequenceInputLayer)

from attnlab.cli.demos._compare import assert_same_graph


# ------------------------------------------------------------------ idiomatic attnlab ---

def answer_network(channels: int = 256, heads: int = 8,
                   decoder_norm: str = "layernorm-decoder") -> al.Network:
    """The answer: an LSTM encoder feeds key and value of a cross-attention whose query comes
    from an LSTM decoder with its own input. `decoder_norm` names the decoder's LayerNorm (the
    answer's MATLAB code calls it "layernorm_decoder")."""
    net = al.Network()
    net.add([L.SequenceInput(1, name="decoder-input"),
             L.LSTM(64, output_mode="sequence", name="lstm-decoder"),
             L.LayerNorm(name=decoder_norm),
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


def question_network(in_channels: int = 1, hidden1: int = 64, hidden2: int = 64,
                     channels: int = 256, heads: int = 8, out_channels: int = 1) -> al.Network:
    """The network of the question, as its MATLAB code builds it (with its cycle)."""
    net = al.Network()
    net.add([L.SequenceInput(in_channels, name="input"),
             L.LSTM(hidden1, name="lstm_encoder"), L.Dropout(0.2, name="dropout_1"),
             L.LayerNorm(name="batchnormal_1"), L.Dense(channels, name="key"),
             L.Attention(heads, name="cross-attention"), L.LayerNorm(),
             L.LSTM(hidden2, name="lstm_decoder"), L.Dropout(0.2, name="dropout_2"),
             L.LayerNorm(name="batchnormal_2"), L.Dense(64, name="fc"),
             L.Dense(out_channels, name="fc_out")])
    net.connect("key", "cross-attention/key")
    net.disconnect("key", "cross-attention/query")
    net.add(L.Dense(channels, name="value"))
    net.connect("batchnormal_1", "value")
    net.connect("value", "cross-attention/value")
    net.add(L.Dense(channels, name="query"))
    net.connect("lstm_decoder", "query")
    net.connect("query", "cross-attention/query")
    return net


def apply_the_fix(net: al.Network, decoder_channels: int = 1) -> al.Network:
    """What attnlab's cycle message says to do, on the question's network `net` (changed in
    place): the decoder LSTM reads its own input (`decoder_channels` per step, e.g. the previous
    step's target), the LayerNorm stays on the attention's output, and that output joins the
    decoder's before the head."""
    net.disconnect("layernorm", "lstm_decoder")
    net.add(L.SequenceInput(decoder_channels, name="decoder-input"))
    net.connect("decoder-input", "lstm_decoder")
    net.add(L.Concatenation(2, name="context"))
    net.disconnect("lstm_decoder", "dropout_2")
    net.connect("lstm_decoder", "context/in1")
    net.connect("layernorm", "context/in2")
    net.connect("context", "dropout_2")
    return net


def fixed_network(decoder_channels: int = 1) -> al.Network:
    """The question's network after the cycle message's advice (`apply_the_fix`)."""
    return apply_the_fix(question_network(), decoder_channels)


def run(out: Path, epochs: int | None = None, seed: int = 0) -> dict:
    """`attnlab demo seed1`. Nothing is trained: `epochs` is unused; `seed` draws the random
    inputs."""
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


# ------------------------------------------------------- the MATLAB code, line by line ---

def _show(net, out: Path | None, name: str):
    """MATLAB's `plot(net)`: here the picture is written when an output folder is given."""
    if out is not None:
        plot(net, out / name)
        import matplotlib.pyplot as plt
        plt.close("all")


def question_matlab(InputChannels=1, hidden_num_lstm1=64, hidden_num_lstm2=64,
                    AttentionChannels=256, NumHeads=8, OutputChannels=1, out=None) -> al.Network:
    """The question's MATLAB code, line by line."""
    net = dlnetwork()
    layers = [
        sequenceInputLayer(InputChannels, Name="input"),
        lstmLayer(hidden_num_lstm1, 'OutputMode', 'sequence', Name='lstm_encoder'),
        dropoutLayer(0.2, Name='dropout_1'),
        layerNormalizationLayer(Name='batchnormal_1'),
        fullyConnectedLayer(AttentionChannels, Name="key"),      # Key
        attentionLayer(NumHeads, Name="cross-attention"),
        layerNormalizationLayer(),
        lstmLayer(hidden_num_lstm2, 'OutputMode', 'sequence', Name='lstm_decoder'),
        dropoutLayer(0.2, Name='dropout_2'),
        layerNormalizationLayer(Name='batchnormal_2'),
        fullyConnectedLayer(64, Name='fc'),
        fullyConnectedLayer(OutputChannels, Name='fc_out'),
    ]
    net = addLayers(net, layers)
    net = connectLayers(net, 'key', 'cross-attention/key')
    net = disconnectLayers(net, 'key', 'cross-attention/query')
    _show(net, out, "seed1-question-1.png")
    layers = [
        fullyConnectedLayer(AttentionChannels, Name="value"),    # Value
    ]
    net = addLayers(net, layers)
    net = connectLayers(net, 'batchnormal_1', 'value')
    net = connectLayers(net, 'value', 'cross-attention/value')
    _show(net, out, "seed1-question-2.png")
    layers = [
        fullyConnectedLayer(AttentionChannels, Name="query"),    # Query
    ]
    net = addLayers(net, layers)
    net = connectLayers(net, 'lstm_decoder', 'query')
    net = connectLayers(net, 'query', 'cross-attention/query')
    _show(net, out, "seed1-question-3.png")
    return net


def answer_matlab(numChannels=256, numHeads=8, out=None) -> al.Network:
    """The accepted answer's MATLAB code, line by line."""
    net = dlnetwork()
    # Set up the decoder: it has its own sequenceInputLayer, and the query for attentionLayer
    # comes from the output of the decoder
    layers = [
        sequenceInputLayer(1, Name="decoder-input"),
        lstmLayer(64, 'OutputMode', 'sequence', Name='lstm-decoder'),
        layerNormalizationLayer(Name='layernorm_decoder'),
        fullyConnectedLayer(numChannels, Name="query"),
        attentionLayer(numHeads, Name="cross-attention")]
    net = addLayers(net, layers)
    # Set up the encoder: it has its own sequenceInputLayer
    layers = [
        sequenceInputLayer(1, Name="encoder-input"),
        lstmLayer(64, 'OutputMode', 'sequence', Name='lstm-encoder'),
        layerNormalizationLayer(Name='key-value'),
        # Add a fully connected layer to extract the key
        fullyConnectedLayer(numChannels, Name="fc-key")]
    net = addLayers(net, layers)
    # Connect the key layer to the attention layer's key input
    net = connectLayers(net, "fc-key", "cross-attention/key")
    # Add a fully-connected layer to extract the value
    net = addLayers(net, fullyConnectedLayer(numChannels, Name="fc-value"))
    # Connect the added layer with the key-value layer to extract the value
    net = connectLayers(net, "key-value", "fc-value")
    # Connect the value layer to the attention layer's value input
    net = connectLayers(net, "fc-value", "cross-attention/value")
    _show(net, out, "seed1-answer.png")
    return net


# ---------------------------------------------------------------------------- main ---

def main(small: bool = False, out: Path | None = None) -> dict:
    """Builds both versions of the question and of the answer, prints the cycle and its fix,
    and runs the answer on encoder and decoder sequences of different lengths."""
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    size = dict(AttentionChannels=16, NumHeads=2, hidden_num_lstm1=8, hidden_num_lstm2=8) \
        if small else {}
    q = question_matlab(out=out, **size)
    assert_same_graph(q, question_network(hidden1=q.layers["lstm_encoder"].hidden,
                                          hidden2=q.layers["lstm_decoder"].hidden,
                                          channels=q.layers["key"].out,
                                          heads=q.layers["cross-attention"].num_heads),
                      "seed 1 question: MATLAB port vs attnlab")
    print("The question's network, as analyzeNetwork sees it:")
    analysis = analyzeNetwork(q)
    cycle = next(i for i in analysis.errors if i.kind == "cycle")
    print(f"\nThe cycle and the fix:\n  {cycle.message}\n")

    fixed = apply_the_fix(q)
    fixed_analysis = fixed.analyze()
    print(f"After the fix: {'no errors' if fixed_analysis.ok else fixed_analysis.errors}")

    channels, heads = (16, 2) if small else (256, 8)
    net = answer_matlab(channels, heads, out=out)
    assert_same_graph(net, answer_network(channels, heads, decoder_norm="layernorm_decoder"),
                      "seed 1 answer: MATLAB port vs attnlab")
    answer_analysis = analyzeNetwork(net)
    torch.manual_seed(0)
    decoder = [torch.randn(t, 1) for t in (7, 4, 5)]        # variable lengths, padded with a mask
    encoder = [torch.randn(t, 1) for t in (11, 3, 9)]
    y = net({"decoder-input": decoder, "encoder-input": encoder})
    print(f"answer: decoder 3×(7|4|5)×1 + encoder 3×(11|3|9)×1 → {'×'.join(map(str, y.shape))}")
    return {"cycle": cycle.message, "fixed_ok": fixed_analysis.ok, "answer_ok": answer_analysis.ok,
            "output_shape": tuple(y.shape)}


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--small", action="store_true")
    p.add_argument("--out", type=Path, default=None, help="folder for the pictures")
    a = p.parse_args()
    main(a.small, a.out)
