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


# GPT-2's Conv1D weights are stored transposed: exact once from_pretrained lays them out
# row-major, as al.load does (BLAS rounds against the two layouts differently)
ROW_MAJOR_PENDING = pytest.mark.xfail(
    strict=True, reason="from_pretrained maps GPT-2's transposed Conv1D weights in place; "
    "exact once it copies them row-major")

CASES = [pytest.param("gpt2", torch.float32, marks=ROW_MAJOR_PENDING),
         ("gpt2", torch.bfloat16)] + \
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
