"""FakeCollector: an OTLP/HTTP endpoint on 127.0.0.1 that misbehaves on purpose.

Modes: ``"ok"`` answers 200 at once (a healthy baseline), ``"503"`` answers 503 with ``Retry-After: 1``
(the exporter backs off and retries), ``"slow"`` waits ``delay`` seconds before answering 200, ``"hang"``
never answers until the server is closed.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

__all__ = ["FakeCollector"]


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that hung up, or a connection we dropped on purpose


Mode = Literal["ok", "503", "slow", "hang"]


class FakeCollector:
    def __init__(self, mode: Mode, delay: float = 3.0) -> None:
        self.mode = mode
        self.delay = delay
        self.requests = 0
        self._closing = threading.Event()
        self._lock = threading.Lock()
        self._server = _QuietServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.02,), name="fake-collector", daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> FakeCollector:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        collector = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                self.rfile.read(length)
                with collector._lock:
                    collector.requests += 1
                if collector.mode == "hang":
                    collector._closing.wait(60)
                    self.close_connection = True
                    return
                if collector.mode in ("ok", "slow"):
                    if collector.mode == "slow":
                        collector._closing.wait(collector.delay)
                    status, extra = 200, {}
                else:
                    status, extra = 503, {"retry-after": "1"}
                self.send_response(status)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                for key, value in extra.items():
                    self.send_header(key, value)
                self.end_headers()

        return Handler


def wait_for(predicate: Any, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return bool(predicate())
