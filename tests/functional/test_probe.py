"""The inside of one attention module as a probe sees it: queries and keys (after rotary),
the weights, the heads' outputs; captured and replaced, and no cost without a probe."""
from unittest import mock

import pytest
import torch
import torch.nn.functional as F

import attnlab as al
from attnlab.functional.modules import (AttentionModule, AttentionPoolModule,
                                        SelfAttentionModule)
from attnlab.functional.probe import Probe


def _self_attention(**kw):
    torch.manual_seed(0)
    return SelfAttentionModule(8, 2, 8, **kw).eval()


def test_capture_has_documented_sizes_and_scores_match_weights():
    m = _self_attention(num_kv_heads=1)
    x = torch.randn(2, 5, 8)
    p = Probe(capture=("query", "key", "scores", "heads"))
    m.probe = p
    out = m(x)
    m.probe = None
    ref, weights = m(x, need_weights=True)
    assert p.captured["query"].shape == (2, 2, 5, 4)
    assert p.captured["key"].shape == (2, 1, 5, 4)            # the key/value heads
    assert p.captured["scores"].shape == (2, 2, 5, 5)
    assert p.captured["heads"].shape == (2, 5, 2, 4)
    torch.testing.assert_close(p.captured["scores"], weights)
    torch.testing.assert_close(out, ref)


def test_query_and_key_after_rotary():
    m = _self_attention(rotary=True)
    x = torch.randn(1, 6, 8)
    p = Probe(capture=("query", "key"))
    m.probe = p
    m(x)
    q, k, _ = m.project_qkv(x)
    q, k = m.transform_qk(q, k, 0, 0)
    torch.testing.assert_close(p.captured["query"], q.view(1, 6, 2, 4).transpose(1, 2))
    torch.testing.assert_close(p.captured["key"], k.view(1, 6, 2, 4).transpose(1, 2))


def test_padded_keys_weigh_zero_and_rows_sum_to_one():
    m = _self_attention()
    x = torch.randn(2, 4, 8)
    mask = torch.tensor([[True, True, True, True], [True, True, False, False]])
    p = Probe(capture=("scores",))
    m.probe = p
    m(x, masks=(mask,))
    s = p.captured["scores"]
    assert torch.all(s[1, :, :, 2:] == 0)
    torch.testing.assert_close(s.sum(-1), torch.ones(2, 2, 4))


def test_patched_scores_replace_the_pattern():
    m = AttentionModule(2).eval()
    q, k, v = torch.randn(1, 3, 4), torch.randn(1, 5, 4), torch.randn(1, 5, 6)
    uniform = torch.full((1, 2, 3, 5), 0.2)
    m.probe = Probe(patch={"scores": uniform})
    out = m(q, k, v)
    expected = v.mean(1, keepdim=True).expand(1, 3, 6)
    torch.testing.assert_close(out, expected)


def test_patched_heads_feed_the_output_projection():
    m = _self_attention()
    x = torch.randn(1, 3, 8)
    zero_first = lambda h: torch.cat([torch.zeros_like(h[:, :, :1]), h[:, :, 1:]], 2)  # noqa: E731
    p = Probe(capture=("heads",), patch={"heads": zero_first})
    m.probe = p
    out = m(x)
    heads = zero_first(p.captured["heads"]).reshape(1, 3, 8)
    torch.testing.assert_close(out, m.output(heads))


def test_identity_patch_leaves_output_equal():
    m = _self_attention()
    x = torch.randn(2, 4, 8)
    ref = m(x)
    ident = lambda t: t  # noqa: E731
    m.probe = Probe(patch={p: ident for p in ("query", "key", "scores", "heads")})
    torch.testing.assert_close(m(x), ref)


def test_no_probe_takes_the_fused_kernel_and_scores_take_the_explicit_path():
    m = _self_attention()
    x = torch.randn(1, 3, 8)
    with mock.patch.object(F, "scaled_dot_product_attention",
                           wraps=F.scaled_dot_product_attention) as spy:
        m(x)
        assert spy.call_count == 1
        m.probe = Probe(capture=("heads",))            # heads alone: still fused
        m(x)
        assert spy.call_count == 2
        m.probe = Probe(capture=("scores",))
        m(x)
        assert spy.call_count == 2


def test_gradients_flow_through_captured_values():
    m = _self_attention()
    x = torch.randn(1, 3, 8, requires_grad=True)
    p = Probe(capture=("scores",))
    m.probe = p
    m(x)
    p.captured["scores"][0, 0, 1, 0].backward()
    assert x.grad is not None and x.grad.abs().sum() > 0


def test_pool_module_is_probed():
    torch.manual_seed(0)
    m = AttentionPoolModule(8, 2).eval()
    p = Probe(capture=("scores", "query"))
    m.probe = p
    m(torch.randn(2, 5, 8))
    assert p.captured["scores"].shape == (2, 2, 1, 5)
    assert p.captured["query"].shape == (2, 2, 1, 4)


def test_wrong_patch_size_names_layer_port_expected_and_received():
    m = SelfAttentionModule(8, 2, 8)
    m.layer_name = "self-attention"
    m.probe = Probe(patch={"scores": torch.zeros(1, 2, 3, 4)}, layer="self-attention")
    with pytest.raises(al.SizeError, match=r"layer 'self-attention' port 'scores': expected a "
                       r"patch of size 1×2×3×3, but the patch is a tensor of size 1×2×3×4"):
        m(torch.randn(1, 3, 8))


def test_patch_function_returning_a_wrong_size_is_refused():
    m = SelfAttentionModule(8, 2, 8)
    m.probe = Probe(patch={"heads": lambda h: h[:, :, :1]}, layer="att")
    with pytest.raises(al.SizeError, match=r"port 'heads'.*1×3×2×4.*function returned a tensor of "
                                           r"size 1×3×1×4"):
        m(torch.randn(1, 3, 8))


def test_patch_of_another_dtype_is_refused_with_the_fix():
    m = SelfAttentionModule(8, 2, 8)
    m.probe = Probe(patch={"query": torch.zeros(1, 2, 3, 4, dtype=torch.float64)}, layer="a")
    with pytest.raises(al.ArgumentError, match=r"dtype torch.float32.*\.to\(torch.float32\)"):
        m(torch.randn(1, 3, 8))


def test_unknown_port_is_refused():
    with pytest.raises(al.ArgumentError, match="offers the ports query, key, scores, heads, "
                                               "received 'weights'"):
        Probe(capture=("weights",), layer="att")
