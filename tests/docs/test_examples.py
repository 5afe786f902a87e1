"""Every example runs at a small size; its MATLAB-style and idiomatic versions build the same
graph; AttentionQKV as combinators equals MultiHeadAttention."""
import importlib.util
import math
import runpy
import sys
import warnings
from pathlib import Path

import pytest
import torch

import attnlab as al

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))

from _compare import assert_same_graph, graph_signature  # noqa: E402


def load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


seed1 = load("seed1_cross_attention")
seed2 = load("seed2_digits")
follow = load("seed2_sequence_attention")
seed3 = load("seed3_attention_qkv")


def _quiet(build):
    def run():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", al.matlab.MatlabNote)
            return build()
    return run


PAIRS = {
    "seed1 question": (seed1.question_matlab, seed1.question_attnlab),
    "seed1 answer": (seed1.answer_matlab, seed1.answer_attnlab),
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
    a = seed1.answer_attnlab(16, 2)
    b = seed1.answer_attnlab(16, 4)
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


def test_examples_run_as_scripts(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["seed3_attention_qkv.py", "--small"])
    runpy.run_path(str(EXAMPLES / "seed3_attention_qkv.py"), run_name="__main__")
    assert "MultiHeadAttention" in capsys.readouterr().out
