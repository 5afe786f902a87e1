"""The parameter sweep: every argument of every public layer constructor, given each
of a handful of wrong values, gives an attnlab error — at construction, or as an analysis issue —
and never a raw Python or PyTorch exception. `analyze()` never raises, and when it says the
network is fine, the forward pass runs."""
import inspect

import pytest
import torch
from torch import nn

import attnlab as al
from attnlab import layers as L

BAD = (0, -1, 2.5, True, None, "x", 10**9)
ODD = (torch.tensor([1, 2]), [3, 3], float("nan"))   # swept too: no truth value, no hash
HUGE = 10**9
T = 6


def seq(channels=4):
    return L.SequenceInput(channels, length=T, name="x")


def img():
    return L.ImageInput((2, T, T), name="x")


def chain(inp):
    """The layer after one input layer: its first input port."""
    return lambda layer: al.Network([inp(), layer])


def fan(inp):
    """One input feeding every input port of the layer (Attention, Addition, …)."""
    def build(layer):
        net = al.Network([inp()])
        net.add(layer)
        for port in layer.input_ports:
            net.connect("x", f"{layer.name}/{port}")
        return net
    return build


def tokens(layer):
    return al.Network([L.TokenInput(name="x"), layer])


def embedded_and_ids(layer):
    """Token ids embedded into the layer's `in` port, the ids themselves into `ids`."""
    net = al.Network([L.TokenInput(name="x"), L.Embedding(10, 4, name="e")])
    net.add(layer)
    net.connect("e", f"{layer.name}/in")
    net.connect("x", f"{layer.name}/ids")
    return net


def alone(layer):
    return al.Network([layer, L.ReLU(name="after")])


# layer type → (valid arguments, how to put it in a tiny network)
SETUPS = {
    "SequenceInput": (dict(channels=4), alone),
    "ImageInput": (dict(size=(2, T, T)), alone),
    "FeatureInput": (dict(channels=4), alone),
    "TokenInput": ({}, lambda layer: al.Network([layer, L.Embedding(10, 4, name="after")])),
    "Dense": (dict(out=3), chain(seq)),
    "ReLU": ({}, chain(seq)),
    "LeakyReLU": ({}, chain(seq)),
    "GELU": ({}, chain(seq)),
    "Tanh": ({}, chain(seq)),
    "Sigmoid": ({}, chain(seq)),
    "Softmax": ({}, chain(seq)),
    "Dropout": ({}, chain(seq)),
    "Conv1d": (dict(kernel=3, filters=4), chain(seq)),
    "Conv2d": (dict(kernel=3, filters=4), chain(img)),
    "LSTM": (dict(hidden=4), chain(seq)),
    "GRU": (dict(hidden=4), chain(seq)),
    "LayerNorm": ({}, chain(seq)),
    "RMSNorm": ({}, chain(seq)),
    "GroupNorm": (dict(groups=2), chain(seq)),
    "GLU": (dict(units=3), chain(seq)),
    "BatchNorm": ({}, chain(seq)),
    "MaxPool2d": (dict(pool_size=2), chain(img)),
    "AvgPool2d": (dict(pool_size=2), chain(img)),
    "GlobalAvgPool1d": ({}, chain(seq)),
    "GlobalMaxPool1d": ({}, chain(seq)),
    "GlobalAvgPool2d": ({}, chain(img)),
    "GlobalMaxPool2d": ({}, chain(img)),
    "Flatten": ({}, chain(img)),
    "Index1d": ({}, chain(seq)),
    "Addition": ({}, fan(seq)),
    "Multiplication": ({}, fan(seq)),
    "Concatenation": ({}, fan(seq)),
    "Embedding": (dict(vocab=10, dim=4), chain(lambda: seq(1))),
    "Attention": (dict(num_heads=2), fan(seq)),
    "SelfAttention": (dict(num_heads=2, key_channels=4), chain(seq)),
    "MultiHeadAttention": (dict(num_heads=2, key_channels=4), fan(seq)),
    "AttentionPool1d": (dict(num_heads=2), chain(seq)),
    "ImageToSequence": (dict(patch_size=2), chain(img)),
    "PositionEmbedding": (dict(max_length=8), chain(seq)),
    "SinusoidalPositionEncoding": (dict(dim=4), chain(seq)),
    "RelativePositionBias": (dict(num_heads=2), fan(seq)),
    "Module": (dict(module=nn.Linear(4, 4)), chain(seq)),
    "Swish": ({}, chain(seq)),
    "SiLU": ({}, chain(seq)),
    "TanhGELU": ({}, chain(seq)),
    "SpatialDropout": ({}, chain(seq)),
    "Scaling": ({}, chain(seq)),
    "Identity": ({}, chain(seq)),
    "GroupedConv2d": (dict(kernel=3, filters_per_group=2), chain(img)),
    "InputNormalization": ({}, chain(seq)),
    "Pool1d": (dict(mode="max", pool_size=2), chain(seq)),
    "PatchEmbedding": (dict(patch_size=2, output_size=4), chain(img)),
    "EmbeddingConcatenation": ({}, chain(seq)),
    "LastToken": ({}, embedded_and_ids),
    "SelectChannel": (dict(index=0), chain(seq)),
    "MixtureOfExperts": (dict(num_experts=2, units=4), chain(seq)),
    "TokenPositionEmbedding": (dict(max_length=12, dim=4, padding_idx=1), tokens),
}


def test_every_public_layer_is_swept():
    public = {n for n in L.__all__ if n not in ("Layer", "LAYER_TYPES")}
    assert public == set(SETUPS)


def arguments(cls):
    params = inspect.signature(cls.__init__).parameters
    return [p for p in params if p not in ("self", "name")]


def try_one(cls, kwargs, build):
    """None when attnlab handled it; else a description of the raw failure."""
    where = f"{cls.__name__}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())})"
    try:
        layer = cls(**kwargs, name="layer")
    except al.AttnlabError as e:
        return None, e
    except Exception as e:  # the point of the sweep: report, don't crash the whole test
        return f"{where}: construction raised {type(e).__name__}: {e}", None
    try:
        net = build(layer)
        analysis = net.analyze()
    except al.AttnlabError as e:
        return f"{where}: building or analysing raised {type(e).__name__}: {e}", None
    except Exception as e:
        return f"{where}: analysis raised {type(e).__name__}: {e}", None
    if not analysis.ok or any(isinstance(v, int) and v == HUGE for v in kwargs.values()):
        return None, None        # absurd sizes that analysis accepts are not run (memory)
    inputs = [torch.zeros(net.layers[n].spec.concrete(2, T)) for n in net.input_names]
    try:
        with torch.no_grad():
            net.eval()(*inputs)
    except Exception as e:
        return f"{where}: analysis ok but the forward raised {type(e).__name__}: {e}", None
    return None, None


@pytest.mark.parametrize("type_name", sorted(SETUPS))
def test_sweep(type_name):
    cls = getattr(L, type_name)
    base, build = SETUPS[type_name]
    problems = []
    assert try_one(cls, base, build) == (None, None), "the valid setup itself must run"
    for arg in arguments(cls):
        for value in BAD + ODD:
            problem, err = try_one(cls, {**base, arg: value}, build)
            if problem:
                problems.append(problem)
            elif isinstance(err, al.ArgumentError):
                msg = str(err)
                named = repr(value)[:20] in msg or isinstance(value, torch.Tensor)
                if f"'{arg}" not in msg or not named or type_name not in msg:
                    problems.append(f"{type_name}({arg}={value!r}): the message does not name the "
                                    f"layer type, the argument and the value: {msg}")
    assert not problems, "\n".join(problems)
