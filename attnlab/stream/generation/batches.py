"""Batches of real prompts for `generate`: a list of prompts of different lengths, or ids with
transformers' `attention_mask` (1 = real token), as left-padded B×T ids and a B×T mask; and
the stream told each row's padding, so that padded keys are masked out and each row's
positions start at its first real token (a `PositionEmbedding`, rotary embeddings that
follow the mask), as the forward pass of the left-padded batch gives them."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor

from attnlab.core import checks as check
from attnlab.core.errors import DataError
from ..steppers.attention import CachedAttentionStepper, CrossAttentionStepper
from ..steppers.convolution import PositionEmbeddingStepper

_FOLLOW = (CachedAttentionStepper, CrossAttentionStepper, PositionEmbeddingStepper)


def prompts(start: Any, attention_mask, pad_id: int) -> tuple[Any, Tensor | None]:
    """(start, None) as given, or (B×T left-padded int64 ids, B×T bool mask) for a list of
    prompts of different lengths or ids with an attention_mask."""
    if attention_mask is not None:
        return _masked(start, attention_mask)
    lengths = _lengths(start)
    if lengths is None or len(set(lengths)) < 2:
        return start, None
    t = max(lengths)
    ids = torch.full((len(lengths), t), pad_id, dtype=torch.long)
    mask = torch.zeros(len(lengths), t, dtype=torch.bool)
    for i, (p, n) in enumerate(zip(start, lengths)):
        row = torch.as_tensor(np.asarray(p) if not isinstance(p, Tensor) else p)
        if row.is_floating_point() or row.dtype == torch.bool or row.dim() != 1:
            raise DataError(f"generate argument 'start': prompt {i} is no list of token ids "
                            f"({check.shown(p)}). Give each prompt as a list of int ids.")
        ids[i, t - n:], mask[i, t - n:] = row.long(), True
    return ids, mask


def _lengths(start) -> list[int] | None:
    """Each prompt's length when `start` is a list of B ≥ 1 prompts (lists, tuples or 1-D
    tensors/arrays); None for anything else."""
    if not isinstance(start, (list, tuple)) or not start:
        return None
    out = []
    for p in start:
        if isinstance(p, (list, tuple)):
            out.append(len(p))
        elif isinstance(p, (Tensor, np.ndarray)) and p.ndim == 1:
            out.append(int(p.shape[0]))
        else:
            return None
    return out if all(out) else None


def _masked(start, attention_mask) -> tuple[Tensor, Tensor]:
    mask = attention_mask if isinstance(attention_mask, Tensor) else \
        torch.as_tensor(np.asarray(attention_mask))
    ids = start if isinstance(start, Tensor) else torch.as_tensor(np.asarray(start))
    if ids.dim() != 2 or mask.shape != ids.shape:
        raise check.fail("generate", "attention_mask", f"a B×T mask of the B×T prompt ids "
                         f"(ids {'×'.join(map(str, ids.shape))})", attention_mask,
                         "Give start=ids and attention_mask=mask of the same B×T shape, as "
                         "a tokenizer returns them.")
    if mask.is_floating_point() or not ((mask == 0) | (mask == 1)).all():
        raise check.fail("generate", "attention_mask", "0s and 1s (1 = real token)",
                         attention_mask, "Use the attention_mask the tokenizer returns.")
    mask = mask.bool()
    if (mask[:, 1:] < mask[:, :-1]).any():
        raise DataError("generate argument 'attention_mask': a prompt is padded at its end "
                        "(a 1 before a 0): generation continues each prompt after its last "
                        "token, so pad on the left, as transformers asks of decoder-only "
                        "models (tokenizer.padding_side = 'left').")
    if not mask[:, -1].all():
        raise DataError("generate argument 'attention_mask': a row has no real token. Give "
                        "each prompt at least one token.")
    return ids.long(), mask


def pad_stream(s, mask: Tensor, compiled: bool) -> Tensor | None:
    """Tells each stepper of `s` the rows' left padding (B·beams mask); None when no row is
    padded. DataError when a layer cannot follow it."""
    padding = (~mask).sum(1)
    if not bool(padding.any()):
        return None
    if compiled:
        raise DataError("generate: prompts of different lengths run eagerly; give "
                        "compile=False with a padded batch.")
    bad = [f"'{name}' ({type(st).__name__})" for name, st in s.steppers.items()
           if not isinstance(st, _FOLLOW)]
    if bad:
        raise DataError(f"generate: prompts of different lengths need every layer that looks "
                        f"along time to follow the padding; {', '.join(bad)} cannot. Give "
                        "prompts of one length (one call per length).")
    for st in s.steppers.values():
        if isinstance(st, (CachedAttentionStepper, PositionEmbeddingStepper)):
            st.padding = padding
    return padding
