"""Servers kept for the lease: a GPU sweep's servers stay after it ends, so the next sweep, Live, ``serve`` and
the dashboard reuse any server configured alike instead of starting it again (a start is minutes on a GPU).

A kept server ends itself after ``idle_limit()`` seconds unused (its idle guard, ``launch.guard``), or with
``specscope stop``. Who sleeps is decided by GPU memory, as in a sweep: before anything starts on a GPU,
``make_room`` puts the idle kept servers to sleep (vLLM's sleep mode gives their memory back; waking takes
under a second), and whoever uses one wakes it first (``wake``). A sleeping server still holds 2-3 GiB (its
CUDA context and graphs: five on an H100 held 13 GiB, and a sixth start found 22.9 of the 23.8 GiB it needed), so
where a start still lacks memory, ``free_memory`` stops kept servers, the sleeping and the oldest first.

    awake(state)          # True, False (asleep), or None where it has no sleep mode
    gpu_memory_mib(state) # what its processes hold on the GPUs (nvidia-smi), None where none
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Collection

from specscope import procfs
from specscope.client import sleepmode
from specscope.errors import SpecScopeError
from specscope.launch.registry import ServerState, read_states

__all__ = ["IDLE_LIMIT_S", "idle_limit", "awake", "wake", "gpu_memory_mib", "make_room", "free_memory"]

IDLE_LIMIT_S = 1800.0  # half an hour unused: the next sweep or demo of a lease finds it, a forgotten one ends


def idle_limit() -> float:
    """How long a kept server may sit unused before it ends itself (``SPECSCOPE_IDLE_LIMIT`` seconds)."""
    return float(os.environ.get("SPECSCOPE_IDLE_LIMIT", IDLE_LIMIT_S))


def awake(state: ServerState) -> bool | None:
    """Whether a launched server is awake; None where it has no sleep mode (or does not answer)."""
    if sleepmode.SLEEP_FLAG not in state.argv:
        return None
    try:
        return not sleepmode.is_sleeping(state.url)
    except SpecScopeError:
        return None


def wake(state: ServerState) -> bool:
    """Wake the server if it sleeps; whether it slept."""
    if awake(state) is not False:
        return False
    sleepmode.wake_up(state.url)
    return True


def gpu_memory_mib(state: ServerState) -> int | None:
    """GPU memory the server's process group holds (nvidia-smi's compute apps), None where it holds none
    or nvidia-smi does not answer."""
    if state.pgid is None:
        return None
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    pids = set(procfs.group_pids(state.pgid))
    held = [
        int(used)
        for pid, used in (line.split(",") for line in done.stdout.splitlines() if "," in line)
        if pid.strip().isdigit() and int(pid) in pids and used.strip().isdigit()
    ]
    return sum(held) or None


def make_room(using: Collection[str] = ()) -> list[str]:
    """Put every awake kept server to sleep but those named in ``using`` (and those busy with requests), so
    a start on the GPU finds its memory; returns the names put to sleep."""
    from specscope.client import metrics  # HTTP only when room is made

    slept = []
    for state in read_states():
        if state.idle_limit_s is None or state.name in using or not procfs.alive(state.pid, state.pgid):
            continue
        try:
            if awake(state) and metrics.scrape(state.url, timeout=3.0).requests_running == 0:
                sleepmode.fall_asleep(state.url)
                slept.append(state.name)
        except SpecScopeError:
            continue
    return slept


def free_memory(
    need_bytes: int, free_bytes: Callable[[], int | None], using: Collection[str] = (), settle_s: float = 10.0
) -> list[str]:
    """Stop kept servers (not those in ``using``, nor any busy with requests) until ``free_bytes()`` reads at
    least ``need_bytes``: sleeping ones first, the oldest first. Returns the names stopped."""
    from specscope.client import metrics  # HTTP only when memory is short
    from specscope.launch.process import stop

    free = free_bytes()
    if free is None or free >= need_bytes:
        return []
    spare = [
        s for s in read_states() if s.idle_limit_s is not None and s.name not in using and procfs.alive(s.pid, s.pgid)
    ]
    stopped = []
    for state in sorted(spare, key=lambda s: (awake(s) is not False, s.started_at)):
        try:
            if metrics.scrape(state.url, timeout=3.0).requests_running:
                continue
        except SpecScopeError:
            pass  # no answer: nothing it serves is lost
        stop(state)
        stopped.append(state.name)
        deadline = time.monotonic() + settle_s  # the driver hands the memory back shortly after the exit
        while (free := free_bytes()) is not None and free < need_bytes and time.monotonic() < deadline:
            time.sleep(0.5)
        if free is None or free >= need_bytes:
            break
    return stopped
