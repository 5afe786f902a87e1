"""Shared test helpers: single-layer networks and concrete data for specs."""
import torch

import attnlab as al
from attnlab import layers as L

B, T = 3, 6
# layer types whose input is token ids (the contract feeds them ids below 10)
ID_LAYERS = {"Embedding", "WordEmbedding"}


def input_layer_for(spec, name):
    if spec.labels == "BTC":
        return L.SequenceInput(spec.channels, length=spec.time, name=name)
    if spec.labels == "BCSS":
        return L.ImageInput(spec.sizes[1:], name=name)
    if spec.labels == "BC":
        return L.FeatureInput(spec.channels, name=name)
    raise ValueError(spec)


def single_layer_net(layer, in_specs: dict):
    """A network feeding `layer`'s ports from input layers named after the ports."""
    net = al.Network()
    for port, spec in in_specs.items():
        net.add(input_layer_for(spec, f"x_{port}"))
    net.add(layer)
    for port in in_specs:
        dst = layer.name if len(layer.input_ports) == 1 else f"{layer.name}/{port}"
        net.connect(f"x_{port}", dst)
    return net


def data_for(spec, batch=B, time=T, ints=None):
    shape = spec.concrete(batch, time)
    if ints:
        return torch.randint(0, ints, shape).float()
    return torch.randn(shape)


def concrete(spec, batch=B, time=T):
    """The shape a spec must have for data of this batch and time length."""
    return tuple(s if s is not None else {"B": batch, "T": time, "Q": time, "K": time}[l]
                 for l, s in zip(spec.labels, spec.sizes))


def naive_greedy(net, prompt, n):
    """Greedy decoding by full forward passes over the whole prefix (the definition)."""
    cur, out = prompt, []
    for _ in range(n):
        nxt = net(cur)[:, -1].argmax(-1)
        out.append(nxt)
        cur = torch.cat([cur, nxt[:, None]], 1)
    return torch.stack(out, 1)


def assert_page_clean(page, path):
    """A page opened in tests/chromium.py's browser logged no error, asked for nothing but
    itself and opened no dialog."""
    assert page.console_errors == []
    assert page.requests == [path.resolve().as_uri()]       # the page itself, nothing else
    assert page.dialogs == []
