"""`al.from_pretrained` as a loader: folders, configs in both transformers layouts, shards, and
the errors for what it does not build (never a silently different model)."""
import json
import re
import warnings

import pytest
import torch

import attnlab as al
from attnlab.pretrained import FAMILIES, CheckpointError, Config, from_pretrained
from pretrained_helpers import layout, quiet_transformers, relative_difference, save_checkpoint

transformers = pytest.importorskip("transformers")
quiet_transformers()


def _vit(**kw):
    base = dict(num_hidden_layers=1, hidden_size=16, num_attention_heads=2, intermediate_size=24,
                image_size=8, patch_size=4, num_labels=2)
    return transformers.ViTForImageClassification(transformers.ViTConfig(**{**base, **kw}))


@pytest.fixture
def folder(tmp_path):
    torch.manual_seed(0)
    return save_checkpoint(_vit(), tmp_path / "vit")


def _edit_config(folder, **changes):
    path = folder / "config.json"
    cfg = json.loads(path.read_text())
    for key, value in changes.items():
        if value is None:
            cfg.pop(key, None)
        else:
            cfg[key] = value
    path.write_text(json.dumps(cfg))


def _rewrite_weights(folder, edit):
    from safetensors.torch import load_file, save_file
    tensors = load_file(folder / "model.safetensors")
    edit(tensors)
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})


# -- folders ------------------------------------------------------------------------------------

def test_a_path_that_is_no_folder(tmp_path):
    with pytest.raises(al.ArgumentError, match="does not exist.*downloads nothing"):
        from_pretrained(tmp_path / "nowhere")
    (tmp_path / "f.json").write_text("{}")
    with pytest.raises(al.ArgumentError, match="is a file"):
        from_pretrained(tmp_path / "f.json")


def test_a_folder_without_config(tmp_path):
    with pytest.raises(CheckpointError, match="has no config.json"):
        from_pretrained(tmp_path)


def test_config_that_is_not_json(folder):
    (folder / "config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="config.json' is not valid JSON"):
        from_pretrained(folder)


def test_a_pickle_checkpoint_is_refused_unread(folder):
    (folder / "model.safetensors").rename(folder / "pytorch_model.bin")
    with pytest.raises(CheckpointError, match=r"pytorch_model\.bin.*never unpickles"):
        from_pretrained(folder)


def test_a_folder_without_weights(folder):
    (folder / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match="has no model.safetensors"):
        from_pretrained(folder)


def test_a_damaged_safetensors_file(folder):
    (folder / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{broken")
    with pytest.raises(CheckpointError, match="damaged or not a safetensors file"):
        from_pretrained(folder)


def test_dtype_must_be_a_floating_torch_dtype(folder):
    for bad in (torch.int64, "int64", 16):
        with pytest.raises(al.ArgumentError, match="floating torch dtype"):
            from_pretrained(folder, dtype=bad)


# -- shards ---------------------------------------------------------------------------------------

def test_sharded_checkpoint_loads_as_the_single_file(tmp_path):
    torch.manual_seed(0)
    model = _vit()
    single = from_pretrained(save_checkpoint(model, tmp_path / "one"))
    save_checkpoint(model, tmp_path / "shards", max_shard_size="10KB")
    index = json.loads((tmp_path / "shards" / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 1
    sharded = from_pretrained(tmp_path / "shards")
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        assert torch.equal(sharded(x), single(x))


def _shard_folder(tmp_path):
    torch.manual_seed(0)
    folder = save_checkpoint(_vit(), tmp_path / "shards", max_shard_size="10KB")
    return folder, folder / "model.safetensors.index.json"


def test_an_index_naming_a_missing_shard(tmp_path):
    folder, index = _shard_folder(tmp_path)
    shard = sorted(folder.glob("model-*.safetensors"))[0]
    shard.unlink()
    with pytest.raises(CheckpointError, match=f"lists shard '{shard.name}'.*not in"):
        from_pretrained(folder)


def test_an_index_with_a_path_outside_the_folder(tmp_path):
    folder, index = _shard_folder(tmp_path)
    doc = json.loads(index.read_text())
    first = next(iter(doc["weight_map"]))
    doc["weight_map"][first] = "../elsewhere.safetensors"
    index.write_text(json.dumps(doc))
    with pytest.raises(CheckpointError, match="a file name in the model's folder, without a path"):
        from_pretrained(folder)


def test_an_index_listing_a_tensor_its_shard_lacks(tmp_path):
    folder, index = _shard_folder(tmp_path)
    doc = json.loads(index.read_text())
    doc["weight_map"]["vit.extra.weight"] = next(iter(doc["weight_map"].values()))
    index.write_text(json.dumps(doc))
    with pytest.raises(CheckpointError, match="lists tensor 'vit.extra.weight'.*does not hold it"):
        from_pretrained(folder)


# -- weights that do not fit ------------------------------------------------------------------

def test_a_missing_weight_is_named_with_its_shape(folder):
    _rewrite_weights(folder, lambda t: t.pop("vit.encoder.layer.0.output.dense.weight"))
    with pytest.raises(CheckpointError, match=r"'vit\.encoder\.layer\.0\.output\.dense\.weight' "
                                              r"is missing \(the network expects 16×24"):
        from_pretrained(folder)


def test_a_mismatched_weight_names_both_shapes(folder):
    def edit(t):
        t["vit.encoder.layer.0.intermediate.dense.weight"] = torch.zeros(20, 16)
    _rewrite_weights(folder, edit)
    with pytest.raises(CheckpointError, match=r"'vit\.encoder\.layer\.0\.intermediate\.dense\."
                                              r"weight' is 20×16 in the file, the network built "
                                              r"from config.json expects 24×16"):
        from_pretrained(folder)


def test_tensors_of_no_part_of_the_model_are_reported(folder):
    _rewrite_weights(folder, lambda t: t.update({"extra.head.weight": torch.zeros(3)}))
    with pytest.warns(UserWarning, match="1 tensor.*were not read: extra.head.weight"):
        from_pretrained(folder)


# -- configs --------------------------------------------------------------------------------

def test_an_unknown_model_type_names_the_supported_ones(folder):
    _edit_config(folder, model_type="mamba")
    builds = ", ".join(sorted(FAMILIES))
    with pytest.raises(CheckpointError, match=f'"model_type" is "mamba": attnlab builds {builds}.'):
        from_pretrained(folder)
    _edit_config(folder, model_type=None)
    with pytest.raises(CheckpointError, match='"model_type" is missing'):
        from_pretrained(folder)


def test_an_unsupported_architecture_is_named(folder):
    _edit_config(folder, architectures=["ViTForMaskedImageModeling"])
    with pytest.raises(CheckpointError, match=r'"ViTForMaskedImageModeling"\]: attnlab builds the '
                                              r'vit models ViTForImageClassification, ViTModel'):
        from_pretrained(folder)


def test_without_architectures_the_tensors_decide(folder):
    _edit_config(folder, architectures=None)
    net = from_pretrained(folder)
    assert net.output_names == ["logits"]


@pytest.mark.parametrize("key, value, shown", [
    ("qkv_bias", False, "false"),
    ("is_encoder_decoder", True, "true"),
    ("hidden_act", "mish", '"mish"'),
    ("pruned_heads", {"0": [1]}, '{"0": [1]}'),
])
def test_a_model_changing_option_not_built_is_refused_by_name(folder, key, value, shown):
    _edit_config(folder, **{key: value})
    with pytest.raises(CheckpointError, match=re.escape(f'key "{key}" is {shown}: attnlab does not build')) as e:
        from_pretrained(folder)
    assert "never built in its place" in str(e.value)


def test_values_that_make_no_model(folder):
    _edit_config(folder, hidden_size=-3)
    with pytest.raises(CheckpointError, match=r'"hidden_size": expected an integer ≥ 1, found -3'):
        from_pretrained(folder)
    _edit_config(folder, hidden_size=16, num_attention_heads=3)
    with pytest.raises(CheckpointError, match=r'"num_attention_heads": expected a divisor of '
                                              r'hidden_size \(16\), found 3'):
        from_pretrained(folder)


def test_an_unknown_key_is_warned_of(folder):
    _edit_config(folder, shiny_new_option=True)
    with pytest.warns(UserWarning, match="'shiny_new_option' are not ones attnlab knows for vit"):
        from_pretrained(folder)


def test_keys_that_leave_the_model_unchanged_are_quiet(folder):
    _edit_config(folder, torchscript=False, task_specific_params={"x": {}}, encoder_stride=8,
                 output_hidden_states=True, _name_or_path="here")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from_pretrained(folder)


# -- the two layouts of transformers 4.x and 5.x -------------------------------------------------

def test_the_4x_dtype_key_loads_as_the_5x_one(folder):
    _edit_config(folder, dtype=None, torch_dtype="bfloat16")
    assert next(from_pretrained(folder).parameters()).dtype == torch.bfloat16
    _edit_config(folder, torch_dtype=None, dtype="float16")
    assert next(from_pretrained(folder).parameters()).dtype == torch.float16
    _edit_config(folder, dtype=None)
    assert next(from_pretrained(folder).parameters()).dtype == torch.float32   # the tensors'
    _edit_config(folder, dtype="float8")
    with pytest.raises(CheckpointError, match='"dtype": expected "float32" or'):
        from_pretrained(folder)


def test_rope_parameters_read_from_either_layout():
    v4 = Config({"model_type": "llama", "rope_theta": 500000.0,
                 "rope_scaling": {"type": "linear", "factor": 2.0}})
    v5 = Config({"model_type": "llama", "rope_parameters": {"rope_type": "linear", "factor": 2.0,
                                                            "rope_theta": 500000.0}})
    assert v4.rope() == v5.rope() == {"rope_type": "linear", "factor": 2.0, "rope_theta": 500000.0}
    assert Config({"model_type": "llama"}).rope() == {"rope_type": "default", "rope_theta": 10000.0}
    with pytest.raises(CheckpointError, match='"rope_theta": expected a positive number'):
        Config({"rope_theta": -1}).rope()


def test_a_checkpoint_written_by_transformers_4x_loads(folder):
    # 4.x wrote torch_dtype and the PretrainedConfig keys of its day
    _edit_config(folder, dtype=None, torch_dtype="float32", transformers_version="4.44.2",
                 tie_encoder_decoder=False, pruned_heads={}, torchscript=False,
                 use_bfloat16=False, tf_legacy_loss=False, chunk_size_feed_forward=0,
                 is_decoder=False, add_cross_attention=False, bad_words_ids=None,
                 return_dict=True, num_beams=1, max_length=20, temperature=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        net = from_pretrained(folder)
    hf = transformers.ViTForImageClassification.from_pretrained(folder).eval()
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        assert relative_difference(net(x), hf(pixel_values=x).logits) <= 1e-4


# -- save_pretrained -------------------------------------------------------------------------------

def test_save_pretrained_needs_a_network_from_a_checkpoint(tmp_path):
    from attnlab.pretrained import save_pretrained
    net = al.Network([al.layers.FeatureInput(3), al.layers.Dense(2)])
    with pytest.raises(al.ArgumentError, match="did not come from al.from_pretrained"):
        save_pretrained(net, tmp_path / "out")


def test_save_pretrained_refuses_a_changed_size(folder, tmp_path):
    # one block's size config.json cannot say (another number of labels it can: see
    # test_pretrained_saving.py)
    from attnlab import layers as L
    from attnlab.pretrained import save_pretrained
    net = from_pretrained(folder)
    net.replace("encoder.layer.0.intermediate.dense",
                L.Dense(30, name="encoder.layer.0.intermediate.dense"))
    with pytest.raises(CheckpointError, match=r"encoder.layer.0.intermediate.dense has out 30; "
                                              r"vit's layout has 24 \(intermediate_size 24\)"):
        save_pretrained(net, tmp_path / "out")
    net = from_pretrained(folder)
    net.remove("classifier")
    with pytest.raises(CheckpointError, match=r"no layer 'classifier' \(Dense\), which vit's "
                                              r"layout has"):
        save_pretrained(net, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_save_pretrained_in_another_dtype(folder, tmp_path):
    from attnlab.pretrained import save_pretrained
    save_pretrained(from_pretrained(folder), tmp_path / "half", dtype=torch.float16)
    cfg = json.loads((tmp_path / "half" / "config.json").read_text())
    assert cfg["dtype"] == "float16"
    back = from_pretrained(tmp_path / "half")
    assert next(back.parameters()).dtype == torch.float16
    save_pretrained(back, tmp_path / "again")                   # the network's dtype, float16
    assert layout(tmp_path / "again") == layout(tmp_path / "half")
    back.to(torch.float32)
    save_pretrained(back, tmp_path / "wide")                    # now float32
    assert {kind for kind, _ in layout(tmp_path / "wide").values()} == {"F32"}
    assert json.loads((tmp_path / "wide" / "config.json").read_text())["dtype"] == "float32"


def test_trained_weights_go_back_to_transformers(folder, tmp_path):
    from attnlab.pretrained import save_pretrained
    net = from_pretrained(folder)
    with torch.no_grad():
        net.learnables["classifier/bias"].add_(1.0)
    save_pretrained(net, tmp_path / "tuned")
    hf = transformers.ViTForImageClassification.from_pretrained(tmp_path / "tuned").eval()
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        assert relative_difference(net(x), hf(pixel_values=x).logits) <= 1e-6


def test_a_folder_of_symbolic_links_as_the_hub_cache_keeps_them(folder, tmp_path):
    # huggingface_hub.snapshot_download gives a folder of links to the cache's blobs
    blobs, snapshot = tmp_path / "blobs", tmp_path / "snapshot"
    blobs.mkdir()
    snapshot.mkdir()
    for f in folder.iterdir():
        target = blobs / f"blob-{f.name}"
        f.rename(target)
        (snapshot / f.name).symlink_to(target)
    net = from_pretrained(snapshot)
    hf = transformers.ViTForImageClassification.from_pretrained(snapshot).eval()
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        assert relative_difference(net(x), hf(pixel_values=x).logits) <= 1e-4
