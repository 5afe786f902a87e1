import os
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import settings

# the test folders mirror the package; their shared helpers (helpers, doc_blocks, train_worker,
# chromium) live here, beside this file
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("MPLBACKEND", "Agg")
torch.set_num_threads(2)

# Property tests explore new examples on every local run; CI replays a fixed set so that a
# submission's result does not depend on the draw (found failures become regression tests).
settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture
def one_thread():
    """One torch thread for the test: tiny models run fastest so, and stay immune to other
    processes on a busy machine. A module asks for it with
    `pytestmark = pytest.mark.usefixtures("one_thread")`."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
