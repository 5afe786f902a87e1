"""Every seed answer in attnlab/cli/demos runs at a small size; its MATLAB-style and idiomatic
versions build the same graph; AttentionQKV as combinators equals MultiHeadAttention."""
import math
import subprocess
import sys
import warnings

import pytest
import torch

import attnlab as al
from attnlab.cli import DEMOS, main
from attnlab.cli.demos import seed1, seed3_qkv as seed3
from attnlab.cli.demos import seed2_images as seed2
from attnlab.cli.demos import seed2_sequences as follow
from attnlab.cli.demos._compare import assert_same_graph, graph_signature


def _quiet(build):
    def run():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", al.matlab.MatlabNote)
            return build()
    return run


PAIRS = {
    "seed1 question": (seed1.question_matlab, seed1.question_network),
    "seed1 answer": (seed1.answer_matlab, lambda: seed1.answer_network(decoder_norm="layernorm_decoder")),
    "seed2 flatten": (_quiet(lambda: al.matlab.layerGraph(seed2.flatten_layers_matlab())),
                      seed2.flatten_network_attnlab),
    "seed2 image-to-sequence": (_quiet(lambda: al.matlab.dlnetwork(seed2.sequence_layers_matlab(8, 8)[:-1])),
                                lambda: seed2.sequence_network_attnlab(8, 8)),
    **{f"seed2 follow-up {p}": (lambda p=p: follow.attention_classifier_matlab(p, 8),
                                lambda p=p: follow.attention_classifier_attnlab(p, 8))
       for p in follow.POOLS},
    "seed2 follow-up lstm": (lambda: follow.lstm_attention_matlab(8),
                             lambda: follow.lstm_attention_attnlab(8)),
    "seed2 follow-up no pooling": (lambda: follow.without_pooling_matlab(8),
                                   lambda: follow.without_pooling_attnlab(8)),
    "seed3": (lambda: seed3.attention_qkv_matlab(16, 4), lambda: seed3.attention_qkv_attnlab(16, 4)),
}


@pytest.mark.parametrize("name", list(PAIRS))
def test_matlab_and_idiomatic_versions_build_identical_graphs(name):
    matlab, idiomatic = PAIRS[name]
    a, b = matlab(), idiomatic()
    assert_same_graph(a, b, name)
    assert [(type(l).__name__, l.name, l.config()) for l in a.layers] == \
        [(type(l).__name__, l.name, l.config()) for l in b.layers]
    assert a.connections == b.connections


def test_graph_comparison_notices_a_difference():
    a = seed1.answer_network(16, 2)
    b = seed1.answer_network(16, 4)
    with pytest.raises(AssertionError, match="cross-attention"):
        assert_same_graph(a, b)
    assert graph_signature(a) != graph_signature(b)


def test_seed1_prints_the_cycle_and_the_fix(capsys):
    r = seed1.main(small=True)
    assert "cross-attention → layernorm → lstm_decoder → query → cross-attention" in r["cycle"]
    assert "net.add(L.SequenceInput(C, name='decoder-input'))" in r["cycle"]
    assert r["fixed_ok"] and r["answer_ok"] and r["output_shape"] == (3, 7, 16)
    assert "The cycle and the fix" in capsys.readouterr().out


def test_seed2_flatten_is_explained_and_image_to_sequence_trains():
    r = seed2.main(small=True)
    assert issubclass(r["flatten_error_class"], al.FormatError)
    assert "ImageToSequence instead of Flatten" in r["flatten_error"]
    assert "self_attention" in r["flatten_error"]
    assert r["fixed_ok"] and math.isfinite(r["final_loss"])


def test_seed2_follow_ups_sequence_to_label_and_lstm():
    r = follow.main(small=True)
    assert r["formula_error"] < 1e-5
    assert r["no_pooling_output"] == "B×T×3"
    for name in [f"attention+{p}" for p in follow.POOLS] + ["lstm+attention"]:
        assert name in r
    assert isinstance(r["no_pooling_error"], al.AttnlabError)       # one label vs B×T×3


def test_seed3_attention_qkv_equals_multi_head_attention():
    diffs = seed3.main(small=True)
    assert set(diffs) == {"trax", "graph", "self"}
    assert max(diffs.values()) <= 1e-5


def test_seed3_weights_matter_before_copying():
    # the equality above is not vacuous: with their own initial weights the forms differ
    mha, trax = seed3.multi_head(8, 2), seed3.attention_qkv_trax(8, 2)
    x = torch.randn(2, 3, 8)
    assert (mha(x, x, x) - trax(x, x, x)).abs().max() > 1e-3
    seed3.copy_weights(mha, trax)
    torch.testing.assert_close(trax(x, x, x), mha(x, x, x), atol=1e-5, rtol=0)


def test_seed_answers_run_as_scripts():
    done = subprocess.run([sys.executable, "-m", "attnlab.cli.demos.seed3_qkv", "--small"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "MultiHeadAttention" in done.stdout


def test_seed_answers_run_as_demos(tmp_path, capsys):
    assert {"seed1", "seed2-images", "seed2-sequences", "seed3-qkv"} <= set(DEMOS)
    assert main(["demo", "seed3-qkv", "--out", str(tmp_path)]) == 0
    assert "max |Serial(Parallel(Dense×3), Attention, Dense) − MultiHeadAttention|" in \
        capsys.readouterr().out


def test_the_fix_is_written_once():
    # the CLI demo's fixed network is the MATLAB port's after the same fix
    port = seed1.apply_the_fix(_quiet(seed1.question_matlab)())
    assert_same_graph(port, seed1.fixed_network(), "the fix")
