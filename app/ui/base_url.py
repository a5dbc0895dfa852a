"""Deep links without stray 404s: tell the browser where the dashboard's backend is.

Opened at a page's own address (``/live``, ``/theory?x=1``), Streamlit's frontend does not know whether the
app is served at the root or under ``/live``, so it tries ``/live/_stcore/health`` and
``/live/_stcore/host-config`` first, and each logs a 404 before it finds the root. The frontend reads
``window.__streamlit.BACKEND_BASE_URL`` when a page sets it; this middleware puts that (the server's root:
its origin and ``server.baseUrlPath``) into every HTML page it serves, ahead of Streamlit's scripts.

    st.App("dashboard.py", middleware=[Middleware(BackendBaseUrl)])
"""

from __future__ import annotations

import json

import streamlit as st

__all__ = ["BackendBaseUrl", "script"]


def script(base_path: str) -> bytes:
    """The ``<script>`` that sets the backend's base URL: this origin plus ``base_path``."""
    path = "/" + base_path.strip("/")
    return (
        f"<script>window.__streamlit=Object.assign(window.__streamlit||{{}},"
        f"{{BACKEND_BASE_URL:new URL({json.dumps(path)},window.location.origin).href}})</script>"
    ).encode()


def _page(scope) -> bool:
    """A GET for a page (not Streamlit's own routes or a file with an extension): its answer is index.html."""
    path = scope.get("path", "")
    return (
        scope["type"] == "http"
        and scope.get("method") == "GET"
        and "/_stcore/" not in path
        and "/static/" not in path
        and "." not in path.rsplit("/", 1)[-1]
    )


class BackendBaseUrl:
    """ASGI middleware: ``script`` inserted into each HTML page, before its first ``<script``."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if not _page(scope):
            return await self.app(scope, receive, send)
        # ask for the page uncompressed, so the script can go in
        scope = {**scope, "headers": [(k, v) for k, v in scope.get("headers", []) if k.lower() != b"accept-encoding"]}
        held: dict = {}
        body = bytearray()

        async def relay(message):
            if message["type"] == "http.response.start":
                headers = {k.lower(): v for k, v in message.get("headers", [])}
                if headers.get(b"content-type", b"").startswith(b"text/html") and b"content-encoding" not in headers:
                    held["start"] = message
                    return
            elif message["type"] == "http.response.body" and "start" in held:
                body.extend(message.get("body", b""))
                if message.get("more_body"):
                    return
                page = bytes(body).replace(
                    b"<script", script(st.get_option("server.baseUrlPath") or "") + b"<script", 1
                )
                kept = [
                    (k, v) for k, v in held["start"].get("headers", []) if k.lower() not in (b"content-length", b"etag")
                ]
                await send({**held["start"], "headers": [*kept, (b"content-length", str(len(page)).encode())]})
                await send({"type": "http.response.body", "body": page})
                return
            await send(message)

        await self.app(scope, receive, relay)
