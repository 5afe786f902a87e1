"""`al.from_pretrained` on hostile folders: what a folder's files hold bounds the work and the
memory, never what its config.json claims. Sizes and counts that the weights do not have,
JSON too deep or numbers too long, FIFOs, folders and devices where files belong, and
safetensors headers that claim too much are refused by name, quickly, before a graph is built
or a learnable allocated."""
import json
import os
import struct
import threading
import time
import tracemalloc
import warnings

import pytest
import torch

import attnlab as al
from attnlab.network import Network
from attnlab.pretrained import CheckpointError, Family, from_pretrained
from attnlab.pretrained.config import LIMITS

C, V, P, LAYERS = 8, 16, 8, 2
CONFIG = {"model_type": "gpt2", "architectures": ["GPT2Model"], "vocab_size": V,
          "n_positions": P, "n_embd": C, "n_layer": LAYERS, "n_head": 2}


def _tensors(layers: int = LAYERS) -> dict[str, torch.Tensor]:
    """The tensors of a tiny GPT2Model, as transformers names them."""
    t = {"wte.weight": torch.randn(V, C), "wpe.weight": torch.randn(P, C),
         "ln_f.weight": torch.ones(C), "ln_f.bias": torch.zeros(C)}
    shapes = {"ln_1.weight": (C,), "ln_1.bias": (C,), "attn.c_attn.weight": (C, 3 * C),
              "attn.c_attn.bias": (3 * C,), "attn.c_proj.weight": (C, C), "attn.c_proj.bias": (C,),
              "ln_2.weight": (C,), "ln_2.bias": (C,), "mlp.c_fc.weight": (C, 4 * C),
              "mlp.c_fc.bias": (4 * C,), "mlp.c_proj.weight": (4 * C, C), "mlp.c_proj.bias": (C,)}
    for i in range(layers):
        t.update({f"h.{i}.{k}": torch.randn(s) for k, s in shapes.items()})
    return t


def _folder(path, **config):
    from safetensors.torch import save_file
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps({**CONFIG, **config}))
    save_file(_tensors(), str(path / "model.safetensors"))
    return path


def _raw_weights(path, header: bytes, length: int | None = None, data: bytes = b""):
    """A safetensors file written byte by byte: the 8-byte length (`length`, else the
    header's own), the header, the data."""
    n = len(header) if length is None else length
    (path / "model.safetensors").write_bytes(struct.pack("<Q", n) + header + data)


@pytest.fixture
def folder(tmp_path):
    return _folder(tmp_path / "model")


@pytest.fixture
def nothing_built(monkeypatch):
    """Fails the test if the loader initialises a network (allocates its learnables)."""
    def refuse(self, *a, **k):
        raise AssertionError("the network was initialised: learnables were allocated")
    monkeypatch.setattr(Network, "initialize", refuse)


def _refused(folder, *words, error=CheckpointError, most_s=20.0):
    """The loader's error for `folder`, checked to name each of `words` and to come back
    within `most_s` seconds (a generous bound: a hostile folder used to take minutes)."""
    start = time.perf_counter()
    with pytest.raises(error) as e:
        from_pretrained(folder)
    assert time.perf_counter() - start < most_s
    for word in words:
        assert word in str(e.value), (word, str(e.value))
    return str(e.value)


def test_the_crafted_folder_loads(folder):
    net = from_pretrained(folder)               # the cases below change one thing each
    assert net(torch.tensor([[1, 2, 3]])).shape == (1, 3, C)


# -- sizes and counts the weights do not have ----------------------------------------------

@pytest.mark.parametrize("key, value, tensor, shapes", [
    ("n_embd", 100_000, "wte.weight", ("16×8", "16×100000")),
    ("n_positions", 10**9, "wpe.weight", ("8×8", "1000000000×8")),
    ("vocab_size", 10**9, "wte.weight", ("16×8", "1000000000×8")),
    ("n_inner", 10**9, "h.0.mlp.c_fc.weight", ("8×32", "8×1000000000")),
])
def test_a_size_the_weights_do_not_have_is_refused_before_allocating(
        folder, nothing_built, key, value, tensor, shapes):
    (folder / "config.json").write_text(json.dumps({**CONFIG, key: value}))
    _refused(folder, f'config.json key "{key}" is {value}', f"'{tensor}' is {shapes[0]} in the "
             f"file", f"expects {shapes[1]}", most_s=10)


def test_a_million_layers_are_refused_before_a_table_or_graph_of_them(folder, nothing_built,
                                                                      monkeypatch):
    def no_graph(*a, **k):
        raise AssertionError("a graph was built")
    monkeypatch.setattr(Family, "network", no_graph)
    rows = []
    real = Family.weights
    monkeypatch.setattr(Family, "weights",
                        lambda self, cfg, arch: rows.append(1) or real(self, cfg, arch))
    (folder / "config.json").write_text(json.dumps({**CONFIG, "n_layer": 10**6}))
    _refused(folder, 'key "n_layer" is 1000000', "hold 2 of those blocks",
             "first missing tensor is 'h.2.ln_1.weight'", most_s=10)
    assert 0 < len(rows) <= 3                   # small tables only: 1 block, then 2


def test_a_count_the_file_has_no_room_for_is_refused(folder):
    # the last block's tensors are there, the ones between are not: still no model
    from safetensors.torch import save_file
    t = _tensors()
    t.update({k.replace("h.1.", "h.99."): v.clone() for k, v in t.items() if k.startswith("h.1.")})
    save_file(t, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({**CONFIG, "n_layer": 100}))
    _refused(folder, 'key "n_layer" is 100', "hold 2 of those blocks", "'h.2.ln_1.weight'")


# every family: each size its config gives, made huge, is refused by its key before a learnable
# is allocated (the files are transformers' own)
FAMILY_SIZES = {
    "gpt2": ["vocab_size", "n_positions", "n_embd", "n_inner", "n_layer"],
    "bert": ["vocab_size", "hidden_size", "max_position_embeddings", "type_vocab_size",
             "intermediate_size", "num_hidden_layers", "num_labels"],
    "vit": ["hidden_size", "intermediate_size", "num_channels", "num_hidden_layers",
            "num_labels"],
    "llama": ["vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
              "num_attention_heads", "head_dim"],
    "mistral": ["vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                "num_attention_heads", "head_dim"],
    "t5": ["vocab_size", "d_model", "d_kv", "d_ff", "num_layers", "num_decoder_layers",
           "num_heads"],
}


def _family_models(transformers):
    T = transformers
    return {
        "gpt2": lambda: T.GPT2LMHeadModel(T.GPT2Config(n_embd=8, n_layer=2, n_head=2,
                                                       vocab_size=16, n_positions=8)),
        "bert": lambda: T.BertForSequenceClassification(T.BertConfig(
            hidden_size=8, num_hidden_layers=2, num_attention_heads=2, intermediate_size=12,
            vocab_size=16, max_position_embeddings=8, num_labels=3)),
        "vit": lambda: T.ViTForImageClassification(T.ViTConfig(
            hidden_size=8, num_hidden_layers=2, num_attention_heads=2, intermediate_size=12,
            image_size=8, patch_size=4, num_labels=2)),
        "llama": lambda: T.LlamaForCausalLM(T.LlamaConfig(
            hidden_size=8, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
            intermediate_size=12, vocab_size=16, head_dim=4)),
        "mistral": lambda: T.MistralForCausalLM(T.MistralConfig(
            hidden_size=8, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
            intermediate_size=12, vocab_size=16, head_dim=4, sliding_window=4)),
        "t5": lambda: T.T5ForConditionalGeneration(T.T5Config(
            d_model=8, d_kv=4, d_ff=12, num_layers=2, num_decoder_layers=2, num_heads=2,
            vocab_size=16, relative_attention_num_buckets=4)),
    }


@pytest.fixture(scope="module")
def family_folders(tmp_path_factory):
    from pretrained_helpers import quiet_transformers
    transformers = pytest.importorskip("transformers")
    quiet_transformers()
    root = tmp_path_factory.mktemp("families")
    torch.manual_seed(0)
    for name, make in _family_models(transformers).items():
        make().eval().save_pretrained(root / name)
    return root


@pytest.mark.parametrize("family, key", [(f, k) for f, keys in FAMILY_SIZES.items()
                                         for k in keys])
def test_every_family_refuses_a_size_its_weights_do_not_have(family_folders, tmp_path,
                                                            nothing_built, family, key):
    import shutil
    folder = shutil.copytree(family_folders / family, tmp_path / family)
    config = json.loads((folder / "config.json").read_text())
    if key == "num_labels":                     # the labels' count is id2label's length
        config.pop("id2label", None)
        config.pop("label2id", None)
    config[key] = 10**9
    (folder / "config.json").write_text(json.dumps(config))
    message = _refused(folder, f"{key}", "1000000000", most_s=10)
    assert "is 1000000000" in message or f"{key} 1000000000" in message


def test_a_size_that_differs_names_its_key_beside_both_shapes(folder):
    (folder / "config.json").write_text(json.dumps({**CONFIG, "n_inner": 24}))
    _refused(folder, "'h.0.mlp.c_fc.weight' is 8×32 in the file, the network built from "
             "config.json expects 8×24", 'config.json key "n_inner" is 24')


# -- JSON too deep, numbers too long ---------------------------------------------------------

def test_a_config_nested_100000_deep_is_refused_by_name(folder):
    (folder / "config.json").write_text("[" * 100_000 + "]" * 100_000)
    _refused(folder, "config.json", "is nested deeper than 32 levels")


def test_a_config_value_nested_too_deep_names_where(folder):
    deep = json.loads("[" * 40 + "]" * 40)
    (folder / "config.json").write_text(json.dumps({**CONFIG, "task_specific_params": deep}))
    _refused(folder, "nested deeper than 32 levels", 'at "task_specific_params[0][0]')


@pytest.mark.parametrize("digits", [400, 5000])
def test_an_integer_of_hundreds_of_digits_is_refused_by_its_key(folder, digits):
    text = json.dumps(CONFIG).replace(f'"n_embd": {C}', '"n_embd": ' + "9" * digits)
    (folder / "config.json").write_text(text)
    _refused(folder, 'key "n_embd" is a', f"{digits}-digit integer")


def test_an_integer_beyond_int64_is_refused_where_it_sits(folder):
    cfg = {**CONFIG, "rope_scaling": {"factor": 2**64}}
    (folder / "config.json").write_text(json.dumps(cfg))
    _refused(folder, 'key "rope_scaling.factor" is a 20-digit integer')


def test_a_size_that_overflows_to_infinity_is_refused_by_its_key(folder):
    text = json.dumps(CONFIG).replace(f'"n_layer": {LAYERS}', '"n_layer": 1e400')
    (folder / "config.json").write_text(text)
    _refused(folder, 'key "n_layer": expected an integer ≥ 1, found inf')


def test_an_index_nested_too_deep_or_with_a_huge_number_is_refused(folder):
    (folder / "model.safetensors").rename(folder / "model-00001-of-00001.safetensors")
    index = folder / "model.safetensors.index.json"
    index.write_text("{\"weight_map\": " + "[" * 50_000 + "]" * 50_000 + "}")
    _refused(folder, "model.safetensors.index.json", "nested deeper than 32 levels")
    index.write_text('{"metadata": {"total_size": ' + "7" * 300 + '}, "weight_map": {}}')
    _refused(folder, 'key "metadata.total_size" is a 300-digit integer')


def test_a_header_with_a_huge_number_names_the_tensor(folder):
    header = json.dumps({"wte.weight": {"dtype": "F32", "shape": [int("9" * 30), 8],
                                        "data_offsets": [0, 64]}}).encode()
    _raw_weights(folder, header, data=bytes(64))
    _refused(folder, "the header of", 'key "wte.weight.shape[0]" is a 30-digit integer')


def test_a_header_nested_100000_deep_is_refused(folder):
    _raw_weights(folder, b"[" * 100_000 + b"]" * 100_000)
    _refused(folder, "its header is nested deeper than any safetensors header")


# -- what is not a file where a file belongs --------------------------------------------------

def _load_in_thread(folder):
    """from_pretrained(folder) in a thread, given 20 s: a read of a FIFO would block for ever
    (it is then unblocked, and the test fails)."""
    out = {}

    def run():
        try:
            from_pretrained(folder)
        except Exception as e:          # the test reads it
            out["error"] = e
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(20)
    return thread, out


@pytest.mark.parametrize("name", ["model.safetensors", "config.json"])
def test_a_fifo_where_a_file_belongs_is_named_and_never_opened(folder, name):
    (folder / name).unlink()
    os.mkfifo(folder / name)
    thread, out = _load_in_thread(folder)
    if thread.is_alive():                       # it opened the FIFO: let it go, then fail
        fd = os.open(folder / name, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        thread.join(5)
        pytest.fail(f"from_pretrained blocked on the FIFO {name}")
    error = out.get("error")
    assert isinstance(error, CheckpointError), error
    assert f"'{folder / name}' is a FIFO (named pipe), not a regular file" in str(error)


@pytest.mark.parametrize("make, words", [
    (lambda p: p.mkdir(), "is a folder, not a regular file"),
    (lambda p: p.symlink_to("/dev/zero"), "is a character device, not a regular file"),
    (lambda p: p.symlink_to(p.parent / "gone"), "is a broken symbolic link (to '"),
])
@pytest.mark.parametrize("name", ["model.safetensors", "config.json"])
def test_a_folder_device_or_broken_link_where_a_file_belongs_is_named(folder, name, make, words):
    if name == "config.json" and not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero here")
    (folder / name).unlink()
    make(folder / name)
    _refused(folder, f"'{folder / name}' {words}", most_s=10)


def _sharded(folder):
    (folder / "model.safetensors").rename(folder / "model-00001-of-00001.safetensors")
    weight_map = {k: "model-00001-of-00001.safetensors" for k in _tensors()}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    return folder


def test_a_sharded_folder_loads(folder):
    assert from_pretrained(_sharded(folder))(torch.tensor([[1, 2]])).shape == (1, 2, C)


@pytest.mark.parametrize("name", ["model.safetensors.index.json",
                                  "model-00001-of-00001.safetensors"])
def test_an_index_or_shard_that_is_no_file_is_named(folder, name):
    _sharded(folder)
    (folder / name).unlink()
    os.mkfifo(folder / name)
    thread, out = _load_in_thread(folder)
    if thread.is_alive():
        os.close(os.open(folder / name, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(5)
        pytest.fail(f"from_pretrained blocked on the FIFO {name}")
    assert isinstance(out.get("error"), CheckpointError), out
    assert f"'{folder / name}' is a FIFO (named pipe), not a regular file" in str(out["error"])
    (folder / name).unlink()
    (folder / name).mkdir()
    _refused(folder, f"'{folder / name}' is a folder, not a regular file")


def test_a_model_path_that_is_a_fifo_is_named(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    _refused(tmp_path / "pipe", "is a FIFO (named pipe)", error=al.ArgumentError, most_s=10)


# -- safetensors headers that claim too much -------------------------------------------------

def test_a_header_length_of_2_to_the_63_is_refused_unread(folder):
    _raw_weights(folder, b"{}", length=2**63)
    _refused(folder, "its header claims 9,223,372,036,854,775,808 bytes, more than "
             "safetensors' limit of 100,000,000")


def test_a_header_longer_than_the_file_is_refused(folder):
    _raw_weights(folder, b"{}", length=4096)
    _refused(folder, "its header claims 4,096 bytes, but the file has only 2")


def test_a_file_shorter_than_the_length_field_is_refused(folder):
    (folder / "model.safetensors").write_bytes(b"\x01\x02")
    _refused(folder, "fewer than the 8 that give a safetensors header's length")


@pytest.mark.parametrize("entry, words", [
    ({"dtype": "F32", "shape": [16, 8], "data_offsets": [0, 10**12]}, "outside the 512 bytes"),
    ({"dtype": "F32", "shape": [16, 9], "data_offsets": [0, 512]}, "takes 512 bytes"),
    ({"dtype": "F32", "shape": [2**62, 2**62], "data_offsets": [0, 512]}, "takes 512 bytes"),
    ({"dtype": "F32", "shape": [-16, 8], "data_offsets": [0, 512]}, "not a list of sizes"),
    ({"dtype": "F32", "shape": [16, 8]}, "a shape and two data_offsets"),
    ({"dtype": "F8_E4M3", "shape": [16, 8], "data_offsets": [0, 128]}, "dtype F8_E4M3"),
    ([1, 2, 3], "a shape and two data_offsets"),
])
def test_a_header_entry_that_lies_about_its_tensor_is_refused(folder, entry, words):
    _raw_weights(folder, json.dumps({"wte.weight": entry}).encode(), data=bytes(512))
    _refused(folder, "'wte.weight'", words)


def _header_of(n: int) -> bytes:
    """The header of n one-number tensors, built as bytes (json.dumps of a dict of a million
    entries takes seconds)."""
    parts = b",".join(b'"t%d":{"dtype":"F32","shape":[1],"data_offsets":[%d,%d]}'
                      % (i, 4 * i, 4 * i + 4) for i in range(n))
    return b"{" + parts + b"}"


def test_a_header_of_a_million_tensors_is_refused_before_it_is_parsed(folder):
    n = 1_000_000
    _raw_weights(folder, _header_of(n), data=bytes(4 * n))
    tracemalloc.start()
    try:
        _refused(folder, "its header lists 1,000,000 tensors", f"{LIMITS['tensors']:,}",
                 'LIMITS["tensors"]', most_s=10)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 200 * 2**20, peak             # the header's bytes (~60 MB), nothing per entry


def test_a_header_of_many_tensors_is_read_in_one_pass_without_warnings(folder):
    n = 50_000                                  # within the limit: read, then found wanting
    _raw_weights(folder, _header_of(n), data=bytes(4 * n))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        _refused(folder, "'wte.weight' is missing", most_s=20)
    assert not seen, [str(w.message)[:80] for w in seen]


def test_the_tensor_limit_can_be_raised_for_a_folder_one_trusts(folder, monkeypatch):
    monkeypatch.setitem(LIMITS, "tensors", 10)
    _refused(folder, "its header lists 28 tensors, more than attnlab reads from one file (10")
    monkeypatch.setitem(LIMITS, "tensors", 28)
    from_pretrained(folder)


@pytest.mark.parametrize("metadata, ok", [(None, True), ({"format": "pt"}, True),
                                          ({"format": 1}, False), ([], False)])
def test_the_header_metadata_is_null_or_strings(folder, metadata, ok):
    from safetensors.torch import load_file
    tensors = {k: v.clone() for k, v in load_file(folder / "model.safetensors").items()}
    header, offset, blobs = {"__metadata__": metadata}, 0, []
    for name, t in tensors.items():
        blob = t.numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    _raw_weights(folder, json.dumps(header).encode(), data=b"".join(blobs))
    if ok:
        net = from_pretrained(folder)
        assert torch.equal(net.learnables["wte/weight"], tensors["wte.weight"])
    else:
        _refused(folder, "its __metadata__ is not an object of strings")


def test_attnlabs_own_reader_gives_what_safetensors_gives(tmp_path):
    from safetensors.torch import save_file

    from attnlab.pretrained.checkpoint import Checkpoint
    tensors = {"bf16": torch.randn(3, 4).bfloat16(), "f16": torch.randn(5).half(),
               "i64": torch.arange(6).reshape(2, 3), "bool": torch.tensor([True, False]),
               "empty": torch.zeros(0, 3), "f64": torch.tensor(3.5, dtype=torch.float64),
               "u8": torch.randint(0, 255, (7,), dtype=torch.uint8)}
    save_file(tensors, str(tmp_path / "model.safetensors"))
    with Checkpoint(tmp_path) as ckpt:
        assert set(ckpt.header) == set(tensors)
        for name, t in tensors.items():
            got = ckpt.tensor(name)
            assert ckpt.header[name] == (tuple(t.shape), t.dtype)
            assert got.dtype == t.dtype and torch.equal(got, t), name


def test_a_config_that_ties_a_head_the_file_stores_apart_is_refused(family_folders, tmp_path):
    """Llama stores its own head: a config saying `tie_word_embeddings` true would make the
    loaded network another model than the file's, so the head's values are compared."""
    import shutil
    folder = shutil.copytree(family_folders / "llama", tmp_path / "llama")
    config = json.loads((folder / "config.json").read_text())
    assert config.get("tie_word_embeddings") is False
    config["tie_word_embeddings"] = True
    (folder / "config.json").write_text(json.dumps(config))
    message = _refused(folder, "lm_head.weight", "other values", '"tie_word_embeddings": false')
    assert "largest difference" in message


def test_a_tied_head_stored_with_the_embeddings_values_loads(tmp_path):
    """A file holding both copies of a tied matrix, equal, is one model and loads."""
    from pretrained_helpers import quiet_transformers
    transformers = pytest.importorskip("transformers")
    quiet_transformers()
    T = transformers
    torch.manual_seed(0)
    model = T.LlamaForCausalLM(T.LlamaConfig(
        hidden_size=8, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
        intermediate_size=12, vocab_size=16, head_dim=4, tie_word_embeddings=True)).eval()
    model.save_pretrained(tmp_path)
    from safetensors.torch import load_file, save_file
    tensors = load_file(str(tmp_path / "model.safetensors"))
    tensors["lm_head.weight"] = tensors["model.embed_tokens.weight"].clone()
    save_file(tensors, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    net = from_pretrained(tmp_path)
    ids = torch.tensor([[1, 5, 3]])
    with torch.no_grad():
        assert torch.allclose(net(ids), model(ids).logits, atol=1e-5)


# -- the newer families: an option a family does not build is refused by name ------------------

def _newer_models(transformers):
    T = transformers
    dec = dict(hidden_size=8, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
               intermediate_size=12, vocab_size=16)
    return {
        "qwen2": lambda: T.Qwen2ForCausalLM(T.Qwen2Config(**dec, head_dim=4)),
        "gemma2": lambda: T.Gemma2ForCausalLM(T.Gemma2Config(**dec, head_dim=4)),
        "phi3": lambda: T.Phi3ForCausalLM(T.Phi3Config(**dec, pad_token_id=0)),
        "mixtral": lambda: T.MixtralForCausalLM(T.MixtralConfig(
            **dec, head_dim=4, num_local_experts=4, num_experts_per_tok=2)),
        "t5-encoder": lambda: T.T5EncoderModel(T.T5Config(
            d_model=8, d_kv=4, d_ff=12, num_layers=2, num_heads=2, vocab_size=16,
            relative_attention_num_buckets=4)),
    }


@pytest.fixture(scope="module")
def newer_folders(tmp_path_factory):
    """family → a folder transformers wrote, made on first use."""
    from pretrained_helpers import quiet_transformers
    transformers = pytest.importorskip("transformers")
    quiet_transformers()
    root, made = tmp_path_factory.mktemp("newer"), {}

    def get(family):
        if family not in made:
            torch.manual_seed(0)
            _newer_models(transformers)[family]().eval().save_pretrained(root / family)
            made[family] = root / family
        return made[family]
    return get


def _edited(folder, to, **changes):
    """A copy of `folder` whose config.json has `changes` (None removes a key)."""
    import shutil
    shutil.copytree(folder, to)
    config = json.loads((to / "config.json").read_text())
    for key, value in changes.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    (to / "config.json").write_text(json.dumps(config))
    return to


FOO_ROPE = {"rope_type": "foo", "rope_theta": 100.0}


@pytest.mark.parametrize("family, changes, words", [
    ("qwen2", {"use_sliding_window": True, "sliding_window": 4,
               "layer_types": ["full_attention"]},
     ['key "layer_types"', "a list of 2 (num_hidden_layers) entries"]),
    ("qwen2", {"rope_parameters": FOO_ROPE}, ['key "rope_parameters"', '"foo"', "qwen2"]),
    ("gemma2", {"hidden_activation": "relu"}, ['key "hidden_activation" is "relu"', "gemma2"]),
    ("gemma2", {"hidden_activation": "no_such_function"},
     ['key "hidden_activation" is "no_such_function"', '"gelu_pytorch_tanh"']),
    ("phi3", {"rope_parameters": FOO_ROPE},
     ['key "rope_parameters"', '"foo"', 'rope_type "default" and "longrope"']),
    ("phi3", {"rope_parameters": None, "rope_scaling": {"type": "foo"}},       # transformers 4.x
     ['key "rope_scaling" is {"type": "foo"}', '"longrope"']),
    ("mixtral", {"router_jitter_noise": 0.1}, ['key "router_jitter_noise" is 0.1', "mixtral"]),
    ("mixtral", {"rope_parameters": FOO_ROPE}, ['key "rope_parameters"', '"foo"', "mixtral"]),
    ("t5-encoder", {"feed_forward_proj": "gated-foo"},
     ['key "feed_forward_proj" is "gated-foo"', '"gated-gelu"']),
    ("t5-encoder", {"is_decoder": True}, ['key "is_decoder" is true']),
])
def test_a_newer_familys_option_it_does_not_build_is_refused_by_name(
        newer_folders, tmp_path, nothing_built, family, changes, words):
    folder = _edited(newer_folders(family), tmp_path / family, **changes)
    message = _refused(folder, *words)
    assert "Nothing was loaded" in message or "expected" in message


def test_rope_scaling_beside_rope_parameters_is_applied_or_refused(newer_folders, tmp_path):
    """A config.json holding both keys (edited by hand, or merged from two versions):
    transformers scales by rope_scaling, so the network must too, or refuse by name."""
    from pretrained_helpers import relative_difference
    transformers = pytest.importorskip("transformers")
    folder = _edited(newer_folders("qwen2"), tmp_path / "qwen2",
                     rope_scaling={"rope_type": "linear", "factor": 4.0})
    model = transformers.Qwen2ForCausalLM.from_pretrained(folder).eval()
    assert model.config.rope_parameters["rope_type"] == "linear"
    try:
        net = from_pretrained(folder)
    except CheckpointError as e:
        assert "rope_scaling" in str(e)
        return
    ids = torch.randint(0, V, (1, 24), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert relative_difference(net(ids), model(ids).logits) <= 1e-4


def test_rope_scaling_that_agrees_with_rope_parameters_loads_as_transformers(newer_folders, tmp_path):
    from pretrained_helpers import relative_difference
    transformers = pytest.importorskip("transformers")
    base = newer_folders("qwen2")
    params = json.loads((base / "config.json").read_text())["rope_parameters"]
    scaled = {**params, "rope_type": "linear", "factor": 4.0}
    folder = _edited(base, tmp_path / "qwen2", rope_parameters=scaled,
                     rope_scaling={"type": "linear", "factor": 4.0})
    model = transformers.Qwen2ForCausalLM.from_pretrained(folder).eval()
    net = from_pretrained(folder)
    ids = torch.randint(0, V, (1, 24), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert relative_difference(net(ids), model(ids).logits) <= 1e-4


def test_a_rope_scaling_that_disagrees_is_refused_naming_both_keys(newer_folders, tmp_path):
    folder = _edited(newer_folders("qwen2"), tmp_path / "qwen2",
                     rope_scaling={"rope_type": "yarn", "factor": 2.0})
    with pytest.raises(CheckpointError, match=r'"rope_scaling".*disagrees with "rope_parameters"'):
        from_pretrained(folder)
