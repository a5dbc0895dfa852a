"""Recording a sweep: each finished cell checkpointed in one atomic write under the run's folder, the
run's Parquet (results and per-request rows, with hygiene) rewritten from those, and the run's lock."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from specscope import files, hygiene, procfs, settings, store
from specscope.errors import ConfigError
from specscope.schema import BASELINE_METHOD
from specscope.sweep.spec import Cell, is_synthetic

__all__ = ["run_dir", "finished_cells", "SweepResult", "keep", "keep_entry", "with_hygiene", "run_hygiene", "write_run",
           "lock", "same_schedules", "drop_if_empty"]

def run_dir(run_id: str) -> Path:
    """Where a sweep keeps its spec, lock and finished cells."""
    return settings.runs_dir() / run_id


def finished_cells(run_id: str) -> dict[str, dict]:
    """The cells of a run kept so far: ``{cell_id: {"row": ..., "requests": [...]}}``."""
    out = {}
    for path in sorted((run_dir(run_id) / "cells").glob("*.json")):
        try:
            out[path.stem] = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
    return out


@dataclass
class SweepResult:
    """Which cells of a sweep ran, were kept from an earlier run, and failed (with the reason)."""

    run_id: str
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    results_path: Path | None = None
    upload_problem: str | None = None  # why the run waits to go to the shared store
    groups: list[dict] = field(default_factory=list)  # Ray sweeps: each group's node and time span
    measured_twice: list[str] = field(default_factory=list)  # Ray sweeps: cells a retry measured again
    seconds: dict[str, float] = field(default_factory=dict)  # where the time went: start, wake, sleep, warm, measure


def keep(run_id: str, cell: Cell, row: dict, requests: list[dict],
          outputs: dict[str, str] | None = None) -> None:
    """Checkpoint one finished cell of ``run_id``."""
    keep_entry(run_id, cell.cell_id, {"row": row, "requests": requests, "outputs": outputs or {}})


def keep_entry(run_id: str, cell_id: str, entry: dict) -> None:
    """Checkpoint one finished cell (its row, requests and outputs) in one atomic write."""
    files.write_atomic(run_dir(run_id) / "cells" / f"{cell_id}.json", json.dumps(entry, default=str))


def with_hygiene(rows: list[dict], outputs: list[dict[str, str]]) -> list[dict]:
    """Rows with ``lossless_mismatches`` (against the run's baseline on the same vLLM) and ``hygiene`` filled in."""
    def key(row):
        return (row.get("method"), row.get("k"), row.get("concurrency"), row.get("response_format"),
                row.get("vllm_version"))

    def setup(row):
        return key(row)[2:]

    ok = [(row, out) for row, out in zip(rows, outputs) if row.get("status") == "ok"]
    repeats: dict[tuple, int] = {}
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
    return rows


def run_hygiene(run_id: str) -> dict[str, int]:
    """Per hygiene check id: how many of the run's kept ok rows (repeats counted) fail it."""
    kept = list(finished_cells(run_id).values())
    rows = with_hygiene([dict(e["row"]) for e in kept], [e.get("outputs") or {} for e in kept])
    counts = {check_id: 0 for check_id in hygiene.CHECKS}
    for row in rows:
        for check_id in hygiene.flagged_ids(row.get("hygiene")):
            counts[check_id] += 1
    return counts


def write_run(run_id: str) -> Path | None:
    """Rewrite the run's Parquet (results with hygiene, and request rows) from its kept cells."""
    kept = finished_cells(run_id)
    if not kept:
        return None
    rows = []
    for entry in kept.values():
        row = dict(entry["row"])
        row["created_at"] = dt.datetime.fromisoformat(row["created_at"])
        row["request_rate"] = float(row["request_rate"]) if row.get("request_rate") is not None else None
        rows.append(row)
    rows = with_hygiene(rows, [entry.get("outputs") or {} for entry in kept.values()])
    path = store.write_results(rows, run_id=run_id)
    requests = [r for entry in kept.values() for r in entry["requests"]]
    if requests:
        store.write_requests(requests, run_id=run_id)
    return path


@contextmanager
def lock(run_id: str) -> Iterator[None]:
    """Hold the run's own lock (its folder's ``lock`` file names the process) while it runs."""
    folder = run_dir(run_id)
    folder.mkdir(parents=True, exist_ok=True)
    lock = folder / "lock"
    try:
        pid = int(lock.read_text())
    except (OSError, ValueError):  # no lock, or a torn one
        pid = None
    if pid is not None and pid != os.getpid() and procfs.pid_exists(pid):
        raise ConfigError(f"Sweep {run_id} is already running (process {pid}); wait for it "
                          "or stop that process.")
    lock.write_text(str(os.getpid()))
    try:
        yield
    finally:
        lock.unlink(missing_ok=True)


def same_schedules(run_id: str, cells: list[Cell]) -> None:
    """ConfigError when the run kept a method's schedule cells for another schedule: resuming
    would keep them as if this schedule had been measured (a run holds one schedule per method)."""
    kept = finished_cells(run_id)
    for cell in cells:
        row = kept.get(cell.cell_id, {}).get("row", {})
        if cell.schedule and cell.schedule != "auto" and row.get("status") == "ok" \
                and row.get("k_schedule") != cell.schedule:
            raise ConfigError(f"Run {run_id} already measured {cell.method} with the schedule {row.get('k_schedule')}; "
                              f"give another run id to measure {cell.schedule}.")


def drop_if_empty(run_id: str) -> None:
    """Remove a run folder that kept no cell (unless another sweep holds its lock)."""
    folder = run_dir(run_id)
    if folder.is_dir() and not (folder / "lock").exists() and not finished_cells(run_id):
        shutil.rmtree(folder, ignore_errors=True)
