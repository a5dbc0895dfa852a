"""Ends a server's whole process group once the process that started it is gone, or once it has
served nothing for a while (a server kept for the lease: ``launch.kept``).

``python -m specscope.launch.guard OWNER_PID PGID`` runs in a session of its own beside a server
started with ``die_with_parent``; ``... --idle LIMIT_S URL PGID STATE_FILE`` beside a kept one. The
kernel's parent-death signal reaches only the server's first process; when that one is killed outright
(a Ray node lost, its task's processes killed), vLLM's engine core and workers, in the same group,
would live on. The guard looks once a second: when
OWNER_PID has ended it ends the group (TERM, then KILL); it exits as soon as the group is empty.
``detach`` starts it through a process that exits at once, so the guard is no child of the owner:
Ray kills a lost task's child processes, and would take the guard with them.

Ending a group also removes the rendezvous file each vLLM engine leaves in the temporary folder
(``/tmp/vllm_dist_<uuid>``: torch's FileStore, which vLLM names with no setting to place it elsewhere and never
removes): the file is the one that names a port the group's processes listened on.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from specscope import procfs

__all__ = ["end_group", "rendezvous_files", "watch", "watch_idle", "detach", "detach_idle"]

# the IPv4 or IPv6 socket address (family, port, ...) a gloo process group writes into vLLM's rendezvous file
_ADDRESS = re.compile(rb"\x02\x00(..)[\s\S]{4}\x00{8}|\x0a\x00(..)\x00{4}[\s\S]{16}")


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def end_group(pgid: int, *, timeout: float = 20.0, child: subprocess.Popen[Any] | None = None) -> None:
    """TERM every process of group ``pgid`` (the API server, or engine processes it left behind),
    KILL what is left after ``timeout``; ``child`` (ours) is reaped while waiting. Then vLLM's rendezvous
    files of the group's engines are removed."""
    pids = procfs.group_pids(pgid)
    leftovers = rendezvous_files(procfs.listening_ports(pids))
    if pids:
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
    for path in leftovers:
        path.unlink(missing_ok=True)


def rendezvous_files(ports: set[int]) -> list[Path]:
    """vLLM's rendezvous files (``vllm_dist_<uuid>`` in the temporary folder, ours) that name one of ``ports``."""
    found = []
    for path in Path(tempfile.gettempdir()).glob("vllm_dist_*"):
        try:
            if path.stat().st_uid != os.getuid() or not re.fullmatch(r"vllm_dist_[0-9a-f]{32}", path.name):
                continue
            named = {int.from_bytes(m.group(1) or m.group(2), "big") for m in _ADDRESS.finditer(path.read_bytes())}
        except OSError:
            continue
        if named & ports:
            found.append(path)
    return found


def watch(owner: int, pgid: int, every: float = 1.0) -> None:
    """Wait until ``owner`` ends, then end group ``pgid``; return early once the group is empty."""
    while procfs.group_pids(pgid):
        if not procfs.pid_exists(owner) or (procfs.proc_stat(owner) or ["Z"])[0] in ("Z", "X"):
            end_group(pgid)
            return
        time.sleep(every)


def _served(url: str) -> tuple[float, float] | None:
    """(requests answered, requests running) from the server's /metrics; None when it does not answer."""
    from specscope.client import metrics  # HTTP only in the idle guard
    from specscope.errors import SpecScopeError

    try:
        snapshot = metrics.scrape(url, timeout=5.0)
    except SpecScopeError:
        return None
    return snapshot.requests_finished, snapshot.requests_running


def watch_idle(
    url: str,
    pgid: int,
    limit_s: float,
    state_file: str | None = None,
    every: float = 15.0,
    served: Callable[[str], tuple[float, float] | None] = _served,
) -> None:
    """End group ``pgid`` once its server has answered no request and run none for ``limit_s`` seconds
    (asleep counts as unused; the time before it first answers, its start, does not), then remove its state
    file; return early once the group is empty."""
    last, since = served(url), time.monotonic()
    while procfs.group_pids(pgid):
        time.sleep(every)
        now = served(url)
        if last is None or (now is not None and (now != last or now[1] > 0)):
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= limit_s:
            end_group(pgid)
            if state_file:
                Path(state_file).unlink(missing_ok=True)
            return


def _detach(args: list[str], env: dict[str, str] | None) -> None:
    subprocess.run(
        [sys.executable, "-m", "specscope.launch.guard", "--spawn", *args],
        env=env,
        check=False,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def detach(owner: int, pgid: int, env: dict[str, str] | None = None) -> None:
    """Start a guard that is not a child of the calling process (a process in between exits at once)."""
    _detach([str(owner), str(pgid)], env)


def detach_idle(url: str, pgid: int, limit_s: float, state_file: str, env: dict[str, str] | None = None) -> None:
    """Start an idle guard beside a kept server (not a child of the calling process)."""
    _detach(["--idle", str(limit_s), url, str(pgid), state_file], env)


if __name__ == "__main__":
    if sys.argv[1] == "--spawn":
        subprocess.Popen(
            [sys.executable, "-m", "specscope.launch.guard", *sys.argv[2:]],
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    elif sys.argv[1] == "--idle":
        limit = float(sys.argv[2])
        watch_idle(sys.argv[3], int(sys.argv[4]), limit, sys.argv[5], every=min(15.0, max(0.5, limit / 4)))
    else:
        watch(int(sys.argv[1]), int(sys.argv[2]))
