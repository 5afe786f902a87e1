"""`benchmarks/checkpoints.py --smoke`: every path of the checkpoint benchmark at tiny sizes on
the CPU, so that it runs first time when a GPU session needs it."""
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("transformers")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))


def test_checkpoint_benchmark_smoke_checks_outputs_before_timing():
    import checkpoints
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        rows = checkpoints.main(["--smoke"])
    finally:
        torch.set_num_threads(n)
    assert [r["name"] for r in rows] == ["GPT-2 (tiny)", "Llama-style (tiny)"]
    for r in rows:
        assert r["diff"] <= 1e-4 and r["same"] == 1
        assert set(r["fwd"]) == set(r["dec"]) == set(r["m_load"]) == {"transformers", "attnlab"}
        assert all(t > 0 for t in (*r["fwd"].values(), *r["dec"].values(), r["recompute"]))
