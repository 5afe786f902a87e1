"""MATLAB's weight names of a self-attention layer follow the biases it has: none with
`projection_bias=False`, no `OutputBias` with `output_bias=False` (Qwen2's attention)."""
import pytest

import attnlab as al
from attnlab import layers as L
from attnlab.matlab.weights import getLayerWeights, setLayerWeights

WEIGHTS = {"QueryWeights", "KeyWeights", "ValueWeights", "OutputWeights"}


@pytest.mark.parametrize("options, biases", [
    ({}, {"QueryBias", "KeyBias", "ValueBias", "OutputBias"}),
    ({"projection_bias": False}, set()),
    ({"output_bias": False}, {"QueryBias", "KeyBias", "ValueBias"}),
    ({"projection_bias": False, "output_bias": True}, {"OutputBias"}),
])
def test_the_weight_names_are_those_of_the_biases_the_layer_has(options, biases):
    net = al.Network([L.SequenceInput(8), L.SelfAttention(2, 8, name="sa", **options)])
    net.initialize()
    got = getLayerWeights(net, "sa")
    assert set(got) == WEIGHTS | biases
    for name in biases:                   # each one the layer's own
        assert got[name].shape == (8, 1)


def test_a_bias_the_layer_lacks_is_named_when_set():
    net = al.Network([L.SequenceInput(8), L.SelfAttention(2, 8, output_bias=False, name="sa")])
    net.initialize()
    with pytest.raises(al.ArgumentError, match="no property 'OutputBias'.*QueryBias"):
        setLayerWeights(net, "sa", OutputBias=[0.0] * 8)
