"""Which servers a sweep holds up when: each server group's server is started (or reused) before its
first cell and stopped after its last. Where the launcher holds fewer awake at once (``max_servers``:
as many as GPU or CPU memory holds), the one needed furthest ahead makes room: a server
that sleeps (vLLM's sleep mode, on a GPU) falls asleep and is woken when its turn comes, any other
is stopped and started again. A launcher that starts several servers at once (``starts_at_once``: CPU
servers a core each, GPU servers as their memory shares fit) starts the next groups due beside the one
needed; those beyond what stays awake sleep until their turn."""

from __future__ import annotations

import bisect
import time
from collections import defaultdict
from collections.abc import Collection
from typing import cast

from specscope.client import serverlog, sleepmode
from specscope.engine.k_schedule import KSchedule, parse
from specscope.errors import ServerError, SpecScopeError
from specscope.schema import BASELINE_METHOD
from specscope.sweep.server import Launcher, ManyLauncher, RunningServer
from specscope.sweep.spec import Cell

__all__ = ["Group", "Pending", "evict", "schedule_arg", "vllm_arg", "ServerPool", "WakeFailed"]

Group = tuple[str, int, str | None, str | None]  # (method, K, schedule, vLLM): one server


class WakeFailed(ServerError):
    """A sleeping server answered its wake-up with an error (vLLM re-maps its memory there, so a GPU that
    another server filled meanwhile fails it): the server is restarted rather than its cells lost."""


class Pending:
    """The cells a sweep still runs, by index, with each server group's uses: cells ``done`` (finished in an earlier
    run) are left out, so no server is started, kept awake or held for them."""

    def __init__(self, cells: list[Cell], done: Collection[str] = ()):
        self.size = len(cells)
        self.cells = [(i, c) for i, c in enumerate(cells) if c.cell_id not in done]
        self.uses: defaultdict[Group, list[int]] = defaultdict(list)
        for i, cell in self.cells:
            self.uses[cell.group].append(i)
        self.last_use = {group: at[-1] for group, at in self.uses.items()}

    def next_use(self, group: Group, index: int) -> int:
        """The index of the group's next cell from ``index`` on (``size`` when it has none)."""
        at = self.uses.get(group, [])
        found = bisect.bisect_left(at, index)
        return at[found] if found < len(at) else self.size

    def after(self, index: int) -> list[Cell]:
        """The cells after ``index``, in order."""
        return [c for i, c in self.cells if i > index]


def furthest_ahead(pending: Pending, index: int, groups: list[Group]) -> list[Group]:
    """``groups`` ordered by their next cell from ``index`` on, the one needed furthest ahead first."""
    return sorted(groups, key=lambda g: pending.next_use(g, index), reverse=True)


def evict(pending: Pending, index: int, live: list[Group], limit: int | None, keep_baseline: bool) -> list[Group]:
    """The live servers to stop before cell ``index`` starts a new one, so no more than ``limit``
    run (``keep_baseline``: the baseline's server is kept beside them): those needed furthest ahead."""
    counted = [g for g in live if not (keep_baseline and g[0] == BASELINE_METHOD)]
    if limit is None or len(counted) < limit:
        return []
    return furthest_ahead(pending, index, counted)[: len(counted) - limit + 1]


def schedule_arg(text: str | None) -> dict[str, KSchedule]:
    """The launcher's keyword for a schedule server (none for a fixed K, so any Launcher serves)."""
    return {"k_schedule": parse(text)} if text else {}


def vllm_arg(vllm: str | None) -> dict[str, str]:
    """The launcher's keyword for a server on a named vLLM (none for the preset's, so any Launcher serves)."""
    return {"vllm": vllm} if vllm else {}


class ServerPool:
    """The servers of a sweep's cells, by group, with the requests each has answered (its earlier
    ones included, for the hygiene checks), which of them sleep, and where the time went
    (``seconds``: start, wake, sleep)."""

    def __init__(self, launcher: Launcher, cells: list[Cell], keep_baseline: bool = False, done: Collection[str] = ()):
        self.launcher = launcher
        self.cells = cells
        self.pending = Pending(cells, done)
        self.keep_baseline = keep_baseline
        self.limit = getattr(launcher, "max_servers", None)
        self.sleeps = bool(getattr(launcher, "sleeps", False))
        self.at_once = max(1, int(getattr(launcher, "starts_at_once", 1)))
        self.servers: dict[Group, RunningServer] = {}
        self.served: dict[Group, int] = {}
        self.asleep: set[Group] = set()
        self.failed: dict[Group, str] = {}  # groups started ahead in a wave whose server did not start
        self.seconds: defaultdict[str, float] = defaultdict(float)  # part -> seconds
        self.started = 0  # servers this pool started (not reused)
        self.restarts = 0  # servers stopped and started again because they would not wake

    def get(self, group: Group) -> RunningServer | None:
        """The group's server while it is up (awake or asleep)."""
        return self.servers.get(group)

    def _awake(self) -> list[Group]:
        return [g for g in self.servers if g not in self.asleep]

    def _make_room(self, index: int) -> None:
        for victim in evict(self.pending, index, self._awake(), self.limit, self.keep_baseline):
            self._put_away(victim, index)

    def _put_away(self, group: Group, index: int) -> None:
        """Sleep a server needed again later, where it can; stop it otherwise."""
        needed = self.pending.next_use(group, index) < self.pending.size
        if self.sleeps and needed:
            began = time.monotonic()
            try:
                sleepmode.fall_asleep(self.servers[group].url)
                self.asleep.add(group)
                return
            except SpecScopeError:
                pass  # no sleep after all: stop it, and start it again when its turn comes
            finally:
                self.seconds["sleep"] += time.monotonic() - began
        self.retire(group)

    def _due(self, index: int, group: Group, cell: Cell) -> list[tuple[Group, Cell]]:
        """``group`` and the next groups due after cell ``index`` that start beside it (a wave): servers that
        sleep, as many as start at once beside those awake (the memory shares of ``starts_at_once`` fit in
        all); others, ``starts_at_once`` of them as long as no more than ``max_servers`` run."""
        awake = len(self._awake())
        size = self.at_once - awake if self.sleeps else min(self.at_once, (self.limit or self.at_once) - awake)
        wave = [(group, cell)]
        for later in self.pending.after(index):
            if len(wave) >= size:
                break
            g = later.group
            if g in self.servers or g in self.failed or any(g == w for w, _ in wave) or later.k_schedule == "auto":
                continue  # an `auto` schedule is advised from this run's cells: it cannot start ahead
            wave.append((g, later))
        return wave

    def start(self, index: int, group: Group, cell: Cell) -> RunningServer:
        """Start (or reuse) ``group``'s server as ``cell`` says (an advised schedule's K) before cell
        ``index``, first making room; a launcher that starts several at once starts the next groups
        due beside it, which then sleep. Raises the SpecScopeError of the needed server's start."""
        self._make_room(index)
        wave = self._due(index, group, cell)
        began = time.monotonic()
        if len(wave) == 1:
            started: list[RunningServer | SpecScopeError] = [self._start_one(cell)]
        else:
            # a wave of several needs starts_at_once > 1, which only a launcher with start_many has
            many = cast(ManyLauncher, self.launcher)
            started = many.start_many(
                [(c.method, c.k, {**schedule_arg(c.k_schedule), **vllm_arg(c.vllm)}) for _, c in wave]
            )
        self.seconds["start"] += time.monotonic() - began
        for (g, _), outcome in zip(wave, started):
            if isinstance(outcome, SpecScopeError):
                self.failed[g] = str(outcome)
                continue
            self.servers[g], self.served[g] = outcome, outcome.prior_requests
            self.started += not outcome.reused
            if outcome.asleep:  # a kept server found asleep: woken when its turn comes
                self.asleep.add(g)
        self._sleep_beyond_limit(index, [g for g, _ in wave[1:] if g in self.servers])
        if isinstance(started[0], SpecScopeError):
            self.failed.pop(group, None)
            raise started[0]
        try:
            self.wake(index, group)
        except WakeFailed:  # a kept server that would not wake: a fresh one instead
            self.drop_unwakeable(group)
            fresh = self._start_one(cell)
            if isinstance(fresh, SpecScopeError):
                raise fresh from None
            self.servers[group], self.served[group] = fresh, fresh.prior_requests
            self.started += not fresh.reused
        return self.servers[group]

    def _sleep_beyond_limit(self, index: int, ahead: list[Group]) -> None:
        """Put away the servers started ahead in a wave that are more than the launcher keeps awake
        (an idle awake server costs the measured one nothing but memory): those needed furthest ahead."""
        excess = len(self._awake()) - (self.limit or len(self.servers))
        for group in furthest_ahead(self.pending, index, ahead)[: max(0, excess)]:
            self._put_away(group, index)

    def _start_one(self, cell: Cell) -> RunningServer | SpecScopeError:
        try:
            return self.launcher.start(cell.method, cell.k, **schedule_arg(cell.k_schedule), **vllm_arg(cell.vllm))
        except SpecScopeError as exc:
            return exc

    def wake(self, index: int, group: Group) -> bool:
        """Wake ``group``'s server if it sleeps, first making room; whether it slept."""
        if group not in self.asleep and not self._slept_elsewhere(group):
            return False
        self.asleep.discard(group)  # counted awake while room is made for it
        others = [g for g in self._awake() if g != group]
        for victim in evict(self.pending, index, others, self.limit, self.keep_baseline):
            self._put_away(victim, index)
        began = time.monotonic()
        server = self.servers[group]
        offset = serverlog.offset(server.log_path)
        try:
            sleepmode.wake_up(server.url)
        except SpecScopeError as exc:
            raise WakeFailed(f"{exc} {serverlog.cause_since(server.log_path, offset)}".strip()) from exc
        finally:
            self.seconds["wake"] += time.monotonic() - began
        return True

    def drop_unwakeable(self, group: Group) -> None:
        """Stop ``group``'s server, which would not wake: its next start is a fresh one."""
        self.retire(group)
        self.restarts += 1

    def _slept_elsewhere(self, group: Group) -> bool:
        """Whether a server counted awake sleeps after all (a start elsewhere on the GPU made room by putting
        idle kept servers to sleep): a request to it would wait for ever, so it is counted asleep, to be woken."""
        if not self.sleeps:
            return False
        try:
            slept = sleepmode.is_sleeping(self.servers[group].url)
        except SpecScopeError:
            return False  # no answer on its sleep: the cell finds out what is wrong
        if slept:
            self.asleep.add(group)
        return slept

    def answered(self, group: Group, requests: int) -> None:
        """Count requests the group's server answered."""
        self.served[group] += requests

    def done_with(self, group: Group, index: int, now: bool = False) -> None:
        """Release the group's server after cell ``index`` if that was its last cell; stop it ``now`` (a failed
        cell, a fresh server per cell)."""
        if now:
            self.retire(group)
        elif self.pending.last_use.get(group) == index:
            self.retire(group, end=False)

    def retire(self, group: Group, end: bool = True) -> None:
        """Stop the group's server (``end``), or release it: a launcher that keeps servers for the lease keeps it
        (a reused one keeps running either way: the launcher decides)."""
        server = self.servers.pop(group, None)
        self.served.pop(group, None)
        self.asleep.discard(group)
        if server is not None:
            (self.launcher.stop if end or not hasattr(self.launcher, "release") else self.launcher.release)(server)

    def close(self) -> None:
        """Release every server still up (kept ones stay for the lease)."""
        for group in list(self.servers):
            self.retire(group, end=False)
