"""`net.stream(capture=..., patch=...)`: each step keeps the values asked for, as `net.trace`
gives them on the whole sequence at the same positions; a stream without them runs the same
step code as before."""
import pytest
import torch

import attnlab as al
from attnlab import layers as L
from attnlab.stream.steppers.attention import CachedAttentionStepper

V, D = 20, 8
SPLITS = (3, 1, 1, 2, 1)             # a prefill of 3, single steps, a chunk of 2


def gpt(rotary=False, kv_heads=None):
    """A tiny GPT: embeddings, causal self-attention (rotary, grouped-query if asked), a
    norm and a head."""
    torch.manual_seed(0)
    att = dict(attention_mask="causal", name="att", rotary=rotary)
    if kv_heads:
        att["num_kv_heads"] = kv_heads
    return al.Network([L.TokenInput(name="ids"), L.Embedding(V, D, name="wte"),
                       L.SelfAttention(2, D, **att), L.LayerNorm(name="ln"),
                       L.Dense(V, name="head")]).eval()


def ids(b=2, t=sum(SPLITS)):
    return torch.randint(0, V, (b, t), generator=torch.Generator().manual_seed(1))


def steps(s, x, splits=SPLITS):
    """(start, end, the step's output, its captures) of each chunk of x."""
    out, at = [], 0
    for n in splits:
        y = s.step(x[:, at:at + n])
        out.append((at, at + n, y, s.captured))
        at += n
    return out


def close(a, b):
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("make", [gpt, lambda: gpt(rotary=True, kv_heads=1)],
                         ids=["plain", "rotary-gqa"])
def test_each_step_captures_what_the_trace_of_the_whole_sequence_has_there(make):
    net, x = make(), ids()
    names = ["wte", "att/out", "ln/out", "att/scores", "att/heads", "att/query", "att/key"]
    with torch.no_grad():
        full = net.trace(x, capture=names)
    for a, b, y, got in steps(net.stream(capture=names), x):
        assert set(got) == set(names)
        close(got["wte"], full["wte"][:, a:b])
        close(got["att/out"], full["att/out"][:, a:b])
        close(got["ln/out"], full["ln/out"][:, a:b])
        close(got["att/heads"], full["att/heads"][:, a:b])
        close(got["att/query"], full["att/query"][:, :, a:b])       # after rotary
        close(got["att/key"], full["att/key"][:, :, :b])            # every cached key
        # the new queries' rows of the causal scores, over the keys up to the newest
        assert got["att/scores"].shape == (2, 2, b - a, b)
        close(got["att/scores"], full["att/scores"][:, :, a:b, :b])
        close(y, full.outputs[:, a:b])                              # the step unchanged


def test_patterns_select_as_the_trace_does_and_unknown_names_are_refused():
    net = gpt()
    s = net.stream(capture=["att/s*", "head"])
    s.step(ids()[:, :2])
    assert sorted(s.captured) == ["att/scores", "head"]      # a layer alone: its one output
    with pytest.raises(al.ArgumentError, match=r"'att/score' matches no name.*'att/scores'"):
        net.stream(capture=["att/score"])
    with pytest.raises(al.ArgumentError, match=r"'hed/out' matches no name.*'head/out'"):
        net.stream(patch={"hed/out": lambda v: v})
    with pytest.raises(al.ArgumentError, match="a tensor .* or a callable"):
        net.stream(patch={"head/out": 3})
    with pytest.raises(al.ArgumentError, match="names or patterns"):
        net.stream(capture=[3])
    with pytest.raises(al.ArgumentError, match="leave compile out"):
        net.stream(capture=["att/scores"], compile=True)


def test_a_patch_at_every_step_equals_the_same_patch_on_the_whole_sequence():
    net, x = gpt(), ids()

    def no_head0(h):                                  # B×t×H×dv: head 0 silenced
        h = h.clone()
        h[:, :, 0] = 0
        return h

    def halve(v):
        return v * 0.5

    patch = {"att/heads": no_head0, "wte": halve}
    with torch.no_grad():
        full = net.trace(x, capture=["att/out"], patch=patch)
        plain = net(x)
    s = net.stream(capture=["att/out"], patch=patch)
    for a, b, y, got in steps(s, x):
        close(y, full.outputs[:, a:b])
        close(got["att/out"], full["att/out"][:, a:b])
    assert not torch.allclose(full.outputs, plain)          # the patch changed something
    s = net.stream(patch={"head/out": torch.zeros(2, 1, V)})
    s.step(x[:, :1])
    with pytest.raises(al.SizeError, match=r"layer 'head' port 'out'.*2×2×20.*2×1×20"):
        s.step(x[:, 1:3])


def test_values_of_the_static_inputs_are_captured_once_whole():
    torch.manual_seed(0)
    net = al.Network([L.SequenceInput(D, name="x"),
                      L.MultiHeadAttention(2, D, name="cross"), L.Dense(3, name="fc")])
    net.add([L.SequenceInput(D, name="mem"), L.Dense(D, name="enc")])
    net.connect("enc", "cross/key")
    net.connect("enc", "cross/value")
    net.eval()
    x, mem = torch.randn(2, 5, D), torch.randn(2, 4, D)
    names = ["enc/out", "cross/scores", "cross/key", "fc/out"]
    with torch.no_grad():
        full = net.trace({"x": x, "mem": mem}, capture=names)
    s = net.stream({"mem": mem}, capture=names)
    assert list(s.captured) == ["enc/out"]                  # made at creation
    for a, b, _, got in steps(s, x, (2, 1, 2)):
        close(got["enc/out"], full["enc/out"])
        close(got["cross/key"], full["cross/key"])
        close(got["cross/scores"], full["cross/scores"][:, :, a:b])
        close(got["fc/out"], full["fc/out"][:, a:b])


def test_a_nested_network_names_its_layers_under_its_own():
    torch.manual_seed(0)
    block = al.Network([L.SequenceInput(D, name="in"),
                        L.SelfAttention(2, D, attention_mask="causal", name="att"),
                        L.Dense(D, name="fc")], name="block")
    net = al.Network([L.TokenInput(name="ids"), L.Embedding(V, D, name="wte"), block,
                      L.Dense(V, name="head")]).eval()
    x = ids()
    names = ["block/att/scores", "block/fc/out", "block/fc"]        # its output port: fc
    with torch.no_grad():
        full = net.trace(x, capture=names)
    for a, b, _, got in steps(net.stream(capture=["block/*"]), x):
        assert set(names) <= set(got)
        close(got["block/att/scores"], full["block/att/scores"][:, :, a:b, :b])
        close(got["block/fc/out"], full["block/fc/out"][:, a:b])
        close(got["block/fc"], full["block/fc"][:, a:b])


def test_last_only_steps_and_refused_steps_keep_whole_captures():
    net, x = gpt(), ids()
    s = net.stream(capture=["head/out", "att/scores"])
    y = s.step(x[:, :4], last=True)
    assert y.shape == (2, 1, V)
    assert s.captured["head/out"].shape == (2, 4, V)         # the whole step's values
    close(s.captured["head/out"][:, -1:], y)
    before = s.captured
    with pytest.raises(al.DataError):
        s.step(torch.full((2, 1), V + 5))                     # past the vocabulary
    assert s.position == 4 and s.captured.keys() == before.keys()
    assert torch.equal(s.captured["att/scores"], before["att/scores"])
    s.reset()
    assert s.captured == {}


def test_without_capture_the_step_code_and_its_fast_path_are_as_before(monkeypatch):
    net, x = gpt(), ids()
    plain, captured = net.stream(), net.stream(capture=["att/scores", "head/out"])
    assert plain.source == net.stream(capture=None, patch=None).source
    assert len(captured.source.splitlines()) > len(plain.source.splitlines())   # its taps
    assert plain.captured == {}
    calls = []
    explicit = CachedAttentionStepper._step_many
    monkeypatch.setattr(CachedAttentionStepper, "_step_many",
                        lambda self, *a, **k: calls.append(1) or explicit(self, *a, **k))
    plain.step(x[:, :1])
    plain.step(x[:, 1:2])                      # decoding: the fused step, no explicit path
    assert calls == []
    captured.step(x[:, :1])                    # probed: through the module's attend
    assert calls == [1]



def test_an_attention_layers_scores_output_is_patched_once_by_its_probe():
    torch.manual_seed(0)
    net = al.Network([L.SequenceInput(D, name="x"),
                      L.MultiHeadAttention(2, D, has_scores_output=True, name="cross"),
                      L.Dense(3, name="fc")])
    net.add(L.SequenceInput(D, name="mem"))
    net.connect("mem", "cross/key")
    net.connect("mem", "cross/value")
    net.eval()
    x, mem = torch.randn(2, 4, D), torch.randn(2, 5, D)
    calls = []

    def sharpen(w):                          # not idempotent: applied twice, it would show
        calls.append(1)
        w = w ** 2
        return w / w.sum(-1, keepdim=True)

    with torch.no_grad():
        full = net.trace({"x": x, "mem": mem}, capture=["cross/scores"],
                         patch={"cross/scores": sharpen})
    s = net.stream({"mem": mem}, capture=["cross/scores"], patch={"cross/scores": sharpen})
    calls.clear()
    for a, b, y, got in steps(s, x, (1, 3)):
        close(y["fc"], full.outputs["fc"][:, a:b])
        close(y["cross/scores"], full.outputs["cross/scores"][:, :, a:b])
        close(got["cross/scores"], full["cross/scores"][:, :, a:b])
    assert len(calls) == 2                   # once a step


def test_captures_kept_across_steps_survive_a_windowed_cache_moving_its_keys():
    torch.manual_seed(0)
    net = al.Network([L.TokenInput(name="ids"), L.Embedding(V, D, name="wte"),
                      L.SelfAttention(2, D, attention_mask="causal", num_kv_heads=1, window=2,
                                      name="att"), L.Dense(V, name="head")]).eval()
    x = ids(t=12)
    with torch.no_grad():
        full = net.trace(x, capture=["att/key"])
    s = net.stream(capacity=4, capture=["att/key"])          # compacted as it fills
    kept = [got["att/key"] for _, _, _, got in steps(s, x, (1,) * 12)]
    for end, key in enumerate(kept, 1):                       # the keys the cache held then
        close(key, full["att/key"][:, :, end - key.shape[2]:end])


def test_a_nested_encoder_run_once_from_static_inputs_is_captured_inside():
    torch.manual_seed(0)
    encoder = al.Network([L.SequenceInput(D, name="in"),
                          L.SelfAttention(2, D, name="att"), L.LayerNorm(name="ln")],
                         name="encoder")
    net = al.Network([L.SequenceInput(D, name="x"),
                      L.MultiHeadAttention(2, D, name="cross"), L.Dense(3, name="fc")])
    net.add([L.SequenceInput(D, name="mem"), encoder])
    net.connect("encoder", "cross/key")
    net.connect("encoder", "cross/value")
    net.eval()
    x, mem = torch.randn(2, 3, D), torch.randn(2, 4, D)
    names = ["encoder/att/scores", "encoder/ln/out"]

    def double(v):
        return v * 2

    with torch.no_grad():
        full = net.trace({"x": x, "mem": mem}, capture=names, patch={"encoder/att/out": double})
    s = net.stream({"mem": mem}, capture=names, patch={"encoder/att/out": double})
    assert sorted(s.captured) == sorted(names)               # made once, at creation
    close(s.captured["encoder/att/scores"], full["encoder/att/scores"])
    close(s.captured["encoder/ln/out"], full["encoder/ln/out"])
    close(s.step(x), full.outputs)                           # the patch reached the cross keys


def test_captured_follows_the_order_of_a_trace_whatever_the_order_of_layers():
    torch.manual_seed(0)
    encoder = al.Network([L.SequenceInput(D, name="in"), L.LayerNorm(name="ln")],
                         name="encoder")
    net = al.Network([L.SequenceInput(D, name="x"),
                      L.MultiHeadAttention(2, D, name="cross"), L.Dense(3, name="fc")])
    net.add([L.SequenceInput(D, name="mem"), encoder])      # added after the layers reading it
    net.connect("encoder", "cross/key")
    net.connect("encoder", "cross/value")
    net.eval()
    x, mem = torch.randn(2, 3, D), torch.randn(2, 4, D)
    names = ["fc/out", "cross/scores", "encoder/ln/out", "x/out", "mem/out"]
    with torch.no_grad():
        full = net.trace({"x": x, "mem": mem}, capture=names)
    s = net.stream({"mem": mem}, capture=names)
    s.step(x[:, :2])
    assert list(s.captured) == list(full)                # static and stepped values alike
    assert list(full) == [n for n in al.network.tracing.names(net) if n in names]


def test_refusals_speak_in_the_words_of_the_function_called():
    net = gpt()
    with pytest.raises(al.ArgumentError, match=r"^stream: capture pattern 'att/score' matches "
                                               r"no name of the network\. Did you mean "
                                               r"'att/scores'"):
        net.stream(capture=["att/score"])
    with pytest.raises(al.ArgumentError, match=r"^stream: patch name 'hed/\*' matches no name"):
        net.stream(patch={"hed/*": lambda v: v})
    with pytest.raises(al.ArgumentError, match=r"^generate: capture pattern 'att/scoers' "
                                               r"matches no name.*'att/scores'"):
        al.generate(net, 1, max_new_tokens=2, capture=["att/scoers"])
    with pytest.raises(al.ArgumentError, match=r"^trace: capture pattern 'att/scoers' "
                                               r"matches no name.*'att/scores'"):
        net.trace(ids(), capture=["att/scoers"])
