"""`save_pretrained`'s files: config.json and model.safetensors switch together (a SIGKILL at
any point leaves the old pair or the new one), temporaries are random and exclusive and the
next save removes a killed one's, the folder's other files stay, a stale sharded index goes,
and paths that cannot be written are attnlab errors naming the path and the fix."""
import contextlib
import errno
import json
import os
import random
import signal
import tempfile
import time
import warnings
from pathlib import Path

import pytest
import torch

import attnlab as al
from attnlab.core import files as _files, folders as _folders
from attnlab.pretrained import writing
from pretrained_helpers import quiet_transformers, relative_difference, save_checkpoint

transformers = pytest.importorskip("transformers")
quiet_transformers()

V = 60
IDS = torch.randint(0, V, (2, 6), generator=torch.Generator().manual_seed(0))


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    """A GPT-2 checkpoint of 2 blocks, as transformers writes it."""
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=16, n_head=2, vocab_size=V, n_positions=16)
    return save_checkpoint(transformers.GPT2LMHeadModel(config), tmp_path_factory.mktemp("gpt2"))


@pytest.fixture(scope="module")
def nets(original):
    """(old, new): the checkpoint as loaded, and without its last block (another config and
    other tensors: a mix of the two pairs does not load)."""
    old, new = al.from_pretrained(original), al.from_pretrained(original)
    new.remove(*[l.name for l in new.layers if l.name.startswith("h.1.")])
    new.connect("h.0.add_2", "ln_f")
    return old, new


def _outputs(net):
    with torch.no_grad():
        return net(IDS)


def _state(folder: Path, old, new) -> str:
    """"old" or "new" (the pair in `folder` loads, warning-free, and computes that network),
    or "no config"; a mix fails."""
    if not (folder / "config.json").exists():
        return "no config"
    with warnings.catch_warnings():
        warnings.simplefilter("error")               # tensors left over: a mix
        out = _outputs(al.from_pretrained(folder))
    for name, net in (("old", old), ("new", new)):
        if out.shape == _outputs(net).shape and relative_difference(out, _outputs(net)) <= 1e-6:
            return name
    raise AssertionError(f"'{folder}' holds neither pair")


def _temporaries(*folders: Path) -> list[str]:
    return sorted(p.name for f in folders for p in f.iterdir()
                  if p.name.endswith(".partial") or p.name.startswith(".tmp"))


def _model_folder(tmp_path, original, old) -> Path:
    folder = tmp_path / "model"
    old.save_pretrained(folder)
    (folder / "tokenizer.json").write_text('{"tokens": 1}')
    return folder


# -- SIGKILL at each point of a save -------------------------------------------------------------

def _arm(point: str, marker: Path) -> None:
    """In the child: stop at `point` (signal the parent with `marker`, then wait for the kill)."""
    def stop():
        marker.write_text("here")
        time.sleep(120)

    def before(fn):
        def wrapper(*a, **k):
            stop()
            return fn(*a, **k)
        return wrapper

    def after(fn):
        def wrapper(*a, **k):
            out = fn(*a, **k)
            stop()
            return out
        return wrapper

    if point == "written":                            # the new pair in the private folder
        _folders._fsync_file = before(_folders._fsync_file)
    elif point == "before-exchange":
        _folders.exchange = before(_folders.exchange)
    elif point == "after-exchange":
        _folders.exchange = after(_folders.exchange)
    elif point == "dismantling":                      # the old folder half removed
        real_exchange, real_unlink = _folders.exchange, os.unlink
        count = [0]

        def unlink(path, *a, **k):
            real_unlink(path, *a, **k)
            count[0] += 1
            if count[0] == 2:
                stop()

        def exchange(a, b):
            real_exchange(a, b)
            os.unlink = unlink
        _folders.exchange = exchange
    elif point.startswith("in-place"):               # no exchange: file by file
        _folders._may_exchange = lambda folder: False
        real_replace = os.replace
        wanted = {"in-place-config-out": ("before", "model.safetensors"),
                  "in-place-weights-in": ("after", "model.safetensors"),
                  "in-place-config-in": ("before", "config.json")}[point]

        def replace(src, dst, *a, **k):
            if Path(dst).name == wanted[1] and wanted[0] == "before":
                stop()
            real_replace(src, dst, *a, **k)
            if Path(dst).name == wanted[1] and wanted[0] == "after":
                stop()
        os.replace = replace
    else:
        raise ValueError(point)


def _kill_at(point: str, net, folder: Path, tmp_path: Path) -> None:
    marker = tmp_path / f"marker-{point}"
    pid = os.fork()
    if pid == 0:                                       # the child saves until it is killed
        try:
            _arm(point, marker)
            net.save_pretrained(folder)
        finally:
            os._exit(3)
    deadline = time.monotonic() + 60
    while not marker.exists():
        finished, _ = os.waitpid(pid, os.WNOHANG)
        assert not finished, f"the save ended before reaching {point}"
        assert time.monotonic() < deadline, f"the save never reached {point}"
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status)


@pytest.mark.parametrize("point, expected", [
    ("written", {"old"}), ("before-exchange", {"old"}), ("after-exchange", {"new"}),
    ("dismantling", {"new"}),
    # where folders cannot be exchanged: config.json goes first and comes back last
    ("in-place-config-out", {"no config"}), ("in-place-weights-in", {"no config"}),
    ("in-place-config-in", {"no config"}),
])
def test_sigkill_leaves_the_old_pair_or_the_new_one_and_the_next_save_cleans_up(
        original, nets, tmp_path, point, expected):
    old, new = nets
    folder = _model_folder(tmp_path, original, old)
    _kill_at(point, new, folder, tmp_path)
    assert _state(folder, old, new) in expected
    assert _temporaries(tmp_path, folder), "a killed save leaves its private folder"
    assert (folder / "tokenizer.json").read_text() == '{"tokens": 1}'
    new.save_pretrained(folder)                        # the next save removes the leftovers
    assert _state(folder, old, new) == "new"
    assert _temporaries(tmp_path, folder) == []
    assert sorted(p.name for p in folder.iterdir()) == \
        ["config.json", "model.safetensors", "tokenizer.json"]


def test_sigkill_at_random_moments_never_leaves_a_mix(original, nets, tmp_path):
    old, new = nets
    folder = _model_folder(tmp_path, original, old)
    t0 = time.perf_counter()
    new.save_pretrained(folder)
    old.save_pretrained(folder)
    save_s = (time.perf_counter() - t0) / 2
    rng = random.Random(0)
    seen = []
    for i in range(12):
        pid = os.fork()
        if pid == 0:
            try:
                while True:                            # old, new, old, … until killed
                    new.save_pretrained(folder)
                    old.save_pretrained(folder)
            finally:
                os._exit(3)
        time.sleep(rng.uniform(0, 4 * save_s))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        seen.append(_state(folder, old, new))
    print("states after each kill:", seen)
    assert set(seen) <= {"old", "new"}
    new.save_pretrained(folder)
    assert _temporaries(tmp_path, folder) == []


# -- the folder's other files, stale shards, links ---------------------------------------------

def test_other_files_stay_as_they_are(original, nets, tmp_path):
    old, new = nets
    folder = _model_folder(tmp_path, original, old)
    (folder / "README.md").write_text("# model")
    (folder / "sub").mkdir()
    (folder / "sub" / "notes.txt").write_text("notes")
    (folder / "latest").symlink_to("sub")
    os.chmod(folder, 0o750)
    inode = (folder / "tokenizer.json").stat().st_ino
    new.save_pretrained(folder)
    assert _state(folder, old, new) == "new"
    assert (folder / "README.md").read_text() == "# model"
    assert (folder / "sub" / "notes.txt").read_text() == "notes"
    assert os.readlink(folder / "latest") == "sub"
    assert (folder / "tokenizer.json").stat().st_ino == inode       # the same file
    assert (folder.stat().st_mode & 0o777) == 0o750
    assert _temporaries(tmp_path, folder) == []


@pytest.mark.parametrize("how", ["no-exchange", "exchange-refused"])
def test_file_by_file_where_folders_cannot_be_exchanged(original, nets, tmp_path, monkeypatch,
                                                         how):
    old, new = nets
    folder = _model_folder(tmp_path, original, old)
    if how == "no-exchange":
        monkeypatch.setattr(_folders, "_may_exchange", lambda folder: False)
    else:
        def refused(a, b):
            raise OSError(errno.EINVAL, "not on this file system")
        monkeypatch.setattr(_folders, "exchange", refused)
    new.save_pretrained(folder)
    assert _state(folder, old, new) == "new"
    assert (folder / "tokenizer.json").read_text() == '{"tokens": 1}'
    assert _temporaries(tmp_path, folder) == []


@pytest.mark.parametrize("failing, sharded", [("model.safetensors", False),
                                              ("config.json", True)])
def test_an_error_half_way_file_by_file_puts_the_old_pair_back(original, nets, tmp_path,
                                                               monkeypatch, failing, sharded):
    old, new = nets
    folder = _model_folder(tmp_path, original, old)
    if sharded:                                        # the old weights: an index and shards
        transformers.GPT2LMHeadModel.from_pretrained(original).save_pretrained(
            folder, max_shard_size="20KB")
        (folder / "model.safetensors").unlink(missing_ok=True)
    before = sorted(p.name for p in folder.iterdir())
    monkeypatch.setattr(_folders, "_may_exchange", lambda folder: False)
    real, failed = os.replace, []

    def full(src, dst, *a, **k):                        # fails once
        if Path(dst).name == failing and not failed:
            failed.append(dst)
            raise OSError(errno.ENOSPC, "No space left on device", str(dst))
        return real(src, dst, *a, **k)
    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(al.ArgumentError, match="No space left on device.*Its files are as they "
                                               "were. Free some space"):
        new.save_pretrained(folder)
    monkeypatch.setattr(os, "replace", real)
    assert _state(folder, old, new) == "old"
    assert sorted(p.name for p in folder.iterdir()) == before
    assert _temporaries(tmp_path, folder) == []


def test_a_killed_saves_folder_is_no_file_to_other_cleaners(tmp_path):
    # training checkpoints clean their folder of stale temporary files: a save_pretrained
    # folder there is not one of them
    stale = tmp_path / ".model.999999999-0123abcd.partial"
    stale.mkdir()
    (stale / "model.safetensors").write_bytes(b"x")
    assert _files.stale_temporaries(tmp_path) == []
    assert _files.remove_stale(tmp_path) == 0 and stale.exists()


def test_a_stale_sharded_index_goes_with_the_old_weights(original, nets, tmp_path):
    old, new = nets
    folder = tmp_path / "model"
    transformers.GPT2LMHeadModel.from_pretrained(original).save_pretrained(
        folder, max_shard_size="20KB")
    assert (folder / "model.safetensors.index.json").exists()
    new.save_pretrained(folder)
    assert sorted(p.name for p in folder.iterdir()) == \
        ["config.json", "generation_config.json", "model.safetensors"]
    hf = transformers.GPT2LMHeadModel.from_pretrained(folder).eval()
    with torch.no_grad():
        assert relative_difference(hf(IDS).logits, _outputs(new)) <= 1e-5


def test_an_index_naming_other_files_removes_only_its_shards(nets, tmp_path):
    old, new = nets
    folder = tmp_path / "model"
    old.save_pretrained(folder)
    (folder / "model-00001-of-00002.safetensors").write_bytes(b"shard")
    (folder / "tokenizer.json").write_text("{}")
    (tmp_path / "escape.safetensors").write_bytes(b"outside")
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
        "a": "model-00001-of-00002.safetensors", "b": "tokenizer.json",
        "c": "../escape.safetensors"}}))
    new.save_pretrained(folder)
    assert sorted(p.name for p in folder.iterdir()) == \
        ["config.json", "model.safetensors", "tokenizer.json"]
    assert (tmp_path / "escape.safetensors").read_bytes() == b"outside"


def test_links_planted_at_the_files_names_are_replaced_never_followed(nets, tmp_path):
    old, new = nets
    folder = tmp_path / "shared"
    old.save_pretrained(folder)
    victims = {name: tmp_path / f"victim-{i}" for i, name in enumerate(
        ["config.json", "config.json.partial", "model.safetensors.partial"])}
    for name, victim in victims.items():
        victim.write_text("precious")
        (folder / name).unlink(missing_ok=True)
        (folder / name).symlink_to(victim)
    new.save_pretrained(folder)
    assert all(v.read_text() == "precious" for v in victims.values())
    assert not (folder / "config.json").is_symlink()
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "model.safetensors"]
    assert _state(folder, old, new) == "new"


def test_a_link_planted_at_the_next_temporary_name_is_never_followed(nets, tmp_path,
                                                                     monkeypatch):
    old, new = nets
    victim = tmp_path / "victim"
    victim.mkdir()
    names = iter(["deadbeef"])
    real = _files.secrets.token_hex
    monkeypatch.setattr(_files.secrets, "token_hex", lambda n: next(names, None) or real(n))
    (tmp_path / f".model.{os.getpid()}-deadbeef.partial").symlink_to(victim)
    new.save_pretrained(tmp_path / "model")
    assert list(victim.iterdir()) == []
    assert _state(tmp_path / "model", old, new) == "new"
    link = tmp_path / "link"
    link.symlink_to(victim / "x")
    with pytest.raises(FileExistsError):
        _files.write_new(link, b"data")
    assert list(victim.iterdir()) == []


def test_a_hub_snapshot_of_links_keeps_its_blobs(original, nets, tmp_path):
    old, new = nets
    blobs, snapshot = tmp_path / "blobs", tmp_path / "snapshot"
    blobs.mkdir()
    snapshot.mkdir()
    for f in original.iterdir():
        (blobs / f.name).write_bytes(f.read_bytes())
        (snapshot / f.name).symlink_to(blobs / f.name)
    kept = {f.name: f.read_bytes() for f in blobs.iterdir()}
    new.save_pretrained(snapshot)
    assert {f.name: f.read_bytes() for f in blobs.iterdir()} == kept   # shared blobs untouched
    assert _state(snapshot, old, new) == "new"


def test_the_current_folder(nets, tmp_path, monkeypatch):
    old, new = nets
    folder = tmp_path / "here"
    old.save_pretrained(folder)
    monkeypatch.chdir(folder)
    new.save_pretrained(".")
    assert Path(os.getcwd()) == folder.resolve()
    assert json.loads(Path("config.json").read_text())["n_layer"] == 1
    assert _state(folder, old, new) == "new"


def test_safetensors_temporaries_of_killed_saves_are_removed(nets, tmp_path):
    old, new = nets
    folder = tmp_path / "model"
    old.save_pretrained(folder)
    header = (2).to_bytes(8, "little") + b"{}"
    dead, live, other = (folder / ".tmpAb12Cd", folder / ".tmpEf34Gh", folder / ".tmpIj56Kl")
    dead.write_bytes(header + b"x" * 100)
    live.write_bytes(header)                           # touched just now: maybe being written
    other.write_bytes(b"not a safetensors file")
    past = time.time() - 2 * writing.TEMP_AGE_S
    os.utime(dead, (past, past))
    os.utime(other, (past, past))
    new.save_pretrained(folder)
    assert not dead.exists() and live.exists() and other.exists()


def test_a_stale_private_folder_with_foreign_files_is_kept_with_a_warning(nets, tmp_path):
    old, new = nets
    folder = tmp_path / "model"
    old.save_pretrained(folder)
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)                                 # a pid that is gone
    stale, locked, foreign = (tmp_path / f".model.{pid}-{h}.partial"
                              for h in ("0000aaaa", "0000bbbb", "0000cccc"))
    for d in (stale, locked, foreign):
        d.mkdir()
        (d / "model.safetensors").write_bytes(b"half")
    (foreign / "mine.txt").write_text("not the save's")
    import fcntl
    fd = os.open(locked, os.O_RDONLY)                  # a writer in another pid namespace
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.warns(UserWarning, match="mine.txt"):
            new.save_pretrained(folder)
    finally:
        os.close(fd)
    assert not stale.exists() and locked.exists()
    assert sorted(p.name for p in foreign.iterdir()) == ["mine.txt"]


# -- paths that cannot be written ------------------------------------------------------------------

@pytest.mark.parametrize("path, said", [
    (None, "expected the folder to write (str or pathlib.Path), received NoneType None"),
    ("", "the path is empty (''), which names no folder"),
    (3, "received int 3"),
])
def test_no_path(nets, tmp_path, monkeypatch, path, said):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(al.ArgumentError) as e:
        nets[1].save_pretrained(path)
    assert said in str(e.value)
    assert list(tmp_path.iterdir()) == []              # nothing in the current folder


def test_a_file_where_the_folder_should_be(nets, tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(al.ArgumentError, match=r"'.*f' is a file; give a folder"):
        nets[1].save_pretrained(tmp_path / "f")
    with pytest.raises(al.ArgumentError, match=r"cannot make the folder '.*f/sub': '.*f' is a "
                                               r"file"):
        nets[1].save_pretrained(tmp_path / "f" / "sub")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(al.ArgumentError, match="symbolic link to .*nowhere', which does not "
                                               "exist"):
        nets[1].save_pretrained(tmp_path / "dangling")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling", "f"]


@contextlib.contextmanager
def _unwritable(folder: Path):
    """`folder` and its parent not writable for this process (root: acting as nobody)."""
    if os.geteuid() == 0:
        os.seteuid(65534)
        try:
            yield
        finally:
            os.seteuid(0)
    else:
        modes = [(p, p.stat().st_mode) for p in (folder, folder.parent)]
        for p, _ in modes:
            p.chmod(0o555)
        try:
            yield
        finally:
            for p, mode in modes:
                p.chmod(mode)


def test_a_read_only_folder(nets, tmp_path):
    old, new = nets
    base = Path(tempfile.mkdtemp(dir="/tmp" if os.path.isdir("/tmp") else None))
    try:
        base.chmod(0o755)                              # nobody may look, not write
        folder = base / "model"
        old.save_pretrained(folder)
        folder.chmod(0o755)
        before = {p.name: p.read_bytes() for p in folder.iterdir()}
        with _unwritable(folder):
            with pytest.raises(al.ArgumentError) as e:
                new.save_pretrained(folder)
        text = str(e.value)
        assert f"cannot write the model into '{folder}'" in text
        assert "Permission denied" in text and "chmod u+w" in text
        assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
        assert sorted(p.name for p in base.iterdir()) == ["model"]
    finally:
        import shutil
        shutil.rmtree(base)
