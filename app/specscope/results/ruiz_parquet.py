"""Ruiz-style Parquet (``sd_method, num_spec_toks, analysis, output_token_throughput``) as canonical rows: the
setup (model, hardware) its ``analysis`` column names, or the model given for every row; earlier exports are
named as such and refused where they lack what speedups compare."""

from __future__ import annotations

import math
from collections.abc import Mapping

import pyarrow as pa

from specscope.errors import InputError
from specscope.schema import ResultRow, latency_columns

__all__ = ["RUIZ_SETUPS", "RUIZ_COLUMNS", "check_ruiz_version", "ruiz_rows"]

# Ruiz's file names its setup in `analysis`, not its model.
RUIZ_SETUPS = {
    "qwen": {"model": "Qwen/Qwen3-32B", "hardware": "1xH100"},
    "llama70b": {"model": "meta-llama/Llama-3.3-70B-Instruct", "hardware": "2xH100"},
}
RUIZ_COLUMNS = {"sd_method", "num_spec_toks"}  # every version has these; see check_ruiz_version


def _num(value):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return value


def check_ruiz_version(name: str, columns: set[str], given: set[str]) -> None:
    """Earlier Ruiz exports lack ``analysis`` (the model) and may hold only total throughput."""
    if "output_token_throughput" not in columns:
        raise InputError(
            f"{name} is an earlier Ruiz export: it has total_token_throughput (input + output "
            "tokens/s) but no output_token_throughput, which speedups compare; import "
            "full-bench-data.parquet instead (the Explorer's Published datasets)."
        )
    if "analysis" not in columns and "model" not in given:
        raise InputError(
            f"{name} is a Ruiz export without the analysis column that names its model; "
            "give the model (and hardware) for every row, e.g. --model Qwen/Qwen3-32B "
            "--hardware 1xH100."
        )


def ruiz_rows(table: pa.Table, given: set[str]) -> list[ResultRow]:
    """The canonical rows of a Ruiz export, each under the setup its analysis names (or --model's, ``given``)."""
    rows: list[ResultRow] = []
    for i, rec in enumerate(table.to_pylist(), start=1):
        setup: Mapping[str, str | None] | None = RUIZ_SETUPS.get(rec.get("analysis"))
        if setup is None and "model" in given:  # the model comes from --model
            setup = {"model": None, "hardware": None}
        if setup is None:
            raise InputError(
                f"Row {i} has analysis={rec.get('analysis')!r}, which names no known setup "
                f"({', '.join(RUIZ_SETUPS)}); give --model and --hardware, or map its "
                "columns.",
                line=i,
            )
        rows.append(_ruiz_row(rec, setup))
    return rows


def _ruiz_row(rec: Mapping, setup: Mapping[str, str | None]) -> ResultRow:
    """One row of a Ruiz export, under the setup its analysis names."""
    method = rec.get("sd_method")
    method = "none" if method in (None, "None", "") else method
    draft = rec.get("draft_model")
    rate = _num(rec.get("acceptance_rate"))
    return {
        "source": "ruiz-2026",
        "label": "Ruiz 2026, vllm-scripts full-bench-data",
        "model": setup["model"],
        "hardware": setup["hardware"],
        "draft_model": None if draft in (None, "None", "") else draft,
        "method": method,
        "k": int(rec.get("num_spec_toks") or 0),
        "tp": rec.get("tp"),
        "dataset": rec.get("dataset"),
        "temperature": rec.get("temp"),
        "concurrency": rec.get("concurrency"),
        "num_prompts": rec.get("n_reqs"),
        "completed": rec.get("n_reqs"),
        "failed": 0,
        "duration_s": rec.get("benchmark_duration_s"),
        "request_throughput": rec.get("req_throughput"),
        "output_throughput": rec.get("output_token_throughput"),
        "acceptance_length": _num(rec.get("acceptance_length")),
        "acceptance_rate": None if rate is None else rate / 100.0,
        "status": "ok",
        **latency_columns(lambda stat, metric: _num(rec.get(f"{stat}_{metric}")), ("ttft", "tpot", "itl")),
    }
