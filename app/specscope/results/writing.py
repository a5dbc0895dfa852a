"""Writing results: one Parquet file per run (``write_results``) and one per run of per-request rows
(``write_requests``), each written to a temp file and renamed, never rewritten in place."""

from __future__ import annotations

import datetime as dt
import re
import socket
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import httpx
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from specscope import access, files, settings
from specscope.errors import StoreError
from specscope.schema import OWN_SOURCE, REQUEST_SCHEMA, RESULT_SCHEMA, ResultRow

__all__ = ["write_results", "write_requests", "new_run_id", "to_table", "host_of"]

_RUN_ID = re.compile(r"^[A-Za-z0-9._-]{1,120}$")


def host_of(url: str | None = None) -> str:
    """The host a server runs on: this machine's name for a loopback URL (or none), else the URL's host."""
    name = (httpx.URL(url).host if url else "") or "localhost"
    if access.is_this_machine(name):
        return socket.gethostname()
    return name


def new_run_id(prefix: str = "run") -> str:
    """A fresh run id: prefix, UTC time and a random suffix."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")
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
        return pa.Table.from_pylist([{f.name: r.get(f.name) for f in schema} for r in records], schema=schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise StoreError(f"A result row has a value of the wrong type ({exc}); nothing was written.") from exc


def _atomic_write(table: pa.Table, path: Path) -> Path:
    try:
        with files.atomic_target(path) as tmp:
            pq.write_table(table, tmp)
    except OSError as exc:
        raise StoreError(
            f"Could not write {path} ({exc.strerror or exc}); check the disk and permissions of the SpecScope home."
        ) from exc
    return path


def _check_run_id(run_id: str) -> str:
    if not _RUN_ID.match(run_id):
        raise StoreError(f"Run id {run_id!r} may only hold letters, digits, '.', '_' and '-'.")
    return run_id


def write_results(
    rows: Sequence[ResultRow] | pa.Table, run_id: str | None = None, directory: Path | None = None
) -> Path:
    """Write canonical rows as one Parquet file ``<run_id>.parquet``; fills run_id and created_at."""
    table = to_table(rows, RESULT_SCHEMA)
    if table.num_rows == 0:
        raise StoreError("There are no result rows to write.")
    run_id = _check_run_id(run_id or _single(table, "run_id") or new_run_id())
    now = dt.datetime.now(dt.UTC)
    table = table.set_column(
        table.schema.get_field_index("run_id"), "run_id", pa.array([run_id] * table.num_rows, pa.string())
    )
    created = table.column("created_at").to_pylist()
    table = table.set_column(
        table.schema.get_field_index("created_at"),
        "created_at",
        pa.array([c or now for c in created], RESULT_SCHEMA.field("created_at").type),
    )
    # Own runs always record their host (the sweep measures on this machine unless it set one).
    hosts = [
        h or (host_of() if src == OWN_SOURCE else None)
        for h, src in zip(table.column("host").to_pylist(), table.column("source").to_pylist())
    ]
    table = table.set_column(table.schema.get_field_index("host"), "host", pa.array(hosts, pa.string()))
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
