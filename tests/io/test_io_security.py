"""Crafted files never run code and are refused within bounded memory.

Each crafted file goes to a fresh interpreter (this file run as a script) that installs an audit
hook (`sys.addaudithook`) watching exec/compile/open/os.system/subprocess/import events, then
tries `al.load`, the first call of the loaded network, `attnlab analyze FILE` and `attnlab plot
FILE`. Every payload carries TOKEN; an event that carries it, or any process launch, is a
payload that ran. The worker reports, per file, how each step ended and the peak RSS over the
RSS after import. In CI all files share one interpreter (a handful of seconds); with
ATTNLAB_SLOW=1 every file gets its own.
"""
from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

TOKEN = "ATTNLAB_PWNED_7f3a"
RSS_BUDGET_MB = 300
HERE = Path(__file__).resolve()
SLOW = os.environ.get("ATTNLAB_SLOW") == "1"

PAYLOADS = [f"x\n__import__('os').system('touch /tmp/{TOKEN}')\n#",
            f"x'); __import__('os').system('touch /tmp/{TOKEN}'); ('",
            f"__import__('os').system('touch /tmp/{TOKEN}')"]


# ------------------------------------------------------------------- the worker ---

def _worker(paths: list[str]) -> None:
    import contextlib
    import io
    import resource
    import types

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot  # noqa: F401 - imported before the hook: not an event of the file
    import torch

    import attnlab as al
    from attnlab import cli
    from torch import nn
    al.register_module("Linear", lambda: nn.Linear(4, 4))

    events = []

    def carries(obj, depth=0) -> bool:
        if isinstance(obj, str):
            return TOKEN in obj
        if isinstance(obj, bytes):
            return TOKEN.encode() in obj
        if isinstance(obj, types.CodeType) and depth < 8:
            return any(carries(c, depth + 1) for c in obj.co_consts + obj.co_names)
        if isinstance(obj, (tuple, list)) and depth < 8:
            return any(carries(c, depth + 1) for c in obj)
        return False

    def hook(event, args):
        if event in ("os.system", "subprocess.Popen", "os.exec", "os.posix_spawn", "os.spawn",
                     "os.fork", "os.forkpty", "pty.spawn"):
            events.append(event)
        elif event in ("exec", "compile", "open", "import", "os.remove", "shutil.rmtree") \
                and carries(args):
            events.append(event)

    def kb():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    def step(fn):
        try:
            return "ok", fn()
        except al.AttnlabError as e:
            return f"{type(e).__name__}: {e}", None
        except Exception as e:                       # noqa: BLE001 - a raw error is what we report
            return f"RAW {type(e).__name__}: {e}", None

    def first_call(net):
        net.initialize() if not net.initialized else None
        xs = [torch.zeros(spec.concrete(2, 5)) for spec in net._input_specs]
        return net(*xs)

    def cli_run(*argv):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                rc = cli.main(list(argv))
            except SystemExit as e:
                rc = e.code
            except Exception as e:                   # noqa: BLE001
                return {"rc": f"RAW {type(e).__name__}: {e}", "err": err.getvalue()}
        return {"rc": rc, "err": err.getvalue()}

    base = kb()
    sys.addaudithook(hook)
    for path in paths:
        events.clear()
        if path == "<selftest>":                     # the hook sees what a payload would do
            exec(compile(f"y = '{TOKEN}'", "<selftest>", "exec"), {})
            os.system("true")
            print("REPORT " + json.dumps({"file": path, "events": list(events)}), flush=True)
            continue
        load, net = step(lambda: al.load(path))
        call = step(lambda: first_call(net))[0] if net is not None else "-"
        out = str(Path(path).with_suffix(".png"))
        report = {"file": Path(path).name, "load": load, "call": call,
                  "analyze": cli_run("analyze", path), "plot": cli_run("plot", path, "-o", out)}
        report["events"] = list(events)
        report["rss_over_import_mb"] = (kb() - base) / 1024
        print("REPORT " + json.dumps(report), flush=True)


# ------------------------------------------------------------------ crafting files ---

def _zip(path, members, method=zipfile.ZIP_DEFLATED):
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members:
            z.writestr(name, data, compress_type=method)
    return path


def _st(tensors: dict, data: bytes = b"", raw_header=None) -> bytes:
    """A safetensors blob from a header we write ourselves (so it can lie)."""
    header = raw_header if raw_header is not None else json.dumps(tensors).encode()
    header += b" " * (-len(header) % 8)
    return struct.pack("<Q", len(header)) + header + data


def _base(tmp):
    """Two honest files with every kind of string field: names, specs, metadata, Module."""
    import torch
    from torch import nn

    import attnlab as al
    from attnlab import layers as L
    al.register_module("Linear", lambda: nn.Linear(4, 4))
    torch.manual_seed(0)
    net = al.Network([L.SequenceInput(3, name="in"), L.Dense(4, name="fc"),
                      L.SelfAttention(1, 4, attention_mask="causal", name="attn"),
                      L.Module(nn.Linear(4, 4), name="lin"),
                      al.Serial(L.Dense(4), L.ReLU(), name="block"),
                      L.Index1d("last", name="pick"), L.Dense(2, name="out")])
    net.initialize()
    net.metadata = {"class_labels": ["cat", "dog"], "note": "hello"}
    net.save(tmp / "base.attnlab")
    lazy = al.Network([L.Dense(4, name="fc"), L.GlobalAvgPool1d(name="pool")])
    lazy.initialize(torch.zeros(2, 5, 3))
    lazy.save(tmp / "nospec.attnlab")
    return [tmp / "base.attnlab", tmp / "nospec.attnlab"]


def _doc_and_weights(path):
    with zipfile.ZipFile(path) as z:
        return json.loads(z.read("network.json")), z.read("weights.safetensors")


def _string_sites(doc, at=()):
    """Every place in the JSON holding a string (values, and keys of objects)."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield at + (("key", k),)
            yield from _string_sites(v, at + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _string_sites(v, at + (i,))
    elif isinstance(doc, str):
        yield at
    elif isinstance(doc, int) and not isinstance(doc, bool) and "sizes" in at:
        yield at                                     # a spec's size: a string goes there too


def _put(doc, site, payload):
    doc = json.loads(json.dumps(doc))
    obj = doc
    for k in site[:-1]:
        obj = obj[k]
    last = site[-1]
    if isinstance(last, tuple):                      # a key
        obj[payload] = obj.pop(last[1])
    else:
        obj[last] = payload
    return doc


def _deflate_bomb(path, name, size):
    """A member that unpacks to `size` bytes of spaces (a few kB stored)."""
    chunk = b" " * (1 << 20)
    info = zipfile.ZipInfo(name)
    info.compress_type = zipfile.ZIP_DEFLATED
    with zipfile.ZipFile(path, "w") as z:
        with z.open(info, "w", force_zip64=True) as m:
            for _ in range(size >> 20):
                m.write(chunk)
    return path


def _patch_sizes(path, name, file_size):
    """Rewrites a member's declared unpacked size in the local and central headers."""
    raw = bytearray(Path(path).read_bytes())
    with zipfile.ZipFile(path) as z:
        info = z.getinfo(name)
    h = info.header_offset
    raw[h + 22:h + 26] = struct.pack("<I", file_size)
    c = raw.find(b"PK\x01\x02")
    while c >= 0:
        n = struct.unpack("<H", raw[c + 28:c + 30])[0]
        if raw[c + 46:c + 46 + n].decode() == name:
            raw[c + 24:c + 28] = struct.pack("<I", file_size)
        c = raw.find(b"PK\x01\x02", c + 4)
    Path(path).write_bytes(bytes(raw))
    return path


def craft(tmp: Path) -> dict[str, str]:
    """name → what the file must give: 'refused' (an attnlab error at load) or 'any' (loading
    may succeed: the payload is data, e.g. a class label; it still must not run)."""
    import pickle

    tmp.mkdir(parents=True, exist_ok=True)
    base, nospec = _base(tmp)
    cases = {}

    # name and spec injection into every string field (and every spec size)
    for src in (base, nospec):
        doc, weights = _doc_and_weights(src)
        for i, site in enumerate(_string_sites(doc)):
            for j, payload in enumerate(PAYLOADS if SLOW else PAYLOADS[:1]):
                name = f"inject-{src.stem}-{i}-{j}.attnlab"
                _zip(tmp / name, [("network.json", json.dumps(_put(doc, site, payload))),
                                  ("weights.safetensors", weights)])
                cases[name] = "any"
    doc, weights = _doc_and_weights(base)

    # pickles: bare, a torch.save-like zip, a pickle member beside an honest network
    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch /tmp/{TOKEN}",))
    evil = pickle.dumps(Evil())
    (tmp / "pickle.pt").write_bytes(evil)
    cases["pickle.pt"] = "refused"
    _zip(tmp / "torchsave.pt", [("archive/data.pkl", evil), ("archive/version", b"3")])
    cases["torchsave.pt"] = "refused"
    _zip(tmp / "pickle-member.attnlab", [("network.json", json.dumps(doc)),
                                         ("weights.safetensors", weights), ("data.pkl", evil)])
    cases["pickle-member.attnlab"] = "refused"
    # path traversal member names
    for i, bad in enumerate(["../../evil.py", "/tmp/evil.py", "network.json/../x", "weights.safetensors\x00"]):
        _zip(tmp / f"traversal-{i}.attnlab", [("network.json", json.dumps(doc)),
                                              ("weights.safetensors", weights),
                                              (bad, f"import os; os.system('touch /tmp/{TOKEN}')")])
        cases[f"traversal-{i}.attnlab"] = "refused"

    # layer types and Module class names naming os / builtins / subprocess
    for i, kind in enumerate(["os.system", "builtins.eval", "__import__", "subprocess.Popen",
                              "posix.system", "exec"]):
        d = json.loads(json.dumps(doc))
        d["network"]["layers"][1]["type"] = kind
        _zip(tmp / f"type-{i}.attnlab", [("network.json", json.dumps(d)), ("weights.safetensors", weights)])
        cases[f"type-{i}.attnlab"] = "refused"
        d = json.loads(json.dumps(doc))
        lin = next(e for e in d["network"]["layers"] if e["type"] == "Module")
        lin["config"]["module"] = kind
        _zip(tmp / f"module-{i}.attnlab", [("network.json", json.dumps(d)), ("weights.safetensors", weights)])
        cases[f"module-{i}.attnlab"] = "refused"
    d = json.loads(json.dumps(doc))
    d["network"]["layers"][1]["config"]["__class__"] = "os.system"
    _zip(tmp / "config-dunder.attnlab", [("network.json", json.dumps(d)), ("weights.safetensors", weights)])
    cases["config-dunder.attnlab"] = "refused"

    # huge declared sizes: Dense(out=60_000_000) in a tiny file, with a small, a lying and no
    # weights member
    def dense(out, width=8, weights_member=None, lazy=False):
        g = {"format": "attnlab.network", "version": 1, "weights": None if lazy else "weights.safetensors",
             "network": {"name": None, "layers": [
                 {"type": "SequenceInput", "name": "in", "config": {"channels": width}},
                 {"type": "Dense", "name": "fc", "config": {"out": out}}],
                 "connections": [{"source": "in/out", "destination": "fc/in"}], "metadata": {}}}
        members = [("network.json", json.dumps(g))]
        if weights_member is not None:
            members.append(("weights.safetensors", weights_member))
        return members
    small = _st({"layer_modules.fc.weight": {"dtype": "F32", "shape": [2, 8], "data_offsets": [0, 64]},
                 "layer_modules.fc.bias": {"dtype": "F32", "shape": [2], "data_offsets": [64, 72]}},
                b"\0" * 72)
    lying = _st({"layer_modules.fc.weight": {"dtype": "F32", "shape": [60_000_000, 8],
                                             "data_offsets": [0, 1_920_000_000]},
                 "layer_modules.fc.bias": {"dtype": "F32", "shape": [60_000_000],
                                           "data_offsets": [1_920_000_000, 2_160_000_000]}})
    for out in (60_000_000, 200_000_000):
        _zip(tmp / f"dense{out}-small.attnlab", dense(out, weights_member=small))
        _zip(tmp / f"dense{out}-lying.attnlab", dense(out, weights_member=lying))
        _zip(tmp / f"dense{out}-lazy.attnlab", dense(out, lazy=True))
        cases.update({f"dense{out}-small.attnlab": "refused", f"dense{out}-lying.attnlab": "refused",
                      f"dense{out}-lazy.attnlab": "refused"})

    # lying safetensors headers for an honest graph (Dense 8 → 2)
    w, b = "layer_modules.fc.weight", "layer_modules.fc.bias"
    headers = {
        "overlap": ({w: {"dtype": "F32", "shape": [2, 8], "data_offsets": [0, 64]},
                     b: {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, 64),
        "beyond": ({w: {"dtype": "F32", "shape": [2, 8], "data_offsets": [0, 64]},
                    b: {"dtype": "F32", "shape": [2], "data_offsets": [64, 10**12]}}, 72),
        "int64": ({w: {"dtype": "I64", "shape": [2, 8], "data_offsets": [0, 128]},
                   b: {"dtype": "I64", "shape": [2], "data_offsets": [128, 144]}}, 144),
        "dtype": ({w: {"dtype": "os.system", "shape": [2, 8], "data_offsets": [0, 64]},
                   b: {"dtype": "F32", "shape": [2], "data_offsets": [64, 72]}}, 72),
        "negative": ({w: {"dtype": "F32", "shape": [-2, -8], "data_offsets": [0, 64]},
                      b: {"dtype": "F32", "shape": [2], "data_offsets": [64, 72]}}, 72),
        "extra": ({w: {"dtype": "F32", "shape": [2, 8], "data_offsets": [0, 64]},
                   b: {"dtype": "F32", "shape": [2], "data_offsets": [64, 72]},
                   "layer_modules.evil.weight": {"dtype": "F32", "shape": [10**9],
                                                 "data_offsets": [72, 72]}}, 72),
    }
    for key, (hdr, n) in headers.items():
        _zip(tmp / f"header-{key}.attnlab", dense(2, weights_member=_st(hdr, b"\0" * n)))
        cases[f"header-{key}.attnlab"] = "refused"
    _zip(tmp / "header-huge-length.attnlab",
         dense(2, weights_member=struct.pack("<Q", 2**62) + b"{}"))
    _zip(tmp / "header-deep.attnlab",
         dense(2, weights_member=_st({}, raw_header=b"[" * 100_000 + b"]" * 100_000)))
    cases.update({"header-huge-length.attnlab": "refused", "header-deep.attnlab": "refused"})

    # zip bombs: a network.json of 64 MB spaces (80 kB stored); a weights member whose headers
    # declare 3 GB from a few bytes; a member that unpacks beyond what it declares
    _deflate_bomb(tmp / "bomb-graph.attnlab", "network.json", 64 << 20)
    cases["bomb-graph.attnlab"] = "refused"
    members = dense(60_000_000)
    _zip(tmp / "bomb-weights.attnlab", members + [("weights.safetensors", b"\0" * (4 << 20))])
    _patch_sizes(tmp / "bomb-weights.attnlab", "weights.safetensors", 3 * 2**30)
    cases["bomb-weights.attnlab"] = "refused"
    big_json = json.dumps(doc).encode() + b" " * (32 << 20)
    _zip(tmp / "bomb-understated.attnlab", [("network.json", big_json), ("weights.safetensors", weights)])
    _patch_sizes(tmp / "bomb-understated.attnlab", "network.json", 1000)
    cases["bomb-understated.attnlab"] = "refused"

    # deep JSON: the whole graph, a config value, the metadata, nested networks
    _zip(tmp / "deep-graph.attnlab", [("network.json", "[" * 200_000 + "]" * 200_000)])
    d = json.loads(json.dumps(doc))
    d["network"]["metadata"]["deep"] = json.loads("[" * 900 + "]" * 900)
    _zip(tmp / "deep-metadata.attnlab", [("network.json", json.dumps(d)), ("weights.safetensors", weights)])
    d = json.loads(json.dumps(doc))
    d["network"]["layers"][1]["config"]["out"] = json.loads("[" * 900 + "]" * 900)
    _zip(tmp / "deep-config.attnlab", [("network.json", json.dumps(d)), ("weights.safetensors", weights)])
    inner = {"layers": [{"type": "ReLU", "name": "r"}]}
    for i in range(100):
        inner = {"name": f"n{i}", "layers": [{"type": "Network", "name": f"n{i}", "network": inner}]}
        inner["layers"][0]["network"]["name"] = f"n{i}"
    d = {"format": "attnlab.network", "version": 1, "weights": None, "network": inner}
    _zip(tmp / "deep-networks.attnlab", [("network.json", json.dumps(d))])
    cases.update({"deep-graph.attnlab": "refused", "deep-metadata.attnlab": "refused",
                  "deep-config.attnlab": "refused", "deep-networks.attnlab": "refused"})
    return cases


# -------------------------------------------------------------------------- tests ---

def _run_worker(paths, timeout=600):
    env = dict(os.environ, PYTHONPATH=str(HERE.parents[2]), OMP_NUM_THREADS="1", MPLBACKEND="Agg")
    proc = subprocess.run([sys.executable, str(HERE), "worker", *map(str, paths)], env=env,
                          capture_output=True, text=True, timeout=timeout)
    reports = [json.loads(line[7:]) for line in proc.stdout.splitlines() if line.startswith("REPORT ")]
    assert proc.returncode == 0 and len(reports) == len(paths), proc.stderr[-3000:]
    return reports


def _check(report, expect):
    name = report["file"]
    assert report["events"] == [], f"{name}: a payload ran: {report['events']}"
    assert not Path(f"/tmp/{TOKEN}").exists(), f"{name}: the marker file was written"
    for step in ("load", "call"):
        assert not report[step].startswith("RAW"), f"{name}: {step} gave a raw error: {report[step]}"
    for cmd in ("analyze", "plot"):
        r = report[cmd]
        assert isinstance(r["rc"], int), f"{name}: attnlab {cmd} raised: {r['rc']}"
        assert "Traceback" not in r["err"], f"{name}: attnlab {cmd} printed a traceback"
    if expect == "refused":
        assert report["load"] != "ok", f"{name}: loaded, but should be refused"
        for cmd in ("analyze", "plot"):
            r = report[cmd]
            assert r["rc"] != 0, f"{name}: attnlab {cmd} exited 0"
            assert len(r["err"].strip().splitlines()) == 1, f"{name}: {cmd}: {r['err']!r}"
    if report["load"] != "ok":
        assert report["rss_over_import_mb"] <= RSS_BUDGET_MB, \
            f"{name}: peak RSS {report['rss_over_import_mb']:.0f} MB over the RSS at import"


def test_crafted_files_never_run_code_and_are_refused_cheaply(tmp_path):
    if Path(f"/tmp/{TOKEN}").exists():
        os.unlink(f"/tmp/{TOKEN}")
    cases = craft(tmp_path)
    paths = [tmp_path / n for n in cases]
    if SLOW:                                          # a fresh interpreter per file
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            reports = [r for rs in pool.map(lambda p: _run_worker([p]), paths) for r in rs]
    else:
        reports = _run_worker(paths)
    control = _run_worker(["<selftest>"])[0]
    assert control["events"] == ["compile", "exec", "os.system"], control
    loaded = [r["file"] for r in reports if r["load"] == "ok"]
    assert all(cases[n] == "any" for n in loaded)
    failures = []
    for report in reports:
        try:
            _check(report, cases[report["file"]])
        except AssertionError as e:
            failures.append(str(e).splitlines()[0])
    refused = sum(r["load"] != "ok" for r in reports)
    print(f"{len(reports)} crafted files, {refused} refused at load, peak RSS over import "
          f"{max(r['rss_over_import_mb'] for r in reports):.0f} MB; loaded (harmless data): "
          f"{', '.join(loaded)}")
    assert not failures, "\n".join(failures)


if __name__ == "__main__":
    if sys.argv[1:2] == ["worker"]:
        _worker(sys.argv[2:])
    elif sys.argv[1:2] == ["craft"]:
        print(json.dumps(craft(Path(sys.argv[2])), indent=1))
