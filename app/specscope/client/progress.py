"""The sweep's progress protocol: the stages a sweep passes through and the event a progress bar reads.

The load generator (``client.load``) reports each answered request; a sweep (``specscope.sweep``) adds
its cells and servers, and a bar (the CLI's, the Runs page's) reads ``fraction`` and ``remaining``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

__all__ = ["Stage", "ProgressEvent", "Progress"]


Stage = Literal["cell_start", "request", "cell_done", "cell_failed", "cell_skipped", "server", "sweep_done"]


@dataclass(frozen=True)
class ProgressEvent:
    """What a progress bar needs: where the sweep is and a one-line message."""

    stage: Stage
    cell: str = ""
    cells_done: int = 0
    cells_total: int = 0
    requests_done: int = 0
    requests_total: int = 0
    message: str = ""
    remaining_s: float | None = None  # a sweep's estimate of the time it still needs

    @property
    def remaining(self) -> str:
        """The estimate in words, e.g. 'about 4 min left' ('' without one)."""
        if self.remaining_s is None or self.stage == "sweep_done":
            return ""
        seconds = max(self.remaining_s, 1.0)
        return f"about {seconds:.0f} s left" if seconds < 90 else f"about {seconds / 60:.0f} min left"

    @property
    def fraction(self) -> float:
        """Overall progress 0..1 (finished cells plus the share of the current one)."""
        if not self.cells_total:
            return self.requests_done / self.requests_total if self.requests_total else 0.0
        within = self.requests_done / self.requests_total if self.requests_total else 0.0
        if self.stage in ("cell_done", "cell_failed", "cell_skipped", "sweep_done"):
            within = 0.0
        return min(1.0, (self.cells_done + within) / self.cells_total)


Progress = Callable[[ProgressEvent], None]
