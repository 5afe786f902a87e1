"""`attnlab explain FILE --input SAMPLE`: the page of explanations, its arguments and errors."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch

import attnlab as al
from attnlab import layers as L
from attnlab.cli import main
from attnlab.cli.demos.seed1 import answer_network, question_network
from attnlab.core.errors import ArgumentError
from attnlab.viz.page_explain import METHODS, parse_methods


def _data_of(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="attnlab-data">(.*?)</script>', page, re.S)
    assert m, "the page has no data element"
    return json.loads(m.group(1))


@pytest.fixture
def answer(tmp_path):
    """The seed-1 answer (LSTM encoder, LSTM decoder, cross-attention) saved, and a sample."""
    torch.manual_seed(0)
    net = answer_network(channels=8, heads=2)
    net.initialize()
    net.save(tmp_path / "answer.attnlab")
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "sample.npz",
             **{"decoder-input": rng.standard_normal((4, 1)).astype(np.float32),
                "encoder-input": rng.standard_normal((6, 1)).astype(np.float32)})
    return tmp_path / "answer.attnlab", tmp_path / "sample.npz"


def test_methods_are_parsed_in_one_order_and_unknown_ones_refused():
    assert parse_methods("all") == METHODS
    assert parse_methods("heads, ig") == ("ig", "heads")
    assert parse_methods("none") == ()
    with pytest.raises(ArgumentError, match=r"--method: unknown method 'gradcam'; choose from "
                                            r"rollout, ig, lens, heads or all"):
        parse_methods("ig,gradcam")


def test_explain_errors_name_the_file_sample_or_method(answer, tmp_path, capsys):
    net_file, sample = answer
    cases = [
        (["explain", str(tmp_path / "none.attnlab"), "--input", str(sample)],
         "no such file: "),
        (["explain", str(net_file)], "explain needs the sample to explain: --input SAMPLE"),
        (["explain", str(net_file), "--input", str(tmp_path / "none.npz")],
         "--input: no such file: "),
        (["explain", str(net_file), "--input", str(sample), "--method", "saliency"],
         "--method: unknown method 'saliency'; choose from rollout, ig, lens, heads or all"),
        (["explain", str(net_file), "--input", str(sample), "--method", "none"],
         "--method none leaves nothing to explain"),
        (["explain", str(net_file), "--input", str(sample), "--steps", "0"],
         "--steps must be a whole number in 1…4096, received 0"),
        (["explain", str(tmp_path), "--input", str(sample)],
         "not a demo output folder (no model.attnlab in it)"),
    ]
    for argv, message in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("error: ") and message in err, (argv, err)
        assert "Traceback" not in err


def test_explain_refuses_a_sample_that_does_not_fit(answer, tmp_path, capsys):
    net_file, _ = answer
    np.save(tmp_path / "one.npy", np.zeros((4, 1), np.float32))
    assert main(["explain", str(net_file), "--input", str(tmp_path / "one.npy")]) == 2
    assert "the sample is one array, but the network has 2 inputs" in capsys.readouterr().err
    (tmp_path / "s.json").write_text("[1, 2, 3]")
    assert main(["explain", str(net_file), "--input", str(tmp_path / "s.json")]) == 2
    assert "expected a .npy, .npz, .csv or .txt file, received '.json'" in capsys.readouterr().err


def test_explain_refuses_a_network_with_errors_and_a_matlab_script(answer, tmp_path, capsys):
    _, sample = answer
    question_network().save(tmp_path / "question.attnlab")
    assert main(["explain", str(tmp_path / "question.attnlab"), "--input", str(sample)]) == 2
    err = capsys.readouterr().err
    assert "the network has errors, so it cannot run on the sample" in err
    assert "cycle: cross-attention" in err
    (tmp_path / "model.m").write_text("layers = [sequenceInputLayer(1)];\n")
    assert main(["explain", str(tmp_path / "model.m"), "--input", str(sample)]) == 2
    assert "is a MATLAB script: explain runs a network with its weights" in \
        capsys.readouterr().err


def test_explain_reads_a_csv_sample_a_row_per_time_step(tmp_path, capsys):
    torch.manual_seed(0)
    net = al.Network([L.SequenceInput(2, name="x"), L.SelfAttention(1, 4), L.Dense(3)])
    net.initialize()
    net.save(tmp_path / "m.attnlab")
    (tmp_path / "x.csv").write_text("pressure,flow\n0.5,1\n-1,2.5\n3,0\n")
    out = tmp_path / "m.html"
    assert main(["explain", str(tmp_path / "m.attnlab"), "--input", str(tmp_path / "x.csv"),
                 "--method", "ig", "--steps", "8", "-o", str(out)]) == 0
    data = _data_of(out.read_text(encoding="utf-8"))["explanations"]
    [ig] = data["attributions"]
    assert ig["kind"] == "time" and len(ig["values"]) == 3         # the header row skipped
    assert data["target"]["position"] == 2
    for text, message in (("1,2\n3,x\n", "row 2 has 'x', not a finite number"),
                          ("1,2\nnan,1\n", "row 2 has 'nan', not a finite number"),
                          ("a,b\n1,2\n3\n", "row 3 has 1 fields, expected 2 as in row 2; "
                                              "give every row (time step) the same number"),
                          ("\n", "the file has no rows")):
        (tmp_path / "bad.csv").write_text(text)
        assert main(["explain", str(tmp_path / "m.attnlab"), "--input",
                     str(tmp_path / "bad.csv")]) == 2
        assert message in capsys.readouterr().err
