"""Importers: foreign benchmark results into canonical rows, checked before anything is written.

Recognised inputs:
- ``vllm bench serve --save-result`` JSON (one object; ``--metadata method=... k=...`` keys are used),
- Ruiz-style Parquet (columns ``sd_method, num_spec_toks, analysis, output_token_throughput``),
- canonical Parquet (SpecScope's own rows, e.g. a download from the Explorer),
- CSV or Parquet with a user-given column map ``{canonical column: file column}``.

``import_file`` returns the written path; a file that fits none of them raises InputError
and writes nothing. Importing the same content twice replaces the earlier import.
"""

from __future__ import annotations

import hashlib
import json
import math
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from specscope import store
from specscope.errors import InputError, StoreError
from specscope.schema import LATENCY_METRICS, RESULT_COLUMNS, RESULT_SCHEMA

__all__ = ["import_file", "import_upload", "read_rows", "RUIZ_SETUPS", "ImportResult"]

# Ruiz's file names its setup in `analysis`, not its model.
RUIZ_SETUPS = {
    "qwen": {"model": "Qwen/Qwen3-32B", "hardware": "1xH100"},
    "llama70b": {"model": "meta-llama/Llama-3.3-70B-Instruct", "hardware": "2xH100"},
}
_RUIZ_COLUMNS = {"sd_method", "num_spec_toks", "analysis", "output_token_throughput"}
_REQUIRED_MAPPED = ("model", "method", "concurrency", "output_throughput")


@dataclass(frozen=True)
class ImportResult:
    """Where one import was written, how many rows it holds, the format it was read as, its run id."""

    path: Path
    rows: int
    format: str
    run_id: str


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
        return pq.read_table(pa.BufferReader(data))
    except (pa.ArrowException, OSError) as exc:
        raise InputError(f"{name} is not a readable Parquet file (it may be truncated or damaged): "
                         f"{exc}.") from exc


def _read_csv(name: str, data: bytes) -> pa.Table:
    try:
        return pacsv.read_csv(pa.BufferReader(data))
    except (pa.ArrowException, OSError) as exc:
        raise InputError(f"{name} is not a readable CSV file: {exc}.") from exc


def _num(value):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return value


def _ruiz_rows(table: pa.Table) -> list[dict]:
    rows = []
    for i, rec in enumerate(table.to_pylist(), start=1):
        setup = RUIZ_SETUPS.get(rec.get("analysis"))
        if setup is None:
            raise InputError(f"Row {i} has analysis={rec.get('analysis')!r}, which names no known setup "
                             f"({', '.join(RUIZ_SETUPS)}); map its columns with --map instead.", line=i)
        method = rec.get("sd_method")
        method = "none" if method in (None, "None", "") else method
        draft = rec.get("draft_model")
        row = {
            "source": "ruiz-2026", "label": "Ruiz 2026, vllm-scripts full-bench-data",
            "model": setup["model"], "hardware": setup["hardware"],
            "draft_model": None if draft in (None, "None", "") else draft,
            "method": method, "k": int(rec.get("num_spec_toks") or 0), "tp": rec.get("tp"),
            "dataset": rec.get("dataset"), "temperature": rec.get("temp"),
            "concurrency": rec.get("concurrency"), "num_prompts": rec.get("n_reqs"),
            "completed": rec.get("n_reqs"), "failed": 0,
            "duration_s": rec.get("benchmark_duration_s"),
            "request_throughput": rec.get("req_throughput"),
            "output_throughput": rec.get("output_token_throughput"),
            "acceptance_length": _num(rec.get("acceptance_length")),
            "status": "ok",
        }
        rate = _num(rec.get("acceptance_rate"))
        row["acceptance_rate"] = None if rate is None else rate / 100.0
        for metric in ("ttft", "tpot", "itl"):
            for stat in ("mean", "median", "p99"):
                row[f"{stat}_{metric}_ms"] = _num(rec.get(f"{stat}_{metric}"))
        rows.append(row)
    return rows


def _coerce(row: dict, name: str) -> dict:
    """Turn numeric text (``--metadata k=4`` is saved as "4") into the schema's number types."""
    for field in RESULT_SCHEMA:
        value = row.get(field.name)
        if not isinstance(value, str):
            continue
        if pa.types.is_integer(field.type) or pa.types.is_floating(field.type):
            try:
                number = float(value)
            except ValueError as exc:
                raise InputError(f"{name}: {field.name}={value!r} is not a number.", field=field.name) from exc
            row[field.name] = int(number) if pa.types.is_integer(field.type) else number
    return row


def _bench_json_row(name: str, data: bytes, overrides: Mapping) -> list[dict]:
    try:
        obj = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{name} is not valid JSON ({exc}).") from exc
    if not isinstance(obj, dict) or "output_throughput" not in obj or "max_concurrency" not in obj:
        raise InputError(f"{name} is JSON but not a `vllm bench serve --save-result` file "
                         "(it needs output_throughput and max_concurrency).")
    per_pos = obj.get("spec_decode_per_position_acceptance_rates")
    sd_on = obj.get("spec_decode_acceptance_rate") is not None
    k = overrides.get("k", obj.get("k", obj.get("num_speculative_tokens")))
    if k is None:
        k = len(per_pos) if per_pos else 0
    method = overrides.get("method") or obj.get("method") or ("unknown" if sd_on else "none")
    try:
        k = int(float(k))
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name}: k={k!r} is not a whole number.", field="k") from exc
    rate = obj.get("spec_decode_acceptance_rate")
    row = {
        "source": "vllm-bench", "label": obj.get("label"),
        "created_at": None, "model": obj.get("model_id"),
        "draft_model": obj.get("draft_model"), "method": method, "k": k,
        "hardware": obj.get("hardware"), "vllm_version": obj.get("vllm_version"),
        "dataset": obj.get("dataset") or obj.get("dataset_name"),
        "num_prompts": obj.get("num_prompts"), "temperature": obj.get("temperature"),
        "output_len": obj.get("output_len"),
        "concurrency": obj.get("max_concurrency"),
        "request_rate": None if obj.get("request_rate") in (None, "inf") else float(obj["request_rate"]),
        "duration_s": obj.get("duration"), "completed": obj.get("completed"),
        "failed": obj.get("failed"), "total_input_tokens": obj.get("total_input_tokens"),
        "total_output_tokens": obj.get("total_output_tokens"),
        "request_throughput": obj.get("request_throughput"),
        "output_throughput": obj.get("output_throughput"),
        "acceptance_rate": None if rate is None else rate / 100.0,
        "acceptance_length": obj.get("spec_decode_acceptance_length"),
        "num_drafts": obj.get("spec_decode_num_drafts"),
        "draft_tokens": obj.get("spec_decode_draft_tokens"),
        "accepted_tokens": obj.get("spec_decode_accepted_tokens"),
        "per_position_acceptance": per_pos, "status": "ok",
    }
    for metric in LATENCY_METRICS:
        for stat in ("mean", "median", "p99"):
            row[f"{stat}_{metric}_ms"] = obj.get(f"{stat}_{metric}_ms")
    return [_coerce(row, name)]


def _mapped_rows(name: str, table: pa.Table, column_map: Mapping[str, str]) -> list[dict]:
    unknown = [c for c in column_map if c not in RESULT_COLUMNS]
    if unknown:
        raise InputError(f"The column map names {', '.join(unknown)}, which SpecScope does not know; "
                         "see data/SCHEMA.md for the canonical columns.")
    missing_req = [c for c in _REQUIRED_MAPPED if c not in column_map and c not in table.column_names]
    if missing_req:
        raise InputError(f"{name} needs a column for {', '.join(missing_req)}; add it to the column map.")
    absent = [f"{c}={src}" for c, src in column_map.items() if src not in table.column_names]
    if absent:
        raise InputError(f"{name} lacks the mapped column(s) {', '.join(absent)}; its columns are "
                         f"{', '.join(table.column_names)}.")
    frame = table.to_pandas()
    out = pd.DataFrame({c: frame[src] for c, src in column_map.items()})
    for column in RESULT_COLUMNS:
        if column not in out and column in frame:
            out[column] = frame[column]
    out["status"] = out.get("status", "ok")
    if "k" not in out:
        out["k"] = 0
    return out.astype(object).where(out.notna(), None).to_dict("records")


def read_rows(path: Path, column_map: Mapping[str, str] | None = None,
              overrides: Mapping | None = None) -> tuple[str, list[dict], bytes]:
    """Recognise ``path`` and return (format name, canonical rows, raw bytes); writes nothing."""
    path = Path(path)
    data = _read_bytes(path)
    suffix = path.suffix.lower()
    overrides = dict(overrides or {})
    if suffix == ".json":
        return "vllm-bench-json", _bench_json_row(path.name, data, overrides), data
    if suffix in (".parquet", ".pq"):
        table = _read_parquet(path.name, data)
    elif suffix in (".csv", ".tsv"):
        table = _read_csv(path.name, data)
    else:
        raise InputError(f"{path.name}: SpecScope imports .json (vllm bench serve), .parquet and .csv "
                         "files; rename or convert it.")
    columns = set(table.column_names)
    if column_map:
        return "mapped", _mapped_rows(path.name, table, column_map), data
    if _RUIZ_COLUMNS <= columns:
        return "ruiz-parquet", _ruiz_rows(table), data
    if {"method", "model", "concurrency", "output_throughput"} <= columns:
        return "canonical", table.to_pylist(), data
    raise InputError(f"{path.name} fits no known results format (vllm bench JSON, Ruiz Parquet, "
                     "SpecScope Parquet); give a column map, e.g. --map model=Model,method=Method,"
                     "concurrency=Users,output_throughput=TokPerSec.")


def import_file(path: Path, *, source: str | None = None, column_map: Mapping[str, str] | None = None,
                overrides: Mapping | None = None, directory: Path | None = None) -> ImportResult:
    """Import one file into the home's results; returns its path, row count and format."""
    fmt, rows, data = read_rows(Path(path), column_map, overrides)
    if not rows:
        raise InputError(f"{Path(path).name} holds no result rows.")
    overrides = dict(overrides or {})
    for row in rows:
        if source:
            row["source"] = source
        row["source"] = row.get("source") or "import"
        for key in ("method", "k", "draft_model", "hardware", "label", "dataset", "model"):
            if overrides.get(key) is not None:
                row[key] = overrides[key]
        if row.get("k") is None and row.get("method") == "none":
            row["k"] = 0
    try:
        table = store.to_table(rows, RESULT_SCHEMA)
    except StoreError as exc:
        raise InputError(f"{Path(path).name}: {exc}") from exc
    bad = [i for i, m in enumerate(table.column("method").to_pylist(), 1) if not m]
    if bad:
        raise InputError(f"{Path(path).name}: row {bad[0]} has no method; map a method column or "
                         "pass --method.", line=bad[0])
    run_id = f"import-{_sha(data + (source or '').encode())[:12]}"
    written = store.write_results(table, run_id=run_id, directory=directory)
    return ImportResult(path=written, rows=table.num_rows, format=fmt, run_id=run_id)


def import_upload(name: str, data: bytes, **kwargs) -> ImportResult:
    """Import bytes uploaded under ``name`` (the name only picks the format; it is never a path)."""
    suffix = Path(name).suffix.lower()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"upload{suffix}"
        path.write_bytes(data)
        try:
            return import_file(path, **kwargs)
        except InputError as exc:
            raise InputError(str(exc).replace(path.name, Path(name).name), line=exc.line) from exc
