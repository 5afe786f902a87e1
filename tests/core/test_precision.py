"""Devices, mixed precision and compilation, as far as a CPU-only machine can tell:
device choices checked against the machine, bf16/fp16 autocast training that learns, the fp16
GradScaler's state through an exact resume, torch.compile equal to eager (with a fallback
warning naming the reason), a compiled decoding step equal to the eager one.

Compile tests are few and tiny: compiling costs seconds a graph on two cores."""
import warnings

import pytest
import torch

import attnlab as al
from attnlab import layers as L
from attnlab.core.torch_compile import Compiled, CompileWarning
from attnlab.cli.demos.seed1 import answer_network
from attnlab.core.precision import autocast_dtype, resolve_device
from attnlab.training import checkpoint as ck
from train_worker import attention_classifier, resume_case, separable

QUIET = dict(verbose=False)
CUDA = torch.cuda.is_available()


pytestmark = pytest.mark.usefixtures("one_thread")


def _cpu_autocast(dtype) -> bool:
    try:
        with torch.autocast("cpu", dtype=dtype):
            pass
    except (RuntimeError, ValueError, AssertionError):
        return False
    return True


def _decoder(vocab=20, dim=8, heads=2):
    net = al.Network([L.SequenceInput(1, name="tokens"), L.Embedding(vocab, dim, name="embed"),
                      L.SelfAttention(heads, dim, attention_mask="causal", name="attn"),
                      L.LayerNorm(name="norm"), L.Dense(vocab, name="scores")])
    torch.manual_seed(0)
    return net.initialize().eval()


# ------------------------------------------------------------------------ devices ---

@pytest.mark.skipif(CUDA, reason="this machine has CUDA: the error is for machines without it")
@pytest.mark.parametrize("choice", ["cuda", "cuda:1"])
def test_cuda_without_cuda_is_an_attnlab_error_naming_the_fix(choice):
    x, y = separable(8)
    with pytest.raises(al.ArgumentError) as e:          # checked when training starts
        al.train(attention_classifier(), x, y, device=choice, **QUIET)
    msg = str(e.value)
    assert f"device {choice!r}" in msg and "CUDA is not available" in msg
    assert "This machine has: cpu" in msg and "device='cpu'" in msg
    net = attention_classifier().initialize()
    x = torch.randn(2, 4, 6)
    with pytest.raises(al.ArgumentError, match="predict device 'cuda'"):
        net.predict(x, device="cuda")
    with pytest.raises(al.ArgumentError, match="CUDA is not available"):
        al.classify(net, x, device="cuda")
    with pytest.raises(al.ArgumentError, match="stream device 'cuda'"):
        _decoder().stream(device="cuda")
    with pytest.raises(al.ArgumentError, match="stream device"):
        al.generate(_decoder(), max_length=2, device="cuda")


def test_device_and_precision_choices_are_checked_where_they_enter():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(None, default=torch.device("cpu")).type == "cpu"
    assert resolve_device("auto").type == ("cuda" if CUDA else resolve_device("auto").type)
    for bad in ("tpu", 3, "cuda:x"):
        with pytest.raises(al.ArgumentError) as e:
            al.TrainingOptions(device=bad)
        assert "TrainingOptions device must be" in str(e.value) and str(bad) in str(e.value)
        with pytest.raises(al.ArgumentError, match="stream device must be one of"):
            _decoder().stream(device=bad)
    with pytest.raises(al.ArgumentError) as e:
        al.TrainingOptions(precision="bf61")
    assert "TrainingOptions precision" in str(e.value) and "'bf61'" in str(e.value) and \
        "Did you mean 'bf16'" in str(e.value)
    with pytest.raises(al.ArgumentError, match="TrainingOptions compile must be True, False"):
        al.TrainingOptions(compile="yes")
    with pytest.raises(al.ArgumentError, match="unknown torch.compile argument.*'modes'"):
        al.TrainingOptions(compile={"modes": "max-autotune"})
    net = attention_classifier().initialize()
    with pytest.raises(al.ArgumentError, match="predict precision .*'half'"):
        net.predict(torch.randn(2, 4, 6), precision="half")
    with pytest.raises(al.ArgumentError, match="stream precision .*'int8'"):
        _decoder().stream(precision="int8")
    assert autocast_dtype("auto", torch.device("cpu")) is None          # fp32 on the CPU
    assert autocast_dtype("bf16", torch.device("cpu")) is torch.bfloat16


# ---------------------------------------------------------------- mixed precision ---

def _accuracy(precision):
    x, y = separable(360, t=12)
    net = attention_classifier()
    info = al.train(net, x[:300], y[:300], solver="adam", learning_rate=0.01, max_epochs=6,
                    batch_size=32, validation_data=(x[300:], y[300:]), validation_frequency=20,
                    precision=precision, **QUIET)
    acc = (torch.as_tensor(al.classify(net, x[300:], precision=precision)) == y[300:]).float()
    return info, float(acc.mean())


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_mixed_precision_training_learns_as_well_as_fp32(precision):
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    if not _cpu_autocast(dtype):
        pytest.skip(f"torch {torch.__version__} has no {precision} autocast on the CPU")
    ref_info, ref = _accuracy("fp32")
    info, acc = _accuracy(precision)
    assert acc >= ref - 0.01 and info.validation["accuracy"][-1] >= ref - 0.01, (acc, ref)
    # it did run in the half type (losses differ from fp32's), and losses stay float32 numbers
    assert info.iterations["loss"] != ref_info.iterations["loss"]
    assert all(isinstance(v, float) for v in info.iterations["loss"])


def test_autocast_outputs_come_back_float32():
    net = attention_classifier().initialize()
    x = torch.randn(3, 5, 6)
    p = net.predict(x, precision="bf16")
    assert p.dtype == torch.float32
    assert torch.allclose(p, net.predict(x), atol=3e-2)
    s = _decoder().stream(precision="bf16")
    y = s.step(torch.zeros(2, 1, 1))
    assert y.dtype == torch.float32
    assert s.steppers["attn"].cache.k.dtype == torch.bfloat16        # the cache in bf16


def test_fp16_scaler_state_is_checkpointed_and_resume_is_exact(tmp_path):
    if not _cpu_autocast(torch.float16):
        pytest.skip(f"torch {torch.__version__} has no fp16 autocast on the CPU")
    full, full_info = resume_case(tmp_path / "full", precision="fp16")
    stopped, info = resume_case(tmp_path / "part", precision="fp16",
                                output_fn=lambda s: s.iteration == 7)
    assert info.stop_reason == "output-function"
    _, meta, _ = ck.load_latest(tmp_path / "part" / "ckpt")
    assert meta["scaler"]["scale"] > 0 and "_growth_tracker" in meta["scaler"]
    resumed, info2 = resume_case(tmp_path / "part", precision="fp16", resume=True)
    for k, v in full.state_dict().items():
        assert torch.equal(v, resumed.state_dict()[k]), k
    assert info2.iterations == full_info.iterations
    _, meta_full, _ = ck.load_latest(tmp_path / "full" / "ckpt")
    _, meta_part, _ = ck.load_latest(tmp_path / "part" / "ckpt")
    assert meta_full["scaler"] == meta_part["scaler"]


# -------------------------------------------------------------------- compilation ---

def test_compile_failure_falls_back_with_a_warning_naming_the_reason():
    net = attention_classifier().initialize()
    x = torch.randn(2, 4, 6)
    with pytest.warns(CompileWarning, match="torch.compile failed for inference.*no-such-backend"):
        p = net.predict(x, compile={"backend": "no-such-backend"})
    assert torch.equal(p, net.predict(x))
    # the caller's own mistakes are not blamed on the compiler: eager's error comes through
    calls = []

    def broken(*a):
        calls.append(a)
        raise al.DataError("input 'x': expected B×T×6")
    c = Compiled(broken, {"backend": "eager"}, "inference")
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        with pytest.raises(al.DataError, match="expected B×T×6"):
            c(1)
    assert c.active


def test_compiled_training_and_seed1_inference_equal_eager():
    x, y = separable(64, t=6)
    runs = []
    for comp in (False, True):
        net = attention_classifier()
        with warnings.catch_warnings():
            warnings.simplefilter("error", CompileWarning)       # no silent fallback
            info = al.train(net, x, y, solver="adam", learning_rate=0.01, max_epochs=2,
                            batch_size=32, compile=comp, **QUIET)
        runs.append((info.iterations["loss"], net.predict(x)))
    (la, pa), (lb, pb) = runs
    assert lb == pytest.approx(la, rel=1e-4, abs=1e-5)
    assert torch.allclose(pa, pb, atol=1e-4)
    torch.manual_seed(1)
    seed1 = answer_network(16, 2).initialize()
    inputs = {"decoder-input": torch.randn(3, 5, 1), "encoder-input": torch.randn(3, 7, 1)}
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        compiled = seed1.predict(inputs, compile=True)
    assert torch.allclose(compiled, seed1.predict(inputs), atol=1e-5)


def _positional_decoder(vocab=20, dim=8, heads=2):
    """Tokens → Embedding + sinusoidal positions + learned positions → causal self-attention
    (2 heads) and a grouped-query one → scores: every stepper that reads positions."""
    net = al.Network([L.SequenceInput(1, name="tokens"), L.Embedding(vocab, dim, name="embed")])
    net.add([L.SinusoidalPositionEncoding(dim, name="sin"), L.Addition(2, name="add-sin")])
    net.add([L.PositionEmbedding(32, name="learned"), L.Addition(2, name="add-learned")])
    net.connect("embed", "sin")
    net.connect("embed", "add-sin/in2")
    net.connect("add-sin", "learned")
    net.connect("add-sin", "add-learned/in2")
    net.add([L.SelfAttention(heads, dim, attention_mask="causal", name="attn"),
             L.MultiHeadAttention(heads, dim, num_kv_heads=1, attention_mask="causal",
                                  name="gqa"),
             L.LayerNorm(name="norm"), L.Dense(vocab, name="scores")])
    net.connect("add-learned", "attn")
    for port in ("key", "value"):
        net.connect("attn", f"gqa/{port}")
    torch.manual_seed(0)
    return net.initialize().eval()


def test_a_compiled_stream_traces_one_graph_for_every_decoding_step():
    """Static shapes: the caches hold `capacity` steps from the start and positions enter as a
    tensor, so 12 one-token steps after a prefill compile two graphs (prefill, one step), not
    one per position, and a reset reuses them; when the caches double (capacity 16 → 32) the
    steps after it compile once more."""
    graphs = []

    def counting(gm, example_inputs):            # a torch.compile backend: runs the graph as is
        graphs.append(gm)
        return gm.forward

    net = _positional_decoder()
    torch._dynamo.reset()
    s = net.stream(capacity=16, compile={"backend": counting})
    eager = net.stream(capacity=16)
    prompt = torch.tensor([[[3], [1], [4]]])

    def decode(steps):
        assert torch.allclose(s.step(prompt), eager.step(prompt), atol=1e-5)
        x = prompt[:, -1:]                        # a view: strides of its own
        for i in range(steps):
            a, b = s.step(x), eager.step(x)
            assert torch.allclose(a, b, atol=1e-5), i
            x = a.argmax(-1, keepdim=True)

    decode(12)
    assert s.compiled and len(graphs) == 2
    s.reset(), eager.reset()                      # a reset reuses the graphs
    decode(12)
    assert len(graphs) == 2
    s.reset(), eager.reset()
    decode(16)                                    # past capacity 16: the caches double
    assert len(graphs) == 3 and s.steppers["attn"].cache.capacity == 32


def _streamable(kind):
    torch.manual_seed(0)
    if kind == "seed-1 answer":
        from attnlab.cli.demos.seed1 import answer_network
        return answer_network().initialize().eval(), {"encoder-input": torch.randn(2, 7, 1)}
    if kind == "lstm":
        net = al.Network([L.SequenceInput(3), L.LSTM(8),
                          L.SelfAttention(2, 8, attention_mask="causal"), L.Dense(2)])
    elif kind == "conv + grouped-query":
        net = al.Network([L.SequenceInput(3), L.Conv1d(3, 8, padding="causal", name="conv"),
                          L.GELU(name="gelu"),
                          L.MultiHeadAttention(4, 8, num_kv_heads=2, attention_mask="causal",
                                               name="mha"), L.Dense(2, name="out")])
        for port in ("key", "value"):
            net.connect("gelu", f"mha/{port}")
    else:                                                       # a nested block
        block = al.Network([L.SequenceInput(8, name="in"),
                            L.SelfAttention(2, 8, attention_mask="causal", name="attn"),
                            L.LayerNorm(name="norm")], name="block")
        net = al.Network([L.SequenceInput(3, name="x"), L.Dense(8, name="fc"), block,
                          L.Dense(2, name="out")])
    return net.initialize().eval(), None


@pytest.mark.parametrize("kind", ["seed-1 answer", "lstm", "conv + grouped-query", "nested"])
def test_compiled_streams_of_every_stepper_equal_eager_in_few_graphs(kind):
    """Cross-attention over static keys, LSTM state, a causal convolution's context, grouped
    query heads, a nested network: compiled (dynamo, graphs run as traced) equals eager over a
    prefill and 10 steps, in at most 3 graphs (prefill, step, and the step after the caches
    double at capacity 8)."""
    graphs = []

    def counting(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    net, static = _streamable(kind)
    torch._dynamo.reset()
    s = net.stream(static, capacity=8, compile={"backend": counting})
    eager = net.stream(static, capacity=8)
    c = 1 if static is not None else 3
    for t in (3,) + (1,) * 10:
        x = torch.randn(2, t, c)
        a, b = s.step(x), eager.step(x)
        assert torch.allclose(a, b, atol=1e-5)
    assert s.compiled and 1 <= len(graphs) <= 3, len(graphs)


def test_a_compiled_stream_keeps_the_position_limit_error():
    s = _positional_decoder().stream(capacity=8, compile={"backend": "eager"})
    s.step(torch.zeros(1, 30, 1, dtype=torch.long))
    with pytest.raises(al.DataError, match="layer 'learned': positions 32…32 reach past max_length 32"):
        s.step(torch.zeros(1, 3, 1, dtype=torch.long))


def test_compiled_decode_step_equals_eager():
    net = _decoder()
    start = torch.zeros(2, 1, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        s = net.stream(capacity=16, compile=True)
        eager = net.stream(capacity=16)
        prompt = torch.randint(0, 20, (2, 3, 1)).float()
        assert torch.allclose(s.step(prompt), eager.step(prompt), atol=1e-5)   # a prefill
        x = start
        for _ in range(6):
            a, b = s.step(x), eager.step(x)
            assert torch.allclose(a, b, atol=1e-5)
            x = a[:, -1].argmax(-1).float().view(-1, 1, 1)
    assert s.compiled
    ref = al.generate(net, start=0, max_length=8)
    # generate's compile path (dynamo only here: the inductor graphs were checked above)
    got = al.generate(net, start=0, max_length=8, compile={"backend": "eager"})
    assert torch.equal(got.tokens, ref.tokens)
