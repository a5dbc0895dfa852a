"""The Ray executor: a sweep spread over a Ray cluster, one Ray task per server group (method, K).

Each task asks for what its server needs (GPUs = the preset's tensor-parallel size on GPU presets,
one CPU on CPU presets) and runs the local sweep on its node, limited to the group's cells, in a
scratch SpecScope home: same launch code and launch options, same measurement. Its servers die with
the task (a lost node leaves no server running).
As many groups run at once as the cluster fits. Every finished cell goes at once to a ``Ledger``
actor; the driver (the machine that ran ``specscope bench --ray``) hands it to the run's ``Recorder``,
as a local sweep does, so resume works unchanged. A task whose node is lost is retried once elsewhere
(Ray's ``max_retries``); the retry asks the ledger first and measures only the cells not finished yet,
so no cell is measured twice.

    result = run_on_ray(plan, address="ray://head:10001", options=LaunchOptions(), progress=print)
"""

from __future__ import annotations

import dataclasses
import os
import socket
import tempfile
import time
from types import ModuleType
from typing import Any

from specscope import settings
from specscope.client.progress import Progress, ProgressEvent
from specscope.engine import presets
from specscope.errors import ConfigError
from specscope.results import shared
from specscope.sweep import lock
from specscope.sweep.options import LaunchOptions, launcher_for
from specscope.sweep.plan import SweepPlan
from specscope.sweep.pool import Group
from specscope.sweep.record import FinishedCell, Recorder, SweepResult, finished_cells, read_cell, run_dir
from specscope.sweep.run import Stop, run_sweep, stop_asker

__all__ = ["needs", "connect", "configured_address", "run_on_ray"]

NODE_LOST_RETRIES = 1
HEAD_NODE = "node:__internal_head__"  # a resource only the head node has (Ray places its own state actors by it)


def _ray() -> ModuleType:
    try:
        import ray
    except ImportError:
        raise ConfigError(
            "Ray is not installed; install the cluster extra (pip install 'specscope[cluster]') "
            "or run the sweep without --ray."
        ) from None
    return ray


def needs(preset_name: str) -> dict[str, float]:
    """The Ray resources one server of the preset takes: GPUs = tensor-parallel size, else one CPU."""
    preset = presets.get_preset(preset_name)
    if preset.engine == "vllm-cpu":
        return {"CPU": 1.0}
    return {"CPU": 1.0, "GPU": float(preset.engine_args.get("tensor_parallel_size", 1))}


def configured_address() -> str | None:
    """The Ray cluster this machine is pointed at (``RAY_ADDRESS``), or None."""
    return os.environ.get("RAY_ADDRESS", "").strip() or None


def connect(address: str | None) -> None:
    """Join the Ray cluster at ``address`` (None: RAY_ADDRESS, else a cluster on this machine)."""
    ray = _ray()
    if ray.is_initialized():
        return
    where = address or configured_address() or "auto"
    if where != "auto" and not _answers(where):
        raise ConfigError(
            f"No Ray cluster answers at {where}; start one with `ray start --head` or give its address to --ray."
        )
    try:
        ray.init(address=where, log_to_driver=False, logging_level="ERROR")
    except (ray.exceptions.AuthenticationError, SystemExit) as exc:  # Ray exits when the GCS refuses it
        raise ConfigError(
            f"The Ray cluster at {where} did not let this machine in; a cluster with token "
            "authentication needs RAY_AUTH_MODE=token and its token here (RAY_AUTH_TOKEN_PATH or "
            "RAY_AUTH_TOKEN)."
        ) from exc
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise ConfigError(
            f"No Ray cluster answers at {where} ({str(exc).splitlines()[0][:160]}); start one "
            "with `ray start --head` or give its address to --ray."
        ) from exc


def _answers(address: str, timeout: float = 3.0) -> bool:
    """Something listens at the address's host:port (ray.init itself waits minutes for a dead one)."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def _check_fits(resources: dict[str, float]) -> None:
    ray = _ray()
    nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
    if any(all(node.get(name, 0) >= amount for name, amount in resources.items()) for node in nodes):
        return
    for name, amount in resources.items():
        most = max((node.get(name, 0) for node in nodes), default=0)
        if most < amount:
            raise ConfigError(
                f"No node of the Ray cluster has {amount:g} {name} for one server of this preset "
                f"(the most any node has is {most:g}); add such a node or pick another preset."
            )


def _ledger_class() -> Any:  # a Ray actor class
    ray = _ray()

    @ray.remote(num_cpus=0)
    class Ledger:
        """Finished cells and progress events, from every task to the driver."""

        def __init__(self, done: list[str]) -> None:
            self.done = set(done)
            self.cells: list[tuple[str, FinishedCell]] = []
            self.events: list[dict[str, Any]] = []
            self.stop_asked = False
            self.twice: list[str] = []

        def finished(self) -> list[str]:
            return sorted(self.done)

        def add(self, cell_id: str, finished: FinishedCell) -> bool:
            if cell_id in self.done:
                self.twice.append(cell_id)
                return False
            self.done.add(cell_id)
            self.cells.append((cell_id, finished))
            return True

        def event(self, event: dict[str, Any]) -> None:
            self.events.append(event)

        def stop(self) -> None:
            self.stop_asked = True

        def stopped(self) -> bool:
            return self.stop_asked

        def take(self) -> tuple[list[tuple[str, FinishedCell]], list[dict[str, Any]], list[str]]:
            cells, events, self.cells, self.events = self.cells, self.events, [], []
            return cells, events, self.twice

    return Ledger


def _answer(ref: Any, timeout: float = 120.0) -> Any:
    """The value of an actor call, without ``ray.get``: a task blocked in ``ray.get`` lends its CPU
    back to the node, which would then start a second server group beside this one."""
    return ref.future().result(timeout=timeout)


def _run_group(plan: SweepPlan, options: LaunchOptions, cell_ids: list[str], ledger: Any) -> dict[str, Any]:
    """On a node: measure the group's unfinished cells on a server of its own; returns where it ran."""
    import ray

    todo = set(cell_ids) - set(_answer(ledger.finished.remote()))
    started = time.time()

    def emit(event: ProgressEvent) -> None:
        if event.stage in ("cell_done", "cell_failed"):
            ledger.add.remote(event.cell, read_cell(plan.run_id, event.cell))
        if event.stage != "sweep_done":
            ledger.event.remote(dataclasses.asdict(event))

    # a scratch home without the shared store: the driver keeps and publishes the run
    with tempfile.TemporaryDirectory(prefix="specscope-ray-") as scratch, settings.home_at(scratch):
        launcher = launcher_for(plan.spec, options, fresh=True)
        run_sweep(plan, launcher, emit, stop=lambda: _answer(ledger.stopped.remote()), only=todo)
    _answer(ledger.finished.remote())  # the ledger has every cell this task sent before it returns
    return {
        "node": ray.get_runtime_context().get_node_id(),
        "host": socket.gethostname(),
        "cells": sorted(todo),
        "start": started,
        "end": time.time(),
        "launch": {
            **dataclasses.asdict(options),
            "starts_at_once": getattr(launcher, "starts_at_once", None),
            "sleeps": bool(getattr(launcher, "sleeps", False)),
        },
    }


def run_on_ray(
    plan: SweepPlan,
    address: str | None = None,
    options: LaunchOptions = LaunchOptions(),
    progress: Progress | None = None,
    stop: Stop = None,
) -> SweepResult:
    """Run (or resume) a sweep's plan with one Ray task per server group, each launching its servers as
    ``options`` say; returns what ran, had finished earlier and failed, and (in ``groups``) the node and time span of
    each group. ``stop``: every group ends after its current cell."""
    spec = plan.spec
    if spec.servers or spec.baseline_alongside:
        raise ConfigError(
            "A Ray sweep starts its own servers one group per task; leave out --servers and "
            "--baseline-alongside, or run the sweep without --ray."
        )
    if spec.k_schedule == "auto":
        raise ConfigError(
            "A Ray sweep runs its groups at once, so no schedule can be advised from its fixed K "
            "first; give the schedule as text (e.g. 1-2:4,3-8:2) or run without --ray."
        )
    if options.keep:
        raise ConfigError(
            "A Ray sweep's servers end with their task on each node, so none can be kept; leave out "
            "--keep, or run the sweep without --ray."
        )
    ray = _ray()
    resources = needs(spec.preset)
    connect(address)
    _check_fits(resources)
    run_id, cells = plan.run_id, list(plan.cells)
    recorder = Recorder(run_id, len(cells), progress or (lambda event: None))
    result = recorder.result
    ok = {cell_id for cell_id, finished in finished_cells(run_id).items() if finished.ok}
    groups: dict[Group, list[str]] = {}
    for cell in cells:
        if cell.cell_id in ok:
            recorder.skipped(cell.cell_id)
        else:
            groups.setdefault(cell.group, []).append(cell.cell_id)
    stopped = stop_asker(stop)
    run_dir(run_id).mkdir(parents=True, exist_ok=True)
    with lock.run(run_id):
        # on the head node: a lost worker node must not take the finished cells' ledger with it
        ledger = _ledger_class().options(resources={HEAD_NODE: 0.001}).remote(sorted(ok))
        task = ray.remote(_run_group).options(
            num_cpus=resources.get("CPU", 0),
            num_gpus=resources.get("GPU", 0),
            max_retries=NODE_LOST_RETRIES,
            retry_exceptions=False,
        )
        pending = {task.remote(plan, options, ids, ledger): key for key, ids in groups.items()}

        def drain() -> None:
            new_cells, events, result.measured_twice = ray.get(ledger.take.remote())
            for event in events:
                if event["stage"] not in ("cell_done", "cell_failed"):
                    recorder.emit(ProgressEvent(**{**event, "cells_done": recorder.done, "cells_total": len(cells)}))
            for cell_id, finished in new_cells:
                recorder.record(cell_id, finished)

        try:
            while pending:
                ready, _ = ray.wait(list(pending), timeout=1.0)
                if stopped():
                    ledger.stop.remote()
                drain()
                for ref in ready:
                    _group_ended(ray, ref, pending.pop(ref), groups, result)
            drain()
        finally:
            for ref in pending:
                ray.cancel(ref, force=True)
            if finished_cells(run_id):
                result.upload_problem = shared.publish(run_id)
    result.stopped = recorder.done < recorder.total and stopped()
    counts = f"{len(result.ran)} ran, {len(result.skipped)} finished earlier, {len(result.failed)} failed"
    recorder.event(
        "sweep_done",
        message=f"stopped after {recorder.done} of {recorder.total} cells ({counts}); start "
        "the same sweep again to resume"
        if result.stopped
        else counts,
    )
    return result


def _group_ended(ray: ModuleType, ref: Any, group: Group, groups: dict[Group, list[str]], result: SweepResult) -> None:
    """Note where a finished group ran, or fail its unfinished cells with the cluster's reason."""
    method, k, k_schedule, vllm = group
    try:
        result.groups.append({"method": method, "k": k, "k_schedule": k_schedule, "vllm": vllm, **ray.get(ref)})
    except (ray.exceptions.RayError, OSError) as exc:
        cause = getattr(exc, "cause", None)  # a task's own error, e.g. a SpecScopeError
        text = str(cause) if cause is not None else str(exc).strip().splitlines()[-1]
        what = (f"schedule {k_schedule}" if k_schedule else f"K={k}") + (f" on vLLM {vllm}" if vllm else "")
        reason = f"The {method} {what} group failed on the cluster: {text[:300]}"
        for cell_id in groups[group]:
            if cell_id not in result.ran and cell_id not in result.failed:
                result.failed[cell_id] = reason
