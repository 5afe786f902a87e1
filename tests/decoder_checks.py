"""The checks every decoder family's tests run against transformers (Qwen2, Qwen3, Gemma,
Gemma 2, GPT-NeoX, OPT, Phi-3, Mixtral, scaled rotary positions): float32 logits within 1e-4 of the largest, a right-padded
batch, streaming, greedy generation, save_pretrained back to transformers, ONNX."""
from __future__ import annotations

import json
from pathlib import Path

import torch

import attnlab as al
from pretrained_helpers import hf_greedy, relative_difference, valid_steps

REL = 1e-4


def hf_logits(model, ids, mask=None):
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=mask).logits


def close(ours, theirs, rel=REL) -> float:
    """The relative difference (max |ours − theirs| / max |theirs|), asserted ≤ `rel`."""
    d = relative_difference(ours, theirs)
    assert d <= rel, f"max abs difference {d:.3g} × the largest logit > {rel}"
    return d


def randomized_norms(model, scale=0.3):
    """Norm gains other than their initial value, so that the tests see them."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(scale * torch.randn_like(p))
    return model


def logits_equal(net, model, vocab, t=9) -> float:
    ids = torch.randint(0, vocab, (2, t))
    return close(net(ids), hf_logits(model, ids))


def padded_equal(net, model, vocab, lengths=(9, 4, 6)) -> float:
    """A right-padded batch (a list of sequences, and al.Padded) against transformers given
    the same ids and attention_mask: the valid steps agree."""
    seqs = [torch.randint(3, vocab, (t,)) for t in lengths]
    t = max(lengths)
    ids = torch.zeros(len(lengths), t, dtype=torch.long)
    mask = torch.zeros(len(lengths), t, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, :len(s)], mask[i, :len(s)] = s, 1
    want = valid_steps(hf_logits(model, ids, mask), lengths)
    worst = close(valid_steps(net(seqs), lengths), want)
    return max(worst, close(valid_steps(net(al.Padded(ids, mask.bool())), lengths), want))


def generate_equal(net, model, vocab, prompt_length=5, n=12):
    prompt = torch.randint(3, vocab, (2, prompt_length))
    ours = al.generate(net, start=prompt, stop=None, max_new_tokens=n).tokens
    assert ours.tolist() == hf_greedy(model, prompt, n).tolist()
    assert len(set(ours.flatten().tolist())) > 3             # not one token over and over
    return ours


def stream_equal(net, vocab, t=8) -> float:
    ids = torch.randint(0, vocab, (2, t))
    full = net(ids)
    s = net.stream()
    steps = torch.cat([s.step(ids[:, :3])] + [s.step(ids[:, i:i + 1]) for i in range(3, t)], 1)
    return close(steps, full)


def saved_back_equal(net, model, folder: Path, out: Path, cls, vocab, t=7):
    """save_pretrained writes the original tensors (names, dtypes, values), and transformers
    loads the folder into a model of equal outputs (on `t` steps)."""
    from safetensors import safe_open
    net.save_pretrained(out)
    with safe_open(str(folder / "model.safetensors"), "pt") as a, \
            safe_open(str(out / "model.safetensors"), "pt") as b:
        assert sorted(a.keys()) == sorted(b.keys())
        for k in a.keys():
            ta, tb = a.get_tensor(k), b.get_tensor(k)
            assert ta.dtype == tb.dtype and ta.shape == tb.shape and torch.equal(ta, tb), k
    again = cls.from_pretrained(out).eval()
    ids = torch.randint(0, vocab, (1, t))
    assert torch.equal(hf_logits(again, ids), hf_logits(model, ids))


def onnx_equal(net, path: Path, vocab, lengths=(3, 10)):
    import onnxruntime as ort
    assert net.export_onnx(path).max_error < 1e-4
    session = ort.InferenceSession(str(path))
    for t in lengths:
        ids = torch.randint(0, vocab, (2, t))
        feeds = {"input_ids": ids.numpy(),
                 "input_ids_mask": torch.ones(2, t, dtype=torch.bool).numpy()}
        got = torch.from_numpy(session.run(["logits"], feeds)[0])
        with torch.no_grad():
            close(got, net(ids))


def edited_copy(folder: Path, to: Path, **changes) -> Path:
    """The checkpoint in `folder` with config keys changed (None removes a key)."""
    cfg = json.loads((folder / "config.json").read_text())
    for k, v in changes.items():
        if v is None:
            cfg.pop(k, None)
        else:
            cfg[k] = v
    to.mkdir(parents=True, exist_ok=True)
    (to / "config.json").write_text(json.dumps(cfg))
    (to / "model.safetensors").write_bytes((folder / "model.safetensors").read_bytes())
    return to
