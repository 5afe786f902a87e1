"""Longrope, the rotary scaling of Phi-3: the settings' rules, the map against the formula
(short factors up to original_max_position_embeddings, long ones past it, cos and sin times
the attention factor), and steps that would cross the switch with earlier positions turned."""
import math

import pytest
import torch

import attnlab as al
from attnlab import layers as L
from attnlab.core.spec import Spec
from attnlab.functional import rules
from attnlab.functional.rotary import Rotary

SCALING = {"rope_type": "longrope", "short_factor": [1, 1.5], "long_factor": [2.0, 8.0],
           "original_max_position_embeddings": 6, "attention_factor": 1.2}


def naive(x, heads, positions, base, short, long, original, factor):
    """x B×T×(H·4): half-split rotary over all 4 channels of a head, by the formula."""
    b, t, c = x.shape
    d = c // heads
    factors = torch.tensor(long if len(positions) > original else short, dtype=torch.float64)
    inv = 1.0 / (factors * base ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    out = x.double().clone().view(b, t, heads, d)
    xh = x.double().view(b, t, heads, d)
    for p_i, p in enumerate(positions):
        for i in range(d // 2):
            a = p * inv[i]
            cos, sin = math.cos(a) * factor, math.sin(a) * factor
            x1, x2 = xh[:, p_i, :, i], xh[:, p_i, :, i + d // 2]
            out[:, p_i, :, i] = x1 * cos - x2 * sin
            out[:, p_i, :, i + d // 2] = x2 * cos + x1 * sin
    return out.view(b, t, c)


def test_the_settings_are_checked_and_canonical():
    settings = rules.rotary("attention:", {"base": 500.0, "scaling": SCALING})
    assert settings["scaling"] == {**SCALING, "short_factor": [1.0, 1.5]}
    assert rules.rotary("attention:", {"scaling": None}) == rules.rotary("attention:", True)
    assert "scaling" not in rules.rotary("attention:", True)           # the default stays as it was
    no_factor = {k: v for k, v in SCALING.items() if k != "attention_factor"}
    assert rules.rotary("attention:", {"scaling": no_factor})["scaling"]["attention_factor"] == 1.0


@pytest.mark.parametrize("scaling,words", [
    ({**SCALING, "rope_type": "ntk"}, "'rope_type' 'longrope'"),
    ({**SCALING, "beta_fast": 32}, "Remove 'beta_fast'"),
    ({**SCALING, "long_factor": [2.0, -1.0]}, "rotary['scaling']['long_factor']"),
    ({**SCALING, "original_max_position_embeddings": 0}, "original_max_position_embeddings"),
    ({**SCALING, "attention_factor": 0.0}, "attention_factor"),
])
def test_bad_settings_are_named(scaling, words):
    with pytest.raises(al.ArgumentError, match=words.replace("[", r"\[").replace("]", r"\]")):
        L.SelfAttention(2, 8, rotary={"scaling": scaling}, name="sa")


def test_one_factor_per_rotated_pair():
    with pytest.raises(al.SizeError, match=r"4 short_factors, one per pair of the 8 channels "
                                           r"of a head that rotate, received \[1.0, 1.5\]"):
        L.SelfAttention(2, 16, rotary={"scaling": SCALING}, name="sa")    # 8 per head: 4 pairs
    layer = L.SelfAttention(2, 16, rotary={"scaling": SCALING, "fraction": 0.5}, name="half")
    assert layer.infer({"in": Spec.sequence(16)})["out"].channels == 16
    with pytest.raises(al.SizeError, match="2 long_factors"):
        L.MultiHeadAttention(2, 8, rotary={"scaling": {**SCALING, "long_factor": [1.0]}})


@pytest.mark.parametrize("length", [4, 6, 7, 11])
def test_the_map_follows_the_formula_on_both_sides(length):
    torch.manual_seed(0)
    rotary = Rotary(4, 500.0, scaling=rules.rotary("a:", {"scaling": SCALING})["scaling"])
    x = torch.randn(2, length, 8, dtype=torch.float64)
    want = naive(x, 2, list(range(length)), 500.0, [1.0, 1.5], [2.0, 8.0], 6, 1.2)
    assert torch.allclose(rotary(x, 0), want, atol=1e-12)


def test_steps_within_one_side_and_a_crossing_refused():
    torch.manual_seed(0)
    rotary = Rotary(4, 500.0, scaling=rules.rotary("a:", {"scaling": SCALING})["scaling"],
                    name="sa")
    x = torch.randn(1, 9, 8, dtype=torch.float64)
    assert torch.allclose(torch.cat([rotary(x[:, :2], 0), rotary(x[:, 2:6], 2)], 1),
                          rotary(x[:, :6], 0), atol=1e-12)              # short factors
    assert torch.allclose(torch.cat([rotary(x[:, :7], 0), rotary(x[:, 7:], 7)], 1),
                          rotary(x, 0), atol=1e-12)                    # long from the start
    with pytest.raises(al.DataError, match=r"layer 'sa': rotary positions 6…6: longrope"):
        rotary(x[:, 6:7], 6)
    with pytest.raises(al.DataError, match=r"positions 4…8"):
        rotary(x[:, 4:], 4)
    assert "scaling='longrope'" in repr(rotary)
