"""PositionEmbedding's `offset`: position p reads row p + offset (OPT's learned positions start
at row 2), in the forward pass, the stream and saved files; the rows before it count in
max_length but embed no position."""
import pytest
import torch

import attnlab as al
from attnlab import layers as L
from attnlab.core.spec import Spec


def _net(offset, rows=10):
    net = al.Network([L.SequenceInput(3, name="x"),
                      L.PositionEmbedding(rows, offset=offset, name="pos")])
    with torch.no_grad():
        net.learnables["pos/weight"].copy_(torch.arange(rows * 3.).view(rows, 3))
    return net.eval()


def test_position_p_reads_row_p_plus_offset():
    out = _net(2)(torch.zeros(1, 4, 3))
    assert out[0, :, 0].tolist() == [6.0, 9.0, 12.0, 15.0]           # rows 2, 3, 4, 5
    assert _net(0)(torch.zeros(1, 2, 3))[0, :, 0].tolist() == [0.0, 3.0]


def test_the_stream_reads_the_same_rows():
    net = _net(2)
    x = torch.zeros(2, 6, 3)
    s = net.stream()
    steps = torch.cat([s.step(x[:, :2])] + [s.step(x[:, t:t + 1]) for t in range(2, 6)], 1)
    assert torch.equal(steps, net(x))


def test_the_positions_end_offset_rows_before_the_table():
    net = _net(2)
    assert net(torch.zeros(1, 8, 3)).shape == (1, 8, 3)
    with pytest.raises(al.DataError, match=r"positions 0…8 reach past max_length 8 \(rows 2… of 10\)"):
        net(torch.zeros(1, 9, 3))
    s = net.stream()
    s.step(torch.zeros(1, 8, 3))
    with pytest.raises(al.DataError, match="max_length 8"):
        s.step(torch.zeros(1, 1, 3))
    layer = L.PositionEmbedding(10, offset=2, name="pos")
    with pytest.raises(al.SizeError, match="at most 8 time steps"):
        layer.infer({"in": Spec.sequence(3, 9)})


@pytest.mark.parametrize("offset,words", [(10, "less than max_length 10"), (-1, "offset")])
def test_an_offset_outside_the_table_is_refused(offset, words):
    with pytest.raises(al.ArgumentError, match=words):
        L.PositionEmbedding(10, offset=offset)


def test_saved_files_keep_the_offset(tmp_path):
    net = _net(2)
    net.save(tmp_path / "pos.attnlab")
    back = al.load(tmp_path / "pos.attnlab").eval()
    assert back.layers["pos"].offset == 2
    x = torch.zeros(1, 5, 3)
    assert torch.equal(back(x), net(x))
