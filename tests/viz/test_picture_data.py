"""A network's picture is data first (`viz.layout`, `viz.picture`: no matplotlib), rendered
second (`viz.graph`): the renderer draws exactly the boxes, curves and labels the data holds."""
import subprocess
import sys

import matplotlib
import matplotlib.pyplot as plt

from attnlab.cli.demos.seed1 import answer_network, question_network
from attnlab.viz import graph
from attnlab.viz.layout import compute_layout, estimated_width
from attnlab.viz.picture import picture

matplotlib.use("Agg")


def test_the_layout_and_the_picture_are_computed_without_matplotlib():
    code = ("import sys\nfrom attnlab.cli.demos.seed1 import question_network\n"
            "from attnlab.viz.picture import picture\nfrom attnlab.viz.layout import estimated_width\n"
            "p = picture(question_network(), estimated_width, title='t')\n"
            "print(len(p.boxes), len(p.curves), [m for m in sys.modules if m.startswith('matplotlib')])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    boxes, curves, mods = done.stdout.split(maxsplit=2)
    net = question_network()
    assert (int(boxes), int(curves)) == (len(net._layers), len(net._conns))
    assert mods.strip() == "[]"


def test_the_picture_places_every_layer_edge_port_and_cycle():
    net = question_network()                     # a cycle, a layer with several inputs
    pic = picture(net, graph._text_width, title="question")
    assert [b.name for b in pic.boxes] == list(net._layers)
    assert {(c.source, c.destination) for c in pic.curves} == \
        {(s, d) for (d, _), (s, _) in net._conns.items()}
    for c in pic.curves:                         # a start point, then Bézier triples
        assert len(c.points) % 3 == 1 and len(c.points) >= 4
    x0, x1, y0, y1 = pic.bounds
    for b in pic.boxes:                          # every box inside the picture
        assert x0 <= b.x - b.w / 2 and b.x + b.w / 2 <= x1 and y0 <= b.y - b.h / 2 <= y1
    assert pic.captions[0].text == "question"
    assert any(c.text.startswith("cycle: ") and c.color == graph._CYCLE for c in pic.captions)
    assert any(c.in_cycle for c in pic.curves) and any(b.in_cycle for b in pic.boxes)
    ports = {lb.text for c in pic.curves for lb in c.labels}
    multi = {p for n, l in net._layers.items() if len(l.input_ports) > 1 for p in l.input_ports}
    assert multi and multi <= ports


def test_the_renderer_draws_the_picture_it_is_given():
    net = answer_network()
    pic = picture(net, graph._text_width, direction="LR", sizes=False)
    fig = graph.plot_network(net, direction="LR", sizes=False)
    texts = [t.get_text() for t in fig.axes[0].texts]
    plt.close(fig)
    want = [lb.text for c in pic.curves for lb in c.labels] + \
        [s for b in pic.boxes for s in (b.name, b.sub)]
    assert texts == want
    assert (fig.get_size_inches() >= [min(pic.size[0], 2.5), min(pic.size[1], 1.2)]).all()


def test_without_a_renderer_the_layout_estimates_the_text():
    net = answer_network()
    rough, exact = compute_layout(net), graph.compute_layout(net)
    assert [n.name for n in rough.nodes] == [n.name for n in exact.nodes]
    assert rough.ranks == exact.ranks                 # the same ranks and order; sizes differ
    assert estimated_width("abcd", 9.0) == 4 * 9.0 * 0.6 / 72
