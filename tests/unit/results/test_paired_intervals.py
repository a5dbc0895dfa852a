"""Paired speedup intervals: a cell measured in the same rounds as its own run's baseline takes its interval
from the per-round log ratios, so a slowdown a round shares cancels; the drift check says when rounds drifted."""

from __future__ import annotations

import math

import numpy as np
import pytest

from specscope import distributions, stats
from specscope.analysis import explore, intervals
from specscope.cli import build_parser
from specscope.results import hygiene, store, writing


def _row(method, k, tput, repeat, conc=1, **extra):
    return {
        "source": "specscope",
        "model": "m",
        "dataset": "d",
        "hardware": "cpu-2core",
        "host": "box",
        "output_len": 64,
        "temperature": 0.0,
        "method": method,
        "k": k,
        "concurrency": conc,
        "repeat": repeat,
        "output_throughput": tput,
        "status": "ok",
        **extra,
    }


# one run, 3 rounds, round 0 slowed 2x for every cell alike (a neighbour): the ratios within a round steady
BASE = [12.0, 24.5, 23.8]
CELLS = {2: [16.5, 33.9, 32.6], 4: [17.4, 35.0, 34.9]}


def _drifted_run(tmp_path, run_id="drift", *, baseline=True):
    rows = [_row("none", 0, v, i) for i, v in enumerate(BASE)] if baseline else []
    rows += [_row("ngram", k, v, i) for k, values in CELLS.items() for i, v in enumerate(values)]
    writing.write_results(rows, run_id=run_id, directory=tmp_path)
    return rows


def _cells(tmp_path):
    return store.Store(result_dirs=[tmp_path], request_dirs=[]).speedup({"method": ["ngram"]}).set_index("k")


def test_the_paired_interval_is_the_t_interval_of_the_per_round_log_ratios_about_the_speedup(tmp_path):
    _drifted_run(tmp_path)
    cell = _cells(tmp_path).loc[4]
    logs = np.log(np.array(CELLS[4]) / np.array(BASE))
    half = distributions.t_quantile(0.975, 2) * np.std(logs, ddof=1) / math.sqrt(3)
    speedup = np.mean(CELLS[4]) / np.mean(BASE)  # the ratio of the means every view quotes, inside the interval
    assert cell["speedup"] == pytest.approx(speedup)
    assert (cell["speedup_lo"], cell["speedup_hi"]) == (
        pytest.approx(speedup * math.exp(-half)),
        pytest.approx(speedup * math.exp(half)),
    )
    assert cell["speedup_interval"] == "paired"


def test_a_slowdown_shared_by_a_round_cancels_in_the_paired_interval(tmp_path):
    _drifted_run(tmp_path)
    cells = _cells(tmp_path)
    for k, values in CELLS.items():
        fieller = stats.ratio_interval(values, BASE, lower=0.0)  # the same rows as unpaired samples
        paired = cells.loc[k]
        assert fieller.half_width > 10 * (paired["speedup_hi"] - paired["speedup_lo"]) / 2
        assert fieller.low < 1.0 < 1.3 < paired["speedup_lo"]  # Fieller: "maybe slower"; paired: faster
    # and the run's throughput intervals carry the shared slowdown: its rows say so
    assert hygiene.round_drift(_drifted_run(tmp_path / "again")) == pytest.approx(2.0, rel=0.05)


def test_only_the_runs_own_baseline_pairs(tmp_path):
    _drifted_run(tmp_path, "with-base")
    _drifted_run(tmp_path, "no-base", baseline=False)  # same rounds, but its baseline is another run's
    frame = store.Store(result_dirs=[tmp_path], request_dirs=[]).speedup({"method": ["ngram"]})
    methods = dict(zip(frame["run_id"], frame["speedup_interval"]))
    assert methods == {"with-base": "paired", "no-base": "fieller"}
    assert set(frame.loc[frame["run_id"] == "no-base", "baseline_run_id"]) == {"with-base"}


def test_a_cell_without_two_shared_rounds_keeps_fieller_or_none(tmp_path):
    rows = [_row("none", 0, v, i) for i, v in enumerate([20.0, 21.0, 22.0])]
    rows += [_row("ngram", 2, v, i + 2) for i, v in enumerate([30.0, 31.0, 29.0])]  # rounds 2-4: one shared
    rows += [_row("ngram", 4, 30.0, None), _row("ngram", 4, 31.0, None)]  # no round index: cells of one row
    writing.write_results(rows, run_id="r", directory=tmp_path)
    frame = store.Store(result_dirs=[tmp_path], request_dirs=[]).speedup({"method": ["ngram"]})
    assert sorted(zip(frame["k"], frame["speedup_interval"])) == [(2, "fieller"), (4, "none"), (4, "none")]


def test_a_point_over_runs_weighs_a_paired_run_by_its_paired_spread(tmp_path):
    _drifted_run(tmp_path, "a")
    rows = [_row("none", 0, v, i) for i, v in enumerate([20.0, 20.5, 19.5])]
    rows += [_row("ngram", 4, v, i) for i, v in enumerate([29.0, 28.5, 29.5])]
    writing.write_results([{**r, "created_at": None} for r in rows], run_id="b", directory=tmp_path)
    db = store.Store(result_dirs=[tmp_path], request_dirs=[])
    [point] = explore.speedup_vs_k(db, {"k": [4]}).to_dict("records")
    own = db.speedup({"method": ["ngram"], "k": [4]}).set_index("run_id")
    logs = [
        np.log(np.array(CELLS[4]) / np.array(BASE)),
        np.log(np.array([29.0, 28.5, 29.5]) / np.array([20.0, 20.5, 19.5])),
    ]
    means = [(np.mean(CELLS[4]), np.mean(BASE)), (29.0, 20.0)]
    expected = stats.combined_log_ratios(
        [0, 0], [np.log(a / b) for a, b in means], [np.var(v, ddof=1) / 3 for v in logs], [2, 2], [0.0, 0.0], [1, 1]
    )
    assert point["runs"] == 2 and set(own["speedup_interval"]) == {"paired"}
    assert (point["speedup"], point["speedup_lo"], point["speedup_hi"]) == tuple(
        pytest.approx(float(v[0])) for v in expected
    )


def test_paired_intervals_need_two_rounds_and_never_reach_zero():
    low, high = stats.paired_ratio_intervals([1.5, 1.5, 0.8], [1, 3, 3], [0.01, 0.01, 4.0])
    assert math.isnan(low[0]) and math.isnan(high[0])
    assert 0 < low[1] < 1.5 < high[1] and low[1] * high[1] == pytest.approx(1.5**2)  # symmetric in logs
    assert 0 < low[2] < 0.8 < high[2]


def test_f_survival_matches_published_critical_values():
    # F(0.95; 1, 10) = 4.965, F(0.95; 2, 6) = 5.143, F(0.95; 2, 28) = 3.340
    for f, d1, d2 in ((4.965, 1, 10), (5.143, 2, 6), (3.340, 2, 28)):
        assert distributions.f_survival(f, d1, d2) == pytest.approx(0.05, abs=5e-4)
    assert distributions.f_survival(0.0, 2, 6) == 1.0 and distributions.f_survival(math.inf, 2, 6) == 0.0


def _rounds(factors, noise=0.0, cells=4, seed=0):
    rng = np.random.default_rng(seed)
    return [
        _row("ngram", k, 20.0 * (1 + k / 10) * f * math.exp(rng.normal(0, noise)), i, hygiene="")
        for k in range(1, cells + 1)
        for i, f in enumerate(factors)
    ]


def test_rounds_that_drift_together_are_flagged_on_every_round_of_the_run():
    rows = hygiene.mark_drift(_rounds([0.5, 1.0, 1.0], noise=0.02))
    assert all(hygiene.flagged_ids(r["hygiene"]) == ["drift"] for r in rows)
    assert hygiene.mark_drift(rows) == rows and rows[0]["hygiene"] == "drift"  # once, however often judged


def test_steady_or_noisy_rounds_are_not_drift():
    assert hygiene.round_drift(_rounds([1.0, 1.0, 1.0], noise=0.05)) is None  # only the cells' own noise
    assert hygiene.round_drift(_rounds([1.0, 1.05, 1.0], noise=0.002)) == pytest.approx(1.05, rel=0.01)
    assert hygiene.mark_drift(_rounds([1.0, 1.05, 1.0], noise=0.002))[0]["hygiene"] == ""  # under DRIFT_LIMIT
    assert hygiene.round_drift(_rounds([0.5, 1.0], cells=1)) is None  # one cell cannot tell a round's share
    assert hygiene.round_drift([{**r, "repeat": None} for r in _rounds([0.5, 1.0])]) is None  # no rounds


def test_drift_leaves_a_cell_in_the_headline():
    drift = hygiene.CHECKS["drift"]
    assert not drift.distorts and drift.badge == "rounds drifted" and hygiene.distorting(["drift"]) == []


def test_sweeps_default_to_three_repeats_and_two_say_what_they_buy():
    args = build_parser().parse_args(["bench", "--preset", "p", "--prompts", "x.jsonl"])
    assert args.repeats == intervals.DEFAULT_REPEATS == 3
    factor = (distributions.t_quantile(0.975, 1) / math.sqrt(2)) / (distributions.t_quantile(0.975, 2) / math.sqrt(3))
    assert intervals.width_factor(2) == pytest.approx(factor) and 3.6 < factor < 3.7
    assert intervals.repeats_note(2) == (
        "With 2 repeats an interval rests on 1 degree of freedom (t = 12.7): "
        "about 3.6x as wide as with 3, for one round less."
    )
    assert intervals.repeats_note(3) == intervals.repeats_note(5) == ""


def test_a_bar_far_wider_than_the_points_is_cut_at_the_charts_edge():
    low, high, cut_low, cut_high = intervals.drawn([1.2, 1.4, 1.3], [0.4, 1.1, 1.0], [9.1, 1.7, 1.6], 1.0)
    assert list(cut_high) == [True, False, False] and not cut_low.any()
    assert high[0] == pytest.approx(1.4 + 0.7) and list(high[1:]) == [1.7, 1.6]  # points 1-1.4, margin 0.7
    low, high, cut_low, cut_high = intervals.drawn([24.6, 30.0], [0.0, 20.0], [79.8, 40.0])  # tok/s, no reference
    assert list(cut_low) == [True, False] and list(cut_high) == [True, False]
    assert (low[0], high[0]) == (pytest.approx(30.0 - 15 - 5.4), pytest.approx(45.0))  # margin: half the top
    low, _, cut_low, _ = intervals.drawn([0.1, 1.0], [0.0, 0.5], [0.3, 1.2])
    assert not cut_low.any() and low[0] == 0.0  # never below 0


def test_rounds_pair_only_when_measured_in_the_baselines_round(tmp_path):
    """A cell's round i pairs with the baseline's round i only if it was measured from that round's start to
    the next one's: a later step's cells numbered 1..3 alike (the deploy loop's verify cells), or repeats run
    back to back cell by cell (an old sweep), were not measured with it."""
    import datetime as dt

    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)

    def at(minutes, row):
        return {**row, "created_at": t0 + dt.timedelta(minutes=minutes)}

    rows = [at(10 * i, _row("none", 0, v, i)) for i, v in enumerate(BASE)]  # rounds at 0, 10 and 20 minutes
    rows += [at(10 * i + 2, _row("ngram", 2, v, i)) for i, v in enumerate(CELLS[2])]  # within each round
    rows += [at(40 + i, _row("ngram", 4, v, i)) for i, v in enumerate(CELLS[4])]  # a later step, rounds 0-2
    writing.write_results(rows, run_id="steps", directory=tmp_path)
    assert dict(zip(_cells(tmp_path).index, _cells(tmp_path)["speedup_interval"])) == {2: "paired", 4: "fieller"}


def test_two_runs_that_barely_disagree_do_not_jump_to_one_degree_of_freedom():
    """The random-effects term's degrees of freedom (the runs less one) weigh in as its share of the variance
    grows: two paired runs whose figures differ by just more than their noise read about as wide as by just less."""

    def width(gap):
        _, low, high = stats.combined_log_ratios([0, 0], [0.40, 0.40 + gap], [0.002, 0.002], [2, 2], [0.0, 0.0], [1, 1])
        return float(np.log(high[0] / low[0]))

    below, above = width(0.062), width(0.065)  # Q = gap^2 / 0.004: 0.96 and 1.06 against 1 degree of freedom
    assert above < 1.2 * below
    assert width(0.3) > 3 * below  # runs far apart beyond their noise: wide, on few degrees of freedom
