"""`attnlab analyze FILE` and `attnlab plot FILE -o PICTURE` on saved networks."""
import sys
import textwrap


import attnlab as al
from attnlab import layers as L
from attnlab.cli import main
from attnlab.cli.demos.seed1 import answer_network, question_network


def test_analyze_prints_the_table_and_exits_0(tmp_path, capsys):
    net = answer_network(channels=16, heads=2)
    net.initialize()
    net.metadata["class_labels"] = ["a", "b"]
    path = tmp_path / "answer.attnlab"
    net.save(path)
    assert main(["analyze", str(path)]) == 0
    out = capsys.readouterr().out
    assert "10 layers" in out
    assert "cross-attention" in out and "B×T×16" in out and "no issues" in out
    assert "class_labels=['a', 'b']" in out


def test_analyze_exits_1_for_a_network_with_errors(tmp_path, capsys):
    path = tmp_path / "question.attnlab"
    question_network().save(path)
    assert main(["analyze", str(path)]) == 1
    out = capsys.readouterr().out
    assert "cycle: cross-attention → layernorm → lstm_decoder → query → cross-attention" in out
    assert "(no weights saved)" in out


def test_plot_writes_the_picture(tmp_path, capsys):
    path = tmp_path / "question.attnlab"
    question_network().save(path)
    assert main(["plot", str(path), "-o", str(tmp_path / "q.png")]) == 0
    assert (tmp_path / "q.png").read_bytes()[:4] == b"\x89PNG"
    assert main(["plot", str(path), "-o", str(tmp_path / "q.svg"), "--direction", "LR",
                 "--no-sizes"]) == 0
    assert "<svg" in (tmp_path / "q.svg").read_text()
    assert main(["plot", str(path)]) == 0                      # default: FILE with .png
    assert (tmp_path / "question.png").exists()
    assert "wrote" in capsys.readouterr().out


def test_bad_files_exit_2_with_a_message(tmp_path, capsys):
    bad = tmp_path / "bad.attnlab"
    bad.write_bytes(b"\x80\x04garbage")
    assert main(["analyze", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot load") and "pickle" in err
    assert main(["plot", str(tmp_path / "missing.attnlab")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_import_registers_module_factories(tmp_path, capsys, monkeypatch):
    (tmp_path / "my_blocks.py").write_text(textwrap.dedent("""
        import torch
        from torch import nn
        import attnlab as al

        class Gain(nn.Module):
            def __init__(self):
                super().__init__()
                self.g = nn.Parameter(torch.ones(3))

            def forward(self, x):
                return x * self.g

        al.register_module(Gain)
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    import my_blocks
    net = al.Network([L.SequenceInput(3), L.Module(my_blocks.Gain(), name="gain")]).initialize()
    path = tmp_path / "gain.attnlab"
    net.save(path)
    from attnlab.io import _MODULE_FACTORIES
    _MODULE_FACTORIES.pop("Gain")
    del sys.modules["my_blocks"]
    assert main(["analyze", str(path)]) == 2
    assert "al.register_module('Gain'" in capsys.readouterr().err
    assert main(["analyze", str(path), "--import", "my_blocks"]) == 0
    assert "gain" in capsys.readouterr().out
    _MODULE_FACTORIES.pop("Gain", None)
    assert main(["analyze", str(path), "--import", "no_such_module_xyz"]) == 2


def test_version_flag(capsys):
    import pytest
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"attnlab {al.__version__}"


def test_output_paths_are_checked_before_writing(tmp_path, capsys):
    path = tmp_path / "n.attnlab"
    al.Network([L.SequenceInput(3), L.Dense(2)]).save(path)
    missing = tmp_path / "no-such-folder"
    for argv, who in [(["plot", str(path), "-o", str(missing / "x.png")], "plot -o"),
                      (["view", str(path), "-o", str(missing / "x.html")], "view -o")]:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert who in err and "no-such-folder' does not exist" in err and "mkdir" in err
    assert main(["plot", str(path), "-o", str(tmp_path / "x.bmpx")]) == 2
    err = capsys.readouterr().err
    assert "'.bmpx'" in err and ".png" in err and ".svg" in err
    assert not missing.exists() and not (tmp_path / "x.bmpx").exists()


def test_set_on_a_saved_network_is_refused(tmp_path, capsys):
    path = tmp_path / "n.attnlab"
    al.Network([L.SequenceInput(3), L.Dense(2)]).save(path)
    assert main(["analyze", str(path), "--set", "x=1"]) == 2
    err = capsys.readouterr().err
    assert "--set" in err and "MATLAB script" in err and "n.attnlab" in err
