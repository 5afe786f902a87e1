"""Each step's scores → the next tokens, as transformers' `generate` does it.

The order is transformers' (`GenerationMixin._get_logits_processor`), on float32 scores:

1. `repetition_penalty`: a score of a token already in the sequence (the prompt's real
   tokens and the generated ones) is divided by the penalty when positive, multiplied by
   it when negative;
2. `no_repeat_ngram_size` n: a token that would complete an n-gram the sequence already
   holds (the prompt's ids included) gets −inf;

and, when sampling only,

3. `temperature`: the scores divided by it;
4. `top_k`: all but the k highest scores (ties kept) get −inf;
5. `top_p`: the lowest scores whose probabilities sum to at most 1 − top_p get −inf (the
   highest is always kept);
6. `min_p`: tokens less probable than min_p × the most probable one's probability get −inf.

Greedy decoding takes the highest processed score; sampling draws with
`torch.multinomial(softmax(scores), 1)`, the draw of transformers, so that the same seed
(`torch.manual_seed`, or a `generator` seeded alike) gives the same tokens."""
from __future__ import annotations

import torch
from torch import Tensor

from .settings import Processing

_NEG = -float("inf")


class Processors:
    """The processors of one `generate` call on a batch of B rows and V tokens; `seen` is
    the B×V record of the tokens each row holds, kept when there is a repetition penalty."""

    def __init__(self, settings: Processing, generator: torch.Generator | None = None,
                 prompt_mask: Tensor | None = None) -> None:
        self.s = settings
        self.generator = generator
        self.prompt_mask = prompt_mask          # B×t, False at a prompt's left padding
        self.seen: Tensor | None = None

    @property
    def identity(self) -> bool:
        """Whether the scores pass unchanged (plain greedy decoding)."""
        s = self.s
        return not (s.sample or s.needs_ids)

    def start(self, prompt_ids: Tensor | None, mask: Tensor | None, vocab: int) -> None:
        """The prompt's ids (B×t; `mask` B×t bool, True at real tokens, None: all real)
        before the first step: the tokens a repetition penalty counts."""
        if self.s.repetition_penalty is None or prompt_ids is None:
            return
        mask = self.prompt_mask if mask is None else mask
        b = prompt_ids.shape[0]
        # ids past the scores (a vocabulary larger than the head) go to a spare column
        ids = prompt_ids.clamp(max=vocab)
        if mask is not None:
            ids = ids.masked_fill(~mask, vocab)        # padding counts as no token
        seen = torch.zeros(b, vocab + 1, dtype=torch.bool, device=prompt_ids.device)
        self.seen = seen.scatter_(1, ids, True)

    def __call__(self, scores: Tensor, ids: Tensor | None) -> Tensor:
        """B×V float32 scores → the processed scores; `ids` the B×n ids so far (for n-gram
        blocking)."""
        s = self.s
        if s.repetition_penalty is not None and self.seen is not None:
            scores = _penalize(scores, self.seen[:, :scores.shape[1]], s.repetition_penalty)
        if s.no_repeat_ngram_size is not None and ids is not None:
            scores = _block_ngrams(scores, ids, s.no_repeat_ngram_size)
        if not s.sample:
            return scores
        if s.temperature is not None:
            scores = scores / s.temperature
        if s.top_k is not None:
            scores = _top_k(scores, s.top_k)
        if s.top_p is not None:
            scores = _top_p(scores, s.top_p)
        if s.min_p is not None:
            scores = _min_p(scores, s.min_p)
        return scores

    def choose(self, scores: Tensor) -> Tensor:
        """The processed B×V scores → the B next ids: the highest, or a draw as transformers'."""
        if not self.s.sample:
            return scores.argmax(-1)
        probs = torch.softmax(scores, dim=-1)
        return torch.multinomial(probs, 1, generator=self.generator).squeeze(1)

    def record(self, tokens: Tensor) -> None:
        """The B tokens just chosen join what each row holds."""
        if self.seen is not None:
            self.seen.scatter_(1, tokens.unsqueeze(1), True)

    def reorder(self, rows: Tensor) -> None:
        """Rows follow the beams they came from (beam search)."""
        if self.seen is not None:
            self.seen = self.seen.index_select(0, rows)


def _penalize(scores: Tensor, seen: Tensor, penalty: float) -> Tensor:
    penalized = torch.where(scores < 0, scores * penalty, scores / penalty)
    return torch.where(seen, penalized, scores)


def _block_ngrams(scores: Tensor, ids: Tensor, n: int) -> Tensor:
    """−inf for each token that completes an n-gram already in `ids` (B×L): the windows whose
    first n − 1 ids equal the last n − 1 ids ban their last id."""
    length = ids.shape[1]
    if length < n:
        return scores
    vocab = scores.shape[1]
    prefix = ids[:, length + 1 - n:]                                  # B×(n−1)
    windows = ids.unfold(1, n, 1)                                     # B×W×n
    hits = (windows[..., :-1] == prefix.unsqueeze(1)).all(-1)         # B×W
    banned = torch.where(hits, windows[..., -1].clamp(max=vocab), vocab)
    mask = torch.zeros(scores.shape[0], vocab + 1, dtype=torch.bool, device=scores.device)
    mask.scatter_(1, banned, True)
    return scores.masked_fill(mask[:, :vocab], _NEG)


def _top_k(scores: Tensor, k: int) -> Tensor:
    k = min(k, scores.shape[-1])
    kth = torch.topk(scores, k)[0][..., -1:]
    return scores.masked_fill(scores < kth, _NEG)


def _top_p(scores: Tensor, p: float) -> Tensor:
    ordered, order = torch.sort(scores, descending=False)
    cumulative = ordered.softmax(-1).cumsum(-1)
    drop = cumulative <= (1 - p)
    drop[..., -1:] = False                                # the most probable token stays
    return scores.masked_fill(drop.scatter(1, order, drop), _NEG)


def _min_p(scores: Tensor, p: float) -> Tensor:
    probs = torch.softmax(scores, dim=-1)
    drop = probs < p * probs.amax(-1, keepdim=True)
    drop.scatter_(-1, probs.argmax(-1, keepdim=True), False)   # the most probable stays
    return scores.masked_fill(drop, _NEG)
