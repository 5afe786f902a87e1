"""`attnlab analyze`, `plot` and `view` on a Hugging Face model folder (config.json and
model.safetensors, written offline by transformers)."""
import pytest
import torch

from attnlab.cli import main

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    transformers.utils.logging.set_verbosity_error()
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        n_layer=1, n_embd=16, n_head=2, vocab_size=40, n_positions=16))
    path = tmp_path_factory.mktemp("hf") / "tiny-gpt2"
    model.save_pretrained(path)
    return path


def test_analyze_reads_the_folder(folder, capsys):
    assert main(["analyze", str(folder)]) == 0
    out = capsys.readouterr().out
    assert f"{folder}: " in out and "inputs input_ids, outputs logits" in out
    assert "h.0.attn" in out and "lm_head" in out and "no issues" in out


def test_plot_draws_it_beside_the_folder_or_where_asked(folder, tmp_path, capsys):
    assert main(["plot", str(folder)]) == 0
    beside = folder.with_name("tiny-gpt2.png")
    assert beside.read_bytes()[:4] == b"\x89PNG"
    assert capsys.readouterr().out.strip() == f"wrote {beside}"
    assert main(["plot", str(folder), "-o", str(tmp_path / "net.svg")]) == 0
    assert (tmp_path / "net.svg").read_text().lstrip().startswith("<?xml")


def test_view_writes_the_page(folder, tmp_path, capsys):
    out = tmp_path / "page.html"
    assert main(["view", str(folder), "-o", str(out)]) == 0
    page = out.read_text()
    assert "<html" in page.lower() and "h.0.attn" in page
    assert main(["view", str(folder)]) == 0
    assert folder.with_name("tiny-gpt2.html").exists()


def test_a_folder_without_config_json_is_refused(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    for command in ("analyze", "plot"):
        assert main([command, str(tmp_path / "empty")]) == 2
        err = capsys.readouterr().err
        assert "is a folder without a config.json" in err and "Hugging Face model folder" in err


def test_a_broken_folder_is_one_error_line(folder, tmp_path, capsys):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text((folder / "config.json").read_text())
    assert main(["analyze", str(broken)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "model.safetensors" in err and "Traceback" not in err
