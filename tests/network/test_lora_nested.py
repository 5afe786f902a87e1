"""LoRA on the layers of a network used as a layer: targets named as the learnables are
('block.0/attn/query', 'block.0/fc'), and every path (forward, training, streaming, merging,
peft's files) reaches them."""
import json

import pytest
import torch

import attnlab as al
from attnlab import layers as L
from attnlab.network.lora import LoraLinear

D, V = 16, 11
TARGETS = ["block.*/attn/query", "block.*/attn/value", "block.*/mlp/gate", "block.*/fc"]
ADAPTED = [("block.0/attn", "query"), ("block.0/attn", "value"), ("block.0/mlp", "gate"),
           ("block.0/fc", None), ("block.1/attn", "query"), ("block.1/attn", "value"),
           ("block.1/mlp", "gate"), ("block.1/fc", None)]


def _block(name):
    return al.Network([L.SelfAttention(2, D, attention_mask="causal", name="attn"),
                       L.GLU(2 * D, name="mlp"), L.Dense(D, name="fc")], name=name)


def _net(seed=0):
    torch.manual_seed(seed)
    return al.Network([L.TokenInput(name="ids"), L.Embedding(V, D, name="wte"),
                       _block("block.0"), _block("block.1"), L.Dense(V, name="lm_head")]).eval()


def _ids(b=2, t=6, seed=0):
    return torch.randint(0, V, (b, t), generator=torch.Generator().manual_seed(seed))


def _trained(net, seed=1):
    """B made nonzero, as training would, so that the adapters change the outputs."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, LoraLinear):
                m.lora_B.copy_(torch.randn(m.lora_B.shape, generator=g) * 0.1)
    return net


def _adapted():
    net = _net()
    net.add_lora(TARGETS, rank=2, alpha=4)
    return _trained(net)


def test_nested_targets_adapt_the_layers_inside_and_freeze_the_rest():
    net = _net()
    assert net.add_lora(TARGETS, rank=2, alpha=4) == ADAPTED
    trainable = [n for n, p in net.learnables.items() if p.requires_grad]
    assert trainable[:4] == ["block.0/attn/query.lora_A", "block.0/attn/query.lora_B",
                             "block.0/attn/value.lora_A", "block.0/attn/value.lora_B"]
    assert "block.1/fc/lora_B" in trainable and len(trainable) == 16
    assert isinstance(net.layer_modules["block.1"].layer_modules["fc"], LoraLinear)


def test_nested_adapters_change_the_output_as_w_plus_scaled_ba():
    net, ids = _adapted(), _ids()
    ref = _net()
    ref.load_state_dict({k: v for k, v in net.state_dict().items() if "lora_" not in k})
    with torch.no_grad():
        for name, m in net.named_modules():
            if isinstance(m, LoraLinear):
                ref.get_submodule(name).weight += m.scaling * m.lora_B @ m.lora_A
        ours, theirs, plain = net(ids), ref(ids), _net()(ids)
    assert (ours - plain).abs().max() > 1e-3
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-5)


def test_training_moves_only_the_nested_adapters():
    net, ids = _net(), _ids(4, 5)
    net.add_lora(TARGETS, rank=2)
    frozen = {n: p.detach().clone() for n, p in net.learnables.items() if "lora_" not in n}
    before = net.learnables["block.1/fc/lora_B"].detach().clone()
    opts = al.TrainingOptions(solver="adam", learning_rate=1e-2, max_epochs=2, batch_size=4,
                              plots=None, device="cpu", verbose=False)
    al.train(net, ids, ids, loss="crossentropy", options=opts)
    after = net.learnables
    assert all(torch.equal(after[n], v) for n, v in frozen.items())
    assert not torch.equal(after["block.1/fc/lora_B"], before)


def test_stream_equals_the_full_forward_with_nested_adapters():
    net, ids = _adapted(), _ids()
    with torch.no_grad():
        full = net(ids)
        s = net.stream()
        steps = torch.cat([s.step(ids[:, i:i + 1]) for i in range(ids.shape[1])], dim=1)
    torch.testing.assert_close(steps, full, rtol=0, atol=1e-5)


def test_merge_folds_nested_adapters_and_leaves_a_plain_network():
    net, ids = _adapted(), _ids()
    with torch.no_grad():
        before = net(ids)
        assert net.merge_lora() == ADAPTED
        after = net(ids)
    torch.testing.assert_close(after, before, rtol=0, atol=1e-5)
    assert not any(isinstance(m, LoraLinear) for m in net.modules())
    assert type(net.layer_modules["block.0"].layer_modules["fc"]) is torch.nn.Linear
    assert list(net.learnables) == list(_net().learnables)
    assert all(p.requires_grad for p in net.parameters())
    assert net.layer_modules["block.0"].layer_modules["attn"].fusable()


def test_nested_adapters_save_and_load_round_trip(tmp_path):
    net, ids = _adapted(), _ids()
    net.save_adapter(tmp_path / "a")
    config = json.loads((tmp_path / "a" / "adapter_config.json").read_text())
    assert config["target_modules"][:2] == ["layer_modules.block.0.layer_modules.attn.query",
                                            "layer_modules.block.0.layer_modules.attn.value"]
    back = _net()
    assert back.load_adapter(tmp_path / "a") == ADAPTED
    with torch.no_grad():
        torch.testing.assert_close(back(ids), net(ids), rtol=0, atol=0)


def test_loading_an_adapter_onto_adapted_layers_is_refused_as_already_adapted(tmp_path):
    net = _adapted()
    net.save_adapter(tmp_path / "a")
    with pytest.raises(al.ArgumentError, match=r"load_adapter: 'block\.0/attn/query' already "
                                               r"has a LoRA adapter\. Call merge_lora\(\) first"):
        net.load_adapter(tmp_path / "a")


def test_nested_adapter_files_are_peft_s_names_for_the_network(tmp_path):
    """peft, given the network itself, puts the adapter on the modules the file names."""
    peft = pytest.importorskip("peft")
    net, ids = _adapted(), _ids()
    net.save_adapter(tmp_path / "a")
    theirs = peft.PeftModel.from_pretrained(_net(), tmp_path / "a").eval()
    with torch.no_grad():
        torch.testing.assert_close(theirs(ids), net(ids), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("target, message", [
    ("block.*/atn/query", r"'block\.\*/atn/query' matches no layer.*Did you mean .*"
                          r"'block\.0/attn'"),
    ("block.0/attn/querry", r"projection 'querry'.*Did you mean 'query'"),
    ("block.0/attn", r"matches 'block\.0/attn' \(SelfAttention\), none of which has a plain "
                     r"linear map"),
    ("block.0/fc/query", r"matches 'block\.0/fc' \(Dense\), none of which has a 'query' "
                         r"projection"),
])
def test_nested_targets_that_name_no_linear_map_are_refused_and_change_nothing(target, message):
    net = _net()
    with pytest.raises(al.ArgumentError, match=message):
        net.add_lora(["block.*/fc", target])
    assert not any(isinstance(m, LoraLinear) for m in net.modules())
    assert all(p.requires_grad for p in net.parameters())
