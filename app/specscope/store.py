"""The results store: Parquet files on disk, DuckDB over all of them.

Writes: one Parquet file per run (``write_results``) and one per run of per-request rows
(``write_requests``), each written to a temp file and renamed, never rewritten in place.

Reads: ``Store`` loads every results file (bundled ``data/results`` and the home's
``results/``) with ``union_by_name`` into an in-memory DuckDB table, refreshed when the
files change. Each content version is an immutable snapshot (its own in-memory database)
read through a cursor per query, so many sessions query at once and a reload never
changes a query already running. Speedup is derived in SQL: each row's output throughput over the mean
throughput of the baseline rows (method ``none``) with the same source, model, dataset,
hardware, output length, temperature and concurrency. User-influenced values are bound parameters;
column names come only from the fixed schema.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import re
import threading
import uuid
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from specscope import settings
from specscope.errors import StoreError
from specscope.schema import (BASELINE_METHOD, REQUEST_SCHEMA, RESULT_COLUMNS, RESULT_SCHEMA)

__all__ = ["write_results", "write_requests", "new_run_id", "to_table", "Store",
           "FILTER_COLUMNS", "BASELINE_KEYS", "BEST_KEYS"]

FILTER_COLUMNS = ("source", "label", "run_id", "model", "draft_model", "method", "dataset",
                  "hardware", "k", "concurrency", "status")
BASELINE_KEYS = ("source", "model", "dataset", "hardware", "output_len", "temperature", "concurrency")
BEST_KEYS = ("source", "model", "draft_model", "method", "dataset", "hardware", "temperature",
             "concurrency")
_RUN_ID = re.compile(r"^[A-Za-z0-9._-]{1,120}$")


def new_run_id(prefix: str = "run") -> str:
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
    return f"{prefix}-{stamp}-{uuid.uuid4().hex[:6]}"


def to_table(rows: Iterable[Mapping] | pa.Table | pd.DataFrame, schema: pa.Schema) -> pa.Table:
    """Rows (dicts, a DataFrame or a Table) as a Table of exactly ``schema``; unknown columns dropped."""
    if isinstance(rows, pd.DataFrame):
        rows = pa.Table.from_pandas(rows, preserve_index=False)
    if isinstance(rows, pa.Table):
        columns = {}
        for field in schema:
            if field.name in rows.column_names:
                columns[field.name] = rows.column(field.name).cast(field.type)
            else:
                columns[field.name] = pa.nulls(rows.num_rows, field.type)
        return pa.table(columns, schema=schema)
    records = [dict(r) for r in rows]
    try:
        return pa.Table.from_pylist([{f.name: r.get(f.name) for f in schema} for r in records],
                                    schema=schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise StoreError(f"A result row has a value of the wrong type ({exc}); nothing was written.") from exc


def _atomic_write(table: pa.Table, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise StoreError(f"Could not write {path} ({exc.strerror or exc}); check the disk and "
                         "permissions of the SpecScope home.") from exc
    return path


def _check_run_id(run_id: str) -> str:
    if not _RUN_ID.match(run_id):
        raise StoreError(f"Run id {run_id!r} may only hold letters, digits, '.', '_' and '-'.")
    return run_id


def write_results(rows, run_id: str | None = None, directory: Path | None = None) -> Path:
    """Write canonical rows as one Parquet file ``<run_id>.parquet``; fills run_id and created_at."""
    table = to_table(rows, RESULT_SCHEMA)
    if table.num_rows == 0:
        raise StoreError("There are no result rows to write.")
    run_id = _check_run_id(run_id or _single(table, "run_id") or new_run_id())
    now = dt.datetime.now(dt.timezone.utc)
    table = table.set_column(table.schema.get_field_index("run_id"), "run_id",
                             pa.array([run_id] * table.num_rows, pa.string()))
    created = table.column("created_at").to_pylist()
    table = table.set_column(table.schema.get_field_index("created_at"), "created_at",
                             pa.array([c or now for c in created], RESULT_SCHEMA.field("created_at").type))
    return _atomic_write(table, (directory or settings.results_dir()) / f"{run_id}.parquet")


def write_requests(rows, run_id: str, directory: Path | None = None) -> Path:
    """Write per-request rows of one run as ``<run_id>.parquet`` in the requests folder."""
    table = to_table(rows, REQUEST_SCHEMA)
    run_id = _check_run_id(run_id)
    table = table.set_column(0, "run_id", pa.array([run_id] * table.num_rows, pa.string()))
    return _atomic_write(table, (directory or settings.requests_dir()) / f"{run_id}.parquet")


def _single(table: pa.Table, column: str):
    values = set(table.column(column).to_pylist()) - {None}
    return values.pop() if len(values) == 1 else None


def _duck_type(field: pa.Field) -> str:
    return {
        pa.string(): "VARCHAR", pa.int32(): "INTEGER", pa.int64(): "BIGINT",
        pa.float64(): "DOUBLE", pa.bool_(): "BOOLEAN",
    }.get(field.type, "DOUBLE[]" if pa.types.is_list(field.type) else "TIMESTAMPTZ")


def _select_list(schema: pa.Schema, present: set[str]) -> str:
    parts = []
    for field in schema:
        if field.name in present:
            parts.append(f'CAST("{field.name}" AS {_duck_type(field)}) AS "{field.name}"')
        else:
            parts.append(f'CAST(NULL AS {_duck_type(field)}) AS "{field.name}"')
    return ", ".join(parts)


@dataclass(frozen=True)
class _Snapshot:
    """One content version of the store, loaded once and never changed."""

    signature: tuple
    version: str
    con: duckdb.DuckDBPyConnection


def _stat_signature(paths: list[Path]) -> tuple:
    signature = []
    for path in paths:
        try:
            stat = path.stat()
        except FileNotFoundError:  # deleted between listing and stat: it is gone
            continue
        signature.append((str(path), stat.st_mtime_ns, stat.st_size))
    return tuple(signature)


class Store:
    """DuckDB over every results Parquet file; thread-safe, refreshed when files change.

    Reads never wait for each other: each query gets its own cursor on the current
    snapshot. Only a reload (a file added, removed or changed) takes the lock.
    """

    def __init__(self, result_dirs: Sequence[Path] | None = None,
                 request_dirs: Sequence[Path] | None = None):
        self._result_dirs = list(result_dirs) if result_dirs is not None else [
            settings.bundled_data_dir() / "results", settings.results_dir()]
        self._request_dirs = list(request_dirs) if request_dirs is not None else [
            settings.bundled_data_dir() / "requests", settings.requests_dir()]
        self._lock = threading.Lock()
        self._snapshot: _Snapshot | None = None

    @staticmethod
    def _files(dirs: Sequence[Path]) -> list[Path]:
        return sorted(p for d in dirs if d.is_dir() for p in d.glob("*.parquet"))

    def _load(self, con: duckdb.DuckDBPyConnection, name: str, files: list[Path], schema: pa.Schema) -> None:
        """Load ``files`` into the table ``_<name>`` and expose its schema's columns as view ``<name>``.

        The results table also holds ``_baseline_key``, a hash of BASELINE_KEYS, so the
        speedup join compares one integer per row.
        """
        key = f", hash({', '.join(BASELINE_KEYS)}) AS _baseline_key" if name == "results" else ""
        columns = ", ".join(f'"{f.name}"' for f in schema)
        present, source, params = set(), "WHERE false", []
        try:
            if files:
                params = [[str(p) for p in files]]
                source = "FROM read_parquet(?, union_by_name=true)"
                present = {row[0] for row in con.execute(
                    f"SELECT column_name FROM (DESCRIBE SELECT * {source})", params).fetchall()}
            con.execute(f"CREATE OR REPLACE TABLE _{name} AS SELECT *{key} FROM "
                        f"(SELECT {_select_list(schema, present)} {source})", params)
        except duckdb.Error as exc:
            folder = files[0].parent if files else "the results folder"
            raise StoreError(f"A results file could not be read ({exc}); move the damaged file out of "
                             f"{folder} and reload.") from exc
        con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT {columns} FROM _{name}")

    def _current(self) -> _Snapshot:
        """The snapshot of the files as they are now, loading a new one if any changed."""
        results = self._files(self._result_dirs)
        requests = self._files(self._request_dirs)
        signature = (_stat_signature(results), _stat_signature(requests))
        snapshot = self._snapshot
        if snapshot is not None and snapshot.signature == signature:
            return snapshot
        with self._lock:  # one reload at a time; queries on older snapshots carry on
            snapshot = self._snapshot
            if snapshot is not None and snapshot.signature == signature:
                return snapshot
            con = duckdb.connect()
            self._load(con, "results", [Path(p) for p, *_ in signature[0]], RESULT_SCHEMA)
            self._load(con, "requests", [Path(p) for p, *_ in signature[1]], REQUEST_SCHEMA)
            version = hashlib.blake2b(repr(signature).encode(), digest_size=8).hexdigest()
            self._snapshot = _Snapshot(signature, version, con)
            return self._snapshot

    def refresh(self) -> str:
        """Reload if any results or requests file was added, removed or changed; returns the
        content version, a string that changes exactly when the files do (a cache key)."""
        return self._current().version

    def query(self, sql: str, params: Sequence | None = None) -> pd.DataFrame:
        """Run SQL over the tables ``results`` and ``requests`` with bound parameters."""
        snapshot = self._current()
        try:
            with snapshot.con.cursor() as cursor, warnings.catch_warnings():
                # duckdb's pandas bridge uses a keyword pandas 3 deprecates
                warnings.filterwarnings("ignore", message=".*inplace.*")
                return cursor.execute(sql, list(params or [])).df()
        except duckdb.Error as exc:
            raise StoreError(f"The results query failed ({exc}).") from exc

    @staticmethod
    def where(filters: Mapping[str, Sequence] | None, alias: str = "r") -> tuple[str, list]:
        """A WHERE clause for ``{column: [values]}`` over FILTER_COLUMNS, with its parameters."""
        clauses, params = ["true"], []
        for column, values in (filters or {}).items():
            if column not in FILTER_COLUMNS:
                raise StoreError(f"Cannot filter on {column!r}; use one of {', '.join(FILTER_COLUMNS)}.")
            values = [v for v in (values if isinstance(values, (list, tuple, set)) else [values])]
            if not values:
                continue
            clauses.append(f'{alias}."{column}" IN ({", ".join("?" * len(values))})')
            params.extend(values)
        return " AND ".join(clauses), params

    def speedup_sql(self, filters: Mapping[str, Sequence] | None = None, *, best: bool = False,
                    columns: Sequence[str] | None = None) -> tuple[str, list]:
        """SQL (and its parameters) for rows matching ``filters`` with ``speedup`` and ``baseline_throughput``.

        Failed cells are left out. ``best`` keeps the highest-speedup K per BEST_KEYS group;
        ``columns`` limits the canonical columns returned (group keys and k always come back).
        """
        wanted = list(RESULT_COLUMNS) if columns is None else list(
            dict.fromkeys([*BEST_KEYS, "k", *columns]))
        unknown = [c for c in wanted if c not in RESULT_COLUMNS]
        if unknown:
            raise StoreError(f"Unknown result columns: {', '.join(unknown)}.")
        where, params = self.where(filters)
        select = ", ".join(f'r."{c}"' for c in wanted)
        best_clause = ""
        if best:
            best_clause = (f"QUALIFY row_number() OVER (PARTITION BY {', '.join('r.' + k for k in BEST_KEYS)} "
                           "ORDER BY speedup DESC NULLS LAST, r.k) = 1")
        sql = f"""
            WITH b AS (
                SELECT _baseline_key, avg(output_throughput) AS baseline_throughput
                FROM _results
                WHERE method = '{BASELINE_METHOD}' AND coalesce(status, 'ok') = 'ok'
                GROUP BY ALL)
            SELECT {select}, b.baseline_throughput,
                   r.output_throughput / b.baseline_throughput AS speedup
            FROM _results r LEFT JOIN b USING (_baseline_key)
            WHERE {where} AND coalesce(r.status, 'ok') = 'ok'
            {best_clause}"""
        return sql, params

    def speedup(self, filters: Mapping[str, Sequence] | None = None, *, best: bool = False,
                columns: Sequence[str] | None = None) -> pd.DataFrame:
        """The rows of ``speedup_sql``, ordered by setup, concurrency and K."""
        sql, params = self.speedup_sql(filters, best=best, columns=columns)
        order = ", ".join([*BEST_KEYS, "k"])
        return self.query(f"SELECT * FROM ({sql}) ORDER BY {order}", params)

    def facets(self) -> dict[str, list]:
        """Distinct values of each filter column, for filter widgets."""
        out = {}
        for column in FILTER_COLUMNS:
            frame = self.query(f'SELECT DISTINCT "{column}" AS v FROM results '
                               f'WHERE "{column}" IS NOT NULL ORDER BY 1')
            out[column] = frame["v"].tolist()
        return out

    def count(self) -> int:
        return int(self.query("SELECT count(*) AS n FROM results")["n"].iloc[0])
