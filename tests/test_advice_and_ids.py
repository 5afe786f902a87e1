"""Advice that works when followed to the letter: the encoder–decoder cycle's fix, applied
verbatim (Python and MATLAB), gives a network that analyses clean, has no dead ends and learns;
LayerNorm over one channel; token ids that are computed values."""
from pathlib import Path

import pytest
import torch

import attnlab as al
from attnlab import layers as L
from attnlab.demos.seed1 import question_network

HERE = Path(__file__).parent / "matlab"
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
