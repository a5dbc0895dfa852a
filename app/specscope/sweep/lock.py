"""A sweep's locks: one sweep at a time on this machine, one process at a time on a run, and cells measured
here kept apart from the dashboard's own work.

    with machine("run-id"):        # Busy, naming the holder, while another sweep runs here
        ...
    held = take("run-id")          # a sweep on a thread: held.release() when it ends
    with run("run-id"):            # ConfigError while another process resumes the same run
        ...
    with measuring():              # a cell's load runs here (cells of several lanes at once)
        ...
    with quiet() as free:          # the dashboard's recomputation: False at once while a cell is measured
        ...

The machine lock is the kernel's (``flock``) on a file in the SpecScope home that says who holds it:
it ends with the process that holds it, so a crashed sweep never leaves the machine locked. Taking it
asks ``access.require`` first. The run lock is a file in the run's folder naming the process.
``measuring`` and ``quiet`` share one file of this machine (``settings.measuring_lock``, for every home
and user; a cell holds it shared, the dashboard's work alone): a cell is measured on this machine's cores
when its load generator runs here (a sweep here, or a Ray task on a node of this machine), whatever the
servers' hardware: the load generator's timing and, on a CPU preset, the servers share these cores.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from specscope import access, procfs, settings
from specscope.errors import Busy, ConfigError

__all__ = ["LOCK_FILE", "MachineLock", "take", "machine", "holder", "run", "measuring", "quiet"]

LOCK_FILE = "sweep.lock"
QUIET_WAIT_S = 60.0  # the longest a cell waits for the dashboard's work to end; then it is measured anyway


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
        raise Busy(
            f"Another sweep runs on this machine ({other.get('run_id', 'unknown run')}, started by "
            f"{other.get('who', 'someone')} at {str(other.get('since', '?'))[:19]} UTC); one sweep runs "
            "at a time: wait for it to finish, or stop it on the Prompt sets & runs page."
        ) from None
    record = {"run_id": run_id, "who": actor.who, "pid": os.getpid(), "since": datetime.now(UTC).isoformat()}
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
        raise ConfigError(f"Sweep {run_id} is already running (process {pid}); wait for it or stop that process.")
    path.write_text(str(os.getpid()))
    try:
        yield
    finally:
        path.unlink(missing_ok=True)


def _open_measuring() -> int | None:
    """The measuring file, open to be locked (made, readable by every user, if missing); None where it cannot
    be: a sweep is then measured without the mark."""
    path = settings.measuring_lock()
    try:
        return os.open(path, os.O_RDONLY)  # another user's file in /tmp: opened, not made again
    except FileNotFoundError:
        pass
    except OSError:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)
    except OSError:
        return None
    try:
        os.fchmod(fd, 0o644)
    except OSError:
        pass
    return fd


def _flock(mode: int, wait_s: float) -> tuple[int | None, bool]:
    """The measuring file open and locked in ``mode`` (trying for ``wait_s``), and whether it was locked; (None,
    True) where there is no such file to lock: nothing can be marked there."""
    fd = _open_measuring()
    if fd is None:
        return None, True
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return fd, True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                return None, False
            time.sleep(0.02)


@contextmanager
def measuring(wait_s: float = QUIET_WAIT_S) -> Iterator[None]:
    """Mark a cell measured on this machine for the block (lanes side by side share the mark); first wait, at
    most ``wait_s``, for work in ``quiet`` to end (past that the cell is measured anyway, and the check of other
    processes on its cores says what ran)."""
    fd, _ = _flock(fcntl.LOCK_SH, wait_s)
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)  # closing the file ends its lock


@contextmanager
def quiet() -> Iterator[bool]:
    """For work that must not fall inside a measured cell (the dashboard computing its pages for new results):
    True, and no cell here begins until the block ends; False at once while a cell is measured."""
    fd, free = _flock(fcntl.LOCK_EX, 0.0)
    try:
        yield free
    finally:
        if fd is not None:
            os.close(fd)
