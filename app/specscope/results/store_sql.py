"""The results store's SQL text: each column's DuckDB type and typed select list, how a column folds over a
cell's repeats, the rows that count with their throughput count and variance, check ids as bits, and the table
of each cell's rounds paired with its own run's baseline. Column names come only from the fixed schema."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from specscope.results import hygiene
from specscope.schema import BASELINE_METHOD, CELL_KEYS, RESULT_SCHEMA

__all__ = [
    "duck_type",
    "select_list",
    "aggregate",
    "cell_aggregates",
    "CHECK_BITS",
    "OK",
    "THROUGHPUT_N",
    "THROUGHPUT_VAR",
    "PAIRED",
]


def duck_type(field: pa.Field) -> str:
    """The DuckDB type of a schema column."""
    return {
        pa.string(): "VARCHAR",
        pa.int32(): "INTEGER",
        pa.int64(): "BIGINT",
        pa.float64(): "DOUBLE",
        pa.bool_(): "BOOLEAN",
    }.get(field.type, "DOUBLE[]" if pa.types.is_list(field.type) else "TIMESTAMPTZ")


def select_list(schema: pa.Schema, present: set[str]) -> str:
    """Every column of ``schema`` cast to its type; those the files lack (not in ``present``) as typed nulls."""
    parts = []
    for field in schema:
        if field.name in present:
            parts.append(f'CAST("{field.name}" AS {duck_type(field)}) AS "{field.name}"')
        else:
            parts.append(f'CAST(NULL AS {duck_type(field)}) AS "{field.name}"')
    return ", ".join(parts)


def aggregate(field: pa.Field) -> str:
    """How a column folds over a cell's repeats: keys are equal, figures averaged, lists united.

    (``per_position_acceptance`` is averaged position by position apart.)
    """
    name = f'"{field.name}"'
    if field.name in CELL_KEYS:
        return f"any_value({name}) AS {name}"
    if field.name == "max_itl_ms":  # the longest stall of any repeat
        return f"max({name}) AS {name}"
    if field.name == "compiles":  # every repeat's
        return f"sum({name}) AS {name}"
    if pa.types.is_integer(field.type):
        return f"CAST(round(avg({name})) AS {duck_type(field)}) AS {name}"
    if pa.types.is_floating(field.type):
        return f"avg({name}) AS {name}"
    if pa.types.is_timestamp(field.type):
        return f"min({name}) AS {name}"
    if pa.types.is_boolean(field.type):
        return f"bool_or({name}) AS {name}"
    if pa.types.is_string(field.type):
        # e.g. comma-separated check ids: the union over repeats ('' when none flagged any), in one order
        return (
            f"coalesce(string_agg(DISTINCT nullif({name}, ''), ',' ORDER BY nullif({name}, '')), "
            f"any_value({name})) AS {name}"
        )
    return f"list_distinct(flatten(list({name}))) AS {name}"  # other lists: the union over repeats


_CELL_NEEDS = ("run_id", "method", "created_at", "output_throughput")  # the folds need these


# A row's hygiene check ids as bits (CHECKS order), set once at load: a point's checks are the bit_or of its rows'
_IDS = "',' || regexp_replace(coalesce(hygiene, ''), '[,;\\s]+', ',', 'g') || ','"  # ',waves,drift,'
CHECK_BITS = " + ".join(
    f"if(contains({_IDS}, ',{check_id},'), {1 << i}, 0)" for i, check_id in enumerate(hygiene.CHECKS)
)
OK = "coalesce(status, 'ok') = 'ok'"  # the rows that count: a failed measurement is no sample
# A group's count and variance of throughputs: over its repeats, or for a single row the spread over its
# requests that an import recorded (output_throughput_n, _var), when it did.
_ONE = "count(output_throughput) = 1 AND any_value(output_throughput_n) >= 2"
THROUGHPUT_N = f"CASE WHEN {_ONE} THEN any_value(output_throughput_n) ELSE count(output_throughput) END"
THROUGHPUT_VAR = f"CASE WHEN {_ONE} THEN any_value(output_throughput_var) ELSE var_samp(output_throughput) END"
# Per cell, its rounds paired with the same rounds of its own run's baseline (``folds.PAIR_STATS``: their count and
# the variance of their log ratios), once per snapshot: a row pairs with its run's baseline round of the same index
# when it was measured in that round (from the baseline's round on, not after its next began: a later step's cells
# numbered 1..N alike, as the deploy loop's verify cells are, or a cell's repeats run back to back, were not
# measured with it; rows of one time cannot tell).
PAIRED = f"""CREATE OR REPLACE TABLE _paired AS
    WITH starts AS (
        SELECT _run, _baseline_key, repeat, avg(output_throughput) AS _round_base, min(created_at) AS _round_at
        FROM _results WHERE {OK} AND method = '{BASELINE_METHOD}' AND repeat IS NOT NULL AND output_throughput > 0
             AND _run IS NOT NULL GROUP BY ALL),
    rounds AS (
        SELECT *, lead(_round_at) OVER (PARTITION BY _run, _baseline_key ORDER BY repeat) AS _round_until FROM starts)
    SELECT r._cell, count(*) AS _pair_m, var_samp(ln(r.output_throughput / b._round_base)) AS _pair_var
    FROM _results r JOIN rounds b USING (_run, _baseline_key, repeat)
    WHERE {OK.replace("status", "r.status")} AND r.method <> '{BASELINE_METHOD}' AND r.output_throughput > 0
          AND r.created_at >= b._round_at AND (b._round_until IS NULL OR r.created_at <= b._round_until)
    GROUP BY r._cell"""


def cell_aggregates(wanted: Sequence[str], filters: Mapping[str, Sequence[Any]] | None, empty: frozenset[str]) -> str:
    """The folds of the ``wanted`` columns (and those the folds and ``filters`` need); a column no
    row fills (``empty``) is null without folding."""
    names = {*wanted, *_CELL_NEEDS, *(filters or {})} - {"repeat", "per_position_acceptance"}
    return ", ".join(
        f'CAST(NULL AS {duck_type(f)}) AS "{f.name}"' if f.name in empty else aggregate(f)
        for f in RESULT_SCHEMA
        if f.name in names
    )
