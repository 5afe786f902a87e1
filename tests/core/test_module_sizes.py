"""No module of attnlab/ is over 600 lines: a longer one holds more than one job (split it by
what its parts do; docs/architecture.md gives each module one row and one job)."""
from pathlib import Path

import attnlab

ROOT = Path(attnlab.__file__).parent
MOST = 600


def _lines() -> dict[str, int]:
    return {p.relative_to(ROOT).as_posix(): len(p.read_text(encoding="utf-8").splitlines())
            for p in ROOT.rglob("*.py")}


def test_no_module_is_over_600_lines():
    over = {name: n for name, n in _lines().items() if n > MOST}
    assert over == {}, f"split these by job, each part at most {MOST} lines: {over}"


def test_the_count_sees_every_module():
    lines = _lines()
    assert "network/__init__.py" in lines and "pretrained/builder.py" in lines
    assert len(lines) > 150
