"""`benchmarks/gpu.py --smoke`: every code path of the GPU benchmark at tiny sizes on the CPU,
so that the script runs first time when a GPU session needs it."""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))


def test_gpu_benchmark_smoke_run_writes_its_report(tmp_path):
    import gpu
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        out = tmp_path / "gpu.md"
        text = gpu.main(["--smoke", "--device", "cpu", "--compile-backend", "eager",
                         "--out", str(out)])
    finally:
        torch.set_num_threads(n)
    assert out.read_text().strip() == text.strip()
    for heading in ("## GPU", "### Targets", "### Attention training step",
                    "### `al.train` against the hand loop", "### Decoding"):
        assert heading in text, heading
    assert "| 16 | 2 | bf16 |" in text and "al.train compile" in text
    assert "Tokens identical to recomputation: yes" in text
    assert "peak memory (CUDA only)" in text

