"""Variable-length sequences: padding, masks and their inverse."""
from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np
import torch

from .errors import DataError


class Padded(NamedTuple):
    """A batch of sequences padded to the longest: `data` B×T×C, `mask` B×T (True = real step)."""

    data: torch.Tensor
    mask: torch.Tensor

    @property
    def lengths(self) -> torch.Tensor:
        """The length of each sequence, B (the count of True in `mask`)."""
        return self.mask.sum(1)


def as_tensor(x, dtype=None) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x if dtype is None else x.to(dtype)
    return torch.as_tensor(np.asarray(x), dtype=dtype)


def pad_sequences(seqs: Sequence, value: float = 0.0, dtype: torch.dtype | None = None) -> Padded:
    """Pads sequences of different lengths into one batch with its padding mask.

    Parameters
    ----------
    seqs : sequence of tensors or arrays
        T_i×C (or T_i) each.
    value : float
        The value of the padded steps.
    dtype : torch.dtype, optional
        The data's dtype (default: that of the sequences).

    Returns
    -------
    Padded
        `data` B×T×C (T the longest length) and `mask` B×T, True at real steps.
    """
    seqs = [as_tensor(s, dtype) for s in seqs]
    if not seqs:
        raise ValueError("pad_sequences needs at least one sequence")
    seqs = [s.unsqueeze(-1) if s.dim() == 1 else s for s in seqs]
    lengths = torch.tensor([s.shape[0] for s in seqs])
    data = torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True, padding_value=value)  # B×T×C
    mask = torch.arange(data.shape[1]).unsqueeze(0) < lengths.unsqueeze(1)              # B×T
    return Padded(data, mask.to(data.device))


def unpad(x: torch.Tensor, mask: torch.Tensor | None) -> list[torch.Tensor]:
    """The inverse of padding: a list of each sequence's valid steps (wherever the padding
    is: at the end, in front, or between them)."""
    if mask is None:
        return list(x)
    return [row[m] for row, m in zip(x, mask)]


def mask_positions(mask: torch.Tensor) -> torch.Tensor:
    """Each step's position in its own sequence, from a B×T padding mask (True = real step):
    the number of real steps before it, 0 at padded steps — `transformers`' position ids
    from an `attention_mask` (``cumsum(mask) − 1``, padding set to 0). With padding at the
    end the real steps get 0…n−1, their indices; with padding in front each sequence still
    starts at 0. The one rule for positions that follow a mask (a `PositionEmbedding` or a
    rotary embedding with ``positions="mask"``). B×T int64."""
    return (mask.long().cumsum(-1) - 1).masked_fill(~mask, 0)


# -- Hugging Face's calling convention -------------------------------------------------------
# A network from `al.from_pretrained` (its metadata holds this record, also after `net.save`
# / `al.load`) takes the dicts a Hugging Face model takes: masks beside the inputs they pad,
# and `token_type_ids` left out for zeros.
HUGGING_FACE = "huggingface"
# each mask pads the inputs of its part of the model: the decoder's inputs are `decoder_…`
MASK_KEYS = ("attention_mask", "decoder_attention_mask")
TOKEN_TYPES = "token_type_ids"


def follows_hugging_face(net) -> bool:
    """Whether `net` takes Hugging Face's dicts (it came from `al.from_pretrained`)."""
    meta = getattr(net, "metadata", None)
    return isinstance(meta, dict) and HUGGING_FACE in meta


def _padded_by(mask_key: str, input_name: str) -> bool:
    decoder = input_name.startswith("decoder_")
    return decoder if mask_key == "decoder_attention_mask" else not decoder


def hugging_face_inputs(given: dict, names, tokens=None) -> dict:
    """A Hugging Face model's keyword inputs → the network's inputs by name: each of
    `attention_mask` / `decoder_attention_mask` (B×T, bool or 0/1 integers, 1 = attend;
    padding at either end or anywhere) joins the inputs it pads as ``Padded(ids, mask)``
    (`decoder_attention_mask` the `decoder_…` inputs, `attention_mask` the others), and
    `token_type_ids` left out is zeros shaped like `input_ids`, as in `transformers`. The
    mask is then what any padding mask is: attention ignores the padded keys, and positions
    follow it where a layer says so (`mask_positions`). `names` are the network's inputs,
    `tokens` those that take token ids (the ones a mask may pad; None: all of them). `given`
    itself when it holds neither."""
    names = list(names)
    tokens = names if tokens is None else list(tokens)
    masks = [k for k in MASK_KEYS if k in given and k not in names]
    zeros = TOKEN_TYPES in names and TOKEN_TYPES not in given and "input_ids" in given
    if not masks and not zeros:
        return given
    out = {k: v for k, v in given.items() if k not in masks}
    if zeros:
        out[TOKEN_TYPES] = _zeros_like(given["input_ids"])
    for key in masks:
        padded = [n for n in tokens if _padded_by(key, n)]
        if not padded:
            raise DataError(f"'{key}' pads the model's token inputs, but this network has "
                            f"none it applies to (its inputs: {', '.join(names)}). Leave "
                            f"'{key}' out.")
        for name in padded:
            if name in out:               # a missing one is named with the other inputs
                out[name] = _with_mask(out[name], given[key], key, name)
    return out


# transformers' forward arguments in their positional order, by `model_type`, as far as the
# networks of `al.from_pretrained` take them: `net(input_ids, attention_mask)` reads as
# `model(input_ids, attention_mask)` does. What follows the listed ones is an argument no
# network has (position_ids, head_mask, inputs_embeds, a cache), so a call reaching it is
# refused; a model_type not listed takes its first input alone by position.
_MASKED = ("input_ids", "attention_mask")
_POSITIONAL: dict[str, tuple[str, ...]] = {
    "bert": _MASKED + (TOKEN_TYPES,),
    "roberta": _MASKED + (TOKEN_TYPES,),
    "t5": _MASKED + ("decoder_input_ids", "decoder_attention_mask"),
    "gpt2": ("input_ids",),                 # the key/value cache comes second, then the mask
    "vit": ("pixel_values",),
    **dict.fromkeys(("llama", "mistral", "mixtral", "qwen2", "qwen3", "gemma", "gemma2",
                     "phi3", "gpt_neox", "opt", "distilbert"), _MASKED),
}
_SECOND = {"gpt2": "its key/value cache (past_key_values)"}   # said when refused


def _model(net) -> tuple[str | None, str | None]:
    """(model_type, architecture) of a network from `al.from_pretrained`, None where unsaid."""
    meta = net.metadata.get(HUGGING_FACE)
    meta = meta if isinstance(meta, dict) else {}
    config = meta.get("config")
    kind = config.get("model_type") if isinstance(config, dict) else None
    arch = meta.get("architecture")
    return (kind if isinstance(kind, str) else None), (arch if isinstance(arch, str) else None)


def positional_order(net, names) -> tuple[str, ...]:
    """The inputs a Hugging Face network takes by position, in transformers' order: its
    model_type's list, cut before the first argument that is neither one of `names` nor a
    mask of one of them (T5EncoderModel stops after attention_mask)."""
    names = list(names)
    listed = _POSITIONAL.get(_model(net)[0] or "")
    if listed is None:
        first = "input_ids" if "input_ids" in names else names[0] if len(names) == 1 else None
        return (first,) if first else ()
    order: list[str] = []
    for arg in listed:
        pads = arg in MASK_KEYS and any(_padded_by(arg, n) for n in names)
        if arg not in names and not pads:
            break
        order.append(arg)
    return tuple(order)


def hugging_face_positional(net, args: tuple, kwargs: dict, names) -> dict:
    """Inputs of a Hugging Face network given by position (and any by name beside them) →
    a dict by transformers' argument names, the positional ones read in transformers' order
    (`positional_order`). A call that order cannot read is a DataError naming the inputs:
    more inputs by position than it lists, an argument given twice, or a network input
    (other than `token_type_ids`, zeros when left out) that the call leaves out."""
    names = list(names)
    order = positional_order(net, names)
    kind, arch = _model(net)
    model = f"transformers' {arch}" if arch else "the transformers model"
    inputs = f"(the network's inputs: {', '.join(names)})"
    count = f"{len(args)} input{'s' if len(args) != 1 else ''} by position"
    if len(args) > len(order):
        then = _SECOND.get(kind or "") if len(order) == 1 else None
        if not order:
            raise DataError(f"{count}, but this network reads none by position {inputs}. "
                            "Give them in a dict by name.")
        after = (f", then {then}, which no attnlab network takes" if then
                 else ", and nothing after them is an input of this network")
        example = f", as net({order[0]}, attention_mask=mask)," if then else ","
        raise DataError(f"{count}, but {model} reads {', '.join(order)} by position{after}. "
                        f"Give the others by name{example} or all of them in a dict by name "
                        f"{inputs}.")
    given = dict(zip(order, args))
    twice = [k for k in kwargs if k in given]
    if twice:
        raise DataError(f"input '{twice[0]}' given both by position and by name: give it once.")
    given.update(kwargs)
    optional = {TOKEN_TYPES} if "input_ids" in given else set()
    missing = [n for n in names if n not in given and n not in optional]
    if missing:
        raise DataError(f"{count} leave{'s' if len(args) == 1 else ''} out {', '.join(missing)}: "
                        f"{model} reads {', '.join(order)} by position, in this order {inputs}. "
                        f"Give {', '.join(missing)} by name too, or all of them in a dict by name.")
    return given


def _zeros_like(ids):
    """token_type_ids for `ids` (a tensor, an array, Padded or a list of sequences): zeros."""
    if isinstance(ids, Padded):
        return Padded(torch.zeros_like(ids.data, dtype=torch.long), ids.mask)
    if isinstance(ids, (list, tuple)):
        return [torch.zeros(len(s), dtype=torch.long) for s in ids]
    if isinstance(ids, torch.Tensor):
        return torch.zeros(ids.shape, dtype=torch.long, device=ids.device)
    return torch.zeros(np.shape(ids), dtype=torch.long)


def _with_mask(x, mask, key: str, name: str) -> Padded:
    """Input `name` padded by the mask `key`: Padded(x, bool mask), both checked."""
    if isinstance(x, (Padded, list, tuple)):
        what = "al.Padded" if isinstance(x, Padded) else "a list of sequences"
        raise DataError(f"input '{name}' is already padded ({what}) and '{key}' pads it "
                        f"again: give B×T ids with '{key}', or the sequences (or al.Padded) "
                        "without it.")
    if not isinstance(x, torch.Tensor):
        try:
            x = torch.as_tensor(np.asarray(x))
        except (TypeError, ValueError):
            raise DataError(f"input '{name}': expected B×T token ids to go with '{key}', "
                            f"received {type(x).__name__}.") from None
    m = attention_mask(mask, key)
    size = "×".join(map(str, m.shape))
    if x.dim() < 2 or tuple(x.shape[:2]) != tuple(m.shape):
        got = "×".join(map(str, x.shape)) or "a single number"
        raise DataError(f"'{key}' is {size} but input '{name}' is {got}: the mask needs one "
                        f"entry per token, B×T like the ids.")
    return Padded(x, m.to(x.device))


def attention_mask(mask, key: str = "attention_mask") -> torch.Tensor:
    """A Hugging Face attention mask (B×T bools, or integers 0 and 1; 1 = attend) as a B×T
    bool tensor; anything else is a DataError naming `key`."""
    if not isinstance(mask, torch.Tensor):
        try:
            mask = torch.as_tensor(np.asarray(mask))
        except (TypeError, ValueError):
            raise DataError(f"'{key}': expected a B×T tensor of 0/1 (or bools), received "
                            f"{type(mask).__name__}.") from None
    if mask.dtype == torch.bool:
        m = mask
    elif mask.is_floating_point() or mask.is_complex():
        raise DataError(f"'{key}': expected bools or the integers 0 and 1 (1 = attend), "
                        f"received {mask.dtype}. Give mask.long() (or mask.bool()); additive "
                        "float masks are not padding masks.")
    else:
        bad = (mask != 0) & (mask != 1)
        if bool(bad.any()):
            pos = tuple(int(i) for i in bad.nonzero()[0])
            raise DataError(f"'{key}': expected 0 (padding) or 1 (attend), received "
                            f"{int(mask[pos])} at {', '.join(map(str, pos))}.")
        m = mask != 0
    if m.dim() != 2:
        size = "×".join(map(str, m.shape)) or "a single number"
        raise DataError(f"'{key}': expected B×T (one row of 0/1 per sequence), received {size}.")
    return m
