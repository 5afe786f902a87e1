"""Pictures: the network plot (layout and drawing), Jupyter reprs, attention heatmaps."""
import sys
from pathlib import Path

import matplotlib
import pytest
import torch

import attnlab as al
from attnlab import layers as L
from attnlab.cli.demos.seed1 import answer_network, question_network
from attnlab.viz.graph import (_CYCLE, _crossings, _links, compute_layout, network_png,
                               network_svg, plot_network)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))   # the repository's tools
from gallery import attention_example, transformer_network  # noqa: E402

matplotlib.use("Agg")


def _texts(fig):
    return [t.get_text() for ax in fig.axes for t in ax.texts]


def _check_layout(net, direction="TB"):
    """No two boxes overlap in a rank, every link joins adjacent ranks, and no links cross."""
    lay = compute_layout(net, direction=direction)
    nodes = {n.name: n for n in lay.nodes}
    nodes.update(lay.virtual)
    from attnlab.viz.graph import _box_size
    for names in lay.ranks:
        spans = []
        for n in names:
            w = _box_size(nodes[n], True, direction)[0 if direction == "TB" else 1] \
                if n in net._layers else 0.12
            spans.append((nodes[n].pos - w / 2, nodes[n].pos + w / 2))
        for (a0, a1), (b0, b1) in zip(spans, spans[1:]):
            assert b0 >= a1 + 0.3 - 1e-6, (names, spans)
    links = _links(lay.edges)
    by_rank = {}
    for a, b, oa, ob in links:
        assert nodes[b].rank == nodes[a].rank + 1
        by_rank.setdefault(nodes[a].rank, []).append((a, b, oa, ob))
    crossings = sum(_crossings(lay.ranks[r], lay.ranks[r + 1], by_rank.get(r, []))
                    for r in range(len(lay.ranks) - 1))
    return lay, crossings


def test_seed1_answer_picture_labels_ports_and_sizes(tmp_path):
    net = answer_network()
    lay, crossings = _check_layout(net)
    assert crossings == 0
    fig = plot_network(net)
    texts = _texts(fig)
    assert {"query", "key", "value"} <= set(texts)            # ports of the multi-input layer
    assert "Attention  ·  B×T×256" in texts
    assert not any(t.startswith("cycle") for t in texts)
    matplotlib.pyplot.close(fig)
    fig = plot_network(net, sizes=False, direction="LR")
    assert "Attention" in _texts(fig) and not any("B×T" in t for t in _texts(fig))
    matplotlib.pyplot.close(fig)
    path = tmp_path / "answer.png"
    net.plot(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 20_000
    net.plot(tmp_path / "answer.svg")
    assert (tmp_path / "answer.svg").read_text().lstrip().startswith("<?xml")


def test_seed1_question_picture_draws_the_cycle_in_red():
    net = question_network()
    lay, crossings = _check_layout(net)
    assert crossings == 0
    assert sum(e.in_cycle for e in lay.edges) == 4
    (back,) = [e for e in lay.edges if e.reversed]
    assert (back.source, back.destination, back.port) == ("query", "cross-attention", "query")
    fig = plot_network(net)
    assert "cycle: cross-attention → layernorm → lstm_decoder → query → cross-attention" in _texts(fig)
    red = [p for p in fig.axes[0].patches
           if matplotlib.colors.to_hex(p.get_edgecolor()) == _CYCLE]
    assert len(red) == 4 + 4                                   # four edges, four boxes
    matplotlib.pyplot.close(fig)


@pytest.mark.parametrize("direction", ["TB", "LR"])
def test_a_60_layer_network_is_laid_out_without_overlaps_or_crossings(tmp_path, direction):
    net = transformer_network()
    assert len(net.layers) >= 60
    lay, crossings = _check_layout(net, direction)
    assert crossings == 0
    assert len(lay.ranks) == 54
    path = tmp_path / f"big-{direction}.png"
    net.plot(path, direction=direction, dpi=40)
    assert path.stat().st_size > 10_000


def test_networks_without_sizes_nested_networks_and_self_loops():
    inner = al.Network([L.Dense(4, name="fc"), L.ReLU()], name="block")
    net = al.Network([L.Dense(8, name="a"), inner, L.Addition(2, name="add")])
    net.connect("a", "add/in2")
    fig = plot_network(net)                          # no input layers, never run: no sizes
    texts = _texts(fig)
    assert "Network · 2 layers" in texts and "in1" in texts and "in2" in texts
    matplotlib.pyplot.close(fig)
    loop = al.Network([L.SequenceInput(3, name="x"), L.Addition(2, name="add")])
    loop.connect("add", "add/in2")                  # a layer feeding itself
    fig = plot_network(loop)
    assert any(t.startswith("cycle") for t in _texts(fig))
    matplotlib.pyplot.close(fig)


def test_jupyter_reprs():
    net = answer_network(channels=16, heads=2)
    png = network_png(net)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    svg = network_svg(net)
    assert "<svg" in svg and "cross-attention" in svg
    assert network_png(al.Network()) is None and network_svg(al.Network()) is None
    assert not matplotlib.pyplot.get_fignums()               # nothing left open
    assert "<table>" in net.analyze()._repr_html_()


def test_to_dot_keeps_ports_and_cycles():
    dot = answer_network().to_dot()
    assert '"fc-key" -> "cross-attention" [label="key"]' in dot
    dot = question_network().to_dot()
    assert '"query" -> "cross-attention" [label="query", color="red"]' in dot


def test_plot_attention_heads_labels_and_errors(tmp_path):
    w, tokens = attention_example()
    fig = al.plot_attention(w, tokens, tokens)
    images = [ax for ax in fig.axes if ax.images]
    assert [ax.get_title() for ax in images] == ["head 0", "head 1"]
    assert [t.get_text() for t in images[0].get_xticklabels()] == tokens
    matplotlib.pyplot.close(fig)
    path = tmp_path / "att.png"
    assert al.plot_attention(w[0, 1], path=path) is not None     # Tq×Tk, no labels
    assert path.stat().st_size > 5_000
    assert not matplotlib.pyplot.get_fignums()

    # the scores port of an attention layer, on a padded batch
    net = al.Network([L.SequenceInput(4, name="x"),
                      L.SelfAttention(4, 8, has_scores_output=True, name="attn")])
    out = net([torch.randn(6, 4), torch.randn(3, 4)])
    scores = out["attn/scores"]
    fig = al.plot_attention(scores, heads=[1, 3], batch=1)
    assert [ax.get_title() for ax in fig.axes if ax.images] == ["head 1", "head 3"]
    matplotlib.pyplot.close(fig)
    with pytest.raises(al.ArgumentError, match="3 key_labels for 6 positions"):
        al.plot_attention(scores, key_labels=["a", "b", "c"])
    with pytest.raises(al.ArgumentError, match="heads \\[7\\] are not among the 4 heads"):
        al.plot_attention(scores, heads=7)
    with pytest.raises(al.ArgumentError, match="batch 5"):
        al.plot_attention(scores, batch=5)
    with pytest.raises(al.ArgumentError, match="5 dimensions"):
        al.plot_attention(torch.zeros(1, 1, 1, 2, 2))


def test_drawing_into_given_axes_scales_the_text():
    fig, (a, b) = matplotlib.pyplot.subplots(1, 2, figsize=(8, 3))
    answer_network().plot(ax=a)
    answer_network().plot(ax=b, direction="LR")
    sizes = [t.get_fontsize() for t in a.texts]
    assert max(sizes) < 9.0                        # smaller than in a figure of its own
    matplotlib.pyplot.close(fig)
