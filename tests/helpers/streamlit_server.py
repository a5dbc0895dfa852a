"""The dashboard served for browser tests and benches: ``streamlit run app/main.py`` (or another script) as a
subprocess on a free port of 127.0.0.1, headless, without usage stats or a file watcher, in its own SpecScope home
and its own process group; its output goes to ``streamlit.log`` in that home.

``StreamlitServer(home, script, env, address)`` starts it; ``wait_healthy(timeout)`` waits until Streamlit answers
its health check (failing at once, with the log's tail, if the process exits), and ``ready(timeout)`` does the
same but stops a server that never answers; ``log()`` is the log's tail; ``stop()`` ends the whole process group
(SIGTERM, then SIGKILL after 10 s) and closes the log. Callers add their own environment: the browser tests
(tests/e2e/conftest.py) leave warming off, the bench (tests/bench/dashboard.py) sets PYTHONPATH and lets the server
warm its landing pages.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests

from helpers.paths import APP, REPO

MAIN = APP / "main.py"


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class StreamlitServer:
    """``streamlit run script`` on a free port with ``SPECSCOPE_HOME=home`` and ``env`` over this process's
    environment. ``address`` None: the one the project's .streamlit/config.toml names."""

    def __init__(self, home: Path, script: Path = MAIN, env: dict | None = None, address: str | None = "127.0.0.1"):
        self.home = Path(home)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = self.home / "streamlit.log"
        full_env = {**os.environ, "SPECSCOPE_HOME": str(self.home), **(env or {})}
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - held while the server runs, closed by stop()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "streamlit",
                "run",
                str(script),
                "--server.headless",
                "true",
                "--server.port",
                str(self.port),
                *(["--server.address", address] if address else []),
                "--browser.gatherUsageStats",
                "false",
                "--server.fileWatcherType",
                "none",
            ],
            cwd=REPO,
            env=full_env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def log(self, chars: int = 4000) -> str:
        """The last ``chars`` characters of the server's output."""
        return self.log_path.read_text(errors="replace")[-chars:]

    def wait_healthy(self, timeout: float = 300) -> None:
        """Until Streamlit answers its health check; raises RuntimeError, with the log's tail, if the process
        exits first or ``timeout`` seconds pass."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"streamlit exited with {self.proc.returncode}:\n{self.log()}")
            try:
                if requests.get(f"{self.url}/_stcore/health", timeout=2).ok:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.3)
        raise RuntimeError(f"streamlit did not become healthy in {timeout:g} s:\n{self.log()}")

    def ready(self, timeout: float = 300) -> StreamlitServer:
        """``wait_healthy(timeout)``, stopping the server if it never answers; returns the server."""
        try:
            self.wait_healthy(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Ends the server's process group (SIGTERM, SIGKILL after 10 s) and closes its log; safe to call twice."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self._log.close()
