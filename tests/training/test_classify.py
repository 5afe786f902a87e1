"""al.classify answers with labels or an attnlab error with a fix, never a raw IndexError."""
import numpy as np
import pytest
import torch

import attnlab as al
from attnlab import layers as L


def _net(classes=5, channels=3, sigmoid=False):
    torch.manual_seed(0)
    layers = [L.FeatureInput(channels, name="x"), L.Dense(classes, name="fc")]
    if sigmoid:
        layers.append(L.Sigmoid(name="p"))
    return al.Network(layers).initialize()


def _favour(net, channel, classes=5):
    """Weights that make `channel` the largest output for every input."""
    with torch.no_grad():
        net.learnables["fc/weight"].zero_()
        bias = torch.zeros(classes)
        bias[channel] = 10.0
        net.learnables["fc/bias"].copy_(bias)


def test_more_channels_than_labels_chooses_among_the_labelled_classes():
    net = _net()
    net.metadata["class_labels"] = ["a", "b", "c"]
    _favour(net, 4)                                  # a channel training never named
    with torch.no_grad():
        net.learnables["fc/bias"][1] = 5.0           # the best labelled one
    got = al.classify(net, torch.randn(4, 3))
    assert got.tolist() == ["b"] * 4


def test_the_causal_lm_case_of_one_label_too_few():
    """The old metadata of a run that took -100 for a class: ten labels, eleven channels."""
    net = _net(classes=11)
    net.metadata["class_labels"] = [-100, 1, 2, 3, 5, 6, 7, 8, 9, 10]
    _favour(net, 10, classes=11)
    got = al.classify(net, torch.randn(2, 3))
    assert got.shape == (2,) and set(got.tolist()) <= set(net.metadata["class_labels"])


def test_empty_class_labels_is_a_data_error_with_a_fix():
    net = _net()
    net.metadata["class_labels"] = []
    with pytest.raises(al.DataError) as e:
        al.classify(net, torch.randn(2, 3))
    text = str(e.value)
    assert "net.metadata['class_labels'] is empty" in text and "delete the entry" in text


@pytest.mark.parametrize("bad", ["abc", 3, [[1, 2], [3]], {"other": ["a"]}])
def test_class_labels_that_are_not_a_list_of_labels_are_a_data_error(bad):
    net = _net()
    net.metadata["class_labels"] = bad
    if isinstance(bad, dict):                        # no entry for this output: indices
        assert al.classify(net, torch.randn(2, 3)).dtype.kind == "i"
        return
    with pytest.raises(al.DataError, match=r"must be a list of label values.*delete it"):
        al.classify(net, torch.randn(2, 3))


def test_a_nan_output_is_a_data_error_naming_the_observation():
    net = _net()
    x = torch.randn(3, 3)
    x[1, 0] = float("nan")
    with pytest.raises(al.DataError) as e:
        al.classify(net, x)
    text = str(e.value)
    assert "output 'fc' is NaN for observation 1" in text and "check_finite=True" in text


def test_a_yes_without_a_label_is_a_data_error():
    net = _net(classes=1, sigmoid=True)
    net.metadata["class_labels"] = ["yes"]
    with torch.no_grad():
        net.learnables["fc/weight"].zero_()
        net.learnables["fc/bias"].fill_(3.0)
    with pytest.raises(al.DataError, match=r"one score.*only 1 label.*both classes"):
        al.classify(net, torch.randn(2, 3))
    net.metadata["class_labels"] = ["no", "yes"]
    assert al.classify(net, torch.randn(2, 3)).tolist() == ["yes", "yes"]


def test_labels_of_mixed_kinds_come_back_as_they_were():
    net = _net(classes=2)
    net.metadata["class_labels"] = [1, "two"]
    _favour(net, 0, classes=2)
    got = al.classify(net, torch.randn(2, 3))
    assert got.tolist() == [1, 1] and type(got[0]) is int       # not the string '1'


def test_an_unknown_output_is_an_argument_error():
    with pytest.raises(al.ArgumentError, match="unknown output 3"):
        al.classify(_net(), torch.randn(2, 3), output=3)


def test_a_lazy_network_classifies_without_a_warning():
    net = al.Network([L.Dense(3, name="fc")])
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = al.classify(net, torch.randn(2, 4))
    assert got.shape == (2,) and np.all((got >= 0) & (got < 3))
