"""A sweep's two locks: one sweep at a time on this machine, and one process at a time on a run.

    with machine("run-id"):        # Busy, naming the holder, while another sweep runs here
        ...
    held = take("run-id")          # a sweep on a thread: held.release() when it ends
    with run("run-id"):            # ConfigError while another process resumes the same run
        ...

The machine lock is the kernel's (``flock``) on a file in the SpecScope home that says who holds it:
it ends with the process that holds it, so a crashed sweep never leaves the machine locked. Taking it
asks ``access.require`` first. The run lock is a file in the run's folder naming the process.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from specscope import access, procfs, settings
from specscope.errors import Busy, ConfigError

__all__ = ["LOCK_FILE", "MachineLock", "take", "machine", "holder", "run"]

LOCK_FILE = "sweep.lock"


class MachineLock:
    """A held machine lock; ``release`` ends it (again is harmless)."""

    def __init__(self, fd: int):
        self._fd: int | None = fd

    def release(self) -> None:
        """Free the lock for the next sweep."""
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def holder() -> dict[str, Any] | None:
    """Who holds the machine lock (run_id, who, since, pid) as its file says, or None when it is free."""
    try:
        text = (settings.home() / LOCK_FILE).read_text()
    except OSError:
        return None
    try:
        found = json.loads(text) if text.strip() else None
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def take(run_id: str) -> MachineLock:
    """Hold this machine's sweep lock for ``run_id``; Busy names the sweep that holds it."""
    actor = access.require("run a sweep")
    fd = os.open(settings.home() / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        other = holder() or {}
        raise Busy(f"Another sweep runs on this machine ({other.get('run_id', 'unknown run')}, started by "
                   f"{other.get('who', 'someone')} at {str(other.get('since', '?'))[:19]} UTC); one sweep runs "
                   "at a time: wait for it to finish, or stop it on the Prompt sets & runs page.") from None
    record = {"run_id": run_id, "who": actor.who, "pid": os.getpid(),
              "since": datetime.now(UTC).isoformat()}
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(record).encode(), 0)
    return MachineLock(fd)


@contextmanager
def machine(run_id: str) -> Iterator[MachineLock]:
    """``take`` for a block."""
    held = take(run_id)
    try:
        yield held
    finally:
        held.release()


@contextmanager
def run(run_id: str) -> Iterator[None]:
    """Hold the run's own lock (its folder's ``lock`` file names the process) while it runs."""
    folder = settings.runs_dir() / run_id
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "lock"
    try:
        pid = int(path.read_text())
    except (OSError, ValueError):  # no lock, or a torn one
        pid = None
    if pid is not None and pid != os.getpid() and procfs.pid_exists(pid):
        raise ConfigError(f"Sweep {run_id} is already running (process {pid}); wait for it "
                          "or stop that process.")
    path.write_text(str(os.getpid()))
    try:
        yield
    finally:
        path.unlink(missing_ok=True)
