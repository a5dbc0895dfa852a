"""Running a sweep here: every cell of its plan in order on the servers the pool holds up, each handed to
the run's ``Recorder`` as it finishes, so a killed sweep loses only the cell it was in and a rerun resumes."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, replace

from specscope.client import warmup
from specscope.client.load_spec import DEFAULT_OUTPUT_LEN
from specscope.client.progress import Progress
from specscope.engine.k_schedule import KSchedule
from specscope.errors import ConfigError, SpecScopeError
from specscope.results import shared
from specscope.schema import BASELINE_METHOD
from specscope.sweep import lock
from specscope.sweep.launchers import Launcher, RunningServer
from specscope.sweep.measure import failed_row, run_cell
from specscope.sweep.plan import SweepPlan, as_plan, typical_chars
from specscope.sweep.pool import Group, ServerPool, WakeFailed, schedule_arg, vllm_arg
from specscope.sweep.progress import Estimate
from specscope.sweep.record import (
    FinishedCell,
    Recorder,
    SweepResult,
    drop_if_empty,
    finished_cells,
    run_dir,
    write_run,
)
from specscope.sweep.spec import Cell, SweepSpec

__all__ = ["Advise", "Stop", "stop_asker", "run_sweep", "preflight", "advised_cell", "ramp_width", "time_split"]

Advise = Callable[[str, str, str, str], KSchedule]  # (model, method, dataset, run_id) -> the schedule for `auto`
Stop = threading.Event | Callable[[], bool] | None


def run_sweep(spec: SweepSpec | SweepPlan, launcher: Launcher, progress: Progress | None = None,
              stop: Stop = None, only: Collection[str] | None = None, advise: Advise | None = None) -> SweepResult:
    """Run (or resume) a sweep (a spec, or its plan resolved once) on this machine; returns which cells
    ran, were skipped and failed. ``stop`` (an event or a callable) is asked before each cell; ``only``
    limits the sweep to those cell ids (a Ray task's group); ``advise`` makes an ``auto`` schedule concrete
    once the method's fixed-K cells are saved."""
    plan = as_plan(spec)
    cells = [cell for cell in plan.cells if only is None or cell.cell_id in only]
    if advise is None and any(cell.k_schedule == "auto" for cell in cells):
        raise ConfigError("This sweep measures an `auto` K schedule but was given no advisor to choose it; "
                          "give the schedule as text (e.g. 1-2:4,3-8:2).")
    stopped = stop_asker(stop)
    preflight(launcher, list(dict.fromkeys(cell.group for cell in cells)))
    recorder = Recorder(plan.run_id, len(cells), Estimate(progress or (lambda event: None)))
    try:
        with lock.run(plan.run_id):
            _run_lanes(plan, cells, launcher, recorder, stopped, advise)
    finally:
        drop_if_empty(plan.run_id)
        if finished_cells(plan.run_id):  # the finished cells go to the shared store, if there is one
            recorder.result.upload_problem = shared.publish(plan.run_id)
    return recorder.result


def stop_asker(stop: Stop) -> Callable[[], bool]:
    """What is asked before each cell: an event's ``is_set``, the callable itself, or never."""
    if stop is None:
        return lambda: False
    if isinstance(stop, threading.Event):
        return stop.is_set
    return stop


def preflight(launcher: Launcher, groups: list[tuple[str, int, str | None, str | None]]) -> None:
    """One ConfigError naming every problem that would fail whole servers, before anything runs."""
    check = getattr(launcher, "check", None)
    if check is None:  # a launcher that cannot check ahead
        return
    problems: list[str] = []
    for method, k, text, vllm in groups:
        try:
            # an `auto` schedule has no K until it is advised: plan it as K=1 drafting 1
            check(method, (k or 1) if text else k, **schedule_arg(text if text != "auto" else "1:1"),
                  **vllm_arg(vllm))
        except SpecScopeError as exc:
            if str(exc) not in problems:
                problems.append(str(exc))
    if problems:
        raise ConfigError("The sweep cannot start: " + " ".join(problems))


def advised_cell(cell: Cell, run_id: str, dataset: str, advise: Advise | None) -> Cell:
    """An ``auto`` schedule cell made concrete: advised from this run's fixed-K cells of its method
    (their rows are stored by now), else from earlier stored results of that model."""
    if cell.k_schedule != "auto":
        return cell
    rows = [f.row for f in finished_cells(run_id).values() if f.row.get("method") == cell.method]
    models = [model for row in rows if (model := row.get("model"))]
    if not models or advise is None:
        raise ConfigError(f"No {cell.method} cell of this sweep was measured, so no schedule can be "
                          "advised; give the schedule itself.")
    advised = advise(models[0], cell.method, dataset, run_id)
    return replace(cell, k=advised.server_k, k_schedule=advised.text())


def _started(cell: Cell, what: str, server: RunningServer, seconds: float) -> str:
    """The progress line of a server start: how long it took, and what its vLLM cannot report."""
    if server.reused:
        return f"{cell.method} {what}: measuring a server already running"
    note = ""
    if cell.method != BASELINE_METHOD and not server.per_request:
        note = " (this vLLM reports no per-request acceptance: each cell's comes from /metrics)"
    return f"{cell.method} {what} started in {seconds:.0f} s{note}"


def ramp_width(cell: Cell, cells: Collection[Cell], gpu: bool) -> int:
    """The widest batch of a fresh server's ramp warm-up (``warmup.ramp``): up to 3 requests for a GPU server
    that drafts and is measured above concurrency 1 (what vLLM compiles on its first batch changes would stall
    such a server's first cell above 1), else 0: no ramp."""
    widest = max((c.concurrency for c in cells if c.group == cell.group), default=1)
    return min(3, widest) if gpu and cell.method != BASELINE_METHOD and widest > 1 else 0


def time_split(seconds: dict[str, float], lanes: int = 1) -> str:
    """Where a sweep's time went, in words: 'starts 131 s, wake-ups 1 s, warm-ups 9 s, measuring 40 s'."""
    names = (("start", "starts"), ("wake", "wake-ups"), ("sleep", "sleeps"), ("warm", "warm-ups"),
             ("measure", "measuring"))
    text = ", ".join(f"{word} {seconds[key]:.0f} s" for key, word in names if seconds.get(key))
    return text + (f" (summed over {lanes} GPU slots side by side)" if lanes > 1 and text else "")


def _lane_cells(cells: list[Cell], lanes: int) -> list[list[Cell]]:
    """Cells split by server group over ``lanes`` (most cells first onto the emptiest), plan order kept."""
    counts = Counter(cell.group for cell in cells)
    load, owner = [0] * lanes, {}
    for group, count in sorted(counts.items(), key=lambda item: -item[1]):
        lane = load.index(min(load))
        owner[group], load[lane] = lane, load[lane] + count
    return [[cell for cell in cells if owner[cell.group] == lane] for lane in range(lanes)]


def _run_lanes(plan: SweepPlan, cells: list[Cell], launcher: Launcher, recorder: Recorder,
               stopped: Callable[[], bool], advise: Advise | None) -> None:
    """The body of ``run_sweep`` under the run's lock: the cells on one launcher, or split by server
    group over its lanes (one per GPU slot), side by side."""
    lanes = launcher.lanes() if hasattr(launcher, "lanes") else [launcher]
    (run_dir(plan.run_id) / "spec.json").write_text(json.dumps(asdict(plan.spec), default=str, indent=1))
    parts = [cells] if len(lanes) == 1 else _lane_cells(cells, len(lanes))
    work = [_Lane(plan, part, lane, recorder, stopped, advise) for part, lane in zip(parts, lanes) if part]
    if len(work) == 1:
        work[0].run()
    else:
        with ThreadPoolExecutor(max_workers=len(work)) as pool:
            for done in [pool.submit(lane.run) for lane in work]:
                done.result()
    result = recorder.result
    result.results_path = write_run(plan.run_id) or result.results_path
    result.seconds = dict(recorder.seconds)
    result.stopped = recorder.done < recorder.total and stopped()
    split = time_split(recorder.seconds, len(lanes))
    counts = (f"{len(result.ran)} ran, {len(result.failed)} failed"
              + (f", {len(result.skipped)} reused from an earlier run" if result.skipped else ""))
    took = f"{recorder.elapsed_s():.0f} s" + (f" ({split})" if split else "")
    recorder.event("sweep_done", message=f"stopped after {recorder.done} of {recorder.total} cells ({counts}) in "
                   f"{took}; start the same sweep again to resume" if result.stopped else f"{counts}; done in {took}")


class _Lane:
    """One lane's cells in order on one launcher's servers, each recorded as it finishes."""

    def __init__(self, plan: SweepPlan, cells: list[Cell], launcher: Launcher, recorder: Recorder,
                 stopped: Callable[[], bool], advise: Advise | None):
        self.plan, self.cells, self.launcher, self.recorder = plan, cells, launcher, recorder
        self.stopped, self.advise = stopped, advise
        self.finished = finished_cells(plan.run_id)
        self.pool = ServerPool(launcher, cells, keep_baseline=plan.spec.baseline_alongside,
                               done=[cell_id for cell_id, finished in self.finished.items() if finished.ok])
        self.start_errors: dict[Group, str] = {}
        self.advised: dict[Group, Cell] = {}  # an `auto` schedule server's concrete cell

    def run(self) -> None:
        try:
            for index, cell in enumerate(self.cells):
                if (found := self.finished.get(cell.cell_id)) is not None and found.ok:
                    self.recorder.skipped(cell.cell_id)
                    self.pool.done_with(cell.group, index)
                    continue
                if self.stopped():
                    break
                self._ready(index, cell)
                self._measure(index, cell)
        finally:
            self.pool.close()
            for part, seconds in self.pool.seconds.items():
                self.recorder.timed(part, seconds)
            with self.recorder.lock:
                self.recorder.result.servers_started += self.pool.started

    def _warm(self, server: RunningServer, cell: Cell, what: str) -> None:
        spec, prompt_set = self.plan.spec, self.plan.prompt_set
        self.recorder.event("server", cell.cell_id, f"warming up {cell.method} {what} (not measured)")
        began = time.monotonic()
        warmup.warm_up(server.url, concurrency=cell.concurrency,
                       output_len=spec.output_len or DEFAULT_OUTPUT_LEN,
                       prompt_chars=typical_chars(prompt_set), temperature=spec.temperature, live=False,
                       formats=[p.response_format for p in prompt_set.prompts]
                       if spec.structured != "free" else ())  # each grammar compiled unmeasured
        self.recorder.timed("warm", time.monotonic() - began)

    def _ramp(self, server: RunningServer, cell: Cell, what: str) -> None:
        """Batches that grow and shrink (``warmup.ramp``) on a fresh server that needs them (``ramp_width``)."""
        width = ramp_width(cell, self.cells, gpu=getattr(self.launcher, "gpu", False))
        if not width:
            return
        self.recorder.event("server", cell.cell_id, f"warming up {cell.method} {what} at batch sizes 1 to {width}")
        began = time.monotonic()
        warmup.ramp(server.url, width=width, output_len=self.plan.spec.output_len or DEFAULT_OUTPUT_LEN,
                    prompt_chars=typical_chars(self.plan.prompt_set), temperature=self.plan.spec.temperature)
        self.recorder.timed("warm", time.monotonic() - began)

    def _ready(self, index: int, cell: Cell) -> None:
        """The cell's server started (or reused), or woken from sleep, and warmed; a failure to start or
        wake is kept in ``start_errors`` for its cells."""
        group, what = cell.group, f"schedule {cell.k_schedule}" if cell.k_schedule else f"K={cell.k}"
        if group in self.start_errors:
            return
        if (up := self.pool.get(group)) is not None:
            try:
                if self.pool.wake(index, group):
                    self.recorder.event("server", cell.cell_id, f"woke {cell.method} {what} from sleep")
                    self._warm(up, cell, what)
                return
            except WakeFailed as exc:  # a restart costs a start, not the cell
                self.pool.drop_unwakeable(group)
                self.recorder.event("server", cell.cell_id, f"{cell.method} {what} did not wake ({exc}); "
                                    "starting it again")
            except SpecScopeError as exc:
                self.pool.retire(group)
                self.start_errors[group] = f"The {cell.method} {what} server did not wake: {exc}"
                return
        self.recorder.event("server", cell.cell_id, f"starting {cell.method} {what}")
        try:
            self.advised[group] = advised_cell(cell, self.plan.run_id, self.plan.prompt_set.name, self.advise)
            began = time.monotonic()
            server = self.pool.start(index, group, self.advised[group])
            self.recorder.event("server", cell.cell_id, _started(cell, what, server, time.monotonic() - began))
            self._warm(server, cell, what)
            self._ramp(server, cell, what)
        except SpecScopeError as exc:
            self.start_errors[group] = f"The {cell.method} {what} server did not start: {exc}"
            if not any(f.ok for f in self.finished.values()) and not self.recorder.result.ran:
                # nothing measured: every cell would fail alike
                raise ConfigError(f"{self.start_errors[group]} Nothing was measured; fix this "
                                  "and start the sweep again.") from exc

    def _measure(self, index: int, planned: Cell) -> None:
        spec, prompt_set, group = self.plan.spec, self.plan.prompt_set, planned.group
        server = self.pool.get(group)
        cell = planned
        if group in self.advised:  # an `auto` schedule's cells carry the schedule its server drafts
            cell = replace(planned, k=self.advised[group].k, k_schedule=self.advised[group].k_schedule)
        if server is None:
            finished = FinishedCell(failed_row(spec, prompt_set, cell, None, None, self.start_errors[group]))
        else:
            began = time.monotonic()
            row, requests, outputs = run_cell(spec, prompt_set, cell, server, self.launcher, self.recorder.emit,
                                              self.recorder.done, self.recorder.total, self.pool.served[group])
            self.recorder.timed("measure", time.monotonic() - began)
            finished = FinishedCell(row, requests, outputs)
            self.pool.answered(group, len(requests))
            self.pool.done_with(group, index, now=not finished.ok or spec.restart_each_cell)
        self.recorder.record(cell.cell_id, finished)
