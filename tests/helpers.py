"""Shared test helpers: single-layer networks and concrete data for specs; worker processes
run in a process group of their own; a page's clean load in the browser."""
import os
import signal
import subprocess
from pathlib import Path

import pytest
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


ROOT = Path(__file__).resolve().parents[1]


def worker_env() -> dict:
    """The environment of a worker process the tests start (tests/*_worker.py): one thread,
    attnlab importable from this checkout, no torchrun variables inherited."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    env.pop("WORLD_SIZE", None)
    return env


def run_in_group(cmd: list, timeout: float) -> subprocess.CompletedProcess:
    """Runs `cmd` (worker_env, in the repository root) in its own process group and, on a
    timeout, kills the whole group and fails the test: torchrun's workers would otherwise
    outlive the launcher."""
    proc = subprocess.Popen([str(c) for c in cmd], env=worker_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{' '.join(map(str, cmd[-4:]))} did not finish in {timeout} s:\n"
                    f"{out[-2000:]}{err[-2000:]}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
