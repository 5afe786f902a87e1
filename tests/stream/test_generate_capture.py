"""`al.generate(..., capture=...)`: the values of each step that chose a token, one entry per
generated token, as transformers' `generate(output_attentions=True)` gives its attentions."""
import pytest
import torch

import attnlab as al
from attnlab import layers as L
from pretrained_helpers import quiet_transformers, save_checkpoint

transformers = quiet_transformers()
VOCAB, NEW = 40, 4


def _gpt2():
    cfg = transformers.GPT2Config(vocab_size=VOCAB, n_positions=32, n_embd=8, n_layer=2,
                                  n_head=2, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return transformers.GPT2LMHeadModel(cfg)


def _llama():                                 # rotary, grouped-query (1 key/value head)
    cfg = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=8, intermediate_size=12,
                                   num_hidden_layers=2, num_attention_heads=2,
                                   num_key_value_heads=1)
    return transformers.LlamaForCausalLM(cfg)


@pytest.fixture(scope="module", params=[_gpt2, _llama], ids=["gpt2", "llama"])
def checkpoint(request, tmp_path_factory):
    torch.manual_seed(0)
    model = request.param()
    model.config._attn_implementation = "eager"          # its attentions, as it computes them
    folder = save_checkpoint(model, tmp_path_factory.mktemp("model"))
    return model, al.from_pretrained(folder)


def test_each_tokens_scores_equal_transformers_attentions(checkpoint):
    model, net = checkpoint
    prompt = torch.randint(0, VOCAB, (2, 5), generator=torch.Generator().manual_seed(3))
    mask = torch.ones_like(prompt)
    mask[0, :2] = 0                                       # row 0 left-padded by 2
    with torch.no_grad():
        hf = model.generate(prompt, attention_mask=mask, max_new_tokens=NEW, do_sample=False,
                            eos_token_id=None, pad_token_id=0, output_attentions=True,
                            return_dict_in_generate=True)
    got = al.generate(net, prompt, max_new_tokens=NEW, attention_mask=mask,
                      capture=["*/scores"])
    assert torch.equal(got.tokens, hf.sequences[:, 5:])
    names = list(got.captured)
    assert len(names) == 2 and all(n.endswith("/scores") for n in names)
    for i in range(NEW):
        for layer, name in enumerate(names):
            ours, theirs = got.captured[name][i], hf.attentions[i][layer]
            assert ours.shape == theirs.shape     # B×H×T×T first (the prefill), then B×H×1×(T+i)
            total = ours.shape[-1]
            real_keys = torch.ones(2, total, dtype=torch.bool)
            real_keys[0, :2] = False
            real_rows = real_keys[:, -ours.shape[2]:]         # the queries of real tokens
            keep = real_rows[:, None, :, None] & real_keys[:, None, None, :]
            torch.testing.assert_close(ours * keep, theirs * keep, atol=1e-5, rtol=1e-4)
            assert not ours[0, ..., :2].any()                 # padded keys: 0


def tiny():
    torch.manual_seed(0)
    return al.Network([L.TokenInput(name="ids"), L.Embedding(VOCAB, 8, name="wte"),
                       L.SelfAttention(2, 8, attention_mask="causal", name="att"),
                       L.Dense(VOCAB, name="head")]).eval()


def test_one_entry_per_generated_token_and_the_tuple_unpacks_as_before():
    net = tiny()
    prompt = torch.randint(0, VOCAB, (2, 3), generator=torch.Generator().manual_seed(0))
    free = al.generate(net, prompt, max_new_tokens=6)
    stop = int(free.tokens[0, 2])                              # row 0 stops at its 3rd token
    got = al.generate(net, prompt, max_new_tokens=6, stop=stop,
                      capture=["att/scores", "head"])
    tokens, lengths, scores = got                              # still three fields
    assert scores is None and len(got) == 3
    longest = tokens.shape[1]
    for name in ("att/scores", "head"):
        assert len(got.captured[name]) == longest
    assert [s.shape for s in got.captured["att/scores"][:2]] == [(2, 2, 3, 3), (2, 2, 1, 4)]
    for i, logits in enumerate(got.captured["head"]):          # the scores each token came from
        assert torch.equal(logits[:, -1].argmax(-1)[1], tokens[1, i])
    assert free.captured == {}                                 # nothing asked, nothing kept


def test_capture_is_refused_with_beams_and_for_unknown_names():
    net = tiny()
    with pytest.raises(al.ArgumentError, match=r"capture.*beams are reordered"):
        al.generate(net, 1, max_new_tokens=2, num_beams=2, capture=["att/scores"])
    with pytest.raises(al.ArgumentError, match=r"'att/scoers' matches no name.*'att/scores'"):
        al.generate(net, 1, max_new_tokens=2, capture=["att/scoers"])
    with pytest.raises(al.ArgumentError, match="capture"):
        al.generate(net, 1, max_new_tokens=2, capture=5)


def test_earlier_tokens_captures_stay_what_their_step_computed():
    torch.manual_seed(0)
    net = al.Network([L.TokenInput(name="ids"), L.Embedding(VOCAB, 8, name="wte"),
                      L.SelfAttention(2, 8, attention_mask="causal", num_kv_heads=1,
                                      rotary=True, name="att"),
                      L.Dense(VOCAB, name="head")]).eval()
    prompt = torch.randint(0, VOCAB, (2, 3), generator=torch.Generator().manual_seed(0))
    got = al.generate(net, prompt, max_new_tokens=5, capture=["att/key", "att/scores"])
    whole = torch.cat([prompt, got.tokens], 1)
    with torch.no_grad():
        full = net.trace(whole, capture=["att/key", "att/scores"])
    for i, (key, scores) in enumerate(zip(got.captured["att/key"], got.captured["att/scores"])):
        n = 3 + i                                    # the keys cached when token i was chosen
        torch.testing.assert_close(key, full["att/key"][:, :, :n], atol=1e-5, rtol=1e-4)
        rows = slice(0, n) if i == 0 else slice(n - 1, n)
        torch.testing.assert_close(scores, full["att/scores"][:, :, rows, :n], atol=1e-5,
                                   rtol=1e-4)
