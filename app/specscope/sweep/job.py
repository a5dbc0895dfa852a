"""A sweep on a background thread, for the Runs page."""

from __future__ import annotations

import threading
from collections.abc import Callable

from specscope import bench
from specscope.errors import SpecScopeError
from specscope.sweep.launchers import Launcher, launcher_for
from specscope.sweep.plan import SweepPlan
from specscope.sweep.record import SweepResult
from specscope.sweep.run import run_sweep
from specscope.sweep.spec import SweepSpec

__all__ = ["SweepJob"]


class SweepJob:
    """A sweep on a background thread, for the Runs page: poll ``event``, ``done``, ``error``.
    ``run(plan, progress, stop)`` runs it (default: ``run_sweep`` on this machine; the Runs page
    passes ``cluster.run_on_ray`` for a Ray cluster)."""

    def __init__(self, plan: SweepPlan, launcher_factory: Callable[[SweepSpec], Launcher] = launcher_for,
                 run: Callable[[SweepPlan, bench.Progress, threading.Event], SweepResult] | None = None):
        self.plan, self.spec = plan, plan.spec
        self.event: bench.ProgressEvent | None = None
        self.result: SweepResult | None = None
        self.error: str | None = None
        self._stop = threading.Event()
        self._run_plan = run or (lambda plan, progress, stop: run_sweep(plan, launcher_factory(plan.spec), progress,
                                                                       stop))
        self._thread = threading.Thread(target=self._run, name=f"sweep-{plan.spec.preset}", daemon=True)

    def start(self) -> SweepJob:
        """Start the sweep's thread; returns the job."""
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            self.result = self._run_plan(self.plan, self._on_event, self._stop)
        except SpecScopeError as exc:
            self.error = str(exc)
        except Exception as exc:  # noqa: BLE001 - a background thread must report, not vanish
            self.error = f"The sweep stopped on an unexpected error: {exc.__class__.__name__}: {exc}"

    def _on_event(self, event: bench.ProgressEvent) -> None:
        self.event = event

    def cancel(self) -> None:
        """Stop after the current cell (finished cells are kept)."""
        self._stop.set()

    @property
    def done(self) -> bool:
        """Whether the sweep has ended, with a result or an error."""
        return not self._thread.is_alive() and (self.result is not None or self.error is not None)
