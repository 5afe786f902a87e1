"""The score processors of `generate` against transformers' own (`LogitsProcessorList` in the
order `generate` builds it): the same processed scores, bit for bit, on random scores and ids,
for each processor alone and all together; the draw is transformers' multinomial."""
import pytest
import torch

from attnlab.stream.generation import settings as S
from attnlab.stream.generation.processors import Processors

lp = pytest.importorskip("transformers.generation.logits_process")

B, V = 4, 40


def theirs(scores, ids, sample, temperature=None, top_k=None, top_p=None, min_p=None,
           repetition_penalty=None, no_repeat_ngram_size=None, prompt_mask=None):
    """transformers' processors, in `GenerationMixin._get_logits_processor`'s order."""
    procs = lp.LogitsProcessorList()
    if repetition_penalty is not None:
        ignore = None if prompt_mask is None else (prompt_mask != 0).int().argmax(1)
        procs.append(lp.RepetitionPenaltyLogitsProcessor(repetition_penalty,
                                                         prompt_ignore_length=ignore))
    if no_repeat_ngram_size:
        procs.append(lp.NoRepeatNGramLogitsProcessor(no_repeat_ngram_size))
    if sample:
        if temperature is not None:
            procs.append(lp.TemperatureLogitsWarper(temperature))
        if top_k:
            procs.append(lp.TopKLogitsWarper(top_k))
        if top_p is not None:
            procs.append(lp.TopPLogitsWarper(top_p))
        if min_p is not None:
            procs.append(lp.MinPLogitsWarper(min_p))
    return procs(ids, scores.clone())


def ours(scores, ids, strategy, prompt_mask=None, **kw):
    kw.setdefault("top_k", 0)
    settings = S.processing(strategy, kw.get("temperature"), kw.get("top_k"), None,
                            kw.get("top_p"), kw.get("min_p"), kw.get("repetition_penalty"),
                            kw.get("no_repeat_ngram_size"))
    p = Processors(settings)
    p.start(ids, None if prompt_mask is None else prompt_mask.bool(), scores.shape[1])
    return p(scores.clone(), ids)


def _data(seed, t=12, vocab=V):
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(B, V, generator=g) * 3
    ids = torch.randint(0, vocab, (B, t), generator=g)
    ids[:, -3:] = ids[:, 2:5]                        # a repeated trigram to block
    return scores, ids


CASES = [
    dict(temperature=0.7),
    dict(top_k=5),
    dict(top_k=1),
    dict(top_p=0.8),
    dict(top_p=0.05),
    dict(min_p=0.1),
    dict(repetition_penalty=1.7),
    dict(repetition_penalty=0.5),
    dict(no_repeat_ngram_size=1),
    dict(no_repeat_ngram_size=3),
    dict(temperature=0.5, top_k=12, top_p=0.9, min_p=0.02, repetition_penalty=1.3,
         no_repeat_ngram_size=2),
]


@pytest.mark.parametrize("kw", CASES, ids=lambda kw: "-".join(kw))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sampling_processors_equal_transformers(kw, seed):
    scores, ids = _data(seed)
    assert torch.equal(ours(scores, ids, "sample", **kw), theirs(scores, ids, True, **kw))


@pytest.mark.parametrize("kw", CASES, ids=lambda kw: "-".join(kw))
def test_greedy_decoding_applies_the_penalties_only(kw):
    scores, ids = _data(5)
    got = ours(scores, ids, "greedy", **kw)
    assert torch.equal(got, theirs(scores, ids, False, **kw))
    if not ({"repetition_penalty", "no_repeat_ngram_size"} & set(kw)):
        assert torch.equal(got, scores)                 # temperature, top_k … shape draws only


def test_the_repetition_penalty_skips_left_padding_as_transformers():
    scores, ids = _data(3)
    mask = torch.ones(B, ids.shape[1], dtype=torch.long)
    mask[1, :4] = 0
    mask[2, :9] = 0
    kw = dict(repetition_penalty=2.0)
    got = ours(scores, ids, "greedy", prompt_mask=mask, **kw)
    assert torch.equal(got, theirs(scores, ids, False, prompt_mask=mask, **kw))
    assert not torch.equal(got, ours(scores, ids, "greedy", **kw))   # padding not counted


def test_ids_past_the_scores_are_no_tokens_to_penalize_or_block():
    scores, ids = _data(4, vocab=V + 8)                 # an embedding larger than the head
    for kw in (dict(repetition_penalty=1.5), dict(no_repeat_ngram_size=2)):
        assert torch.equal(ours(scores, ids, "greedy", **kw), theirs(scores, ids, False, **kw))


def test_a_draw_is_transformers_multinomial_on_the_softmax():
    scores, ids = _data(6)
    settings = S.processing("sample", None, 0, None, None, None, None, None)
    p = Processors(settings, torch.Generator().manual_seed(11))
    got = p.choose(scores)
    want = torch.multinomial(torch.softmax(scores, -1), 1,
                             generator=torch.Generator().manual_seed(11)).squeeze(1)
    assert torch.equal(got, want)
    assert torch.equal(Processors(S.processing("greedy", *[None] * 7)).choose(scores),
                       scores.argmax(-1))


def test_sampling_defaults_are_transformers():
    s = S.processing("sample", None, None, None, None, None, None, None)
    assert (s.sample, s.top_k, s.temperature, s.top_p, s.min_p) == (True, 50, None, None, None)
    # values that change nothing are dropped, as transformers leaves their processor out
    s = S.processing("sample", 1.0, 0, None, 1.0, None, 1.0, 0)
    assert (s.top_k, s.temperature, s.top_p, s.repetition_penalty,
            s.no_repeat_ngram_size) == (None,) * 5
    assert S.processing("top-k", None, None, None, None, None, None, None).top_k == 10
    assert S.processing("top-k", None, None, 4, None, None, None, None).top_k == 4
