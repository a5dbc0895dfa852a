"""One lane of a sweep here: its cells in order on one launcher's servers, each server started (an ``auto``
schedule advised first) or woken, warmed up (and ramped), and each cell measured and handed to the run's
``Recorder``."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from dataclasses import replace

from specscope.client import warmup
from specscope.client.load_spec import DEFAULT_OUTPUT_LEN
from specscope.engine.k_schedule import KSchedule
from specscope.errors import ConfigError, SpecScopeError
from specscope.schema import BASELINE_METHOD
from specscope.sweep.measure import failed_row, run_cell
from specscope.sweep.plan import SweepPlan, typical_chars
from specscope.sweep.pool import Group, ServerPool, WakeFailed
from specscope.sweep.record import FinishedCell, Recorder, finished_cells
from specscope.sweep.server import Launcher, RunningServer
from specscope.sweep.spec import Cell

__all__ = ["Advise", "Lane", "advised_cell", "ramp_width"]

Advise = Callable[[str, str, str, str], KSchedule]  # (model, method, dataset, run_id) -> the schedule for `auto`


def advised_cell(cell: Cell, run_id: str, dataset: str, advise: Advise | None) -> Cell:
    """An ``auto`` schedule cell made concrete: advised from this run's fixed-K cells of its method
    (their rows are stored by now), else from earlier stored results of that model."""
    if cell.k_schedule != "auto":
        return cell
    rows = [f.row for f in finished_cells(run_id).values() if f.row.get("method") == cell.method]
    models = [model for row in rows if (model := row.get("model"))]
    if not models or advise is None:
        raise ConfigError(
            f"No {cell.method} cell of this sweep was measured, so no schedule can be "
            "advised; give the schedule itself."
        )
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


class Lane:
    """One lane's cells in order on one launcher's servers, each recorded as it finishes."""

    def __init__(
        self,
        plan: SweepPlan,
        cells: list[Cell],
        launcher: Launcher,
        recorder: Recorder,
        stopped: Callable[[], bool],
        advise: Advise | None,
    ):
        self.plan, self.cells, self.launcher, self.recorder = plan, cells, launcher, recorder
        self.stopped, self.advise = stopped, advise
        self.finished = finished_cells(plan.run_id)
        self.pool = ServerPool(
            launcher,
            cells,
            keep_baseline=plan.spec.baseline_alongside,
            done=[cell_id for cell_id, finished in self.finished.items() if finished.ok],
        )
        self.start_errors: dict[Group, str] = {}
        self.advised: dict[Group, Cell] = {}  # an `auto` schedule server's concrete cell

    def run(self) -> None:
        """Measure the lane's cells in order (skipping those finished ok) until done or stopped."""
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
        warmup.warm_up(
            server.url,
            concurrency=cell.concurrency,
            output_len=spec.output_len or DEFAULT_OUTPUT_LEN,
            prompt_chars=typical_chars(prompt_set),
            temperature=spec.temperature,
            live=False,
            formats=[p.response_format for p in prompt_set.prompts] if spec.structured != "free" else (),
        )  # each grammar compiled unmeasured
        self.recorder.timed("warm", time.monotonic() - began)

    def _ramp(self, server: RunningServer, cell: Cell, what: str) -> None:
        """Batches that grow and shrink (``warmup.ramp``) on a fresh server that needs them (``ramp_width``)."""
        width = ramp_width(cell, self.cells, gpu=getattr(self.launcher, "gpu", False))
        if not width:
            return
        self.recorder.event("server", cell.cell_id, f"warming up {cell.method} {what} at batch sizes 1 to {width}")
        began = time.monotonic()
        warmup.ramp(
            server.url,
            width=width,
            output_len=self.plan.spec.output_len or DEFAULT_OUTPUT_LEN,
            prompt_chars=typical_chars(self.plan.prompt_set),
            temperature=self.plan.spec.temperature,
        )
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
                self.recorder.event(
                    "server", cell.cell_id, f"{cell.method} {what} did not wake ({exc}); starting it again"
                )
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
                raise ConfigError(
                    f"{self.start_errors[group]} Nothing was measured; fix this and start the sweep again."
                ) from exc

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
            row, requests, outputs = run_cell(
                spec,
                prompt_set,
                cell,
                server,
                self.launcher,
                self.recorder.emit,
                self.recorder.done,
                self.recorder.total,
                self.pool.served[group],
            )
            self.recorder.timed("measure", time.monotonic() - began)
            finished = FinishedCell(row, requests, outputs)
            self.pool.answered(group, len(requests))
            self.pool.done_with(group, index, now=not finished.ok or spec.restart_each_cell)
        self.recorder.record(cell.cell_id, finished)
