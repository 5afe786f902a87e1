"""T5EncoderModel checkpoints (T5's encoder alone): `al.from_pretrained` against transformers
on small random models."""
import json
import shutil

import pytest
import torch

import attnlab as al
from attnlab.pretrained import CheckpointError
from pretrained_helpers import (layout, quiet_transformers, relative_difference, save_checkpoint,
                                valid_steps)

transformers = pytest.importorskip("transformers")
quiet_transformers()

VOCAB = 100


def _config(**kw):
    base = dict(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=48, num_layers=2, num_heads=4,
                relative_attention_num_buckets=8, relative_attention_max_distance=16)
    return transformers.T5Config(**{**base, **kw})


def _encoder(seed=0, **kw):
    torch.manual_seed(seed)
    return transformers.T5EncoderModel(_config(**kw)).eval()


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    model = _encoder()
    return save_checkpoint(model, tmp_path_factory.mktemp("t5-encoder")), model


@pytest.fixture(scope="module")
def loaded(base):
    return al.from_pretrained(base[0])


def _batch(lengths, seed=0):
    g = torch.Generator().manual_seed(seed)
    seqs = [torch.randint(1, VOCAB, (n,), generator=g) for n in lengths]
    ids = torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True)
    mask = (torch.arange(max(lengths)).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)).long()
    return seqs, ids, mask


def test_the_encoder_alone_equals_transformers(base, loaded):
    assert loaded.input_names == ["input_ids"]
    assert loaded.output_names == ["last_hidden_state"]
    assert not any(n.startswith(("decoder.", "lm_head")) for n in loaded.layer_map)
    _, ids, _ = _batch([12, 12])           # longer than the exact buckets: logarithmic ones too
    with torch.no_grad():
        ours, theirs = loaded(input_ids=ids), base[1](input_ids=ids).last_hidden_state
    assert relative_difference(ours, theirs) <= 1e-4
    assert loaded.analyze().total_learnables == base[1].num_parameters()


def test_padded_batch_equals_transformers_with_attention_mask(base, loaded):
    lengths = [11, 4, 7]
    seqs, ids, mask = _batch(lengths, seed=1)
    with torch.no_grad():
        ours = loaded(input_ids=seqs)
        theirs = base[1](input_ids=ids, attention_mask=mask).last_hidden_state
    assert relative_difference(valid_steps(ours, lengths), valid_steps(theirs, lengths)) <= 1e-4


@pytest.mark.parametrize("proj", ["gated-gelu", "gated-silu", "gelu"])
def test_other_feed_forwards(proj, tmp_path):
    hf = _encoder(2, feed_forward_proj=proj)
    net = al.from_pretrained(save_checkpoint(hf, tmp_path))
    lengths = [6, 3]
    seqs, ids, mask = _batch(lengths, seed=2)
    with torch.no_grad():
        ours = net(input_ids=seqs)
        theirs = hf(input_ids=ids, attention_mask=mask).last_hidden_state
    assert relative_difference(valid_steps(ours, lengths), valid_steps(theirs, lengths)) <= 1e-4


def test_save_pretrained_and_transformers_loads_it_back(base, loaded, tmp_path):
    folder, hf = base
    loaded.save_pretrained(tmp_path / "out")
    assert layout(tmp_path / "out") == layout(folder)
    assert json.loads((tmp_path / "out" / "config.json").read_text()) == \
        json.loads((folder / "config.json").read_text())
    again = transformers.T5EncoderModel.from_pretrained(tmp_path / "out").eval()
    _, ids, _ = _batch([6, 6])
    with torch.no_grad():
        assert torch.equal(again(input_ids=ids).last_hidden_state,
                           hf(input_ids=ids).last_hidden_state)


def test_a_shorter_encoder_is_written_with_its_count(base, tmp_path):
    net = al.from_pretrained(base[0])
    net.remove(*[n for n in net.layer_map if n.startswith("encoder.block.1.")])
    net.connect("encoder.block.0.layer.1.add", "encoder.final_layer_norm")
    net.initialize()
    net.save_pretrained(tmp_path / "out")
    cfg = json.loads((tmp_path / "out" / "config.json").read_text())
    assert cfg["num_layers"] == 1 and cfg["num_decoder_layers"] == 2      # the decoder's kept
    again = transformers.T5EncoderModel.from_pretrained(tmp_path / "out").eval()
    _, ids, _ = _batch([5, 5])
    with torch.no_grad():
        assert relative_difference(net(input_ids=ids),
                                   again(input_ids=ids).last_hidden_state) <= 1e-4


def test_a_4x_config_and_a_folder_without_architectures(base, tmp_path):
    # transformers 4.x left is_encoder_decoder true in an encoder's config; a config without
    # "architectures" gets the model whose tensors the file holds: the encoder here
    folder = shutil.copytree(base[0], tmp_path / "old")
    cfg = json.loads((folder / "config.json").read_text())
    cfg["is_encoder_decoder"] = True
    del cfg["architectures"]
    (folder / "config.json").write_text(json.dumps(cfg))
    net = al.from_pretrained(folder)
    assert net.metadata["huggingface"]["architecture"] == "T5EncoderModel"
    _, ids, _ = _batch([5, 5])
    with torch.no_grad():
        assert relative_difference(net(input_ids=ids),
                                   base[1](input_ids=ids).last_hidden_state) <= 1e-4


def test_the_encoder_of_an_encoder_decoder_file(tmp_path):
    torch.manual_seed(3)
    full = transformers.T5ForConditionalGeneration(_config()).eval()
    folder = save_checkpoint(full, tmp_path / "full")
    cfg = json.loads((folder / "config.json").read_text())
    cfg["architectures"] = ["T5EncoderModel"]
    (folder / "config.json").write_text(json.dumps(cfg))
    with pytest.warns(UserWarning, match="belong to no part of the t5 model"):
        net = al.from_pretrained(folder)
    _, ids, _ = _batch([7, 7])
    with torch.no_grad():
        assert relative_difference(net(input_ids=ids),
                                   full.encoder(input_ids=ids).last_hidden_state) <= 1e-4


def test_an_encoder_decoder_marked_as_no_encoder_decoder_is_refused(tmp_path):
    torch.manual_seed(4)
    folder = save_checkpoint(transformers.T5ForConditionalGeneration(_config()), tmp_path)
    cfg = json.loads((folder / "config.json").read_text())
    cfg["is_encoder_decoder"] = False
    (folder / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match='"is_encoder_decoder" is false.*supported: true'):
        al.from_pretrained(folder)


def test_export_onnx_checked_by_onnxruntime_at_two_lengths(loaded, tmp_path):
    ort = pytest.importorskip("onnxruntime")
    import numpy as np
    result = loaded.export_onnx(tmp_path / "net.onnx")
    assert result.max_error is not None and result.max_error < 1e-4
    session = ort.InferenceSession(str(tmp_path / "net.onnx"))
    names = [i.name for i in session.get_inputs()]
    for t in (3, 11):
        ids = torch.randint(1, VOCAB, (2, t))
        feeds = {"input_ids": ids.numpy()}
        feeds.update({n: np.ones((2, t), dtype=bool) for n in names if n not in feeds})
        got = session.run(None, feeds)[0]
        with torch.no_grad():
            assert relative_difference(torch.from_numpy(got), loaded(input_ids=ids)) <= 1e-4
