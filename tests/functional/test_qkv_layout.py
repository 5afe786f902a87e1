"""Self-attention's q, k and v give the same numbers however their weights lie in memory:
packed in one storage (as a module is built, moved and loaded from a file), placed apart
(three tensors, as a checkpoint maps Llama's), or adjacent but transposed (GPT-2's Conv1D
q|k|v). The path is the module's own, one matmul against the stacked rows; BLAS rounds three
matmuls, or a transposed matrix, differently, which these small sizes show."""
import torch

from attnlab.functional import SelfAttentionModule

C, T = 8, 7


def _module(dtype=torch.float32) -> SelfAttentionModule:
    torch.manual_seed(0)
    m = SelfAttentionModule(C, 2, C, attention_mask="causal").to(dtype).eval()
    with torch.no_grad():
        for lin in (m.query, m.key, m.value):
            lin.bias.normal_()
    return m


def _place(m: SelfAttentionModule, weights, biases) -> None:
    for lin, w, b in zip((m.query, m.key, m.value), weights, biases):
        lin.weight.data, lin.bias.data = w, b


def _apart(m: SelfAttentionModule) -> SelfAttentionModule:
    """A twin of `m` whose q, k, v weights are three tensors, each in a storage of its own."""
    twin = _module(m.query.weight.dtype)
    _place(twin, [lin.weight.detach().clone() for lin in (m.query, m.key, m.value)],
           [lin.bias.detach().clone() for lin in (m.query, m.key, m.value)])
    return twin


def _transposed(m: SelfAttentionModule) -> SelfAttentionModule:
    """A twin of `m` whose q|k|v rows are adjacent in one storage, stored column-major."""
    twin = _module(m.query.weight.dtype)
    w = torch.cat([lin.weight.detach() for lin in (m.query, m.key, m.value)])
    stored = w.t().contiguous().t()                            # in×out in memory
    b = torch.cat([lin.bias.detach() for lin in (m.query, m.key, m.value)])
    _place(twin, stored.split(C), b.split(C))
    return twin


def test_q_k_v_lying_apart_give_what_packed_ones_give():
    for dtype in (torch.float32, torch.bfloat16):
        m = _module(dtype)
        x = torch.randn(2, T, C, generator=torch.Generator().manual_seed(1)).to(dtype)
        apart = _apart(m)
        with torch.no_grad():
            assert m.fused_qkv() is not None and apart.fused_qkv() is None   # no copy kept
            assert torch.equal(apart(x), m(x)), dtype
        assert torch.equal(apart(x), m(x)), dtype               # with gradients too


def test_transposed_q_k_v_give_what_packed_ones_give():
    m = _module()
    twin = _transposed(m)
    for shape in ((1, 1, C), (2, T, C)):                       # one step: a decoding's
        x = torch.randn(*shape, generator=torch.Generator().manual_seed(1))
        with torch.no_grad():
            assert twin.fused_qkv() is not None                # decoding reads it in place
            assert torch.equal(twin(x), m(x)), shape


def test_packing_lays_q_k_v_out_row_major():
    m = _module()
    for twin in (_apart(m), _transposed(m)):
        twin.pack_qkv()
        weights = (twin.query.weight, twin.key.weight, twin.value.weight)
        assert all(w.is_contiguous() for w in weights)
        assert len({w.untyped_storage().data_ptr() for w in weights}) == 1
        with torch.no_grad():
            w, b = twin.fused_qkv()
            assert w.is_contiguous() and w.data_ptr() == twin.query.weight.data_ptr()
            assert torch.equal(w, torch.cat([m.query.weight, m.key.weight, m.value.weight]))
            assert torch.equal(b, torch.cat([m.query.bias, m.key.bias, m.value.bias]))
