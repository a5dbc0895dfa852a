"""Running a sweep: every cell of its plan in order on the servers the pool holds up, each kept as
it finishes, so a killed sweep loses only the cell it was in and a rerun resumes."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict

from specscope import bench, schedule, shared, warmup
from specscope.errors import ConfigError, SpecScopeError
from specscope.schema import BASELINE_METHOD
from specscope.sweep.launchers import Launcher, RunningServer
from specscope.sweep.measure import failed_row, run_cell
from specscope.sweep.plan import SweepPlan, as_plan, typical_chars
from specscope.sweep.pool import ServerPool, schedule_arg, vllm_arg
from specscope.sweep.progress import Estimate
from specscope.sweep.record import (SweepResult, drop_if_empty, finished_cells, keep, lock, run_dir,
                                    same_schedules, write_run)
from specscope.sweep.spec import Cell, SweepSpec

__all__ = ["run_sweep", "preflight", "advised_cell", "time_split"]


def run_sweep(spec: SweepSpec | SweepPlan, launcher: Launcher, progress: bench.Progress | None = None,
              stop: threading.Event | Callable[[], bool] | None = None,
              only: Collection[str] | None = None) -> SweepResult:
    """Run (or resume) a sweep (a spec, or its plan resolved once); returns which cells ran, were
    skipped and failed. ``stop`` (an event or a callable) is asked before each cell; ``only`` limits
    the sweep to those cell ids (a Ray task's group)."""
    plan = as_plan(spec)
    cells = [cell for cell in plan.cells if only is None or cell.cell_id in only]
    result = SweepResult(plan.run_id)
    emit = progress or (lambda event: None)
    stopped = getattr(stop, "is_set", stop) or (lambda: False)
    same_schedules(plan.run_id, cells)
    preflight(launcher, list(dict.fromkeys(cell.group for cell in cells)))
    try:
        with lock(plan.run_id):
            _run_lanes(plan, cells, launcher, result, emit, stopped)
    finally:
        drop_if_empty(plan.run_id)
        if finished_cells(plan.run_id):  # the finished cells go to the shared store, if there is one
            result.upload_problem = shared.publish(plan.run_id)
    return result


def preflight(launcher: Launcher, groups: list[tuple[str, int, str | None, str | None]]) -> None:
    """One ConfigError naming every problem that would fail whole servers, before anything runs."""
    check = getattr(launcher, "check", None)
    problems: list[str] = []
    for method, k, text, vllm in groups if check else []:
        try:
            # an `auto` schedule has no K until it is advised: plan it as K=1 drafting 1
            check(method, (k or 1) if text else k, **schedule_arg(text if text != "auto" else "1:1"),
                  **vllm_arg(vllm))
        except SpecScopeError as exc:
            if str(exc) not in problems:
                problems.append(str(exc))
    if problems:
        raise ConfigError("The sweep cannot start: " + " ".join(problems))


def advised_cell(cell: Cell, run_id: str, dataset: str) -> Cell:
    """An ``auto`` schedule cell made concrete: advised from this run's fixed-K cells of its method
    (their rows are stored by now), else from earlier stored results of that model."""
    if cell.schedule != "auto":
        return cell
    models = [e["row"].get("model") for e in finished_cells(run_id).values()
              if e.get("row", {}).get("method") == cell.method and e["row"].get("model")]
    if not models:
        raise ConfigError(f"No {cell.method} cell of this sweep was measured, so no schedule can be "
                          "advised; give the schedule itself.")
    advised = schedule.from_results(models[0], cell.method, dataset)
    return Cell(cell.method, advised.server_k, cell.concurrency, cell.repeat, advised.text(),
                constrained=cell.constrained, vllm=cell.vllm)


def _started(cell: Cell, what: str, server: RunningServer, seconds: float) -> str:
    """The progress line of a server start: how long it took, and what its vLLM cannot report."""
    if server.reused:
        return f"{cell.method} {what}: measuring a server already running"
    note = ""
    if cell.method != BASELINE_METHOD and not server.per_request:
        note = " (this vLLM reports no per-request acceptance: each cell's comes from /metrics)"
    return f"{cell.method} {what} started in {seconds:.0f} s{note}"


def time_split(seconds: dict[str, float], lanes: int = 1) -> str:
    """Where a sweep's time went, in words: 'starts 131 s, wake-ups 1 s, warm-ups 9 s, measuring 40 s'."""
    names = (("start", "starts"), ("wake", "wake-ups"), ("sleep", "sleeps"), ("warm", "warm-ups"),
             ("measure", "measuring"))
    text = ", ".join(f"{word} {seconds[key]:.0f} s" for key, word in names if seconds.get(key))
    return text + (f" (summed over {lanes} GPU slots side by side)" if lanes > 1 and text else "")


class _Tally:
    """What lanes running side by side share: finished cells, the result, where the time went."""

    def __init__(self, total: int, result: SweepResult):
        self.lock = threading.Lock()
        self.done, self.total, self.result = 0, total, result
        self.seconds: Counter[str] = Counter()


def _lane_cells(cells: list[Cell], lanes: int) -> list[list[Cell]]:
    """Cells split by server group over ``lanes`` (most cells first onto the emptiest), plan order kept."""
    counts = Counter(cell.group for cell in cells)
    load, owner = [0] * lanes, {}
    for group, count in sorted(counts.items(), key=lambda item: -item[1]):
        lane = load.index(min(load))
        owner[group], load[lane] = lane, load[lane] + count
    return [[cell for cell in cells if owner[cell.group] == lane] for lane in range(lanes)]


def _run_lanes(plan: SweepPlan, cells: list[Cell], launcher: Launcher, result: SweepResult,
               emit: bench.Progress, stopped: Callable[[], bool]) -> None:
    """The body of ``run_sweep`` under the run's lock: the cells on one launcher, or split by server
    group over its lanes (one per GPU slot), side by side."""
    lanes = launcher.lanes() if hasattr(launcher, "lanes") else [launcher]
    emit = Estimate(emit)
    tally = _Tally(len(cells), result)
    (run_dir(plan.run_id) / "spec.json").write_text(json.dumps(asdict(plan.spec), default=str, indent=1))
    if len(lanes) == 1:
        _run_cells(plan, cells, launcher, tally, emit, stopped)
    else:
        with ThreadPoolExecutor(max_workers=len(lanes)) as pool:
            for done in [pool.submit(_run_cells, plan, part, lane, tally, emit, stopped)
                         for part, lane in zip(_lane_cells(cells, len(lanes)), lanes) if part]:
                done.result()
    result.results_path = write_run(plan.run_id) or result.results_path
    result.seconds = dict(tally.seconds)
    split = time_split(tally.seconds, len(lanes))
    emit(bench.ProgressEvent("sweep_done", "", tally.done, len(cells),
                             message=f"{len(result.ran)} ran, {len(result.failed)} failed"
                                     + (f", {len(result.skipped)} reused from an earlier run" if result.skipped else "")
                                     + f"; done in {emit.elapsed_s():.0f} s" + (f" ({split})" if split else "")))


def _run_cells(plan: SweepPlan, cells: list[Cell], launcher: Launcher, tally: _Tally,
               emit: bench.Progress, stopped: Callable[[], bool]) -> None:
    """One lane's cells in order on one launcher's servers, each kept as it finishes."""
    spec, prompt_set, run_id, result = plan.spec, plan.prompt_set, plan.run_id, tally.result
    pool = ServerPool(launcher, cells, keep_baseline=spec.baseline_alongside)
    start_errors: dict[tuple, str] = {}
    advised: dict[tuple, Cell] = {}  # an `auto` schedule server's concrete cell
    kept = finished_cells(run_id)

    def event(stage: str, cell_id: str, message: str = "") -> None:
        emit(bench.ProgressEvent(stage, cell_id, tally.done, tally.total, message=message))

    def warm(server: RunningServer, cell: Cell, what: str) -> None:
        event("server", cell.cell_id, f"warming up {cell.method} {what} (not measured)")
        began = time.monotonic()
        warmup.warm_up(server.url, concurrency=cell.concurrency,
                       output_len=spec.output_len or bench.DEFAULT_OUTPUT_LEN,
                       prompt_chars=typical_chars(prompt_set), temperature=spec.temperature, live=False,
                       formats=[p.response_format for p in prompt_set.prompts]
                       if spec.structured != "free" else ())  # each grammar compiled unmeasured
        with tally.lock:
            tally.seconds["warm"] += time.monotonic() - began

    try:
        for index, planned in enumerate(cells):
            group, cell = planned.group, planned
            if kept.get(cell.cell_id, {}).get("row", {}).get("status") == "ok":
                with tally.lock:
                    tally.done += 1
                    result.skipped.append(cell.cell_id)
                event("cell_skipped", cell.cell_id)
                pool.done_with(group, index)
                continue
            if stopped():
                break
            what = f"schedule {cell.schedule}" if cell.schedule else f"K={cell.k}"
            if pool.get(group) is None and group not in start_errors:
                event("server", cell.cell_id, f"starting {cell.method} {what}")
                try:
                    advised[group] = advised_cell(cell, run_id, prompt_set.name)
                    began = time.monotonic()
                    server = pool.start(index, group, advised[group])
                    event("server", cell.cell_id, _started(cell, what, server, time.monotonic() - began))
                    warm(server, cell, what)
                except SpecScopeError as exc:
                    start_errors[group] = f"The {cell.method} K={cell.k} server did not start: {exc}"
                    if not any(e.get("row", {}).get("status") == "ok" for e in kept.values()) \
                            and not result.ran:  # nothing measured: every cell would fail alike
                        raise ConfigError(f"{start_errors[group]} Nothing was measured; fix this "
                                          "and start the sweep again.") from exc
            elif group not in start_errors:
                try:
                    if pool.wake(index, group):
                        event("server", cell.cell_id, f"woke {cell.method} {what} from sleep")
                        warm(pool.get(group), cell, what)
                except SpecScopeError as exc:
                    pool.retire(group)
                    start_errors[group] = f"The {cell.method} K={cell.k} server did not wake: {exc}"
            server = pool.get(group)
            if group in advised:
                cell = advised[group]
                cell = Cell(cell.method, cell.k, planned.concurrency, planned.repeat, cell.schedule,
                            constrained=planned.constrained, vllm=cell.vllm)
            if server is None:
                row, requests, outputs = failed_row(spec, prompt_set, cell, None, None,
                                                    start_errors[group]), [], {}
            else:
                began = time.monotonic()
                row, requests, outputs = run_cell(spec, prompt_set, cell, server, launcher, emit,
                                                  tally.done, tally.total, pool.served[group])
                with tally.lock:
                    tally.seconds["measure"] += time.monotonic() - began
                pool.answered(group, len(requests))
                pool.done_with(group, index, now=row["status"] != "ok" or spec.restart_each_cell)
            with tally.lock:
                keep(run_id, cell, row, requests, outputs)
                result.results_path = write_run(run_id)
                tally.done += 1
                if row["status"] == "ok":
                    result.ran.append(cell.cell_id)
                else:
                    result.failed[cell.cell_id] = row["error"]
            if row["status"] == "ok":
                event("cell_done", cell.cell_id)
            else:
                event("cell_failed", cell.cell_id, row["error"])
    finally:
        pool.close()
        with tally.lock:
            tally.seconds.update(pool.seconds)
