"""Decoding loops on a stream: `generate` (token by token, greedy or top-k) and `forecast`
(closed-loop regression). Both run the network in eval mode without gradients, like
`Network.predict`, and put every module's mode back afterwards."""
from __future__ import annotations

from contextlib import contextmanager
from numbers import Integral
from typing import Any, Callable, NamedTuple

import numpy as np
import torch
from torch import Tensor

from attnlab.core.errors import ArgumentError, DataError, SizeError, close_matches
from attnlab.core import checks as check
from ..layers.embedding import Embedding
from .core import stream


class Generated(NamedTuple):
    """What `generate` returns.

    Attributes
    ----------
    tokens : Tensor
        B×L int64 token ids (the start token not included). After a sequence's stop token
        the row repeats that stop id, up to L, the longest sequence's length.
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
             start: int | Tensor | np.ndarray | list = 0,
             stop: int | list[int] | tuple[int, ...] | Tensor | None = None,
             max_length: int = 100, feedback: Callable | None = None, strategy: str = "greedy",
             k: int = 10, temperature: float = 1.0, output: str | None = None,
             generator: torch.Generator | None = None, device: str | torch.device | None = None,
             precision: str = "fp32", compile: bool | dict = False) -> Generated:
    """Decodes token by token, feeding each chosen token back into the streamed decoder input.

    Batched: one stream step per token for the whole batch, no Python loop over sequences.
    Memory grows with the tokens generated, not with `max_length`: the key/value caches start
    at the prompt plus a few dozen steps and double when full, and the tokens are gathered as
    they come.

    Parameters
    ----------
    net
        A network whose one streamed input is the decoder input and whose output (or the
        output named `output`) gives B×t×V scores (logits or probabilities) over V tokens.
    static_inputs
        The inputs given whole (e.g. ``{"encoder-input": x}``), as for `Network.stream`.
    start
        The first decoder input: a start token id (int, or a B tensor of ids), or a
        prompt: B×t ids (a tensor, an array, or a list of B prompts of equal length) or
        B×t×C inputs, consumed in one multi-step prefill (the key/value caches then hold it:
        the prefix is never recomputed).
    stop
        A token id, or a list (tuple, 1-D tensor) of ids, that ends a sequence (the id it
        ends with is included in the output); sequences stop one by one while the batch goes
        on, and decoding ends when all have stopped. Each id must be in the vocabulary (below
        the size of the scores).
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
    k, temperature
        For "top-k": a positive int (more than V samples among all V), a finite number > 0.
    output
        The output that scores the tokens, for a network with several outputs.
    generator
        A `torch.Generator` on the stream's device, for "top-k".
    device, precision, compile
        As for `Network.stream` (the network moves to `device`; tokens come back there).

    Returns
    -------
    Generated
        ``Generated(tokens B×L, lengths B)``: the generated tokens, after the prompt.

    Raises
    ------
    ArgumentError
        For an argument it cannot take (named, with what it expects), before the network is
        touched; for a stop id outside the vocabulary, before any step.
    DataError
        For a `start` that is no prompt (text, prompts of different lengths, no ids), and
        when the prompt and the tokens fed back would reach past the positions a learned
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
    _check_net(net)
    # positions are int64: 2**53 keeps every count exact in a float too, and no run gets there
    max_length = check.integer(_GEN, "max_length", max_length, most=2**53, example=20)
    strategy = check.choice(_GEN, "strategy", strategy, ("greedy", "top-k"))
    k = check.integer(_GEN, "k", k, example=10)
    temperature = check.positive(_GEN, "temperature", temperature, example="0.7")
    stops = _stop_ids(stop)
    _check_callable("feedback", feedback, "feedback=lambda tokens, scores: <B×1×C input>")
    if output is not None and not isinstance(output, str):
        raise check.fail(_GEN, "output", "an output name (a str) or None", output,
                         "Use e.g. output='logits'.")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise check.fail(_GEN, "generator", "a torch.Generator or None", generator,
                         "Use e.g. generator=torch.Generator().manual_seed(0).")
    x = _start_input(start)
    with _eval_mode(net):
        prompt = x.shape[1] if x.dim() >= 2 else 1
        # the caches start at the prompt and a few dozen steps, and double as tokens come:
        # memory follows the tokens generated (a stop id may end decoding long before
        # max_length), at a handful of doublings' copies over a long run
        s = stream(net, static_inputs, capacity=prompt + min(max_length, _FIRST_STEPS),
                   device=device, precision=precision, compile=compile)
        _one_streamed_input(s, "generate")
        pick = _output_picker(s, output)
        if stops is not None:
            _check_vocabulary(net, output, stops, stop)
        if strategy == "top-k":
            _check_generator_device(generator, s.device)
        x = _expand_start(x, s).to(s.device)
        _check_positions(s, x.shape[1], max_length)
        _check_longrope(s, x.shape[1], max_length)
        if feedback is None:
            feedback = _token_feedback(s)
        choose = _greedy if strategy == "greedy" else \
            (lambda scores: _top_k(scores, k, temperature, generator))
        return _decode(s, x, pick, choose, feedback, stops, max_length)


_GEN = "generate"
# key/value cache steps made beyond the prompt at first (the stream's own default); the
# caches double from there as decoding reaches them
_FIRST_STEPS = 64
# tokens kept as one tensor per step, gathered into one B×n tensor every so many steps: the
# list stays short, and the steps are never copied more than twice
_GATHER = 256


def _check_net(net) -> None:
    if not callable(getattr(net, "stream", None)) or not callable(getattr(net, "analyze", None)):
        raise check.fail(_GEN, "net", "an attnlab Network (a decoder that streams)", net,
                         "Build one with al.Network([...]) or load one with al.load or "
                         "al.from_pretrained.")


def _check_callable(arg, value, example) -> None:
    if value is not None and not callable(value):
        raise check.fail(_GEN, arg, "a function or None (the default)", value, f"Use {example}.")


def _stop_ids(stop) -> tuple[int, ...] | None:
    """stop → its token ids as a tuple (None: no stop); anything but ids ≥ 0 is refused."""
    if stop is None:
        return None
    what = "a token id (an int ≥ 0), a list of them, or None"
    fix = "Use e.g. stop=50256, or stop=[2, 7] to stop at any of several ids."
    if isinstance(stop, (Tensor, np.ndarray)):
        if not _integer_dtype(stop) or stop.ndim > 1 or len(stop.reshape(-1)) == 0:
            raise check.fail(_GEN, "stop", what + " (as a tensor: 0-d or 1-D, of integers, not "
                             "empty)", stop, "Use e.g. stop=torch.tensor([2, 7]).")
        ids = stop.reshape(-1).tolist()                 # a host read, once, before decoding
    elif isinstance(stop, (list, tuple)):
        if not stop:
            raise check.fail(_GEN, "stop", what + " (a list that is not empty)", stop,
                             fix + " Or stop=None to decode max_length tokens.")
        ids = [_item(i) for i in stop]
    else:
        ids = [stop]
    for i in ids:
        if not _is_id(i):
            several = f"{i!r} in it is no token id. " if len(ids) > 1 else ""
            if isinstance(i, float) and i.is_integer() and i >= 0:
                fix = f"Use stop={int(i)} (an int, not a float)."
            raise check.fail(_GEN, "stop", what, stop, several + fix)
    return tuple(int(i) for i in ids)


def _item(value):
    """A 0-d integer tensor or array in a list of ids → its int (anything else as it is)."""
    if isinstance(value, (Tensor, np.ndarray)) and value.ndim == 0 and _integer_dtype(value):
        return value.item()
    return value


def _integer_dtype(x) -> bool:
    if isinstance(x, Tensor):
        return not (x.dtype.is_floating_point or x.dtype.is_complex or x.dtype == torch.bool)
    return x.dtype.kind in "iu"


def _is_id(value) -> bool:
    return isinstance(value, Integral) and not isinstance(value, (bool, np.bool_)) and \
        int(value) >= 0


def _check_vocabulary(net, output, stops: tuple[int, ...], stop) -> None:
    """ArgumentError when a stop id is past the vocabulary (the size of the scores, else the
    network's Embedding): the network could never choose it, so no sequence would stop."""
    vocab = _vocabulary(net, output)
    bad = [i for i in stops if vocab is not None and i >= vocab]
    if bad and vocab is not None:
        raise check.fail(_GEN, "stop", f"token ids in the vocabulary, 0…{vocab - 1} (the "
                         f"network scores {vocab} tokens)", stop,
                         f"{bad[0]} is past it, so no sequence could stop there. Use the ids "
                         "of the network's own tokenizer (e.g. its end-of-text id).")


def _vocabulary(net, output) -> int | None:
    """The number of tokens: the channels of the output that scores them, else the vocab of
    the network's one Embedding; None when neither says."""
    analysis = net.analyze()
    for layer, port, name in net.open_outputs():
        if output is None or name == output:
            spec = analysis.out_specs.get(layer, {}).get(port)
            if spec is not None and spec.channels:
                return int(spec.channels)
            break
    vocabs = {layer.vocab for layer in net.layer_map.values() if isinstance(layer, Embedding)}
    return vocabs.pop() if len(vocabs) == 1 else None


def _check_generator_device(generator, device: torch.device) -> None:
    """Sampling on `device` draws from a generator there: torch refuses another's mid-step."""
    if generator is None:
        return
    g = generator.device
    if g.type != device.type or None not in (g.index, device.index) and g.index != device.index:
        raise check.fail(_GEN, "generator", f"a torch.Generator on the stream's device "
                         f"({device}), one on {g}", generator,
                         f"Use generator=torch.Generator(device={str(device)!r}).manual_seed(0).")


def _decode(s, x, pick, choose, feedback, stops, max_length) -> Generated:
    b = x.shape[0]
    tokens = _Tokens()
    lengths = torch.full((b,), max_length, dtype=torch.long, device=x.device)
    if stops is not None:
        one = stops[0] if len(stops) == 1 else None
        ids = torch.tensor(stops, dtype=torch.long, device=x.device)
        fill = torch.full((b,), stops[0], dtype=torch.long, device=x.device)
        done = torch.zeros(b, dtype=torch.bool, device=x.device)
    for i in range(max_length):
        scores = pick(s.step(x, last=True))[:, -1]           # B×V: the newest step's scores
        tok = choose(scores)                                 # B
        if stops is not None:
            if one is not None:
                tok = tok.masked_fill(done, one)             # finished rows keep the stop id
                ends = tok == one
            else:                                            # ... the one each ended with
                tok = torch.where(done, fill, tok)
                ends = torch.isin(tok, ids)
                fill = torch.where(ends & ~done, tok, fill)
            lengths = torch.where(ends & ~done, i + 1, lengths)
            done = done | ends
        tokens.append(tok)
        # asking whether all have stopped waits for the device: do it every 8 tokens only
        if stops is not None and i % 8 == 7 and bool(done.all()):
            break
        if i + 1 < max_length:
            x = feedback(tok, scores)
    out = tokens.result()                                    # B×steps
    longest = out.shape[1] if stops is None else int(lengths.max())
    return Generated(out[:, :longest], lengths)


class _Tokens:
    """The chosen ids, one B tensor per step, gathered into B×n tensors every `_GATHER` steps:
    as cheap per step as a list append, and memory in step with the tokens generated (never a
    buffer sized for max_length)."""

    def __init__(self) -> None:
        self.steps: list[Tensor] = []
        self.parts: list[Tensor] = []

    def append(self, tok: Tensor) -> None:
        self.steps.append(tok)
        if len(self.steps) == _GATHER:
            self.parts.append(torch.stack(self.steps, 1))
            self.steps = []

    def result(self) -> Tensor:
        parts = self.parts + ([torch.stack(self.steps, 1)] if self.steps else [])
        return parts[0] if len(parts) == 1 else torch.cat(parts, 1)



def _greedy(scores):
    return scores.argmax(-1)


def _top_k(scores, k, temperature, generator):
    top, idx = scores.topk(min(k, scores.shape[-1]), dim=-1)           # B×k
    probs = torch.softmax(top / temperature, dim=-1)
    chosen = torch.multinomial(probs, 1, generator=generator)          # B×1, index into top k
    return idx.gather(-1, chosen).squeeze(-1)                          # B


def _start_input(start) -> Tensor:
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
        from attnlab.core.batching import token_ids
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
        held = st.module.positions
        if prompt > held:
            raise DataError(f"generate: the prompt has {prompt} tokens, more than the {held} "
                            f"positions that layer '{name}' (PositionEmbedding max_length "
                            f"{held}) has learned. Shorten the prompt to at most {held} tokens.")
        if last >= held:
            raise DataError(f"generate: a prompt of {prompt} tokens and max_length {max_length} "
                            f"reach position {last}, past the {held} positions that layer "
                            f"'{name}' (PositionEmbedding max_length {held}) has learned. Use "
                            f"max_length ≤ {held - prompt + 1}, or a shorter prompt.")


def _check_longrope(s, prompt: int, max_length: int) -> None:
    """DataError before decoding when the tokens fed back take the sequence past the
    original_max_position_embeddings of a longrope rotary embedding after a prompt within it:
    every position would then turn by the long factors, the prompt's cached keys included
    (transformers recomputes its cache at that point)."""
    end = prompt + max_length - 1                      # the length once the last token is fed
    for name, st in s.steppers.items():
        scaling = getattr(getattr(getattr(st, "module", None), "rotary", None), "scaling", None)
        if scaling is None or scaling.get("rope_type") != "longrope":
            continue
        most = scaling["original_max_position_embeddings"]
        if prompt <= most < end:
            raise DataError(f"generate: a prompt of {prompt} tokens and max_length {max_length} "
                            f"reach position {end - 1}, past original_max_position_embeddings "
                            f"({most}) of layer '{name}': its longrope rotary embedding then "
                            "turns every position by the long factors, and the prompt's keys "
                            "were turned by the short ones (transformers recomputes its cache "
                            f"there). Use max_length ≤ {most - prompt + 1}, or a prompt of "
                            f"more than {most} tokens.")


def _output_picker(s, output):
    names = s.output_names
    if output is None:
        if len(names) == 1:
            return _identity
        raise check.fail(_GEN, "output", f"the name of the output that scores the tokens, one "
                         f"of {', '.join(map(repr, names))} (the network has {len(names)})",
                         output, f"Use e.g. output={names[0]!r}.")
    if output not in names:
        raise check.fail(_GEN, "output", f"one of the network's outputs, "
                         f"{', '.join(map(repr, names))}", output,
                         close_matches(output, names).strip() or f"Use e.g. output={names[0]!r}.")
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
