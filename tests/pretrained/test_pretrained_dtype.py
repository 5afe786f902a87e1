"""`from_pretrained(dtype=...)`: torch dtypes, their names and "auto", as transformers reads
them; `save_pretrained` writes the network's dtype, and transformers loads it back."""
import json

import pytest
import torch

import attnlab as al
from pretrained_helpers import layout, quiet_transformers, save_checkpoint

transformers = pytest.importorskip("transformers")
quiet_transformers()


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=1,
        num_attention_heads=4, num_key_value_heads=2))
    return save_checkpoint(model, tmp_path_factory.mktemp("llama"))


def test_dtype_names_and_auto(folder, tmp_path):
    for given, want in (("bfloat16", torch.bfloat16), ("float16", torch.float16),
                        ("float32", torch.float32), (torch.bfloat16, torch.bfloat16),
                        ("auto", torch.float32), (None, torch.float32)):
        net = al.from_pretrained(folder, dtype=given)
        assert {p.dtype for p in net.parameters()} == {want}, given
    config = json.loads((folder / "config.json").read_text())
    half = tmp_path / "half"
    half.mkdir()
    (half / "model.safetensors").write_bytes((folder / "model.safetensors").read_bytes())
    (half / "config.json").write_text(json.dumps({**config, "dtype": "float16",
                                                  "torch_dtype": None}))
    assert next(al.from_pretrained(half, dtype="auto").parameters()).dtype == torch.float16
    assert next(al.from_pretrained(half, dtype="float32").parameters()).dtype == torch.float32


def test_a_dtype_it_does_not_take_is_refused_by_name(folder):
    for bad in ("bf16", "int8", torch.int64, 16):
        with pytest.raises(al.ArgumentError, match=r'from_pretrained dtype: expected "auto", '
                                                   r'"float32", "float16", "bfloat16", "float64" '
                                                   r"or a floating torch dtype"):
            al.from_pretrained(folder, dtype=bad)
    with pytest.raises(al.ArgumentError, match="Did you mean .*'float16'"):
        al.from_pretrained(folder, dtype="float61")


def test_a_bfloat16_network_is_saved_in_bfloat16_and_transformers_loads_it(folder, tmp_path):
    net = al.from_pretrained(folder, dtype="bfloat16")
    net.save_pretrained(tmp_path / "bf16")
    assert {kind for kind, _ in layout(tmp_path / "bf16").values()} == {"BF16"}
    config = json.loads((tmp_path / "bf16" / "config.json").read_text())
    assert config.get("dtype", config.get("torch_dtype")) == "bfloat16"
    back = transformers.LlamaForCausalLM.from_pretrained(tmp_path / "bf16", dtype="auto").eval()
    assert next(back.parameters()).dtype == torch.bfloat16
    ids = torch.randint(0, 64, (2, 6), generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        assert torch.equal(back(input_ids=ids).logits, net(ids))
    again = al.from_pretrained(tmp_path / "bf16")
    assert next(again.parameters()).dtype == torch.bfloat16
    net.save_pretrained(tmp_path / "f32", dtype="float32")        # a name here too
    assert {kind for kind, _ in layout(tmp_path / "f32").values()} == {"F32"}


def test_auto_without_a_dtype_in_the_config_takes_the_files_tensors(folder, tmp_path):
    """As transformers' "auto": the config's dtype, else the dtype of the file's tensors."""
    al.from_pretrained(folder, dtype="bfloat16").save_pretrained(tmp_path / "bf16")
    config = json.loads((tmp_path / "bf16" / "config.json").read_text())
    config.pop("dtype", None)
    config.pop("torch_dtype", None)
    (tmp_path / "bf16" / "config.json").write_text(json.dumps(config))
    for given in ("auto", None):
        net = al.from_pretrained(tmp_path / "bf16", dtype=given)
        assert {p.dtype for p in net.parameters()} == {torch.bfloat16}
    theirs = transformers.LlamaForCausalLM.from_pretrained(tmp_path / "bf16", dtype="auto")
    assert next(theirs.parameters()).dtype == torch.bfloat16
