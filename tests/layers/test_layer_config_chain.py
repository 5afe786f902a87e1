"""A layer keeps what it was built with: `config()` holds the options of the whole class chain,
so a subclass that passes options on to its parent through `**kwargs` or `*args` saves and
loads as the same layer; where the options cannot be named, saving refuses and says which and
what to do; the round trip that saving checks catches a config that leaves an option out."""
from __future__ import annotations

import copy

import pytest
import torch

import attnlab as al
from attnlab import layers as L
from attnlab.layers.base import LAYER_TYPES


@pytest.fixture
def registry():
    """Layer classes defined by a test leave the registry afterwards."""
    before = dict(LAYER_TYPES)
    yield
    LAYER_TYPES.clear()
    LAYER_TYPES.update(before)


def _net(layer):
    torch.manual_seed(0)
    return al.Network([L.SequenceInput(8, name="x"), layer, L.Dense(3, name="out")]).eval()


def _round_trip(net, path):
    x = torch.randn(2, 5, 8)
    net.save(path)
    again = al.load(path).eval()
    torch.testing.assert_close(again(x), net(x), atol=0, rtol=0)
    return again


def _causal_rotary(again, name="sa"):
    layer = again.layers[name]
    assert layer.attention_mask == "causal"
    assert layer.rotary == {"base": 10000.0, "fraction": 1.0, "interleaved": False}


def test_a_subclass_forwarding_kwargs_keeps_them(registry, tmp_path):
    class MySA(L.SelfAttention):
        def __init__(self, heads, dim, **kwargs):
            super().__init__(heads, dim, **kwargs)

    layer = MySA(2, 8, attention_mask="causal", rotary=True, name="sa")
    cfg = layer.config()
    assert cfg["heads"] == 2 and cfg["dim"] == 8          # its own names, read through its parent
    assert cfg["attention_mask"] == "causal" and cfg["rotary"]["base"] == 10000.0
    assert repr(layer).startswith("MySA(heads=2, dim=8, attention_mask='causal', rotary=")
    again = _round_trip(_net(layer), tmp_path / "m.attnlab")
    assert type(again.layers["sa"]) is MySA
    _causal_rotary(again)


def test_a_subclass_with_the_parents_names_keeps_its_kwargs(registry, tmp_path):
    # config() used to read only `num_heads` and `key_channels`: the loaded layer was not
    # causal and had no rotary positions, and its outputs differed
    class Causal(L.SelfAttention):
        def __init__(self, num_heads, key_channels, **kwargs):
            super().__init__(num_heads, key_channels, **kwargs)

    layer = Causal(2, 8, attention_mask="causal", rotary=True, window=3, name="sa")
    assert layer.config()["window"] == 3
    again = _round_trip(_net(layer), tmp_path / "m.attnlab")
    _causal_rotary(again)
    assert again.layers["sa"].window == 3


def test_a_subclass_forwarding_args_and_kwargs_keeps_them(registry, tmp_path):
    class Fwd(L.SelfAttention):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)

    layer = Fwd(2, 8, None, 6, attention_mask="causal", rotary=True, name="sa")
    cfg = layer.config()
    assert (cfg["num_heads"], cfg["key_channels"], cfg["value_channels"]) == (2, 8, None)
    assert cfg["output_channels"] == 6                    # named by the parent that took them
    again = _round_trip(_net(layer), tmp_path / "m.attnlab")
    _causal_rotary(again)
    assert again.layers["sa"].output_channels == 6


def test_a_subclass_with_named_and_forwarded_positionals(registry, tmp_path):
    class Heads(L.SelfAttention):
        def __init__(self, heads, *args, **kwargs):
            super().__init__(heads, *args, **kwargs)

    layer = Heads(2, 8, attention_mask="causal", rotary=True, name="sa")
    assert layer.config()["heads"] == 2 and layer.config()["key_channels"] == 8
    _causal_rotary(_round_trip(_net(layer), tmp_path / "m.attnlab"))


def test_a_subclass_that_sets_defaults_in_kwargs(registry, tmp_path):
    class Decoder(L.SelfAttention):
        def __init__(self, num_heads, key_channels, **kwargs):
            kwargs.setdefault("attention_mask", "causal")
            kwargs.setdefault("rotary", True)
            super().__init__(num_heads, key_channels, **kwargs)

    _causal_rotary(_round_trip(_net(Decoder(2, 8, name="sa")), tmp_path / "m.attnlab"))


def test_positional_args_passed_on_changed_are_refused_by_name(registry, tmp_path):
    class Twice(L.SelfAttention):
        def __init__(self, *args, **kwargs):
            super().__init__(args[0] * 2, *args[1:], **kwargs)

    layer = Twice(1, 8, attention_mask="causal", name="sa")
    assert repr(layer) == "Twice(1, 8, attention_mask='causal', name='sa')"   # as it was given
    with pytest.raises(al.NetworkError) as e:
        layer.config()
    msg = str(e.value)
    assert "layer 'sa' (Twice)" in msg and "*args (1, 8)" in msg
    assert "Give Twice.__init__ named parameters" in msg and "override Twice.config()" in msg
    net = _net(layer)
    with pytest.raises(al.NetworkError) as e:
        net.save(tmp_path / "m.attnlab")
    assert not isinstance(e.value, AttributeError)
    assert "cannot save layer 'sa' (Twice)" in str(e.value) and "*args (1, 8)" in str(e.value)
    assert not (tmp_path / "m.attnlab").exists()


def test_positional_args_without_kwargs_are_refused_by_name(registry, tmp_path):
    class Only(L.SelfAttention):         # *args alone: a file's keywords could not reach them
        def __init__(self, *args, name=None):
            super().__init__(*args, attention_mask="causal", name=name)

    with pytest.raises(al.NetworkError, match=r"\*args \(2, 8\)"):
        _net(Only(2, 8, name="sa")).save(tmp_path / "m.attnlab")


def test_the_save_round_trip_catches_a_config_that_leaves_an_option_out(registry, tmp_path):
    class Lossy(L.SelfAttention):
        def config(self):
            cfg = super().config()
            del cfg["rotary"]
            return cfg

    net = _net(Lossy(2, 8, attention_mask="causal", rotary=True, name="sa"))
    with pytest.raises(al.NetworkError) as e:
        net.save(tmp_path / "m.attnlab")
    msg = str(e.value)
    assert "cannot save layer 'sa' (Lossy)" in msg and "its option 'rotary'" in msg
    assert "override config()" in msg
    assert not (tmp_path / "m.attnlab").exists()


def test_a_copied_layer_keeps_its_options(registry, tmp_path):
    class MySA(L.SelfAttention):
        def __init__(self, heads, dim, **kwargs):
            super().__init__(heads, dim, **kwargs)

    net = _net(MySA(2, 8, attention_mask="causal", rotary=True, name="sa"))
    twin = copy.deepcopy(net)
    assert twin.layers["sa"].config() == net.layers["sa"].config()
    _causal_rotary(_round_trip(twin, tmp_path / "m.attnlab"))
