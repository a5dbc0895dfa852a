"""One sweep at a time on this machine: a lock file in the SpecScope home that says who holds it.

    with held("run-id"):          # Busy, naming the holder, while another sweep runs
        run_sweep(...)
    lock = take("run-id")         # a sweep on a thread: lock.release() when it ends

The lock is the kernel's (``flock``): it ends with the process that holds it, so a crashed sweep
never leaves the machine locked. Taking it asks ``access.require`` first.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone

from specscope import access, settings
from specscope.errors import Busy

__all__ = ["LOCK_FILE", "SweepLock", "take", "held", "holder"]

LOCK_FILE = "sweep.lock"


class SweepLock:
    """A held sweep lock; ``release`` ends it (again is harmless)."""

    def __init__(self, fd: int):
        self._fd: int | None = fd

    def release(self) -> None:
        """Free the lock for the next sweep."""
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def holder() -> dict | None:
    """Who holds the lock (run_id, who, since, pid) as its file says, or None when it is free."""
    try:
        text = (settings.home() / LOCK_FILE).read_text()
    except OSError:
        return None
    try:
        found = json.loads(text) if text.strip() else None
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def take(run_id: str) -> SweepLock:
    """Hold the machine's sweep lock for ``run_id``; Busy names the sweep that holds it."""
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
              "since": datetime.now(timezone.utc).isoformat()}
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(record).encode(), 0)
    return SweepLock(fd)


@contextmanager
def held(run_id: str) -> Iterator[SweepLock]:
    """``take`` for a block."""
    lock = take(run_id)
    try:
        yield lock
    finally:
        lock.release()
