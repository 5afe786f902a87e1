"""Shared by the tests of `al.from_pretrained`: small random checkpoints written by
transformers itself (offline, nothing downloaded) and the comparisons the families share."""
from __future__ import annotations

import os
from pathlib import Path

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def quiet_transformers():
    """transformers without its progress bars and advice (the tests read their own output)."""
    import transformers
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    return transformers


def save_checkpoint(model, folder: Path, **kw) -> Path:
    """`model` (a transformers model) saved with `save_pretrained` into `folder`."""
    model.eval()
    model.save_pretrained(folder, **kw)
    return folder


def relative_difference(ours: torch.Tensor, theirs: torch.Tensor) -> float:
    """max |ours − theirs| / max |theirs|, in float64."""
    a, b = ours.detach().double(), theirs.detach().double()
    assert a.shape == b.shape, (a.shape, b.shape)
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


def layout(folder: Path) -> dict[str, tuple[str, tuple[int, ...]]]:
    """name → (dtype, shape) of the tensors of a folder's model.safetensors."""
    from safetensors import safe_open
    with safe_open(str(Path(folder) / "model.safetensors"), framework="pt") as f:
        return {k: (f.get_slice(k).get_dtype(), tuple(f.get_slice(k).get_shape())) for k in f.keys()}


def valid_steps(x: torch.Tensor, lengths) -> torch.Tensor:
    """The valid steps of a padded B×T×… batch, concatenated (padded steps are not compared)."""
    return torch.cat([x[i, :n] for i, n in enumerate(lengths)])


def hf_greedy(model, prompt: torch.Tensor, n: int) -> torch.Tensor:
    """transformers' greedy `generate` of a causal LM: the n tokens after the prompt (every
    prompt token attended, no end token)."""
    with torch.no_grad():
        out = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=n,
                             do_sample=False, eos_token_id=None, pad_token_id=0)
    return out[:, prompt.shape[1]:]



def tiny_gpt2(folder: Path, vocab_size: int, n_layer: int = 2, seed: int = 0, **config):
    """A random GPT-2 of 16 channels, 2 heads and 16 positions (`config` adds or replaces
    GPT2Config fields), saved in `folder`: (the model, in eval mode; the folder)."""
    transformers = quiet_transformers()
    torch.manual_seed(seed)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        n_layer=n_layer, n_embd=16, n_head=2, vocab_size=vocab_size, n_positions=16, **config))
    return model, save_checkpoint(model, folder)


def tiny_bert(folder: Path, vocab_size: int, layers: int, seed: int = 0, **config):
    """A random BertModel of 16 channels, 2 heads, 24 feed-forward channels and 16 positions,
    saved in `folder`: (the model, in eval mode; the folder)."""
    transformers = quiet_transformers()
    torch.manual_seed(seed)
    model = transformers.BertModel(transformers.BertConfig(
        num_hidden_layers=layers, hidden_size=16, num_attention_heads=2, intermediate_size=24,
        vocab_size=vocab_size, max_position_embeddings=16, **config))
    return model, save_checkpoint(model, folder)
