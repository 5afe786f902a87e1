"""`generate`'s `start`: a start id, B ids, B×t prompts of ids or B×t×C inputs, checked and
shaped for the stream's decoder input; DataError for anything else, and for a prompt and a
length that reach past the positions the network holds. `LongropeSwitch`: the one recompute
of the sequence so far where a longrope rotary embedding switches to its long factors."""
from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from attnlab.core import checks as check
from attnlab.core.errors import DataError


def start_input(start) -> Tensor:
    """start → a tensor: a 0-d id, B ids, B×t ids or B×t×C inputs (numbers, not empty);
    DataError for anything else, prompts of different lengths included."""
    given = start
    if isinstance(start, (list, tuple)):
        _equal_prompts(start)
        if start and all(isinstance(p, Tensor) for p in start):
            start = torch.stack(list(start))                # B prompts → B×t
    if not isinstance(start, Tensor):
        try:
            start = np.asarray(start)
        except (TypeError, ValueError) as e:
            raise _start_error("token ids or inputs (numbers)",
                               f"{check.shown(given)}, not an array of numbers ({e})") from None
        if start.dtype.kind not in "iuf":
            what = "text" if start.dtype.kind in "US" else f"{start.dtype} values"
            raise _start_error("token ids or inputs (numbers)", f"{check.shown(given)}" +
                               (f", {what}" if start.ndim else ""))
    x = start if isinstance(start, Tensor) else torch.as_tensor(start)
    if x.dtype == torch.bool or x.is_complex():
        raise _start_error("token ids or inputs (numbers)", f"a tensor of {x.dtype}")
    if x.numel() == 0 or x.dim() > 3:
        raise _start_error("a token id, B ids, B×t prompts or B×t×C inputs",
                           f"{check.shown(given)}, of size {'×'.join(map(str, x.shape))}")
    return x


def _equal_prompts(start: list | tuple) -> None:
    """Prompts of different lengths cannot share the batch's positions (no padded batches
    yet): a DataError, before numpy makes them an object array or fails."""
    lengths = [_length(p) for p in start]
    if all(n is None for n in lengths):
        return                                                 # B start ids
    if any(n is None for n in lengths):
        raise _start_error("either B start ids or B prompts of ids, not both",
                           "a list that mixes ids and prompts")
    if len(set(lengths)) > 1:
        seen = ", ".join(str(n) for n in sorted({n for n in lengths if n is not None}))
        raise _start_error("prompts of equal length", f"{len(start)} prompts of lengths "
                           f"{seen}", "Prompts must have equal length for now: call generate "
                           "once per prompt length (or once per prompt).")


def _length(prompt) -> int | None:
    if isinstance(prompt, (list, tuple)):
        return len(prompt)
    if isinstance(prompt, (Tensor, np.ndarray)) and prompt.ndim:
        return int(prompt.shape[0])
    return None


def _start_error(expected: str, received: str, fix: str = "") -> DataError:
    fix = fix or ("Give a start id (e.g. start=0), a B×t tensor of prompt ids (e.g. "
                  "start=torch.tensor([[3, 1, 4]])) or a list of B prompts of equal length; "
                  "text goes through the network's tokenizer first.")
    err = DataError(f"generate argument 'start': expected {expected}, received {received}. {fix}")
    err.argument = "start"
    return err


def expand_start(x, s) -> Tensor:
    """The first decoder input, B×t×C (B×t int64 ids for a TokenInput)."""
    if s._tokens[0]:
        return _start_ids(x, s)
    if x.dim() == 0:                                   # one start id for the whole batch
        x = x.reshape(1, 1, 1).expand(s.batch_size or 1, 1, 1)
    elif x.dim() == 1:                                 # one start id per sequence
        x = x.reshape(-1, 1, 1)
    elif x.dim() == 2:                                 # B×t prompt ids
        x = x.unsqueeze(-1)
    if s.batch_size is not None and x.shape[0] != s.batch_size:
        raise DataError(f"generate: start has batch size {x.shape[0]} but static_inputs have "
                        f"{s.batch_size}. Give one start per sequence, or a single id.")
    return x


def _start_ids(x, s) -> Tensor:
    """The first input of a TokenInput decoder: B×t int64 ids."""
    if x.dim() == 0:                                   # one start id for the whole batch
        x = x.reshape(1, 1).expand(s.batch_size or 1, 1)
    elif x.dim() == 1:                                 # one start id per sequence
        x = x.reshape(-1, 1)
    elif x.dim() == 3 and x.shape[2] == 1:
        x = x.squeeze(2)
    if x.dim() != 2 or x.shape[1] == 0:
        raise DataError(f"generate: start must be a token id, B ids or a B×t prompt of ids, "
                        f"received {'×'.join(map(str, x.shape))}.")
    if x.is_floating_point() or x.dtype == torch.bool:
        from attnlab.core.batching import token_ids
        x = token_ids(x, "start", "generate")
    if s.batch_size is not None and x.shape[0] != s.batch_size:
        raise DataError(f"generate: start has batch size {x.shape[0]} but static_inputs have "
                        f"{s.batch_size}. Give one start per sequence, or a single id.")
    return x.long()


def check_positions(s, prompt: int, new: int) -> None:
    """DataError before decoding when the prompt and the tokens fed back after it (positions
    0…prompt + new − 2) reach past a learned PositionEmbedding's positions."""
    from ..steppers import PositionEmbeddingStepper
    last = prompt + new - 2                     # the last token generated is not fed
    for name, st in s.steppers.items():
        if not isinstance(st, PositionEmbeddingStepper):
            continue
        held = st.module.positions
        if prompt > held:
            raise DataError(f"generate: the prompt has {prompt} tokens, more than the {held} "
                            f"positions that layer '{name}' (PositionEmbedding max_length "
                            f"{held}) has learned. Shorten the prompt to at most {held} tokens.")
        if last >= held:
            raise DataError(f"generate: a prompt of {prompt} tokens and {new} new tokens "
                            f"reach position {last}, past the {held} positions that layer "
                            f"'{name}' (PositionEmbedding max_length {held}) has learned. Use "
                            f"max_new_tokens ≤ {held - prompt + 1} (max_length ≤ {held + 1}), "
                            "or a shorter prompt.")


def longrope_switch(s, prompt: int, new: int, padding: Tensor | None) -> "LongropeSwitch":
    """Where decoding takes the sequence past original_max_position_embeddings of a longrope
    rotary embedding after a prompt within it: transformers' Phi-3 then drops its cache and
    runs the whole sequence so far again, every position turned by the long factors (its
    `prepare_inputs_for_generation`, when the ids reach that length plus one and the cache
    holds no more than it). DataError before decoding where that cannot be followed."""
    most = _original_length(s)
    end = prompt + new - 1                      # the length once the last token is fed
    if most is None or not prompt <= most < end:
        return LongropeSwitch(None)
    least = 0 if padding is None else int(padding.min())
    if least and end - least > most:
        # every row padded: transformers recomputes at the padded length, still with the
        # short factors (its longest row is shorter), and later turns only the new keys
        # by the long ones, beside cached keys turned by the short ones
        raise DataError(f"generate: every prompt of this batch is left-padded (at least "
                        f"{least} pad tokens), and {new} new tokens take its longest row past "
                        f"original_max_position_embeddings ({most}) of a longrope rotary "
                        "embedding only after the padded length crossed it: the cached keys "
                        "would keep the short factors while new ones turn by the long ones. "
                        "Remove the padding column shared by all rows, or use max_new_tokens "
                        f"≤ {most + least - prompt + 1}.")
    return LongropeSwitch(most)


def _original_length(s) -> int | None:
    """original_max_position_embeddings of the stream's longrope rotary embeddings (None: no
    layer has one)."""
    found = None
    for st in s.steppers.values():
        scaling = getattr(getattr(getattr(st, "module", None), "rotary", None), "scaling", None)
        if scaling is not None and scaling.get("rope_type") == "longrope":
            most = scaling["original_max_position_embeddings"]
            found = most if found is None else min(found, most)
    return found


class LongropeSwitch:
    """Steps a stream as transformers' Phi-3 decodes: when the next input goes in at position
    `at` (original_max_position_embeddings), the stream starts again with every input fed so
    far and that one, in one step; until then the inputs fed are kept for it."""

    def __init__(self, at: int | None) -> None:
        self.at = at
        self.fed: list[Tensor] = []

    def step(self, s, x: Tensor) -> Tensor:
        """`s.step(x, last=True)`, or the whole sequence again at the switch."""
        if self.at is None:
            return s.step(x, last=True)
        if s.position != self.at:
            self.fed.append(x)
            return s.step(x, last=True)
        whole = torch.cat(self.fed + [x], 1)
        self.at, self.fed = None, []
        return s.reset().step(whole, last=True)


class BeamSwitch:
    """The stream beam search steps, with `LongropeSwitch`'s recompute: at the switch the
    running beams' ids so far (which follow every reordering of the beams) run again in one
    step. Everything else is the stream's."""

    def __init__(self, s, switch: LongropeSwitch, search) -> None:
        self.s, self.at, self.search = s, switch.at, search

    @property
    def steppers(self) -> dict:
        return self.s.steppers

    def step(self, x: Tensor, last: bool = False):
        if self.at is None or self.s.position != self.at:
            return self.s.step(x, last=last)
        self.at = None
        ids = self.search.ids()
        whole = ids if x.dim() == 2 else ids.to(x.dtype).unsqueeze(-1)
        if not torch.equal(whole[:, -1:], x):         # the beams' ids end with the fed step
            raise DataError("generate: beam search feeds inputs other than the beams' token "
                            "ids, so the longrope recompute at original_max_position_embeddings "
                            "cannot rebuild the sequences. Use strategy='greedy' or 'sample'.")
        return self.s.reset().step(whole, last=last)
