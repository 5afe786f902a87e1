"""A family added from outside the package with `register_family`: Qwen2 as a description
(Llama's, with query/key/value biases), loaded equal to transformers, generating the same
tokens, saved back; a loading function as a family; the loader's checks for both."""
import dataclasses
import json

import pytest
import torch

import attnlab as al
from attnlab.pretrained import FAMILIES, CheckpointError, W, keys, llama, register_family
from pretrained_helpers import hf_greedy, layout, quiet_transformers, relative_difference

transformers = pytest.importorskip("transformers")
quiet_transformers()

VOCAB = 64


# -- the Qwen2 description, as a user writes it ------------------------------------------------
def full_attention(cfg):
    """Qwen2's sliding window is off unless use_sliding_window (refused below)."""
    types = cfg.get("layer_types", None)
    if types is not None and (not isinstance(types, list)
                              or any(t != "full_attention" for t in types)):
        raise cfg.unsupported("layer_types", types, 'every layer "full_attention"')
    return None


def qwen2_block(cfg):
    """Llama's block with biases on q, k and v (none on o: a zero bias the file lacks)."""
    return llama.ATTENTION + llama.biases(llama.ATTENTION[:3]) + \
        [W("self_attn.o_proj.bias", "self_attn/output.bias", zero=True)] + llama.MLP + llama.NORMS


QWEN2 = dataclasses.replace(
    llama.FAMILY,
    architectures=("Qwen2ForCausalLM", "Qwen2Model"),
    keys=keys(read="vocab_size hidden_size intermediate_size num_hidden_layers "
                   "num_attention_heads num_key_value_heads head_dim hidden_act "
                   "max_position_embeddings rms_norm_eps attention_dropout tie_word_embeddings "
                   "rope_theta rope_scaling layer_types",
              fixed={"use_sliding_window": (False,)},
              ignored="sliding_window max_window_layers"),      # only with use_sliding_window
    heads={"Qwen2ForCausalLM": "lm", "Qwen2Model": "hidden"},
    block_table=qwen2_block,
    attention_bias=True, mlp_bias=False, window=full_attention,
)
# -- end of the description --------------------------------------------------------------------


@pytest.fixture
def qwen2_registered():
    built_in = FAMILIES["qwen2"]             # the package's own, back after each test
    register_family("qwen2", QWEN2)
    yield
    FAMILIES["qwen2"] = built_in


def checkpoint(folder, cls="Qwen2ForCausalLM", **over):
    torch.manual_seed(0)
    kw = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
              initializer_range=0.4, tie_word_embeddings=False, pad_token_id=0)
    kw.update(over)
    model = getattr(transformers, cls)(transformers.Qwen2Config(**kw)).eval()
    with torch.no_grad():                  # biases and norms other than 0 and 1: tested
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith("bias"):
                p.add_(0.3 * torch.randn_like(p))
    model.save_pretrained(folder)
    return model


@pytest.fixture
def qwen2(tmp_path, qwen2_registered):
    return tmp_path, checkpoint(tmp_path)


def test_the_description_is_short():
    text = open(__file__).read()
    part = text[text.index("# -- the Qwen2 description"):text.index("# -- end of the description")]
    assert len(part.splitlines()) <= 40


def test_registered_qwen2_equals_transformers(qwen2):
    folder, model = qwen2
    net = al.from_pretrained(folder)
    ids = torch.randint(0, VOCAB, (2, 9))
    with torch.no_grad():
        want = model(input_ids=ids).logits
    assert relative_difference(net(ids), want) <= 1e-4
    assert net.analyze().total_learnables == model.num_parameters() + 2 * 32   # + the zero o bias
    assert not net.learnables["layers.0.self_attn/output.bias"].any()


def test_registered_qwen2_base_model_equals_transformers(tmp_path, qwen2_registered):
    model = checkpoint(tmp_path, "Qwen2Model")
    net = al.from_pretrained(tmp_path)
    ids = torch.randint(0, VOCAB, (1, 6))
    with torch.no_grad():
        want = model(input_ids=ids).last_hidden_state
    assert net.output_names == ["last_hidden_state"]
    assert relative_difference(net(ids), want) <= 1e-4


def test_registered_qwen2_greedy_generation_equals_transformers(qwen2):
    folder, model = qwen2
    net = al.from_pretrained(folder)
    prompt = torch.randint(3, VOCAB, (2, 5))
    ours = al.generate(net, start=prompt, stop=None, max_new_tokens=10).tokens
    assert ours.tolist() == hf_greedy(model, prompt, 10).tolist()


def test_registered_qwen2_saved_back_loads_in_transformers(qwen2, tmp_path_factory):
    folder, model = qwen2
    net = al.from_pretrained(folder)
    with torch.no_grad():
        net.learnables["layers.1.self_attn/query.bias"].add_(1.0)      # an edit to save
    out = tmp_path_factory.mktemp("saved")
    net.save_pretrained(out)
    assert layout(out) == layout(folder)                   # no o_proj.bias written
    back = transformers.Qwen2ForCausalLM.from_pretrained(out).eval()
    ids = torch.randint(0, VOCAB, (2, 7))
    with torch.no_grad():
        assert relative_difference(net(ids), back(input_ids=ids).logits) <= 1e-4


def test_a_zero_bias_that_changed_is_not_saved(qwen2, tmp_path_factory):
    folder, _ = qwen2
    net = al.from_pretrained(folder)
    with torch.no_grad():
        net.learnables["layers.0.self_attn/output.bias"].fill_(0.5)
    out = tmp_path_factory.mktemp("refused")
    with pytest.raises(CheckpointError, match=r"layers\.0\.self_attn/output\.bias is no longer "
                                              r"zero.*'model\.layers\.0\.self_attn\.o_proj\.bias'"):
        net.save_pretrained(out)
    assert not (out / "config.json").exists()


def test_registered_family_counts_and_sizes_are_checked_before_building(qwen2):
    folder, _ = qwen2
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, "num_hidden_layers": 10**6}))
    with pytest.raises(CheckpointError, match=r'"num_hidden_layers" is 1000000.*hold 2 of those '
                                              r"blocks.*'model\.layers\.2\."):
        al.from_pretrained(folder)
    (folder / "config.json").write_text(json.dumps({**cfg, "intermediate_size": 10**9}))
    with pytest.raises(CheckpointError, match=r'key "intermediate_size" is 1000000000'):
        al.from_pretrained(folder)


def test_registered_family_refuses_what_it_does_not_build(qwen2):
    folder, _ = qwen2
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, "use_sliding_window": True}))
    with pytest.raises(CheckpointError, match='"use_sliding_window"'):
        al.from_pretrained(folder)
    layers = ["sliding_attention", "full_attention"]
    (folder / "config.json").write_text(json.dumps({**cfg, "layer_types": layers}))
    with pytest.raises(CheckpointError, match=r'"layer_types" is .*every layer "full_attention"'):
        al.from_pretrained(folder)


def test_an_unregistered_model_type_is_refused(tmp_path, monkeypatch):
    monkeypatch.delitem(FAMILIES, "qwen2", raising=False)   # (a page of the docs registers it)
    checkpoint(tmp_path)
    with pytest.raises(CheckpointError, match=r'"model_type" is "qwen2": attnlab builds .*gpt2'):
        al.from_pretrained(tmp_path)


@pytest.fixture
def loader_registered():
    seen = []

    def load(cfg):
        seen.append((cfg.data["model_type"], cfg.where))
        return al.Network([L.FeatureInput(4, name="in"), L.Dense(cfg.data["units"], name="fc")])

    from attnlab import layers as L
    register_family("tiny-loader", load)
    yield seen
    FAMILIES.pop("tiny-loader", None)


def test_a_loading_function_is_a_family(tmp_path, loader_registered):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "tiny-loader", "units": 3}))
    net = al.from_pretrained(tmp_path, dtype=torch.float64)
    assert loader_registered == [("tiny-loader", str(tmp_path / "config.json"))]
    assert not net.training and net(torch.randn(2, 4, dtype=torch.float64)).shape == (2, 3)
    assert net.learnables["fc/weight"].dtype == torch.float64


def test_a_loading_function_must_return_a_network(tmp_path):
    register_family("not-a-net", lambda cfg: "a string")
    try:
        (tmp_path / "config.json").write_text(json.dumps({"model_type": "not-a-net"}))
        with pytest.raises(CheckpointError, match="returned str, not an al.Network"):
            al.from_pretrained(tmp_path)
    finally:
        FAMILIES.pop("not-a-net", None)


@pytest.mark.parametrize("model_type, family, message", [
    ("", QWEN2, "expected a non-empty str"),
    (3, QWEN2, "expected a non-empty str"),
    ("qwen2", {"hidden_size": 3}, "expected a description .* received dict"),
])
def test_register_family_refuses_what_is_no_family(model_type, family, message):
    before = dict(FAMILIES)
    with pytest.raises(al.ArgumentError, match=message):
        register_family(model_type, family)
    assert FAMILIES == before


def _sources(net, layer):
    return sorted(c.source for c in net.connections if c.destination.split("/")[0] == layer)


def test_a_description_builds_post_norm_and_parallel_blocks():
    from attnlab.pretrained import Config
    cfg = Config({"model_type": "llama", "vocab_size": 16, "hidden_size": 8,
                  "intermediate_size": 12, "num_hidden_layers": 1, "num_attention_heads": 2})
    post = dataclasses.replace(llama.FAMILY, placement="post").network(cfg, "LlamaModel")
    # post-norm: each norm follows its residual, and the sublayers read the residual stream
    assert _sources(post, "layers.0.input_layernorm") == ["layers.0.add_1"]
    assert _sources(post, "layers.0.self_attn") == ["embed_tokens"]
    assert _sources(post, "layers.0.mlp.gate_up_proj") == ["layers.0.input_layernorm"]
    assert _sources(post, "layers.0.post_attention_layernorm") == ["layers.0.add_2"]
    parallel = dataclasses.replace(llama.FAMILY, layout="parallel").network(cfg, "LlamaModel")
    # parallel: attention and MLP read the block's input; both are added to it
    assert _sources(parallel, "layers.0.input_layernorm") == ["embed_tokens"]
    assert _sources(parallel, "layers.0.post_attention_layernorm") == ["embed_tokens"]
    assert _sources(parallel, "layers.0.add_1") == ["embed_tokens", "layers.0.self_attn"]
    assert _sources(parallel, "layers.0.add_2") == ["layers.0.add_1", "layers.0.mlp.down_proj"]
    x = torch.randint(0, 16, (1, 5))
    for net in (post, parallel):
        net.initialize()
        assert net(x).shape == (1, 5, 8)


def test_a_description_refuses_an_unknown_choice():
    with pytest.raises(al.ArgumentError, match="Family placement: expected one of pre, post, "
                                               "received 'middle'"):
        dataclasses.replace(llama.FAMILY, placement="middle")
    with pytest.raises(al.ArgumentError, match=r"heads\['X'\]: expected one of lm, classifier"):
        dataclasses.replace(llama.FAMILY, heads={"X": "pooler"})
