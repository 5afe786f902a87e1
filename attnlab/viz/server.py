"""Serving one page on 127.0.0.1 (`attnlab view --serve`): a background HTTP server that
answers `/` and nothing else, to loopback Host names only."""
from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from attnlab.core.errors import ArgumentError


class PageServer:
    """Serves one page on 127.0.0.1 (never another interface) at `/`, on `port` (0: a free
    one), from a background thread, until `stop()` or `timeout` seconds. Requests whose Host
    is not this loopback address are refused (no DNS rebinding); any other path is 404."""

    def __init__(self, page: str, port: int = 0, timeout: float | None = 3600.0):
        if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
            raise ArgumentError(f"view: port must be an int in 0…65535, received {port!r}")
        if timeout is not None and not (isinstance(timeout, (int, float)) and timeout > 0):
            raise ArgumentError(f"view: timeout must be a positive number of seconds or None, "
                                f"received {timeout!r}")
        body = page.encode("utf-8")
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                host = self.headers.get("Host", "")
                if host not in owner._hosts:
                    self._send(403, b"forbidden: this page is served to 127.0.0.1 only\n", "text/plain")
                    return
                if self.path not in ("/", "/index.html"):
                    self._send(404, b"not found\n", "text/plain")
                    return
                self._send(200, body, "text/html; charset=utf-8")

            def _send(self, code, data, ctype):
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("X-Content-Type-Options", "nosniff")
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):          # quiet: no line per request on stderr
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._hosts = {f"127.0.0.1:{self.port}", f"localhost:{self.port}"}
        self.url = f"http://127.0.0.1:{self.port}/"
        self.timeout = timeout
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True,
                                        name="attnlab-view")
        self._timer: threading.Timer | None = None
        self._stopped = threading.Event()

    def start(self) -> "PageServer":
        self._thread.start()
        if self.timeout is not None:
            self._timer = threading.Timer(self.timeout, self.stop)
            self._timer.daemon = True
            self._timer.start()
        return self

    def stop(self) -> None:
        if self._stopped.is_set():
            return
        self._stopped.set()
        if self._timer is not None:
            self._timer.cancel()
        self._server.shutdown()
        self._server.server_close()

    def wait(self) -> None:
        """Blocks until the server stops (timeout or `stop()`); Ctrl-C stops it."""
        try:
            while not self._stopped.wait(0.5):
                pass
        except KeyboardInterrupt:
            self.stop()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

