"""``vllm bench serve --save-result`` JSON as a canonical row: ``--metadata method=... k=...`` keys are used
(numeric text typed by the schema), and files from before ``--max-concurrency`` are read too; a
``vllm bench forward`` file is named and sent to ``specscope calibrate``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

import pyarrow as pa

from specscope.errors import InputError
from specscope.schema import RESULT_SCHEMA, ResultRow, latency_columns

__all__ = ["bench_json_row"]


def _coerce(row: ResultRow, name: str) -> ResultRow:
    """Turn numeric text (``--metadata k=4`` is saved as "4") into the schema's number types."""
    columns = cast(dict[str, Any], row)  # every column, by the schema's names
    for field in RESULT_SCHEMA:
        value = row.get(field.name)
        if not isinstance(value, str):
            continue
        if pa.types.is_integer(field.type) or pa.types.is_floating(field.type):
            try:
                number = float(value)
            except ValueError as exc:
                raise InputError(f"{name}: {field.name}={value!r} is not a number.", field=field.name) from exc
            columns[field.name] = int(number) if pa.types.is_integer(field.type) else number
    return row


def _bench_concurrency(obj: dict):
    """``max_concurrency``; files of vLLM versions before that flag sent every prompt at once when
    the request rate was unlimited (so concurrency = num_prompts) and state none otherwise."""
    if "max_concurrency" in obj:
        return obj["max_concurrency"]
    return obj.get("num_prompts") if obj.get("request_rate") in (None, "inf", float("inf")) else None


def bench_json_row(name: str, data: bytes, overrides: Mapping) -> list[ResultRow]:
    """The canonical row of a `vllm bench serve --save-result` file; ``overrides`` may give its method and K."""
    try:
        obj = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{name} is not valid JSON ({exc}).") from exc
    if isinstance(obj, list) and obj and all(isinstance(c, dict) and {"case", "median_us"} <= set(c) for c in obj):
        raise InputError(
            f"{name} is `vllm bench forward` output: forward times of exact batches, not results; "
            "import it as a step-cost prior with specscope calibrate --forward FILE --model M "
            "--hardware H."
        )
    if not isinstance(obj, dict) or "output_throughput" not in obj or "model_id" not in obj:
        raise InputError(
            f"{name} is JSON but not a `vllm bench serve --save-result` file (it needs model_id and output_throughput)."
        )
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
    row: ResultRow = {
        "source": "vllm-bench",
        "label": obj.get("label"),
        "created_at": None,
        "model": obj.get("model_id"),
        "draft_model": obj.get("draft_model"),
        "method": method,
        "k": k,
        "hardware": obj.get("hardware"),
        "vllm_version": obj.get("vllm_version"),
        "dataset": obj.get("dataset") or obj.get("dataset_name"),
        "num_prompts": obj.get("num_prompts"),
        "temperature": obj.get("temperature"),
        "output_len": obj.get("output_len"),
        "concurrency": _bench_concurrency(obj),
        "request_rate": None if obj.get("request_rate") in (None, "inf") else float(obj["request_rate"]),
        "duration_s": obj.get("duration"),
        "completed": obj.get("completed"),
        "failed": obj.get("failed"),
        "total_input_tokens": obj.get("total_input_tokens"),
        "total_output_tokens": obj.get("total_output_tokens"),
        "request_throughput": obj.get("request_throughput"),
        "output_throughput": obj.get("output_throughput"),
        "acceptance_rate": None if rate is None else rate / 100.0,
        "acceptance_length": obj.get("spec_decode_acceptance_length"),
        "num_drafts": obj.get("spec_decode_num_drafts"),
        "draft_tokens": obj.get("spec_decode_draft_tokens"),
        "accepted_tokens": obj.get("spec_decode_accepted_tokens"),
        "per_position_acceptance": per_pos,
        "status": "ok",
        **latency_columns(lambda stat, metric: obj.get(f"{stat}_{metric}_ms")),
    }
    return [_coerce(row, name)]
