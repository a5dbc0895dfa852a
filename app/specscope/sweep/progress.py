"""A sweep's progress with the time it has left."""

from __future__ import annotations

import time
from dataclasses import replace

from specscope.client.progress import Progress, ProgressEvent

__all__ = ["Estimate"]


class Estimate:
    """Passes progress events on with ``remaining_s``: the time since the first cell began, scaled by the
    share of the work not measured yet; None until a few percent are done. Servers started before that
    cell (the first wave, or the one server a resumed run still needs) are not counted: they do not come
    again for every cell. Starts between cells (a pool's later waves) are, as the cells' own share;
    cells finished in an earlier run cost nothing, so counting starts again after them."""

    def __init__(self, emit: Progress):
        self.emit = emit
        self.began: float | None = None  # when the first cell measured began
        self.first = 0.0  # the done share then

    def __call__(self, event: ProgressEvent) -> None:
        if event.stage == "cell_skipped":
            self.began = None
        elif event.stage == "cell_start" and self.began is None:
            self.began, self.first = time.monotonic(), event.fraction
        measured = event.fraction - self.first
        remaining = None
        if self.began is not None and measured > 0.02:
            remaining = (time.monotonic() - self.began) * (1.0 - event.fraction) / measured
        self.emit(replace(event, remaining_s=remaining))
