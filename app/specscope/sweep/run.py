"""Running a sweep here: every cell of its plan, in lanes (``sweep.lane``: one per GPU slot, side by side) on
the servers the pool holds up, each handed to the run's ``Recorder`` as it finishes, so a killed sweep loses
only the cell it was in and a rerun resumes."""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict

from specscope.client.progress import Progress
from specscope.errors import ConfigError, SpecScopeError
from specscope.results import shared
from specscope.sweep import lock
from specscope.sweep.lane import Advise, Lane
from specscope.sweep.plan import SweepPlan, as_plan
from specscope.sweep.pool import schedule_arg, vllm_arg
from specscope.sweep.progress import Estimate
from specscope.sweep.record import Recorder, SweepResult, drop_if_empty, finished_cells, run_dir, write_run
from specscope.sweep.server import Launcher
from specscope.sweep.spec import Cell, SweepSpec

__all__ = ["Stop", "stop_asker", "run_sweep", "preflight", "time_split"]

Stop = threading.Event | Callable[[], bool] | None


def run_sweep(
    spec: SweepSpec | SweepPlan,
    launcher: Launcher,
    progress: Progress | None = None,
    stop: Stop = None,
    only: Collection[str] | None = None,
    advise: Advise | None = None,
) -> SweepResult:
    """Run (or resume) a sweep (a spec, or its plan resolved once) on this machine; returns which cells
    ran, were skipped and failed. ``stop`` (an event or a callable) is asked before each cell; ``only``
    limits the sweep to those cell ids (a Ray task's group); ``advise`` makes an ``auto`` schedule concrete
    once the method's fixed-K cells are saved."""
    plan = as_plan(spec)
    cells = [cell for cell in plan.cells if only is None or cell.cell_id in only]
    if advise is None and any(cell.k_schedule == "auto" for cell in cells):
        raise ConfigError(
            "This sweep measures an `auto` K schedule but was given no advisor to choose it; "
            "give the schedule as text (e.g. 1-2:4,3-8:2)."
        )
    stopped = stop_asker(stop)
    preflight(launcher, list(dict.fromkeys(cell.group for cell in cells)))
    recorder = Recorder(plan.run_id, len(cells), Estimate(progress or (lambda event: None)))
    try:
        with lock.run(plan.run_id):
            _run_lanes(plan, launcher, cells, recorder, stopped, advise)
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
            check(method, (k or 1) if text else k, **schedule_arg(text if text != "auto" else "1:1"), **vllm_arg(vllm))
        except SpecScopeError as exc:
            if str(exc) not in problems:
                problems.append(str(exc))
    if problems:
        raise ConfigError("The sweep cannot start: " + " ".join(problems))


def time_split(seconds: dict[str, float], lanes: int = 1) -> str:
    """Where a sweep's time went, in words: 'starts 131 s, wake-ups 1 s, warm-ups 9 s, measuring 40 s'."""
    names = (
        ("start", "starts"),
        ("wake", "wake-ups"),
        ("sleep", "sleeps"),
        ("warm", "warm-ups"),
        ("measure", "measuring"),
    )
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


def _run_lanes(
    plan: SweepPlan,
    launcher: Launcher,
    cells: list[Cell],
    recorder: Recorder,
    stopped: Callable[[], bool],
    advise: Advise | None,
) -> None:
    """The body of ``run_sweep`` under the run's lock: the cells on one launcher, or split by server
    group over its lanes (one per GPU slot), side by side."""
    lanes = launcher.lanes() if hasattr(launcher, "lanes") else [launcher]
    (run_dir(plan.run_id) / "spec.json").write_text(json.dumps(asdict(plan.spec), default=str, indent=1))
    parts = [cells] if len(lanes) == 1 else _lane_cells(cells, len(lanes))
    work = [Lane(plan, part, lane, recorder, stopped, advise) for part, lane in zip(parts, lanes) if part]
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
    counts = f"{len(result.ran)} ran, {len(result.failed)} failed" + (
        f", {len(result.skipped)} reused from an earlier run" if result.skipped else ""
    )
    took = f"{recorder.elapsed_s():.0f} s" + (f" ({split})" if split else "")
    recorder.event(
        "sweep_done",
        message=f"stopped after {recorder.done} of {recorder.total} cells ({counts}) in "
        f"{took}; start the same sweep again to resume"
        if result.stopped
        else f"{counts}; done in {took}",
    )
