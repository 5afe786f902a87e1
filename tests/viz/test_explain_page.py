"""The explanations of a page (attnlab.viz.page_explain): the target, the attributions, the
logit lens and head ablation as data, equal to what attnlab.explain and net.trace give; and
(where Chromium is installed) the explanations panel in a real headless browser."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch

import attnlab as al
from attnlab import layers as L
from attnlab.cli import main
from attnlab.cli.demos.seed1 import answer_network
from attnlab.core.errors import ArgumentError, AttnlabError, DataError
from attnlab.viz import view as V
from attnlab.viz.page_attention import attention_modules, sample_inputs
from attnlab.viz.page_explain import choose_target, explanations, head_ablation
from helpers import assert_page_clean
from pretrained_helpers import quiet_transformers, save_checkpoint

IDS = np.array([3, 17, 5, 9, 30, 2], dtype=np.int64)


def _data_of(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="attnlab-data">(.*?)</script>', page, re.S)
    assert m, "the page has no data element"
    return json.loads(m.group(1))


@pytest.fixture(scope="module")
def gpt2_folder(tmp_path_factory):
    """A tiny GPT-2 written by transformers (random weights, nothing downloaded)."""
    transformers = quiet_transformers()
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=40,
                                     n_positions=32)
    return save_checkpoint(transformers.GPT2LMHeadModel(config),
                           tmp_path_factory.mktemp("ckpt") / "tiny-gpt2")


def _classifier():
    """Self-attention over a sequence, pooled, then scores of 3 classes (B×3)."""
    torch.manual_seed(0)
    net = al.Network([L.SequenceInput(4, name="x"), L.SelfAttention(2, 8, name="attention"),
                      L.GlobalAvgPool1d(), L.Dense(3, name="fc")])
    net.initialize()
    return net


def _images():
    torch.manual_seed(0)
    net = al.Network([L.ImageInput((1, 8, 8), name="image"),
                      L.ImageToSequence(patch_size=2, name="patches"),
                      L.SelfAttention(2, 8, name="attention"), L.GlobalAvgPool1d(),
                      L.Dense(10, name="fc")])
    net.initialize()
    return net


X = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)


# ------------------------------------------------------------------------- the target ---

def test_target_is_the_predicted_class_at_the_last_position_or_the_one_given():
    net = _classifier()
    inputs = sample_inputs(net, X)
    scores = net(inputs)[0]
    t = choose_target(net, inputs)
    assert (t.output, t.position, t.index) == ("fc", None, int(scores.argmax()))
    assert choose_target(net, inputs, 2).index == 2
    with pytest.raises(ArgumentError, match=r"--target 3: output 'fc' has 3 classes; give one "
                                            r"in 0…2"):
        choose_target(net, inputs, 3)
    seq = al.Network([L.SequenceInput(4, name="x"), L.SelfAttention(2, 8), L.Dense(6)])
    seq.initialize()
    t = choose_target(seq, sample_inputs(seq, X))
    assert (t.position, t.classes) == (4, 6) and t.argument == (4, t.index)


def test_token_ids_stay_integers_and_fractions_are_refused(gpt2_folder):
    net = al.from_pretrained(gpt2_folder)
    inputs = sample_inputs(net, IDS)
    assert inputs["input_ids"].dtype == torch.int64 and inputs["input_ids"].shape == (1, 6)
    with pytest.raises(DataError, match=r"input 'input_ids' takes token ids, but the sample "
                                        r"has numbers that are not whole"):
        sample_inputs(net, IDS + 0.5)


# ---------------------------------------------------------------------- head ablation ---

def test_head_ablation_equals_zeroing_the_heads_value_by_hand():
    net = _classifier()
    net.eval()
    inputs = sample_inputs(net, X)
    target = choose_target(net, inputs)
    table = head_ablation(net, inputs, target)
    [row] = table["layers"]
    assert row["layer"] == "attention" and row["heads"] == 2
    with torch.no_grad():
        base = float(net(inputs)[0, target.index])
        assert table["baseline"] == pytest.approx(base, rel=1e-5)
        weight, bias = net.learnables["attention/value.weight"], \
            net.learnables["attention/value.bias"]
        saved = weight.clone(), bias.clone()
        for h in range(2):                  # a head's values 0 → its output 0, as the patch
            weight[4 * h:4 * h + 4] = 0
            bias[4 * h:4 * h + 4] = 0
            by_hand = float(net(inputs)[0, target.index]) - base
            weight.copy_(saved[0])
            bias.copy_(saved[1])
            assert row["effects"][h] == pytest.approx(by_hand, rel=1e-4, abs=1e-6)
    assert all(c > 0 for c in row["output_change"])


def test_head_ablation_on_gpt2_covers_every_head_and_leaves_the_network_as_it_was(gpt2_folder):
    net = al.from_pretrained(gpt2_folder)
    inputs = sample_inputs(net, IDS)
    with torch.no_grad():
        before = net(inputs)
    table = head_ablation(net, inputs, choose_target(net, inputs))
    assert [(r["layer"], r["heads"], len(r["effects"])) for r in table["layers"]] == \
        [("h.0.attn", 4, 4), ("h.1.attn", 4, 4)]
    assert any(abs(e) > 0 for r in table["layers"] for e in r["effects"])
    with torch.no_grad():
        assert torch.equal(net(inputs), before)
    assert all(module.probe is None for *_, module in attention_modules(net))


# ------------------------------------------------------ the methods, as explain gives ---

def test_causal_lm_explanations_are_explains_results(gpt2_folder):
    net = al.from_pretrained(gpt2_folder)
    inputs = sample_inputs(net, IDS)
    ex = explanations(net, IDS, {"input_ids": [f"w{i}" for i in IDS]}, steps=32, strict=True)
    assert ex["target"]["position"] == 5 and ex["notes"] == []
    assert ex["inputs"]["input_ids"] == {"kind": "tokens",
                                         "labels": [f"w{i}" for i in IDS]}
    by = {a["method"]: a for a in ex["attributions"]}
    rollout = al.explain.rollout(net, inputs).values[0, 5]
    assert by["rollout"]["values"] == pytest.approx(rollout.tolist(), rel=1e-5)
    assert by["rollout"]["labels"] == [f"w{i}" for i in IDS]
    ig = al.explain.integrated_gradients(net, inputs, (5, ex["target"]["index"]), steps=32)
    assert by["ig"]["values"] == pytest.approx(ig.values[0].tolist(), rel=1e-4, abs=1e-7)
    assert sum(by["ig"]["values"]) == pytest.approx(float(ig.delta[0]), rel=0.01)
    lens = al.explain.logit_lens(net, inputs)
    top = lens.logits[:, 0].argmax(-1)                            # blocks×T
    assert [[int(c["token"]) for c in row] for row in ex["lens"]["top"]] == top.tolist()
    with torch.no_grad():                                         # the last block: the logits
        assert top[-1].tolist() == net(inputs)[0].argmax(-1).tolist()
    assert ex["lens"]["blocks"] == ["h.0", "h.1"]
    assert [r["layer"] for r in ex["heads"]["layers"]] == ["h.0.attn", "h.1.attn"]


def test_the_python_page_takes_methods_by_name_or_as_one_string(tmp_path):
    net = _classifier()
    data = V.page_data(net, sample=X, methods="rollout,heads")["explanations"]
    assert [a["method"] for a in data["attributions"]] == ["rollout"] and data["heads"]
    page = net.view(tmp_path / "p.html", sample=X, methods=["ig"])
    assert ">attnlab view · self-contained" in page.read_text(encoding="utf-8")
    ex = _data_of(page.read_text(encoding="utf-8"))["explanations"]
    assert [a["method"] for a in ex["attributions"]] == ["ig"]
    with pytest.raises(ArgumentError, match=r"methods: unknown method 'saliency'; choose from "
                                            r"rollout, ig, lens, heads or all"):
        V.page_data(net, sample=X, methods=("ig", "saliency"))


def test_the_lens_of_a_long_input_shows_its_last_positions(gpt2_folder, monkeypatch):
    from attnlab.viz import page_explain
    monkeypatch.setattr(page_explain, "MAX_LENS_POSITIONS", 4)
    net = al.from_pretrained(gpt2_folder)
    lens = explanations(net, IDS, methods=("lens",), strict=True)["lens"]
    assert lens["positions"] == [str(i) for i in IDS[2:]]
    full = al.explain.logit_lens(net, sample_inputs(net, IDS)).logits[:, 0].argmax(-1)
    assert [[c["id"] for c in row] for row in lens["top"]] == full[:, 2:].tolist()
    assert lens["caption"].endswith("The last 4 of its 6 positions.")


def test_image_attributions_are_grids_and_the_lens_a_note():
    net = _images()
    image = np.random.default_rng(1).standard_normal((1, 8, 8)).astype(np.float32)
    ex = explanations(net, image, steps=16)
    by = {a["method"]: a for a in ex["attributions"]}
    assert by["ig"]["size"] == [8, 8] and len(by["ig"]["values"]) == 64
    assert by["ig"]["kind"] == "image" and by["ig"]["signed"] is True
    assert by["rollout"]["size"] == [4, 4] and len(by["rollout"]["values"]) == 16
    assert "the mean of its rows, which 'gap' averages" in by["rollout"]["caption"]
    assert ex["lens"] is None
    [note] = ex["notes"]
    assert note.startswith("logit lens: ") and "causal language model" in note
    with pytest.raises(AttnlabError, match="causal language model"):
        explanations(net, image, methods=("lens",), strict=True)


def test_a_classifier_is_explained_at_the_step_it_reads(tmp_path):
    # BERT's classifier reads the first token ('pooler.first', an Index1d); ViT's its class
    # token, which comes before the image's patches
    transformers = quiet_transformers()
    torch.manual_seed(0)
    small = dict(num_hidden_layers=2, num_attention_heads=4, intermediate_size=37)
    bert = save_checkpoint(transformers.BertForSequenceClassification(transformers.BertConfig(
        hidden_size=32, vocab_size=50, max_position_embeddings=64, num_labels=3, **small)),
        tmp_path / "bert")
    vit = save_checkpoint(transformers.ViTForImageClassification(transformers.ViTConfig(
        hidden_size=32, image_size=16, patch_size=4, num_channels=3, num_labels=5, **small)),
        tmp_path / "vit")
    net = al.from_pretrained(bert)
    ids = np.array([2, 7, 9, 4, 1])                      # token_type_ids left out: zeros
    [a] = explanations(net, ids, methods=("rollout",), strict=True)["attributions"]
    assert "the row of position 0, which 'pooler.first' takes" in a["caption"]
    rollout = al.explain.rollout(net, {"input_ids": torch.as_tensor(ids)[None]}).values[0, 0]
    assert a["values"] == pytest.approx(rollout.tolist(), rel=1e-5)
    with pytest.raises(DataError, match=r"the sample holds 'attention_mask', but a sample is "
                                        r"one item without padding"):
        explanations(net, {"input_ids": ids, "attention_mask": np.ones(5)})
    net = al.from_pretrained(vit)
    image = np.random.default_rng(0).standard_normal((3, 16, 16)).astype(np.float32)
    [a] = explanations(net, image, methods=("rollout",), strict=True)["attributions"]
    row = al.explain.rollout(net, torch.as_tensor(image)[None]).values[0, 0]
    assert a["size"] == [4, 4] and a["values"] == pytest.approx(row[1:].tolist(), rel=1e-5)
    assert f"The class token before the patches holds {float(row[0]):.3g}" in a["caption"]


def test_rollout_through_a_max_pooling_says_it_shows_the_mean():
    net = al.Network([L.SequenceInput(4, name="x"), L.SelfAttention(2, 8, name="attention"),
                      L.GlobalMaxPool1d(name="gmp"), L.Dense(3, name="fc")])
    net.initialize()
    [a] = explanations(net, X, methods=("rollout",), strict=True)["attributions"]
    assert "the mean over its 5 positions (the output reads them through 'gmp' " \
           "(GlobalMaxPool1d), so no one row is the target's)" in a["caption"]
    rollout = al.explain.rollout(net, sample_inputs(net, X)).values[0].mean(0)
    assert a["values"] == pytest.approx(rollout.tolist(), rel=1e-5)


def test_a_network_of_two_inputs_attributes_the_first_and_rolls_out_the_keys():
    torch.manual_seed(0)
    net = answer_network(channels=8, heads=2)
    net.initialize()
    rng = np.random.default_rng(0)
    sample = {"decoder-input": rng.standard_normal((4, 1)).astype(np.float32),
              "encoder-input": rng.standard_normal((6, 1)).astype(np.float32)}
    ex = explanations(net, sample, methods=("rollout", "ig"), steps=16, strict=True)
    by = {a["method"]: a for a in ex["attributions"]}
    assert by["rollout"]["input"] == "encoder-input" and len(by["rollout"]["values"]) == 6
    assert sum(by["rollout"]["values"]) == pytest.approx(1.0, abs=1e-4)
    assert by["ig"]["input"] == "decoder-input" and by["ig"]["kind"] == "time"
    assert "held as given" in by["ig"]["caption"]


# ---------------------------------------------------------------------- the commands ---

def test_cli_explain_writes_every_method_of_a_hugging_face_folder(gpt2_folder, tmp_path,
                                                                   capsys):
    np.savez(tmp_path / "ids.npz", input_ids=IDS,
             **{"labels:input_ids": np.array([f"w{i}" for i in IDS])})
    out = tmp_path / "page.html"
    assert main(["explain", str(gpt2_folder), "--input", str(tmp_path / "ids.npz"),
                 "--steps", "16", "--target", "7", "-o", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    text = out.read_text(encoding="utf-8")
    assert "· attnlab explain</title>" in text and ">attnlab explain · self-contained" in text
    ex = _data_of(text)["explanations"]
    assert ex["target"]["index"] == 7
    assert [a["method"] for a in ex["attributions"]] == ["rollout", "ig"]
    assert ex["lens"]["positions"] == [f"w{i}" for i in IDS] and ex["heads"]["layers"]
    assert main(["explain", str(gpt2_folder), "--input", str(tmp_path / "ids.npz"),
                 "--method", "heads", "-o", str(out)]) == 0
    ex = _data_of(out.read_text(encoding="utf-8"))["explanations"]
    assert ex["attributions"] == [] and ex["lens"] is None and ex["heads"]


def test_cli_shows_token_ids_through_the_folders_tokenizer_vocabulary(gpt2_folder, tmp_path,
                                                                       capsys):
    import shutil

    from tokenizers import Tokenizer, models
    chars = "abcdefghijklmnopqrstuvwxyz0123456789.,!?"                 # 40 tokens, one an id
    folder = tmp_path / "gpt2-with-tokenizer"
    shutil.copytree(gpt2_folder, folder)
    Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(chars)}, merges=[])).save(
        str(folder / "tokenizer.json"))
    np.save(tmp_path / "ids.npy", IDS)
    out = tmp_path / "page.html"
    assert main(["explain", str(folder), "--input", str(tmp_path / "ids.npy"), "--method",
                 "lens", "-o", str(out)]) == 0
    data = _data_of(out.read_text(encoding="utf-8"))
    words = [chars[i] for i in IDS]
    assert data["explanations"]["inputs"]["input_ids"]["labels"] == words
    assert data["explanations"]["lens"]["positions"] == words
    top = data["explanations"]["lens"]["top"]
    assert all(c["token"] == chars[c["id"]] for row in top for c in row)
    target = data["explanations"]["target"]
    assert target["text"].endswith(f"(token {chars[target['index']]!r})")
    assert data["attention"][0]["query_labels"] == words               # the heatmaps' axes too
    assert main(["view", str(folder), "--input", str(tmp_path / "ids.npy"), "--method", "none",
                 "-o", str(out)]) == 0
    assert _data_of(out.read_text(encoding="utf-8"))["attention"][0]["key_labels"] == words
    (folder / "tokenizer.json").write_text("{not json")                 # ids stay ids, said so
    capsys.readouterr()
    assert main(["explain", str(folder), "--input", str(tmp_path / "ids.npy"), "--method",
                 "lens", "-o", str(out)]) == 0
    assert "tokenizer.json is not JSON" in capsys.readouterr().out
    lens = _data_of(out.read_text(encoding="utf-8"))["explanations"]["lens"]
    assert lens["positions"] == [str(i) for i in IDS]


def test_cli_reads_text_through_the_folders_tokenizer(gpt2_folder, tmp_path, capsys):
    import shutil

    from tokenizers import Tokenizer, models
    chars = "abcdefghijklmnopqrstuvwxyz0123456789.,!?"
    folder = tmp_path / "gpt2-with-tokenizer"
    shutil.copytree(gpt2_folder, folder)
    Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(chars)}, merges=[])).save(
        str(folder / "tokenizer.json"))
    (tmp_path / "prompt.txt").write_text("hello!\n")
    out = tmp_path / "page.html"
    assert main(["explain", str(folder), "--input", str(tmp_path / "prompt.txt"), "--method",
                 "rollout,lens", "-o", str(out)]) == 0
    ex = _data_of(out.read_text(encoding="utf-8"))["explanations"]
    assert ex["inputs"]["input_ids"]["labels"] == list("hello!")
    assert ex["target"]["position"] == 5 and len(ex["attributions"][0]["values"]) == 6
    # the same ids as a .npy give the same numbers
    np.save(tmp_path / "ids.npy", np.array([chars.index(c) for c in "hello!"]))
    assert main(["explain", str(folder), "--input", str(tmp_path / "ids.npy"), "--method",
                 "rollout,lens", "-o", str(tmp_path / "ids.html")]) == 0
    by_ids = _data_of((tmp_path / "ids.html").read_text(encoding="utf-8"))["explanations"]
    assert by_ids["attributions"][0]["values"] == ex["attributions"][0]["values"]
    # text needs a tokenizer: a folder without one, or a saved network, is refused by name
    capsys.readouterr()
    assert main(["explain", str(gpt2_folder), "--input", str(tmp_path / "prompt.txt")]) == 2
    assert "text needs the tokenizer of the model: a Hugging Face model folder with a " \
           f"tokenizer.json ('{gpt2_folder}' has none)" in capsys.readouterr().err
    _classifier().save(tmp_path / "m.attnlab")
    assert main(["view", str(tmp_path / "m.attnlab"), "--input",
                 str(tmp_path / "prompt.txt")]) == 2
    assert "Give the token ids instead, as .npy or .npz" in capsys.readouterr().err


def test_cli_explain_names_the_method_that_does_not_apply(tmp_path, capsys):
    net = _classifier()
    net.save(tmp_path / "m.attnlab")
    np.save(tmp_path / "x.npy", X)
    assert main(["explain", str(tmp_path / "m.attnlab"), "--input", str(tmp_path / "x.npy"),
                 "--method", "lens"]) == 2
    assert "causal language model" in capsys.readouterr().err
    assert main(["explain", str(tmp_path / "m.attnlab"), "--input", str(tmp_path / "x.npy"),
                 "--steps", "8"]) == 0
    printed = capsys.readouterr().out
    assert "note: logit lens: " in printed and f"wrote {tmp_path / 'm.explain.html'}" in printed
    assert main(["explain", str(tmp_path / "m.attnlab"), "--input", str(tmp_path / "x.npy"),
                 "--target", "5"]) == 2
    assert "--target 5: output 'fc' has 3 classes" in capsys.readouterr().err


def test_cli_explain_and_view_on_a_demo_folder(tmp_path):
    folder = tmp_path / "demo"
    folder.mkdir()
    _classifier().save(folder / "model.attnlab")
    np.savez(folder / "sample.npz", x=X)
    assert main(["explain", str(folder), "--method", "rollout,heads"]) == 0
    ex = _data_of((folder / "explain.html").read_text(encoding="utf-8"))["explanations"]
    assert [a["method"] for a in ex["attributions"]] == ["rollout"] and ex["heads"]
    assert main(["view", str(folder)]) == 0              # by default the two cheap ones
    ex = _data_of((folder / "view.html").read_text(encoding="utf-8"))["explanations"]
    assert [a["method"] for a in ex["attributions"]] == ["rollout"] and ex["heads"] is None
    assert [n.split(":")[0] for n in ex["notes"]] == ["logit lens"]
    assert main(["view", str(folder), "--method", "ig"]) == 0
    ex = _data_of((folder / "view.html").read_text(encoding="utf-8"))["explanations"]
    assert [a["method"] for a in ex["attributions"]] == ["ig"]
    assert main(["view", str(folder), "--method", "none"]) == 0
    assert _data_of((folder / "view.html").read_text(encoding="utf-8"))["explanations"] is None


# ------------------------------------------------------------------- in a real browser ---

def test_browser_explain_page_of_a_causal_lm(browser, gpt2_folder, tmp_path):
    np.savez(tmp_path / "ids.npz", input_ids=IDS,
             **{"labels:input_ids": np.array(["<b>", "the", "cat", "sat", "on", "</script>"])})
    out = tmp_path / "explain.html"
    assert main(["explain", str(gpt2_folder), "--input", str(tmp_path / "ids.npz"),
                 "--steps", "16", "-o", str(out)]) == 0
    data = _data_of(out.read_text(encoding="utf-8"))["explanations"]
    page = browser.open(out)
    assert page.eval("document.getElementById('explanations').hidden") is False
    assert "at position 5" in page.eval("document.getElementById('explain-target').textContent")
    for method in ("rollout", "ig"):
        chips = page.eval(f"[...document.querySelectorAll('.attribution[data-method=\"{method}\"]"
                          " .chip')].map(e => [e.textContent, Number(e.dataset.value)])")
        want = next(a for a in data["attributions"] if a["method"] == method)
        assert [c[0] for c in chips] == ["<b>", "the", "cat", "sat", "on", "</script>"]
        assert [c[1] for c in chips] == pytest.approx(want["values"])
    # the largest rollout share is the reddest chip
    reds = page.eval("[...document.querySelectorAll('.attribution[data-method=\"rollout\"] "
                     ".chip')].map(e => getComputedStyle(e).backgroundColor)")
    rollout = next(a for a in data["attributions"] if a["method"] == "rollout")["values"]
    greens = [int(re.findall(r"\d+", c)[1]) for c in reds]
    assert greens.index(min(greens)) == int(np.argmax(rollout))
    cells = page.eval("[...document.querySelectorAll('#heads-table tr')].map(r => "
                      "[...r.children].map(c => c.textContent))")
    assert cells[0] == ["layer", "head 0", "head 1", "head 2", "head 3"]
    assert [r[0] for r in cells[1:]] == ["h.0.attn", "h.1.attn"]
    assert float(cells[1][3]) == pytest.approx(data["heads"]["layers"][0]["effects"][2],
                                               abs=1e-3)
    lens = page.eval("[...document.querySelectorAll('#lens-table tr')].map(r => "
                     "[...r.children].map(c => c.textContent))")
    assert lens[0][1:] == ["<b>", "the", "cat", "sat", "on", "</script>"]
    assert [r[0] for r in lens[1:]] == ["h.0", "h.1"]
    assert lens[2][1:] == [c["token"] for c in data["lens"]["top"][1]]
    assert page.eval("document.querySelectorAll('#explain-notes li').length") == 0
    assert page.eval("document.title").endswith(" · attnlab explain")
    assert_page_clean(page, out)


def test_browser_view_page_shows_image_explanations_and_notes(browser, tmp_path):
    net = _images()
    image = np.random.default_rng(1).standard_normal((1, 8, 8)).astype(np.float32)
    path = tmp_path / "view.html"
    path.write_text(V.page_html(net, sample=image, methods=("rollout", "ig", "lens"), steps=8),
                    encoding="utf-8")
    page = browser.open(path)
    grids = page.eval("[...document.querySelectorAll('.attribution canvas')].map(c => "
                      "[c.closest('.attribution').dataset.method, c.width / c.height])")
    assert grids == [["rollout", 1], ["ig", 1]]
    notes = page.eval("[...document.querySelectorAll('#explain-notes li')].map(e => e.textContent)")
    assert len(notes) == 1 and notes[0].startswith("logit lens: ")
    assert page.eval("document.getElementById('explain-heads').children.length") == 0
    assert_page_clean(page, path)
    plain = tmp_path / "plain.html"
    plain.write_text(V.page_html(net, sample=image), encoding="utf-8")
    page = browser.open(plain)
    assert page.eval("document.getElementById('explanations').hidden") is True
    assert_page_clean(page, plain)


def test_browser_a_long_time_series_gets_one_bar_per_step(browser, tmp_path):
    net = _classifier()
    x = np.random.default_rng(2).standard_normal((60, 4)).astype(np.float32)
    path = V.view(net, tmp_path / "series.html", sample=x, methods=("rollout", "ig"))
    page = browser.open(path)
    for method in ("rollout", "ig"):
        bars = page.eval(f"[...document.querySelectorAll('.attribution[data-method=\"{method}\"]"
                         " rect.bar')].map(r => r.querySelector('title').textContent)")
        assert len(bars) == 60 and bars[0].startswith("0: ") and bars[59].startswith("59: ")
    # signed attributions go both ways: red bars up, blue bars down
    assert page.eval("document.querySelectorAll('.attribution[data-method=\"ig\"] "
                     "rect.bar.neg').length") > 0
    assert page.eval("document.title").endswith(" · attnlab view")
    assert_page_clean(page, path)
