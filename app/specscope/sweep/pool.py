"""Which servers a sweep holds up when: each server group's server is started (or reused) before its
first cell and stopped after its last; where the launcher holds fewer at once (``max_servers``: one on
a GPU, as many as memory holds on a CPU), the one needed furthest ahead is stopped first."""

from __future__ import annotations

from specscope.schedule import KSchedule, parse
from specscope.schema import BASELINE_METHOD
from specscope.sweep.launchers import Launcher, RunningServer
from specscope.sweep.plan import last_use
from specscope.sweep.spec import Cell

__all__ = ["Group", "evict", "schedule_arg", "vllm_arg", "ServerPool"]

Group = tuple[str, int, str | None, str | None]  # (method, K, schedule, vLLM): one server


def evict(cells: list[Cell], index: int, live: list[tuple], limit: int | None, keep_baseline: bool) -> list[tuple]:
    """The live servers to stop before cell ``index`` starts a new one, so no more than ``limit``
    run (``keep_baseline``: the baseline's server is kept beside them): those needed furthest ahead."""
    counted = [g for g in live if not (keep_baseline and g[0] == BASELINE_METHOD)]
    if limit is None or len(counted) < limit:
        return []
    ahead = {g: next((i for i in range(index, len(cells)) if cells[i].group == g), len(cells)) for g in counted}
    return sorted(counted, key=ahead.get, reverse=True)[:len(counted) - limit + 1]


def schedule_arg(text: str | None) -> dict[str, KSchedule]:
    """The launcher's keyword for a schedule server (none for a fixed K, so any Launcher serves)."""
    return {"k_schedule": parse(text)} if text else {}


def vllm_arg(vllm: str | None) -> dict[str, str]:
    """The launcher's keyword for a server on a named vLLM (none for the preset's, so any Launcher serves)."""
    return {"vllm": vllm} if vllm else {}


class ServerPool:
    """The servers of a sweep's cells, by group, with the requests each has answered (its earlier
    ones included, for the hygiene checks)."""

    def __init__(self, launcher: Launcher, cells: list[Cell], keep_baseline: bool = False):
        self.launcher = launcher
        self.cells = cells
        self.keep_baseline = keep_baseline
        self.limit = getattr(launcher, "max_servers", None)
        self.last_use = last_use(cells)
        self.servers: dict[Group, RunningServer] = {}
        self.served: dict[Group, int] = {}

    def get(self, group: Group) -> RunningServer | None:
        """The group's server while it is up."""
        return self.servers.get(group)

    def start(self, index: int, group: Group, cell: Cell) -> RunningServer:
        """Start (or reuse) ``group``'s server as ``cell`` says (an advised schedule's K) before cell
        ``index``, first stopping the servers needed furthest ahead where the launcher holds no more."""
        for victim in evict(self.cells, index, list(self.servers), self.limit, self.keep_baseline):
            self.retire(victim)
        server = self.launcher.start(cell.method, cell.k, **schedule_arg(cell.schedule), **vllm_arg(cell.vllm))
        self.servers[group], self.served[group] = server, server.prior_requests
        return server

    def answered(self, group: Group, requests: int) -> None:
        """Count requests the group's server answered."""
        self.served[group] += requests

    def done_with(self, group: Group, index: int, now: bool = False) -> None:
        """Stop the group's server after cell ``index`` if that was its last cell (or ``now``)."""
        if now or self.last_use[group] == index:
            self.retire(group)

    def retire(self, group: Group) -> None:
        """Stop the group's server (a reused one keeps running: the launcher decides)."""
        server = self.servers.pop(group, None)
        self.served.pop(group, None)
        if server is not None:
            self.launcher.stop(server)

    def close(self) -> None:
        """Stop every server still up."""
        for group in list(self.servers):
            self.retire(group)
