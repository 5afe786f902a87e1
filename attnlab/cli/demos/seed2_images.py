"""Seed 2 — "Example of using selfAttentionLayer for image classification" (the digit network).

The answer in the seed puts `flattenLayer` before `selfAttentionLayer`. Flattening merges the
image's positions into channels (B×C×H×W → B×(C·H·W)), so nothing is left to attend over:
attnlab's analysis says so and suggests `ImageToSequence`, which turns the H×W positions into a
sequence of H·W steps. With it (and a pooling over the steps before the classifier) the network
trains. Both networks are written as the seed's MATLAB, line by line with `attnlab.matlab`, and
in idiomatic attnlab; the two versions build the same graph.

Data: scikit-learn's 8×8 digits (1,797 images, shipped with the package) instead of MATLAB's
DigitDataset; `small=True` keeps 8×8 and a few hundred images, else they are resized to 16×16.
Without scikit-learn, synthetic digits-like data of the same shape are used.

    python -m attnlab.cli.demos.seed2_images [--small] [--out DIR]
"""
from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import torch

import attnlab as al
from attnlab import layers as L
from attnlab.matlab import (MatlabNote, analyzeNetwork, batchNormalizationLayer,
                            classificationLayer, convolution2dLayer, dlnetwork, flattenLayer,
                            fullyConnectedLayer, globalAveragePooling1dLayer, imageInputLayer,
                            layerGraph, maxPooling2dLayer, reluLayer, selfAttentionLayer,
                            softmaxLayer, trainingOptions, trainNetwork)

from attnlab.cli.demos._compare import assert_same_graph


# ---------------------------------------------------------------------------- data ----

def load_digits(size: int = 8, limit: int | None = None, seed: int = 0):
    """(X N×1×size×size float32 in [0, 1], Y N int64 labels 0–9)."""
    try:
        from sklearn.datasets import load_digits as sk_digits
        d = sk_digits()
        x = torch.tensor(d.images, dtype=torch.float32).unsqueeze(1) / 16.0     # N×1×8×8
        y = torch.tensor(d.target, dtype=torch.long)
    except ImportError:                                   # same shapes, learnable classes
        g = torch.Generator().manual_seed(seed)
        y = torch.arange(1000) % 10
        proto = torch.rand(10, 1, 8, 8, generator=g)
        x = (proto[y] + 0.3 * torch.rand(1000, 1, 8, 8, generator=g)).clamp(0, 1)
    if limit is not None:
        idx = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))[:limit]
        x, y = x[idx], y[idx]
    if size != 8:
        x = torch.nn.functional.interpolate(x, size=(size, size), mode="bilinear",
                                            align_corners=False)
    return x, y


def split_each_label(x, y, fraction: float, seed: int = 0):
    """MATLAB's splitEachLabel(imds, fraction, 'randomized'): the fraction of every class."""
    g = torch.Generator().manual_seed(seed)
    first, second = [], []
    for c in torch.unique(y):
        idx = torch.nonzero(y == c).flatten()
        idx = idx[torch.randperm(len(idx), generator=g)]
        k = int(round(fraction * len(idx)))
        first.append(idx[:k])
        second.append(idx[k:])
    a, b = torch.cat(first), torch.cat(second)
    return (x[a], y[a]), (x[b], y[b])


# --------------------------------------------------------- the seed's flatten version ---

def flatten_layers_matlab(h=28, w=28):
    """The seed's layer array, line by line (only [28 28 1] becomes [h w 1])."""
    layers = [
        imageInputLayer([h, w, 1], 'Name', 'input'),
        convolution2dLayer(3, 32, 'Padding', 'same', 'Name', 'conv1'),
        batchNormalizationLayer('Name', 'bn1'),
        reluLayer('Name', 'relu1'),
        maxPooling2dLayer(2, 'Stride', 2, 'Name', 'maxpool1'),
        convolution2dLayer(3, 64, 'Padding', 'same', 'Name', 'conv2'),
        batchNormalizationLayer('Name', 'bn2'),
        reluLayer('Name', 'relu2'),
        maxPooling2dLayer(2, 'Stride', 2, 'Name', 'maxpool2'),
        flattenLayer('Name', 'flatten'),
        selfAttentionLayer(8, 64, 'Name', 'self_attention'),
        fullyConnectedLayer(10, 'Name', 'fc'),
        softmaxLayer('Name', 'softmax'),
        classificationLayer('Name', 'output')]
    return layers


def _conv_stem(h, w):
    return [L.ImageInput((1, h, w), name="input"),
            L.Conv2d(3, 32, padding="same", name="conv1"), L.BatchNorm(name="bn1"),
            L.ReLU(name="relu1"), L.MaxPool2d(2, stride=2, name="maxpool1"),
            L.Conv2d(3, 64, padding="same", name="conv2"), L.BatchNorm(name="bn2"),
            L.ReLU(name="relu2"), L.MaxPool2d(2, stride=2, name="maxpool2")]


def flatten_network_attnlab(h=28, w=28) -> al.Network:
    """The same in idiomatic attnlab (no output layer: the loss goes to al.train)."""
    return al.Network(_conv_stem(h, w) + [
        L.Flatten(name="flatten"), L.SelfAttention(8, 64, name="self_attention"),
        L.Dense(10, name="fc"), L.Softmax(name="softmax")])


# ------------------------------------------------------------ the ImageToSequence fix ---

def sequence_layers_matlab(h=28, w=28):
    """The seed's array with two changes: ImageToSequence instead of flattenLayer (attnlab's
    layer, mixed in: MATLAB has no name for it) and globalAveragePooling1dLayer after the
    attention, so that one vector per image reaches the classifier."""
    layers = [
        imageInputLayer([h, w, 1], 'Name', 'input'),
        convolution2dLayer(3, 32, 'Padding', 'same', 'Name', 'conv1'),
        batchNormalizationLayer('Name', 'bn1'),
        reluLayer('Name', 'relu1'),
        maxPooling2dLayer(2, 'Stride', 2, 'Name', 'maxpool1'),
        convolution2dLayer(3, 64, 'Padding', 'same', 'Name', 'conv2'),
        batchNormalizationLayer('Name', 'bn2'),
        reluLayer('Name', 'relu2'),
        maxPooling2dLayer(2, 'Stride', 2, 'Name', 'maxpool2'),
        L.ImageToSequence(name='img2seq'),               # B×64×H'×W' → B×(H'·W')×64
        selfAttentionLayer(8, 64, 'Name', 'self_attention'),
        globalAveragePooling1dLayer('Name', 'gap'),       # B×T×64 → B×64
        fullyConnectedLayer(10, 'Name', 'fc'),
        softmaxLayer('Name', 'softmax'),
        classificationLayer('Name', 'output')]
    return layers


def sequence_network_attnlab(h=28, w=28) -> al.Network:
    return al.Network(_conv_stem(h, w) + [
        L.ImageToSequence(name="img2seq"), L.SelfAttention(8, 64, name="self_attention"),
        L.GlobalAvgPool1d(name="gap"), L.Dense(10, name="fc"), L.Softmax(name="softmax")])


# ---------------------------------------------------------------------------- train ----

def train_matlab(layers, train, val, epochs=5, plots_file=None):
    """The seed's trainingOptions and trainNetwork, line by line ({XVal, YVal} for the
    validation datastore)."""
    (XTrain, YTrain), (XVal, YVal) = train, val
    options = trainingOptions('sgdm',
                              'InitialLearnRate', 0.01,
                              'MaxEpochs', epochs,
                              'Shuffle', 'every-epoch',
                              'ValidationData', [XVal, YVal],
                              'ValidationFrequency', 30,
                              'Verbose', False,
                              'Plots', 'training-progress' if plots_file else 'none')
    if plots_file:
        options = options.replace(plots_file=str(plots_file))   # where the picture goes
    net = trainNetwork(XTrain, YTrain, layers, options)
    return net


def train_attnlab(net, train, val, epochs=5):
    """The same training in idiomatic attnlab."""
    opts = al.TrainingOptions(solver="sgdm", learning_rate=0.01, max_epochs=epochs,
                              shuffle="every-epoch", validation_data=val, validation_frequency=30,
                              verbose=False, l2=1e-4)
    return al.train(net, *train, loss="crossentropy", options=opts)


def accuracy(net, x, y) -> float:
    net.eval()
    return float((net.predict(x).argmax(1) == y).float().mean())


# ---------------------------------------------------------------------------- main -----

def main(small: bool = False, out: Path | None = None) -> dict:
    size, limit, epochs = (8, 200, 2) if small else (16, None, 5)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)

    # 1. the seed's network, explained by analysis
    print("The seed's network (flattenLayer before selfAttentionLayer):")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MatlabNote)    # classificationLayer: see attnlab.matlab
        flat_analysis = analyzeNetwork(flatten_layers_matlab(size, size))
        assert_same_graph(layerGraph(flatten_layers_matlab(size, size)),
                          flatten_network_attnlab(size, size), "seed 2 flatten version")
    problem = flat_analysis.errors[0]
    print(f"→ {problem.message}\n")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MatlabNote)
            # without its output layer (a dlnetwork has none): MATLAB's dlnetwork errors too
            dlnetwork(flatten_layers_matlab(size, size)[:-1])
    except al.FormatError as e:
        print(f"dlnetwork(layers) raises {type(e).__name__} (also a FormatError).\n")

    # 2. the fix: ImageToSequence, then pool the steps
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MatlabNote)
        fixed = dlnetwork(sequence_layers_matlab(size, size)[:-1])   # the loss: trainNetwork
    assert_same_graph(fixed, sequence_network_attnlab(size, size), "seed 2 ImageToSequence version")
    fixed_analysis = fixed.analyze()
    print(fixed_analysis.table())

    x, y = load_digits(size, limit)
    train, val = split_each_label(x, y, 0.7)
    result = {"flatten_error": problem.message, "flatten_error_class": problem.error_class,
              "fixed_ok": fixed_analysis.ok}
    torch.manual_seed(0)
    plots = out / "seed2-training-progress.png" if out is not None else None
    net = train_matlab(sequence_layers_matlab(size, size), train, val, epochs, plots)
    info = net.training_info
    result["val_accuracy"] = accuracy(net, *val)
    result["final_loss"] = _final_loss(info)
    print(f"trainNetwork: {info}; validation accuracy {result['val_accuracy']:.3f}")
    if not small:
        twin = sequence_network_attnlab(size, size)
        train_attnlab(twin, train, val, epochs)
        print(f"al.train (idiomatic): validation accuracy {accuracy(twin, *val):.3f}")
    return result


def _final_loss(info) -> float:
    loss = getattr(info, "final_loss", None)      # TrainingInfo: the last iteration's loss
    return float("nan") if loss is None else float(loss)


def run(out: Path, epochs: int | None = None, seed: int = 0) -> dict:
    """`attnlab demo seed2-images`: `main` at full size, its training picture in `out`
    (`epochs` and `seed` are unused: the script trains 5 epochs from seed 0)."""
    return main(out=Path(out))


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--small", action="store_true")
    p.add_argument("--out", type=Path, default=None, help="folder for the training picture")
    a = p.parse_args()
    main(a.small, a.out)
