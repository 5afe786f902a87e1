"""A network of unknown sizes answers `parameters()` as torch's lazy modules do, whoever asks:
the parameters known so far, a warning once; training refuses where it would start."""
import pathlib
import re
import warnings

import pytest
import torch

import attnlab as al
from attnlab import layers as L
from attnlab.training import setup

# the modules a call may come from: torch, attnlab, and the libraries and users around them
CALLERS = ("torch.optim.custom", "attnlab.something", "peft.tuners.lora", "lightning.pytorch.core",
           "accelerate.accelerator", "__main__", "my_training_script")


def _lazy():
    return al.Network([L.Dense(3, name="fc"), L.ReLU(name="relu")])


def _call_from(module: str, code: str, net):
    """Runs `code` as if written in `module` (its globals' __name__), returning `result`."""
    scope = {"__name__": module, "net": net, "torch": torch}
    exec(compile(code, f"<{module}>", "exec"), scope)
    return scope["result"]


@pytest.mark.parametrize("caller", CALLERS)
def test_parameters_of_a_lazy_network_are_the_same_for_every_caller(caller):
    net = _lazy()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        params = _call_from(caller, "result = list(net.parameters())", net)
        named = _call_from(caller, "result = dict(net.named_parameters())", net)
    assert params == [] and named == {}
    lazy = [w for w in caught if issubclass(w.category, UserWarning)
            and "no input layers" in str(w.message)]
    assert len(lazy) == 1                                     # once per network
    text = str(lazy[0].message)
    assert "net.initialize(example_inputs)" in text and "input layer" in text


def test_the_warning_comes_once_per_network_whoever_asks_first():
    net = _lazy()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for caller in CALLERS:
            _call_from(caller, "result = list(net.parameters())", net)
        net.state_dict()
        net.zero_grad()
        other = _lazy()
        _call_from("peft.tuners.lora", "result = list(net.parameters())", other)
    assert len([w for w in caught if "no input layers" in str(w.message)]) == 2


def test_an_optimizer_by_hand_hears_of_it_before_torch_refuses_the_empty_list():
    net = _lazy()
    with pytest.warns(UserWarning, match=r"no input layers.*net.initialize\(example_inputs\)"):
        with pytest.raises(ValueError, match="empty parameter list"):
            torch.optim.Adam(net.parameters())


def test_sized_networks_answer_without_a_warning():
    net = _lazy()
    net.initialize(torch.zeros(1, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for caller in CALLERS:
            shapes = _call_from(caller, "result = [tuple(p.shape) for p in net.parameters()]", net)
            assert shapes == [(3, 4), (3,)]
        with_inputs = al.Network([L.FeatureInput(4), L.Dense(3)])
        assert len(list(with_inputs.parameters())) == 2           # built on first need


def test_train_sizes_a_lazy_network_from_its_data():
    net = _lazy()
    al.train(net, torch.randn(6, 4), torch.tensor([0, 1, 2, 0, 1, 2]), max_epochs=1,
             verbose=False)
    assert [tuple(p.shape) for p in net.parameters()] == [(3, 4), (3,)]


def test_train_refuses_a_network_whose_sizes_stay_unknown(monkeypatch):
    monkeypatch.setattr(setup, "initialize", lambda net, X, seed: None)
    with pytest.raises(al.NetworkError) as e:
        al.train(_lazy(), torch.randn(6, 4), torch.tensor([0, 1, 2, 0, 1, 2]), max_epochs=1,
                 verbose=False)
    text = str(e.value)
    assert "train:" in text and "net.initialize(example_inputs)" in text
    assert "input layer" in text and "would train nothing" in text


def test_no_package_code_asks_who_called_it():
    """Only the MATLAB interpreter reads the stack, to budget its own recursion depth."""
    root = pathlib.Path(al.__file__).parent
    found = [str(p.relative_to(root)) for p in root.rglob("*.py")
             if re.search(r"sys\._getframe|inspect\.(stack|currentframe|getouterframes)|f_back",
                          p.read_text(encoding="utf-8"))]
    assert found == [str(pathlib.Path("matlab", "interpreter.py"))]
