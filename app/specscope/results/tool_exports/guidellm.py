"""guidellm reports (``guidellm run --output kind=json|yaml|csv``) as canonical rows, one per benchmark.

Reads report version 2 (guidellm 0.8): ``benchmarks.json`` and ``benchmarks.yaml`` hold the same
report; ``benchmarks.csv`` holds one line per benchmark under a three-line header (group, name,
statistic). Each benchmark of a sweep becomes its own row: a ``concurrent@N`` or ``synchronous``
benchmark at concurrency N (1), a ``constant``/``poisson`` one at its request rate, ``throughput`` at
its stated concurrency cap, if any. guidellm's figures map onto SpecScope's as:

- output throughput: ``output_tokens_per_second`` of the successful requests (their tokens over the
  benchmark's duration); requests per second likewise;
- TTFT: ``time_to_first_token_ms``; TPOT: guidellm's ``inter_token_latency_ms``, which is SpecScope's
  TPOT, (latency - TTFT) / (tokens - 1) (guidellm's own ``time_per_output_token_ms`` counts the first
  token too); e2el: ``request_latency``; means, medians and p99 as guidellm computed them;
- ITL (the gap between streamed chunks, which carry several tokens under speculative decoding): the
  mean only, pooled from each request's first and last token chunk, where the report has requests.

The JSON and YAML reports keep every request: they give per-request rows and the throughput's 95%
interval (``spread``). The CSV has neither. The model and target come from the report; the method and
K behind the server, and the hardware, from what the user gives (``given``).
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping

from specscope.errors import InputError
from specscope.results.tool_exports.given import remote_host, settle, speculation
from specscope.results.tool_exports.importer import Export, Importer, Rows, every_file
from specscope.results.tool_exports.spread import throughput_spread
from specscope.schema import BASELINE_METHOD, latency_columns

__all__ = [
    "rows_from_report",
    "rows_from_csv",
    "is_report",
    "is_csv",
    "dataset_name",
    "strategy_load",
    "cell_id",
    "REPORT_VERSION",
    "SOURCE",
    "IMPORTER",
]

SOURCE = "guidellm"
REPORT_VERSION = 2
_LATENCIES = {
    "ttft": ("time_to_first_token_ms", 1.0),
    "tpot": ("inter_token_latency_ms", 1.0),
    "e2el": ("request_latency", 1000.0),
}
_CSV_LATENCIES = {
    "ttft": ("Time to First Token", "Successful ms", 1.0),
    "tpot": ("Inter Token Latency", "Successful ms", 1.0),
    "e2el": ("Request Latency", "Successful Sec", 1000.0),
}
_PERCENTILES = ("p001", "p01", "p05", "p10", "p25", "p50", "p75", "p90", "p95", "p99", "p999")  # the CSV's lists


def is_report(obj) -> bool:
    """Whether a parsed JSON or YAML document is a guidellm benchmarks report."""
    return (
        isinstance(obj, dict)
        and isinstance(obj.get("benchmarks"), list)
        and isinstance(obj.get("metadata"), dict)
        and "guidellm_version" in obj["metadata"]
    )


def is_csv(first_line: str) -> bool:
    """Whether a CSV's first line is guidellm's (its first group is ``Run Info``)."""
    return first_line.startswith("Run Info,")


def dataset_name(data: list) -> str | None:
    """A short name for a report's data sources: ``synthetic_text:prompt_tokens=64,output_tokens=32``, a
    file's or dataset's path otherwise; None when the report names none."""
    names = []
    for source in data or []:
        if not isinstance(source, dict):
            names.append(str(source))
            continue
        kind = source.get("kind") or "data"
        if kind.startswith("synthetic"):
            sizes = ",".join(
                f"{key}={source[key]}"
                for key in ("prompt_tokens", "prompt_tokens_stdev", "output_tokens", "output_tokens_stdev")
                if source.get(key) is not None
            )
            names.append(f"{kind}:{sizes}")
        else:
            names.append(f"{kind}:{source.get('path') or source.get('name') or source.get('data') or '?'}")
    return "+".join(names) or None


def _output_len(data: list) -> int | None:
    """The fixed output length the data asked for (synthetic data without spread), else None."""
    if len(data or []) != 1 or not isinstance(data[0], dict):
        return None
    tokens, stdev, low, high = (
        data[0].get(key) for key in ("output_tokens", "output_tokens_stdev", "output_tokens_min", "output_tokens_max")
    )
    if tokens is None or stdev not in (None, 0) or any(v not in (None, tokens) for v in (low, high)):
        return None
    return int(tokens)


def strategy_load(strategy: Mapping) -> tuple[int | None, float | None]:
    """(concurrency, request rate) of a benchmark's strategy: ``concurrent`` its streams, ``synchronous``
    1, ``constant``/``poisson`` their rate (and concurrency only when capped), ``throughput`` its cap."""
    kind = strategy.get("type_") or strategy.get("kind")
    cap = strategy.get("max_concurrency")
    if kind == "synchronous":
        return 1, None
    if kind == "concurrent":
        # guidellm's concurrent strategies state their streams; one stating neither them nor a cap fails
        # here (a TypeError) as it always has
        return int(strategy.get("streams") or cap), None  # type: ignore[arg-type]
    rate = strategy.get("rate")
    return (None if cap is None else int(cap)), (None if rate is None else float(rate))


def _csv_strategy(text: str) -> dict:
    """``concurrent@2`` -> {"type_": "concurrent", "streams": 2}; ``constant@1.50`` -> its rate."""
    kind, _, value = text.partition("@")
    if kind == "concurrent" and value:
        return {"type_": kind, "streams": int(float(value))}
    return {"type_": kind, **({"rate": float(value)} if value else {})}


def _setup(name: str, version: str, model: str | None, target: str | None, data: list, given: Mapping) -> dict:
    """The fields every row of one report shares."""
    method, k = speculation(name, given, "guidellm")
    model = settle(name, "model", model or None, given.get("model"))
    if not model:
        raise InputError(f"{name} does not name its model; give it for the whole file with --model.", field="model")
    return {
        "source": SOURCE,
        "label": given.get("label") or f"guidellm {version}",
        "model": model,
        "method": method,
        "k": k,
        "draft_model": None if method == BASELINE_METHOD else given.get("draft_model"),
        "hardware": given.get("hardware"),
        "host": remote_host(target),
        "dataset": settle(name, "dataset", dataset_name(data), given.get("dataset")),
        "output_len": _output_len(data),
        "status": "ok",
    }


def _stat(metric: Mapping | None, stat: str, scale: float = 1.0):
    """A statistic of a guidellm distribution (``successful`` side), scaled; None when absent."""
    if not isinstance(metric, Mapping):
        return None
    side = metric.get("successful", metric)
    if not isinstance(side, Mapping) or not side.get("count"):
        return None
    value = side.get("percentiles", {}).get(stat) if stat.startswith("p") else side.get(stat)
    return None if value is None else float(value) * scale


def _itl_mean(requests: list) -> float | None:
    """The mean gap between streamed token chunks over all requests (ms), from each request's timings."""
    span = gaps = 0.0
    for request in requests:
        timings = (request.get("info") or {}).get("timings") or {}
        first, last, chunks = (
            timings.get(k) for k in ("first_token_iteration", "last_token_iteration", "token_iterations")
        )
        if first is not None and last is not None and chunks and chunks > 1:
            span, gaps = span + (last - first), gaps + (chunks - 1)
    return span / gaps * 1000.0 if gaps else None


def _request_row(request: Mapping, ok: bool, cell: Mapping) -> dict:
    timings = (request.get("info") or {}).get("timings") or {}
    chunks, first, last = (
        timings.get(k) for k in ("token_iterations", "first_token_iteration", "last_token_iteration")
    )
    latency = request.get("request_latency")
    return {
        "cell_id": cell["cell_id"],
        "prompt_id": request.get("request_id"),
        "method": cell["method"],
        "k": cell["k"],
        "concurrency": cell["concurrency"],
        "success": ok,
        "error": None if ok else str((request.get("info") or {}).get("error") or "failed"),
        "prompt_tokens": request.get("prompt_tokens"),
        "output_tokens": request.get("output_tokens"),
        "ttft_ms": request.get("time_to_first_token_ms"),
        "tpot_ms": request.get("inter_token_latency_ms"),
        "mean_itl_ms": (last - first) / (chunks - 1) * 1000.0 if chunks and chunks > 1 and first and last else None,
        "e2el_ms": None if latency is None else latency * 1000.0,
        "response_format": "none",
    }


def cell_id(row: Mapping) -> str:
    """``ngram-k4-c2`` as SpecScope names cells (``r1.5`` for a request rate, ``cmax`` for unbounded)."""
    k = "k?" if row.get("k") is None else f"k{row['k']}"
    load = (
        f"c{row['concurrency']}"
        if row.get("concurrency") is not None
        else (f"r{row['request_rate']:g}" if row.get("request_rate") is not None else "cmax")
    )
    return f"{row['method']}-{k}-{load}"


def rows_from_report(name: str, report: Mapping, given: Mapping) -> tuple[list[dict], list[dict], tuple[str, ...]]:
    """(result rows, request rows, notes) of a guidellm report (JSON or YAML, already parsed)."""
    version = report["metadata"].get("version")
    if version != REPORT_VERSION:
        raise InputError(
            f"{name} is a guidellm report of version {version!r}; SpecScope reads version "
            f"{REPORT_VERSION} (guidellm 0.8); export it again with guidellm 0.8 "
            "(`guidellm export`)."
        )
    benchmarks = report["benchmarks"]
    if not benchmarks:
        raise InputError(f"{name} holds no benchmarks (the run may have stopped before the first ended).")
    spec = (report.get("config") or {}).get("spec") or {}
    backend = benchmarks[0].get("config", {}).get("backend") or spec.get("backend") or {}
    setup = _setup(
        name,
        report["metadata"]["guidellm_version"],
        backend.get("model"),
        backend.get("target"),
        spec.get("data") or [],
        given,
    )
    rows, requests, sampled = [], [], False
    for bench in benchmarks:
        row, cell_requests, partial = _benchmark_row(name, bench, setup, given)
        rows.append(row)
        requests += cell_requests
        sampled |= partial
    k = "" if setup["k"] is None else f", K {setup['k']}"
    notes: tuple[str, ...] = (f"Read {len(rows)} guidellm benchmark(s) as rows of method {setup['method']}{k}.",)
    if setup["k"] is None and setup["method"] != BASELINE_METHOD:
        notes += ("No K was given (--k): the rows state none.",)
    if sampled:
        notes += ("The report keeps a sample of the requests only: intervals come from that sample.",)
    return rows, requests, notes


def _benchmark_row(name: str, bench: Mapping, setup: Mapping, given: Mapping) -> tuple[dict, list[dict], bool]:
    metrics = bench.get("metrics") or {}
    concurrency, rate = strategy_load((bench.get("config") or {}).get("strategy") or {})
    concurrency = settle(name, "concurrency", concurrency, given.get("concurrency"))
    totals = metrics.get("request_totals") or {}
    row = {
        **setup,
        "concurrency": concurrency,
        "request_rate": rate,
        "duration_s": bench.get("duration"),
        "num_prompts": totals.get("total"),
        "completed": totals.get("successful"),
        "failed": totals.get("errored"),
        "total_input_tokens": _total(metrics.get("prompt_token_count")),
        "total_output_tokens": _total(metrics.get("output_token_count")),
        "request_throughput": _stat(metrics.get("requests_per_second"), "mean"),
        "output_throughput": _stat(metrics.get("output_tokens_per_second"), "mean"),
        **latency_columns(
            lambda stat, metric: _stat(metrics.get(_LATENCIES[metric][0]), stat, _LATENCIES[metric][1]),
            tuple(_LATENCIES),
        ),
    }
    breakdown = bench.get("requests") or {}
    done = [r for r in breakdown.get("successful") or [] if isinstance(r, Mapping)]
    row["mean_itl_ms"] = _itl_mean(done)
    row["output_throughput_n"], row["output_throughput_var"] = throughput_spread(
        [r.get("output_tokens") for r in done],
        [r.get("request_latency") for r in done],
        concurrency,
        row["output_throughput"],
    )
    cell = {**row, "cell_id": cell_id(row)}
    requests = [
        _request_row(r, ok, cell)
        for side, ok in (("successful", True), ("errored", False))
        for r in breakdown.get(side) or []
        if isinstance(r, Mapping)
    ]
    partial = bool(done) and totals.get("successful") not in (None, len(done))
    if row["output_throughput"] is None:
        raise InputError(
            f"{name}: benchmark {bench.get('config', {}).get('run_index', '?')} has no successful "
            "requests, so no output throughput; rerun it or drop it from the report."
        )
    return row, requests, partial


def _total(metric: Mapping | None):
    """The sum of a distribution's successful side (e.g. all output tokens)."""
    side = (metric or {}).get("successful") if isinstance(metric, Mapping) else None
    return None if not isinstance(side, Mapping) or side.get("total_sum") is None else int(round(side["total_sum"]))


def _csv_columns(name: str, data: bytes) -> tuple[list[tuple[str, str, str]], list[list[str]]]:
    try:
        lines = list(csv.reader(io.StringIO(data.decode("utf-8"))))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"{name} is not a readable guidellm CSV ({exc}).") from exc
    if len(lines) < 4 or len({len(line) for line in lines[:3]}) != 1:
        raise InputError(
            f"{name} is not a guidellm CSV with benchmarks (three header lines, then one line "
            "per benchmark); export it again with --output kind=csv."
        )
    return list(zip(*lines[:3])), [line for line in lines[3:] if line]


def rows_from_csv(name: str, data: bytes, given: Mapping) -> tuple[list[dict], list[dict], tuple[str, ...]]:
    """(result rows, no request rows, notes) of a guidellm CSV report."""
    columns, lines = _csv_columns(name, data)
    rows = []
    for line in lines:
        cell = dict(zip(columns, line))

        def number(group: str, field: str, stat: str = "", scale: float = 1.0, cell: dict = cell) -> float | None:
            text = cell.get((group, field, stat), "")
            return float(text) * scale if text not in ("", "None", "null") else None

        def percentile(group: str, field: str, stat: str, scale: float, cell: dict = cell) -> float | None:
            text = cell.get((group, field, "Percentiles"), "")
            values = json.loads(text) if text.startswith("[") else []
            return float(values[_PERCENTILES.index(stat)]) * scale if len(values) == len(_PERCENTILES) else None

        try:
            arguments = json.loads(cell.get(("Runtime Info", "Arguments", ""), "{}") or "{}")
            backend = json.loads(cell.get(("Run Info", "Backend", ""), "{}") or "{}")
            metadata = json.loads(cell.get(("Runtime Info", "Metadata", ""), "{}") or "{}")
        except json.JSONDecodeError as exc:
            raise InputError(f"{name}: a JSON field of the guidellm CSV cannot be read ({exc}).") from exc
        spec = arguments.get("spec") or {}
        setup = _setup(
            name,
            metadata.get("guidellm_version", "?"),
            backend.get("model"),
            backend.get("target"),
            spec.get("data") or [],
            given,
        )
        concurrency, rate = strategy_load(_csv_strategy(cell.get(("Benchmark", "Strategy", ""), "")))
        row = {
            **setup,
            "concurrency": settle(name, "concurrency", concurrency, given.get("concurrency")),
            "request_rate": rate,
            "duration_s": number("Timings", "Duration", "Sec"),
            "num_prompts": number("Request Counts", "Total"),
            "completed": number("Request Counts", "Successful"),
            "failed": number("Request Counts", "Errored"),
            "request_throughput": number("Server Throughput", "Successful Requests/Sec", "Mean"),
            "output_throughput": number("Token Throughput", "Successful Output Tokens/Sec", "Mean"),
        }
        for key, field in (
            ("total_input_tokens", "Successful Input Tokens"),
            ("total_output_tokens", "Successful Output Tokens"),
        ):
            mean, done = number("Token Metrics", field, "Mean"), row["completed"]
            row[key] = None if mean is None or done is None else int(round(mean * done))
        for metric, (group, field, scale) in _CSV_LATENCIES.items():
            row[f"mean_{metric}_ms"] = number(group, field, "Mean", scale)
            row[f"median_{metric}_ms"] = number(group, field, "Median", scale)
            row[f"p99_{metric}_ms"] = percentile(group, field, "p99", scale)
        for key in ("num_prompts", "completed", "failed"):
            row[key] = None if row[key] is None or math.isnan(row[key]) else int(row[key])
        if row["output_throughput"] is None:
            raise InputError(
                f"{name} lacks guidellm's output throughput column (Token Throughput, Successful "
                "Output Tokens/Sec, Mean); export it again with guidellm 0.8."
            )
        rows.append(row)
    if not rows:
        raise InputError(f"{name} holds no benchmarks.")
    return (
        rows,
        [],
        (
            f"Read {len(rows)} guidellm benchmark(s) from the CSV, which keeps no requests: no "
            "intervals (the JSON report has them).",
        ),
    )


def _read(export: Export, fmt: str, given: Mapping) -> Rows:
    if fmt == "guidellm-csv":
        return rows_from_csv(export.name, export.data, given)
    report = export.json if fmt == "guidellm-json" else export.yaml
    if not is_report(report):
        raise InputError(
            f"{export.name} is YAML but not a guidellm report (it needs metadata.guidellm_version and "
            "benchmarks); SpecScope reads YAML from guidellm only."
        )
    return rows_from_report(export.name, report, given)


# Every YAML file is guidellm's: SpecScope reads YAML from guidellm only (_read says what else one is).
IMPORTER = Importer(
    source=SOURCE,
    label="guidellm",
    files="JSON/YAML/CSV",
    suffixes=(".json", ".yaml", ".yml", ".csv"),
    formats={
        ".json": ("guidellm-json", lambda export: is_report(export.json)),
        ".yaml": ("guidellm-yaml", every_file),
        ".yml": ("guidellm-yaml", every_file),
        ".csv": ("guidellm-csv", lambda export: is_csv(export.first_line)),
    },
    read=_read,
)
