"""A minimal headless-Chromium driver over the DevTools protocol, standard library only.

Chromium is started with `--remote-debugging-pipe`: it reads protocol messages (JSON, each
ended by a NUL byte) on file descriptor 3 and writes replies and events on descriptor 4, so no
port is opened and no websocket library is needed. Used by tests/viz/test_view.py and by
benchmarks/view_pages.py (the acceptance runs and the screenshots in docs/).

    with Browser() as b:
        page = b.open(Path("page.html"))
        page.eval("document.title")
        page.screenshot("shot.png")
        page.console_errors, page.requests      # what the page logged and asked for
"""
from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    env = os.environ.get("ATTNLAB_CHROMIUM")
    if env:
        return env if shutil.which(env) or Path(env).exists() else None
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


class BrowserError(RuntimeError):
    pass


class Browser:
    """One headless Chromium process; `open` gives a fresh tab per page."""

    def __init__(self, executable: str | None = None, width: int = 1280, height: int = 800,
                 timeout: float = 30.0):
        self.executable = executable or find_chromium()
        if self.executable is None:
            raise BrowserError("no Chromium found (install Debian's `chromium`, or set ATTNLAB_CHROMIUM)")
        self.timeout = timeout
        self.size = (width, height)
        self._profile = tempfile.mkdtemp(prefix="attnlab-chromium-")
        to_chrome_r, to_chrome_w = os.pipe()
        from_chrome_r, from_chrome_w = os.pipe()
        args = [self.executable, "--headless=new", "--remote-debugging-pipe", "--no-sandbox",
                "--disable-gpu", "--no-first-run", "--no-default-browser-check",
                "--disable-extensions", "--disable-background-networking", "--disable-sync",
                "--disable-component-update", "--disable-default-apps", "--mute-audio",
                "--disable-dev-shm-usage", f"--user-data-dir={self._profile}",
                f"--window-size={width},{height}", "about:blank"]

        def child_fds():
            # the pipe ends Chromium expects: 3 to read, 4 to write. dup2 makes them inheritable;
            # close_fds=False keeps them (the parent's own descriptors are not inheritable)
            r, w = (fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_chrome_r, from_chrome_w))
            os.dup2(r, 3)           # (moved above 10 first: either end may already be 3 or 4)
            os.dup2(w, 4)

        self.proc = subprocess.Popen(args, preexec_fn=child_fds, close_fds=False,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._w = os.fdopen(to_chrome_w, "wb", buffering=0)
        self._r = os.fdopen(from_chrome_r, "rb", buffering=0)
        self._id = 0
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._replies: dict[int, dict] = {}
        self._listeners: dict[str, list] = {}         # session id → list of event dicts
        self._closed = False
        self._reader = threading.Thread(target=self._read_loop, daemon=True)
        self._reader.start()
        self.send("Browser.getVersion")

    # -- the protocol -------------------------------------------------------------------
    def _read_loop(self):
        buf = b""
        while True:
            try:
                chunk = self._r.read(65536)
            except OSError:
                chunk = b""
            if not chunk:
                with self._cond:
                    self._closed = True
                    self._cond.notify_all()
                return
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                msg = json.loads(raw)
                with self._cond:
                    if "id" in msg:
                        self._replies[msg["id"]] = msg
                    else:
                        self._listeners.setdefault(msg.get("sessionId", ""), []).append(msg)
                    self._cond.notify_all()

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        with self._cond:
            self._id += 1
            i = self._id
        msg = {"id": i, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self._w.write(json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        with self._cond:
            while i not in self._replies:
                left = deadline - time.monotonic()
                if self._closed or left <= 0:
                    raise BrowserError(f"no reply to {method} (browser {'exited' if self._closed else 'timed out'})")
                self._cond.wait(left)
            reply = self._replies.pop(i)
        if "error" in reply:
            raise BrowserError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def events(self, session: str) -> list[dict]:
        with self._cond:
            return list(self._listeners.get(session, []))

    def wait_event(self, session: str, method: str, start: int = 0, timeout: float | None = None):
        deadline = time.monotonic() + (timeout or self.timeout)
        with self._cond:
            while True:
                evs = self._listeners.get(session, [])
                for e in evs[start:]:
                    if e.get("method") == method:
                        return e
                left = deadline - time.monotonic()
                if self._closed or left <= 0:
                    raise BrowserError(f"no {method} event")
                self._cond.wait(left)

    # -- pages --------------------------------------------------------------------------
    def open(self, target, wait_for: str | None = "window.attnlabReady === true") -> "Page":
        """Opens `target` (a Path → file:// URL, or a URL string) in a new tab, with console,
        network and dialog events recorded from before the first request."""
        url = Path(target).resolve().as_uri() if isinstance(target, Path) else str(target)
        tid = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        sid = self.send("Target.attachToTarget", {"targetId": tid, "flatten": True})["sessionId"]
        page = Page(self, tid, sid)
        for domain in ("Page", "Runtime", "Network", "Log"):
            self.send(f"{domain}.enable", session=sid)
        w, h = self.size
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": w, "height": h, "deviceScaleFactor": 1, "mobile": False}, session=sid)
        page.t0 = time.perf_counter()
        self.send("Page.navigate", {"url": url}, session=sid)
        self.wait_event(sid, "Page.loadEventFired")
        if wait_for:
            page.wait(wait_for)
        return page

    def close(self):
        try:
            if not self._closed:
                try:
                    self.send("Browser.close")
                except BrowserError:
                    pass
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        finally:
            for f in (self._w, self._r):
                try:
                    f.close()
                except OSError:
                    pass
            shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class Page:
    def __init__(self, browser: Browser, target: str, session: str):
        self.browser, self.target, self.session = browser, target, session
        self.t0 = 0.0

    def eval(self, expression: str):
        """The value of a JavaScript expression (awaited when it is a promise); a thrown
        exception becomes BrowserError with its text."""
        r = self.browser.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                   "awaitPromise": True}, session=self.session)
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            raise BrowserError(f"{expression!r}: {d.get('exception', {}).get('description') or d.get('text')}")
        return r["result"].get("value")

    def wait(self, condition: str, timeout: float = 20.0):
        deadline = time.monotonic() + timeout
        while not self.eval(f"Boolean({condition})"):
            if time.monotonic() > deadline:
                raise BrowserError(f"timed out waiting for {condition}")
            time.sleep(0.02)

    def click(self, selector: str):
        """A real mouse click (press and release) at the centre of the first match."""
        box = self.eval(f"""(() => {{ const e = document.querySelector({json.dumps(selector)});
            if (!e) return null; e.scrollIntoView({{block: 'center', inline: 'center'}});
            const r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; }})()""")
        if box is None:
            raise BrowserError(f"nothing matches {selector!r}")
        for kind in ("mousePressed", "mouseReleased"):
            self.browser.send("Input.dispatchMouseEvent", {"type": kind, "x": box[0], "y": box[1],
                                                           "button": "left", "clickCount": 1},
                              session=self.session)

    def type_text(self, selector: str, text: str):
        self.eval(f"document.querySelector({json.dumps(selector)}).focus()")
        self.browser.send("Input.insertText", {"text": text}, session=self.session)

    def screenshot(self, path, full_page: bool = False):
        params = {"format": "png"}
        if full_page:
            m = self.browser.send("Page.getLayoutMetrics", session=self.session)
            size = m.get("cssContentSize") or m["contentSize"]
            params["clip"] = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
            params["captureBeyondViewport"] = True
        data = self.browser.send("Page.captureScreenshot", params, session=self.session)["data"]
        Path(path).write_bytes(base64.b64decode(data))

    # -- what happened ------------------------------------------------------------------
    @property
    def console_errors(self) -> list[str]:
        out = []
        for e in self.browser.events(self.session):
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.exceptionThrown":
                d = p["exceptionDetails"]
                out.append(d.get("exception", {}).get("description") or d.get("text", "exception"))
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append(" ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
            elif m == "Log.entryAdded" and p["entry"].get("level") == "error":
                out.append(p["entry"].get("text", ""))
        return out

    @property
    def requests(self) -> list[str]:
        """Every URL the page asked for (the page itself included)."""
        return [e["params"]["request"]["url"] for e in self.browser.events(self.session)
                if e.get("method") == "Network.requestWillBeSent"]

    @property
    def external_requests(self) -> list[str]:
        return [u for u in self.requests if not u.startswith(("file:", "data:", "about:"))]

    @property
    def dialogs(self) -> list[str]:
        return [e["params"].get("message", "") for e in self.browser.events(self.session)
                if e.get("method") == "Page.javascriptDialogOpening"]
