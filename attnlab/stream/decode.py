"""Decoding loops on a stream: `generate` (token by token, greedy or top-k) and `forecast`
(closed-loop regression). Both run the network in eval mode without gradients, like
`Network.predict`, and put every module's mode back afterwards."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, NamedTuple

import numpy as np
import torch
from torch import Tensor

from ..errors import ArgumentError, DataError, SizeError
from .core import stream


class Generated(NamedTuple):
    """What `generate` returns.

    Attributes
    ----------
    tokens : Tensor
        B×L int64 token ids (the start token not included). After a sequence's stop token
        the row holds the stop id again, up to L, the longest sequence's length.
    lengths : Tensor
        B int64: each sequence's generated tokens, its stop token included.
    """

    tokens: Tensor
    lengths: Tensor

    def sequences(self) -> list[list[int]]:
        """Each sequence's token ids, up to and including its stop token."""
        return [row[:n].tolist() for row, n in zip(self.tokens, self.lengths.tolist())]


@contextmanager
def _eval_mode(net):
    modes = [(m, m.training) for m in net.modules()]
    net.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        for m, training in modes:
            m.training = training


def generate(net: Any, static_inputs: dict | None = None,
             start: int | Tensor | np.ndarray | list = 0, stop: int | None = None,
             max_length: int = 100, feedback: Callable | None = None, strategy: str = "greedy",
             k: int = 10, temperature: float = 1.0, output: str | None = None,
             generator: torch.Generator | None = None, device: str | torch.device | None = None,
             precision: str = "fp32", compile: bool | dict = False) -> Generated:
    """Decodes token by token, feeding each chosen token back into the streamed decoder input.

    Batched: one stream step per token for the whole batch, no Python loop over sequences.

    Parameters
    ----------
    net
        A network whose one streamed input is the decoder input and whose output (or the
        output named `output`) gives B×t×V scores (logits or probabilities) over V tokens.
    static_inputs
        The inputs given whole (e.g. ``{"encoder-input": x}``), as for `Network.stream`.
    start
        The first decoder input: a start token id (int, or a B tensor of ids), or a
        prompt: B×t ids or B×t×C inputs, consumed in one multi-step prefill (the key/value
        caches then hold it: the prefix is never recomputed).
    stop
        A token id that ends a sequence (it is included in the output); sequences stop
        one by one while the batch goes on, and decoding ends when all have stopped.
    max_length
        The most tokens generated per sequence.
    feedback
        ``feedback(tokens, scores) → next decoder input``, with tokens the B int64 ids
        just chosen and scores their B×V scores; it returns B×1×C. The default feeds the id
        itself: ``tokens.view(B, 1)`` (int64) into a decoder that starts with `TokenInput`,
        ``tokens.view(B, 1, 1)`` into one that starts with SequenceInput(1) → Embedding.
        For one-hot inputs:
        ``feedback=lambda tok, _: torch.nn.functional.one_hot(tok, V).float().unsqueeze(1)``.
    strategy
        "greedy" (the highest score) or "top-k" (sample among the k highest scores,
        softmax(scores / temperature); pass `generator` for reproducible samples).
    device, precision, compile
        As for `Network.stream` (the network moves to `device`; tokens come back there).

    Returns
    -------
    Generated
        ``Generated(tokens B×L, lengths B)``: the generated tokens, after the prompt.

    Raises
    ------
    DataError
        When the prompt and the tokens fed back would reach past the positions a learned
        `PositionEmbedding` holds (its `max_length`), before any step runs.

    Examples
    --------
    Greedy decoding of a `TokenInput` network, a B×t prompt of ids:

    >>> import torch, attnlab as al
    >>> from attnlab import layers as L
    >>> net = al.Network([L.TokenInput(name="ids"), L.Embedding(50, 8),
    ...                   L.SelfAttention(2, 8, attention_mask="causal"), L.Dense(50)])
    >>> al.generate(net, start=torch.tensor([[3, 1, 4]]), max_length=5).tokens.shape
    torch.Size([1, 5])
    """
    if strategy not in ("greedy", "top-k"):
        raise ArgumentError(f"generate strategy must be 'greedy' or 'top-k', got {strategy!r}")
    if strategy == "top-k" and (not isinstance(k, int) or k < 1):
        raise ArgumentError(f"generate k must be a positive int, got {k!r}")
    if not temperature > 0:
        raise ArgumentError(f"generate temperature must be > 0, got {temperature!r}")
    if not isinstance(max_length, int) or max_length < 1:
        raise ArgumentError(f"generate max_length must be a positive int, got {max_length!r}")
    with _eval_mode(net):
        x = _start_input(start)
        s = stream(net, static_inputs, capacity=(x.shape[1] if x.dim() >= 2 else 1) + max_length,
                   device=device, precision=precision, compile=compile)
        _one_streamed_input(s, "generate")
        x = _expand_start(x, s).to(s.device)
        _check_positions(s, x.shape[1], max_length)
        pick = _output_picker(s, output)
        if feedback is None:
            feedback = _token_feedback(s)
        choose = _greedy if strategy == "greedy" else \
            (lambda scores: _top_k(scores, k, temperature, generator))
        return _decode(s, x, pick, choose, feedback, stop, max_length)


def _decode(s, x, pick, choose, feedback, stop, max_length) -> Generated:
    b = x.shape[0]
    fill = 0 if stop is None else stop
    tokens = torch.full((b, max_length), fill, dtype=torch.long, device=x.device)
    lengths = torch.full((b,), max_length, dtype=torch.long, device=x.device)
    done = torch.zeros(b, dtype=torch.bool, device=x.device)
    for i in range(max_length):
        scores = pick(s.step(x))[:, -1]                      # B×V: the newest step's scores
        tok = choose(scores)                                 # B
        if stop is not None:
            tok = tok.masked_fill(done, stop)                # finished rows keep the stop id
            ends = tok == stop
            lengths = torch.where(ends & ~done, i + 1, lengths)
            done = done | ends
        tokens[:, i] = tok
        # asking whether all have stopped waits for the device: do it every 8 tokens only
        if stop is not None and i % 8 == 7 and bool(done.all()):
            break
        if i + 1 < max_length:
            x = feedback(tok, scores)
    longest = max_length if stop is None else int(lengths.max())
    return Generated(tokens[:, :longest], lengths)


def _greedy(scores):
    return scores.argmax(-1)


def _top_k(scores, k, temperature, generator):
    top, idx = scores.topk(min(k, scores.shape[-1]), dim=-1)           # B×k
    probs = torch.softmax(top / temperature, dim=-1)
    chosen = torch.multinomial(probs, 1, generator=generator)          # B×1, index into top k
    return idx.gather(-1, chosen).squeeze(-1)                          # B


def _start_input(start) -> Tensor:
    """start → a tensor: a 0-d id, B ids, B×t ids or B×t×C inputs."""
    if isinstance(start, Tensor):
        return start
    return torch.as_tensor(np.asarray(start))


def _expand_start(x, s) -> Tensor:
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
        from ..batching import token_ids
        x = token_ids(x, "start", "generate")
    if s.batch_size is not None and x.shape[0] != s.batch_size:
        raise DataError(f"generate: start has batch size {x.shape[0]} but static_inputs have "
                        f"{s.batch_size}. Give one start per sequence, or a single id.")
    return x.long()


def _check_positions(s, prompt: int, max_length: int) -> None:
    """DataError before decoding when the prompt and the tokens fed back after it (positions
    0…prompt + max_length − 2) reach past a learned PositionEmbedding's positions."""
    from .steppers import PositionEmbeddingStepper
    last = prompt + max_length - 2                     # the last token generated is not fed
    for name, st in s.steppers.items():
        if not isinstance(st, PositionEmbeddingStepper):
            continue
        held = st.module.weight.shape[0]
        if prompt > held:
            raise DataError(f"generate: the prompt has {prompt} tokens, more than the {held} "
                            f"positions that layer '{name}' (PositionEmbedding max_length "
                            f"{held}) has learned. Shorten the prompt to at most {held} tokens.")
        if last >= held:
            raise DataError(f"generate: a prompt of {prompt} tokens and max_length {max_length} "
                            f"reach position {last}, past the {held} positions that layer "
                            f"'{name}' (PositionEmbedding max_length {held}) has learned. Use "
                            f"max_length ≤ {held - prompt + 1}, or a shorter prompt.")


def _output_picker(s, output):
    names = s.output_names
    if output is None:
        if len(names) == 1:
            return _identity
        raise ArgumentError(f"the network has outputs {', '.join(names)}: name the one that "
                            "scores the tokens, e.g. output=" + repr(names[0]) + ".")
    if output not in names:
        raise ArgumentError(f"no output '{output}'; outputs: {', '.join(names)}.")
    if len(names) == 1:
        return _identity
    return lambda y: y[output]


def _identity(y):
    return y


def _one_streamed_input(s, what):
    if len(s.input_names) != 1:
        raise ArgumentError(f"{what} feeds one streamed input; this network streams "
                            f"{', '.join(s.input_names)}. Give the others in static_inputs.")


def _token_feedback(s):
    if s._tokens[0]:
        def feed_token_ids(tokens, scores):
            return tokens.view(-1, 1)                        # B → B×1 int64 ids
        return feed_token_ids
    c = s._channels[0]
    if c != 1:
        raise ArgumentError("generate feeds token ids back by default, into a one-channel "
                            f"decoder input (SequenceInput(1) → Embedding); this decoder input "
                            f"has {c} channels. Give feedback=lambda tokens, scores: <B×1×{c}>, "
                            "e.g. one_hot(tokens, V).float().unsqueeze(1).")
    dtype = s._dtype

    def feed_token_id(tokens, scores):
        return tokens.to(dtype).view(-1, 1, 1)               # B → B×1×1
    return feed_token_id


def forecast(net: Any, history: Tensor | np.ndarray, steps: int,
             static_inputs: dict | None = None, feedback: Callable | None = None,
             output: str | None = None, device: str | torch.device | None = None,
             precision: str = "fp32", compile: bool | dict = False) -> Tensor:
    """Closed-loop forecasting with a sequence-to-sequence regression network (each output step
    predicts the next input step): prefill with the history, then feed each prediction back.

    Parameters
    ----------
    history
        B×T×C (or one T×C sequence) of observed steps.
    steps
        How many steps to predict.
    feedback
        ``feedback(prediction B×1×C') → next input B×1×C``; by default the prediction
        itself (then C' must equal C).
    device, precision, compile
        As for `Network.stream` (the prediction comes back on `device`).

    Returns
    -------
    Tensor
        B×steps×C' (steps×C' for a T×C history): the prediction after the history's last
        step, then each one after feeding the previous one back.
    """
    if not isinstance(steps, int) or steps < 1:
        raise ArgumentError(f"forecast steps must be a positive int, got {steps!r}")
    h = _history(history)
    single = h.dim() == 2
    if single:
        h = h.unsqueeze(0)                                            # T×C → 1×T×C
    with _eval_mode(net):
        s = stream(net, static_inputs, capacity=h.shape[1] + steps, device=device,
                   precision=precision, compile=compile)
        _one_streamed_input(s, "forecast")
        pick = _output_picker(s, output)
        p = pick(s.step(h))[:, -1:]                                   # B×1×C'
        if feedback is None and p.shape[-1] != s._channels[0]:
            raise SizeError(f"forecast feeds predictions back as inputs, but the network maps "
                            f"{s._channels[0]} input channels to {p.shape[-1]} output channels. "
                            "Give feedback=lambda y: <B×1×C input> to build the next input.")
        out = p.new_empty(p.shape[0], steps, p.shape[2])
        out[:, :1] = p
        for i in range(1, steps):
            p = pick(s.step(p if feedback is None else feedback(p)))[:, -1:]
            out[:, i:i + 1] = p
    return out[0] if single else out


def _history(history) -> Tensor:
    if isinstance(history, (list, tuple)) and history and not np.isscalar(history[0]):
        lengths = {len(h) for h in history}
        if len(lengths) > 1:
            raise DataError(f"forecast: histories of different lengths ({sorted(lengths)}): a "
                            "streamed batch advances all sequences together. Forecast each "
                            "length group separately.")
        history = np.stack([np.asarray(h) for h in history])
    x = history if isinstance(history, Tensor) else torch.as_tensor(np.asarray(history))
    if x.dim() not in (2, 3):
        raise DataError(f"forecast: history must be B×T×C or T×C, received "
                        f"{'×'.join(map(str, x.shape))}.")
    return x
