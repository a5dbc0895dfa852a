"""The canonical result row and the per-request row, as Arrow schemas.

One canonical row = one (model, method, K, concurrency) cell of one run on one prompt set.
``data/SCHEMA.md`` documents every column; a test keeps the two in step.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from typing import Annotated, Any, TypedDict, cast, get_type_hints

import pyarrow as pa

__all__ = [
    "ResultRow",
    "latency_columns",
    "result_row",
    "RESULT_SCHEMA",
    "REQUEST_SCHEMA",
    "RESULT_COLUMNS",
    "REQUEST_COLUMNS",
    "LATENCY_METRICS",
    "BASELINE_METHOD",
    "OWN_SOURCE",
    "CALIBRATION_SOURCE",
    "PROVENANCE_KEYS",
    "BASELINE_KEYS",
    "BEST_KEYS",
    "SETUP_KEYS",
    "POINT_KEYS",
    "CELL_KEYS",
    "FAMILY_KEYS",
    "FRONT_KEYS",
    "VERSION_KEYS",
]

BASELINE_METHOD = "none"
OWN_SOURCE = "specscope"  # rows SpecScope measured itself
CALIBRATION_SOURCE = "calibration"  # synthetic-acceptance sweeps: step cost, not a method's speedup
LATENCY_METRICS = ("ttft", "tpot", "itl", "e2el")

# The keys that group result rows, for each table or question built over them.
# Provenance: rows that differ in these never share a baseline, a setup or a best K.
PROVENANCE_KEYS = ("vllm_version", "torch_version", "weights")
BASELINE_KEYS = (
    "source",
    "model",
    "dataset",
    "response_format",
    "hardware",
    "host",
    *PROVENANCE_KEYS,
    "output_len",
    "temperature",
    "concurrency",
    "request_rate",
)
BEST_KEYS = (
    "source",
    "model",
    "draft_model",
    "method",
    "dataset",
    "response_format",
    "hardware",
    "host",
    *PROVENANCE_KEYS,
    "acceptance",
    "temperature",
    "concurrency",
    "request_rate",
)
SETUP_KEYS = (
    "source",
    "model",
    "draft_model",
    "method",
    "dataset",
    "response_format",
    "hardware",
    "host",
    *PROVENANCE_KEYS,
    "acceptance",
)
POINT_KEYS = (*SETUP_KEYS, "k_schedule", "concurrency", "request_rate", "k")  # a figure point: its runs fold into it
CELL_KEYS = (
    "run_id",
    "source",
    "label",
    "model",
    "draft_model",
    "method",
    "k",
    "k_schedule",
    "method_params",
    "tp",
    "hardware",
    "host",
    *PROVENANCE_KEYS,
    "acceptance",
    "dataset",
    "response_format",
    "temperature",
    "output_len",
    "concurrency",
    "request_rate",
)
# a family the advisor fits: one curve over K and concurrency
FAMILY_KEYS = (
    "source",
    "model",
    "draft_model",
    "method",
    "dataset",
    "response_format",
    "hardware",
    "vllm_version",
    "weights",
    "acceptance",
)
# a limits group: the cells one speed-latency front compares
FRONT_KEYS = (
    "source",
    "model",
    "dataset",
    "response_format",
    "hardware",
    "host",
    "vllm_version",
    "torch_version",
    "weights",
    "temperature",
    "output_len",
)
# the versions a setup is compared across
VERSION_KEYS = ("vllm_version", "torch_version")

# column types: every column may be null (an imported row lacks what its tool did not measure)
Text = Annotated[str | None, pa.string()]
Int32 = Annotated[int | None, pa.int32()]
Int = Annotated[int | None, pa.int64()]
Float = Annotated[float | None, pa.float64()]


class ResultRow(TypedDict, total=False):
    """One canonical row, as the sweep, the importers and the store build it: the one place that names the
    result columns and their types (``RESULT_SCHEMA`` is built from it). mypy holds every row built or read as a
    ``ResultRow`` to these names."""

    run_id: Text
    created_at: Annotated[dt.datetime | str | None, pa.timestamp("us", tz="UTC")]  # ISO text until written
    source: Text
    label: Text
    model: Text
    draft_model: Text
    method: Text
    k: Int32  # speculative tokens per step; 0 for the baseline; a schedule's largest K
    k_schedule: Text  # batch size -> K schedule (canonical text); k is its maximum
    method_params: Text  # the server's speculative config (JSON)
    tp: Int32
    hardware: Text
    host: Text
    vllm_version: Text
    torch_version: Text  # with its CUDA build, e.g. 2.11.0+cu130
    weights: Text  # real | dummy (--load-format dummy: engine cost only)
    acceptance: Text  # real | synthetic (drafts accepted at set rates); null: baseline
    dataset: Text
    response_format: Text  # none | json_schema | regex | choice (comma-joined); null: old rows
    num_prompts: Int
    temperature: Float
    output_len: Int
    concurrency: Int
    request_rate: Float
    repeat: Int32
    duration_s: Float
    completed: Int
    failed: Int
    total_input_tokens: Int
    total_output_tokens: Int
    request_throughput: Float
    output_throughput: Float
    mean_ttft_ms: Float
    median_ttft_ms: Float
    p99_ttft_ms: Float
    mean_tpot_ms: Float
    median_tpot_ms: Float
    p99_tpot_ms: Float
    mean_itl_ms: Float
    median_itl_ms: Float
    p99_itl_ms: Float
    mean_e2el_ms: Float
    median_e2el_ms: Float
    p99_e2el_ms: Float
    acceptance_rate: Float
    acceptance_length: Float
    num_drafts: Int
    draft_tokens: Int
    accepted_tokens: Int
    per_position_acceptance: Annotated[list[float] | None, pa.list_(pa.float64())]
    status: Text
    error: Text
    # benchmark hygiene: what the checks of specscope.results.hygiene read, and the checks that flagged
    warmups: Int
    prefix_cache_hit_rate: Float
    wave_share: Float
    max_num_seqs: Int
    foreign_cpu: Float
    prior_requests: Int
    lossless_mismatches: Int
    hygiene: Text  # comma-separated check ids
    valid_share: Float  # constrained answers that follow their format; null when free
    max_itl_ms: Float  # the longest gap between streamed chunks of any request
    compiles: Int  # what the server's log says it compiled while the cell was measured
    # an imported cell's throughput spread from its requests (specscope.results.tool_exports.spread)
    output_throughput_n: Int
    output_throughput_var: Float


RESULT_SCHEMA = pa.schema(
    [pa.field(name, hint.__metadata__[0]) for name, hint in get_type_hints(ResultRow, include_extras=True).items()]
)
RESULT_COLUMNS = tuple(RESULT_SCHEMA.names)
LATENCY_STATS = ("mean", "median", "p99")


def result_row(columns: Mapping[str, Any]) -> ResultRow:
    """``columns`` as a ResultRow, for a row built under computed names (a tool importer's): a name that is no
    result column is a mistake in the code that built it (KeyError)."""
    unknown = set(columns).difference(RESULT_COLUMNS)
    if unknown:
        raise KeyError(f"{', '.join(sorted(unknown))}: not result columns (schema.ResultRow names them)")
    return cast(ResultRow, dict(columns))


def latency_columns(value: Callable[[str, str], float | None], metrics: tuple[str, ...] = LATENCY_METRICS) -> ResultRow:
    """The latency columns of a row (``mean_ttft_ms``, ``p99_itl_ms``, ...) from ``value(stat, metric)``."""
    return cast(ResultRow, {f"{stat}_{metric}_ms": value(stat, metric) for metric in metrics for stat in LATENCY_STATS})


REQUEST_SCHEMA = pa.schema(
    [
        pa.field("run_id", pa.string()),
        pa.field("cell_id", pa.string()),
        pa.field("prompt_id", pa.string()),
        pa.field("category", pa.string()),  # the prompt's category in its set; null when it has none
        pa.field("method", pa.string()),
        pa.field("k", pa.int32()),
        pa.field("concurrency", pa.int64()),
        pa.field("success", pa.bool_()),
        pa.field("error", pa.string()),
        pa.field("prompt_tokens", pa.int64()),
        pa.field("output_tokens", pa.int64()),
        pa.field("ttft_ms", pa.float64()),
        pa.field("tpot_ms", pa.float64()),
        pa.field("mean_itl_ms", pa.float64()),
        pa.field("e2el_ms", pa.float64()),
        pa.field("num_drafts", pa.int64()),
        pa.field("draft_tokens", pa.int64()),
        pa.field("accepted_tokens", pa.int64()),
        pa.field("acceptance_rate", pa.float64()),
        pa.field("acceptance_length", pa.float64()),
        pa.field("spec_decode_format", pa.string()),
        pa.field("response_format", pa.string()),
        pa.field("valid", pa.bool_()),
        pa.field("invalid_reason", pa.string()),
        pa.field("max_itl_ms", pa.float64()),
        # vLLM's per-step counts of the request's steps that drafted (detailed per-request metrics), in order
        pa.field("per_step_accepted", pa.list_(pa.int32())),
        pa.field("per_step_drafted", pa.list_(pa.int32())),
    ]
)
REQUEST_COLUMNS = tuple(REQUEST_SCHEMA.names)
