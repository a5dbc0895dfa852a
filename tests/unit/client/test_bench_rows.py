"""The runner's arithmetic: canonical and per-request rows follow vllm bench serve's definitions."""

from __future__ import annotations

import math

import numpy as np
import pytest

from specscope.client import metrics
from specscope.client.cell_result import CellResult, RequestResult
from specscope.client.load import _payload, _schedule
from specscope.client.load_spec import LoadSpec
from specscope.client.progress import ProgressEvent
from specscope.errors import ConfigError
from specscope.prompts import parse
from specscope.results.writing import to_table
from specscope.schema import REQUEST_COLUMNS, REQUEST_SCHEMA, RESULT_COLUMNS, RESULT_SCHEMA

SPEC = LoadSpec(base_url="http://127.0.0.1:8000/v1", max_concurrency=2, output_len=5)


def done(prompt_id, ttft, gaps, tokens, sd=None, prompt_tokens=10):
    return RequestResult(
        prompt_id=prompt_id,
        success=True,
        prompt_tokens=prompt_tokens,
        output_tokens=tokens,
        ttft=ttft,
        itl=list(gaps),
        latency=ttft + sum(gaps),
        spec_decode=sd,
    )


def cell(requests, duration=2.0, delta=None, alive=True):
    return CellResult(SPEC, requests, duration, delta, server_alive=alive)


def test_row_matches_vllm_definitions():
    a = done("a", 0.1, [0.02, 0.04], 5)  # 3 chunks carry 5 tokens (SD steps)
    b = done("b", 0.3, [0.05], 5)
    failed = RequestResult(prompt_id="c", error="HTTP 400: too long")
    row = cell([a, b, failed]).row()
    assert row["completed"] == 2 and row["failed"] == 1 and row["num_prompts"] == 3
    assert row["total_output_tokens"] == 10 and row["output_throughput"] == pytest.approx(5.0)
    assert row["request_throughput"] == pytest.approx(1.0)
    assert row["mean_ttft_ms"] == pytest.approx(200.0)
    # TPOT = (E2EL - TTFT) / (tokens - 1), excluding the first token
    assert row["mean_tpot_ms"] == pytest.approx(np.mean([0.06 / 4, 0.05 / 4]) * 1000)
    # ITL = every gap between chunks, so under SD ITL > TPOT
    assert row["mean_itl_ms"] == pytest.approx(np.mean([0.02, 0.04, 0.05]) * 1000)
    assert row["mean_itl_ms"] > row["mean_tpot_ms"]
    assert row["p99_e2el_ms"] == pytest.approx(np.percentile([160.0, 350.0], 99))
    assert row["status"] == "ok" and row["error"] is None
    assert row["concurrency"] == 2 and row["output_len"] == 5 and math.isinf(row["request_rate"])
    assert set(row) <= set(RESULT_COLUMNS)
    to_table([row], RESULT_SCHEMA)


def test_sd_columns_come_from_the_metrics_delta():
    before = metrics.MetricsSnapshot(True, 10, 40, 20, (8.0, 6.0, 4.0, 2.0))
    after = metrics.MetricsSnapshot(True, 20, 80, 50, (17.0, 14.0, 11.0, 8.0))
    row = cell([done("a", 0.1, [0.1], 3)], delta=metrics.delta(before, after)).row()
    assert row["acceptance_rate"] == pytest.approx(30 / 40)
    assert row["acceptance_length"] == pytest.approx(1 + 30 / 10)
    assert row["per_position_acceptance"] == pytest.approx([0.9, 0.8, 0.7, 0.6])


def test_a_dead_server_or_no_success_fails_the_cell_with_its_reason():
    lost = RequestResult(prompt_id="a", error="ConnectError: All connection attempts failed")
    status, reason = cell([done("b", 0.1, [0.1], 3), lost], alive=False).status
    assert status == "failed" and "stopped answering" in reason and "ConnectError" in reason
    status, reason = cell([lost]).status
    assert status == "failed" and "Every request failed" in reason


def test_request_rows_carry_per_request_sd_metrics():
    sd = {
        "mean_acceptance_length": 2.25,
        "draft_acceptance_rate": 0.3125,
        "num_spec_steps": 4,
        "num_accepted_draft_tokens": 5,
        "num_draft_tokens": 16,
    }
    rows = cell([done("p1", 0.1, [0.1, 0.2], 5, sd), RequestResult(prompt_id="p2", error="x")]).request_rows(
        cell_id="ngram-k4-c2", method="ngram", k=4
    )
    first, second = rows
    assert first["acceptance_rate"] == 0.3125 and first["acceptance_length"] == 2.25
    assert first["num_drafts"] == 4 and first["draft_tokens"] == 16 and first["accepted_tokens"] == 5
    assert first["tpot_ms"] == pytest.approx(300 / 4) and first["mean_itl_ms"] == pytest.approx(150)
    assert second["success"] is False and second["ttft_ms"] is None and second["error"] == "x"
    assert set(first) <= set(REQUEST_COLUMNS)
    to_table(rows, REQUEST_SCHEMA)


def test_payload_follows_vllm_bench_request_bodies():
    prompt = parse(b'{"prompt": "hi", "output_tokens": 9}', "s.jsonl").prompts[0]
    url, body = _payload(SPEC, "m", prompt)
    assert url == "http://127.0.0.1:8000/v1/chat/completions"
    assert body["max_completion_tokens"] == 5 and body["ignore_eos"] and body["temperature"] == 0.0
    assert body["stream_options"] == {"include_usage": True}
    per_prompt = LoadSpec(base_url="http://h:1", output_len=None, endpoint="completions")
    url, body = _payload(per_prompt, "m", prompt)
    assert url == "http://h:1/v1/completions" and body["max_tokens"] == 9 and body["prompt"] == "hi"


def test_schedule_is_poisson_at_the_request_rate():
    assert _schedule(SPEC, 3) == [0.0, 0.0, 0.0]
    delays = _schedule(LoadSpec(base_url="http://h", request_rate=4.0), 4000)
    assert np.mean(delays) == pytest.approx(0.25, rel=0.05)


@pytest.mark.parametrize(
    "kwargs",
    [{"max_concurrency": 0}, {"num_prompts": 0}, {"output_len": 0}, {"request_rate": 0}, {"endpoint": "responses"}],
)
def test_bad_specs_are_config_errors(kwargs):
    with pytest.raises(ConfigError):
        LoadSpec(base_url="http://h", **kwargs)


def test_progress_fraction():
    event = ProgressEvent("request", "c", cells_done=1, cells_total=4, requests_done=5, requests_total=10)
    assert event.fraction == pytest.approx(1.5 / 4)
    assert ProgressEvent("cell_done", cells_done=4, cells_total=4).fraction == 1.0
