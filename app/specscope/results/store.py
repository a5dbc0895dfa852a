"""The results store: Parquet files on disk, DuckDB over all of them.

Writes are ``writing``'s (one Parquet file per run, never rewritten in place).

``Store`` loads every results file (bundled ``data/results`` and the home's
``results/``) with ``union_by_name`` into an in-memory DuckDB table, refreshed when the
files change. A *cell* is one run's measurement of one configuration (CELL_KEYS); its
repeats (rows with a ``repeat`` index) fold into one row with their mean, and the 95%
intervals come from ``stats``: Student-t for throughput; for speedup, paired where the cell's
rounds (``repeat``) pair with the same rounds of its own run's baseline (the per-round log ratios:
a slowdown a round shares cancels), else Fieller; computed from each cell's sufficient statistics
(count, mean, variance, and over its paired rounds the count and variance of the log ratio; DuckDB
folds them on integer keys), never from per-sample lists, so a figure costs about the number of
cells, however many the repeats. Speedup is a
cell's mean output throughput over its baseline's (method ``none``, same BASELINE_KEYS,
host included): the baseline its own run measured when there is one, otherwise the newest
matching baseline of another run; ``baseline_run_id`` says which. User-influenced values are
bound parameters; column names come only from the fixed schema. Each content version is an
immutable snapshot (its own in-memory database) read through a cursor per query, so many
sessions query at once and a reload never changes a query already running.
"""

from __future__ import annotations

import hashlib
import threading
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa

from specscope import settings
from specscope.errors import StoreError
from specscope.results import connection, folds, hygiene, shared
from specscope.results.store_sql import (
    CHECK_BITS,
    OK,
    PAIRED,
    THROUGHPUT_N,
    THROUGHPUT_VAR,
    aggregate,
    cell_aggregates,
    select_list,
)
from specscope.schema import (
    BASELINE_KEYS,
    BASELINE_METHOD,
    BEST_KEYS,
    CELL_KEYS,
    POINT_KEYS,
    REQUEST_SCHEMA,
    RESULT_COLUMNS,
    RESULT_SCHEMA,
    SETUP_KEYS,
)

__all__ = ["Store", "Filters", "FILTER_COLUMNS", "DERIVED_COLUMNS"]

Filters = Mapping[str, Sequence[Any]]  # {column: [values]}: rows whose column holds one of the values

FILTER_COLUMNS = (
    "source",
    "label",
    "run_id",
    "model",
    "draft_model",
    "method",
    "dataset",
    "response_format",
    "hardware",
    "host",
    "vllm_version",
    "weights",
    "acceptance",
    "k",
    "concurrency",
    "status",
)
DERIVED_COLUMNS = {
    "repeats": "ok measurements folded into the cell (1 for a single run)",
    "output_throughput_lo": "95% t-interval of the mean throughput, low (null without repeats)",
    "output_throughput_hi": "95% t-interval of the mean throughput, high",
    "baseline_run_id": "run whose baseline the speedup divides by",
    "baseline_throughput": "mean throughput of that baseline",
    "baseline_repeats": "repeats of that baseline",
    "speedup": "output_throughput / baseline_throughput (exactly 1 for a baseline)",
    "speedup_lo": "95% interval of the speedup, low: paired over rounds shared with the run's own baseline, "
    "else Fieller (null without repeats on both sides; never below 0: a Fieller lower end is "
    "clipped to 0)",
    "speedup_hi": "95% interval of the speedup, high",
    "speedup_interval": "how the speedup interval was made: paired (per-round ratios against the same round "
    "of the run's own baseline), fieller (two samples, unpaired), none (a single run), "
    "unbounded (baseline too noisy) or baseline (the reference itself)",
}


_Signature = tuple[tuple[str, int, int], ...]  # (path, mtime in ns, size) of each file


@dataclass(frozen=True)
class _Snapshot:
    """One content version of the store, loaded once and never changed."""

    signature: tuple[_Signature, _Signature]  # of the results files, then of the requests files
    version: str
    con: duckdb.DuckDBPyConnection
    empty: frozenset[str]  # result columns that no row fills


def _stat_signature(paths: list[Path]) -> _Signature:
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

    def __init__(self, result_dirs: Sequence[Path] | None = None, request_dirs: Sequence[Path] | None = None):
        # The default store also reads the local mirror of a shared store (SPECSCOPE_STORE).
        self._shared = result_dirs is None and shared.location() is not None
        mirror = shared.mirror_dirs() if self._shared else {}

        def default(kind: str, home: Path) -> list[Path]:  # bundled, the home's, the shared store's mirror
            return [settings.bundled_data_dir() / kind, home, *([mirror[kind]] if mirror else [])]

        self._result_dirs = list(result_dirs) if result_dirs is not None else default("results", settings.results_dir())
        self._request_dirs = (
            list(request_dirs) if request_dirs is not None else default("requests", settings.requests_dir())
        )
        self._lock = threading.Lock()
        self._snapshot: _Snapshot | None = None

    @staticmethod
    def _files(dirs: Sequence[Path]) -> list[Path]:
        return sorted(p for d in dirs if d.is_dir() for p in d.glob("*.parquet"))

    def _load(self, con: duckdb.DuckDBPyConnection, name: str, files: list[Path], schema: pa.Schema) -> None:
        """Load ``files`` into the table ``_<name>`` and expose its schema's columns as view ``<name>``.

        The results table also holds ``_baseline_key`` (a hash of BASELINE_KEYS), ``_run`` (of
        run_id), ``_cell`` (a hash
        of CELL_KEYS; a row without a repeat index is a cell of its own) and ``_point`` (a hash of
        POINT_KEYS, whose values the table ``_points`` holds once), so the folds and the speedup
        join compare one integer per row; ``_paired`` holds each cell's paired rounds (``store_sql.PAIRED``).
        """
        key = ""
        if name == "results":
            single = "CASE WHEN repeat IS NULL THEN row_number() OVER () END"
            key = (
                f", hash({', '.join(BASELINE_KEYS)}) AS _baseline_key"
                ", if(run_id IS NULL, NULL, hash(run_id)) AS _run"
                f", hash({', '.join(CELL_KEYS)}, {single}) AS _cell, hash({', '.join(POINT_KEYS)}) AS _point"
                f", CAST({CHECK_BITS} AS UBIGINT) AS _checks"
            )
        columns = ", ".join(f'"{f.name}"' for f in schema)
        present, source, params = set(), "WHERE false", []
        try:
            if files:
                params = [[str(p) for p in files]]
                source = "FROM read_parquet(?, union_by_name=true)"
                present = {
                    row[0]
                    for row in con.execute(f"SELECT column_name FROM (DESCRIBE SELECT * {source})", params).fetchall()
                }
            con.execute(
                f"CREATE OR REPLACE TABLE _{name} AS SELECT *{key} FROM "
                f"(SELECT {select_list(schema, present)} {source})",
                params,
            )
        except duckdb.Error as exc:
            folder = files[0].parent if files else "the results folder"
            raise StoreError(
                f"A results file could not be read ({exc}); move the damaged file out of {folder} and reload."
            ) from exc
        con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT {columns} FROM _{name}")
        if name == "results":
            keys = ", ".join(f"any_value({c}) AS {c}" for c in POINT_KEYS)
            con.execute(f"CREATE OR REPLACE TABLE _points AS SELECT _point, {keys} FROM _results GROUP BY _point")
            con.execute(PAIRED)

    def _current(self) -> _Snapshot:
        """The snapshot of the files as they are now, loading a new one if any changed."""
        if self._shared:
            shared.sync()
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
            con = connection.connect()
            self._load(con, "results", [Path(p) for p, *_ in signature[0]], RESULT_SCHEMA)
            self._load(con, "requests", [Path(p) for p, *_ in signature[1]], REQUEST_SCHEMA)
            version = hashlib.blake2b(repr(signature).encode(), digest_size=8).hexdigest()
            counts = con.execute(
                "SELECT " + ", ".join(f'count("{c}")' for c in RESULT_COLUMNS) + " FROM _results"
            ).fetchone()
            assert counts is not None  # an aggregate without GROUP BY returns one row
            empty = frozenset(c for c, n in zip(RESULT_COLUMNS, counts) if n == 0)
            self._snapshot = _Snapshot(signature, version, con, empty)
            return self._snapshot

    def refresh(self) -> str:
        """Reload if any results or requests file was added, removed or changed; returns the
        content version, a string that changes exactly when the files do (a cache key)."""
        return self._current().version

    def query(self, sql: str, params: Sequence[Any] | None = None) -> pd.DataFrame:
        """Run SQL over the tables ``results`` and ``requests`` with bound parameters."""
        return self._query(self._current(), sql, params)

    @staticmethod
    def _query(snapshot: _Snapshot, sql: str, params: Sequence[Any] | None = None) -> pd.DataFrame:
        try:
            with snapshot.con.cursor() as cursor, warnings.catch_warnings():
                # duckdb's pandas bridge uses a keyword pandas 3 deprecates
                warnings.filterwarnings("ignore", message=".*inplace.*")
                return cursor.execute(sql, list(params or [])).df()
        except duckdb.Error as exc:
            raise StoreError(f"The results query failed ({exc}).") from exc

    @staticmethod
    def where(filters: Filters | None, alias: str = "r") -> tuple[str, list[Any]]:
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

    @staticmethod
    def _baselines_sql() -> str:
        """The CTEs ``pool``, ``base`` (per run and BASELINE_KEYS: the mean of its baseline
        cells, and the count, mean and variance of their pooled throughputs), ``latest`` (the
        newest run's ``base`` per BASELINE_KEYS)."""
        return f"""
            WITH pool AS (
                SELECT _run, _baseline_key, {THROUGHPUT_N} AS _base_n, count(output_throughput) AS _base_rows,
                       avg(output_throughput) AS _base_mean, {THROUGHPUT_VAR} AS _base_var
                FROM _results WHERE {OK} AND method = '{BASELINE_METHOD}' GROUP BY _run, _baseline_key),
            base AS (
                SELECT b.*, pool._base_n, pool._base_rows, pool._base_mean, pool._base_var FROM (
                    SELECT _run, _baseline_key, any_value(run_id) AS run_id, avg(mean) AS baseline_throughput,
                           max(created_at) AS _at
                    FROM (SELECT any_value(_run) AS _run, any_value(run_id) AS run_id,
                                 any_value(_baseline_key) AS _baseline_key,
                                 avg(output_throughput) AS mean, min(created_at) AS created_at
                          FROM _results WHERE {OK} AND method = '{BASELINE_METHOD}' GROUP BY _cell)
                    GROUP BY _run, _baseline_key) b
                LEFT JOIN pool ON pool._baseline_key = b._baseline_key AND pool._run IS NOT DISTINCT FROM b._run),
            latest AS (
                SELECT * FROM base QUALIFY row_number() OVER (
                    PARTITION BY _baseline_key ORDER BY _at DESC, run_id DESC) = 1)"""

    @staticmethod
    def _baseline(column: str, own_value: str | None = None) -> str:
        """A baseline figure of cell ``r``: its run's, else the newest run's (its own for a baseline)."""
        own = f"WHEN r.method = '{BASELINE_METHOD}' THEN {own_value} " if own_value else ""
        return f"CASE {own}WHEN own.run_id IS NOT NULL THEN own.{column} ELSE latest.{column} END"

    _JOIN_BASELINES = """LEFT JOIN base own ON own._baseline_key = r._baseline_key AND own._run = r._run
            LEFT JOIN latest ON latest._baseline_key = r._baseline_key"""

    def _cells_sql(
        self, filters: Filters | None, wanted: Sequence[str], empty: frozenset[str] = frozenset()
    ) -> tuple[str, list[Any]]:
        """SQL for ok cells (repeats folded) with their baseline: the baseline's run and mean, and
        the sufficient statistics of the speedup (``folds.STATS``: the cell's count and variance of its
        throughputs, the count, mean and variance of the baseline's pooled throughputs, and its rounds
        paired with its own run's baseline with the variance of their log ratios)."""
        where, params = self.where(filters)
        select = ", ".join(f'r."{c}"' for c in wanted)
        positions, joined = "", ""
        if "per_position_acceptance" in wanted:
            positions = f""",
            positions AS (
                SELECT _cell, list(rate ORDER BY position) AS per_position_acceptance FROM (
                    SELECT _cell, position, avg(rate) AS rate FROM (
                        SELECT _cell, unnest(per_position_acceptance) AS rate,
                               generate_subscripts(per_position_acceptance, 1) AS position
                        FROM _results WHERE {OK} AND len(per_position_acceptance) > 0) GROUP BY ALL)
                GROUP BY _cell)"""
            joined = ", p.per_position_acceptance"
        sql = f"""{self._baselines_sql()}{positions},
            cells AS (
                SELECT c.*, _pair_m, _pair_var{joined} FROM (
                    SELECT _cell, any_value(_baseline_key) AS _baseline_key, any_value(_run) AS _run,
                           {cell_aggregates(wanted, filters, empty)},
                           count(*) AS repeats, {THROUGHPUT_N} AS _n, {THROUGHPUT_VAR} AS _var,
                           count(output_throughput) AS _rows
                    FROM _results WHERE {OK} GROUP BY _cell) c
                   LEFT JOIN _paired USING (_cell) {"LEFT JOIN positions p USING (_cell)" if joined else ""})
            SELECT {select}, r.repeats, r._n, r._var, r._pair_m, r._pair_var,
                   CASE WHEN r.method = '{BASELINE_METHOD}' THEN r.run_id
                        ELSE coalesce(own.run_id, latest.run_id) END AS baseline_run_id,
                   {self._baseline("baseline_throughput", "r.output_throughput")} AS baseline_throughput,
                   {self._baseline("_base_n", "r._n")} AS _base_n,
                   {self._baseline("_base_rows", "r._rows")} AS _base_rows,
                   {self._baseline("_base_mean", "r.output_throughput")} AS _base_mean,
                   {self._baseline("_base_var", "r._var")} AS _base_var
            FROM cells r {self._JOIN_BASELINES}
            WHERE {where}"""
        return sql, params

    def speedup(
        self, filters: Filters | None = None, *, best: bool = False, columns: Sequence[str] | None = None
    ) -> pd.DataFrame:
        """One row per cell (repeats folded) with its speedup, baseline run and 95% intervals.

        Failed cells are left out. A cell divides by the baseline its own run measured under
        the same conditions (BASELINE_KEYS); only a run without one falls back to the newest
        matching baseline of another run; a baseline reads exactly 1. ``best`` keeps the
        highest-speedup K per BEST_KEYS group among cells no distorting check flags, and lists in
        ``tied_ks`` the K it cannot be told apart from (``folds.best_with_ties``). ``columns`` limits the
        canonical columns returned (group keys and k always come back). Columns added: see ``DERIVED_COLUMNS``.
        """
        wanted = (
            list(RESULT_COLUMNS)
            if columns is None
            else list(
                dict.fromkeys(
                    [
                        *BEST_KEYS,
                        "k",
                        "k_schedule",
                        "run_id",
                        "output_throughput",
                        *(("hygiene", "valid_share") if best else ()),
                        *columns,
                    ]
                )
            )
        )  # best: by the checks
        unknown = [c for c in wanted if c not in RESULT_COLUMNS]
        if unknown:
            raise StoreError(f"Unknown result columns: {', '.join(unknown)}.")
        wanted = [c for c in wanted if c != "repeat"]
        snapshot = self._current()
        sql, params = self._cells_sql(filters, wanted, snapshot.empty)
        # then the cell's other keys (a K schedule beside fixed K): the same cells always come in one order, so
        # what the dashboard caches on a part's rows stays cached when a new run lands
        order = ", ".join(dict.fromkeys([*BEST_KEYS, "k", "run_id", *(c for c in CELL_KEYS if c in wanted)]))
        frame = folds.with_intervals(self._query(snapshot, f"SELECT * FROM ({sql}) ORDER BY {order}", params))
        return folds.best_with_ties(frame) if best else frame.reset_index(drop=True)

    def speedup_points(
        self, filters: Filters | None, columns: Sequence[str] = (), *, fixed_k: bool = False
    ) -> pd.DataFrame:
        """One point per POINT_KEYS (setup, K schedule, concurrency, K) over the speculative cells with
        a speedup, folded in SQL on integer keys: a point measured by one cell keeps that cell's
        speedup and interval (paired or Fieller). One measured by several cells (runs) combines each run's
        own speedup and spread (``folds.combined``: inverse-variance weights on the log scale, a
        random-effects term where the runs disagree beyond their own noise, the degrees of freedom of
        all their repeats; a paired run's spread is that of its per-round log ratios). Why not a
        t-interval over the runs' speedups: with two runs it has one degree of freedom and reads wider
        than either run's own interval, so every two-run comparison would be a "tie" by construction.
        Why not pool the runs' repeats: each run divides by its own baseline, and runs measured on
        different days or loads differ in level (pooled, that level difference would read as noise).
        Runs without repeats fall back to the t-interval over the runs. Also ``runs`` and ``run_ids``
        (the runs that measured the point), the sum of ``repeats`` and the mean of each of ``columns``
        (``hygiene``: the union of the checks its cells fail). ``fixed_k`` leaves out K schedules. Unordered."""
        rows = {c: v for c, v in (filters or {}).items() if c in CELL_KEYS}  # equal over a cell's rows
        where, params = self.where(rows)
        cell_where, cell_params = self.where({c: v for c, v in (filters or {}).items() if c not in rows})
        column_means = "".join(
            ", bit_or(_checks) AS _checks" if c == "hygiene" else f', avg("{c}") AS "{c}"'
            for c in columns
            if c != "output_throughput"
        )
        stats_sql = ", ".join(f"any_value({c}) AS {c}" for c in folds.STATS)
        sql = f"""{self._baselines_sql()},
            cells AS (
                SELECT r.*, _pair_m, _pair_var FROM (
                    SELECT _cell, any_value(_baseline_key) AS _baseline_key, any_value(_run) AS _run,
                           any_value(run_id) AS _run_id,
                           any_value(_point) AS _point, count(*) AS repeats, {THROUGHPUT_N} AS _n,
                           avg(output_throughput) AS output_throughput, {THROUGHPUT_VAR} AS _var
                           {column_means}{
            "".join(f", {aggregate(RESULT_SCHEMA.field(c))}" for c in (filters or {}) if c not in rows)
        }
                    FROM _results r WHERE {OK} AND method IS DISTINCT FROM '{BASELINE_METHOD}' AND {where}
                          {"AND k_schedule IS NULL" if fixed_k else ""}
                    GROUP BY _cell) r LEFT JOIN _paired USING (_cell) WHERE {cell_where}),
            speedups AS (
                SELECT r.*, r.output_throughput / ({self._baseline("baseline_throughput")}) AS speedup,
                       {", ".join(f"{self._baseline(c)} AS {c}" for c in folds.BASE_STATS)}
                FROM cells r {self._JOIN_BASELINES}),{folds.COMBINED_SQL}
            SELECT k.*, p.* EXCLUDE (_point), c.* EXCLUDE (_point) FROM (
                SELECT _point, count(*) AS runs, list(DISTINCT _run_id ORDER BY _run_id) AS run_ids,
                       CAST(sum(repeats) AS BIGINT) AS repeats, avg(speedup) AS speedup,
                       var_samp(speedup) AS _speedup_var, avg(output_throughput) AS _mean_throughput{column_means},
                       any_value(output_throughput) AS output_throughput, {stats_sql}
                FROM speedups WHERE speedup IS NOT NULL GROUP BY _point) p
            JOIN combined c USING (_point) JOIN _points k USING (_point)"""
        frame = folds.points(self.query(sql, [*params, *cell_params]).drop(columns="_point"))
        if "_checks" in frame:  # the union of the checks its cells fail, as the ids' text
            texts = {
                bits: ",".join(c for i, c in enumerate(hygiene.CHECKS) if int(bits) >> i & 1)
                for bits in set(frame["_checks"].dropna())
            }
            frame = frame.assign(hygiene=frame["_checks"].map(texts).fillna("")).drop(columns="_checks")
        return frame

    def acceptance_by_k(self, filters: Filters | None = None) -> pd.DataFrame:
        """Acceptance length per setup (SETUP_KEYS) and K over the speculative ok rows: the median of every
        row's, min and max, and the concurrencies measured. Rows gather per figure point first."""
        where, params = self.where(filters)
        keys = ", ".join(SETUP_KEYS)
        return self.query(
            f"""SELECT {keys}, k, list_median(flatten(list(rates))) AS acceptance_length,
                       min(low) AS al_min, max(high) AS al_max, count(DISTINCT concurrency) AS concurrencies
                FROM (SELECT _point, list(acceptance_length) AS rates, min(acceptance_length) AS low,
                             max(acceptance_length) AS high
                      FROM _results r WHERE {where} AND acceptance_length IS NOT NULL
                           AND method <> '{BASELINE_METHOD}' AND {OK}
                      GROUP BY _point) JOIN _points USING (_point)
                GROUP BY ALL ORDER BY {keys}, k""",
            params,
        )

    def facets(self) -> dict[str, list[Any]]:
        """Distinct values of each filter column, for filter widgets."""
        out = {}
        for column in FILTER_COLUMNS:
            frame = self.query(f'SELECT DISTINCT "{column}" AS v FROM results WHERE "{column}" IS NOT NULL ORDER BY 1')
            out[column] = frame["v"].tolist()
        return out

    def count(self) -> int:
        """How many result rows the store holds."""
        return int(self.query("SELECT count(*) AS n FROM results")["n"].iloc[0])
