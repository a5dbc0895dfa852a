"""Servers that failed to start: one JSON record each under ``servers_dir()/failed/``, so the Servers page
and ``specscope ps`` still name a server whose start failed (a demo server start.sh skipped, a start from
the page, one that died of its warm-up requests), with the root cause from its log, until it starts again
or an operator dismisses it.

    record(state, "ValueError: Available memory on node 0 ...")   # where process.wait_healthy gives up
    listed()                                                      # [FailedStart(name, cause, log_path, ...)]
    dismiss("cpu-smollm2-suffix")                                 # an operator's "Dismiss"
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel

from specscope import access, files, settings
from specscope.schema import BASELINE_METHOD

if TYPE_CHECKING:
    from specscope.launch.registry import ServerState

__all__ = ["FailedStart", "said", "record", "listed", "clear", "dismiss"]


class FailedStart(BaseModel):
    """A server that did not come up: what it was, when, and why (one sentence from its log)."""

    name: str
    preset: str = ""
    method: str = BASELINE_METHOD
    k: int | None = None
    cause: str
    log_path: str = ""
    failed_at: str = ""
    how: str = "failed to start"  # or "died of its warm-up": healthy, it died of its first requests


def said(failed: FailedStart) -> str:
    """One sentence for a failure: ``NAME failed to start at 2026-01-02 10:11:12 UTC: CAUSE (log: PATH)``."""
    return (
        f"{failed.name} {failed.how} at {failed.failed_at[:19].replace('T', ' ')} UTC: {failed.cause}"
        f"{f' (log: {failed.log_path})' if failed.log_path else ''}"
    )


def _path(name: str) -> Path:
    return settings.servers_dir() / "failed" / f"{name}.json"


def record(state: ServerState, cause: str, *, how: str = "failed to start") -> FailedStart:
    """Remember that the server of ``state`` failed to start (or died of its warm-up: ``how``), and why."""
    failed = FailedStart(
        name=state.name,
        preset=state.preset,
        method=state.method,
        k=state.k,
        cause=cause,
        log_path=state.log_path,
        failed_at=datetime.now(UTC).isoformat(),
        how=how,
    )
    _path(state.name).parent.mkdir(parents=True, exist_ok=True)
    files.write_atomic(_path(state.name), failed.model_dump_json(indent=1))
    return failed


def listed() -> list[FailedStart]:
    """Every recorded failure, newest first (an unreadable record is skipped)."""
    found = []
    for path in (settings.servers_dir() / "failed").glob("*.json"):
        try:
            found.append(FailedStart.model_validate_json(path.read_text()))
        except (OSError, ValueError):
            continue
    return sorted(found, key=lambda f: f.failed_at, reverse=True)


def clear(name: str) -> None:
    """Forget a failure (its server starts again under that name)."""
    _path(name).unlink(missing_ok=True)


def dismiss(name: str) -> None:
    """An operator's dismissal of a failure from the list."""
    access.require("dismiss a failed server")
    clear(name)
