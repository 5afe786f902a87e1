"""`generate`'s decoding arguments, checked where they enter: each an attnlab ArgumentError
naming the argument, what it expects, what it received and a fix, before the network runs.

Arguments left at None take transformers' defaults (a checkpoint's generation_config.json
comes first where there is one): greedy decoding, 20 new tokens, and for sampling
`temperature` 1, `top_k` 50, `top_p` 1 — the values `transformers.GenerationConfig` fills in,
so that the same settings draw the same tokens."""
from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral

import numpy as np
import torch
from torch import Tensor

from attnlab.core import checks as check

GEN = "generate"
STRATEGIES = ("greedy", "sample", "beam", "top-k")
# the most tokens of a prompt and its continuation: positions are int64, and 2**53 keeps every
# count exact in a float too; no run gets there
MOST = 2**53
# transformers' own defaults (GenerationConfig), for the arguments left unset
DEFAULT_NEW_TOKENS = 20
DEFAULT_TOP_K = 50
LEGACY_K = 10              # strategy="top-k" without k: its default before "sample" existed


@dataclass(frozen=True)
class Processing:
    """How each step's scores become the next token's distribution (see `processors`).
    A value that changes nothing is None."""

    sample: bool = False
    temperature: float | None = None
    top_k: int | None = None
    top_p: float | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    no_repeat_ngram_size: int | None = None

    @property
    def needs_ids(self) -> bool:
        """Whether a processor reads the ids so far (the prompt's and the generated)."""
        return self.repetition_penalty is not None or self.no_repeat_ngram_size is not None


@dataclass(frozen=True)
class Lengths:
    """`max_new_tokens` and `max_length` as given (None: unset); `new(prompt)` resolves them."""

    max_new_tokens: int | None = None
    max_length: int | None = None

    def new(self, prompt: int) -> int:
        """How many tokens to generate after a prompt of `prompt` tokens (a start id is one):
        max_new_tokens, else max_length − prompt (transformers' count), else 20."""
        if self.max_new_tokens is not None:
            return self.max_new_tokens
        if self.max_length is None:
            return DEFAULT_NEW_TOKENS
        if self.max_length <= prompt:
            raise check.fail(GEN, "max_length", f"more than the prompt's {prompt} tokens "
                             "(max_length counts the prompt and the new tokens, as in "
                             "transformers)", self.max_length,
                             f"Use max_new_tokens={self.max_length} for {self.max_length} new "
                             f"tokens, or max_length={prompt + self.max_length}.")
        return self.max_length - prompt


def lengths(max_new_tokens, max_length) -> Lengths:
    """The checked length arguments: each a positive int or None; both only when they agree,
    which `agree` checks once the prompt is known."""
    new = check.integer(GEN, "max_new_tokens", max_new_tokens, most=MOST, none_ok=True,
                        example=20)
    total = check.integer(GEN, "max_length", max_length, most=MOST, none_ok=True, example=20)
    return Lengths(new, total)


def agree(given: Lengths, prompt: int) -> None:
    """Both lengths given: they must say the same (transformers lets max_new_tokens win and
    warns; a different result than asked is refused here)."""
    if given.max_new_tokens is None or given.max_length is None:
        return
    if given.max_length != prompt + given.max_new_tokens:
        raise check.fail(GEN, "max_length", f"prompt + max_new_tokens = {prompt} + "
                         f"{given.max_new_tokens} = {prompt + given.max_new_tokens}, or None, "
                         "since max_new_tokens is given", given.max_length,
                         "Give one of max_new_tokens (new tokens) and max_length (prompt and "
                         "new tokens), not both.")


def strategy(value, num_beams: int | None) -> str:
    """"greedy", "sample" or "beam" ("top-k" is sampling); None: "beam" when num_beams > 1,
    else greedy. Beam search with sampling is not offered: refused, naming num_beams."""
    if value is None:
        return "beam" if num_beams is not None and num_beams > 1 else "greedy"
    value = check.choice(GEN, "strategy", value, STRATEGIES,
                         extra="None (greedy, or beams when num_beams > 1)")
    if value in ("greedy", "sample", "top-k") and num_beams is not None and num_beams > 1:
        raise check.fail(GEN, "num_beams", f"1 or None with strategy={value!r} (beams are "
                         "strategy='beam', without sampling)", num_beams,
                         "Use strategy='beam' for beam search, or leave num_beams out.")
    if value == "beam" and (num_beams is None or num_beams < 2):
        raise check.fail(GEN, "num_beams", "an int ≥ 2 with strategy='beam'", num_beams,
                         "Use e.g. num_beams=4.")
    return value


@dataclass(frozen=True)
class Beam:
    """Beam search's arguments (transformers' defaults: length_penalty 1, early_stopping
    False)."""

    num_beams: int
    length_penalty: float = 1.0
    early_stopping: bool | str = False


def num_beams(value) -> int | None:
    return check.integer(GEN, "num_beams", value, most=MOST, none_ok=True, example=4)


def beam(num_beams_: int | None, length_penalty, early_stopping) -> Beam:
    """The checked beam arguments; `num_beams_` is the one `strategy` accepted (≥ 2)."""
    if num_beams_ is None:
        raise check.fail(GEN, "num_beams", "an int ≥ 2 with strategy='beam'", num_beams_)
    lp = 1.0 if length_penalty is None else check.real(
        GEN, "length_penalty", length_penalty, what="a finite number",
        fix="Use e.g. length_penalty=1.0 (> 0 favours longer sequences, < 0 shorter).")
    early = False if early_stopping is None else early_stopping
    if not (isinstance(early, bool) or (isinstance(early, str) and early == "never")):
        raise check.fail(GEN, "early_stopping", "True, False or 'never'", early_stopping,
                         "Use early_stopping=True to stop at num_beams finished hypotheses.")
    return Beam(num_beams_, lp, early)


def processing(strategy_: str, temperature, top_k, k, top_p, min_p, repetition_penalty,
               no_repeat_ngram_size) -> Processing:
    """The checked processor arguments, the ones that change nothing dropped. Sampling takes
    transformers' defaults for those left unset (top_k 50); greedy decoding and beams take the
    penalties only, as transformers does (`temperature` and the rest shape a draw)."""
    t = None if temperature is None else check.real(
        GEN, "temperature", temperature, 0, None, low_open=True, what="a finite number > 0",
        fix="Use e.g. temperature=0.7 (or strategy='greedy' for no randomness).")
    kk = None if top_k is None else check.integer(GEN, "top_k", top_k, least=0, most=MOST,
                                                  example=50)
    legacy = None if k is None else check.integer(GEN, "k", k, most=MOST, example=10)
    p = None if top_p is None else check.real(
        GEN, "top_p", top_p, 0, 1, low_open=True, what="a number in (0, 1]",
        fix="Use e.g. top_p=0.9 (1 keeps every token).")
    mp = None if min_p is None else check.real(
        GEN, "min_p", min_p, 0, 1, what="a number in [0, 1]", fix="Use e.g. min_p=0.05.")
    rp = None if repetition_penalty is None else check.real(
        GEN, "repetition_penalty", repetition_penalty, 0, None, low_open=True,
        what="a finite number > 0", fix="Use e.g. repetition_penalty=1.2 (1 for none).")
    ng = None if no_repeat_ngram_size is None else check.integer(
        GEN, "no_repeat_ngram_size", no_repeat_ngram_size, least=0, most=MOST, example=3)
    rp = None if rp == 1.0 else rp
    ng = ng or None
    if strategy_ == "top-k":
        kk = kk if kk is not None else legacy if legacy is not None else LEGACY_K
    elif legacy is not None and strategy_ == "sample":
        raise check.fail(GEN, "k", "None with strategy='sample' (k is strategy='top-k''s)", k,
                         f"Use top_k={legacy} (transformers' name), with strategy='sample'.")
    if strategy_ not in ("sample", "top-k"):
        return Processing(repetition_penalty=rp, no_repeat_ngram_size=ng)
    kk = DEFAULT_TOP_K if kk is None else kk
    return Processing(sample=True, temperature=None if t in (None, 1.0) else t,
                      top_k=kk or None, top_p=None if p in (None, 1.0) else p, min_p=mp,
                      repetition_penalty=rp, no_repeat_ngram_size=ng)


def generator(value) -> torch.Generator | None:
    if value is not None and not isinstance(value, torch.Generator):
        raise check.fail(GEN, "generator", "a torch.Generator or None", value,
                         "Use e.g. generator=torch.Generator().manual_seed(0).")
    return value


def check_generator_device(value, device: torch.device) -> None:
    """Sampling on `device` draws from a generator there: torch refuses another's mid-step."""
    if value is None:
        return
    g = value.device
    if g.type != device.type or None not in (g.index, device.index) and g.index != device.index:
        raise check.fail(GEN, "generator", f"a torch.Generator on the stream's device "
                         f"({device}), one on {g}", value,
                         f"Use generator=torch.Generator(device={str(device)!r}).manual_seed(0).")


def callable_or_none(arg: str, value, example: str) -> None:
    if value is not None and not callable(value):
        raise check.fail(GEN, arg, "a function or None (the default)", value, f"Use {example}.")


def stop_ids(stop) -> tuple[int, ...] | None:
    """stop → its token ids as a tuple (None: no stop); anything but ids ≥ 0 is refused."""
    if stop is None:
        return None
    what = "a token id (an int ≥ 0), a list of them, or None"
    fix = "Use e.g. stop=50256, or stop=[2, 7] to stop at any of several ids."
    if isinstance(stop, (Tensor, np.ndarray)):
        if not integer_dtype(stop) or stop.ndim > 1 or len(stop.reshape(-1)) == 0:
            raise check.fail(GEN, "stop", what + " (as a tensor: 0-d or 1-D, of integers, not "
                             "empty)", stop, "Use e.g. stop=torch.tensor([2, 7]).")
        ids = stop.reshape(-1).tolist()                 # a host read, once, before decoding
    elif isinstance(stop, (list, tuple)):
        if not stop:
            raise check.fail(GEN, "stop", what + " (a list that is not empty)", stop,
                             fix + " Or stop=None to decode max_new_tokens tokens.")
        ids = [_item(i) for i in stop]
    else:
        ids = [stop]
    for i in ids:
        if not _is_id(i):
            several = f"{i!r} in it is no token id. " if len(ids) > 1 else ""
            if isinstance(i, float) and i.is_integer() and i >= 0:
                fix = f"Use stop={int(i)} (an int, not a float)."
            raise check.fail(GEN, "stop", what, stop, several + fix)
    return tuple(dict.fromkeys(int(i) for i in ids))


def _item(value):
    """A 0-d integer tensor or array in a list of ids → its int (anything else as it is)."""
    if isinstance(value, (Tensor, np.ndarray)) and value.ndim == 0 and integer_dtype(value):
        return value.item()
    return value


def integer_dtype(x) -> bool:
    if isinstance(x, Tensor):
        return not (x.dtype.is_floating_point or x.dtype.is_complex or x.dtype == torch.bool)
    return x.dtype.kind in "iu"


def _is_id(value) -> bool:
    return isinstance(value, Integral) and not isinstance(value, (bool, np.bool_)) and \
        int(value) >= 0
