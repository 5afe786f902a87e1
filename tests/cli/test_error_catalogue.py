"""A catalogue of invalid graphs and inputs: each gives the right attnlab error class and a
message that names the layer and the port (or the input) and says how to fix it."""
import pytest
import torch
from torch import nn

import attnlab as al
from attnlab import layers as L
from attnlab.cli.demos.seed1 import question_network as seed1_question


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
    ("self-attention-heads", lambda: L.SelfAttention(5, 12, name="sa"), al.ArgumentError,
     ["SelfAttention 'sa' argument 'num_heads'", "divisor of 'key_channels' (12)", "received 5"]),
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
    ("embedding-computed-ids", lambda: seq_net(L.Dense(1, name="fc"), L.Embedding(5, 4, name="emb"))
     (torch.randn(1, 3, 8)), al.FormatError, ["layer 'emb' port 'in': expected token ids",
                                               "received the output of 'fc' (Dense)", "Dense(4)"]),
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


# =============================================================================================
# Layer arguments: constructor mistakes and what only sizes reveal.
# Each case names the layer type, the argument and the value received (as the message shows it).
# =============================================================================================
from attnlab.functional import attention as _attention  # noqa: E402


def _arg(type_name, arg, shown, *more):
    return [type_name, f"argument '{arg}'", f"received {shown}", *more]


def _q(c=8, t=5):
    return torch.randn(2, t, c)


LAYER_ARGUMENT_CASES = [
    # inputs
    ("seqin-channels-0", lambda: L.SequenceInput(0), _arg("SequenceInput", "channels", "0", "positive int")),
    ("seqin-channels-neg", lambda: L.SequenceInput(-3), _arg("SequenceInput", "channels", "-3")),
    ("seqin-channels-float", lambda: L.SequenceInput(2.5), _arg("SequenceInput", "channels", "2.5")),
    ("seqin-channels-bool", lambda: L.SequenceInput(True), _arg("SequenceInput", "channels", "True (bool)")),
    ("seqin-channels-none", lambda: L.SequenceInput(None), _arg("SequenceInput", "channels", "None")),
    ("seqin-channels-str", lambda: L.SequenceInput("8"), _arg("SequenceInput", "channels", "'8' (str)")),
    ("seqin-length-0", lambda: L.SequenceInput(4, length=0), _arg("SequenceInput", "length", "0", "None")),
    ("seqin-length-float", lambda: L.SequenceInput(4, length=10.0), _arg("SequenceInput", "length", "10.0", "length=10")),
    ("imgin-int", lambda: L.ImageInput(8), _arg("ImageInput", "size", "8", "(channels, height, width)", "ImageInput((1, 28, 28))")),
    ("imgin-pair", lambda: L.ImageInput((28, 28)), _arg("ImageInput", "size", "(28, 28) (tuple)", "(channels, height, width)")),
    ("imgin-zero-height", lambda: L.ImageInput((1, 0, 28)), _arg("ImageInput", "size[1] (height)", "0")),
    ("imgin-float-width", lambda: L.ImageInput((1, 28, 28.5)), _arg("ImageInput", "size[2] (width)", "28.5")),
    ("imgin-str", lambda: L.ImageInput("1x28x28"), _arg("ImageInput", "size", "'1x28x28' (str)")),
    ("imgin-none", lambda: L.ImageInput(None), _arg("ImageInput", "size", "None")),
    ("featin-0", lambda: L.FeatureInput(0), _arg("FeatureInput", "channels", "0")),
    ("featin-str", lambda: L.FeatureInput("4"), _arg("FeatureInput", "channels", "'4' (str)")),
    ("featin-float", lambda: L.FeatureInput(4.0), _arg("FeatureInput", "channels", "4.0", "channels=4")),
    # dense, activations, dropout
    ("dense-0", lambda: L.Dense(0), _arg("Dense", "out", "0", "out=64")),
    ("dense-neg", lambda: L.Dense(-1), _arg("Dense", "out", "-1")),
    ("dense-frac", lambda: L.Dense(2.5), _arg("Dense", "out", "2.5")),
    ("dense-bool", lambda: L.Dense(True), _arg("Dense", "out", "True (bool)")),
    ("dense-none", lambda: L.Dense(None), _arg("Dense", "out", "None")),
    ("dense-str", lambda: L.Dense("64"), _arg("Dense", "out", "'64' (str)")),
    ("dense-float-int", lambda: L.Dense(64.0), _arg("Dense", "out", "64.0", "out=64 (an int, not a float)")),
    ("dense-bias-str", lambda: L.Dense(4, bias="yes"), _arg("Dense", "bias", "'yes' (str)", "True or False")),
    ("dense-bias-none", lambda: L.Dense(4, bias=None), _arg("Dense", "bias", "None")),
    ("dense-named", lambda: L.Dense(0, name="fc-key"), ["Dense 'fc-key' argument 'out'", "received 0"]),
    ("leaky-str", lambda: L.LeakyReLU("0.1"), _arg("LeakyReLU", "negative_slope", "'0.1' (str)")),
    ("leaky-nan", lambda: L.LeakyReLU(float("nan")), _arg("LeakyReLU", "negative_slope", "nan", "finite")),
    ("leaky-inf", lambda: L.LeakyReLU(float("inf")), _arg("LeakyReLU", "negative_slope", "inf")),
    ("dropout-1", lambda: L.Dropout(1.0), _arg("Dropout", "p", "1.0", "[0, 1)")),
    ("dropout-neg", lambda: L.Dropout(-0.1), _arg("Dropout", "p", "-0.1")),
    ("dropout-str", lambda: L.Dropout("0.5"), _arg("Dropout", "p", "'0.5' (str)")),
    ("dropout-bool", lambda: L.Dropout(True), _arg("Dropout", "p", "True (bool)")),
    ("dropout-none", lambda: L.Dropout(None), _arg("Dropout", "p", "None")),
    ("dropout-percent", lambda: L.Dropout(50), _arg("Dropout", "p", "50", "p=0.1")),
    # convolutions
    ("conv2d-kernel-0", lambda: L.Conv2d(0, 4), _arg("Conv2d", "kernel", "0", "kernel=3")),
    ("conv2d-kernel-pair-0", lambda: L.Conv2d((3, 0), 4), _arg("Conv2d", "kernel", "(3, 0) (tuple)")),
    ("conv2d-kernel-triple", lambda: L.Conv2d((3, 3, 3), 4), _arg("Conv2d", "kernel", "(3, 3, 3) (tuple)", "pair")),
    ("conv2d-kernel-str", lambda: L.Conv2d("3", 4), _arg("Conv2d", "kernel", "'3' (str)")),
    ("conv2d-filters-none", lambda: L.Conv2d(3, None), _arg("Conv2d", "filters", "None")),
    ("conv2d-filters-frac", lambda: L.Conv2d(3, 2.5), _arg("Conv2d", "filters", "2.5")),
    ("conv2d-stride-0", lambda: L.Conv2d(3, 4, stride=0), _arg("Conv2d", "stride", "0")),
    ("conv2d-stride-short", lambda: L.Conv2d(3, 4, stride=(1,)), _arg("Conv2d", "stride", "(1,) (tuple)")),
    ("conv2d-dilation-0", lambda: L.Conv2d(3, 4, dilation=0), _arg("Conv2d", "dilation", "0")),
    ("conv2d-padding-word", lambda: L.Conv2d(3, 4, padding="full"), _arg("Conv2d", "padding", "'full' (str)", "'same', 'valid' or an int ≥ 0")),
    ("conv2d-padding-typo", lambda: L.Conv2d(3, 4, padding="sam"), _arg("Conv2d", "padding", "'sam' (str)", "Did you mean 'same'")),
    ("conv2d-padding-neg", lambda: L.Conv2d(3, 4, padding=(1, -1)), _arg("Conv2d", "padding", "(1, -1) (tuple)")),
    ("conv2d-bias-int", lambda: L.Conv2d(3, 4, bias=1), _arg("Conv2d", "bias", "1", "True or False")),
    ("conv1d-kernel-0", lambda: L.Conv1d(0, 4), _arg("Conv1d", "kernel", "0")),
    ("conv1d-kernel-pair", lambda: L.Conv1d((3, 3), 4), _arg("Conv1d", "kernel", "(3, 3) (tuple)")),
    ("conv1d-filters-0", lambda: L.Conv1d(3, 0), _arg("Conv1d", "filters", "0")),
    ("conv1d-stride-0", lambda: L.Conv1d(3, 4, stride=0), _arg("Conv1d", "stride", "0")),
    ("conv1d-dilation-neg", lambda: L.Conv1d(3, 4, dilation=-2), _arg("Conv1d", "dilation", "-2")),
    ("conv1d-padding-typo", lambda: L.Conv1d(3, 4, padding="casual"), _arg("Conv1d", "padding", "'casual' (str)", "Did you mean 'causal'")),
    ("conv1d-padding-neg", lambda: L.Conv1d(3, 4, padding=-1), _arg("Conv1d", "padding", "-1", "'same', 'causal', 'valid' or an int ≥ 0")),
    ("conv1d-padding-frac", lambda: L.Conv1d(3, 4, padding=1.5), _arg("Conv1d", "padding", "1.5")),
    ("conv1d-padding-bool", lambda: L.Conv1d(3, 4, padding=True), _arg("Conv1d", "padding", "True (bool)")),
    ("conv1d-bias-str", lambda: L.Conv1d(3, 4, bias="no"), _arg("Conv1d", "bias", "'no' (str)")),
    # recurrent
    ("lstm-hidden-0", lambda: L.LSTM(0), _arg("LSTM", "hidden", "0", "hidden=64")),
    ("lstm-hidden-str", lambda: L.LSTM("64"), _arg("LSTM", "hidden", "'64' (str)")),
    ("lstm-hidden-frac", lambda: L.LSTM(2.5), _arg("LSTM", "hidden", "2.5")),
    ("lstm-mode-typo", lambda: L.LSTM(4, output_mode="sequences"), _arg("LSTM", "output_mode", "'sequences' (str)", "Did you mean 'sequence'")),
    ("lstm-mode-none", lambda: L.LSTM(4, output_mode=None), _arg("LSTM", "output_mode", "None", "'sequence' or 'last'")),
    ("lstm-bidirectional-no", lambda: L.LSTM(4, bidirectional="no"), _arg("LSTM", "bidirectional", "'no' (str)", "True or False")),
    ("lstm-bidirectional-1", lambda: L.LSTM(4, bidirectional=1), _arg("LSTM", "bidirectional", "1")),
    ("lstm-state-inputs-str", lambda: L.LSTM(4, has_state_inputs="yes"), _arg("LSTM", "has_state_inputs", "'yes' (str)")),
    ("lstm-state-outputs-none", lambda: L.LSTM(4, has_state_outputs=None), _arg("LSTM", "has_state_outputs", "None")),
    ("gru-hidden-neg", lambda: L.GRU(-1), _arg("GRU", "hidden", "-1")),
    ("gru-bidirectional-no", lambda: L.GRU(4, bidirectional="no"), _arg("GRU", "bidirectional", "'no' (str)")),
    ("gru-mode-case", lambda: L.GRU(4, output_mode="Last"), _arg("GRU", "output_mode", "'Last' (str)", "Did you mean 'last'")),
    # normalisation
    ("layernorm-eps-0", lambda: L.LayerNorm(eps=0), _arg("LayerNorm", "eps", "0", "> 0")),
    ("layernorm-eps-neg", lambda: L.LayerNorm(eps=-1e-5), _arg("LayerNorm", "eps", "-1e-05")),
    ("layernorm-eps-str", lambda: L.LayerNorm(eps="1e-5"), _arg("LayerNorm", "eps", "'1e-5' (str)")),
    ("layernorm-eps-nan", lambda: L.LayerNorm(eps=float("nan")), _arg("LayerNorm", "eps", "nan")),
    ("batchnorm-eps-0", lambda: L.BatchNorm(eps=0.0), _arg("BatchNorm", "eps", "0.0")),
    ("batchnorm-momentum-big", lambda: L.BatchNorm(momentum=1.5), _arg("BatchNorm", "momentum", "1.5", "[0, 1]")),
    ("batchnorm-momentum-neg", lambda: L.BatchNorm(momentum=-0.1), _arg("BatchNorm", "momentum", "-0.1")),
    ("batchnorm-momentum-str", lambda: L.BatchNorm(momentum="0.1"), _arg("BatchNorm", "momentum", "'0.1' (str)")),
    # pooling and indexing
    ("maxpool-0", lambda: L.MaxPool2d(0), _arg("MaxPool2d", "pool_size", "0")),
    ("maxpool-pair-0", lambda: L.MaxPool2d((2, 0)), _arg("MaxPool2d", "pool_size", "(2, 0) (tuple)")),
    ("maxpool-frac", lambda: L.MaxPool2d(2.5), _arg("MaxPool2d", "pool_size", "2.5")),
    ("maxpool-stride-0", lambda: L.MaxPool2d(2, stride=0), _arg("MaxPool2d", "stride", "0")),
    ("maxpool-padding-neg", lambda: L.MaxPool2d(2, padding=-1), _arg("MaxPool2d", "padding", "-1")),
    ("maxpool-padding-half", lambda: L.MaxPool2d(2, padding=2), _arg("MaxPool2d", "padding", "2", "at most half the pool size")),
    ("avgpool-none", lambda: L.AvgPool2d(None), _arg("AvgPool2d", "pool_size", "None")),
    ("avgpool-stride-str", lambda: L.AvgPool2d(2, stride="2"), _arg("AvgPool2d", "stride", "'2' (str)")),
    ("avgpool-padding-half", lambda: L.AvgPool2d(3, padding=(0, 3)), _arg("AvgPool2d", "padding", "(0, 3) (tuple)", "≤ 1")),
    ("index1d-word", lambda: L.Index1d("middle"), _arg("Index1d", "index", "'middle' (str)", "'first', 'last'")),
    ("index1d-case", lambda: L.Index1d("Last"), _arg("Index1d", "index", "'Last' (str)", "Did you mean 'last'")),
    ("index1d-frac", lambda: L.Index1d(2.5), _arg("Index1d", "index", "2.5")),
    ("index1d-none", lambda: L.Index1d(None), _arg("Index1d", "index", "None")),
    ("index1d-bool", lambda: L.Index1d(True), _arg("Index1d", "index", "True (bool)")),
    # combining
    ("addition-1", lambda: L.Addition(1), _arg("Addition", "n", "1", "an int ≥ 2")),
    ("addition-0", lambda: L.Addition(0), _arg("Addition", "n", "0")),
    ("addition-bool", lambda: L.Addition(True), _arg("Addition", "n", "True (bool)")),
    ("addition-frac", lambda: L.Addition(2.5), _arg("Addition", "n", "2.5")),
    ("addition-huge", lambda: L.Addition(10**9), _arg("Addition", "n", "1000000000", "≤ 1024")),
    ("multiplication-str", lambda: L.Multiplication("2"), _arg("Multiplication", "n", "'2' (str)")),
    ("concat-1", lambda: L.Concatenation(1), _arg("Concatenation", "n", "1")),
    ("concat-dim-typo", lambda: L.Concatenation(2, dim="channels"), _arg("Concatenation", "dim", "'channels' (str)", "Did you mean 'channel'")),
    ("concat-dim-int", lambda: L.Concatenation(2, dim=1), _arg("Concatenation", "dim", "1", "'channel' or 'time'")),
    ("concat-dim-none", lambda: L.Concatenation(2, dim=None), _arg("Concatenation", "dim", "None")),
    # embeddings and positions
    ("embedding-vocab-0", lambda: L.Embedding(0, 4), _arg("Embedding", "vocab", "0")),
    ("embedding-dim-0", lambda: L.Embedding(10, 0), _arg("Embedding", "dim", "0")),
    ("embedding-vocab-frac", lambda: L.Embedding(2.5, 4), _arg("Embedding", "vocab", "2.5")),
    ("embedding-dim-str", lambda: L.Embedding(10, "64"), _arg("Embedding", "dim", "'64' (str)")),
    ("posembed-0", lambda: L.PositionEmbedding(0), _arg("PositionEmbedding", "max_length", "0")),
    ("posembed-none", lambda: L.PositionEmbedding(None), _arg("PositionEmbedding", "max_length", "None")),
    ("posembed-channels-0", lambda: L.PositionEmbedding(8, channels=0), _arg("PositionEmbedding", "channels", "0", "None (the default)")),
    ("posenc-0", lambda: L.SinusoidalPositionEncoding(0), _arg("SinusoidalPositionEncoding", "dim", "0")),
    ("posenc-str", lambda: L.SinusoidalPositionEncoding("64"), _arg("SinusoidalPositionEncoding", "dim", "'64' (str)")),
    # attention
    ("attention-heads-0", lambda: L.Attention(0), _arg("Attention", "num_heads", "0", "num_heads=8")),
    ("attention-heads-frac", lambda: L.Attention(2.5), _arg("Attention", "num_heads", "2.5")),
    ("attention-heads-bool", lambda: L.Attention(True), _arg("Attention", "num_heads", "True (bool)")),
    ("attention-scale-foo", lambda: L.Attention(2, scale="foo"), _arg("Attention", "scale", "'foo' (str)", "\"auto\"")),
    ("attention-scale-nan", lambda: L.Attention(2, scale=float("nan")), _arg("Attention", "scale", "nan", "finite")),
    ("attention-scale-ninf", lambda: L.Attention(2, scale=float("-inf")), _arg("Attention", "scale", "-inf", "finite")),
    ("attention-scale-inf", lambda: L.Attention(2, scale=float("inf")), _arg("Attention", "scale", "inf", "finite")),
    ("attention-scale-none", lambda: L.Attention(2, scale=None), _arg("Attention", "scale", "None")),
    ("attention-scale-case", lambda: L.Attention(2, scale="Auto"), _arg("Attention", "scale", "'Auto' (str)", "Did you mean 'auto'")),
    ("attention-mask-typo", lambda: L.Attention(2, attention_mask="casual"), _arg("Attention", "attention_mask", "'casual' (str)", "Did you mean 'causal'")),
    ("attention-mask-bool", lambda: L.Attention(2, attention_mask=True), _arg("Attention", "attention_mask", "True (bool)", "None or 'causal'")),
    ("attention-alignment", lambda: L.Attention(2, causal_alignment="bottom_right"), _arg("Attention", "causal_alignment", "'bottom_right' (str)", "Did you mean 'bottom-right'")),
    ("attention-dropout-1", lambda: L.Attention(2, dropout=1), _arg("Attention", "dropout", "1", "[0, 1)")),
    ("attention-dropout-str", lambda: L.Attention(2, dropout="0.1"), _arg("Attention", "dropout", "'0.1' (str)")),
    ("attention-mask-input-str", lambda: L.Attention(2, has_padding_mask_input="no"), _arg("Attention", "has_padding_mask_input", "'no' (str)")),
    ("attention-scores-int", lambda: L.Attention(2, has_scores_output=1), _arg("Attention", "has_scores_output", "1")),
    ("selfattn-key-0", lambda: L.SelfAttention(2, 0), _arg("SelfAttention", "key_channels", "0")),
    ("selfattn-value-0", lambda: L.SelfAttention(2, 8, value_channels=0), _arg("SelfAttention", "value_channels", "0", "None (the default)")),
    ("selfattn-output-0", lambda: L.SelfAttention(2, 8, output_channels=0), _arg("SelfAttention", "output_channels", "0")),
    ("selfattn-output-neg", lambda: L.SelfAttention(2, 8, output_channels=-1), _arg("SelfAttention", "output_channels", "-1")),
    ("selfattn-kv-heads-divide", lambda: L.SelfAttention(4, 8, num_kv_heads=3), _arg("SelfAttention", "num_kv_heads", "3", "a divisor of num_heads 4")),
    ("selfattn-kv-heads-0", lambda: L.SelfAttention(4, 8, num_kv_heads=0), _arg("SelfAttention", "num_kv_heads", "0")),
    ("selfattn-scale-foo", lambda: L.SelfAttention(2, 8, scale="foo"), _arg("SelfAttention", "scale", "'foo' (str)")),
    ("selfattn-dropout-neg", lambda: L.SelfAttention(2, 8, dropout=-0.5), _arg("SelfAttention", "dropout", "-0.5")),
    ("selfattn-heads-none", lambda: L.SelfAttention(None, 8), _arg("SelfAttention", "num_heads", "None")),
    ("mha-key-none", lambda: L.MultiHeadAttention(2, None), _arg("MultiHeadAttention", "key_channels", "None")),
    ("mha-value-0", lambda: L.MultiHeadAttention(2, 8, value_channels=0), _arg("MultiHeadAttention", "value_channels", "0")),
    ("mha-output-0", lambda: L.MultiHeadAttention(2, 8, output_channels=0), _arg("MultiHeadAttention", "output_channels", "0")),
    ("mha-alignment", lambda: L.MultiHeadAttention(2, 8, causal_alignment="left"), _arg("MultiHeadAttention", "causal_alignment", "'left' (str)", "'top-left' or 'bottom-right'")),
    ("mha-kv-heads-frac", lambda: L.MultiHeadAttention(2, 8, num_kv_heads=2.5), _arg("MultiHeadAttention", "num_kv_heads", "2.5")),
    ("attnpool-heads-0", lambda: L.AttentionPool1d(0), _arg("AttentionPool1d", "num_heads", "0")),
    ("attnpool-dropout-1", lambda: L.AttentionPool1d(2, dropout=1.0), _arg("AttentionPool1d", "dropout", "1.0")),
    ("img2seq-0", lambda: L.ImageToSequence(0), _arg("ImageToSequence", "patch_size", "0")),
    ("img2seq-frac", lambda: L.ImageToSequence(2.5), _arg("ImageToSequence", "patch_size", "2.5")),
    # wrapped torch modules
    ("module-function", lambda: L.Module(torch.relu), _arg("Module", "module", "<built-in method relu", "torch.nn.Module")),
    ("module-class", lambda: L.Module(nn.Linear), _arg("Module", "module", "<class", "nn.Linear(8, 4)")),
    ("module-inputs-0", lambda: L.Module(nn.ReLU(), num_inputs=0), _arg("Module", "num_inputs", "0")),
    ("module-outputs-0", lambda: L.Module(nn.ReLU(), num_outputs=0), _arg("Module", "num_outputs", "0")),
    ("module-format-unknown", lambda: L.Module(nn.ReLU(), output_format="TBC"), _arg("Module", "output_format", "'TBC' (str)", "'BTC'")),
    ("module-format-case", lambda: L.Module(nn.ReLU(), output_format="btc"), _arg("Module", "output_format", "'btc' (str)")),
    ("module-format-count", lambda: L.Module(nn.ReLU(), num_outputs=2, output_format=["BTC"]), _arg("Module", "output_format", "['BTC'] (list)", "a list of 2")),
    ("module-specs-str", lambda: L.Module(nn.ReLU(), output_specs="x"), _arg("Module", "output_specs", "'x' (str)", "Spec")),
    ("module-specs-count", lambda: L.Module(nn.ReLU(), num_outputs=2, output_specs=[al.Spec.sequence(4)]), _arg("Module", "output_specs", "[Spec(", "a list of 2 Spec")),
    # al.attention's own arguments
    ("fn-scale-inf", lambda: _attention(_q(), _q(), _q(), 2, scale=float("inf")), ["attention: argument 'scale'", "finite", "received inf"]),
    ("fn-scale-nan", lambda: _attention(_q(), _q(), _q(), 2, scale=float("nan")), ["attention: argument 'scale'", "received nan"]),
    ("fn-heads-frac", lambda: _attention(_q(), _q(), _q(), 2.5), ["attention: argument 'num_heads'", "received 2.5"]),
    ("fn-dropout-1", lambda: _attention(_q(), _q(), _q(), 2, dropout=1.0), ["attention: argument 'dropout'", "received 1.0"]),
    ("fn-need-weights-str", lambda: _attention(_q(), _q(), _q(), 2, need_weights="no"), ["attention: argument 'need_weights'", "received 'no'"]),
    ("fn-training-int", lambda: _attention(_q(), _q(), _q(), 2, training=1), ["attention: argument 'training'", "received 1"]),
    ("fn-mask-word", lambda: _attention(_q(), _q(), _q(), 2, attention_mask="casual"), ["attention: argument 'attention_mask'", "received 'casual'"]),
    ("fn-alignment", lambda: _attention(_q(), _q(), _q(), 2, causal_alignment="right"), ["attention: argument 'causal_alignment'", "received 'right'"]),
    # Select
    ("select-negative", lambda: al.Select([-1]), ["Select", "received [-1]"]),
    ("select-empty", lambda: al.Select([]), ["Select", "received []"]),
    ("select-huge", lambda: al.Select([10**9]), ["Select", "received [1000000000]", "1024"]),
    ("select-n-in-huge", lambda: al.Select([0], n_in=10**9), ["Select", "n_in", "received 1000000000"]),
    ("select-float", lambda: al.Select([0.0, 1]), ["Select", "received [0.0, 1]"]),
]


def _img(c=2, s=6):
    return L.ImageInput((c, s, s), name="img")


def _seq(c=4, t=6):
    return L.SequenceInput(c, length=t, name="x")


# what only sizes reveal: an analysis issue naming the layer and port, never a failure at run time
SIZE_CASES = [
    ("conv1d-kernel-longer", lambda: al.Network([_seq(t=5), L.Conv1d(7, 4, padding="valid", name="conv")]),
     al.SizeError, ["layer 'conv' port 'in'", "at least 7 steps", "B×5×4", "padding='same'"]),
    ("conv1d-dilated-longer", lambda: al.Network([_seq(t=8), L.Conv1d(5, 4, padding=0, dilation=2, name="conv")]),
     al.SizeError, ["layer 'conv' port 'in'", "at least 9 steps", "dilation 2"]),
    ("conv2d-dilated-larger", lambda: al.Network([_img(), L.Conv2d(3, 4, padding="valid", dilation=3, name="conv")]),
     al.SizeError, ["layer 'conv' port 'in'", "B×2×6×6"]),
    ("maxpool-larger", lambda: al.Network([_img(), L.MaxPool2d(8, name="pool")]),
     al.SizeError, ["layer 'pool' port 'in'", "at least 8×8", "B×2×6×6"]),
    ("avgpool-wide", lambda: al.Network([_img(), L.AvgPool2d((2, 7), name="pool")]),
     al.SizeError, ["layer 'pool' port 'in'", "2×7", "B×2×6×6"]),
    ("index1d-past-end", lambda: al.Network([_seq(), L.Index1d(6, name="pick")]),
     al.SizeError, ["layer 'pick' port 'in'", "step 6", "steps 0…5", "index='last'"]),
    ("index1d-before-start", lambda: al.Network([_seq(), L.Index1d(-7, name="pick")]),
     al.SizeError, ["layer 'pick' port 'in'", "step -7", "-6…5"]),
    ("posembed-too-short", lambda: al.Network([_seq(), L.PositionEmbedding(4, name="pos")]),
     al.SizeError, ["layer 'pos' port 'in'", "at most 4 time steps", "B×6×4", "max_length"]),
    ("dense-too-many-learnables", lambda: al.Network([L.ImageInput((3, 1000, 1000)), L.Dense(10**9, name="fc")]),
     al.SizeError, ["layer 'fc' port 'in'", "1000000000×3000000", "smaller out"]),
    ("conv2d-too-many-learnables", lambda: al.Network([_img(), L.Conv2d(10**6, 8, name="conv")]),
     al.SizeError, ["layer 'conv' port 'in'", "8×2×1000000×1000000", "smaller kernel"]),
    ("lstm-too-many-learnables", lambda: al.Network([_seq(), L.LSTM(10**9, name="lstm")]),
     al.SizeError, ["layer 'lstm' port 'in'", "4000000000×1000000000", "smaller hidden"]),
    ("gru-too-many-learnables", lambda: al.Network([_seq(), L.GRU(10**7, name="gru")]),
     al.SizeError, ["layer 'gru' port 'in'", "weight_hh", "30000000×10000000"]),
    ("embedding-too-many-learnables", lambda: al.Network([_seq(c=1), L.Embedding(10**9, 10**6, name="emb")]),
     al.SizeError, ["layer 'emb' port 'in'", "1000000000×1000000", "smaller vocab"]),
    ("posembed-too-many-learnables", lambda: al.Network([_seq(), L.PositionEmbedding(10**12, 16, name="pos")]),
     al.SizeError, ["layer 'pos' port 'in'", "1000000000000×16"]),
    ("selfattn-too-many-learnables", lambda: al.Network([_seq(c=4096), L.SelfAttention(2, 2**30, name="sa")]),
     al.SizeError, ["layer 'sa' port 'in'", "1073741824×4096", "smaller key_channels"]),
    ("module-format-rank", lambda: al.Network([L.FeatureInput(4), L.Module(nn.Linear(4, 2), output_format="BTC", name="wrapped")]),
     al.FormatError, ["layer 'wrapped' port 'out'", "3 dimensions", "B×T×C", "received one of 2", "'BC'"]),
]


@pytest.mark.parametrize("action,parts", [c[1:] for c in LAYER_ARGUMENT_CASES],
                         ids=[c[0] for c in LAYER_ARGUMENT_CASES])
def test_layer_argument_errors(action, parts):
    with pytest.raises(al.ArgumentError) as info:
        action()
    msg = str(info.value)
    for part in parts:
        assert part in msg, f"{part!r} not in:\n{msg}"


@pytest.mark.parametrize("build,cls,parts", [c[1:] for c in SIZE_CASES], ids=[c[0] for c in SIZE_CASES])
def test_size_mistakes_are_analysis_issues(build, cls, parts):
    net = build()
    analysis = net.analyze()                 # never raises
    assert not analysis.ok
    with pytest.raises(cls) as info:
        net.initialize()
    msg = str(info.value)
    for part in parts:
        assert part in msg, f"{part!r} not in:\n{msg}"


def test_index1d_past_the_end_of_variable_length_data_names_the_layer():
    net = al.Network([L.SequenceInput(3, name="x"), L.Index1d(10, name="pick")])
    with pytest.raises(al.DataError) as info:
        net(torch.randn(2, 4, 3))
    msg = str(info.value)
    assert "layer 'pick'" in msg and "step 10" in msg and "received 4 steps" in msg
    assert "vocabulary" not in msg


def test_layer_argument_catalogue_is_large_enough():
    assert len(LAYER_ARGUMENT_CASES) + len(SIZE_CASES) >= 120

# ==================================================================================================
# Files (owner: io) — load/save of missing paths, folders, non-paths, weights of
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


# ======================================================================================
# Issue 13, items 2–4, 7, 8: inputs, training, sequence targets, the demo command
# (section owned by the inputs/training work; other sections append below or above)
# ======================================================================================
import numpy as np  # noqa: E402

from attnlab.core.sequences import Padded  # noqa: E402


def _in_seq(channels=3):
    return al.Network([L.SequenceInput(channels, name="x"), L.LSTM(4, output_mode="last"),
                       L.Dense(2, name="fc")])


def _in_feat():
    return al.Network([L.FeatureInput(3, name="f"), L.Dense(3, name="fc")])


def _in_emb():
    return al.Network([L.SequenceInput(1, name="tok"), L.Embedding(5, 4, name="emb"),
                       L.GlobalAvgPool1d(), L.Dense(2, name="fc")])


def _in_stream_net():
    return al.Network([L.SequenceInput(3, name="x"), L.Dense(2, name="fc")])


def _in_ids(value, at=(1, 2)):
    x = torch.zeros(2, 4, 1)
    x[at[0], at[1], 0] = value
    return x


def _in_train(net, X, Y, **kw):
    return al.train(net, X, Y, max_epochs=1, batch_size=4, verbose=False, **kw)


class _InPairless(torch.utils.data.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return torch.randn(3)


_IN_X = [np.ones((4, 3), np.float32), np.ones((5, 3), np.float32)]
_IN_FILE = __file__                                   # an existing file, not a folder
_IN_DIR = str(__import__("pathlib").Path(__file__).parent)


def _in_seed1_mismatch():
    from attnlab.cli.demos.seed1 import answer_network
    enc = [torch.randn(12 + i, 1) for i in range(4)]
    _in_train(answer_network(channels=8, heads=2), {"decoder-input": torch.randn(4, 10, 1),
                                                    "encoder-input": enc},
              torch.randn(4, 9, 8), loss="mse")


# (id, action, error class, substrings of the message)
INPUTS_CATALOGUE = [
    # ---- net(x): values that are not numbers, or not one array
    ("in-string", lambda: _in_seq()("abc"), al.DataError, ["input 'x'", "a string 'abc'", "token ids"]),
    ("in-none", lambda: _in_seq()(None), al.DataError, ["input 'x'", "received None", "B×T×3"]),
    ("in-none-by-name", lambda: _in_seq()({"x": None}), al.DataError, ["input 'x'", "received None"]),
    ("in-bytes", lambda: _in_seq()(b"ab"), al.DataError, ["input 'x'", "a string b'ab'"]),
    ("in-scalar", lambda: _in_seq()(3.0), al.DataError, ["input 'x'", "a single number"]),
    ("in-complex-array", lambda: _in_seq()(np.ones((2, 4, 3), complex)), al.DataError,
     ["input 'x'", "complex128", "imaginary part", "view_as_real"]),
    ("in-complex-in-list", lambda: _in_seq()([torch.ones(4, 3, dtype=torch.cfloat)]), al.DataError,
     ["input 'x'", "complex64", "imaginary part"]),
    ("in-string-array", lambda: _in_seq()(np.array([[["a", "b", "c"]]])), al.DataError,
     ["input 'x'", "<U1", "strings"]),
    ("in-object-array", lambda: _in_feat()(np.array([None, 1], dtype=object)), al.DataError,
     ["input 'f'", "object", "Python objects"]),
    ("in-ragged-features", lambda: _in_feat()([[1, 2, 3], [1, 2]]), al.DataError,
     ["input 'f'", "observation 1 is 2", "observation 0 is 3"]),
    ("in-ragged-rows-in-sequence", lambda: _in_seq()([[[1, 2, 3], [1, 2]]]), al.DataError,
     ["input 'x'", "observation 0 has rows of different lengths"]),
    ("in-channel-counts", lambda: _in_seq()([np.ones((4, 3)), np.ones((5, 2))]), al.DataError,
     ["input 'x'", "sequence 1 has 2 channel(s)", "expected 3", "[2, 3]"]),
    ("in-channel-counts-both-wrong", lambda: _in_seq()([np.ones((4, 2)), np.ones((5, 2))]),
     al.DataError, ["input 'x'", "sequence 0 has 2 channel(s)", "expected 3"]),
    ("in-mixed-dims", lambda: _in_seq(1)([np.ones((4, 1)), np.ones(4)]), al.DataError,
     ["input 'x'", "mix 1-D and 2-D", "observation 1 1-D"]),
    ("in-none-in-list", lambda: _in_seq()([np.ones((4, 3)), None]), al.DataError,
     ["input 'x'", "observation 1 is None"]),
    ("in-string-in-list", lambda: _in_seq()(["abc"]), al.DataError,
     ["input 'x'", "observation 0 is a string 'abc'"]),
    ("in-dict-in-list", lambda: _in_seq()([{"x": 1}]), al.DataError,
     ["input 'x'", "observation 0 is a dict"]),
    ("in-empty-list", lambda: _in_seq()([]), al.DataError, ["input 'x'", "empty list"]),
    ("in-empty-array", lambda: _in_seq()(np.zeros((0, 4, 3), np.float32)), al.DataError,
     ["input 'x'", "0 observations", "0×4×3"]),
    ("in-zero-length-array", lambda: _in_seq()(np.zeros((2, 0, 3), np.float32)), al.DataError,
     ["input 'x'", "0 time steps", "2×0×3"]),
    ("in-zero-length-in-list", lambda: _in_seq()([np.ones((4, 3)), np.ones((0, 3))]), al.DataError,
     ["input 'x'", "sequence 1 has 0 time steps"]),
    ("in-padded-mask-shape", lambda: _in_seq()(Padded(torch.randn(2, 4, 3), torch.ones(2, 5, dtype=torch.bool))),
     al.DataError, ["input 'x'", "Padded mask", "2×4×3", "2×5"]),
    ("in-padded-mask-dtype", lambda: _in_seq()(Padded(torch.randn(2, 4, 3), torch.ones(2, 4))),
     al.DataError, ["input 'x'", "bool B×T", "torch.float32"]),
    ("in-padded-not-tensors", lambda: _in_seq()(Padded(np.ones((2, 4, 3)), None)), al.DataError,
     ["input 'x'", "data ndarray", "mask NoneType", "pad_sequences"]),
    # ---- Embedding: token ids named with the vocabulary size
    ("emb-fractional-id", lambda: _in_emb()(_in_ids(2.5)), al.DataError,
     ["layer 'emb'", "token id 2.5", "observation 1, step 2", "not a whole number", "0…4"]),
    ("emb-negative-id", lambda: _in_emb()(_in_ids(-1)), al.DataError,
     ["layer 'emb'", "token id -1", "vocabulary of 5"]),
    ("emb-id-too-big", lambda: _in_emb()(_in_ids(7)), al.DataError,
     ["layer 'emb'", "token id 7", "observation 1, step 2", "vocabulary of 5", "(ids 0…4)"]),
    ("emb-id-equal-to-vocab", lambda: _in_emb()(_in_ids(5)), al.DataError,
     ["layer 'emb'", "token id 5", "vocabulary of 5"]),
    ("emb-nan-id", lambda: _in_emb()(_in_ids(float("nan"))), al.DataError,
     ["layer 'emb'", "token id nan", "not a whole number"]),
    ("emb-int-ids", lambda: _in_emb()(torch.full((1, 3, 1), 9, dtype=torch.long)), al.DataError,
     ["layer 'emb'", "token id 9", "(3 bad ids in all)"]),
    ("emb-predict", lambda: _in_emb().predict(_in_ids(6)), al.DataError, ["layer 'emb'", "token id 6"]),
    ("emb-list", lambda: _in_emb()([np.array([0, 1, 8])]), al.DataError,
     ["layer 'emb'", "token id 8", "observation 0, step 2"]),
    ("emb-stream", lambda: al.Network([L.SequenceInput(1, name="tok"), L.Embedding(5, 2, name="emb")])
     .stream().step(torch.full((1, 2, 1), 9.0)), al.DataError, ["layer 'emb'", "token id 9", "vocabulary of 5"]),
    ("emb-train", lambda: _in_train(_in_emb(), _in_ids(7), [0, 1]), al.DataError,
     ["layer 'emb'", "token id 7", "vocabulary of 5"]),
    # ---- predict / classify
    ("predict-batch-size-0", lambda: _in_seq().predict(torch.randn(2, 4, 3), batch_size=0),
     al.ArgumentError, ["batch_size", "received 0", "≥ 1"]),
    ("predict-batch-size-fraction", lambda: _in_seq().predict(torch.randn(2, 4, 3), batch_size=2.5),
     al.ArgumentError, ["batch_size", "received 2.5"]),
    ("predict-batch-size-bool", lambda: _in_seq().predict(torch.randn(2, 4, 3), batch_size=True),
     al.ArgumentError, ["batch_size", "received True"]),
    ("predict-batch-size-negative", lambda: _in_seq().predict(torch.randn(2, 4, 3), batch_size=-4),
     al.ArgumentError, ["batch_size", "received -4"]),
    ("predict-none", lambda: _in_seq().predict(None), al.DataError, ["input 'x'", "received None"]),
    ("predict-string", lambda: _in_seq().predict("abc"), al.DataError, ["input 'x'", "a string 'abc'"]),
    ("predict-scalar", lambda: _in_seq().predict(torch.tensor(1.0)), al.DataError,
     ["input 'x'", "single number"]),
    ("predict-empty-array", lambda: _in_seq().predict(np.zeros((0, 4, 3))), al.DataError,
     ["input 'x'", "empty batch", "0 observations"]),
    ("predict-empty-list", lambda: _in_seq().predict([]), al.DataError, ["input 'x'", "empty batch"]),
    ("predict-channel-counts", lambda: _in_seq().predict([np.ones((4, 3)), np.ones((5, 2))]),
     al.DataError, ["input 'x'", "sequence 1 has 2 channel(s)"]),
    ("classify-none", lambda: al.classify(_in_seq(), None), al.DataError, ["input 'x'", "received None"]),
    ("classify-string", lambda: al.classify(_in_seq(), "abc"), al.DataError,
     ["input 'x'", "a string 'abc'"]),
    ("classify-batch-size-0", lambda: al.classify(_in_seq(), torch.randn(2, 4, 3), batch_size=0),
     al.ArgumentError, ["batch_size", "received 0"]),
    ("classify-complex", lambda: al.classify(_in_seq(), np.ones((2, 4, 3), complex)), al.DataError,
     ["input 'x'", "complex"]),
    # ---- al.train inputs
    ("train-string", lambda: _in_train(_in_seq(), "abc", [0]), al.DataError,
     ["input 'x'", "a string 'abc'"]),
    ("train-none", lambda: _in_train(_in_seq(), None, [0]), al.DataError, ["input 'x'", "received None"]),
    ("train-complex", lambda: _in_train(_in_seq(), torch.ones(2, 4, 3, dtype=torch.cfloat), [0, 1]),
     al.DataError, ["input 'x'", "complex64", "imaginary part"]),
    ("train-meta", lambda: _in_train(_in_seq(), torch.ones(2, 4, 3, device="meta"), [0, 1]),
     al.DataError, ["input 'x'", "meta device", "2×4×3"]),
    ("train-empty", lambda: _in_train(_in_seq(), torch.ones(0, 4, 3), []), al.DataError,
     ["input 'x'", "0 observations"]),
    ("train-zero-length", lambda: _in_train(_in_seq(), torch.ones(2, 0, 3), [0, 1]), al.DataError,
     ["input 'x'", "0 time steps"]),
    ("train-zero-length-in-list", lambda: _in_train(_in_seq(), [np.ones((4, 3)), np.ones((0, 3))], [0, 1]),
     al.DataError, ["input 'x'", "sequence 1 has 0 time steps"]),
    ("train-none-in-list", lambda: _in_train(_in_seq(), [np.ones((4, 3)), None], [0, 1]),
     al.DataError, ["input 'x'", "observation 1 is None"]),
    ("train-ragged-features", lambda: _in_train(_in_feat(), [[1, 2, 3], [1, 2]], [0, 1]), al.DataError,
     ["input 'f'", "observation 1 is 2", "observation 0 is 3"]),
    ("train-channel-counts", lambda: _in_train(_in_seq(), [np.ones((4, 3)), np.ones((5, 2))], [0, 1]),
     al.DataError, ["input 'x'", "channel counts [2, 3]"]),
    ("train-validation-none", lambda: _in_train(_in_seq(), _IN_X, [0, 1], validation_data=(None, [0])),
     al.DataError, ["input 'x'", "received None"]),
    # ---- streams
    ("stream-string", lambda: _in_stream_net().stream().step("abc"), al.DataError, ["input 'x'", "str"]),
    ("stream-none", lambda: _in_stream_net().stream().step(None), al.DataError, ["input 'x'", "NoneType"]),
    # ---- TrainingOptions: every option checked where it enters
    ("opt-unknown-name", lambda: al.TrainingOptions(max_epoch=3), al.ArgumentError,
     ["unknown training option 'max_epoch'", "Did you mean 'max_epochs'"]),
    ("opt-unknown-name-no-match", lambda: al.TrainingOptions(zzz=1), al.ArgumentError,
     ["unknown training option 'zzz'", "help(al.TrainingOptions)"]),
    ("opt-gradient-decay-1", lambda: al.TrainingOptions(gradient_decay=1.0), al.ArgumentError,
     ["gradient_decay", "[0, 1)", "got 1.0"]),
    ("opt-gradient-decay-negative", lambda: al.TrainingOptions(gradient_decay=-0.5), al.ArgumentError,
     ["gradient_decay", "got -0.5"]),
    ("opt-gradient-decay-string", lambda: al.TrainingOptions(gradient_decay="0.9"), al.ArgumentError,
     ["gradient_decay", "got '0.9'"]),
    ("opt-squared-gradient-decay-1", lambda: al.TrainingOptions(squared_gradient_decay=1),
     al.ArgumentError, ["squared_gradient_decay", "[0, 1)", "got 1"]),
    ("opt-squared-gradient-decay-big", lambda: al.TrainingOptions(solver="adam", squared_gradient_decay=9.99),
     al.ArgumentError, ["squared_gradient_decay", "got 9.99"]),
    ("opt-epsilon-0", lambda: al.TrainingOptions(epsilon=0), al.ArgumentError, ["epsilon", "positive", "got 0"]),
    ("opt-epsilon-negative", lambda: al.TrainingOptions(epsilon=-1e-8), al.ArgumentError,
     ["epsilon", "got -1e-08"]),
    ("opt-epsilon-none", lambda: al.TrainingOptions(epsilon=None), al.ArgumentError, ["epsilon", "got None"]),
    ("opt-momentum-big", lambda: al.TrainingOptions(momentum=1.5), al.ArgumentError,
     ["momentum", "[0, 1)", "got 1.5"]),
    ("opt-momentum-negative", lambda: al.TrainingOptions(momentum=-0.1), al.ArgumentError,
     ["momentum", "got -0.1"]),
    ("opt-drop-factor-big", lambda: al.TrainingOptions(learning_rate_drop_factor=2), al.ArgumentError,
     ["learning_rate_drop_factor", "[0, 1]", "got 2"]),
    ("opt-drop-factor-string", lambda: al.TrainingOptions(learning_rate_drop_factor="x"),
     al.ArgumentError, ["learning_rate_drop_factor", "got 'x'"]),
    ("opt-warmup-fraction", lambda: al.TrainingOptions(warmup_fraction=1.5), al.ArgumentError,
     ["warmup_fraction", "got 1.5"]),
    ("opt-l2-nan", lambda: al.TrainingOptions(l2=float("nan")), al.ArgumentError, ["l2", "got nan"]),
    ("opt-l2-negative", lambda: al.TrainingOptions(l2=-1), al.ArgumentError, ["l2", "≥ 0", "got -1"]),
    ("opt-learning-rate-inf", lambda: al.TrainingOptions(learning_rate=float("inf")), al.ArgumentError,
     ["learning_rate", "got inf"]),
    ("opt-learning-rate-0", lambda: al.TrainingOptions(learning_rate=0), al.ArgumentError,
     ["learning_rate", "got 0"]),
    ("opt-batch-size-fraction", lambda: al.TrainingOptions(batch_size=2.5), al.ArgumentError,
     ["batch_size", "got 2.5"]),
    ("opt-max-epochs-0", lambda: al.TrainingOptions(max_epochs=0), al.ArgumentError,
     ["max_epochs", "got 0"]),
    ("opt-max-epochs-bool", lambda: al.TrainingOptions(max_epochs=True), al.ArgumentError,
     ["max_epochs", "got True"]),
    ("opt-verbose-string", lambda: al.TrainingOptions(verbose="yes"), al.ArgumentError,
     ["verbose", "True or False", "got 'yes'"]),
    ("opt-sort-by-length-none", lambda: al.TrainingOptions(sort_by_length=None), al.ArgumentError,
     ["sort_by_length", "got None"]),
    ("opt-check-finite-string", lambda: al.TrainingOptions(check_finite="no"), al.ArgumentError,
     ["check_finite", "got 'no'"]),
    ("opt-seed-fraction", lambda: al.TrainingOptions(seed=2.5), al.ArgumentError, ["seed", "got 2.5"]),
    ("opt-checkpoint-dir-file", lambda: al.TrainingOptions(checkpoint_dir=_IN_FILE), al.ArgumentError,
     ["checkpoint_dir", "test_error_catalogue.py", "names a file"]),
    ("opt-checkpoint-dir-int", lambda: al.TrainingOptions(checkpoint_dir=5), al.ArgumentError,
     ["checkpoint_dir", "a path", "got 5"]),
    ("opt-log-dir-file", lambda: al.TrainingOptions(log_dir=_IN_FILE), al.ArgumentError,
     ["log_dir", "names a file"]),
    ("opt-plots-file-folder", lambda: al.TrainingOptions(plots_file=_IN_DIR), al.ArgumentError,
     ["plots_file", "is a folder"]),
    ("opt-metrics-unknown", lambda: al.TrainingOptions(metrics=["acc"]), al.ArgumentError,
     ["metrics", "unknown metric 'acc'", "Did you mean 'accuracy'"]),
    ("opt-metrics-number", lambda: al.TrainingOptions(metrics=5), al.ArgumentError, ["metrics", "got 5"]),
    ("opt-validation-data", lambda: al.TrainingOptions(validation_data=5), al.ArgumentError,
     ["validation_data", "(X, Y)", "got 5"]),
    ("opt-validation-data-triple", lambda: al.TrainingOptions(validation_data=(1, 2, 3)),
     al.ArgumentError, ["validation_data", "got (1, 2, 3)"]),
    ("opt-device-word", lambda: al.TrainingOptions(device="gpu"), al.ArgumentError,
     ["device", "'cuda:N'", "got 'gpu'"]),
    ("opt-device-number", lambda: al.TrainingOptions(device=0), al.ArgumentError, ["device", "got 0"]),
    ("opt-output-fn", lambda: al.TrainingOptions(output_fn=5), al.ArgumentError,
     ["output_fn", "callable", "got 5"]),
    ("opt-solver-typo", lambda: al.TrainingOptions(solver="adma"), al.ArgumentError,
     ["solver", "'adma'", "Did you mean 'adam'"]),
    ("opt-replace-checked", lambda: al.TrainingOptions().replace(epsilon=0), al.ArgumentError,
     ["epsilon", "got 0"]),
    ("opt-train-keyword", lambda: _in_train(_in_seq(), _IN_X, [0, 1], gradient_decay=1), al.ArgumentError,
     ["gradient_decay", "got 1"]),
    # ---- training: losses, datasets, labels
    ("loss-not-scalar", lambda: _in_train(_in_feat(), torch.randn(4, 3), torch.randn(4, 3),
                                          loss=lambda o, t: (o - t) ** 2), al.ArgumentError,
     ["loss '<lambda>'", "scalar", "a tensor 4×3", ".mean()"]),
    ("loss-plain-number", lambda: _in_train(_in_feat(), torch.randn(4, 3), torch.randn(4, 3),
                                            loss=lambda o, t: 1.0), al.ArgumentError,
     ["loss '<lambda>'", "returned float 1.0"]),
    ("dataset-bare-tensors", lambda: al.train(_in_feat(), _InPairless(), max_epochs=1, verbose=False),
     al.DataError, ["(x, y) pairs", "a bare Tensor 3", "TensorDataset(X, Y)"]),
    ("dataset-inputs-only", lambda: al.train(_in_feat(), torch.utils.data.TensorDataset(torch.randn(4, 3)),
                                             max_epochs=1, verbose=False),
     al.DataError, ["(x, y) pairs", "a tuple of 1"]),
    ("labels-fractional", lambda: _in_train(_in_feat(), torch.randn(4, 3), [0, 1, 2.5, 1]), al.DataError,
     ["output 'fc'", "observation 2 is 2.5", "not a whole number"]),
    ("labels-fractional-tensor", lambda: _in_train(_in_feat(), torch.randn(4, 3),
                                                   torch.tensor([0.25, 1.0, 2.0, 1.0])),
     al.DataError, ["output 'fc'", "observation 0 is 0.25"]),
    ("seed1-decoder-target-steps", _in_seed1_mismatch, al.DataError,
     ["output 'cross-attention'", "9 time steps", "input 'decoder-input'", "has 10"]),
    ("module-lengths-not-callable", lambda: L.Module(nn.Identity(), lengths=3), al.ArgumentError,
     ["Module argument 'lengths'", "callable", "received 3"]),
]

if not torch.cuda.is_available():
    INPUTS_CATALOGUE += [
        ("train-device-cuda", lambda: _in_train(_in_feat(), torch.randn(4, 3), [0, 1, 2, 0], device="cuda"),
         al.ArgumentError, ["device 'cuda'", "This machine has: cpu", "device='cpu'"]),
        ("train-device-cuda-1", lambda: _in_train(_in_feat(), torch.randn(4, 3), [0, 1, 2, 0], device="cuda:1"),
         al.ArgumentError, ["device 'cuda:1'", "This machine has"]),
        ("matlab-execution-environment-gpu", lambda: __import__("attnlab.matlab", fromlist=["x"]).trainnet(
            torch.randn(4, 3), [0, 1, 2, 0], _in_feat(), "crossentropy",
            __import__("attnlab.matlab", fromlist=["x"]).trainingOptions(
                "adam", ExecutionEnvironment="gpu", Verbose=False)),
         al.ArgumentError, ["device 'cuda'", "This machine has", "ExecutionEnvironment='auto'"]),
    ]
if not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
    INPUTS_CATALOGUE.append(
        ("train-device-mps", lambda: _in_train(_in_feat(), torch.randn(4, 3), [0, 1, 2, 0], device="mps"),
         al.ArgumentError, ["device 'mps'", "not available", "This machine has"]))

# Checks that need the forward pass's hot path (network.py) or the stream's input conversion
# (stream/core.py) to call attnlab.core.batching: see the report to the lead. They pass once wired.
INPUTS_PENDING = [
    ("in-complex-tensor", lambda: _in_seq()(torch.ones(2, 4, 3, dtype=torch.cfloat)), al.DataError,
     ["input 'x'", "complex64", "imaginary part"]),
    ("in-meta-tensor", lambda: _in_seq()(torch.ones(2, 4, 3, device="meta")), al.DataError,
     ["input 'x'", "meta device"]),
    ("in-empty-tensor", lambda: _in_seq()(torch.ones(0, 4, 3)), al.DataError, ["input 'x'", "0 observations"]),
    ("in-zero-length-tensor", lambda: _in_stream_net()(torch.ones(2, 0, 3)), al.DataError,
     ["input 'x'", "0 time steps"]),
    ("stream-complex", lambda: _in_stream_net().stream().step(torch.ones(1, 2, 3, dtype=torch.cfloat)),
     al.DataError, ["input 'x'", "complex"]),
    ("stream-empty-batch", lambda: _in_stream_net().stream().step(torch.ones(0, 2, 3)), al.DataError,
     ["input 'x'", "0 observations"]),
]


def _in_check(action, cls, parts):
    with pytest.raises(cls) as info:
        action()
    msg = str(info.value)
    for part in parts:
        assert part in msg, f"{part!r} not in:\n{msg}"
    return msg


@pytest.mark.parametrize("action,cls,parts", [c[1:] for c in INPUTS_CATALOGUE],
                         ids=[c[0] for c in INPUTS_CATALOGUE])
def test_inputs_catalogue(action, cls, parts):
    _in_check(action, cls, parts)


@pytest.mark.parametrize("action,cls,parts", [c[1:] for c in INPUTS_PENDING],
                         ids=[c[0] for c in INPUTS_PENDING])
def test_inputs_catalogue_pending(action, cls, parts):
    _in_check(action, cls, parts)


def test_index_past_the_end_is_not_called_a_vocabulary_problem():
    net = al.Network([L.SequenceInput(3, name="x"), L.Index1d(10, name="idx")])
    msg = _in_check(lambda: net(torch.randn(1, 5, 3)), al.DataError, ["layer 'idx'", "10"])
    assert "vocabulary" not in msg


def test_inputs_catalogue_is_large_enough():
    assert len(INPUTS_CATALOGUE) >= 70


# ---- what is accepted now (items 3 and 4)

def test_a_column_of_class_ids_is_taken_as_class_ids():
    x = torch.randn(6, 3)
    ids = [0, 1, 2, 0, 1, 2]
    torch.manual_seed(0)
    a = _in_train(_in_feat(), x, torch.tensor(ids).unsqueeze(1), seed=0)
    b = _in_train(_in_feat(), x, torch.tensor(ids), seed=0)
    assert a.final_loss == pytest.approx(b.final_loss)


@pytest.mark.parametrize("form", ["tensors", "lists", "pad_sequences"])
def test_seed1_fixed_decoder_with_variable_encoder_trains(form):
    """The targets follow the decoder (the attention's query), whatever the encoder's lengths."""
    from attnlab.cli.demos.seed1 import answer_network
    from attnlab.matlab import trainingOptions, trainnet
    torch.manual_seed(0)
    dec = torch.randn(4, 10, 1)
    enc = [torch.randn(12 + i, 1) for i in range(4)]                  # 12–15 steps
    y = torch.randn(4, 10, 8)
    if form == "lists":
        X, Y = {"decoder-input": list(dec), "encoder-input": enc}, list(y)
    elif form == "pad_sequences":
        X, Y = {"decoder-input": dec, "encoder-input": al.pad_sequences(enc)}, y
    else:
        X, Y = {"decoder-input": dec, "encoder-input": enc}, y
    info = _in_train(answer_network(channels=8, heads=2), X, Y, loss="mse")
    assert np.isfinite(info.final_loss)
    trainnet(X, Y, answer_network(channels=8, heads=2), "mse",
             trainingOptions("adam", MaxEpochs=1, MiniBatchSize=4, Verbose=False))


class _InTimePool(nn.Module):
    """MaxPool1d over time on B×T×C: halves the time length."""

    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool1d(2)

    def forward(self, x):
        return self.pool(x.transpose(1, 2)).transpose(1, 2)


class _InTimeConv(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(3, 3, 3, stride=2)

    def forward(self, x):
        return self.conv(x.transpose(1, 2)).transpose(1, 2)


@pytest.mark.parametrize("module,lengths", [(_InTimePool, None), (_InTimeConv, None),
                                            (_InTimePool, lambda n: n // 2)])
def test_a_module_that_changes_time_keeps_a_mask_of_the_new_length(module, lengths):
    torch.manual_seed(0)
    net = al.Network([L.SequenceInput(3, name="x"), L.Module(module(), lengths=lengths, name="m"),
                      L.SelfAttention(1, 4, name="sa"), L.GlobalAvgPool1d()])
    assert net.analyze().ok
    xs = [torch.randn(n, 3) for n in (3, 9, 6)]
    padded = net.predict(xs)
    alone = torch.cat([net.predict(x[None]) for x in xs])
    torch.testing.assert_close(padded, alone)
    names = list(net.learnables)
    assert all(not n.startswith("m/") or n in ("m/conv.weight", "m/conv.bias") for n in names)
    _in_train(net, xs, torch.randn(3, 3), loss="mse")


def test_embedding_checks_read_nothing_back_on_the_happy_path(monkeypatch):
    import os
    import traceback
    from attnlab.layers import embedding
    here = os.path.abspath(embedding.__file__)
    reads = []
    for name in ("item", "tolist", "__bool__", "__float__", "__int__", "numpy", "nonzero"):
        real = getattr(torch.Tensor, name)

        def spy(self, *a, _real=real, _name=name, **k):
            if os.path.abspath(traceback.extract_stack(limit=3)[0].filename) == here:
                reads.append(_name)
            return _real(self, *a, **k)
        monkeypatch.setattr(torch.Tensor, name, spy)
    net = _in_emb()
    net(torch.randint(0, 5, (2, 4, 1)).float())
    assert reads == []
    with pytest.raises(al.DataError):
        net(_in_ids(7))
    assert reads                                      # the failure path reads the ids back


# ---- the demo command (item 7)

def test_demo_epochs_must_be_a_whole_number_of_at_least_one(tmp_path, capsys, monkeypatch):
    from attnlab.cli import main
    monkeypatch.setattr("importlib.import_module", lambda name: pytest.fail("work was started"))
    for bad, shown in (("0", "received 0"), ("-1", "received -1"), ("2.5", "received '2.5'"),
                       ("many", "received 'many'")):
        assert main(["demo", "roman", "--epochs", bad, "--out", str(tmp_path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--epochs" in err and shown in err, err
    assert not any(tmp_path.iterdir())


def test_demo_options_have_help(capsys):
    from attnlab.cli import main
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    out = capsys.readouterr().out
    assert "folder for the outputs" in out and "training epochs" in out


@pytest.mark.parametrize("demo,module", [("digits", "sklearn"), ("vowels", "sktime"),
                                         ("vowels", "sklearn")])
def test_demo_without_the_data_extra_is_one_line(demo, module, tmp_path, capsys, monkeypatch):
    import sys
    from attnlab.cli import main
    monkeypatch.setitem(sys.modules, module, None)        # as if the package were not installed
    assert main(["demo", demo, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'attnlab[data]'" in err and f"demo '{demo}'" in err
    assert "Traceback" not in err


# ======================================================================================
# One message, last: plain class names, torch's text quoted inside, no
# misleading fixes.
# ======================================================================================

def test_error_classes_raised_for_a_network_read_plainly():
    net = al.Network([L.SequenceInput(3, name="x"), L.Flatten(name="flat"), L.SelfAttention(2, 8)])
    with pytest.raises(al.FormatError) as info:
        net.initialize()
    err = info.value
    assert isinstance(err, al.NetworkError) and type(err).__name__ == "FormatError"
    assert "layer 'flat'" in str(err)


def test_a_torch_failure_is_one_attnlab_message_quoting_torch():
    import traceback
    net = al.Network([L.SequenceInput(3, name="x"), L.Conv1d(3, 4, padding="valid", name="conv")])
    with pytest.raises(al.DataError) as info:
        net(torch.randn(2, 2, 3))                     # 2 steps, kernel 3: torch refuses
    msg = str(info.value)
    assert "layer 'conv'" in msg and "torch says" in msg
    assert info.value.__cause__ is None and info.value.__suppress_context__
    shown = "".join(traceback.format_exception(info.value))
    assert shown.rstrip().splitlines()[-1].startswith("attnlab.core.errors.DataError")
    assert "During handling" not in shown and "direct cause" not in shown


def test_a_feature_network_is_not_told_to_use_a_sequence_input():
    net = al.Network([L.FeatureInput(4, name="x"), L.Dense(2)])
    with pytest.raises(al.DataError) as info:
        al.train(net, torch.randn(8, 5), torch.randint(0, 2, (8,)), max_epochs=1, verbose=False)
    msg = str(info.value)
    assert "SequenceInput" not in msg and "FeatureInput(5)" in msg


def test_onnx_export_to_a_folder_or_missing_folder_says_so(tmp_path):
    net = al.Network([L.FeatureInput(4, name="x"), L.Dense(2)])
    with pytest.raises(al.ArgumentError, match="is a folder"):
        net.export_onnx(tmp_path)
    with pytest.raises(al.ArgumentError, match="does not exist"):
        net.export_onnx(tmp_path / "missing" / "net.onnx")
    with pytest.raises(al.ArgumentError, match="file path"):
        net.export_onnx(42)


# PyTorch, Keras and MATLAB habits, and untrusted scripts: each ends in attnlab's own error
class _Gain(nn.Module):
    def __init__(self):
        super().__init__()
        self.g = nn.Parameter(torch.ones(4))

    def forward(self, x):
        return x * self.g


def _dense_net(out=2):
    return al.Network([L.SequenceInput(3, name="x"), L.Dense(out, name="fc"), L.ReLU(name="r")])


def _twice():
    d = L.Dense(3, name="dd")
    return al.Network([L.SequenceInput(3), d, d])


def _script(code, **limits):
    from attnlab import matlab as M
    return M.run_code(code, limits=M.Limits(**limits) if limits else None)


HABITS = [
    ("unknown-argument-elsewhere", lambda: L.SelfAttention(2, 8, causal_alignment="bottom-right"),
     TypeError, ["SelfAttention has no argument 'causal_alignment'", "L.MultiHeadAttention"]),
    ("replace-with-nothing", lambda: _dense_net().replace("fc", []), al.NetworkError,
     ["replace('fc')", "empty list", "net.remove('fc')"]),
    ("replace-with-torch-module", lambda: _dense_net().replace("r", nn.ReLU()), al.NetworkError,
     ["torch module ReLU", "L.Module(torch.nn.ReLU())"]),
    ("remove-by-number", lambda: _dense_net().remove(3), al.NetworkError,
     ["expected a layer name", "received 3 (int)", "fc"]),
    ("same-layer-twice", _twice, al.NetworkError, ["layer 'dd' (Dense)", "positions 1 and 2",
                                                  "copy.deepcopy"]),
    ("save-unregistered-module", lambda: al.Network([L.SequenceInput(4), L.Module(_Gain(), name="gain")])
     .save("unused.attnlab"), al.NetworkError, ["layer 'gain'", "'_Gain'", "al.register_module(_Gain)"]),
    ("state-dict-sizes", lambda: _dense_net().load_state_dict(_dense_net(5).state_dict()), al.SizeError,
     ["layer 'fc' learnable 'weight'", "expected 2×3", "received 5×3"]),
    ("onnx-opset", lambda: _dense_net().export_onnx("unused.onnx", opset=5), al.ArgumentError,
     ["'opset'", "from 14", "received 5"]),
    ("attention-nan-scale", lambda: al.attention(torch.randn(1, 2, 4), torch.randn(1, 2, 4),
                                                 torch.randn(1, 2, 4), 2, scale=float("nan")),
     al.ArgumentError, ["argument 'scale'", "finite number", "received nan"]),
    ("torchscript", lambda: torch.jit.script(_dense_net()), al.NetworkError,
     ["torch.jit.script(net)", "torch.compile(net)", "export_onnx"]),
    ("script-endless-loop", lambda: _script("while true, end", steps=1000), al.AttnlabError,
     ["<script>:1:1", "Limits.steps", "limits=Limits(steps=N)"]),
    ("script-huge-array", lambda: _script("x = zeros(1e6,1e6);"), al.AttnlabError,
     ["<script>:1:5", "1,000,000,000,000 elements", "Limits.elements"]),
]


@pytest.mark.parametrize("action,cls,parts", [c[1:] for c in HABITS], ids=[c[0] for c in HABITS])
def test_habits_catalogue(action, cls, parts, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(cls) as info:
        action()
    assert isinstance(info.value, al.AttnlabError)
    msg = str(info.value)
    for part in parts:
        assert part in msg, f"{part!r} not in:\n{msg}"
    assert not any(tmp_path.iterdir()), "a refused call wrote a file"
