"""A sweep on a background thread, for the Runs page."""

from __future__ import annotations

import threading

from specscope.client.progress import ProgressEvent
from specscope.errors import SpecScopeError
from specscope.sweep.execute import Claim, Here, Where, claim, execute
from specscope.sweep.lane import Advise
from specscope.sweep.options import LaunchOptions
from specscope.sweep.plan import SweepPlan
from specscope.sweep.record import SweepResult

__all__ = ["SweepJob"]


class SweepJob:
    """A sweep through ``execute`` on a background thread, for the Runs page: ``start`` claims it at once
    (a viewer or a busy machine is refused there), then poll ``event``, ``done``, ``error``."""

    def __init__(
        self,
        plan: SweepPlan,
        where: Where = Here(),
        options: LaunchOptions = LaunchOptions(),
        advise: Advise | None = None,
    ):
        self.plan, self.spec, self.where, self.options, self.advise = plan, plan.spec, where, options, advise
        self.event: ProgressEvent | None = None
        self.result: SweepResult | None = None
        self.error: str | None = None
        self._stop = threading.Event()
        self._claim: Claim | None = None
        self._thread = threading.Thread(target=self._run, name=f"sweep-{plan.spec.preset}", daemon=True)

    def start(self) -> SweepJob:
        """Claim the sweep (NotAllowed, Busy) and start its thread; returns the job."""
        self._claim = claim(self.plan, self.where)
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            self.result = execute(
                self.plan, self.where, self.options, self._on_event, self._stop, self.advise, claimed=self._claim
            )
        except SpecScopeError as exc:
            self.error = str(exc)
        except Exception as exc:  # noqa: BLE001 - a background thread must report, not vanish
            self.error = f"The sweep stopped on an unexpected error: {exc.__class__.__name__}: {exc}"

    def _on_event(self, event: ProgressEvent) -> None:
        self.event = event

    def cancel(self) -> None:
        """Stop after the current cell (finished cells are saved)."""
        self._stop.set()

    @property
    def done(self) -> bool:
        """Whether the sweep has ended, with a result or an error."""
        return not self._thread.is_alive() and (self.result is not None or self.error is not None)
