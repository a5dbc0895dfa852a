"""The sweep's two Launchers (``sweep.server``), each starting and stopping the server of one (method, K).
``PresetLauncher`` starts a preset's servers through ``specscope.launch`` (or reuses a running one
configured exactly alike); ``ServersLauncher`` measures servers that already run."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from specscope import launch
from specscope.client import probe
from specscope.engine.k_schedule import KSchedule
from specscope.engine.presets import get_preset
from specscope.errors import ServerUnreachable, SpecScopeError
from specscope.launch import gpus, kept
from specscope.sweep.room import cpu_room, gpu_need, starts_fitting
from specscope.sweep.server import RunningServer, _from_state, _group_pids, _name, _state
from specscope.sweep.synthetic import Synthetic

__all__ = ["PresetLauncher", "ServersLauncher"]


class PresetLauncher:
    """A Launcher on ``specscope.launch``: servers of one preset, one method and K at a time."""

    def __init__(
        self,
        preset: str,
        start_timeout: float = 600.0,
        reuse: bool = True,
        die_with_parent: bool = False,
        synthetic: Synthetic = Synthetic(),
        sleep_mode: bool | None = None,
        devices: str | None = None,
        starts_at_once: int | None = None,
        keep: bool = False,
    ):
        self.preset = preset
        found = get_preset(preset)
        gpu = found.engine != "vllm-cpu"
        self.start_timeout = start_timeout  # a CPU server on a busy machine can take minutes
        self.reuse = reuse  # False: every server is the sweep's own (e.g. fresh per cell)
        self.die_with_parent = die_with_parent  # servers end with this process (a Ray task's)
        self.synthetic = synthetic  # how drafts are accepted (synthetically at set rates, or by the target)
        self.gpu = gpu
        self.sleeps = gpu and sleep_mode is not False  # on a GPU, servers sleep between their cells by default
        self.keep = keep  # its servers stay after the sweep, for the lease (``launch.kept``)
        self.devices = devices  # the GPUs its servers run on (None: those visible)
        self.held: set[str] = set()  # names of servers handed out and not yet let go: the sweep's pool sleeps them
        self.tp = int(found.engine_args.get("tensor_parallel_size", 1))
        # CPU servers run side by side as memory allows, starting a core each at once; on a GPU, servers that
        # sleep start and stay awake as their memory shares allow (idle, they cost nothing), else one at a time
        if not gpu:
            self.max_servers = cpu_room()
            self.starts_at_once = starts_at_once or min(os.cpu_count() or 1, self.max_servers)
        else:
            card = gpus.memory_bytes(devices or ",".join(gpus.visible()))  # placed, else the smallest card
            self.starts_at_once = (starts_at_once or starts_fitting(found, card)) if self.sleeps else 1
            self.max_servers = self.starts_at_once

    def _options(self) -> dict[str, Any]:
        return {
            "start_timeout": self.start_timeout,
            "reuse": self.reuse,
            "die_with_parent": self.die_with_parent,
            "synthetic": self.synthetic,
            "keep": self.keep,
            "sleep_mode": self.sleeps,
            "starts_at_once": self.starts_at_once,
        }

    def lanes(self) -> list[PresetLauncher]:
        """One launcher per GPU slot of this node (tensor-parallel size GPUs each), whose servers run
        side by side; just this one on a CPU, when placed already, or on a node of one slot (which it
        then takes, so its rows name the GPUs its servers run on)."""
        if self.devices is not None or not self.gpu:
            return [self]
        slots = gpus.slots(gpus.visible(), self.tp)
        if len(slots) < 2:
            self.devices = slots[0] if slots else None
            return [self]
        return [PresetLauncher(self.preset, devices=slot, **self._options()) for slot in slots]

    def _plan(
        self, method: str, k: int, name: str | None = None, k_schedule: KSchedule | None = None, vllm: str | None = None
    ) -> launch.LaunchPlan:
        extra = self.synthetic.keys(k)
        placement = {"gpus": self.devices, "sleep_mode": True} if self.sleeps else {"gpus": self.devices}
        return launch.plan_for(
            self.preset,
            method,
            k or None,
            name=name,
            k_schedule=k_schedule,
            spec_extra=extra,
            **({"vllm_choice": vllm} if vllm else {}),
            **{key: value for key, value in placement.items() if value},
        )

    def check(self, method: str, k: int, k_schedule: KSchedule | None = None, vllm: str | None = None) -> None:
        """Plan the server without starting it: ConfigError on a missing model, vLLM or package."""
        self._plan(method, k, k_schedule=k_schedule, vllm=vllm)

    def _running_alike(self, plan: launch.LaunchPlan) -> RunningServer | None:
        """A running server configured exactly as ``plan`` says, where this launcher reuses servers."""
        running = launch.find_reusable(plan.state) if self.reuse else None
        return _from_state(running, reused=True) if running is not None else None

    def _free_named(self, plan: launch.LaunchPlan, method: str, k: int, options: dict[str, Any]) -> launch.LaunchPlan:
        """``plan`` under a name no registered server has."""
        name = launch.unused_name(plan.state.name)
        return plan if name == plan.state.name else self._plan(method, k, name=name, **options)

    def start(self, method: str, k: int, k_schedule: KSchedule | None = None, vllm: str | None = None) -> RunningServer:
        """Reuse a running server configured exactly like this (method, K, schedule, vLLM), else start
        one under a free name; K=0 means the baseline takes no K."""
        options: dict[str, Any] = {"k_schedule": k_schedule, "vllm": vllm}
        plan = self._plan(method, k, **options)
        if (running := self._running_alike(plan)) is None:
            self._make_room()
            running = _from_state(
                launch.start(
                    self._free_named(plan, method, k, options),
                    timeout=self.start_timeout,
                    die_with_parent=self.die_with_parent,
                    warm=False,
                    keep_for=self._keep_for(),
                ),
                reused=False,
            )
        return self._hold(running)

    def _hold(self, server: RunningServer) -> RunningServer:
        self.held.add(_name(server))
        return server

    def _keep_for(self) -> float | None:
        return kept.idle_limit() if self.keep else None

    def _make_room(self, using: Iterable[RunningServer] = (), starting: int = 1) -> None:
        """On a GPU, sleep idle kept servers but those about to be used and those handed out (the pool sleeps
        them); where the card still lacks what ``starting`` servers need, stop kept servers of earlier work."""
        if not self.gpu:
            return
        keep, slot = {_name(server) for server in using} | self.held, self.devices or ",".join(gpus.visible())
        kept.make_room(keep)
        if need := gpu_need(get_preset(self.preset), gpus.memory_bytes(slot)):
            kept.free_memory(need * starting, lambda: gpus.free_bytes(slot), keep)

    def start_many(self, wanted: list[tuple[str, int, dict[str, Any]]]) -> list[RunningServer | SpecScopeError]:
        """Start several (method, K, options) servers at once, each under a free name (a running server
        configured exactly like one is reused, as ``start`` does); per server what ``start`` returns,
        or the error that ended its start."""
        found = [self._running_alike(self._plan(method, k, **options)) for method, k, options in wanted]
        fresh = [want for want, server in zip(wanted, found) if server is None]
        if fresh:
            self._make_room([server for server in found if server is not None], starting=len(fresh))
        # planned lazily: each name (and core) is chosen once the one before is registered
        plans = (self._free_named(self._plan(method, k, **options), method, k, options) for method, k, options in fresh)
        started = iter(
            launch.start_together(
                plans,
                timeout=self.start_timeout,
                warm=False,
                die_with_parent=self.die_with_parent,
                keep_for=self._keep_for(),
            )
            if fresh
            else []
        )
        out: list[RunningServer | SpecScopeError] = []
        for server in found:
            if server is None:
                state, failure = next(started)
                out.append(failure if failure is not None else self._hold(_from_state(state, reused=False)))
            else:
                out.append(self._hold(server))
        return out

    def pids(self, server: RunningServer) -> list[int]:
        """The processes of the server's group, for the core-sharing check."""
        return _group_pids(server)

    def stop(self, server: RunningServer) -> None:
        """Stop a server the sweep started; a reused one keeps running."""
        self.held.discard(_name(server))
        if not server.reused:
            launch.stop(_state(server))

    def release(self, server: RunningServer) -> None:
        """Done with a server: a kept one stays for the lease (its idle guard ends it), else ``stop``."""
        self.held.discard(_name(server))
        if not self.keep:
            self.stop(server)

    def death(self, server: RunningServer) -> str | None:
        """None while the server's process lives; else how it ended."""
        return launch.death(_state(server))


class ServersLauncher:
    """A Launcher over servers that already run (``SweepSpec.servers``): never starts or stops one."""

    def __init__(self, servers: tuple[tuple[str, str, int], ...]):
        self.names = {(method, k): name for name, method, k in servers}

    def check(self, method: str, k: int) -> None:
        """UnknownServer when the server is no longer known."""
        launch.find(self.names[(method, k)])

    def start(self, method: str, k: int) -> RunningServer:
        """The known server of this (method, K), if it answers /health."""
        state = launch.find(self.names[(method, k)])
        if not probe.healthy(state.url):
            raise ServerUnreachable(
                f"The server {state.name} does not answer at {state.url}/health; check that it runs."
            )
        return _from_state(state, reused=True)

    def pids(self, server: RunningServer) -> list[int]:
        """The processes of a launched server's group; none for an attached one."""
        return _group_pids(server)

    def stop(self, server: RunningServer) -> None:
        """Nothing: the servers were running before the sweep and keep running."""

    def death(self, server: RunningServer) -> str | None:
        """None while the server answers /health; else one sentence."""
        state = _state(server)
        if state.attached:
            return None if probe.healthy(state.url) else f"The server {state.name} stopped answering at {state.url}."
        return launch.death(state)
