"""Importers: foreign benchmark results into canonical rows, checked before anything is written.

Recognised inputs:
- ``vllm bench serve --save-result`` JSON (one object; ``--metadata method=... k=...`` keys are used;
  files from before ``--max-concurrency`` existed are read too),
- Ruiz-style Parquet (columns ``sd_method, num_spec_toks, analysis, output_token_throughput``;
  without ``analysis`` the model comes from ``--model``; the earlier export holding only total
  throughput is named as such, since output throughput cannot be derived from it),
- canonical Parquet (SpecScope's own rows, e.g. a download from the Explorer),
- CSV or Parquet with a user-given column map ``{canonical column: file column}``,
- the exports of benchmark tools (guidellm, AIPerf, ...), each read by the importer its module in
  ``specscope.results.tool_exports`` registers: one row per benchmark, source the tool's name,
  per-request rows where the file keeps them. The method and K behind
  the server (and the hardware) come from ``overrides`` (``--method ngram --k 4``), given once for the
  file and checked against what it states: a contradiction is refused, never overwritten.

``import_file`` returns the written path; a file that fits none of them raises
ColumnMapNeeded (an InputError carrying the file's columns) and writes nothing. Importing
the same content twice replaces the earlier import. Baselines labelled ``None``, ``nosd``,
``baseline``, ``no-spec`` or left empty become method ``none``, and the result says so.
Values given for every row (``overrides``, e.g. ``--model``) stand in for a required
column the file lacks. Each row meets the checks it can be judged on alone (``hygiene.row_flags``): a
figure above its physical ceiling is flagged ``above_ceiling`` and named in the notes, not believed.
"""

from __future__ import annotations

import hashlib
import math
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from specscope import access
from specscope.engine import roofline
from specscope.errors import InputError, StoreError
from specscope.results import hygiene, shared, tool_exports, writing
from specscope.results.bench_json import bench_json_row
from specscope.results.ruiz_parquet import RUIZ_COLUMNS, check_ruiz_version, ruiz_rows
from specscope.schema import BASELINE_METHOD, RESULT_COLUMNS, RESULT_SCHEMA, ResultRow

__all__ = [
    "import_file",
    "import_upload",
    "preview_upload",
    "upload_columns",
    "upload_tool",
    "guess_map",
    "read_rows",
    "known_formats",
    "ImportResult",
    "ColumnMapNeeded",
    "MAP_FIELDS",
    "REQUIRED_FIELDS",
    "BASELINE_LABELS",
    "UPLOAD_SUFFIXES",
]

REQUIRED_FIELDS = ("model", "method", "concurrency", "output_throughput")
# The canonical fields a column map offers, required ones first.
MAP_FIELDS = (
    *REQUIRED_FIELDS,
    "k",
    "draft_model",
    "dataset",
    "hardware",
    "output_len",
    "temperature",
    "acceptance_length",
    "mean_tpot_ms",
    "p99_tpot_ms",
    "mean_ttft_ms",
    "p99_ttft_ms",
)
# Method labels foreign files use for "no speculative decoding" (compared lower-case, stripped).
BASELINE_LABELS = ("none", "nosd", "no-sd", "no_sd", "baseline", "no-spec", "no_spec", "nospec", "")
_MAP_EXAMPLE = "model=Model,method=Method,concurrency=Users,output_throughput=TokPerSec"
# The suffixes the Explorer's uploader offers: SpecScope's own formats', then the tools' (tool_exports).
UPLOAD_SUFFIXES = tuple(dict.fromkeys((".json", ".parquet", ".csv", *tool_exports.SUFFIXES)))


def known_formats() -> str:
    """The formats SpecScope recognises, for help and messages; the tools' from their importers."""
    return f"vllm bench JSON, {tool_exports.listing()}, Ruiz Parquet, SpecScope Parquet"


class ColumnMapNeeded(InputError):
    """A CSV or Parquet file that fits no known format; ``columns`` are its columns."""

    def __init__(self, message: str, columns: list[str]):
        super().__init__(message)
        self.columns = columns


@dataclass(frozen=True)
class ImportResult:
    """Where one import was written, how many rows it holds, the format it was read as, its run id,
    and notes such as which method label was taken as the baseline."""

    path: Path
    rows: int
    format: str
    run_id: str
    notes: tuple[str, ...] = ()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read_bytes(path: Path) -> bytes:
    try:
        data = path.read_bytes()
    except FileNotFoundError as exc:
        raise InputError(f"{path} does not exist; check the path.") from exc
    except OSError as exc:
        raise InputError(f"{path} cannot be read ({exc.strerror}).") from exc
    if not data:
        raise InputError(f"{path.name} is empty (0 bytes); export the results again and retry.")
    return data


def _read_parquet(name: str, data: bytes) -> pa.Table:
    try:
        # No Arrow pool threads (pq.read_table starts some even with use_threads=False): one can
        # still be starting when a failing command exits, and the C++ runtime then aborts the
        # process ("terminate called without an active exception", exit 134) instead of exit 1.
        return pq.ParquetFile(pa.BufferReader(data)).read(use_threads=False)
    except (pa.ArrowException, OSError) as exc:
        raise InputError(f"{name} is not a readable Parquet file (it may be truncated or damaged): {exc}.") from exc


def _read_csv(name: str, data: bytes) -> pa.Table:
    try:
        return pacsv.read_csv(pa.BufferReader(data), read_options=pacsv.ReadOptions(use_threads=False))
    except (pa.ArrowException, OSError) as exc:
        raise InputError(f"{name} is not a readable CSV file: {exc}.") from exc


def _mapped_rows(name: str, table: pa.Table, column_map: Mapping[str, str], given: set[str]) -> list[ResultRow]:
    """Rows of ``table`` under ``column_map``; ``given`` names fields set on every row instead."""
    unknown = [c for c in column_map if c not in RESULT_COLUMNS]
    if unknown:
        raise InputError(
            f"The column map names {', '.join(unknown)}, which SpecScope does not know; "
            "see data/SCHEMA.md for the canonical columns."
        )
    missing_req = [c for c in REQUIRED_FIELDS if c not in column_map and c not in table.column_names and c not in given]
    if missing_req:
        model = (
            (
                " (the model may instead be one value for all rows: the Explorer's \"model for every "
                'row", or --model on the command line)'
            )
            if "model" in missing_req
            else ""
        )
        raise InputError(
            f"{name} needs a column for {', '.join(missing_req)}; map each to a column of the file{model}."
        )
    absent = [f"{c}={src}" for c, src in column_map.items() if src not in table.column_names]
    if absent:
        raise InputError(
            f"{name} lacks the mapped column(s) {', '.join(absent)}; its columns are {', '.join(table.column_names)}."
        )
    frame = table.to_pandas(use_threads=False)
    out = pd.DataFrame({c: frame[src] for c, src in column_map.items()})
    for column in RESULT_COLUMNS:
        if column not in out and column in frame:
            out[column] = frame[column]
    out["status"] = out.get("status", "ok")
    return cast(list[ResultRow], out.astype(object).where(out.notna(), None).to_dict("records"))


def _is_baseline_label(method) -> bool:
    return (
        method is None
        or (isinstance(method, float) and math.isnan(method))
        or (isinstance(method, str) and method.strip().lower() in BASELINE_LABELS)
    )


def _mark_baselines(rows: list[ResultRow], empty_is_baseline: bool) -> tuple[str, ...]:
    """Set method ``none`` (and K 0 when unset) on rows whose method labels a baseline; say which labels."""
    taken = set()
    for row in rows:
        method = row.get("method")
        if not empty_is_baseline and (method is None or not str(method).strip()):
            continue  # left for the "has no method" check
        if _is_baseline_label(method):
            if method != BASELINE_METHOD:
                taken.add("(empty)" if method is None or not str(method).strip() else str(method))
            row["method"] = BASELINE_METHOD
            if row.get("k") is None:
                row["k"] = 0
    notes = tuple(f"Took method {label!r} as the baseline (no speculative decoding)." for label in sorted(taken))
    if rows and not any(row.get("method") == BASELINE_METHOD for row in rows):
        notes += (
            "No row is a baseline (method none, nosd, baseline, no-spec or empty), so speedups "
            "use a matching baseline from other results, if any.",
        )
    return notes


def _flag(rows: list[ResultRow]) -> tuple[str, ...]:
    """Add to each row's ``hygiene`` the checks its own figures fail; a note per row above its ceiling."""
    notes = []
    for i, row in enumerate(rows, 1):
        found = hygiene.row_flags(row)
        if found:
            row["hygiene"] = ",".join(dict.fromkeys([*hygiene.flagged_ids(row.get("hygiene")), *found]))
        if "above_ceiling" in found:
            notes.append(
                f"row {i} ({row.get('method')}, concurrency {row.get('concurrency')}) is above its physical "
                f"ceiling: {'; '.join(roofline.above(row))}. It is flagged above_ceiling, not believed."
            )
    return tuple(notes)


def read_rows(
    path: Path, column_map: Mapping[str, str] | None = None, overrides: Mapping | None = None
) -> tuple[str, list[ResultRow], bytes]:
    """Recognise ``path`` and return (format name, canonical rows, raw bytes); writes nothing."""
    fmt, rows, data, _ = _read(Path(path), column_map, overrides)
    return fmt, rows, data


def _read(
    path: Path, column_map: Mapping[str, str] | None, overrides: Mapping | None
) -> tuple[str, list[ResultRow], bytes, tool_exports.ToolExport | None]:
    """(format, rows, raw bytes, the tool export when a benchmark tool wrote the file)."""
    data = _read_bytes(path)
    suffix = path.suffix.lower()
    overrides = dict(overrides or {})
    if not column_map and (found := tool_exports.read(path, data, overrides)) is not None:
        return found.format, found.rows, data, found
    fmt, rows = _read_other(path, data, suffix, column_map, overrides)
    return fmt, rows, data, None


def _read_other(
    path: Path, data: bytes, suffix: str, column_map: Mapping[str, str] | None, overrides: dict
) -> tuple[str, list[ResultRow]]:
    """(format, rows) of the formats before the benchmark tools'."""
    if suffix == ".json":
        return "vllm-bench-json", bench_json_row(path.name, data, overrides)
    if suffix in (".parquet", ".pq"):
        table = _read_parquet(path.name, data)
    elif suffix in (".csv", ".tsv"):
        table = _read_csv(path.name, data)
    else:
        raise InputError(
            f"{path.name}: SpecScope imports {', '.join(UPLOAD_SUFFIXES)} files ({known_formats()}, "
            "or CSV/Parquet with a column map); rename or convert it."
        )
    given = {key for key, value in overrides.items() if value is not None}
    columns = set(table.column_names)
    if column_map:
        return "mapped", _mapped_rows(path.name, table, column_map, given)
    if RUIZ_COLUMNS <= columns:
        check_ruiz_version(path.name, columns, given)
        return "ruiz-parquet", ruiz_rows(table, given)
    if set(REQUIRED_FIELDS) <= columns | given:
        return "canonical", cast(list[ResultRow], table.to_pylist())  # the schema's own columns
    raise ColumnMapNeeded(
        f"{path.name} fits no known results format ({known_formats()}), so its columns need mapping to "
        f"{', '.join(REQUIRED_FIELDS)}: pick them in the "
        f"Explorer's import, or on the command line give --map {_MAP_EXAMPLE}.",
        table.column_names,
    )


@dataclass(frozen=True)
class _Prepared:
    format: str
    table: pa.Table
    data: bytes
    notes: tuple[str, ...]
    requests: list[dict]


def _prepare(
    path: Path, source: str | None, column_map: Mapping[str, str] | None, overrides: Mapping | None
) -> _Prepared:
    """Read, map, label and type-check one file; writes nothing."""
    fmt, rows, data, tool = _read(Path(path), column_map, overrides)
    if not rows:
        raise InputError(f"{Path(path).name} holds no result rows.")
    overrides = dict(overrides or {})
    for row in rows:
        if source:
            row["source"] = source
        row["source"] = row.get("source") or "import"
        for key in ("method", "k", "draft_model", "hardware", "label", "dataset", "model", "concurrency"):
            if tool is None and overrides.get(key) is not None:  # a tool's reader settled them already
                row[key] = overrides[key]
    notes = (tool.notes if tool else ()) + _mark_baselines(rows, empty_is_baseline=fmt == "mapped") + _flag(rows)
    try:
        table = writing.to_table(rows, RESULT_SCHEMA)
    except StoreError as exc:
        raise InputError(f"{Path(path).name}: {exc}") from exc
    bad = [i for i, m in enumerate(table.column("method").to_pylist(), 1) if not m]
    if bad:
        raise InputError(
            f"{Path(path).name}: row {bad[0]} has no method; map a method column or pass --method.", line=bad[0]
        )
    return _Prepared(fmt, table, data, notes, tool.requests if tool else [])


def import_file(
    path: Path,
    *,
    source: str | None = None,
    column_map: Mapping[str, str] | None = None,
    overrides: Mapping | None = None,
    directory: Path | None = None,
) -> ImportResult:
    """Import one file into the home's results (and its per-request rows, if any, into the home's
    requests; ``directory`` takes the results only); returns its path, row count, format and notes.
    Operators only (access.require)."""
    access.require("import results")
    found = _prepare(path, source, column_map, overrides)
    run_id = f"import-{_sha(found.data + (source or '').encode())[:12]}"
    if found.requests and directory is None:  # first, so no results file names requests that are missing
        writing.write_requests(found.requests, run_id)
    written = writing.write_results(found.table, run_id=run_id, directory=directory)
    notes = found.notes
    if directory is None and (problem := shared.publish(run_id)):
        notes = (*notes, problem)
    return ImportResult(path=written, rows=found.table.num_rows, format=found.format, run_id=run_id, notes=notes)


def _as_upload(name: str, data: bytes, call, **kwargs):
    """``call(path, **kwargs)`` on the bytes saved under a temporary name; errors name the upload."""
    suffix = Path(name).suffix.lower()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"upload{suffix}"
        path.write_bytes(data)
        try:
            return call(path, **kwargs)
        except ColumnMapNeeded as exc:
            raise ColumnMapNeeded(str(exc).replace(path.name, Path(name).name), exc.columns) from exc
        except InputError as exc:
            raise InputError(str(exc).replace(path.name, Path(name).name), line=exc.line) from exc


def import_upload(name: str, data: bytes, **kwargs) -> ImportResult:
    """Import bytes uploaded under ``name`` (the name only picks the format; it is never a path)."""
    return _as_upload(name, data, import_file, **kwargs)


def upload_tool(name: str, data: bytes) -> str | None:
    """The benchmark tool that wrote an upload (a registered importer's name: ``guidellm``, ``aiperf``),
    whose method and K the user gives for the whole file; None for other formats."""
    return tool_exports.recognise(Path(name), data)


def upload_columns(name: str, data: bytes) -> list[str] | None:
    """The columns of an upload that needs a column map; None when its format is recognised."""
    if upload_tool(name, data):
        return None
    try:
        _as_upload(name, data, read_rows)
    except ColumnMapNeeded as exc:
        return exc.columns
    return None


def preview_upload(
    name: str, data: bytes, column_map: Mapping[str, str], overrides: Mapping | None = None, rows: int = 5
) -> tuple[pd.DataFrame, tuple[str, ...], int]:
    """The first ``rows`` canonical rows an import with ``column_map`` would write (the mapped and
    given fields only), its notes and its row count; writes nothing."""

    def prepare(path):
        return _prepare(path, None, column_map, overrides)

    found = _as_upload(name, data, prepare)
    table, notes = found.table, found.notes
    shown = [c for c in MAP_FIELDS if c in column_map or (overrides or {}).get(c) is not None or c in ("method", "k")]
    return table.select(shown).slice(0, rows).to_pandas(), notes, table.num_rows


def guess_map(columns: list[str]) -> dict[str, str]:
    """A first column map: each field to the column named like it (case and ``_``/space/``-`` ignored)."""

    def plain(text: str) -> str:
        return "".join(ch for ch in text.lower() if ch.isalnum())

    by_name = {plain(c): c for c in columns}
    return {field: by_name[plain(field)] for field in MAP_FIELDS if plain(field) in by_name}
