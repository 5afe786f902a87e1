"""attnlab view: the page's data, its safety, the loopback server, the CLI, and (where Chromium
is installed) the page itself in a real headless browser."""
from __future__ import annotations

import html as html_mod
import json
import re
import threading
import urllib.error
import urllib.request

import numpy as np
import pytest
import torch

import attnlab as al
from attnlab import layers as L
from attnlab.cli import main
from attnlab.cli.demos.seed1 import answer_network, question_network
from attnlab.core.errors import ArgumentError, DataError
from attnlab.viz import view as V
from helpers import assert_page_clean

HOSTILE = "<img src=x onerror=alert(1)>"


def _data_of(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="attnlab-data">(.*?)</script>', page, re.S)
    assert m, "the page has no data element"
    return json.loads(m.group(1))


def _answer(heads=8, channels=256):
    torch.manual_seed(0)
    net = answer_network(channels=channels, heads=heads)
    net.initialize()
    return net


def _sample(tq=5, tk=7, seed=0):
    rng = np.random.default_rng(seed)
    return {"decoder-input": rng.standard_normal((tq, 1)).astype(np.float32),
            "encoder-input": rng.standard_normal((tk, 1)).astype(np.float32)}


def _hostile():
    net = al.Network()
    net.add([L.SequenceInput(4, name=HOSTILE), L.SelfAttention(2, 4, name="<!--<script>alert(2)"),
             L.Dense(3, name="&amp; '\"`${x}`")])
    return net


# --------------------------------------------------------------------------- the data ---

def test_data_has_a_node_per_layer_and_an_edge_per_connection():
    net = _answer(heads=2, channels=8)
    data = V.page_data(net)
    a = net.analyze()
    assert sorted(l["name"] for l in data["layers"]) == sorted(l.name for l in net.layers)
    assert len(data["edges"]) == len(net.connections)
    assert data["totals"]["learnables"] == a.total_learnables
    assert sum(l["count"] for l in data["layers"]) == a.total_learnables
    att = next(l for l in data["layers"] if l["name"] == "cross-attention")
    assert [p["port"] for p in att["inputs"]] == ["query", "key", "value"]
    assert [p["from"] for p in att["inputs"]] == ["query", "fc-key", "fc-value"]
    assert att["outputs"][0]["size"] == "B×T×8"
    assert att["outputs"][0]["labels"] == ["batch", "time", "channel"]
    q = next(l for l in data["layers"] if l["name"] == "query")
    assert {p["name"]: (p["shape"], p["count"]) for p in q["learnables"]} == \
        {"weight": ([8, 64], 512), "bias": ([8], 8)}
    # each edge is a move and whole cubic segments, inside the drawing
    w, h = data["size"]
    for e in data["edges"]:
        assert (len(e["points"]) - 1) % 3 == 0
        assert all(-1 <= x <= w + 1 and -1 <= y <= h + 1 for x, y in e["points"])


def test_layout_is_the_plot_layout():
    from attnlab.viz.graph import compute_layout
    net = question_network()
    lay = compute_layout(net)
    data = V.page_data(net)
    ranks = {n.name: n.rank for n in lay.nodes}
    assert {l["name"]: l["rank"] for l in data["layers"]} == ranks
    # the order within each rank is the layout's
    for names in lay.ranks:
        real = [n for n in names if n in ranks]
        xs = [next(l["x"] for l in data["layers"] if l["name"] == n) for n in real]
        assert xs == sorted(xs)


def test_cycle_and_issues_name_their_layers():
    net = question_network()
    data = V.page_data(net)
    cyc = data["cycles"][0]
    assert cyc[0] == "cross-attention" and "query" in cyc
    by = {l["name"]: l for l in data["layers"]}
    assert all(by[n]["in_cycle"] for n in cyc)
    assert not by["key"]["in_cycle"] and not by["key"]["issues"]   # named in the message only as a port
    cycle_issue = next(i for i, x in enumerate(data["issues"]) if x["kind"] == "cycle")
    assert all(cycle_issue in by[n]["issues"] for n in cyc)
    red = [e for e in data["edges"] if e["in_cycle"]]
    assert len(red) == len(cyc)
    below = next(i for i, x in enumerate(data["issues"]) if x["kind"] == "after-cycle")
    assert below in by["fc_out"]["issues"]


def test_attention_maps_are_the_layer_weights_and_leave_the_network_as_it_was():
    net = _answer(heads=2, channels=8)
    s = _sample(5, 7)
    x = {k: torch.as_tensor(v)[None] for k, v in s.items()}
    before = net(x).clone()
    maps = V.attention_maps(net, s)
    assert len(maps) == 1
    m = maps[0]
    assert (m["layer"], m["heads"], m["tq"], m["tk"]) == ("cross-attention", 2, 5, 7)
    w = np.asarray(m["weights"])
    assert w.shape == (2, 5, 7)
    np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-3)
    # the same weights as the twin network that outputs them
    twin = answer_network(channels=8, heads=2)
    twin.replace("cross-attention", L.Attention(2, name="cross-attention", has_scores_output=True))
    twin.initialize()
    twin.load_state_dict(net.state_dict())
    twin.eval()
    with torch.no_grad():
        ref = twin(x)["cross-attention/scores"][0].numpy()
    np.testing.assert_allclose(w, ref, atol=1e-4)
    # the hooks and the flags are gone: the network still gives its one output
    assert torch.equal(net(x), before)
    mod = net.layer_modules["cross-attention"]
    assert mod.scores is False and not mod._forward_hooks


def test_attention_axis_labels_come_from_the_input_tokens():
    net = _hostile()
    maps = V.attention_maps(net, np.zeros((3, 4), np.float32), labels={HOSTILE: ["a", "b", "c"]})
    assert maps[0]["query_labels"] == ["a", "b", "c"] and maps[0]["key_labels"] == ["a", "b", "c"]
    assert V.attention_maps(net, np.zeros((3, 4), np.float32))[0]["query_labels"] is None


def test_sample_errors_name_the_input_and_what_was_received():
    net = _answer(heads=2, channels=8)
    with pytest.raises(DataError, match=r"'encoder-input'.*it has 'decoder-input'"):
        V.attention_maps(net, {"decoder-input": np.zeros((3, 1))})
    with pytest.raises(DataError, match=r"one array, but the network has 2 inputs"):
        V.attention_maps(net, np.zeros((3, 1)))
    with pytest.raises(DataError, match=r"input 'encoder-input': expected B×T×1.*received 2×3×4×1"):
        V.attention_maps(net, {"decoder-input": np.zeros((3, 1)), "encoder-input": np.zeros((2, 3, 4, 1))})


def test_network_with_errors_gets_a_page_without_heatmaps():
    data = V.page_data(question_network(), sample=np.zeros((4, 1)))
    assert data["attention"] == [] and "errors" in data["attention_note"]


def test_read_sample_refuses_pickles(tmp_path):
    p = tmp_path / "s.npy"
    np.save(p, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(DataError, match="unpickling"):
        V.read_sample(p)
    with pytest.raises(DataError, match=r"expected a \.npy, \.npz, \.csv or \.txt file, "
                                        r"received '\.json'"):
        (tmp_path / "s.json").write_text("1")
        V.read_sample(tmp_path / "s.json")
    np.savez(tmp_path / "s.npz", **{"x": np.zeros((3, 2)), "labels:x": np.array(["a", "b", "c"])})
    arrays, labels = V.read_sample(tmp_path / "s.npz")
    assert list(arrays) == ["x"] and labels == {"x": ["a", "b", "c"]}


# ------------------------------------------------------------------ the page's safety ---

def test_page_is_self_contained_and_names_stay_data():
    net = _hostile()
    page = V.page_html(net, sample=np.zeros((3, 4)), title="</script><script>alert(3)</script>")
    # the raw names never appear as markup; the data element ends only once
    assert HOSTILE not in page and "<!--<script>" not in page
    assert page.count("</script>") == 2                     # the data element and the script
    assert "alert(3)</script>" not in page
    data = _data_of(page)
    assert {l["name"] for l in data["layers"]} == {HOSTILE, "<!--<script>alert(2)", "&amp; '\"`${x}`"}
    assert data["title"] == "</script><script>alert(3)</script>"
    # no URL to fetch: no src/href attributes at all, a CSP that forbids any request
    markup = re.sub(r"<script\b.*?</script>", "", page, flags=re.S)
    assert not re.search(r"\s(src|href)\s*=", markup, re.I)
    assert not re.search(r"@import|url\(", re.sub(r'url\(#arrow(-cycle)?\)', "", page))
    assert all(i["src"].startswith("data:image/png;base64,") for i in data["images"])
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', page).group(1)
    csp = html_mod.unescape(csp)
    assert "default-src 'none'" in csp and "unsafe-inline" not in csp and "img-src data:" in csp


def test_notebook_html_is_a_sandboxed_frame():
    out = V.notebook_html(_hostile())
    assert out.startswith('<iframe sandbox="allow-scripts" srcdoc="')
    assert "allow-same-origin" not in out and HOSTILE not in out and "<script" not in out
    srcdoc = html_mod.unescape(re.search(r'srcdoc="([^"]*)"', out).group(1))
    assert _data_of(srcdoc)["layers"][0]["name"] == HOSTILE


def test_view_returns_writes_or_serves(tmp_path):
    net = _answer(heads=2, channels=8)
    assert V.view(net).startswith("<!doctype html>")
    p = V.view(net, tmp_path / "page.html")
    assert p.read_text(encoding="utf-8").startswith("<!doctype html>")
    server = V.view(net, serve=True, open_browser=False, timeout=30)
    try:
        assert server.url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(server.url, timeout=10) as r:
            assert b"attnlab-data" in r.read()
    finally:
        server.stop()


# ------------------------------------------------------------------------- the server ---

def test_server_serves_one_page_on_loopback_only():
    with V.PageServer("<p>hello</p>", timeout=30) as s:
        assert s._server.server_address[0] == "127.0.0.1"
        with urllib.request.urlopen(s.url, timeout=10) as r:
            assert r.status == 200 and r.read() == b"<p>hello</p>"
            assert r.headers["Content-Type"].startswith("text/html")
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(s.url + "etc/passwd", timeout=10)
        assert e.value.code == 404
        # a page from elsewhere that points a name at 127.0.0.1 (DNS rebinding) is refused
        req = urllib.request.Request(s.url, headers={"Host": f"evil.example:{s.port}"})
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=10)
        assert e.value.code == 403
    with pytest.raises(urllib.error.URLError):               # stopped: nothing listens
        urllib.request.urlopen(s.url, timeout=2)


def test_server_stops_by_itself_after_its_timeout():
    s = V.PageServer("x", timeout=0.2).start()
    done = threading.Event()
    threading.Thread(target=lambda: (s.wait(), done.set()), daemon=True).start()
    assert done.wait(10)


def test_server_arguments_are_checked():
    with pytest.raises(ArgumentError, match=r"port must be an int in 0…65535, received 70000"):
        V.PageServer("x", port=70000)
    with pytest.raises(ArgumentError, match=r"timeout must be a positive number.*received -1"):
        V.PageServer("x", timeout=-1)


# --------------------------------------------------------------------------- the CLI ---

def test_cli_view_writes_the_page(tmp_path, capsys):
    net = _answer(heads=2, channels=8)
    net.save(tmp_path / "m.attnlab")
    np.savez(tmp_path / "s.npz", **_sample())
    assert main(["view", str(tmp_path / "m.attnlab"), "--input", str(tmp_path / "s.npz")]) == 0
    page = (tmp_path / "m.html").read_text(encoding="utf-8")
    data = _data_of(page)
    assert data["title"] == "m.attnlab" and data["attention"][0]["heads"] == 2
    assert "wrote" in capsys.readouterr().out


def test_cli_view_on_a_demo_folder(tmp_path):
    net = _answer(heads=2, channels=8)
    folder = tmp_path / "demo"
    folder.mkdir()
    net.save(folder / "model.attnlab")
    np.savez(folder / "sample.npz", **_sample())
    (folder / "history.json").write_text(json.dumps(
        {"epochs": {"epoch": [1, 2, 3], "loss": [1.0, 0.5, float("nan")], "val_loss": [1.1, None, 0.7]}}))
    (folder / "metrics.json").write_text(json.dumps({"test_accuracy": 0.9}))
    assert main(["view", str(folder), "-o", str(tmp_path / "p.html")]) == 0
    data = _data_of((tmp_path / "p.html").read_text(encoding="utf-8"))
    assert data["training"]["epochs"]["loss"] == [1.0, 0.5, None]
    assert data["metrics"] == {"test_accuracy": 0.9} and data["attention"]


def test_cli_view_errors(tmp_path, capsys):
    assert main(["view", str(tmp_path / "missing.attnlab")]) == 2
    assert "no such file" in capsys.readouterr().err
    _answer(heads=2, channels=8).save(tmp_path / "m.attnlab")
    assert main(["view", str(tmp_path / "m.attnlab"), "--input", str(tmp_path / "none.npy")]) == 2
    assert "--input: no such file" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["view", str(tmp_path / "m.attnlab"), "-o", "x.html", "--serve"])


# ------------------------------------------------------------------- in a real browser ---

def _open(browser, tmp_path, net, name, **kw):
    path = tmp_path / f"{name}.html"
    path.write_text(V.page_html(net, **kw), encoding="utf-8")
    page = browser.open(path)
    return page, path


def test_browser_graph_details_and_heatmap(browser, tmp_path):
    net = _answer(heads=4, channels=16)
    page, path = _open(browser, tmp_path, net, "answer", sample=_sample(5, 7), title="answer")
    assert page.eval("document.querySelectorAll('#nodes .node').length") == len(net.layers)
    assert page.eval("document.querySelectorAll('#edges path.edge').length") == len(net.connections)
    labels = page.eval("[...document.querySelectorAll('.port-label')].map(e => e.textContent)")
    assert sorted(labels) == ["key", "query", "value"]
    assert page.eval("document.getElementById('issue-heading').textContent") == "Issues: none"
    # a click on a layer fills the details panel
    page.click('.node[data-name="query"]')
    assert page.eval("document.getElementById('details-name').textContent") == "query"
    assert page.eval("document.getElementById('details-type').textContent") == "Dense"
    learn = page.eval("[...document.querySelectorAll('#details-learnables td')].map(e => e.textContent)")
    assert learn[:3] == ["weight", "16 × 64", "1,024"] and learn[-1] == "1,040"
    ins = page.eval("document.querySelector('#details-inputs tbody tr').textContent")
    assert "B×T×64" in ins and "batch × time × channel" in ins and "layernorm-decoder" in ins
    # the heatmap switches by head
    assert page.eval("document.getElementById('heatmap').dataset.head") == "0"
    assert page.eval("document.querySelectorAll('#attention-heads button').length") == 4
    before = page.eval("document.getElementById('heatmap').toDataURL()")
    page.click('#attention-heads button[data-head="2"]')
    assert page.eval("document.getElementById('heatmap').dataset.head") == "2"
    assert page.eval("document.getElementById('heatmap').toDataURL()") != before
    assert "head 2 of 4" in page.eval("document.getElementById('attention-caption').textContent")
    # the table sorts by a column, both ways
    page.click('#analysis-table th[data-key="count"]')
    counts = page.eval("[...document.querySelectorAll('#analysis-table tbody tr td:nth-child(5)')]"
                       ".map(e => Number(e.textContent.replace(/,/g, '')))")
    assert counts == sorted(counts)
    page.click('#analysis-table th[data-key="count"]')
    counts = page.eval("[...document.querySelectorAll('#analysis-table tbody tr td:nth-child(5)')]"
                       ".map(e => Number(e.textContent.replace(/,/g, '')))")
    assert counts == sorted(counts, reverse=True)
    # search by name
    page.type_text("#search", "lstm")
    assert page.eval("document.querySelectorAll('.node.match').length") == 2
    page.screenshot(tmp_path / "answer.png", full_page=True)
    assert_page_clean(page, path)


def test_browser_cycle_in_red_with_the_issue_text(browser, tmp_path):
    net = question_network()
    page, path = _open(browser, tmp_path, net, "question")
    a = net.analyze()
    cyc = a.cycles[0]
    assert page.eval("document.querySelectorAll('#issue-list li').length") == len(a.issues)
    assert "cycle: cross-attention" in page.eval("document.querySelector('#issue-list li.error').textContent")
    red = page.eval("[...document.querySelectorAll('.node.bad')].map(e => e.dataset.name)")
    assert sorted(red) == sorted(cyc)
    assert page.eval("document.querySelectorAll('path.edge.cycle').length") == len(cyc)
    colour = page.eval("getComputedStyle(document.querySelector('path.edge.cycle')).stroke")
    assert colour == "rgb(214, 39, 40)"
    page.click('.node[data-name="lstm_decoder"]')
    assert "cycle: cross-attention" in page.eval("document.getElementById('details-issues').textContent")
    assert_page_clean(page, path)


def test_browser_hostile_names_stay_text(browser, tmp_path):
    page, path = _open(browser, tmp_path, _hostile(), "hostile", sample=np.zeros((3, 4)),
                       title="</script><script>alert(3)</script>")
    names = page.eval("[...document.querySelectorAll('#nodes .node')].map(e => e.dataset.name)")
    assert HOSTILE in names
    assert page.eval("document.querySelectorAll('img, iframe, object, embed').length") == 0
    assert page.eval("document.getElementById('title').textContent") == "</script><script>alert(3)</script>"
    page.click(f'.node[data-name="{HOSTILE}"]')
    assert page.eval("document.getElementById('details-name').textContent") == HOSTILE
    assert_page_clean(page, path)


def test_browser_training_curves(browser, tmp_path):
    hist = {"epochs": {"epoch": [1, 2, 3], "loss": [1.0, 0.6, 0.4], "val_loss": [1.2, 0.8, 0.7],
                       "accuracy": [0.3, 0.6, 0.8], "val_accuracy": [None, None, None]}}
    page, path = _open(browser, tmp_path, _answer(heads=2, channels=8), "curves", training=hist)
    assert page.eval("document.getElementById('training').hidden") is False
    assert page.eval("document.querySelectorAll('#training-charts svg.chart').length") == 2
    assert page.eval("document.querySelectorAll('#training-charts path.series').length") == 3
    assert_page_clean(page, path)
