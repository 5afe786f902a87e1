"""ViT checkpoints: `al.from_pretrained` against transformers on small random models."""
import pytest
import torch

import attnlab as al
from attnlab.cli import main
from pretrained_helpers import layout, quiet_transformers, relative_difference, save_checkpoint

transformers = pytest.importorskip("transformers")
quiet_transformers()


def _config(**kw):
    base = dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=4, intermediate_size=48,
                image_size=16, patch_size=4, num_labels=3)
    return transformers.ViTConfig(**{**base, **kw})


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    torch.manual_seed(0)
    model = transformers.ViTForImageClassification(_config())
    return save_checkpoint(model, tmp_path_factory.mktemp("vit")), model.eval()


@pytest.fixture(scope="module")
def loaded(classifier):
    return al.from_pretrained(classifier[0])


def test_logits_equal_transformers(classifier, loaded):
    _, hf = classifier
    x = torch.randn(3, 3, 16, 16)
    with torch.no_grad():
        ours, theirs = loaded(pixel_values=x), hf(pixel_values=x).logits
    assert loaded.input_names == ["pixel_values"] and loaded.output_names == ["logits"]
    assert relative_difference(ours, theirs) <= 1e-4


def test_learnables_counted_as_transformers(classifier, loaded):
    assert loaded.analyze().total_learnables == classifier[1].num_parameters()


def test_base_model_gives_hidden_states_and_pooler(tmp_path):
    torch.manual_seed(1)
    hf = transformers.ViTModel(_config(hidden_act="gelu_new", pooler_output_size=24)).eval()
    net = al.from_pretrained(save_checkpoint(hf, tmp_path))
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        ours, theirs = net(x), hf(pixel_values=x)
    assert set(ours) == {"last_hidden_state", "pooler_output"}
    assert relative_difference(ours["last_hidden_state"], theirs.last_hidden_state) <= 1e-4
    assert relative_difference(ours["pooler_output"], theirs.pooler_output) <= 1e-4
    assert net.analyze().total_learnables == hf.num_parameters()


def test_save_and_load_round_trip(loaded, tmp_path):
    path = tmp_path / "vit.attnlab"
    loaded.save(path)
    back = al.load(path).eval()         # a loaded file starts in training mode, as torch modules do
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        assert torch.equal(back(x), loaded(x))
    back.save_pretrained(tmp_path / "again")            # the layout survives attnlab's file


def test_save_pretrained_writes_the_original_layout(classifier, loaded, tmp_path):
    folder, hf = classifier
    loaded.save_pretrained(tmp_path / "out")
    assert layout(tmp_path / "out") == layout(folder)
    again = transformers.ViTForImageClassification.from_pretrained(tmp_path / "out").eval()
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        assert torch.equal(again(pixel_values=x).logits, hf(pixel_values=x).logits)


def test_bfloat16(classifier):
    net = al.from_pretrained(classifier[0], dtype=torch.bfloat16)
    assert all(p.dtype == torch.bfloat16 for p in net.parameters())
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        ours, theirs = net(x), classifier[1](pixel_values=x).logits
    assert ours.dtype == torch.bfloat16
    assert relative_difference(ours.float(), theirs) < 0.1


def test_export_onnx_checked_by_onnxruntime(loaded, tmp_path):
    pytest.importorskip("onnxruntime")
    result = loaded.export_onnx(tmp_path / "vit.onnx")
    assert result.max_error is not None and result.max_error < 1e-4


def test_cli_analyze_plot_view(loaded, tmp_path, capsys):
    path = tmp_path / "vit.attnlab"
    loaded.save(path)
    assert main(["analyze", str(path)]) == 0
    assert "encoder.layer.1.attention" in capsys.readouterr().out
    assert main(["plot", str(path), "-o", str(tmp_path / "vit.png")]) == 0
    assert main(["view", str(path), "-o", str(tmp_path / "vit.html")]) == 0
    assert (tmp_path / "vit.png").stat().st_size > 0 and (tmp_path / "vit.html").stat().st_size > 0
