"""A network from `from_pretrained`, saved with `net.save` and read back with `al.load`,
computes exactly what it did (`torch.equal`), in float32 and bfloat16: the loaded one holds
its learnables as every module builds them (row-major, q, k and v packed in one storage),
and the checkpoint's, mapped from its file, must take the same matmuls against the same
matrices, whether the file holds q, k and v apart (Llama, Mixtral, Qwen2), fused (Phi-3) or
transposed (GPT-2's Conv1D).

The sizes are small on purpose: BLAS rounds a matmul against a few rows differently from
one against their concatenation, so that three matmuls where one is meant show here."""
import pytest
import torch

import attnlab as al
from pretrained_helpers import quiet_transformers, save_checkpoint

transformers = pytest.importorskip("transformers")
quiet_transformers()

VOCAB = 40
SMALL = dict(vocab_size=VOCAB, hidden_size=8, intermediate_size=12, num_hidden_layers=2,
             num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=32)


def _model(family: str):
    t = transformers
    if family == "gpt2":
        return t.GPT2LMHeadModel(t.GPT2Config(vocab_size=VOCAB, n_positions=32, n_embd=8,
                                              n_layer=2, n_head=2))
    if family == "llama":
        return t.LlamaForCausalLM(t.LlamaConfig(**SMALL))
    if family == "mixtral":
        return t.MixtralForCausalLM(t.MixtralConfig(**SMALL, num_local_experts=3,
                                                    num_experts_per_tok=2,
                                                    tie_word_embeddings=False))
    if family == "qwen2":
        return t.Qwen2ForCausalLM(t.Qwen2Config(**SMALL))
    assert family == "phi3"                                  # q|k|v one tensor of the file
    return t.Phi3ForCausalLM(t.Phi3Config(**SMALL, pad_token_id=0))


CASES = [("gpt2", torch.bfloat16)] + \
    [(f, d) for f in ("llama", "mixtral", "qwen2", "phi3") for d in (torch.float32, torch.bfloat16)]


@pytest.mark.parametrize("family, dtype", CASES)
def test_saved_and_loaded_computes_exactly_what_from_pretrained_did(tmp_path, family, dtype):
    torch.manual_seed(0)
    folder = save_checkpoint(_model(family).to(dtype), tmp_path / family)
    net = al.from_pretrained(folder)
    assert {p.dtype for p in net.parameters()} == {dtype}
    net.save(tmp_path / "net.attnlab")
    back = al.load(tmp_path / "net.attnlab").eval()
    ids = torch.randint(0, VOCAB, (2, 7), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():                                # inference: views of the weights
        ours, theirs = net(ids), back(ids)
    assert torch.equal(theirs, ours)
    assert torch.equal(back(ids), net(ids))              # with gradients: concatenations
    assert torch.equal(ours, net(ids))                   # and both paths agree


def test_gpt2_in_float32_saved_and_loaded_agrees_to_the_rounding_of_its_layout(tmp_path):
    """GPT-2's Conv1D weights are stored in×out: from_pretrained maps them as they are and
    multiplies as transformers does (x @ W), al.load holds them out×in as every Dense does
    (x @ Wᵀ). Copying the mapped file row-major would make the two bit-equal at the price of
    a second copy of GPT-2's weights while loading, and would move the checkpoint off
    transformers' own rounding; so the two agree to float32 rounding, not bit for bit."""
    torch.manual_seed(0)
    folder = save_checkpoint(_model("gpt2"), tmp_path / "gpt2")
    net = al.from_pretrained(folder)
    net.save(tmp_path / "net.attnlab")
    back = al.load(tmp_path / "net.attnlab").eval()
    ids = torch.randint(0, VOCAB, (2, 7), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ours, theirs = net(ids), back(ids)
    assert {k: torch.equal(v, back.state_dict()[k]) for k, v in net.state_dict().items()} == \
        {k: True for k in net.state_dict()}                   # the same numbers, laid out apart
    torch.testing.assert_close(theirs, ours, rtol=1e-6, atol=1e-6)
