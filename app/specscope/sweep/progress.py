"""A sweep's progress with the time it has left."""

from __future__ import annotations

import time
from dataclasses import replace

from specscope.client import bench

__all__ = ["Estimate"]


class Estimate:
    """Passes progress events on with ``remaining_s``: the time so far, scaled by the share of the
    work not measured yet (skipped cells left out); None until a few percent are done."""

    def __init__(self, emit: bench.Progress):
        self.emit, self.began = emit, time.monotonic()
        self.first: float | None = None  # the done share when counting began

    def elapsed_s(self) -> float:
        """Seconds since the sweep began."""
        return time.monotonic() - self.began

    def __call__(self, event: bench.ProgressEvent) -> None:
        if event.stage == "cell_skipped":  # a kept cell costs no time: count from after it
            self.began, self.first = time.monotonic(), event.fraction
        elif self.first is None:
            self.first = event.fraction
        measured = event.fraction - (self.first or 0.0)
        remaining = self.elapsed_s() * (1.0 - event.fraction) / measured if measured > 0.02 else None
        self.emit(replace(event, remaining_s=remaining))
