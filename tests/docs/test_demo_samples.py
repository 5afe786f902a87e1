"""A demo's output folder holds the sample `attnlab view DIR` needs: the page of a demo folder
shows the attention of its model on one test item. Each demo's own sample writer runs on its
own data with an untrained network of the demo's architecture (training is not what is tested
here; tests/docs/test_demos.py runs the demos end to end)."""
import importlib.util
import json
import re

import numpy as np
import pytest

import attnlab as al
from attnlab.cli import main

NEEDS = {"digits": ["sklearn"], "vowels": ["sklearn", "sktime"], "forecast": ["statsmodels"],
         "roman": []}


def _page_data(path) -> dict:
    m = re.search(r'<script type="application/json" id="attnlab-data">(.*?)</script>',
                  path.read_text(encoding="utf-8"), re.S)
    assert m, "the page has no data element"
    return json.loads(m.group(1))


def _demo_folder(name, folder):
    """model.attnlab (untrained, the demo's architecture) and the demo's sample.npz; returns the
    attention layer the demo's figure shows."""
    folder.mkdir()
    if name == "digits":
        from attnlab.cli.demos import digits as D
        net, data = D.build_network(), al.datasets.digits(test_size=0.2, seed=D.SEED)
        written = D.save_sample(folder, data)
        layer = "self-attention"
    elif name == "vowels":
        from attnlab.cli.demos import vowels as D
        data = al.datasets.japanese_vowels()
        net = D.build_network()
        written = D.save_sample(folder, data, D.standardizer(data.X_train)(data.X_test))
        layer = "self-attention"
    elif name == "forecast":
        from attnlab.cli.demos import forecast as D
        s = al.datasets.co2(test_weeks=D.HORIZON)
        net = D.build_network()
        feats = D.Features(s.train[:-D.HORIZON], D.DRIFT)
        written = D.save_sample(folder, feats, s.train, s.train_dates)
        layer = "causal-attention1"
    else:
        from attnlab.cli.demos import roman as D
        data = al.datasets.roman_numerals()
        vocab = D.Vocab(data)
        net = D.build_network(source_vocab=len(vocab.source), target_vocab=len(vocab.target_chars))
        written = D.save_sample(folder, vocab, data)
        layer = "cross-attention"
    assert written == "sample.npz"
    net.initialize()
    net.save(folder / "model.attnlab")
    return layer


@pytest.mark.parametrize("name", sorted(NEEDS))
def test_attnlab_view_of_a_demo_folder_shows_the_attention_of_its_sample(name, tmp_path):
    missing = [p for p in NEEDS[name] if importlib.util.find_spec(p) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (pip install 'attnlab[data]')")
    folder = tmp_path / name
    layer = _demo_folder(name, folder)
    assert main(["view", str(folder), "-o", str(tmp_path / "page.html")]) == 0
    data = _page_data(tmp_path / "page.html")
    maps = {m["layer"]: m for m in data["attention"]}
    assert layer in maps, f"no attention of {layer!r} on the page: {sorted(maps)}"
    m = maps[layer]
    assert m["tq"] > 1 and m["tk"] > 1
    weights = np.array(m["weights"])                     # heads×Tq×Tk, rows sum to one
    assert weights.shape == (m["heads"], m["tq"], m["tk"])
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=2e-3)


def test_the_roman_sample_labels_the_attention_axes_with_its_tokens(tmp_path):
    folder = tmp_path / "roman"
    _demo_folder("roman", folder)
    with np.load(folder / "sample.npz", allow_pickle=False) as z:
        digits = [str(c) for c in z["labels:source"]]
        letters = [str(c) for c in z["labels:decoder-input"]]
        assert len(z["source"]) == len(digits) == 3
        assert len(z["decoder-input"]) == len(letters) and letters[0] == "<start>"
    assert main(["view", str(folder), "-o", str(tmp_path / "page.html")]) == 0
    [m] = [m for m in _page_data(tmp_path / "page.html")["attention"]
           if m["layer"] == "cross-attention"]
    assert m["key_labels"] == digits and m["query_labels"] == letters


def test_a_demo_folder_without_a_sample_shows_no_attention(tmp_path):
    # what the sample adds: without it the page has the graph only
    folder = tmp_path / "roman"
    _demo_folder("roman", folder)
    (folder / "sample.npz").unlink()
    assert main(["view", str(folder), "-o", str(tmp_path / "page.html")]) == 0
    assert not _page_data(tmp_path / "page.html").get("attention")
