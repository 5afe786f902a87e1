"""`generate` on a Phi-3 checkpoint with longrope scaling, across
original_max_position_embeddings: transformers drops its cache there and runs the whole
sequence again with the long factors; attnlab's tokens must be the same."""
import pytest
import torch

import attnlab as al
from pretrained_helpers import hf_greedy, quiet_transformers

transformers = pytest.importorskip("transformers")
quiet_transformers()

VOCAB, ORIGINAL, LONGEST = 64, 8, 32
LONGROPE = {"rope_type": "longrope", "short_factor": [1.0, 1.2, 1.5, 2.0],
            "long_factor": [1.0, 3.0, 9.0, 27.0]}


@pytest.fixture(scope="module")
def longrope(tmp_path_factory):
    folder = tmp_path_factory.mktemp("phi3_longrope_small")
    torch.manual_seed(0)
    config = transformers.Phi3Config(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, initializer_range=0.2,
        max_position_embeddings=LONGEST, original_max_position_embeddings=ORIGINAL,
        rope_theta=100.0, rope_scaling=dict(LONGROPE), pad_token_id=0, bos_token_id=1,
        eos_token_id=2)
    model = transformers.Phi3ForCausalLM(config).eval()
    model.save_pretrained(folder)
    return al.from_pretrained(folder), model


def hf_padded_greedy(model, ids, mask, n):
    with torch.no_grad():
        out = model.generate(ids, attention_mask=mask, max_new_tokens=n, do_sample=False,
                             eos_token_id=None, pad_token_id=0)
    return out[:, ids.shape[1]:]


@pytest.mark.parametrize("prompt_length,new", [(3, 12), (ORIGINAL, 6), (ORIGINAL - 1, 2),
                                               (5, LONGEST - 5)])
def test_greedy_across_the_original_length_equals_transformers(longrope, prompt_length, new):
    net, model = longrope
    torch.manual_seed(prompt_length)
    prompt = torch.randint(3, VOCAB, (2, prompt_length))
    ours = al.generate(net, start=prompt, stop=None, max_new_tokens=new).tokens
    assert ours.tolist() == hf_greedy(model, prompt, new).tolist()


def test_the_switch_changes_the_tokens_as_in_transformers(longrope):
    """Without the recompute (a stream kept on the short factors) the tokens differ: the
    test above would catch a stream that never switches."""
    net, model = longrope
    torch.manual_seed(7)
    prompt = torch.randint(3, VOCAB, (2, 4))
    ours = al.generate(net, start=prompt, stop=None, max_new_tokens=20).tokens
    # the forward pass of each prefix, short factors up to the original length
    ids, kept = prompt, []
    for _ in range(20):
        kept.append(net(ids)[:, -1].argmax(-1))
        ids = torch.cat([ids, kept[-1][:, None]], 1)
    assert ours.tolist() == torch.stack(kept, 1).tolist()
    assert ours.tolist() == hf_greedy(model, prompt, 20).tolist()


def test_left_padded_batch_across_the_original_length_equals_transformers(longrope):
    net, model = longrope
    torch.manual_seed(3)
    prompts = [torch.randint(3, VOCAB, (n,)).tolist() for n in (6, 3, 5)]
    ids = torch.zeros(3, 6, dtype=torch.long)
    mask = torch.zeros(3, 6, dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, 6 - len(p):], mask[i, 6 - len(p):] = torch.tensor(p), 1
    ours = al.generate(net, start=prompts, stop=None, max_new_tokens=10).tokens
    assert ours.tolist() == hf_padded_greedy(model, ids, mask, 10).tolist()
    again = al.generate(net, start=ids, attention_mask=mask, stop=None, max_new_tokens=10)
    assert again.tokens.tolist() == ours.tolist()


def test_sampling_across_the_original_length_equals_transformers(longrope):
    net, model = longrope
    prompt = torch.randint(3, VOCAB, (2, 5), generator=torch.Generator().manual_seed(4))
    torch.manual_seed(11)
    ours = al.generate(net, start=prompt, stop=None, max_new_tokens=9, strategy="sample",
                       top_k=0).tokens
    torch.manual_seed(11)
    with torch.no_grad():
        theirs = model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=True,
                                top_k=0, max_new_tokens=9, eos_token_id=None, pad_token_id=0)
    assert ours.tolist() == theirs[:, 5:].tolist()


def test_every_row_padded_past_the_switch_is_refused(longrope):
    net, _ = longrope
    ids = torch.randint(3, VOCAB, (2, 6))
    mask = torch.ones(2, 6, dtype=torch.long)
    mask[:, 0] = 0                                 # a padding column shared by both rows
    with pytest.raises(al.DataError, match=r"every prompt of this batch is left-padded.*"
                       rf"original_max_position_embeddings \({ORIGINAL}\)"):
        al.generate(net, start=ids, attention_mask=mask, stop=None, max_new_tokens=8)
    # within the original length the same batch decodes
    out = al.generate(net, start=ids, attention_mask=mask, stop=None, max_new_tokens=3)
    assert out.tokens.shape == (2, 3)


@pytest.mark.parametrize("beams,prompt_length,new", [(2, 4, 10), (3, 6, 7)])
def test_beams_across_the_original_length_equal_transformers(longrope, beams, prompt_length,
                                                               new):
    net, model = longrope
    prompt = torch.randint(3, VOCAB, (2, prompt_length),
                           generator=torch.Generator().manual_seed(beams))
    ours = al.generate(net, start=prompt, stop=None, max_new_tokens=new, num_beams=beams)
    with torch.no_grad():
        theirs = model.generate(prompt, attention_mask=torch.ones_like(prompt), num_beams=beams,
                                do_sample=False, max_new_tokens=new, eos_token_id=None,
                                pad_token_id=0)
    assert ours.tokens.tolist() == theirs[:, prompt_length:].tolist()
