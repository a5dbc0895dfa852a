"""A local HTTP server for tests that feed SpecScope captured answers."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


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
