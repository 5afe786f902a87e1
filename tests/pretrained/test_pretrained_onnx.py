"""Checkpoints loaded by `al.from_pretrained`, exported to ONNX and run by onnxruntime at two
sequence lengths (token ids stay int64 inputs)."""
import numpy as np
import pytest
import torch

import attnlab as al
from pretrained_helpers import quiet_transformers, relative_difference, save_checkpoint

transformers = pytest.importorskip("transformers")
ort = pytest.importorskip("onnxruntime")
quiet_transformers()


def _run(session, feeds, t):
    """onnxruntime's outputs by name, every mask input all True."""
    names = [i.name for i in session.get_inputs()]
    feeds = {**feeds, **{n: np.ones((2, t), dtype=bool) for n in names if n not in feeds}}
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))


@pytest.mark.parametrize("family", ["gpt2", "bert"])
def test_export_onnx_checked_by_onnxruntime_at_two_lengths(family, tmp_path):
    torch.manual_seed(0)
    if family == "gpt2":
        hf = transformers.GPT2LMHeadModel(transformers.GPT2Config(
            n_layer=2, n_embd=32, n_head=4, vocab_size=100, n_positions=32))
    else:
        hf = transformers.BertModel(transformers.BertConfig(
            num_hidden_layers=2, hidden_size=32, num_attention_heads=4, intermediate_size=48,
            vocab_size=100, max_position_embeddings=32))
    net = al.from_pretrained(save_checkpoint(hf, tmp_path / family))
    result = net.export_onnx(tmp_path / "net.onnx")
    assert result.max_error is not None and result.max_error < 1e-4
    session = ort.InferenceSession(str(tmp_path / "net.onnx"))
    for t in (3, 11):
        inputs = {"input_ids": torch.randint(0, 100, (2, t))}
        if family == "bert":
            inputs["token_type_ids"] = (torch.arange(t) >= t // 2).long().expand(2, t)
        got = _run(session, {k: v.numpy() for k, v in inputs.items()}, t)
        with torch.no_grad():
            want = net(**inputs)
        want = want if isinstance(want, dict) else {"logits": want}
        for name, value in want.items():
            assert got[name].dtype == np.float32
            assert relative_difference(torch.from_numpy(got[name]), value) <= 1e-4
