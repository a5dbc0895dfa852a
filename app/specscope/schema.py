"""The canonical result row and the per-request row, as Arrow schemas.

One canonical row = one (model, method, K, concurrency) cell of one run on one prompt set.
``data/SCHEMA.md`` documents every column; a test keeps the two in step.
"""

from __future__ import annotations

import pyarrow as pa

__all__ = ["RESULT_SCHEMA", "REQUEST_SCHEMA", "RESULT_COLUMNS", "REQUEST_COLUMNS",
           "LATENCY_METRICS", "BASELINE_METHOD", "OWN_SOURCE", "CALIBRATION_SOURCE", "PROVENANCE_KEYS", "BASELINE_KEYS",
           "BEST_KEYS", "SETUP_KEYS", "POINT_KEYS", "CELL_KEYS", "FAMILY_KEYS", "FRONT_KEYS", "VERSION_KEYS"]

BASELINE_METHOD = "none"
OWN_SOURCE = "specscope"  # rows SpecScope measured itself
CALIBRATION_SOURCE = "calibration"  # synthetic-acceptance sweeps: step cost, not a method's speedup
LATENCY_METRICS = ("ttft", "tpot", "itl", "e2el")

# The keys that group result rows, for each table or question built over them.
# Provenance: rows that differ in these never share a baseline, a setup or a best K.
PROVENANCE_KEYS = ("vllm_version", "torch_version", "weights")
BASELINE_KEYS = ("source", "model", "dataset", "response_format", "hardware", "host", *PROVENANCE_KEYS, "output_len",
                 "temperature", "concurrency", "request_rate")
BEST_KEYS = ("source", "model", "draft_model", "method", "dataset", "response_format", "hardware", "host",
             *PROVENANCE_KEYS, "acceptance", "temperature", "concurrency", "request_rate")
SETUP_KEYS = ("source", "model", "draft_model", "method", "dataset", "response_format", "hardware", "host",
              *PROVENANCE_KEYS, "acceptance")
POINT_KEYS = (*SETUP_KEYS, "k_schedule", "concurrency", "request_rate", "k")  # a figure point: its runs fold into it
CELL_KEYS = ("run_id", "source", "label", "model", "draft_model", "method", "k", "k_schedule",
             "method_params", "tp",
             "hardware", "host", *PROVENANCE_KEYS, "acceptance", "dataset", "response_format", "temperature",
             "output_len", "concurrency", "request_rate")
# a family the advisor fits: one curve over K and concurrency
FAMILY_KEYS = ("source", "model", "draft_model", "method", "dataset", "response_format", "hardware", "vllm_version",
               "weights", "acceptance")
# a limits group: the cells one speed-latency front compares
FRONT_KEYS = ("source", "model", "dataset", "response_format", "hardware", "host", "vllm_version", "torch_version",
              "weights", "temperature", "output_len")
# the versions a setup is compared across
VERSION_KEYS = ("vllm_version", "torch_version")

_fields: list[pa.Field] = [
    pa.field("run_id", pa.string()),
    pa.field("created_at", pa.timestamp("us", tz="UTC")),
    pa.field("source", pa.string()),
    pa.field("label", pa.string()),
    pa.field("model", pa.string()),
    pa.field("draft_model", pa.string()),
    pa.field("method", pa.string()),
    pa.field("k", pa.int32()),
    pa.field("k_schedule", pa.string()),  # batch size -> K schedule (canonical text); k is its maximum
    pa.field("method_params", pa.string()),
    pa.field("tp", pa.int32()),
    pa.field("hardware", pa.string()),
    pa.field("host", pa.string()),
    pa.field("vllm_version", pa.string()),
    pa.field("torch_version", pa.string()),  # with its CUDA build, e.g. 2.11.0+cu130
    pa.field("weights", pa.string()),        # real | dummy (--load-format dummy: engine cost only)
    pa.field("acceptance", pa.string()),     # real | synthetic (drafts accepted at set rates); null: baseline
    pa.field("dataset", pa.string()),
    pa.field("response_format", pa.string()),  # none | json_schema | regex | choice (comma-joined); null: old rows
    pa.field("num_prompts", pa.int64()),
    pa.field("temperature", pa.float64()),
    pa.field("output_len", pa.int64()),
    pa.field("concurrency", pa.int64()),
    pa.field("request_rate", pa.float64()),
    pa.field("repeat", pa.int32()),
    pa.field("duration_s", pa.float64()),
    pa.field("completed", pa.int64()),
    pa.field("failed", pa.int64()),
    pa.field("total_input_tokens", pa.int64()),
    pa.field("total_output_tokens", pa.int64()),
    pa.field("request_throughput", pa.float64()),
    pa.field("output_throughput", pa.float64()),
]
for _metric in LATENCY_METRICS:
    for _stat in ("mean", "median", "p99"):
        _fields.append(pa.field(f"{_stat}_{_metric}_ms", pa.float64()))
_fields += [
    pa.field("acceptance_rate", pa.float64()),
    pa.field("acceptance_length", pa.float64()),
    pa.field("num_drafts", pa.int64()),
    pa.field("draft_tokens", pa.int64()),
    pa.field("accepted_tokens", pa.int64()),
    pa.field("per_position_acceptance", pa.list_(pa.float64())),
    pa.field("status", pa.string()),
    pa.field("error", pa.string()),
    # benchmark hygiene: what the checks of specscope.results.hygiene read, and the checks that flagged
    pa.field("warmups", pa.int64()),
    pa.field("prefix_cache_hit_rate", pa.float64()),
    pa.field("wave_share", pa.float64()),
    pa.field("max_num_seqs", pa.int64()),
    pa.field("foreign_cpu", pa.float64()),
    pa.field("prior_requests", pa.int64()),
    pa.field("lossless_mismatches", pa.int64()),
    pa.field("hygiene", pa.string()),  # comma-separated check ids
    pa.field("valid_share", pa.float64()),  # constrained answers that follow their format; null when free
    pa.field("max_itl_ms", pa.float64()),   # the longest gap between streamed chunks of any request
    pa.field("compiles", pa.int64()),  # what the server's log says it compiled while the cell was measured
    # an imported cell's throughput spread from its requests (specscope.results.tool_exports.spread)
    pa.field("output_throughput_n", pa.int64()),
    pa.field("output_throughput_var", pa.float64()),
]

RESULT_SCHEMA = pa.schema(_fields)
RESULT_COLUMNS = tuple(RESULT_SCHEMA.names)

REQUEST_SCHEMA = pa.schema([
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
])
REQUEST_COLUMNS = tuple(REQUEST_SCHEMA.names)

