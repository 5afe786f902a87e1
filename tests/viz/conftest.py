"""What the page tests share: one headless Chromium per test module (tests/chromium.py), or
the tests that need it skipped where it is missing or does not start."""
import pytest


@pytest.fixture(scope="module")
def browser():
    chromium = pytest.importorskip("chromium", reason="tests/chromium.py not importable")
    if chromium.find_chromium() is None:
        pytest.skip("Chromium is not installed (Debian: apt-get install chromium; or set "
                    "ATTNLAB_CHROMIUM): the page is not tested in a browser")
    try:
        b = chromium.Browser(width=1280, height=900)
    except chromium.BrowserError as e:
        pytest.skip(f"Chromium does not start here: {e}")
    yield b
    b.close()
