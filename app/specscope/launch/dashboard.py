"""The dashboard ``launchers/start.sh`` runs, recorded so ``specscope stop --all`` ends it with the servers.

``python -m specscope.launch.dashboard PID`` records it (``servers_dir()/dashboard.pid``); ``stop``
ends it (TERM, then KILL) if that process still runs Streamlit, so a pid reused by another
program is never signalled.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from specscope import procfs, settings

__all__ = ["record", "stop", "pid_file"]


def pid_file() -> Path:
    """Where the dashboard's process id is kept."""
    return settings.servers_dir() / "dashboard.pid"


def record(pid: int) -> None:
    """Remember the dashboard process ``pid``."""
    pid_file().parent.mkdir(parents=True, exist_ok=True)
    pid_file().write_text(str(pid))


def _runs_streamlit(pid: int) -> bool:
    try:
        return b"streamlit" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def stop(timeout: float = 10.0) -> int | None:
    """End the recorded dashboard; its pid, or None when none runs."""
    try:
        pid = int(pid_file().read_text())
    except (OSError, ValueError):
        return None
    pid_file().unlink(missing_ok=True)
    if not _runs_streamlit(pid):
        return None
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while procfs.pid_exists(pid) and _runs_streamlit(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _runs_streamlit(pid):
        os.kill(pid, signal.SIGKILL)
    return pid


if __name__ == "__main__":
    record(int(sys.argv[1]))
