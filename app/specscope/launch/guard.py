"""Ends a server's whole process group once the process that started it is gone.

``python -m specscope.launch.guard OWNER_PID PGID`` runs in a session of its own beside a server
started with ``die_with_parent``. The kernel's parent-death signal reaches only the server's first
process; when that one is killed outright (a Ray node lost, its task's processes killed), vLLM's
engine core and workers, in the same group, would live on. The guard looks once a second: when
OWNER_PID has ended it ends the group (TERM, then KILL); it exits as soon as the group is empty.
``detach`` starts it through a process that exits at once, so the guard is no child of the owner:
Ray kills a lost task's child processes, and would take the guard with them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from specscope import procfs

__all__ = ["end_group", "watch", "detach"]


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def end_group(pgid: int, *, timeout: float = 20.0, child: subprocess.Popen | None = None) -> None:
    """TERM every process of group ``pgid`` (the API server, or engine processes it left behind),
    KILL what is left after ``timeout``; ``child`` (ours) is reaped while waiting."""
    if procfs.group_pids(pgid):
        _signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while procfs.group_pids(pgid) and time.monotonic() < deadline:
        if child is not None:
            child.poll()
        time.sleep(0.2)
    if procfs.group_pids(pgid):
        _signal_group(pgid, signal.SIGKILL)
        while procfs.group_pids(pgid) and time.monotonic() < deadline + 5:
            time.sleep(0.1)


def watch(owner: int, pgid: int, every: float = 1.0) -> None:
    """Wait until ``owner`` ends, then end group ``pgid``; return early once the group is empty."""
    while procfs.group_pids(pgid):
        if not procfs.pid_exists(owner) or (procfs.proc_stat(owner) or ["Z"])[0] in ("Z", "X"):
            end_group(pgid)
            return
        time.sleep(every)


def detach(owner: int, pgid: int, env: dict[str, str] | None = None) -> None:
    """Start a guard that is not a child of the calling process (a process in between exits at once)."""
    quiet = dict(stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    subprocess.run([sys.executable, "-m", "specscope.launch.guard", "--spawn", str(owner), str(pgid)],
                   env=env, check=False, **quiet)


if __name__ == "__main__":
    if sys.argv[1] == "--spawn":
        subprocess.Popen([sys.executable, "-m", "specscope.launch.guard", *sys.argv[2:4]],
                         start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    else:
        watch(int(sys.argv[1]), int(sys.argv[2]))
