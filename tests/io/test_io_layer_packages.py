"""Layer types defined outside attnlab's core (the MATLAB front end's image-sequence layers)
register themselves when their package is imported; `al.load` imports the packages of
`attnlab.io.LAYER_PACKAGES` only when a file names a type the layer registry does not know yet.
The generic layers the MATLAB functions make (Scaling, Swish, Pool1d, …) are core layers: a file
naming them loads without attnlab.matlab."""
import importlib
import json
import subprocess
import sys

import torch

import attnlab as al
import attnlab.io
from attnlab import layers as L
from attnlab.layers.base import LAYER_TYPES
from attnlab.matlab.mlayers import FrameFlatten

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


def _save_and_run(net, path):
    net.initialize()
    net.eval()
    with torch.no_grad():
        want = float(net(torch.linspace(-1, 1, 12).reshape(1, 4, 3)).sum())
    net.save(path)
    return want, _load_fresh(path)


def test_a_file_naming_matlab_layer_types_loads_where_attnlab_matlab_was_never_imported(tmp_path):
    net = al.Network([L.SequenceInput(3, name="x"), FrameFlatten((1, 1, 3), name="flat"),
                      L.Scaling(2.0, 0.5, name="scale"), L.GlobalAvgPool1d(name="pool"),
                      L.Dense(2, name="fc")])
    want, got = _save_and_run(net, tmp_path / "m.attnlab")
    assert got["before"] is False and got["after"] is True         # imported by the load
    assert got["types"] == ["SequenceInput", "FrameFlatten", "Scaling", "GlobalAvgPool1d",
                            "Dense"]
    assert abs(got["sum"] - want) < 1e-5


def test_a_file_naming_the_generic_layers_matlab_makes_loads_without_attnlab_matlab(tmp_path):
    # the type names files written before carry: now core layer types
    net = al.Network([L.SequenceInput(3, name="x"), L.Scaling(2.0, 0.5, name="scale"),
                      L.Swish(name="swish"), L.Pool1d("max", 2, 1, name="p1"),
                      L.InputNormalization("zscore", mean=0.5, std=2.0, name="norm"),
                      L.Identity(name="id"), L.SpatialDropout(0.2, name="sd"),
                      L.TanhGELU(name="gelu"), L.EmbeddingConcatenation(name="cls"),
                      L.GlobalAvgPool1d(name="pool"), L.Dense(2, name="fc")])
    want, got = _save_and_run(net, tmp_path / "g.attnlab")
    assert got["before"] is False and got["after"] is False
    assert got["types"] == ["SequenceInput", "Scaling", "Swish", "Pool1d", "InputNormalization",
                            "Identity", "SpatialDropout", "TanhGELU", "EmbeddingConcatenation",
                            "GlobalAvgPool1d", "Dense"]
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
    # the MATLAB front end's own types are in the registry, and the generic ones it makes are
    # the core layers, under the same names
    assert LAYER_TYPES["FrameFlatten"] is FrameFlatten
    assert LAYER_TYPES["Scaling"] is L.Scaling and LAYER_TYPES["Swish"] is L.Swish


def test_the_generic_layer_types_are_attnlab_layers_and_still_reachable_from_attnlab_matlab():
    import attnlab.matlab as M
    from attnlab.matlab import mlayers, vit_layers
    moved = ["InputNormalization", "Pool1d", "Scaling", "Identity", "GroupedConv2d",
             "SpatialDropout", "PatchEmbedding", "EmbeddingConcatenation", "Swish", "TanhGELU"]
    for name in moved:
        cls = getattr(L, name)
        assert name in L.__all__ and cls.__module__.startswith("attnlab.layers.")
        assert getattr(M, name) is cls and LAYER_TYPES[name] is cls
        assert getattr(mlayers, name, None) in (None, cls)
        assert getattr(vit_layers, name, None) in (None, cls)
    # the MATLAB functions make the same types
    assert type(M.swishLayer()) is L.Swish and type(M.scalingLayer(Scale=2)) is L.Scaling
    assert type(M.maxPooling1dLayer(2)) is L.Pool1d
    assert type(M.identityLayer()) is L.Identity
    assert type(M.spatialDropoutLayer()) is L.SpatialDropout
