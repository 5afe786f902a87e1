"""Advice that works when followed to the letter: the encoder–decoder cycle's fix, applied
verbatim (Python and MATLAB), gives a network that analyses clean, has no dead ends and learns;
LayerNorm over one channel; token ids that are computed values."""
from pathlib import Path

import pytest
import torch

import attnlab as al
from attnlab import layers as L
from attnlab.cli.demos.seed1 import question_network

HERE = Path(__file__).resolve().parents[1] / "matlab"
SEED1_VARS = {"InputChannels": 1, "hidden_num_lstm1": 64, "hidden_num_lstm2": 64,
              "AttentionChannels": 256, "NumHeads": 8, "OutputChannels": 1}


def _advice(message: str) -> str:
    """The statements at the end of a message, after "With C set: ", without the final period."""
    assert message.endswith(".")
    return message.split("With C set: ", 1)[1][:-1]


def _cycle_message(analysis) -> str:
    (cycle,) = [i for i in analysis.errors if i.kind == "cycle"]
    return cycle.message


def _learns(net, channels: int, steps: int = 15) -> tuple[float, float]:
    """Loss (evaluation mode) before and after a few Adam steps on a small task that needs both
    inputs: an offset, the encoder sequence's mean and the decoder input's first channel."""
    torch.manual_seed(0)
    enc, dec = torch.randn(16, 6, 1), torch.randn(16, 4, channels)
    target = 1.0 + enc.mean(1, keepdim=True).expand(-1, 4, 1) + dec[..., :1]
    inputs = {"input": enc, "decoder-input": dec}
    mse = torch.nn.functional.mse_loss

    def loss_now():
        net.eval()
        with torch.no_grad():
            return float(mse(net(inputs), target))

    before = loss_now()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    net.train()
    for _ in range(steps):
        loss = mse(net(inputs), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return before, loss_now()


def _clean(net):
    a = net.analyze()
    assert a.ok, a.errors
    assert not a.warnings, a.warnings              # no unused output, no constant LayerNorm
    assert net.output_names == ["fc_out"]          # the attention's output reaches the output
    return a


@pytest.mark.parametrize("channels", [1, 3])
def test_the_cycle_advice_applied_verbatim_gives_a_clean_network_that_learns(channels):
    message = _cycle_message(question_network().analyze())
    code = _advice(message)
    net = question_network()
    exec(code, {"net": net, "L": L, "C": channels})             # the message's statements, as printed
    a = _clean(net)
    # the attention's output feeds the head, joined to the decoder's output
    assert a.in_specs["context"]["in2"] == al.Spec.sequence(256)
    assert set(net.input_names) == {"input", "decoder-input"}
    net.initialize()
    before, after = _learns(net, channels)
    assert after < 0.7 * before


def test_the_cycle_advice_keeps_the_layernorm_on_the_attention_and_feeds_the_lstm():
    message = _cycle_message(question_network().analyze())
    assert "cycle: cross-attention → layernorm → lstm_decoder → query → cross-attention" in message
    # the decoder input goes to the LSTM, never into a LayerNorm (over one channel: a constant)
    assert "net.connect('decoder-input', 'lstm_decoder')" in message
    assert "net.connect('layernorm', 'context/in2')" in message
    assert "C channels" in message and "previous step's target" in message


def test_the_cycle_advice_without_a_head_leaves_the_attention_as_the_output():
    net = al.Network([L.SequenceInput(1, name="enc"), L.Dense(8, name="kv")])
    net.add([L.Attention(2, name="att"), L.LSTM(8, name="dec"), L.Dense(8, name="q")])
    net.connect("kv", "att/key").connect("kv", "att/value").connect("q", "att/query")
    code = _advice(_cycle_message(net.analyze()))
    assert "Concatenation" not in code
    exec(code, {"net": net, "L": L, "C": 1})
    a = net.analyze()
    assert a.ok and not a.warnings and net.output_names == ["att"]


@pytest.mark.parametrize("channels", [1, 2])
def test_the_matlab_cycle_advice_runs_verbatim_in_the_script(channels, capsys):
    pytest.importorskip("tree_sitter_matlab")
    from attnlab.cli import main
    from attnlab.matlab import run_code, run_file
    from attnlab.matlab.terms import matlab_analysis

    script = HERE / "seed1_question.m"
    ws = run_file(script, dict(SEED1_VARS), out=lambda s: None)
    message = _cycle_message(matlab_analysis(ws["net"].analyze(), ws["net"]))
    code = _advice(message)
    assert code.startswith("net = disconnectLayers(net, 'layernorm', 'lstm_decoder'); ")
    assert "net = addLayers(net, sequenceInputLayer(C, Name='decoder-input'))" in code
    assert "net = addLayers(net, depthConcatenationLayer(2, Name='context'))" in code
    assert "net." not in code                      # MATLAB statements only
    # `attnlab analyze` prints the same statements
    sets = [a for k, v in SEED1_VARS.items() for a in ("--set", f"{k}={v}")]
    assert main(["analyze", str(script), *sets]) == 1
    assert code in " ".join(capsys.readouterr().out.split())
    # the script with the advice appended, C set
    text = script.read_text() + f"\nC = {channels};\n{code};\n"
    net = run_code(text, dict(SEED1_VARS), out=lambda s: None)["net"]
    _clean(net)
    net.initialize()
    before, after = _learns(net, channels)
    assert after < 0.7 * before


def test_layernorm_over_one_channel_is_a_warning_that_says_why_and_the_fix():
    net = al.Network([L.SequenceInput(1, name="x"), L.LayerNorm(name="ln"), L.Dense(2)])
    a = net.analyze()
    assert a.ok
    (w,) = a.warnings
    assert (w.layer, w.port, w.kind) == ("ln", "in", "useless")
    text = w.message
    assert "layer 'ln' port 'in': LayerNorm expected several channels, received B×T×1" in text
    assert "output is its bias, constant whatever the input" in text
    assert "BatchNorm" in text and "remove it" in text
    # it is what the warning says: the output does not depend on the input
    y1, y2 = net(torch.randn(2, 3, 1)), net(torch.randn(2, 3, 1) * 10)
    assert torch.allclose(y1, y2)
    for ok in (al.Network([L.SequenceInput(2), L.LayerNorm()]), al.Network([L.FeatureInput(3), L.LayerNorm()]),
               al.Network([L.ImageInput((1, 4, 4)), L.LayerNorm()])):
        assert not ok.analyze().issues


# -- token ids: an Embedding reads ids as the data gives them ---------------------------------

def _ids_error(net):
    (issue,) = [i for i in net.analyze().errors if i.kind == "ids"]
    return issue


def _statements(message: str) -> str:
    """The statements the ids message suggests: after "e.g. ", up to the sentence's end."""
    return message.split("e.g. ", 1)[1].split(". Or,", 1)[0]


def test_an_embedding_fed_by_a_dense_is_an_analysis_error_naming_layer_port_source_and_fix():
    net = al.Network([L.SequenceInput(4, name="x"), L.Dense(1, name="fc"), L.Embedding(10, 4, name="emb"),
                      L.Dense(3, name="out")])
    issue = _ids_error(net)
    assert (issue.layer, issue.port, issue.error_class) == ("emb", "in", al.FormatError)
    text = issue.message
    assert text.startswith("layer 'emb' port 'in': expected token ids as the data gives them")
    assert "received the output of 'fc' (Dense)" in text
    assert "use Dense(4) in place of 'emb'" in text
    # refused before any data is looked up: not the run-time DataError of a fractional id
    with pytest.raises(al.FormatError, match="layer 'emb' port 'in': expected token ids"):
        net(torch.randn(2, 3, 4))
    # the suggested statements, run as printed, feed the ids from an input layer
    exec(_statements(text), {"net": net, "L": L})
    a = net.analyze()
    assert a.ok and a.in_specs["emb"]["in"].computed is False
    y = net({"x": torch.randn(2, 3, 4), "tokens": torch.tensor([[[1.0], [2.0], [9.0]]] * 2)})
    assert set(y) == {"fc", "out"} and y["out"].shape == (2, 3, 3)


def test_ids_pass_through_layers_that_keep_them_and_the_message_names_who_computed_them():
    def net_with(second):
        net = al.Network([L.SequenceInput(1, name="prompt"), L.Concatenation(2, dim="time", name="cat"),
                          L.Embedding(10, 4, name="emb")])
        net.add(second)
        net.connect(second[-1].name, "cat/in2")
        return net

    good = net_with([L.SequenceInput(1, name="answer")])
    assert good.analyze().ok and not good.analyze().issues
    ids = torch.tensor([[[1.0], [2.0]]])
    assert good({"prompt": ids, "answer": ids}).shape == (1, 4, 4)
    bad = net_with([L.SequenceInput(3, name="answer"), L.Dense(1, name="fc")])
    text = _ids_error(bad).message
    assert "received the output of 'cat' (Concatenation), computed by 'fc' (Dense)" in text
    exec(_statements(text), {"net": bad, "L": L})       # the Dense's place on the id path
    assert bad.analyze().ok and bad.connections[-1] == ("tokens", "cat/in2")


@pytest.mark.parametrize("between", [L.LayerNorm, L.Dropout, L.ReLU])
def test_a_layer_that_passes_its_spec_through_still_computes_its_values(between):
    # these layers' size rule returns the input spec itself: the values are still theirs
    net = al.Network([L.SequenceInput(1, name="x"), between(name="mid"), L.Embedding(10, 4, name="emb")])
    assert "received the output of 'mid'" in _ids_error(net).message


def test_a_nested_network_sees_whether_its_outer_network_gives_it_ids():
    inner = al.Serial(L.Embedding(10, 4))
    assert al.Network([L.SequenceInput(1, name="x"), inner]).analyze().ok
    a = al.Network([L.SequenceInput(4, name="x"), L.Dense(1, name="fc"), inner]).analyze()
    (err,) = a.errors
    assert "values computed outside this network" in err.message and "Dense(4)" in err.message
    # a network of one Embedding, without input layers, reads the data it is given
    assert al.Network([L.Embedding(10, 4)])(torch.tensor([[[3.0]]])).shape == (1, 1, 4)


def test_networks_that_feed_embeddings_from_inputs_analyse_clean():
    from attnlab.cli.demos.roman import build_network
    assert not build_network().analyze().issues
    pytest.importorskip("tree_sitter_matlab")
    from attnlab.matlab import run_code
    net = run_code("layers = [sequenceInputLayer(1), wordEmbeddingLayer(8, 20), lstmLayer(4)];\n"
                   "net = dlnetwork(layers);", out=lambda s: None)["net"]
    assert not net.analyze().issues


def test_the_seed1_demos_fixed_network_is_the_advice_applied():
    from attnlab.cli.demos.seed1 import fixed_network
    net = question_network()
    exec(_advice(_cycle_message(net.analyze())), {"net": net, "L": L, "C": 1})
    fixed = fixed_network()
    assert set(fixed.connections) == set(net.connections)
    assert not fixed.analyze().issues
