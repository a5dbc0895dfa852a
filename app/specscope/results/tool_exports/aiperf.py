"""NVIDIA AIPerf exports (``aiperf profile``) as one canonical row, with per-request rows where present.

Reads AIPerf 0.13 (export schema 1.x): ``profile_export_aiperf.json`` (the profiling phase's metrics and
the run's input config), ``profile_export_aiperf.csv`` (the same metrics rounded to 2 decimals, without
the config: the model and concurrency must then be given), and ``profile_export.jsonl`` (one record
per request, read from beside the JSON). AIPerf's figures map onto SpecScope's as:

- output throughput: ``output_token_throughput`` (output tokens over the benchmark duration);
- TTFT: ``time_to_first_token``; TPOT: AIPerf's ``inter_token_latency``, (latency - TTFT) / (tokens - 1)
  per request; ITL: ``inter_chunk_latency``, the gap between streamed chunks (its max: ``max_itl_ms``);
  e2el: ``request_latency``; avg, p50 and p99;
- speculative decoding (AIPerf reads vLLM's per-request ``metrics.speculative_decoding``, sent by a
  server started with ``--per-request-spec-decode-metrics``): drafting steps, draft and accepted
  tokens, acceptance rate (accepted / drafted), acceptance length (1 + accepted / steps, pooled over
  the run's steps) and per-position acceptance from the pooled histogram of accepted drafts per step
  (position i: the share of steps that accepted i drafts or more; needs the K the server ran).

The per-request records give the throughput's 95% interval (``spread``) and the requests table's rows.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from specscope.errors import InputError
from specscope.results.tool_exports.given import remote_host, settle, speculation
from specscope.results.tool_exports.guidellm import cell_id
from specscope.results.tool_exports.importer import Export, Importer, Rows, every_file
from specscope.results.tool_exports.spread import throughput_spread
from specscope.schema import BASELINE_METHOD, latency_columns

__all__ = [
    "rows_from_export",
    "rows_from_csv",
    "is_export",
    "is_csv",
    "is_records",
    "records_beside",
    "read_records",
    "per_position",
    "SOURCE",
    "SCHEMA_MAJOR",
    "IMPORTER",
]

SOURCE = "aiperf"
SCHEMA_MAJOR = "1"
_LATENCIES = {
    "ttft": "time_to_first_token",
    "tpot": "inter_token_latency",
    "itl": "inter_chunk_latency",
    "e2el": "request_latency",
}
_STATS = {"mean": "avg", "median": "p50", "p99": "p99"}
# The CSV's metric names (unit in brackets dropped) for the JSON's tags this importer reads.
_CSV_NAMES = {
    "Request Latency": "request_latency",
    "Time to First Token": "time_to_first_token",
    "Inter Token Latency": "inter_token_latency",
    "Inter Chunk Latency": "inter_chunk_latency",
    "Output Token Throughput": "output_token_throughput",
    "Request Throughput": "request_throughput",
    "Benchmark Duration": "benchmark_duration",
    "Request Count": "request_count",
    "Completed Requests": "completed_request_count",
    "Total Output Tokens": "total_output_tokens",
    "Total Input Sequence Length": "total_isl",
    "Total Spec Decode Steps": "total_spec_decode_steps",
    "Total Draft Tokens": "total_draft_tokens",
    "Total Accepted Draft Tokens": "total_accepted_draft_tokens",
    "Token-Weighted Acceptance Length": "spec_decode_token_weighted_acceptance_length",
    "Overall Draft Acceptance Rate": "spec_decode_overall_draft_acceptance_rate",
}
_CSV_STATS = {"avg": "avg", "p50": "p50", "p99": "p99", "max": "max", "Value": "avg"}


def is_export(obj) -> bool:
    """Whether a parsed JSON document is an AIPerf metrics export."""
    return isinstance(obj, dict) and "aiperf_version" in obj and isinstance(obj.get("output_token_throughput"), dict)


def is_csv(first_line: str) -> bool:
    """Whether a CSV's first line is AIPerf's metrics table (``Metric,avg,...``)."""
    return first_line.startswith("Metric,avg,")


def is_records(first_line: str) -> bool:
    """Whether a JSON-lines file's first line is an AIPerf per-request record."""
    try:
        record = json.loads(first_line)
    except json.JSONDecodeError:
        return False
    return isinstance(record, dict) and isinstance(record.get("metadata"), dict) and "metrics" in record


def records_beside(path: Path) -> Path | None:
    """The per-request records AIPerf wrote beside an export (``profile_export.jsonl`` beside
    ``profile_export_aiperf.json``, ``foo.jsonl`` beside ``foo.json``), if there."""
    names = [path.with_suffix(".jsonl"), path.with_name(path.stem.removesuffix("_aiperf") + ".jsonl")]
    return next((p for p in names if p != path and p.is_file()), None)


def read_records(name: str, data: bytes) -> list[dict]:
    """The profiling phase's per-request records of an AIPerf JSON-lines file (warm-up left out)."""
    records = []
    for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{name} line {number} is not JSON ({exc.msg}).", line=number) from exc
        phase = (record.get("metadata") or {}).get("benchmark_phase")
        if phase in (None, "profiling"):
            records.append(record)
    return records


def _value(record: Mapping, key: str):
    metric = (record.get("metrics") or {}).get(key)
    return metric.get("value") if isinstance(metric, Mapping) else None


def _request_row(record: Mapping, cell: Mapping) -> dict:
    chunks = _value(record, "inter_chunk_latency")
    chunks = chunks if isinstance(chunks, list) and chunks else None
    error = record.get("error")
    steps, drafted, accepted = (
        _value(record, k)
        for k in ("spec_decode_steps", "spec_decode_draft_tokens", "spec_decode_accepted_draft_tokens")
    )
    return {
        "cell_id": cell["cell_id"],
        "prompt_id": (record.get("metadata") or {}).get("conversation_id"),
        "method": cell["method"],
        "k": cell["k"],
        "concurrency": cell["concurrency"],
        "success": not error,
        "error": None if not error else str(error.get("message") if isinstance(error, Mapping) else error),
        "prompt_tokens": _value(record, "input_sequence_length"),
        "output_tokens": _value(record, "output_sequence_length"),
        "ttft_ms": _value(record, "time_to_first_token"),
        "tpot_ms": _value(record, "inter_token_latency"),
        "mean_itl_ms": sum(chunks) / len(chunks) if chunks else None,
        "max_itl_ms": max(chunks) if chunks else None,
        "e2el_ms": _value(record, "request_latency"),
        "num_drafts": steps,
        "draft_tokens": drafted,
        "accepted_tokens": accepted,
        "acceptance_rate": accepted / drafted if drafted else None,
        "acceptance_length": 1 + accepted / steps if steps and accepted is not None else None,
        "spec_decode_format": "metrics.speculative_decoding" if steps is not None else None,
        "response_format": "none",
    }


def per_position(histogram: Mapping | None, k: int | None) -> list[float] | None:
    """Per-position acceptance from a histogram ``{accepted drafts in a step: steps}``: entry i (from 1)
    is the share of steps that accepted at least i drafts; None without a K or a step."""
    if not histogram or not k:
        return None
    counts = {int(j): int(n) for j, n in histogram.items()}
    steps = sum(counts.values())
    if steps == 0:
        return None
    return [sum(n for j, n in counts.items() if j >= i) / steps for i in range(1, k + 1)]


def _metric(export: Mapping, tag: str, stat: str = "avg"):
    value = (export.get(tag) or {}).get(stat) if isinstance(export.get(tag), Mapping) else None
    return None if value is None else float(value)


def _dataset(config: Mapping) -> tuple[str | None, int | None]:
    """(a short name of the run's prompts, the fixed output length it asked for or None)."""
    datasets = config.get("datasets") or []
    if len(datasets) != 1:
        return None, None
    data = datasets[0]
    prompts = data.get("prompts") or {}
    isl, osl = prompts.get("isl") or {}, prompts.get("osl") or {}
    if data.get("type") != "synthetic":
        return f"{data.get('type') or 'data'}:{data.get('path') or data.get('name')}", None

    def size(name: str, spec: Mapping) -> str:
        spread = f"±{spec['stddev']:g}" if spec.get("stddev") else ""
        return f"{name}={spec.get('mean'):g}{spread}" if spec.get("mean") is not None else ""

    name = "synthetic:" + ",".join(part for part in (size("isl", isl), size("osl", osl)) if part)
    fixed = int(osl["mean"]) if osl.get("mean") is not None and not osl.get("stddev") else None
    return name, fixed


def _speculation_fields(export: Mapping, k: int | None) -> dict:
    steps, drafted, accepted = (
        _metric(export, t) for t in ("total_spec_decode_steps", "total_draft_tokens", "total_accepted_draft_tokens")
    )
    length = _metric(export, "spec_decode_token_weighted_acceptance_length")
    rate = _metric(export, "spec_decode_overall_draft_acceptance_rate")
    return {
        "num_drafts": None if steps is None else int(steps),
        "draft_tokens": None if drafted is None else int(drafted),
        "accepted_tokens": None if accepted is None else int(accepted),
        "acceptance_rate": accepted / drafted
        if drafted and accepted is not None
        else (None if rate is None else rate / 100.0),
        "acceptance_length": 1 + accepted / steps if steps and accepted is not None else length,
        "per_position_acceptance": per_position(export.get("pooled_spec_decode_acceptance_histogram"), k),
    }


def _row(name: str, export: Mapping, given: Mapping, stated: Mapping) -> dict:
    """One canonical row from AIPerf's metrics (``export``: tag -> {avg, p50, p99, max, ...}) and what the
    file ``stated`` (model, concurrency, dataset, ...)."""
    histogram = export.get("pooled_spec_decode_acceptance_histogram") or {}
    drafts, steps = _metric(export, "total_draft_tokens"), _metric(export, "total_spec_decode_steps")
    least = max(
        [int(j) for j in histogram] + ([math.ceil(drafts / steps - 1e-9)] if drafts and steps else []), default=None
    )
    method, k = speculation(name, given, "AIPerf", drafted=bool(drafts) or bool(least), least_k=least)
    model = settle(name, "model", stated.get("model"), given.get("model"))
    if not model:
        raise InputError(f"{name} does not name its model; give it for the whole file with --model.", field="model")
    concurrency = settle(name, "concurrency", stated.get("concurrency"), given.get("concurrency"))
    if concurrency is None and stated.get("request_rate") is None:
        raise InputError(
            f"{name} does not say the concurrency it ran at; give it with --concurrency.", field="concurrency"
        )
    done, total = _metric(export, "request_count"), _metric(export, "completed_request_count")
    row = {
        "source": SOURCE,
        "label": given.get("label") or f"AIPerf {stated.get('version') or ''}".strip(),
        "model": model,
        "method": method,
        "k": k,
        "hardware": given.get("hardware"),
        "host": stated.get("host"),
        "draft_model": None if method == BASELINE_METHOD else given.get("draft_model"),
        "dataset": settle(name, "dataset", stated.get("dataset"), given.get("dataset")),
        "output_len": stated.get("output_len"),
        "concurrency": None if concurrency is None else int(concurrency),
        "request_rate": stated.get("request_rate"),
        "duration_s": _metric(export, "benchmark_duration"),
        "num_prompts": None if total is None else int(total),
        "completed": None if done is None else int(done),
        "failed": None if done is None or total is None else int(total - done),
        "total_input_tokens": _int(_metric(export, "total_isl")),
        "total_output_tokens": _int(_metric(export, "total_output_tokens")),
        "request_throughput": _metric(export, "request_throughput"),
        "output_throughput": _metric(export, "output_token_throughput"),
        "max_itl_ms": _metric(export, "inter_chunk_latency", "max"),
        "status": "ok",
        **latency_columns(lambda stat, metric: _metric(export, _LATENCIES[metric], _STATS[stat])),
    }
    if method != BASELINE_METHOD:
        row.update(_speculation_fields(export, k))
    if row["output_throughput"] is None:
        raise InputError(f"{name} has no output token throughput; export it again with AIPerf 0.13.")
    return row


def _int(value):
    return None if value is None else int(round(value))


def rows_from_export(
    name: str, export: Mapping, given: Mapping, records: list[dict] | None = None
) -> tuple[list[dict], list[dict], tuple[str, ...]]:
    """(the result row, request rows, notes) of an AIPerf JSON export and its per-request ``records``
    (None: none were found)."""
    schema = str(export.get("schema_version", ""))
    if schema.split(".")[0] != SCHEMA_MAJOR:
        raise InputError(
            f"{name} is an AIPerf export of schema {schema or '?'}; SpecScope reads schema "
            f"{SCHEMA_MAJOR}.x (AIPerf 0.13)."
        )
    config = export.get("input_config") or {}
    models = [m.get("name") for m in (config.get("models") or {}).get("items") or []]
    if len(models) > 1:
        raise InputError(
            f"{name} measured several models ({', '.join(map(str, models))}) in one run; SpecScope "
            "compares one model a row: profile each model on its own."
        )
    phase: Mapping[str, Any] = next((p for p in config.get("phases") or [] if p.get("kind") == "profiling"), {})
    dataset, output_len = _dataset(config)
    rate = phase.get("request_rate") or phase.get("rate")
    row = _row(
        name,
        export,
        given,
        {
            "model": models[0] if models else None,
            "concurrency": phase.get("concurrency"),
            "request_rate": None if rate is None else float(rate),
            "dataset": dataset,
            "output_len": output_len,
            "version": export.get("aiperf_version"),
            "host": remote_host(((config.get("endpoint") or {}).get("urls") or [None])[0]),
        },
    )
    notes: tuple[str, ...] = (
        f"Read AIPerf {export.get('aiperf_version')} as method {row['method']}"
        f"{'' if row['k'] is None else ' K ' + str(row['k'])}.",
    )
    if row["method"] != BASELINE_METHOD and row.get("num_drafts") is None:
        notes += (
            "The export reports no speculative decoding figures (the server sends them per request when "
            "started with --per-request-spec-decode-metrics), so acceptance is not known.",
        )
    if records is None:
        return [row], [], notes + ("No per-request records beside it (profile_export.jsonl): no interval.",)
    if len(records) != row["num_prompts"]:
        return (
            [row],
            [],
            notes
            + (
                f"The per-request records beside it hold {len(records)} requests, not the "
                f"export's {row['num_prompts']}: left out (no interval).",
            ),
        )
    cell = {**row, "cell_id": cell_id(row)}
    requests = [_request_row(r, cell) for r in records]
    done = [r for r in requests if r["success"]]
    row["output_throughput_n"], row["output_throughput_var"] = throughput_spread(
        [r["output_tokens"] for r in done],
        [None if r["e2el_ms"] is None else r["e2el_ms"] / 1000.0 for r in done],
        row["concurrency"],
        row["output_throughput"],
    )
    return [row], requests, notes + (f"Read {len(requests)} per-request records.",)


def rows_from_csv(name: str, data: bytes, given: Mapping) -> tuple[list[dict], list[dict], tuple[str, ...]]:
    """(the result row, no request rows, notes) of an AIPerf CSV export; the model and concurrency are
    given, since the CSV holds metrics only."""
    try:
        lines = list(csv.reader(io.StringIO(data.decode("utf-8"))))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"{name} is not a readable AIPerf CSV ({exc}).") from exc
    export, header = {}, []
    for line in lines:
        if line and line[0] == "Metric":
            header = line
            continue
        if not line or not header:
            continue
        tag = _CSV_NAMES.get(line[0].split(" (")[0].strip())
        if tag:
            export[tag] = {
                _CSV_STATS[h]: float(v)
                for h, v in zip(header[1:], line[1:])
                if h in _CSV_STATS and v not in ("", "N/A")
            }
    row = _row(name, export, given, {})
    return [row], [], ("AIPerf's CSV keeps 2 decimals and no run config or requests: the JSON export has more.",)


def _read(export: Export, fmt: str, given: Mapping) -> Rows:
    if fmt == "aiperf-json":
        beside = records_beside(export.path)
        records = None if beside is None else read_records(beside.name, beside.read_bytes())
        return rows_from_export(export.name, export.json, given, records)
    if fmt == "aiperf-csv":
        return rows_from_csv(export.name, export.data, given)
    if is_records(export.first_line):
        raise InputError(
            f"{export.name} holds AIPerf's per-request records; import the profile_export_aiperf.json "
            "beside it, which reads them too."
        )
    raise InputError(f"{export.name} is not an AIPerf per-request file; SpecScope reads JSON-lines from AIPerf only.")


# Every JSON-lines file is AIPerf's: SpecScope reads them from AIPerf only (_read points one to its export).
IMPORTER = Importer(
    source=SOURCE,
    label="AIPerf",
    files="JSON/CSV",
    suffixes=(".json", ".csv"),
    formats={
        ".json": ("aiperf-json", lambda export: is_export(export.json)),
        ".jsonl": ("aiperf-records", every_file),
        ".csv": ("aiperf-csv", lambda export: is_csv(export.first_line)),
    },
    read=_read,
    unstated={"concurrency": "an AIPerf CSV"},
)
