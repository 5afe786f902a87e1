"""Layer types defined outside attnlab's core (the MATLAB front end's) register themselves when
their package is imported; `al.load` imports the packages of `attnlab.io.LAYER_PACKAGES` only
when a file names a type the layer registry does not know yet."""
import importlib
import json
import subprocess
import sys

import torch

import attnlab as al
import attnlab.io
from attnlab import layers as L
from attnlab.layers.base import LAYER_TYPES
from attnlab.matlab.mlayers import Scaling
from attnlab.matlab.vit_layers import Swish

FRESH = r"""
import json, sys, torch
import attnlab as al
before = "attnlab.matlab" in sys.modules
net = al.load(sys.argv[1])
net.eval()
with torch.no_grad():
    y = net(torch.linspace(-1, 1, 12).reshape(1, 4, 3))
print(json.dumps({"before": before, "after": "attnlab.matlab" in sys.modules,
                  "types": [l.type_name for l in net.layers], "sum": float(y.sum())}))
"""


def _load_fresh(path):
    done = subprocess.run([sys.executable, "-c", FRESH, str(path)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_file_naming_matlab_layer_types_loads_where_attnlab_matlab_was_never_imported(tmp_path):
    net = al.Network([L.SequenceInput(3, name="x"), Scaling(2.0, 0.5, name="scale"),
                      Swish(name="swish"), L.GlobalAvgPool1d(name="pool"), L.Dense(2, name="fc")])
    net.initialize()
    net.eval()
    with torch.no_grad():
        want = float(net(torch.linspace(-1, 1, 12).reshape(1, 4, 3)).sum())
    net.save(tmp_path / "m.attnlab")
    got = _load_fresh(tmp_path / "m.attnlab")
    assert got["before"] is False and got["after"] is True         # imported by the load
    assert got["types"] == ["SequenceInput", "Scaling", "Swish", "GlobalAvgPool1d", "Dense"]
    assert abs(got["sum"] - want) < 1e-5


def test_a_file_of_core_layer_types_loads_without_importing_attnlab_matlab(tmp_path):
    net = al.Network([L.SequenceInput(3), L.SelfAttention(1, 4), L.GlobalAvgPool1d(),
                      L.Dense(2)])
    net.initialize()
    net.save(tmp_path / "core.attnlab")
    got = _load_fresh(tmp_path / "core.attnlab")
    assert got == {**got, "before": False, "after": False}


def test_layer_packages_are_packages_whose_import_registers_their_types():
    assert attnlab.io.LAYER_PACKAGES == ("attnlab.layers", "attnlab.combinators", "attnlab.matlab")
    for name in attnlab.io.LAYER_PACKAGES:
        importlib.import_module(name)
    # the MATLAB front end's types, from each of its modules of layers, are in the registry
    assert LAYER_TYPES["Scaling"] is Scaling and LAYER_TYPES["Swish"] is Swish
