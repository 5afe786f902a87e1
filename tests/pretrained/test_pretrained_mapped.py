"""Loading maps the file and copies nothing it need not: learnables alias the file's pages
(copy-on-write, never written back), and decoding reads q, k, v in place, never a
concatenated copy."""
import hashlib
import re
from pathlib import Path

import pytest
import torch

import attnlab as al
from attnlab.functional import SelfAttentionModule
from pretrained_helpers import hf_greedy, quiet_transformers, save_checkpoint

transformers = pytest.importorskip("transformers")
quiet_transformers()

VOCAB = 64


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=VOCAB,
                                  n_positions=24, bos_token_id=0, eos_token_id=0)
    model = transformers.GPT2LMHeadModel(cfg)
    return save_checkpoint(model, tmp_path_factory.mktemp("gpt2")), model.eval()


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=48,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, max_position_embeddings=24)
    model = transformers.LlamaForCausalLM(cfg)
    return save_checkpoint(model, tmp_path_factory.mktemp("llama")), model.eval()


def _mapped_ranges(path: Path) -> list[tuple[int, int]]:
    """The address ranges at which this process maps `path` (/proc/self/maps)."""
    maps = Path("/proc/self/maps")
    if not maps.exists():
        pytest.skip("needs /proc/self/maps")
    out = []
    for line in maps.read_text().splitlines():
        if line.endswith(str(path.resolve())):
            lo, hi = re.match(r"([0-9a-f]+)-([0-9a-f]+)", line).groups()
            out.append((int(lo, 16), int(hi, 16)))
    return out


def _in_file(t: torch.Tensor, ranges) -> bool:
    return any(lo <= t.data_ptr() < hi for lo, hi in ranges)


def _attention(net) -> list[SelfAttentionModule]:
    return [m for m in net.modules() if isinstance(m, SelfAttentionModule)]


def _digest(folder: Path) -> str:
    return hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()


def test_learnables_alias_the_mapped_file(gpt2):
    net = al.from_pretrained(gpt2[0])
    ranges = _mapped_ranges(gpt2[0] / "model.safetensors")
    assert ranges
    outside = [n for n, p in net.learnables.items() if not _in_file(p, ranges)]
    assert outside == []                  # float32 file, float32 net: nothing copied


def test_a_converted_dtype_is_copied_not_mapped(gpt2):
    net = al.from_pretrained(gpt2[0], dtype="float64")
    ranges = _mapped_ranges(gpt2[0] / "model.safetensors")
    assert all(not _in_file(p, ranges) for p in net.learnables.values())
    assert all(p.dtype == torch.float64 for p in net.learnables.values())


def test_training_a_loaded_net_never_writes_the_file(gpt2):
    folder, model = gpt2
    before = _digest(folder)
    net = al.from_pretrained(folder)
    net.train()
    params = dict(net.learnables)
    assert params["lm_head/weight"] is params["wte/weight"]
    old = params["wte/weight"].detach().clone()
    opt = torch.optim.SGD(list(net.learnables.values()), lr=0.5)
    ids = torch.randint(0, VOCAB, (2, 5), generator=torch.Generator().manual_seed(0))
    net(input_ids=ids).square().mean().backward()
    opt.step()
    assert not torch.equal(params["wte/weight"].detach(), old)      # it did learn
    assert params["lm_head/weight"] is params["wte/weight"]         # still tied
    assert _digest(folder) == before                                # the file did not
    again = al.from_pretrained(folder)
    assert torch.equal(dict(again.learnables)["wte/weight"], old)


def test_decoding_reads_fused_qkv_in_place(gpt2, monkeypatch):
    """GPT-2's q|k|v are one tensor of the file: the one-matmul step reads a view of it."""
    folder, model = gpt2
    net = al.from_pretrained(folder)
    seen = []
    real = SelfAttentionModule.qkv

    def qkv(self, x, fused):
        seen.append(fused[0].data_ptr() == self.query.weight.data_ptr() and
                    fused[0].untyped_storage().data_ptr() ==
                    self.value.weight.untyped_storage().data_ptr())
        return real(self, x, fused)
    monkeypatch.setattr(SelfAttentionModule, "qkv", qkv)
    prompt = torch.randint(0, VOCAB, (1, 4), generator=torch.Generator().manual_seed(1))
    out = al.generate(net, start=prompt, stop=None, max_new_tokens=6).tokens
    assert seen and all(seen)
    assert out.tolist() == hf_greedy(model, prompt, 6).tolist()


def test_separate_qkv_decode_with_three_matmuls_not_a_copy(llama, monkeypatch):
    """Llama's q, k, v are three tensors of the file, mapped apart: no concatenation is made
    for decoding; each projection is called, and the tokens are transformers'."""
    folder, model = llama
    net = al.from_pretrained(folder)
    with torch.no_grad():
        assert all(m.fused_qkv() is None for m in _attention(net))
    monkeypatch.setattr(SelfAttentionModule, "qkv",
                        lambda *a: pytest.fail("a concatenated q|k|v was used"))
    prompt = torch.randint(0, VOCAB, (1, 4), generator=torch.Generator().manual_seed(2))
    out = al.generate(net, start=prompt, stop=None, max_new_tokens=6).tokens
    assert out.tolist() == hf_greedy(model, prompt, 6).tolist()


def test_a_new_module_keeps_qkv_in_one_storage():
    m = SelfAttentionModule(8, 2, 8)
    names = list(m.state_dict())
    with torch.no_grad():
        for convert in (lambda: m.double(), lambda: m.load_state_dict(
                {k: v.clone() for k, v in m.state_dict().items()})):
            convert()
            w, b = m.fused_qkv()
            assert w.data_ptr() == m.query.weight.data_ptr()
            assert b.data_ptr() == m.query.bias.data_ptr()
            assert torch.equal(w, torch.cat((m.query.weight, m.key.weight, m.value.weight)))
    assert list(m.state_dict()) == names
    opt = torch.optim.Adam(m.parameters())
    m(torch.randn(1, 3, 8, dtype=torch.float64)).sum().backward()           # with gradients: the concatenation
    opt.step()
    with torch.no_grad():
        assert m.fused_qkv()[0].data_ptr() == m.query.weight.data_ptr()
        m.key.weight.data = m.key.weight.data.clone()   # the sharing broken: three matmuls
        assert m.fused_qkv() is None
        x = torch.randn(1, 3, 8, dtype=torch.float64)
        q, k, v = m.project_qkv(x)
        assert torch.equal(k, m.key(x))
