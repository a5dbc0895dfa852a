"""The typed result row: ``schema.ResultRow`` names the columns and their types, and the Arrow schema is built
from it; rows built under computed names are held to it."""

from __future__ import annotations

import datetime as dt
from typing import get_type_hints

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from specscope import schema
from specscope.results import writing


def test_the_arrow_schema_is_the_typed_rows_columns_in_order():
    hints = get_type_hints(schema.ResultRow, include_extras=True)
    assert list(hints) == list(schema.RESULT_COLUMNS)
    assert schema.RESULT_SCHEMA.field("k").type == pa.int32()
    assert schema.RESULT_SCHEMA.field("created_at").type == pa.timestamp("us", tz="UTC")
    assert schema.RESULT_SCHEMA.field("per_position_acceptance").type == pa.list_(pa.float64())
    assert {f.type for f in schema.RESULT_SCHEMA} <= {
        pa.string(),
        pa.int32(),
        pa.int64(),
        pa.float64(),
        pa.timestamp("us", tz="UTC"),
        pa.list_(pa.float64()),
    }


def test_latency_columns_are_the_schemas_and_read_each_stat_of_each_metric():
    row = schema.latency_columns(lambda stat, metric: f"{stat}/{metric}")
    assert set(row) <= set(schema.RESULT_COLUMNS) and len(row) == 12
    assert row["p99_itl_ms"] == "p99/itl" and row["median_ttft_ms"] == "median/ttft"
    assert set(schema.latency_columns(lambda stat, metric: 1.0, ("ttft",))) == {
        "mean_ttft_ms",
        "median_ttft_ms",
        "p99_ttft_ms",
    }


def test_a_row_under_a_name_the_schema_lacks_is_refused_by_name():
    assert schema.result_row({"k": 4, "method": "ngram"}) == {"k": 4, "method": "ngram"}
    with pytest.raises(KeyError, match="num_spec_tokens"):
        schema.result_row({"k": 4, "num_spec_tokens": 4})


def test_a_typed_row_writes_as_the_schema(tmp_path):
    row: schema.ResultRow = {
        "created_at": dt.datetime(2026, 12, 7, tzinfo=dt.UTC),
        "source": "specscope",
        "model": "m",
        "method": "ngram",
        "k": 4,
        "concurrency": 1,
        "output_throughput": 12.5,
        "status": "ok",
        "per_position_acceptance": [0.8, 0.6],
        **schema.latency_columns(lambda stat, metric: 3.0 if metric == "tpot" else None),
    }
    path = writing.write_results([row], run_id="typed-row", directory=tmp_path)
    table = pq.read_table(path)
    assert table.schema.equals(schema.RESULT_SCHEMA)
    read = table.to_pylist()[0]
    assert (read["k"], read["method"], read["median_tpot_ms"], read["p99_ttft_ms"]) == (4, "ngram", 3.0, None)
    assert read["per_position_acceptance"] == [0.8, 0.6]
