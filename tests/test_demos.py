"""The demos run end to end (one epoch) and write every file with the right metrics keys."""
import importlib.util
import json

import pytest

import attnlab as al
from attnlab.cli import DEMOS, main

NEEDS = {"digits": ["sklearn"], "vowels": ["sklearn", "sktime"],
         "forecast": ["statsmodels"], "roman": []}
COMMON = ["model.attnlab", "network.png", "training-progress.png", "attention.png",
          "metrics.json", "report.html"]
EXTRA = {"digits": ["attention-map.png"], "forecast": ["forecast.png"]}
KEYS = {"digits": {"test_accuracy", "baseline_accuracy"},
        "vowels": {"test_accuracy", "baseline_accuracy"},
        "forecast": {"test_rmse", "seasonal_naive_rmse", "seasonal_naive_drift_rmse",
                     "holt_winters_rmse"},
        "roman": {"test_exact_match"}}


def _skip_without(name):
    missing = [p for p in NEEDS[name] if importlib.util.find_spec(p) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (pip install 'attnlab[data]')")


@pytest.mark.parametrize("name", sorted(NEEDS))
def test_demo_runs_and_writes_everything(name, tmp_path):
    _skip_without(name)
    assert name in DEMOS
    assert main(["demo", name, "--out", str(tmp_path), "--epochs", "1"]) == 0
    out = tmp_path / name
    for f in COMMON + EXTRA.get(name, []):
        assert (out / f).is_file() and (out / f).stat().st_size > 0, f
    metrics = json.loads((out / "metrics.json").read_text())
    assert KEYS[name] <= set(metrics)
    for k in KEYS[name]:
        assert isinstance(metrics[k], float)
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") >= 3 and "src=\"http" not in html
    net = al.load(out / "model.attnlab")
    assert net.analyze().ok


def test_demo_baselines_on_the_issue_splits():
    """The classical baselines reproduce the numbers measured when the issue was filed."""
    from attnlab.demos import baselines as B
    pytest.importorskip("statsmodels")
    s = al.datasets.co2()
    f = B.seasonal_forecasts(s.train, 52, 52)
    assert B.rmse(f["seasonal_naive"], s.test) == pytest.approx(1.57, abs=0.005)
    assert B.rmse(f["seasonal_naive_drift"], s.test) == pytest.approx(0.60, abs=0.005)
    assert B.rmse(f["holt_winters"], s.test) == pytest.approx(0.52, abs=0.005)
