"""Beam search on a stream, as transformers' `generate` does it (`num_beams` > 1, no
sampling): the same candidates, scores, length penalty and stopping rules, so the same
tokens on the same weights.

The batch runs as B·num_beams rows of the stream. Each step every row's log-probabilities
(log_softmax of the scores, then the penalties of `Processors`) add to its beam's score; the
best 2·num_beams continuations of each sequence (more with several stop ids) are kept; those
that end (a stop id, or the last step) are finished hypotheses, scored by their summed
log-probability / (new tokens ** `length_penalty`), and the best `num_beams` of the others
run on. The key/value caches follow the beams they continue: reordered in place along the
batch, the prefix never computed again. `early_stopping`: True ends a sequence once it has
`num_beams` finished hypotheses; False (transformers' default) once no running beam, at its
current length, could beat the worst of them; "never" only when none could at any length."""
from __future__ import annotations

import torch
from torch import Tensor

from attnlab.core.errors import NetworkError
from .processors import Processors

_NEG = -1.0e9                          # transformers' "ruled out" score


def reorder(s, rows: Tensor) -> None:
    """Every stepper's state follows `rows` (B·num_beams indices into the batch), in place
    where it is a buffer other views read (the key/value caches)."""
    for name, st in s.steppers.items():
        cache = getattr(st, "cache", None)
        if cache is not None and getattr(cache, "k", None) is not None:
            for buf in (cache.k, cache.v):
                held = buf[:, :, :cache.n]
                held.copy_(held.index_select(0, rows))
        elif getattr(st, "context", None) is not None:            # a causal convolution
            st.context = st.context.index_select(0, rows)
        elif isinstance(getattr(st, "state", None), (tuple, list)):   # LSTM: 1×B×H each
            st.state = type(st.state)(t.index_select(1, rows) for t in st.state)
        elif isinstance(getattr(st, "state", None), Tensor):          # GRU: 1×B×H
            st.state = st.state.index_select(1, rows)
        elif getattr(st, "needs_snapshot", True) and cache is None \
                and getattr(st, "state", None) is not None:
            raise NetworkError(f"beam search: layer '{name}' keeps a state "
                               f"({type(st).__name__}) that cannot follow the beams. Use "
                               "strategy='greedy' or 'sample' for this network.")


def expand(value, beams: int):
    """An input given whole, each observation repeated `beams` times in a row."""
    if isinstance(value, Tensor):
        return value.repeat_interleave(beams, 0)
    if isinstance(value, dict):
        return {k: expand(v, beams) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [v for v in value for _ in range(beams)]
    import numpy as np
    if isinstance(value, np.ndarray):
        return np.repeat(value, beams, axis=0)
    return value


class Beams:
    """The state of a beam search over B sequences of `beams` beams: the running beams and
    the finished hypotheses, each B×beams, as transformers keeps them."""

    def __init__(self, prompt: Tensor, beams: int, new: int, stops, length_penalty: float,
                 early_stopping) -> None:
        b, t = prompt.shape[0] // beams, prompt.shape[1]
        dev = prompt.device
        self.b, self.k, self.t, self.end = b, beams, t, t + new
        self.lp, self.early = length_penalty, early_stopping
        self.stops = None if stops is None else torch.tensor(stops, device=dev)
        self.keep = max(2, 1 + (0 if stops is None else len(stops))) * beams
        self.top = torch.arange(self.keep, device=dev) < beams
        self.running = torch.zeros(b, beams, self.end, dtype=torch.long, device=dev)
        self.running[:, :, :t] = prompt.view(b, beams, t)
        self.run_scores = torch.full((b, beams), _NEG, device=dev)
        self.run_scores[:, 0] = 0
        self.done = self.running.clone()
        self.done_scores = torch.full((b, beams), _NEG, device=dev)
        self.done_lengths = torch.full((b, beams), new, dtype=torch.long, device=dev)
        self.finished = torch.zeros(b, beams, dtype=torch.bool, device=dev)
        self.open = torch.ones(b, 1, dtype=torch.bool, device=dev)     # improvement possible
        self.offsets = torch.arange(b, device=dev).view(-1, 1) * beams
        self.n = t                                   # the length of the running sequences

    def ids(self) -> Tensor:
        """B·beams×n: the running sequences so far (for n-gram blocking)."""
        return self.running[:, :, :self.n].reshape(self.b * self.k, self.n)

    def step(self, logp: Tensor) -> tuple[Tensor, Tensor, bool]:
        """One step from the processed B·beams×V log-probabilities: (the rows each new
        running beam continues, B·beams; its new token, B·beams; whether to go on)."""
        b, k, n = self.b, self.k, self.n
        v = logp.shape[-1]
        total = (logp.view(b, k, v) + self.run_scores[:, :, None]).view(b, k * v)
        cand_scores, flat = torch.topk(total, self.keep)                       # B×keep
        source, tok = flat // v, flat % v
        cand = self.running.gather(1, source[:, :, None].expand(-1, -1, self.end)).clone()
        cand[:, :, n] = tok
        hits = torch.zeros_like(tok, dtype=torch.bool) if self.stops is None \
            else torch.isin(tok, self.stops)
        if n + 1 >= self.end:
            hits = torch.ones_like(hits)
        # the best `beams` candidates that did not end run on
        run = cand_scores + hits.float() * _NEG
        pick = torch.topk(run, k).indices                                      # B×beams
        self.running = cand.gather(1, pick[:, :, None].expand(-1, -1, self.end))
        self.run_scores = run.gather(1, pick)
        rows = (source.gather(1, pick) + self.offsets).view(-1)
        self._finish(cand, cand_scores, hits)
        self.n = n + 1
        self._heuristic()
        go = bool(self.open.any()) and not (self.early is True and bool(self.finished.all())) \
            and not bool(hits.all())
        return rows, self.running[:, :, n].reshape(-1), go

    def _finish(self, cand, cand_scores, hits) -> None:
        """Candidates that just ended among the best `beams` join the finished hypotheses
        when they beat them (transformers' `_update_finished_beams`)."""
        new = hits & self.top[None, :]
        scores = cand_scores / ((self.n + 1 - self.t) ** self.lp)
        full = self.finished.all(-1, keepdim=True) & (self.early is True)
        scores = scores + full.float() * _NEG + (~self.open).float() * _NEG + (~new) * _NEG
        lengths = torch.full_like(hits, self.n + 1 - self.t, dtype=torch.long)
        merged = torch.cat((self.done_scores, scores), 1)
        best = torch.topk(merged, self.k).indices
        self.done = torch.cat((self.done, cand), 1).gather(
            1, best[:, :, None].expand(-1, -1, self.end))
        self.done_scores = merged.gather(1, best)
        self.done_lengths = torch.cat((self.done_lengths, lengths), 1).gather(1, best)
        self.finished = torch.cat((self.finished, new), 1).gather(1, best)

    def _heuristic(self) -> None:
        """Whether a running beam could still beat the worst finished hypothesis."""
        if self.early == "never" and self.lp > 0.0:
            length = self.end - self.t
        else:
            length = self.n - self.t
        best = self.run_scores[:, :1] / (length ** self.lp)
        worst = torch.where(self.finished, self.done_scores.min(1, keepdim=True)[0], _NEG)
        self.open = self.open & (best > worst).any(-1, keepdim=True)

    def result(self) -> tuple[Tensor, Tensor]:
        """(B×L tokens, B lengths) of each sequence's best hypothesis; after a shorter one's
        end its row repeats its last token (its stop id)."""
        seqs, lengths = self.done[:, 0, self.t:], self.done_lengths[:, 0]
        longest = int(lengths.max())
        seqs = seqs[:, :longest]
        last = seqs.gather(1, (lengths - 1).clamp(min=0).view(-1, 1))
        after = torch.arange(longest, device=seqs.device)[None, :] >= lengths[:, None]
        return torch.where(after, last, seqs), lengths


def search(s, x: Tensor, pick, proc: Processors, beams: Beams, feed) -> tuple[Tensor, Tensor]:
    """The loop: x is the B·beams×t prompt (each sequence's rows repeated)."""
    while True:
        logits = pick(s.step(x, last=True))[:, -1].float()
        if beams.n == beams.t:
            proc.start(beams.ids(), None, logits.shape[-1])
        logp = proc(torch.log_softmax(logits, -1), beams.ids())
        rows, tokens, go = beams.step(logp)
        if not go:
            return beams.result()
        reorder(s, rows)
        proc.reorder(rows)
        proc.record(tokens)
        x = feed(tokens)
