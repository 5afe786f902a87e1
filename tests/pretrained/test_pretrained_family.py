"""A family added from outside the package with `register_family`: Qwen2 as a description
(Llama's, with biases on the query, key and value projections only; attnlab builds Qwen2
itself too, and registering replaces it), loaded equal to transformers (padded batches too),
generating the same tokens, saved back; the same description shown in docs/transformers.md;
a loading function as a family; the loader's checks for both; the builder's general options
(a decoder stack, a feed-forward chosen by the config)."""
import dataclasses
import json
from pathlib import Path

import pytest
import torch

import attnlab as al
from attnlab.pretrained import FAMILIES, CheckpointError, W, keys, llama, register_family
from pretrained_helpers import (hf_greedy, layout, quiet_transformers, relative_difference,
                                valid_steps)

transformers = pytest.importorskip("transformers")
quiet_transformers()

VOCAB = 64
DOCS = Path(__file__).resolve().parents[2] / "docs" / "transformers.md"


# -- the Qwen2 description, as a user writes it ------------------------------------------------
def full_attention(cfg):                 # no sliding window: every layer full attention
    types = cfg.get("layer_types", None)
    if types is not None and (not isinstance(types, list)
                              or any(t != "full_attention" for t in types)):
        raise cfg.unsupported("layer_types", types, 'every layer "full_attention"')
    return None


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
    attention_bias=True, output_bias=False,        # biases on q, k and v; none on the output
    block_table=lambda cfg: llama.ATTENTION + llama.biases(llama.ATTENTION[:3])
    + llama.MLP + llama.NORMS,
    mlp_bias=False, window=full_attention)
# -- end of the description --------------------------------------------------------------------

# the same with every projection's bias, the output's kept zero: a `zero` row says the file
# has none
ZERO_OUTPUT_BIAS = dataclasses.replace(
    QWEN2, output_bias=None,
    block_table=lambda cfg: QWEN2.block_table(cfg) +
    [W("self_attn.o_proj.bias", "self_attn/output.bias", zero=True)])


@pytest.fixture
def qwen2_registered():
    """This description in place of the package's own Qwen2, which comes back afterwards."""
    before = dict(FAMILIES)
    register_family("qwen2", QWEN2)
    yield
    FAMILIES.clear()
    FAMILIES.update(before)


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


def _description() -> str:
    text = Path(__file__).read_text(encoding="utf-8")
    return text[text.index("# -- the Qwen2 description"):text.index("# -- end of the description")]


def test_the_description_is_short_and_is_the_one_the_docs_show():
    part = _description()
    assert len(part.splitlines()) <= 40
    code = part[part.index("def full_attention"):].rstrip()
    assert code in DOCS.read_text(encoding="utf-8")


def test_registered_qwen2_equals_transformers(qwen2):
    folder, model = qwen2
    net = al.from_pretrained(folder)
    ids = torch.randint(0, VOCAB, (2, 9))
    with torch.no_grad():
        want = model(input_ids=ids).logits
    assert relative_difference(net(ids), want) <= 1e-4
    assert net.analyze().total_learnables == model.num_parameters()
    attention = net.layers["layers.0.self_attn"]
    assert (attention.projection_bias, attention.output_bias) == (True, False)
    assert "layers.0.self_attn/query.bias" in net.learnables
    assert "layers.0.self_attn/output.bias" not in net.learnables


def test_registered_qwen2_padded_batch_equals_transformers(qwen2):
    folder, model = qwen2
    net = al.from_pretrained(folder)
    lengths = [9, 4, 6]
    seqs = [torch.randint(1, VOCAB, (t,)) for t in lengths]
    ids, mask = torch.zeros(3, 9, dtype=torch.long), torch.zeros(3, 9, dtype=torch.long)
    for i, seq in enumerate(seqs):
        ids[i, :len(seq)], mask[i, :len(seq)] = seq, 1
    with torch.no_grad():
        want = valid_steps(model(input_ids=ids, attention_mask=mask).logits, lengths)
    assert relative_difference(valid_steps(net(seqs), lengths), want) <= 1e-4


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


def test_an_output_bias_the_layout_lacks_is_not_saved(qwen2, tmp_path_factory):
    """A network given every projection's bias is not Qwen2's layout: refused, by name."""
    folder, _ = qwen2
    net = al.from_pretrained(folder)
    net.layers["layers.0.self_attn"].output_bias = None          # as projection_bias: one
    out = tmp_path_factory.mktemp("refused")
    with pytest.raises(CheckpointError, match=r"layers\.0\.self_attn.*output_bias"):
        net.save_pretrained(out)
    assert not (out / "config.json").exists()


def test_a_zero_bias_loads_as_zeros_and_is_not_saved_once_changed(qwen2, tmp_path_factory):
    folder, model = qwen2
    register_family("qwen2", ZERO_OUTPUT_BIAS)              # the fixture puts Qwen2 back
    net = al.from_pretrained(folder)
    ids = torch.randint(0, VOCAB, (2, 9))
    with torch.no_grad():
        assert relative_difference(net(ids), model(input_ids=ids).logits) <= 1e-4
    assert not net.learnables["layers.0.self_attn/output.bias"].any()
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
    monkeypatch.delitem(FAMILIES, "qwen2", raising=False)   # (attnlab builds qwen2 itself)
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


def test_a_description_with_a_decoder_refuses_parallel_blocks():
    from attnlab.pretrained import t5
    with pytest.raises(al.ArgumentError, match="Family layout: expected \"sequential\" with a "
                                               "decoder"):
        dataclasses.replace(t5.FAMILY, layout="parallel")


def test_a_feed_forward_chosen_by_the_config_is_checked():
    from attnlab.pretrained import Config
    cfg = Config({"model_type": "llama", "vocab_size": 16, "hidden_size": 8,
                  "intermediate_size": 12, "num_hidden_layers": 1, "num_attention_heads": 2})
    odd = dataclasses.replace(llama.FAMILY, ffn=lambda c: "dense")
    with pytest.raises(al.ArgumentError, match="Family ffn: expected one of glu, mlp, moe, "
                                               "received 'dense'"):
        odd.network(cfg, "LlamaModel")
    mlp = dataclasses.replace(llama.FAMILY, ffn=lambda c: "mlp", inner_dropout=0.25,
                              activation=("hidden_act", "relu"))
    net = mlp.network(cfg, "LlamaModel")
    assert net.layers["layers.0.mlp.act"].type_name == "ReLU"
    assert _sources(net, "layers.0.mlp.inner_dropout") == ["layers.0.mlp.act"]
    assert _sources(net, "layers.0.mlp.down_proj") == ["layers.0.mlp.inner_dropout"]


def test_a_description_with_a_decoder_builds_cross_attention_and_a_bias_per_stack():
    """An encoder–decoder from Llama's description: a Decoder stack whose blocks attend to
    the encoder's output, a relative position bias per stack, and the decoder tied to the
    encoder's token embedding; its table holds both stacks."""
    from attnlab.pretrained import Config, Decoder, Names
    cfg = Config({"model_type": "llama", "vocab_size": 16, "hidden_size": 8,
                  "intermediate_size": 12, "num_hidden_layers": 1, "num_attention_heads": 2})
    rows = lambda c: llama.ATTENTION + llama.MLP + llama.NORMS              # noqa: E731
    names = Names(tokens="decoder.embed_tokens", block="decoder.layers.{i}",
                  final_norm="decoder.norm", position_bias="decoder.bias")
    both = dataclasses.replace(
        llama.FAMILY, rotary=False, causal=False, position_bias=(8, 16),
        heads={"LlamaForCausalLM": "lm"}, architectures=("LlamaForCausalLM",),
        decoder=Decoder(blocks=2, block_table=rows, names=names))
    net = both.network(cfg, "LlamaForCausalLM")
    assert net.input_names == ["input_ids", "decoder_input_ids"]
    assert net.layers["decoder.embed_tokens"].tied_to == "embed_tokens"
    cross = "decoder.layers.1.cross_attn"
    assert _sources(net, cross) == ["decoder.layers.1.cross_attn_layernorm", "norm", "norm"]
    assert _sources(net, "decoder.layers.1.add_cross") == ["decoder.layers.1.add_1", cross]
    assert net.layers["relative_attention_bias"].bidirectional
    assert not net.layers["decoder.bias"].bidirectional
    assert _sources(net, "decoder.layers.0.self_attn") == [
        "decoder.bias", "decoder.layers.0.input_layernorm"]
    table = {w.name for w in both.weights(cfg, "LlamaForCausalLM")}
    assert {"model.relative_attention_bias.weight", "model.decoder.bias.weight",
            "model.decoder.layers.1.mlp.down_proj.weight", "model.decoder.norm.weight"} <= table
    net.initialize()
    y = net({"input_ids": torch.randint(0, 16, (1, 5)),
             "decoder_input_ids": torch.randint(0, 16, (1, 3))})
    assert y.shape == (1, 3, 16)
