"""A local HTTP server for tests that feed SpecScope captured answers."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from helpers.paths import CAPTURES


class Answering(BaseHTTPRequestHandler):
    """A request handler that answers with ``answer`` and keeps its log quiet."""

    def answer(self, body: bytes, status: int = 200) -> None:
        """Send ``body`` with its Content-Length."""
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """The URL of a local HTTP server on 127.0.0.1 answering with ``handler``, stopped on exit."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def recording_chat(body: bytes, seen: list[tuple[float, dict]], delay_s: float = 0.0) -> type[Answering]:
    """A handler of one served model ("smol") that answers every POST with ``body`` after ``delay_s``,
    keeping each request's arrival time and JSON in ``seen``."""
    lock = threading.Lock()

    class Server(Answering):
        def do_GET(self):
            if self.path.startswith("/v1/models"):
                self.answer(json.dumps({"data": [{"id": "smol", "max_model_len": 2048}]}).encode())
            else:
                self.answer(b"", 404)

        def do_POST(self):
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with lock:
                seen.append((time.monotonic(), request))
            time.sleep(delay_s)
            self.answer(body)

    return Server


def measurable_chat(body: bytes, seen: list[tuple[float, dict]], delay_s: float = 0.0) -> type[Answering]:
    """``recording_chat`` that a sweep can measure: /health answers, and /metrics gives the /metrics text a real
    vLLM ngram K=4 server gave (tests/captures)."""
    metrics = (CAPTURES / "metrics_ngram_k4_after.txt").read_bytes()

    class Server(recording_chat(body, seen, delay_s)):  # type: ignore[misc]
        def do_GET(self):  # noqa: N802 - the http.server API
            if self.path in ("/health", "/metrics"):
                self.answer(metrics if self.path == "/metrics" else b"")
            else:
                super().do_GET()

    return Server
