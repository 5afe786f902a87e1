"""Variable-length sequences: padding, masks and their inverse."""
from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np
import torch


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
    """The inverse of padding: a list of each sequence's valid steps."""
    if mask is None:
        return list(x)
    lengths = mask.sum(1).tolist()
    return [row[:n] for row, n in zip(x, lengths)]
