"""GPT-2 checkpoints: `al.from_pretrained` against transformers on small random models."""
import json

import numpy as np
import pytest
import torch

import attnlab as al
from attnlab.cli import main
from pretrained_helpers import (layout, quiet_transformers, relative_difference, save_checkpoint,
                                valid_steps)

transformers = pytest.importorskip("transformers")
quiet_transformers()

VOCAB = 300          # ids above 256 are where bfloat16 would round an id cast to a float


def _config(**kw):
    base = dict(n_layer=2, n_embd=32, n_head=4, vocab_size=VOCAB, n_positions=24,
                bos_token_id=0, eos_token_id=0)
    return transformers.GPT2Config(**{**base, **kw})


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(_config())
    return save_checkpoint(model, tmp_path_factory.mktemp("gpt2")), model.eval()


@pytest.fixture(scope="module")
def loaded(checkpoint):
    return al.from_pretrained(checkpoint[0])


def _ids(b, t, seed=0):
    return torch.randint(0, VOCAB, (b, t), generator=torch.Generator().manual_seed(seed))


def test_logits_equal_transformers(checkpoint, loaded):
    ids = _ids(3, 11)
    with torch.no_grad():
        ours, theirs = loaded(input_ids=ids), checkpoint[1](input_ids=ids).logits
    assert loaded.input_names == ["input_ids"] and loaded.output_names == ["logits"]
    assert ours.shape == (3, 11, VOCAB)
    assert relative_difference(ours, theirs) <= 1e-4


def test_padded_batch_equals_transformers_with_attention_mask(checkpoint, loaded):
    seqs = [_ids(1, n, seed=n)[0] for n in (9, 4, 6)]
    ids = torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True)
    mask = torch.tensor([[1] * len(s) + [0] * (9 - len(s)) for s in seqs])
    with torch.no_grad():
        ours = loaded(input_ids=seqs)
        padded = loaded(input_ids=al.Padded(ids, mask.bool()))
        theirs = checkpoint[1](input_ids=ids, attention_mask=mask).logits
    lengths = [len(s) for s in seqs]
    assert relative_difference(valid_steps(ours, lengths), valid_steps(theirs, lengths)) <= 1e-4
    assert torch.equal(valid_steps(padded, lengths), valid_steps(ours, lengths))


def test_learnables_counted_as_transformers_tied_once(checkpoint, loaded):
    assert loaded.analyze().total_learnables == checkpoint[1].num_parameters()


def test_greedy_generate_equals_transformers(checkpoint, loaded):
    prompt = _ids(2, 5, seed=3)
    ours = al.generate(loaded, start=prompt, stop=None, max_new_tokens=12)
    theirs = checkpoint[1].generate(prompt, attention_mask=torch.ones_like(prompt),
                                    max_new_tokens=12, do_sample=False, pad_token_id=0)
    assert torch.equal(ours.tokens, theirs[:, 5:])


def test_a_prompt_longer_than_the_learned_positions(loaded):
    with pytest.raises(al.DataError, match="max_length 24"):
        loaded(input_ids=_ids(1, 25))
    with pytest.raises(al.DataError, match="past the 24 positions"):
        al.generate(loaded, start=_ids(1, 10), stop=None, max_new_tokens=20)


def test_ids_outside_the_vocabulary(loaded):
    with pytest.raises(al.DataError, match=f"token id {VOCAB} at observation 0, step 2 is outside "
                                           f"the vocabulary of {VOCAB}"):
        loaded(input_ids=torch.tensor([[1, 2, VOCAB]]))
    with pytest.raises(al.DataError, match=f"token id {VOCAB} .* outside the vocabulary"):
        al.generate(loaded, start=torch.tensor([[1, VOCAB]]), stop=None, max_new_tokens=2)


def test_save_and_load_round_trip(checkpoint, loaded, tmp_path):
    path = tmp_path / "gpt2.attnlab"
    loaded.save(path)
    back = al.load(path).eval()         # a loaded file starts in training mode, as torch modules do
    ids = _ids(2, 7)
    with torch.no_grad():
        assert torch.equal(back(ids), loaded(ids))
    assert back.analyze().total_learnables == loaded.analyze().total_learnables
    assert back.learnables["lm_head/weight"] is back.learnables["wte/weight"]   # still tied
    back.save_pretrained(tmp_path / "again")                  # the layout survives the file
    assert layout(tmp_path / "again") == layout(checkpoint[0])


def test_save_pretrained_writes_the_original_layout(checkpoint, loaded, tmp_path):
    folder, hf = checkpoint
    loaded.save_pretrained(tmp_path / "out")
    assert layout(tmp_path / "out") == layout(folder)
    assert json.loads((tmp_path / "out" / "config.json").read_text()) == \
        json.loads((folder / "config.json").read_text())
    again = transformers.GPT2LMHeadModel.from_pretrained(tmp_path / "out").eval()
    ids = _ids(2, 7)
    with torch.no_grad():
        assert torch.equal(again(input_ids=ids).logits, hf(input_ids=ids).logits)


def test_bfloat16_keeps_ids_integers(checkpoint):
    net = al.from_pretrained(checkpoint[0], dtype=torch.bfloat16)
    assert {p.dtype for p in net.parameters()} == {torch.bfloat16}
    ids = torch.tensor([[257, 259, 261, 299]])          # bfloat16 would make them 256, 260, …
    with torch.no_grad():
        ours, theirs = net(input_ids=ids), checkpoint[1](input_ids=ids).logits
    assert ours.dtype == torch.bfloat16
    assert relative_difference(ours.float(), theirs) < 0.05
    assert al.generate(net, start=ids, stop=None, max_new_tokens=3).tokens.dtype == torch.int64


def test_untied_output_projection(tmp_path):
    torch.manual_seed(2)
    hf = transformers.GPT2LMHeadModel(_config(tie_word_embeddings=False)).eval()
    net = al.from_pretrained(save_checkpoint(hf, tmp_path / "in"))
    ids = _ids(2, 6)
    with torch.no_grad():
        assert relative_difference(net(ids), hf(input_ids=ids).logits) <= 1e-4
    assert net.analyze().total_learnables == hf.num_parameters()
    net.save_pretrained(tmp_path / "out")
    assert layout(tmp_path / "out") == layout(tmp_path / "in")


@pytest.mark.parametrize("options", [
    dict(activation_function="relu", n_inner=40),
    dict(scale_attn_by_inverse_layer_idx=True),
    dict(scale_attn_weights=False, activation_function="gelu", layer_norm_epsilon=1e-3),
    dict(activation_function="gelu_accurate"),
    dict(activation_function="leaky_relu"),
], ids=["relu-inner", "inverse-layer-scale", "unscaled-gelu", "gelu-accurate", "leaky-relu"])
def test_config_options_equal_transformers(options, tmp_path):
    torch.manual_seed(4)
    hf = transformers.GPT2LMHeadModel(_config(**options)).eval()
    net = al.from_pretrained(save_checkpoint(hf, tmp_path))
    ids = _ids(2, 8)
    with torch.no_grad():
        assert relative_difference(net(ids), hf(input_ids=ids).logits) <= 1e-4


def test_base_model_gives_the_last_hidden_state(tmp_path):
    torch.manual_seed(5)
    hf = transformers.GPT2Model(_config()).eval()
    net = al.from_pretrained(save_checkpoint(hf, tmp_path))
    ids = _ids(2, 8)
    assert net.output_names == ["last_hidden_state"]
    with torch.no_grad():
        assert relative_difference(net(ids), hf(input_ids=ids).last_hidden_state) <= 1e-4
    assert net.analyze().total_learnables == hf.num_parameters()


def test_cross_attention_is_refused_by_name(tmp_path):
    torch.manual_seed(6)
    folder = save_checkpoint(transformers.GPT2LMHeadModel(_config(add_cross_attention=True)),
                             tmp_path)
    with pytest.raises(al.pretrained.CheckpointError, match='"add_cross_attention" is true'):
        al.from_pretrained(folder)


def test_cli_analyze_plot_view(loaded, tmp_path, capsys):
    path = tmp_path / "gpt2.attnlab"
    loaded.save(path)
    assert main(["analyze", str(path)]) == 0
    out = capsys.readouterr().out
    assert "h.1.attn" in out and "lm_head" in out
    assert main(["plot", str(path), "-o", str(tmp_path / "gpt2.png")]) == 0
    assert main(["view", str(path), "-o", str(tmp_path / "gpt2.html")]) == 0
    np.savez(tmp_path / "sample.npz", input_ids=_ids(1, 6)[0].numpy())
    assert main(["view", str(path), "--input", str(tmp_path / "sample.npz"),
                 "-o", str(tmp_path / "heads.html")]) == 0
    # the page with the sample carries each layer's attention maps, head by head
    assert (tmp_path / "heads.html").stat().st_size > (tmp_path / "gpt2.html").stat().st_size


def test_files_of_older_transformers_load(checkpoint, tmp_path):
    # 4.x files could hold each block's causal-mask buffers and the tied head's own copy
    import shutil
    import warnings
    from safetensors.torch import load_file, save_file
    folder = shutil.copytree(checkpoint[0], tmp_path / "old")
    tensors = load_file(folder / "model.safetensors")
    for i in range(2):
        tensors[f"transformer.h.{i}.attn.bias"] = torch.ones(1, 1, 24, 24).tril()
        tensors[f"transformer.h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    tensors["lm_head.weight"] = tensors["transformer.wte.weight"].clone()
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(n_ctx=24, torch_dtype=cfg.pop("dtype"), transformers_version="4.40.0")
    (folder / "config.json").write_text(json.dumps(cfg))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        net = al.from_pretrained(folder)
    ids = _ids(2, 7)
    with torch.no_grad():
        assert relative_difference(net(ids), checkpoint[1](input_ids=ids).logits) <= 1e-4
    net.save_pretrained(tmp_path / "out")
    assert "lm_head.weight" in layout(tmp_path / "out")          # written back: the file had it
    assert "transformer.h.0.attn.bias" not in layout(tmp_path / "out")


def test_a_file_of_the_base_model_loads_into_the_lm_head_model(tmp_path):
    # the Hub's gpt2 holds GPT2Model's names (wte.weight, h.0.…, no lm_head) under the
    # architecture GPT2LMHeadModel: transformers adds the prefix and ties the head, so does attnlab
    torch.manual_seed(7)
    folder = save_checkpoint(transformers.GPT2Model(_config()), tmp_path / "base")
    cfg = json.loads((folder / "config.json").read_text())
    cfg["architectures"] = ["GPT2LMHeadModel"]
    (folder / "config.json").write_text(json.dumps(cfg))
    net = al.from_pretrained(folder)
    hf = transformers.GPT2LMHeadModel.from_pretrained(folder).eval()
    ids = _ids(2, 6)
    with torch.no_grad():
        assert relative_difference(net(ids), hf(input_ids=ids).logits) <= 1e-4
    net.save_pretrained(tmp_path / "out")
    assert layout(tmp_path / "out") == layout(folder)              # its own names, no prefix


def test_sequence_classification_scores_the_last_token(tmp_path):
    torch.manual_seed(8)
    hf = transformers.GPT2ForSequenceClassification(_config(num_labels=3, pad_token_id=0)).eval()
    net = al.from_pretrained(save_checkpoint(hf, tmp_path))
    seqs = [torch.randint(1, VOCAB, (n,)) for n in (7, 3, 5)]           # no pad id inside
    ids = torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True)      # pad_token_id 0
    with torch.no_grad():
        ours, theirs = net(input_ids=seqs), hf(input_ids=ids).logits
    assert ours.shape == (3, 3)
    assert relative_difference(ours, theirs) <= 1e-4
    assert net.analyze().total_learnables == hf.num_parameters()
