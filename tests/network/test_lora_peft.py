"""LoRA adapters in peft's layout: `net.save_adapter` read by peft on the Hugging Face model,
and `net.load_adapter` reading what peft saved."""
import json
import warnings

import pytest
import torch

import attnlab as al
from attnlab import layers as L
from pretrained_helpers import (quiet_transformers, relative_difference, save_checkpoint,
                                tiny_gpt2)

transformers = pytest.importorskip("transformers")
peft = pytest.importorskip("peft")
quiet_transformers()
VOCAB = 50


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2,
                                   vocab_size=VOCAB, tie_word_embeddings=False)
    return save_checkpoint(transformers.LlamaForCausalLM(cfg), tmp_path_factory.mktemp("llama"))


def _ids():
    return torch.randint(0, VOCAB, (2, 7), generator=torch.Generator().manual_seed(0))


def _random_b(modules, seed=1):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in modules:
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.1)


def test_saved_adapter_gives_peft_the_same_outputs(llama, tmp_path):
    folder = llama
    hf = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    with torch.no_grad():
        plain = hf(input_ids=_ids()).logits
    net = al.from_pretrained(folder).eval()
    net.add_lora(["layers.*.self_attn/query", "layers.*.self_attn/value",
                  "layers.*.mlp.down_proj"], rank=4, alpha=8)
    _random_b(net.named_parameters())
    net.save_adapter(tmp_path / "adapter")
    config = json.loads((tmp_path / "adapter" / "adapter_config.json").read_text())
    assert config["peft_type"] == "LORA" and config["r"] == 4 and config["lora_alpha"] == 8
    assert "model.layers.0.self_attn.q_proj" in config["target_modules"]
    from safetensors.torch import load_file
    keys = load_file(str(tmp_path / "adapter" / "adapter_model.safetensors"))
    assert "base_model.model.model.layers.1.mlp.down_proj.lora_B.weight" in keys
    theirs = peft.PeftModel.from_pretrained(hf, tmp_path / "adapter").eval()
    with torch.no_grad():
        ours, ref = net(input_ids=_ids()), theirs(input_ids=_ids()).logits
    assert relative_difference(ours, plain) > 1e-3      # the adapters are on both paths
    assert relative_difference(ours, ref) <= 1e-4


def test_adapter_saved_by_peft_loads_with_the_same_outputs(llama, tmp_path):
    folder = llama
    hf = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    cfg = peft.LoraConfig(r=2, lora_alpha=6, target_modules=["k_proj", "o_proj", "down_proj"])
    model = peft.get_peft_model(hf, cfg)
    _random_b(model.named_parameters(), seed=2)
    model.save_pretrained(tmp_path / "from_peft")
    net = al.from_pretrained(folder).eval()
    with torch.no_grad():
        plain = net(input_ids=_ids())
    got = net.load_adapter(tmp_path / "from_peft")
    assert got == [("layers.0.self_attn", "key"), ("layers.0.self_attn", "output"),
                   ("layers.0.mlp.down_proj", None), ("layers.1.self_attn", "key"),
                   ("layers.1.self_attn", "output"), ("layers.1.mlp.down_proj", None)]
    with torch.no_grad():
        ours, ref = net(input_ids=_ids()), model(input_ids=_ids()).logits
    assert relative_difference(ours, plain) > 1e-3
    assert relative_difference(ours, ref) <= 1e-4


def test_save_then_load_round_trips_on_a_plain_network(tmp_path):
    def make():
        torch.manual_seed(0)
        return al.Network([L.SequenceInput(8, name="x"),
                           L.SelfAttention(2, 8, name="att"), L.Dense(3, name="fc")]).eval()
    net, x = make(), torch.randn(2, 4, 8)
    net.add_lora(["att/query", "fc"], rank=2, alpha=4)
    _random_b(net.named_parameters())
    net.save_adapter(tmp_path / "a")
    config = json.loads((tmp_path / "a" / "adapter_config.json").read_text())
    assert config["target_modules"] == ["layer_modules.att.query", "layer_modules.fc"]
    assert config["fan_in_fan_out"] is False
    back = make()
    assert back.load_adapter(tmp_path / "a") == [("att", "query"), ("fc", None)]
    with torch.no_grad():
        torch.testing.assert_close(back(x), net(x), rtol=0, atol=0)


def test_gpt2_fused_qkv_adapter_gives_peft_the_same_outputs(tmp_path):
    folder = tiny_gpt2(tmp_path / "gpt2", VOCAB)[1]
    hf = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    net = al.from_pretrained(folder).eval()
    net.add_lora(["h.*.attn/query", "h.*.attn/value", "h.1.mlp.c_fc"], rank=2, alpha=3)
    _random_b(net.named_parameters())
    net.save_adapter(tmp_path / "a")
    config = json.loads((tmp_path / "a" / "adapter_config.json").read_text())
    # c_attn holds q|k|v: two adapted parts make one adapter of rank 4, alpha 6 (same scaling)
    assert (config["r"], config["lora_alpha"]) == (4, 6)
    assert config["target_modules"] == ["transformer.h.0.attn.c_attn",
                                        "transformer.h.1.attn.c_attn", "transformer.h.1.mlp.c_fc"]
    assert config["rank_pattern"] == {"transformer.h.1.mlp.c_fc": 2}
    assert config["alpha_pattern"] == {"transformer.h.1.mlp.c_fc": 3}
    assert config["fan_in_fan_out"] is True                 # GPT-2's Conv1D: in×out weights
    with torch.no_grad(), warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*fan_in_fan_out")
        plain = hf(input_ids=_ids()).logits
        theirs = peft.PeftModel.from_pretrained(hf, tmp_path / "a").eval()
        ours, ref = net(input_ids=_ids()), theirs(input_ids=_ids()).logits
    assert relative_difference(ours, plain) > 1e-3
    assert relative_difference(ours, ref) <= 1e-4
    back = al.from_pretrained(folder).eval()                # and read back, patterns and all
    assert back.load_adapter(tmp_path / "a") == [
        ("h.0.attn", "query"), ("h.0.attn", "key"), ("h.0.attn", "value"),
        ("h.1.attn", "query"), ("h.1.attn", "key"), ("h.1.attn", "value"),
        ("h.1.mlp.c_fc", None)]
    with torch.no_grad():
        assert relative_difference(back(input_ids=_ids()), ours) <= 1e-5


def test_gpt2_c_attn_adapter_saved_by_peft_loads_with_the_same_outputs(tmp_path):
    folder = tiny_gpt2(tmp_path / "gpt2", VOCAB)[1]
    hf = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    model = peft.get_peft_model(hf, peft.LoraConfig(r=3, lora_alpha=5, fan_in_fan_out=True,
                                                    target_modules=["c_attn", "c_proj"]))
    _random_b(model.named_parameters(), seed=4)
    model.save_pretrained(tmp_path / "from_peft")
    net = al.from_pretrained(folder).eval()
    got = net.load_adapter(tmp_path / "from_peft")
    assert ("h.0.attn", "key") in got and ("h.1.mlp.c_proj", None) in got
    assert net.layer_modules["h.0.attn"].query.lora_A.shape == (3, 16)
    with torch.no_grad():
        ours, ref = net(input_ids=_ids()), model(input_ids=_ids()).logits
        plain = al.from_pretrained(folder)(input_ids=_ids())
    assert relative_difference(ours, plain) > 1e-3
    assert relative_difference(ours, ref) <= 1e-4


def test_adapter_for_another_model_is_refused_and_changes_nothing(llama, tmp_path):
    folder = llama
    net = al.from_pretrained(folder)
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "adapter_config.json").write_text(json.dumps(
        {"peft_type": "LORA", "r": 2, "lora_alpha": 4, "target_modules": ["c_attn"]}))
    from safetensors.torch import save_file
    save_file({"base_model.model.transformer.h.0.attn.c_attn.lora_A.weight": torch.zeros(2, 32),
               "base_model.model.transformer.h.0.attn.c_attn.lora_B.weight": torch.zeros(96, 2)},
              str(tmp_path / "a" / "adapter_model.safetensors"))
    with pytest.raises(al.DataError, match=r"'base_model\.model\.transformer\.h\.0\.attn\.c_attn"
                                           r"\.lora_A\.weight' names no linear map"):
        net.load_adapter(tmp_path / "a")
    assert all(p.requires_grad for p in net.parameters())


def test_dora_is_refused(tmp_path):
    (tmp_path / "adapter_config.json").write_text(json.dumps(
        {"peft_type": "LORA", "r": 2, "lora_alpha": 4, "use_dora": True}))
    net = al.Network([L.SequenceInput(4, name="x"), L.Dense(3, name="fc")])
    with pytest.raises(al.DataError, match=r"use_dora=True.*plain LoRA"):
        net.load_adapter(tmp_path)


def test_merging_an_adapter_on_a_tied_weight_is_refused(tmp_path):
    net = al.from_pretrained(tiny_gpt2(tmp_path, VOCAB, n_layer=1)[1])
    assert net.analyze().shared == {"lm_head/weight": "wte/weight"}
    net.add_lora(["h.0.attn/query", "lm_head"], rank=2)
    with torch.no_grad():
        net.layer_modules["lm_head"].lora_B.fill_(0.1)
    before = {n: p.detach().clone() for n, p in net.learnables.items()}
    with pytest.raises(al.NetworkError, match=r"merge_lora: the weight of lm_head is tied to "
                                              r"another learnable"):
        net.merge_lora()
    assert all(torch.equal(net.learnables[n], v) for n, v in before.items())
    assert "lm_head/lora_A" in net.learnables and "h.0.attn/query.lora_B" in net.learnables



# -- Llama's MLP: gate_proj and up_proj are the two maps of one GLU layer in attnlab ----------
FAMILIES = {          # model type → (config class, model class, extra config)
    "llama": ("LlamaConfig", "LlamaForCausalLM", {}),
    "mistral": ("MistralConfig", "MistralForCausalLM", {}),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {}),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {"head_dim": 8}),
    "gemma": ("GemmaConfig", "GemmaForCausalLM", {"head_dim": 8}),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", {"head_dim": 8}),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", {"pad_token_id": 0}),   # gate_up_proj: one tensor
}
EVERY_PROJECTION = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def _agrees_with_peft(net, folder, adapter):
    """`net`, adapted, gives what peft gives with the adapter it saved, and not what the
    checkpoint in `folder` gives without it."""
    hf = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    theirs = peft.PeftModel.from_pretrained(hf, adapter).eval()
    with torch.no_grad():
        ours, ref = net(input_ids=_ids()), theirs(input_ids=_ids()).logits
        plain = al.from_pretrained(folder)(input_ids=_ids())
    assert relative_difference(ours, plain) > 1e-3
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-5)


def _family(kind, folder):
    config_class, model_class, extra = FAMILIES[kind]
    torch.manual_seed(0)
    cfg = getattr(transformers, config_class)(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=VOCAB, **extra)
    return save_checkpoint(getattr(transformers, model_class)(cfg), folder)


def _peft_targets(kind):
    # Phi-3's checkpoint holds q|k|v in qkv_proj and gate|up in gate_up_proj
    return ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"] if kind == "phi3" else \
        EVERY_PROJECTION


@pytest.mark.parametrize("kind", sorted(FAMILIES))
def test_adapter_on_every_projection_saved_by_peft_loads_with_the_same_outputs(kind, tmp_path):
    folder = _family(kind, tmp_path / kind)
    hf = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    model = peft.get_peft_model(hf, peft.LoraConfig(r=2, lora_alpha=6,
                                                    target_modules=_peft_targets(kind)))
    _random_b(model.named_parameters(), seed=5)
    model.save_pretrained(tmp_path / "from_peft")
    net = al.from_pretrained(folder).eval()
    with torch.no_grad():
        plain = net(input_ids=_ids())
    got = net.load_adapter(tmp_path / "from_peft")
    assert got[4:7] == [("layers.0.mlp.gate_up_proj", "gate"), ("layers.0.mlp.gate_up_proj", "up"),
                        ("layers.0.mlp.down_proj", None)]
    assert len(got) == 14
    with torch.no_grad():
        ours, ref = net(input_ids=_ids()), model(input_ids=_ids()).logits
    assert relative_difference(ours, plain) > 1e-3
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", sorted(FAMILIES))
def test_adapter_on_every_projection_gives_peft_the_same_outputs(kind, tmp_path):
    folder = _family(kind, tmp_path / kind)
    net = al.from_pretrained(folder).eval()
    got = net.add_lora(["layers.*.self_attn/*", "layers.*.mlp.gate_up_proj/gate",
                        "layers.*.mlp.gate_up_proj/up", "layers.*.mlp.down_proj"],
                       rank=2, alpha=4)
    assert len(got) == 14
    _random_b(net.named_parameters(), seed=6)
    net.save_adapter(tmp_path / "a")
    config = json.loads((tmp_path / "a" / "adapter_config.json").read_text())
    hf_names = [n for n, _ in transformers.AutoModelForCausalLM.from_pretrained(folder)
                .named_modules()]
    assert set(config["target_modules"]) <= set(hf_names)
    if kind != "phi3":
        assert "model.layers.1.mlp.up_proj" in config["target_modules"]
    _agrees_with_peft(net, folder, tmp_path / "a")


def test_a_hugging_face_module_name_as_target_is_refused_naming_attnlabs(llama):
    net = al.from_pretrained(llama)
    with pytest.raises(al.ArgumentError, match=r"'layers\.\*\.mlp\.gate_proj' matches no layer"
                                               r".*Hugging Face's module 'model\.layers\.0\.mlp"
                                               r"\.gate_proj' is the target 'layers\.0\.mlp\."
                                               r"gate_up_proj/gate' here"):
        net.add_lora("layers.*.mlp.gate_proj")
    assert all(p.requires_grad for p in net.parameters())


def test_gate_and_up_of_a_glu_are_targets_on_any_network():
    torch.manual_seed(0)
    net = al.Network([L.SequenceInput(8, name="x"), L.GLU(16, name="mlp"),
                      L.Dense(8, name="down")]).eval()
    x = torch.randn(2, 3, 8)
    assert net.add_lora("mlp/*", rank=2) == [("mlp", "gate"), ("mlp", "up")]
    _random_b(net.named_parameters(), seed=7)
    glu = net.layer_modules["mlp"]
    with torch.no_grad():
        ours = net(x)
        gate = x @ (glu.gate.weight + glu.gate.scaling * glu.gate.lora_B @ glu.gate.lora_A).T
        up = x @ (glu.up.weight + glu.up.scaling * glu.up.lora_B @ glu.up.lora_A).T
        ref = net.layer_modules["down"](torch.nn.functional.silu(gate) * up)
        torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-6)
        net.merge_lora()
        torch.testing.assert_close(net(x), ours, rtol=1e-5, atol=1e-6)
    assert type(net.layer_modules["mlp"].gate) is torch.nn.Linear


@pytest.mark.parametrize("key, value", [
    ("alora_invocation_tokens", [3, 4]),      # the adapter acts only after these tokens
    ("layer_replication", [[0, 1], [0, 1]]),  # a model with its layers repeated
    ("lora_bias", True),                      # lora_B with a bias
    ("use_qalora", True),                     # A reads pooled inputs
])
def test_peft_settings_that_change_the_computation_are_refused(key, value, tmp_path):
    net = al.Network([L.SequenceInput(4, name="x"), L.Dense(3, name="fc")])
    net.add_lora("fc", rank=2)
    net.save_adapter(tmp_path)                # tensors that would load, under this setting
    config = json.loads((tmp_path / "adapter_config.json").read_text())
    (tmp_path / "adapter_config.json").write_text(json.dumps({**config, key: value}))
    fresh = al.Network([L.SequenceInput(4, name="x"), L.Dense(3, name="fc")])
    with pytest.raises(al.DataError, match=rf"sets {key}=.*changes what the adapter computes"):
        fresh.load_adapter(tmp_path)
    assert not any("lora" in n for n in fresh.learnables)


def test_a_target_matching_nothing_on_an_edited_checkpoint_network_is_still_add_loras_error(
        llama):
    net = al.from_pretrained(llama)
    net.replace("norm", L.LayerNorm(name="norm"))       # no longer what its config.json says
    with pytest.raises(al.ArgumentError, match=r"'layers\.\*\.mlp\.gate_proj' matches no "
                                               r"layer.*Did you mean 'layers\.1\.mlp\.gate_up"):
        net.add_lora("layers.*.mlp.gate_proj")


# -- ranks and alphas per module: peft's rank_pattern and alpha_pattern ---------------------
def test_adapter_with_rank_and_alpha_patterns_loads_and_saves_with_the_same_outputs(llama,
                                                                                    tmp_path):
    hf = transformers.AutoModelForCausalLM.from_pretrained(llama).eval()
    cfg = peft.LoraConfig(r=2, lora_alpha=6, target_modules=EVERY_PROJECTION,
                          rank_pattern={"q_proj": 4, "layers.1.mlp.down_proj": 3},
                          alpha_pattern={"o_proj": 10, r"layers\.0\.mlp\.up_proj": 2})
    model = peft.get_peft_model(hf, cfg)
    _random_b(model.named_parameters(), seed=8)
    model.save_pretrained(tmp_path / "from_peft")
    net = al.from_pretrained(llama).eval()
    net.load_adapter(tmp_path / "from_peft")
    attn = net.layer_modules["layers.1.self_attn"]
    assert (attn.query.rank, attn.output.rank, attn.output.alpha) == (4, 2, 10)
    assert net.layer_modules["layers.1.mlp.down_proj"].rank == 3
    assert net.layer_modules["layers.0.mlp.gate_up_proj"].up.alpha == 2
    with torch.no_grad():
        ours, ref = net(input_ids=_ids()), model(input_ids=_ids()).logits
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-5)
    net.save_adapter(tmp_path / "again")                    # and back, ranks and alphas kept
    config = json.loads((tmp_path / "again" / "adapter_config.json").read_text())
    assert (config["r"], config["lora_alpha"]) == (2, 6)
    assert config["rank_pattern"]["model.layers.0.self_attn.q_proj"] == 4
    assert config["alpha_pattern"]["model.layers.1.self_attn.o_proj"] == 10
    hf = transformers.AutoModelForCausalLM.from_pretrained(llama).eval()
    theirs = peft.PeftModel.from_pretrained(hf, tmp_path / "again").eval()
    with torch.no_grad():
        torch.testing.assert_close(theirs(input_ids=_ids()).logits, ours, rtol=1e-5, atol=1e-5)


def test_adapters_of_several_add_lora_calls_save_with_their_own_ranks(llama, tmp_path):
    net = al.from_pretrained(llama).eval()
    net.add_lora("layers.*.self_attn/query", rank=2, alpha=4)
    net.add_lora("layers.*.mlp.down_proj", rank=3, alpha=9)
    _random_b(net.named_parameters(), seed=9)
    net.save_adapter(tmp_path / "a")
    _agrees_with_peft(net, llama, tmp_path / "a")


def test_parts_of_one_tensor_scaled_apart_are_refused(tmp_path):
    net = al.from_pretrained(tiny_gpt2(tmp_path / "g", VOCAB, n_layer=1)[1])
    net.add_lora("h.0.attn/query", rank=2, alpha=4)
    net.add_lora("h.0.attn/value", rank=2, alpha=8)
    with pytest.raises(al.NetworkError, match=r"parts of 'transformer\.h\.0\.attn\.c_attn' "
                                              r"\(h\.0\.attn/query\.weight, h\.0\.attn/value"
                                              r"\.weight\) have different scalings"):
        net.save_adapter(tmp_path / "a")
    assert not (tmp_path / "a").exists()


def test_adapter_files_of_an_edited_checkpoint_network_are_refused_in_their_own_words(
        llama, tmp_path):
    saved = al.from_pretrained(llama)
    saved.add_lora("layers.*.self_attn/query", rank=2)
    saved.save_adapter(tmp_path / "a")
    for adapted in (True, False):
        net = al.from_pretrained(llama)
        if adapted:
            net.add_lora("layers.*.self_attn/query", rank=2)
        net.replace("norm", L.LayerNorm(name="norm"))   # no longer what its config.json says
        call = net.save_adapter if adapted else net.load_adapter
        with pytest.raises(al.NetworkError, match=rf"^{call.__name__}: the adapter's module names"
                                                  r".*edited past what its config\.json says"):
            call(tmp_path / ("b" if adapted else "a"))
    assert not (tmp_path / "b").exists()
