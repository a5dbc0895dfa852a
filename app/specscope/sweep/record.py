"""Recording a sweep: each finished cell checkpointed in one atomic write under the run's folder
(``FinishedCell``), the run's Parquet (results and per-request rows, with hygiene) rewritten from those, and a
``Recorder`` that does both for every cell wherever it was measured (here or on a Ray node)."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from specscope import files, settings
from specscope.client.progress import Progress, ProgressEvent, Stage
from specscope.engine.provenance import is_synthetic
from specscope.results import hygiene, writing
from specscope.schema import BASELINE_METHOD, ResultRow

__all__ = [
    "run_dir",
    "FinishedCell",
    "finished_cells",
    "read_cell",
    "SweepResult",
    "Recorder",
    "save_cell",
    "with_hygiene",
    "run_hygiene",
    "write_run",
    "drop_if_empty",
]


def run_dir(run_id: str) -> Path:
    """Where a sweep keeps its spec, lock and finished cells."""
    return settings.runs_dir() / run_id


@dataclass(frozen=True)
class FinishedCell:
    """One finished cell as checkpointed: its row, its request rows and each prompt's output hash."""

    row: ResultRow
    requests: list[dict[str, Any]] = field(default_factory=list)
    outputs: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Whether the cell was measured (a failed cell runs again on resume)."""
        return self.row.get("status") == "ok"

    @property
    def error(self) -> str:
        """Why a failed cell failed."""
        return self.row.get("error") or "failed"

    def as_json(self) -> dict[str, Any]:
        """The checkpoint file's content."""
        return {"row": self.row, "requests": self.requests, "outputs": self.outputs}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FinishedCell:
        """A checkpoint read back."""
        return cls(
            cast(ResultRow, dict(data.get("row") or {})),
            list(data.get("requests") or []),
            dict(data.get("outputs") or {}),
        )


def _path(run_id: str, cell_id: str) -> Path:
    return run_dir(run_id) / "cells" / f"{cell_id}.json"


def read_cell(run_id: str, cell_id: str) -> FinishedCell:
    """One cell's checkpoint."""
    return FinishedCell.from_json(json.loads(_path(run_id, cell_id).read_text()))


def finished_cells(run_id: str) -> dict[str, FinishedCell]:
    """The cells of a run finished so far, by cell id (a torn or unreadable file is left out)."""
    out = {}
    for path in sorted((run_dir(run_id) / "cells").glob("*.json")):
        try:
            out[path.stem] = FinishedCell.from_json(json.loads(path.read_text()))
        except (OSError, ValueError, AttributeError):
            continue
    return out


@dataclass
class SweepResult:
    """Which cells of a sweep ran, had finished in an earlier run, and failed (with the reason)."""

    run_id: str
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    results_path: Path | None = None
    upload_problem: str | None = None  # why the run waits to go to the shared store
    groups: list[dict[str, Any]] = field(default_factory=list)  # Ray sweeps: each group's node and time span
    measured_twice: list[str] = field(default_factory=list)  # Ray sweeps: cells a retry measured again
    seconds: dict[str, float] = field(default_factory=dict)  # where the time went: start, wake, sleep, warm, measure
    servers_started: int = 0  # servers the sweep started (a running one it measured as it was is not counted)
    stopped: bool = False  # stopped on request before its last cell (starting it again resumes)


def save_cell(run_id: str, cell_id: str, finished: FinishedCell) -> None:
    """Checkpoint one finished cell in one atomic write."""
    files.write_atomic(_path(run_id, cell_id), json.dumps(finished.as_json(), default=str))


class Recorder:
    """Where every finished cell of a sweep goes, from one lane, several side by side or Ray's nodes:
    saved, the run's Parquet rewritten, counted in the result, and told as progress. ``seconds``: where
    the lanes' time went."""

    def __init__(self, run_id: str, total: int, emit: Progress, result: SweepResult | None = None):
        self.run_id, self.total, self.emit = run_id, total, emit
        self.result = result or SweepResult(run_id)
        self.lock = threading.Lock()
        self.done = 0
        self.seconds: defaultdict[str, float] = defaultdict(float)  # part -> seconds
        self.began = time.monotonic()

    def elapsed_s(self) -> float:
        """Seconds since the sweep began."""
        return time.monotonic() - self.began

    def event(self, stage: Stage, cell_id: str = "", message: str = "") -> None:
        """A progress event at the sweep's count so far."""
        self.emit(ProgressEvent(stage, cell_id, self.done, self.total, message=message))

    def skipped(self, cell_id: str) -> None:
        """A cell finished in an earlier run of the same sweep."""
        with self.lock:
            self.done += 1
            self.result.skipped.append(cell_id)
        self.event("cell_skipped", cell_id)

    def record(self, cell_id: str, finished: FinishedCell) -> None:
        """A cell just measured (or failed): saved, and the run's Parquet rewritten, before it is told."""
        with self.lock:
            save_cell(self.run_id, cell_id, finished)
            self.result.results_path = write_run(self.run_id) or self.result.results_path
            self.done += 1
            if finished.ok:
                self.result.ran.append(cell_id)
            else:
                self.result.failed[cell_id] = finished.error
        if finished.ok:
            self.event("cell_done", cell_id)
        else:
            self.event("cell_failed", cell_id, finished.error)

    def timed(self, part: str, seconds: float) -> None:
        """Add to where the time went (start, wake, sleep, warm, measure)."""
        with self.lock:
            self.seconds[part] += seconds


def with_hygiene(rows: list[ResultRow], outputs: list[dict[str, str]]) -> list[ResultRow]:
    """Rows with ``lossless_mismatches`` (against the run's baseline on the same vLLM) and ``hygiene`` filled in
    (``drift`` where the run's rounds drifted together)."""

    def key(row: ResultRow) -> tuple[Any, ...]:
        return (
            row.get("method"),
            row.get("k"),
            row.get("concurrency"),
            row.get("response_format"),
            row.get("vllm_version"),
        )

    def setup(row: ResultRow) -> tuple[Any, ...]:
        return key(row)[2:]

    ok = [(row, out) for row, out in zip(rows, outputs) if row.get("status") == "ok"]
    repeats: dict[tuple[Any, ...], int] = {}
    baseline: dict[object, dict[str, str]] = {}  # per concurrency and response format
    for row, out in sorted(ok, key=lambda pair: pair[0].get("repeat") or 0):
        repeats[key(row)] = repeats.get(key(row), 0) + 1
        if row.get("method") == BASELINE_METHOD and out:
            baseline.setdefault(setup(row), out)
    for row, out in ok:
        lossy = is_synthetic(row.get("method_params"))  # accepts drafts the target would not
        if row.get("method") != BASELINE_METHOD and setup(row) in baseline and not lossy:
            row["lossless_mismatches"] = hygiene.lossless_mismatches(out, baseline[setup(row)])
        row["hygiene"] = ",".join(hygiene.flags(row, repeats[key(row)]))
    return hygiene.mark_drift(rows)  # the run's rounds judged together


def run_hygiene(run_id: str) -> dict[str, int]:
    """Per hygiene check id: how many of the run's finished ok rows (repeats counted) fail it."""
    finished = list(finished_cells(run_id).values())
    rows = with_hygiene([ResultRow(**e.row) for e in finished], [e.outputs for e in finished])
    counts = {check_id: 0 for check_id in hygiene.CHECKS}
    for row in rows:
        for check_id in hygiene.flagged_ids(row.get("hygiene")):
            counts[check_id] += 1
    return counts


def write_run(run_id: str) -> Path | None:
    """Rewrite the run's Parquet (results with hygiene, and request rows) from its finished cells."""
    finished = finished_cells(run_id)
    if not finished:
        return None
    rows = []
    for entry in finished.values():
        row = ResultRow(**entry.row)
        row["created_at"] = dt.datetime.fromisoformat(str(row["created_at"]))
        rate = row.get("request_rate")
        row["request_rate"] = None if rate is None else float(rate)
        rows.append(row)
    rows = with_hygiene(rows, [entry.outputs for entry in finished.values()])
    path = writing.write_results(rows, run_id=run_id)
    requests = [r for entry in finished.values() for r in entry.requests]
    if requests:
        writing.write_requests(requests, run_id=run_id)
    return path


def drop_if_empty(run_id: str) -> None:
    """Remove a run folder that saved no cell (unless another sweep holds its lock)."""
    folder = run_dir(run_id)
    if folder.is_dir() and not (folder / "lock").exists() and not finished_cells(run_id):
        shutil.rmtree(folder, ignore_errors=True)
