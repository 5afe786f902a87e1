"""The benchmarks against transformers and peft run at tiny sizes (`--smoke`), every path of
each on the CPU, so that they run first time when a GPU session or `make bench` needs them."""
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
        times = [t for k in ("fwd", "dec") for samples in r[k].values() for t in samples]
        assert len(times) == 4 and all(t > 0 for t in times) and r["recompute"] > 0
        assert set(r["m_dec"]) == {"transformers", "attnlab"}
    text = checkpoints.report(rows, torch.device("cpu"), 24, 6, 1, (0.5, 0.7))
    assert "| GPT-2 (tiny) |" in text and "same tokens" in text and "load peak" in text


def test_families_benchmark_smoke_runs_every_family_with_equal_logits():
    import families
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        rows = families.main(["--smoke"])
    finally:
        torch.set_num_threads(n)
    assert [r["family"] for r in rows] == [
        "gpt2", "llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "phi3", "gpt_neox",
        "opt", "mixtral", "bert", "roberta", "distilbert", "vit", "t5"]
    for r in rows:
        assert r["diff"] <= 1e-4, r["family"]
        assert r.get("same", True), f"{r['family']}: greedy tokens differ from transformers'"
        assert all(len(s) == 1 and s[0] > 0 for s in r["samples"].values())
    assert {r["family"] for r in rows if "dec" in r} == {
        "gpt2", "llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "phi3", "gpt_neox",
        "opt", "mixtral", "t5"}
    text = families.report(rows, 9.0, 9.5, 1, 1)
    assert text.count("\n| ") == 1 + len(rows)             # the header and one row each
    assert "under load" in text


def test_generation_benchmark_smoke_gives_transformers_tokens_every_way():
    import generation
    rows = generation.main(["--smoke"])
    assert [(r["model"], r["way"]) for r in rows] == [
        (m, w) for m in ("GPT-2-shaped", "Llama-shaped") for w in ("greedy", "sample", "beam")]
    assert all(r["same"] for r in rows), [(r["model"], r["way"]) for r in rows if not r["same"]]
    text = generation.report(rows, 9.0, 9.5, 1, 1, 6)
    assert text.count("\n| ") == 1 + len(rows) and "8 prompts" in text


def test_lora_benchmark_smoke_starts_both_sides_at_the_base_models_loss():
    pytest.importorskip("peft")
    import lora
    r = lora.main(["--smoke"])
    peft_loss, ours = r["first"]
    assert abs(peft_loss - ours) <= 1e-5 * abs(peft_loss)      # B = 0: the base model's loss
    assert r["trained"]["attnlab"] == r["trained"]["peft"] > 0
    assert all(len(v) == 1 and v[0] > 0 for v in r["samples"].values())
    text = lora.report(r, 9.0, 9.5, 1, True)
    assert "| forward + backward + AdamW |" in text and "under load" in text
