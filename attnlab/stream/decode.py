"""Decoding loops on a stream: `generate` (token by token: greedy, sampling, beams; its
closed-loop sibling for regression, `forecast`, is in `attnlab.stream.forecast`). Both run the network in eval mode without gradients, like
`Network.predict`, and put every module's mode back afterwards. `generate`'s arguments,
prompts and score processors live in `attnlab.stream.generation`."""
from __future__ import annotations

from contextlib import contextmanager
from types import MappingProxyType
from typing import Any, Callable, Mapping, NamedTuple

import numpy as np
import torch
from torch import Tensor

from attnlab.core.errors import ArgumentError, close_matches
from attnlab.core import checks as check
from ..layers.embedding import Embedding
from .core import stream
from .generation import defaults as D
from .generation import settings as S
from .generation.captured import Captured, capture_argument
from .generation.defaults import DEFAULT
from .generation.processors import Processors
from .generation import batches
from .generation import beams as beam_search
from .generation.prompts import (BeamSwitch, LongropeSwitch, check_positions, expand_start, longrope_switch,
                                 start_input)


class _Fields(NamedTuple):
    tokens: Tensor
    lengths: Tensor
    scores: Tensor | None = None


class Generated(_Fields):
    """What `generate` returns: a tuple of three fields (``tokens, lengths, scores =
    generate(...)`` unpacks it), and the attribute `captured`.

    Attributes
    ----------
    tokens : Tensor
        B×L int64 token ids (the prompt not included). After a sequence's stop token the row
        repeats that stop id, up to L, the longest sequence's length.
    lengths : Tensor
        B int64: each sequence's generated tokens, its stop token included.
    scores : Tensor or None
        With ``return_scores=True``: B×L×V float32, each step's log-probabilities of the
        next token, ``log_softmax`` of the processed scores the token was chosen from (for
        transformers' ``output_scores``: ``log_softmax(out.scores[i], -1)``); rows of a
        sequence that has stopped hold what was computed there, unused.
    captured : dict
        With ``capture=[...]``: name → a list with one tensor per generated token (L of
        them), what the stream step that chose the token computed (`Stream.captured`). The
        first token's step is the prompt's prefill, so its entry covers every prompt
        position (an attention layer's "scores" B×H×T×T); each later entry covers one
        position, its query against every cached key (B×H×1×(T+i) for token i), as
        transformers' ``generate(output_attentions=True)`` gives ``attentions``. Not a tuple
        field: a 4th field would break ``tokens, lengths, scores = ...``. Empty without
        `capture`.
    """

    # the default of results made without it (`_replace`, `_make`); `generate` sets its own
    captured: Mapping[str, list[Tensor]] = MappingProxyType({})

    def __new__(cls, tokens: Tensor, lengths: Tensor, scores: Tensor | None = None,
                captured: dict[str, list[Tensor]] | None = None) -> "Generated":
        self = super().__new__(cls, tokens, lengths, scores)
        if captured is not None:
            self.captured = captured
        return self

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


def generate(net: Any, start: int | Tensor | np.ndarray | list = 0,
             max_new_tokens: int | None = DEFAULT, max_length: int | None = DEFAULT, *,
             static_inputs: dict | None = None,
             stop: int | list[int] | tuple[int, ...] | Tensor | None = DEFAULT,
             strategy: str | None = DEFAULT, temperature: float | None = DEFAULT,
             top_k: int | None = DEFAULT, top_p: float | None = DEFAULT,
             min_p: float | None = DEFAULT, repetition_penalty: float | None = DEFAULT,
             no_repeat_ngram_size: int | None = DEFAULT, num_beams: int | None = DEFAULT,
             length_penalty: float | None = DEFAULT, early_stopping: bool | str | None = DEFAULT,
             attention_mask: Tensor | None = None, callback: Callable | None = None,
             return_scores: bool = False, capture: list[str] | str | None = None,
             generator: torch.Generator | None = None, feedback: Callable | None = None,
             k: int | None = None, output: str | None = None,
             device: str | torch.device | None = None, precision: str = "fp32",
             compile: bool | dict = False) -> Generated:
    """Decodes token by token, feeding each chosen token back into the streamed decoder input,
    with the arguments and the results of transformers' ``model.generate``.

    Batched: one stream step per token for the whole batch, no Python loop over sequences.
    Memory grows with the tokens generated, not with the length asked: the key/value caches
    start at the prompt plus a few dozen steps and double when full, and the tokens are
    gathered as they come.

    Parameters
    ----------
    net
        A network whose one streamed input is the decoder input and whose output (or the
        output named `output`) gives B×t×V scores (logits or probabilities) over V tokens.
    start
        The first decoder input: a start token id (int, or a B tensor of ids), or a
        prompt: B×t ids (a tensor, an array, or a list of B prompts) or B×t×C inputs,
        consumed in one multi-step prefill (the key/value caches then hold it: the prefix
        is not recomputed, except once where a longrope rotary embedding (Phi-3) switches to
        its long factors: as transformers, decoding then runs the whole sequence so far
        again when it grows past original_max_position_embeddings). A start id counts as a prompt of one token. Prompts of
        different lengths are padded on the left (with the checkpoint's pad_token_id, else
        0); each row's padded keys are masked out and its positions start at its first real
        token, as the forward pass of the padded batch gives them.
    max_new_tokens, max_length
        The most tokens generated per sequence: `max_new_tokens` counts the new tokens,
        `max_length` the prompt's and the new ones, as in transformers (give one; both only
        when they agree). Neither: 20 new tokens, transformers' default. `start`,
        `max_new_tokens` and `max_length` may be given by position; the rest are keywords.
    attention_mask
        With B×T prompt ids: transformers' B×T mask, 1 at real tokens, 0 at the left
        padding (a right-padded prompt is refused).
    static_inputs
        The inputs given whole (e.g. ``{"encoder-input": x}``, an encoder's source), as for
        `Network.stream`; by keyword only.
    stop
        A token id, or a list (tuple, 1-D tensor) of ids, that ends a sequence (the id it
        ends with is included in the output); sequences stop one by one while the batch goes
        on, and decoding ends when all have stopped. Each id must be in the vocabulary (below
        the size of the scores).
    strategy
        "greedy" (the highest processed score), "sample" (a draw from the processed scores,
        as transformers' ``do_sample=True``), "beam" (beam search, below) or "top-k"
        (sampling with ``top_k=k``, the older name). None: greedy (beams when num_beams > 1).
    temperature, top_k, top_p, min_p
        For sampling: the scores divided by `temperature` (> 0; default 1), then only the
        `top_k` highest kept (≥ 0, 0 keeps all; default 50, as transformers), the smallest
        set whose probability reaches `top_p` (in (0, 1]; default 1, all), the tokens at least
        `min_p` (in [0, 1]) times as probable as the most probable one. Ignored when greedy,
        as in transformers.
    repetition_penalty, no_repeat_ngram_size
        For every strategy: scores of tokens the sequence holds (prompt included) divided by
        the penalty (> 0) when positive, multiplied when negative; n-grams of that size (≥ 1)
        never repeated. The order of all processors is transformers'
        (`attnlab.stream.generation.processors`).
    num_beams, length_penalty, early_stopping
        Beam search (strategy "beam", or num_beams > 1 with no strategy), as transformers':
        `num_beams` ≥ 2 beams per sequence, finished hypotheses scored by their summed
        log-probability / new tokens ** `length_penalty` (default 1), `early_stopping` True,
        False (default) or "never" (`attnlab.stream.generation.beams`). The key/value caches
        follow the beams in place; the result is each sequence's best hypothesis. It takes
        no `callback`, `return_scores` or `feedback`.
    callback
        ``callback(step, tokens)``, called after each step with the step's index (0, 1, …)
        and the B int64 ids just chosen (a stopped sequence repeats its stop id): what a
        text streamer needs. With a callback, decoding ends at the step where every
        sequence has stopped (without one, it checks every 8 steps).
    return_scores
        True: the result's `scores` holds each step's B×V log-probabilities.
    capture
        Names or fnmatch patterns of values to keep at each step, as `Network.stream` takes
        them (e.g. ``["h.*.attn/scores"]``): the result's `captured` holds them, a list per
        name with one tensor per generated token. Not with beams (their rows are reordered
        at every step, so no step's values belong to the sequence finally chosen).
    generator
        A `torch.Generator` on the stream's device, for sampling (None: torch's global one,
        as transformers, so `torch.manual_seed(s)` before either draws the same tokens).
    feedback
        ``feedback(tokens, scores) → next decoder input``, with tokens the B int64 ids
        just chosen and scores their B×V raw scores; it returns B×1×C. The default feeds the
        id itself: ``tokens.view(B, 1)`` (int64) into a decoder that starts with `TokenInput`,
        ``tokens.view(B, 1, 1)`` into one that starts with SequenceInput(1) → Embedding.
        For one-hot inputs:
        ``feedback=lambda tok, _: torch.nn.functional.one_hot(tok, V).float().unsqueeze(1)``.
    k
        The number of tokens "top-k" samples among (default 10); with "sample" use `top_k`.
    output
        The output that scores the tokens, for a network with several outputs.
    device, precision, compile
        As for `Network.stream` (the network moves to `device`; tokens come back there).

    Notes
    -----
    Defaults: for a network from `al.from_pretrained` whose folder has a generation_config.json, the
    arguments left out take its values, as transformers' ``model.generation_config``:
    `stop` ← ``eos_token_id``, `strategy` ← "sample" where ``do_sample`` is true, and
    `max_new_tokens`, `max_length`, `temperature`, `top_k`, `top_p`, `min_p`,
    `repetition_penalty`, `no_repeat_ngram_size` ← the keys of those names. An argument
    given overrides the file, None included (``stop=None``: no stop id); a length given
    overrides both of the file's lengths. The file's end ids past the vocabulary are left
    out (the network never chooses them, as in transformers).

    Returns
    -------
    Generated
        ``Generated(tokens B×L, lengths B, scores)``: the generated tokens, after the prompt.

    Raises
    ------
    ArgumentError
        For an argument it cannot take (named, with what it expects), before the network is
        touched; for a stop id outside the vocabulary, before any step.
    DataError
        For a `start` that is no prompt (text, prompts of different lengths, no ids), and
        when the prompt and the tokens fed back would reach past the positions a learned
        `PositionEmbedding` holds (its `max_length`), before any step runs; likewise for a
        batch whose every row is left-padded that would take a longrope rotary embedding
        past original_max_position_embeddings.

    Examples
    --------
    Greedy decoding of a `TokenInput` network, a B×t prompt of ids:

    >>> import torch, attnlab as al
    >>> from attnlab import layers as L
    >>> net = al.Network([L.TokenInput(name="ids"), L.Embedding(50, 8),
    ...                   L.SelfAttention(2, 8, attention_mask="causal"), L.Dense(50)])
    >>> al.generate(net, start=torch.tensor([[3, 1, 4]]), max_new_tokens=5).tokens.shape
    torch.Size([1, 5])
    """
    _check_net(net)
    if isinstance(start, dict):
        raise check.fail(S.GEN, "start", "a start id or a prompt (ids, a list of prompts)",
                         start, "The inputs given whole, such as an encoder's source, go to "
                         "static_inputs=: al.generate(net, start=0, static_inputs={...}).")
    v, taken = D.resolve(net, dict(
        stop=stop, max_new_tokens=max_new_tokens, max_length=max_length, strategy=strategy,
        temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p,
        repetition_penalty=repetition_penalty, no_repeat_ngram_size=no_repeat_ngram_size,
        num_beams=num_beams, length_penalty=length_penalty, early_stopping=early_stopping))
    try:
        lengths = S.lengths(v["max_new_tokens"], v["max_length"])
        nb = S.num_beams(v["num_beams"])
        how = S.strategy(v["strategy"], nb)
        beam = S.beam(nb, v["length_penalty"], v["early_stopping"]) if how == "beam" else None
        processing = S.processing(how, v["temperature"], v["top_k"], k, v["top_p"], v["min_p"],
                                  v["repetition_penalty"], v["no_repeat_ngram_size"])
        stops = S.stop_ids(v["stop"])
    except ArgumentError as e:
        raise D.from_file(e, taken) from None
    S.callable_or_none("feedback", feedback, "feedback=lambda tokens, scores: <B×1×C input>")
    S.callable_or_none("callback", callback, "callback=lambda step, tokens: print(tokens)")
    return_scores = check.flag(S.GEN, "return_scores", return_scores)
    if beam is not None:
        _beam_arguments(callback, return_scores, feedback, capture)
    if output is not None and not isinstance(output, str):
        raise check.fail(S.GEN, "output", "an output name (a str) or None", output,
                         "Use e.g. output='logits'.")
    generator = S.generator(generator)
    pad_id = D.generation_config(net).get("pad_token_id")
    start, mask = batches.prompts(start, attention_mask, pad_id if isinstance(pad_id, int) else 0)
    x = start_input(start)
    prompt = x.shape[1] if x.dim() >= 2 else 1
    try:
        S.agree(lengths, prompt)
        new = lengths.new(prompt)
    except ArgumentError as e:
        raise D.from_file(e, taken) from None
    with _eval_mode(net):
        # the caches start at the prompt and a few dozen steps, and double as tokens come:
        # memory follows the tokens generated (a stop id may end decoding long before
        # the length asked), at a handful of doublings' copies over a long run
        if beam is not None:                   # each sequence's beams: rows of the batch
            static_inputs = beam_search.expand(static_inputs, beam.num_beams)
        s = stream(net, static_inputs, capacity=prompt + min(new, _FIRST_STEPS),
                   device=device, precision=precision, compile=compile,
                   capture=capture_argument(capture), _caller=S.GEN)
        _one_streamed_input(s, "generate")
        pick = _output_picker(s, output)
        if stops is not None and "stop" in taken:
            stops = _in_vocabulary(net, output, stops)
        if stops is not None:
            _check_vocabulary(net, output, stops, stop)
        if processing.sample:
            S.check_generator_device(generator, s.device)
        if beam is not None:
            x = _beam_start(x, s, beam.num_beams)
            mask = None if mask is None else mask.repeat_interleave(beam.num_beams, 0)
        x = expand_start(x, s).to(s.device)
        padding = None
        if mask is not None:
            mask = mask.to(s.device)
            padding = batches.pad_stream(s, mask, s.compiled or bool(compile))
        check_positions(s, x.shape[1], new)
        switch = longrope_switch(s, x.shape[1], new, padding)
        if feedback is None:
            feedback = _token_feedback(s)
        if beam is not None:
            search = beam_search.Beams(_prompt_ids(x), beam.num_beams, new, stops,
                                       beam.length_penalty, beam.early_stopping)
            best, ends = beam_search.search(BeamSwitch(s, switch, search), x, pick,
                                            Processors(processing, None, mask), search,
                                            lambda tok: feedback(tok, None))
            return Generated(best, ends)
        ids = _prompt_ids(x) if processing.needs_ids else None
        steps = _Steps(Processors(processing, generator, mask), stops, callback, return_scores)
        kept = Captured(s) if capture is not None else None
        return _decode(s, x, pick, steps, feedback, new, ids, switch, kept)


# key/value cache steps made beyond the prompt at first (the stream's own default); the
# caches double from there as decoding reaches them
_FIRST_STEPS = 64
# tokens kept as one tensor per step, gathered into one B×n tensor every so many steps: the
# list stays short, and the steps are never copied more than twice
_GATHER = 256


def _check_net(net) -> None:
    if not callable(getattr(net, "stream", None)) or not callable(getattr(net, "analyze", None)):
        raise check.fail(S.GEN, "net", "an attnlab Network (a decoder that streams)", net,
                         "Build one with al.Network([...]) or load one with al.load or "
                         "al.from_pretrained.")


def _beam_arguments(callback, return_scores, feedback, capture=None) -> None:
    """What beam search does not take: its beams are reordered every step, so no step's
    tokens are final (transformers refuses a streamer there too)."""
    for arg, value, why in (("callback", callback, "no token is final before the search ends"),
                            ("return_scores", return_scores or None, "scores are per beam"),
                            ("feedback", feedback, "beams feed their token ids back"),
                            ("capture", capture, "each step's values are per beam, and the "
                             "beams are reordered at every step")):
        if value is not None:
            raise check.fail(S.GEN, arg, f"None with strategy='beam' ({why})", value,
                             f"Leave {arg} out, or decode with strategy='greedy' or 'sample'.")


def _beam_start(x: Tensor, s, beams: int) -> Tensor:
    """The prompt of each sequence repeated for its beams (a start id for all: one sequence,
    or one per row of the static inputs, which are repeated already)."""
    if x.dim() == 0:
        return x if s.batch_size is not None else x.reshape(1).repeat(beams)
    return x.repeat_interleave(beams, 0)


def _prompt_ids(x: Tensor) -> Tensor:
    """The prompt as B×t int64 ids, for the processors that read the ids so far (repetition
    penalty, n-gram blocking); ArgumentError for a prompt of B×t×C inputs (C > 1)."""
    if x.dim() == 3 and x.shape[2] != 1:
        raise ArgumentError(f"generate arguments 'repetition_penalty' and 'no_repeat_ngram_size' "
                            f"read the prompt's token ids; this prompt is B×t×{x.shape[2]} "
                            "inputs, not ids. Give the prompt as token ids, or leave them out.")
    ids = x if x.dim() == 2 else x[..., 0]
    if ids.is_floating_point():
        from attnlab.core.batching import token_ids
        ids = token_ids(ids, "start", "generate")
    return ids.long()


def _check_vocabulary(net, output, stops: tuple[int, ...], stop) -> None:
    """ArgumentError when a stop id is past the vocabulary (the size of the scores, else the
    network's Embedding): the network could never choose it, so no sequence would stop."""
    vocab = _vocabulary(net, output)
    bad = [i for i in stops if vocab is not None and i >= vocab]
    if bad and vocab is not None:
        raise check.fail(S.GEN, "stop", f"token ids in the vocabulary, 0…{vocab - 1} (the "
                         f"network scores {vocab} tokens)", stop,
                         f"{bad[0]} is past it, so no sequence could stop there. Use the ids "
                         "of the network's own tokenizer (e.g. its end-of-text id).")


def _in_vocabulary(net, output, stops: tuple[int, ...]) -> tuple[int, ...] | None:
    """A checkpoint's end ids that the network can choose (None: none): transformers keeps
    the others too, and never meets them (GPT-2's 50256 in a model of a smaller vocabulary)."""
    vocab = _vocabulary(net, output)
    kept = tuple(i for i in stops if vocab is None or i < vocab)
    return kept or None


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


class _Steps:
    """What happens to each step's scores: the processors and the choice, the stop ids (a
    stopped row repeats the id it ended with), the callback and the kept log-probabilities."""

    def __init__(self, processors: Processors, stops, callback, keep_scores: bool) -> None:
        self.proc, self.stops, self.callback = processors, stops, callback
        self.kept: list[Tensor] | None = [] if keep_scores else None

    def begin(self, b: int, device, ids: Tensor | None, vocab: int) -> None:
        self.proc.start(ids, None, vocab)
        self.lengths: Tensor | None = None
        if self.stops is None:
            return
        self.one = self.stops[0] if len(self.stops) == 1 else None
        self.ids = torch.tensor(self.stops, dtype=torch.long, device=device)
        self.fill = torch.full((b,), self.stops[0], dtype=torch.long, device=device)
        self.done = torch.zeros(b, dtype=torch.bool, device=device)

    def choose(self, logits: Tensor, history: Tensor | None) -> Tensor:
        proc = self.proc
        if proc.identity and self.kept is None:
            return logits.argmax(-1)
        scores = proc(logits.float(), history)
        if self.kept is not None:
            self.kept.append(torch.log_softmax(scores, -1))
        return proc.choose(scores)

    def finish(self, tok: Tensor, i: int, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """Finished rows keep their stop id; (the tokens, the lengths so far)."""
        if self.stops is not None:
            done = self.done
            if self.one is not None:
                tok = tok.masked_fill(done, self.one)
                ends = tok == self.one
            else:                                            # ... the one each ended with
                tok = torch.where(done, self.fill, tok)
                ends = torch.isin(tok, self.ids)
                self.fill = torch.where(ends & ~done, tok, self.fill)
            lengths = torch.where(ends & ~done, i + 1, lengths)
            self.done = done | ends
        self.proc.record(tok)
        if self.callback is not None:
            self.callback(i, tok)
        return tok, lengths

    def all_done(self, i: int) -> bool:
        """Whether every row has stopped; it waits for the device, so without a callback (whose
        user reads each step's tokens anyway) only every 8 steps."""
        if self.stops is None or (self.callback is None and i % 8 != 7):
            return False
        return bool(self.done.all())

    def scores(self, longest: int) -> Tensor | None:
        return None if self.kept is None else torch.stack(self.kept[:longest], 1)


def _decode(s, x, pick, steps: _Steps, feedback, new: int, ids: Tensor | None,
            switch: LongropeSwitch, kept: "Captured | None" = None) -> Generated:
    b = x.shape[0]
    tokens = _Tokens()
    history = _History(ids) if ids is not None and steps.proc.s.no_repeat_ngram_size else None
    lengths = torch.full((b,), new, dtype=torch.long, device=x.device)
    for i in range(new):
        logits = pick(switch.step(s, x))[:, -1]               # B×V: the newest step's scores
        if kept is not None:
            kept.add()
        if i == 0:
            steps.begin(b, x.device, ids, logits.shape[-1])
        tok = steps.choose(logits, None if history is None else history.ids())
        tok, lengths = steps.finish(tok, i, lengths)
        tokens.append(tok)
        if history is not None:
            history.append(tok)
        if steps.all_done(i):
            break
        if i + 1 < new:
            x = feedback(tok, logits)
    out = tokens.result()                                    # B×steps
    longest = out.shape[1] if steps.stops is None else int(lengths.max())
    return Generated(out[:, :longest], lengths, steps.scores(longest),
                     None if kept is None else kept.result(longest))


class _Tokens:
    """The chosen ids, one B tensor per step, gathered into B×n tensors every `_GATHER` steps:
    as cheap per step as a list append, and memory in step with the tokens generated (never a
    buffer sized for the length asked)."""

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


class _History:
    """The ids so far (the prompt's, then each step's), for n-gram blocking: a B×capacity
    buffer that doubles when full, so a step appends in place."""

    def __init__(self, prompt: Tensor) -> None:
        b, n = prompt.shape
        self.buf = prompt.new_empty(b, 2 * n + _FIRST_STEPS)
        self.buf[:, :n] = prompt
        self.n = n

    def append(self, tok: Tensor) -> None:
        if self.n == self.buf.shape[1]:
            grown = self.buf.new_empty(self.buf.shape[0], 2 * self.n)
            grown[:, :self.n] = self.buf
            self.buf = grown
        self.buf[:, self.n] = tok
        self.n += 1

    def ids(self) -> Tensor:
        return self.buf[:, :self.n]

    def reorder(self, rows: Tensor) -> None:
        self.buf = self.buf.index_select(0, rows)


def _output_picker(s, output):
    names = s.output_names
    if output is None:
        if len(names) == 1:
            return _identity
        raise check.fail(S.GEN, "output", f"the name of the output that scores the tokens, one "
                         f"of {', '.join(map(repr, names))} (the network has {len(names)})",
                         output, f"Use e.g. output={names[0]!r}.")
    if output not in names:
        raise check.fail(S.GEN, "output", f"one of the network's outputs, "
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
