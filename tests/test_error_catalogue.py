"""A catalogue of invalid graphs and inputs: each gives the right attnlab error class and a
message that names the layer and the port (or the input) and says how to fix it."""
import pytest
import torch
from torch import nn

import attnlab as al
from attnlab import layers as L
from attnlab.demos.seed1 import question_network as seed1_question


def seq_net(*layers, channels=8):
    return al.Network([L.SequenceInput(channels, name="x"), *layers])


def attn_net(q=32, k=32, v=32, heads=4, tk=None, tv=None):
    net = al.Network()
    net.add([L.SequenceInput(q, name="q"), L.Attention(heads, name="cross-attention")])
    net.add(L.SequenceInput(k, length=tk, name="k"))
    net.add(L.SequenceInput(v, length=tv, name="v"))
    net.connect("k", "cross-attention/key")
    net.connect("v", "cross-attention/value")
    return net


def run(net, *xs):
    return net(*xs)


# (id, action, error class, substrings of the message)
CATALOGUE = [
    ("seed1-cycle", lambda: seed1_question()(torch.randn(2, 5, 1)), al.NetworkError,
     ["cross-attention → layernorm → lstm_decoder → query → cross-attention", "decoder-input",
      "encoder"]),
    ("self-loop", lambda: seq_net(L.Addition(2, name="add")).connect("add", "add/in2")(torch.randn(1, 2, 8)),
     al.NetworkError, ["cycle: add → add", "net.disconnect('add', 'add/in2')"]),
    ("unconnected-key", lambda: al.Network([L.SequenceInput(8, name="q"), L.Attention(2, name="att")])
     (torch.randn(1, 3, 8)), al.NetworkError, ["layer 'att' port 'key'", "not connected",
                                                "net.connect('<source>', 'att/key')"]),
    ("unknown-layer", lambda: seq_net(L.Dense(4, name="fc-key")).connect("fc-kye", "fc-key"),
     al.NetworkError, ["unknown layer 'fc-kye'", "Did you mean 'fc-key'"]),
    ("unknown-port", lambda: attn_net().connect("k", "cross-attention/qeury"), al.NetworkError,
     ["layer 'cross-attention' has no input port 'qeury'", "Did you mean 'query'"]),
    ("duplicate-name", lambda: seq_net(L.Dense(4, name="fc"), L.Dense(4, name="fc")), al.NetworkError,
     ["duplicate layer name 'fc'", "fc_1"]),
    ("duplicate-name-later", lambda: seq_net(L.Dense(4, name="fc")).add(L.ReLU(name="fc")),
     al.NetworkError, ["duplicate layer name 'fc'"]),
    ("already-connected", lambda: attn_net().connect("q", "cross-attention/key"), al.NetworkError,
     ["layer 'cross-attention' port 'key': already connected from 'k'", "disconnect"]),
    ("into-input-layer", lambda: seq_net(L.Dense(4, name="fc")).connect("fc", "x"), al.NetworkError,
     ["layer 'x'", "input layer"]),
    ("ambiguous-port", lambda: attn_net().add(L.SequenceInput(2, name="z")).connect("z", "cross-attention"),
     al.NetworkError, ["layer 'cross-attention' has inputs 'query', 'key', 'value'", "cross-attention/query"]),
    ("bad-disconnect", lambda: attn_net().disconnect("q", "cross-attention/key"), al.NetworkError,
     ["no connection q → cross-attention/key", "k → cross-attention/key"]),
    ("remove-unknown", lambda: attn_net().remove("qq"), al.NetworkError, ["unknown layer 'qq'", "'q'"]),
    ("key-channels", lambda: attn_net(q=256, k=128, v=256, heads=8)(torch.randn(1, 2, 256),
                                                                   torch.randn(1, 3, 128), torch.randn(1, 3, 256)),
     al.SizeError, ["layer 'cross-attention' port 'key': expected B×T×256, received B×T×128", "Dense(256)"]),
    ("heads-divide", lambda: attn_net(q=30, k=30, v=30, heads=4).initialize(), al.SizeError,
     ["layer 'cross-attention' port 'query'", "num_heads 4", "30"]),
    ("value-length", lambda: attn_net(tk=5, tv=6).initialize(), al.SizeError,
     ["layer 'cross-attention' port 'value'", "5 time steps"]),
    ("lstm-on-image", lambda: al.Network([L.ImageInput((1, 8, 8)), L.LSTM(4, name="lstm")]).initialize(),
     al.FormatError, ["layer 'lstm' port 'in'", "B×1×8×8", "ImageToSequence"]),
    ("conv2d-on-sequence", lambda: seq_net(L.Conv2d(3, 4, name="conv")).initialize(), al.FormatError,
     ["layer 'conv' port 'in'", "B×C×S×S", "Conv1d"]),
    ("add-channels", lambda: al.Network([L.SequenceInput(4, name="a"), L.Addition(2, name="add")])
     .add(L.SequenceInput(5, name="b")).connect("b", "add/in2").initialize(), al.SizeError,
     ["layer 'add' port 'in2': expected B×T×4", "received B×T×5"]),
    ("concat-kinds", lambda: al.Network([L.SequenceInput(4, name="a"), L.Concatenation(2, name="cat")])
     .add(L.FeatureInput(5, name="b")).connect("b", "cat/in2").initialize(), al.FormatError,
     ["layer 'cat' port 'in2'", "B×5"]),
    ("flatten-sequence", lambda: seq_net(L.Flatten(name="flat")).initialize(), al.FormatError,
     ["layer 'flat' port 'in'", "GlobalAvgPool1d", "Index1d('last')"]),
    ("gap1d-on-image", lambda: al.Network([L.ImageInput((2, 4, 4)), L.GlobalAvgPool1d(name="gap")])
     .initialize(), al.FormatError, ["layer 'gap' port 'in'", "GlobalAvgPool2d"]),
    ("index1d-on-features", lambda: al.Network([L.FeatureInput(3), L.Index1d(name="idx")]).initialize(),
     al.FormatError, ["layer 'idx' port 'in'", "B×T×C"]),
    ("embedding-channels", lambda: seq_net(L.Embedding(10, 4, name="emb"), channels=3).initialize(),
     al.SizeError, ["layer 'emb' port 'in': expected B×T×1, received B×T×3"]),
    ("kernel-too-big", lambda: al.Network([L.ImageInput((1, 4, 4)), L.Conv2d(5, 2, padding="valid", name="conv")])
     .initialize(), al.SizeError, ["layer 'conv' port 'in'", "padding='same'"]),
    ("pool-too-small", lambda: al.Network([L.ImageInput((1, 4, 4)), L.MaxPool2d(2), L.MaxPool2d(2),
                                           L.MaxPool2d(2, name="pool3")]).initialize(),
     al.SizeError, ["layer 'pool3' port 'in'", "B×1×1×1"]),
    ("lstm-state-size", lambda: al.Network([L.SequenceInput(3, name="x"),
                                            L.LSTM(4, has_state_inputs=True, name="lstm")])
     .add(L.FeatureInput(5, name="h")).add(L.FeatureInput(4, name="c"))
     .connect("h", "lstm/hidden").connect("c", "lstm/cell").initialize(),
     al.SizeError, ["layer 'lstm' port 'hidden': expected B×4, received B×5"]),
    ("module-fails", lambda: seq_net(L.Module(nn.Linear(5, 2), name="wrapped")).initialize(),
     al.SizeError, ["layer 'wrapped' port 'in'", "Linear", "B×T×8"]),
    ("dense-on-scores", lambda: al.Network([L.SequenceInput(4, name="q"),
                                            L.Attention(2, has_scores_output=True, name="att")])
     .connect("q", "att/key").connect("q", "att/value").add(L.Dense(3, name="fc"))
     .connect("att/scores", "fc").initialize(), al.FormatError, ["layer 'fc' port 'in'", "B×2×Tq×Tk"]),
    ("self-attention-on-image", lambda: al.Network([L.ImageInput((1, 28, 28)), L.Conv2d(3, 8),
                                                    L.SelfAttention(4, 16, name="self_attention")])
     .initialize(), al.FormatError, ["layer 'self_attention' port 'in'", "B×8×28×28", "ImageToSequence"]),
    ("seed2-flatten-then-self-attention",
     lambda: al.Network([L.ImageInput((1, 28, 28)), L.Conv2d(3, 8), L.MaxPool2d(2), L.Flatten(),
                         L.SelfAttention(8, 64, name="self_attention")]).initialize(),
     al.FormatError, ["layer 'self_attention' port 'in'", "B×1568", "ImageToSequence instead of Flatten"]),
    ("self-attention-heads", lambda: al.Network([L.SequenceInput(12), L.SelfAttention(5, 12, name="sa")])
     .initialize(), al.SizeError, ["layer 'sa'", "num_heads 5", "12"]),
    ("mha-kv-length", lambda: al.Network([L.SequenceInput(4, name="q"), L.MultiHeadAttention(2, 8, name="mha")])
     .add(L.SequenceInput(4, length=5, name="k")).add(L.SequenceInput(4, length=6, name="v"))
     .connect("k", "mha/key").connect("v", "mha/value").initialize(),
     al.SizeError, ["layer 'mha' port 'value'", "expected 5 time steps"]),
    ("patch-size", lambda: al.Network([L.ImageInput((1, 28, 28)), L.ImageToSequence(3, name="i2s")])
     .initialize(), al.SizeError, ["layer 'i2s' port 'in'", "divisible by patch_size 3"]),
    ("empty-network", lambda: al.Network().initialize(), al.NetworkError, ["no layers"]),
    ("data-channels", lambda: seq_net(L.Dense(2))(torch.randn(2, 5, 4)), al.DataError,
     ["input 'x': expected B×T×8, received 2×5×4"]),
    ("data-missing-channel-dim", lambda: seq_net(L.Dense(2), channels=1)(torch.randn(2, 5)), al.DataError,
     ["input 'x'", "x.unsqueeze(-1)"]),
    ("data-channels-first", lambda: seq_net(L.Dense(2))(torch.randn(2, 8, 5)), al.DataError,
     ["input 'x'", "transpose(1, 2)"]),
    ("data-image-channels-last", lambda: al.Network([L.ImageInput((3, 4, 4), name="img"), L.Flatten()])
     (torch.randn(2, 4, 4, 3)), al.DataError, ["input 'img'", "permute(0, 3, 1, 2)"]),
    ("data-unknown-name", lambda: attn_net()({"q": torch.randn(1, 2, 32), "kk": torch.randn(1, 2, 32),
                                              "v": torch.randn(1, 2, 32)}),
     al.DataError, ["unknown kk", "Did you mean 'k'", "missing k"]),
    ("data-positional-count", lambda: attn_net()(torch.randn(1, 2, 32)), al.DataError,
     ["3 input(s) (q, k, v)", "received 1"]),
    ("data-batch-counts", lambda: attn_net().predict(torch.randn(2, 2, 32), torch.randn(3, 2, 32),
                                                     torch.randn(3, 2, 32)),
     al.DataError, ["'q' has 2", "'k' has 3"]),
    ("token-out-of-range", lambda: seq_net(L.Embedding(5, 4, name="emb"), channels=1)
     (torch.full((1, 3, 1), 7.0)), al.DataError, ["layer 'emb'", "vocabulary"]),
    ("bad-layer-name", lambda: L.Dense(3, name="a/b"), al.ArgumentError, ["'a/b'", "'/'"]),
    ("bad-option", lambda: L.LSTM(3, output_mode="final"), al.ArgumentError, ["'sequence' or 'last'"]),
]


@pytest.mark.parametrize("action,cls,parts", [c[1:] for c in CATALOGUE], ids=[c[0] for c in CATALOGUE])
def test_catalogue(action, cls, parts):
    with pytest.raises(cls) as info:
        action()
    msg = str(info.value)
    for part in parts:
        assert part in msg, f"{part!r} not in:\n{msg}"


def test_catalogue_is_large_enough():
    assert len(CATALOGUE) >= 25


def test_size_errors_while_running_are_network_errors_too():
    with pytest.raises(al.NetworkError) as info:
        attn_net(q=256, k=128, v=256, heads=8).initialize()
    assert isinstance(info.value, al.SizeError)
    assert info.value.issues[0].layer == "cross-attention"
    assert info.value.issues[0].port == "key"


def test_analyze_never_raises_and_lists_every_issue():
    net = seed1_question()
    net.add(L.Attention(2, name="dangling"))
    a = net.analyze()
    assert not a.ok
    kinds = sorted(i.kind for i in a.errors)
    assert kinds == ["cycle", "unconnected", "unconnected", "unconnected"]
    with pytest.raises(al.NetworkError) as info:
        net.initialize()
    assert len(info.value.issues) == 4


# ==================================================================================================
# Files (issue 13 item 5; owner: io) — load/save of missing paths, folders, non-paths, weights of
# another dtype, a training checkpoint: each an attnlab error naming the path and what is wrong.
# ==================================================================================================

def _io_dense_file(tmp_path, dtype=None):
    """A saved FeatureInput(3) → Dense(2) 'fc' network; its weights rewritten as `dtype`."""
    import zipfile

    from safetensors.torch import load as st_load, save as st_save
    net = al.Network([L.FeatureInput(3, name="in"), L.Dense(2, name="fc")]).initialize()
    path = tmp_path / "net.attnlab"
    net.save(path)
    if dtype is not None:
        with zipfile.ZipFile(path) as z:
            graph, weights = z.read("network.json"), st_load(z.read("weights.safetensors"))
        weights = {k: (v * 10).to(dtype) for k, v in weights.items()}
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("network.json", graph)
            z.writestr("weights.safetensors", st_save(weights))
    return net, path


def _io_checkpoint(tmp_path):
    x = torch.randn(8, 3)
    net = al.Network([L.FeatureInput(3, name="in"), L.Dense(2, name="fc")])
    al.train(net, x, torch.randint(0, 2, (8,)), max_epochs=1, batch_size=4, verbose=False,
             checkpoint_dir=str(tmp_path / "ckpt"))
    return next((tmp_path / "ckpt").glob("checkpoint-*.safetensors"))


FILE_CASES = [
    ("load-missing", lambda t: al.load(t / "nope.attnlab"), al.ArgumentError,
     lambda t: ["no such file", str(t / "nope.attnlab")]),
    ("load-missing-folder", lambda t: al.load(t / "no-dir" / "x.attnlab"), al.ArgumentError,
     lambda t: ["no such file", "does not exist", str(t / "no-dir")]),
    ("load-folder", lambda t: al.load(t), al.ArgumentError, lambda t: [str(t), "is a folder"]),
    ("load-non-path", lambda t: al.load(42), al.ArgumentError, lambda t: ["path", "int", "42"]),
    ("load-none", lambda t: al.load(None), al.ArgumentError, lambda t: ["path", "NoneType"]),
    ("load-text-file-object", lambda t: al.load(__import__("io").StringIO("x")), al.ArgumentError,
     lambda t: ["binary mode", "str"]),
    ("save-missing-folder", lambda t: _io_dense_file(t)[0].save(t / "no-dir" / "x.attnlab"),
     al.ArgumentError, lambda t: [str(t / "no-dir"), "does not exist", "mkdir"]),
    ("save-onto-folder", lambda t: _io_dense_file(t)[0].save(t), al.ArgumentError,
     lambda t: [str(t), "is a folder"]),
    ("save-non-path", lambda t: _io_dense_file(t)[0].save(3.5), al.ArgumentError,
     lambda t: ["path", "float", "3.5"]),
    ("load-int64-weights", lambda t: al.load(_io_dense_file(t, torch.int64)[1]), al.NetworkError,
     lambda t: [str(t / "net.attnlab"), "fc/", "int64", "float32"]),
    ("load-checkpoint", lambda t: al.load(_io_checkpoint(t)), al.NetworkError,
     lambda t: [str(t / "ckpt"), "training checkpoint", "resume=True", "checkpoint_dir"]),
    ("load-bare-safetensors", lambda t: (__import__("safetensors.torch").torch.save_file(
        {"w": torch.zeros(2)}, str(t / "w.safetensors")), al.load(t / "w.safetensors")),
     al.NetworkError, lambda t: [str(t / "w.safetensors"), "safetensors file", "no graph"]),
]


@pytest.mark.parametrize("case", FILE_CASES, ids=[c[0] for c in FILE_CASES])
def test_file_errors_name_the_path_and_the_problem(tmp_path, case):
    _, action, cls, parts = case
    with pytest.raises(cls) as info:
        action(tmp_path)
    msg = str(info.value)
    for part in parts(tmp_path):
        assert part in msg, f"{part!r} not in:\n{msg}"


def test_float16_and_float64_weights_are_taken_as_saved_and_run(tmp_path):
    for dtype in (torch.float16, torch.float64):
        _, path = _io_dense_file(tmp_path, dtype)
        net = al.load(path)
        assert net.learnables["fc/weight"].dtype == dtype
        out = net(torch.ones(2, 3, dtype=dtype))          # the first call works
        assert out.dtype == dtype and out.shape == (2, 2)
# ============================================ end of Files (io) ===================================
