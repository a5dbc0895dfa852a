"""stats: t quantiles against closed forms and table values; intervals against hand-worked cases."""

import math

import numpy as np
import pytest

from specscope.distributions import t_quantile, t_quantiles
from specscope.stats import (
    combined_log_ratios,
    combined_ratios,
    mean_interval,
    ratio_interval,
    ratio_prediction_interval,
)

T2 = 4.302652729911275  # t(0.975, df=2), closed form below


@pytest.mark.parametrize("p", [0.6, 0.9, 0.975, 0.995])
def test_t_quantile_matches_the_closed_forms_for_one_and_two_df(p):
    assert t_quantile(p, 1) == pytest.approx(math.tan(math.pi * (p - 0.5)), rel=1e-8)
    assert t_quantile(p, 2) == pytest.approx((2 * p - 1) * math.sqrt(2 / (4 * p * (1 - p))), rel=1e-8)


def test_t_quantile_matches_table_values_and_the_normal_limit():
    assert t_quantile(0.975, 4) == pytest.approx(2.776445105, rel=1e-8)
    assert t_quantile(0.975, 10) == pytest.approx(2.228138852, rel=1e-8)
    assert t_quantile(0.975, 1e7) == pytest.approx(1.959963985, rel=1e-6)
    assert t_quantile(0.025, 10) == pytest.approx(-2.228138852, rel=1e-8)
    # fractional df (Welch) lies between its integer neighbours
    assert t_quantile(0.975, 3) > t_quantile(0.975, 3.5) > t_quantile(0.975, 4)


@pytest.mark.parametrize("p", [0.6, 0.975, 0.995])
def test_t_quantiles_at_once_match_the_bisection(p):
    df = [1.0, 1.37, 2.0, 2.5, 4.0, 9.9, 29.0, 150.25, 1700.0, 4000.5, 2.5]
    many = t_quantiles(p, df)
    assert many.shape == (len(df),)
    for value, nu in zip(many, df):
        assert value == pytest.approx(t_quantile(p, nu), rel=1e-11)


def test_t_quantile_rejects_impossible_arguments():
    with pytest.raises(ValueError):
        t_quantile(1.0, 3)
    with pytest.raises(ValueError):
        t_quantile(0.9, 0)


def test_mean_interval_is_the_t_interval():
    iv = mean_interval([10.0, 12.0, 14.0])  # mean 12, sd 2, se 2/sqrt(3)
    half = T2 * 2 / math.sqrt(3)
    assert (iv.estimate, iv.n, iv.method) == (12.0, 3, "t")
    assert iv.low == pytest.approx(12 - half) and iv.high == pytest.approx(12 + half)
    assert iv.half_width == pytest.approx(half)
    assert iv.covers(8.0) and not iv.covers(17.0)


def test_one_value_has_no_interval():
    iv = mean_interval([21.5])
    assert (iv.estimate, iv.low, iv.high, iv.method) == (21.5, None, None, "none")
    assert not iv.bounded and iv.half_width is None and not iv.covers(21.5)


def test_bad_input_is_refused_with_a_sentence():
    with pytest.raises(ValueError, match="at least one value"):
        mean_interval([])
    with pytest.raises(ValueError, match="finite"):
        mean_interval([1.0, float("nan")])
    with pytest.raises(ValueError, match="level"):
        mean_interval([1.0, 2.0], level=95)


def test_fieller_with_an_exact_denominator_is_the_scaled_t_interval():
    iv = ratio_interval([10.0, 12.0, 14.0], [5.0, 5.0, 5.0])
    half = T2 * 2 / math.sqrt(3) / 5
    assert iv.method == "fieller" and iv.estimate == pytest.approx(2.4)
    assert iv.low == pytest.approx(2.4 - half) and iv.high == pytest.approx(2.4 + half)


def test_fieller_with_a_noisy_denominator_is_asymmetric_and_solves_its_equation():
    # a = 6 exactly, b = 3 with se^2 = 1/3 on df = 2: (6 - 3r)^2 = t^2 r^2 / 3 at both ends
    iv = ratio_interval([6.0, 6.0, 6.0], [2.0, 3.0, 4.0])
    assert iv.method == "fieller" and iv.estimate == pytest.approx(2.0)
    for r in (iv.low, iv.high):
        assert (6 - 3 * r) ** 2 == pytest.approx(T2**2 * r * r / 3)
    # by hand: r = 6 / (3 +- t/sqrt(3))
    assert iv.low == pytest.approx(6 / (3 + T2 / math.sqrt(3)))
    assert iv.high == pytest.approx(6 / (3 - T2 / math.sqrt(3)))
    assert iv.high - 2.0 > 2.0 - iv.low  # a noisy denominator stretches the upper side


def test_fieller_says_unbounded_when_the_denominator_is_not_clearly_above_zero():
    iv = ratio_interval([6.0, 6.0, 6.0], [1.0, 10.0])
    assert iv.method == "unbounded" and not iv.bounded
    assert iv.estimate == pytest.approx(6 / 5.5)


def test_ratio_with_a_single_run_on_either_side_has_no_interval():
    assert ratio_interval([20.0, 21.0, 22.0], [10.0]).method == "none"
    assert ratio_interval([20.0], [10.0]).estimate == 2.0


def test_prediction_interval_by_hand_on_the_log_scale():
    num, den = [10.0, 12.0, 14.0], [4.5, 5.0, 5.5]
    iv = ratio_prediction_interval(num, den)
    va = (4 / 144) * (2 / 3)  # cv_a^2 (1/3 + 1/3)
    vb = (0.25 / 25) * (2 / 3)
    df = (va + vb) ** 2 / (va**2 / 2 + vb**2 / 2)
    half = t_quantile(0.975, df) * math.sqrt(va + vb)
    assert iv.estimate == pytest.approx(2.4)
    assert iv.low == pytest.approx(2.4 * math.exp(-half))
    assert iv.high == pytest.approx(2.4 * math.exp(half))
    # it is wider than the confidence interval of the same speedup: a rerun has its own noise
    ci = ratio_interval(num, den)
    assert iv.low < ci.low and iv.high > ci.high


def test_prediction_interval_narrows_when_the_rerun_has_more_repeats():
    num, den = [10.0, 12.0, 14.0], [4.5, 5.0, 5.5]
    assert (
        ratio_prediction_interval(num, den, rerun_repeats=10).half_width
        < ratio_prediction_interval(num, den).half_width
    )


def test_a_throughput_or_speedup_bound_never_goes_below_zero():
    wide = [1.0, 40.0, 2.0]  # a noisy throughput: the plain t-interval reaches below 0
    assert mean_interval(wide).low < 0
    clipped = mean_interval(wide, lower=0.0)
    assert clipped.low == 0.0 and clipped.high == mean_interval(wide).high
    ratio = ratio_interval(wide, [10.0, 10.5, 9.5])
    assert ratio.low < 0
    assert ratio_interval(wide, [10.0, 10.5, 9.5], lower=0.0).low == 0.0


def _runs(samples):
    """(a, n_a, var_a, b, n_b, var_b) of runs given as (method repeats, baseline repeats)."""
    return [
        np.array(v, dtype=float)
        for v in zip(
            *[(np.mean(m), len(m), np.var(m, ddof=1), np.mean(b), len(b), np.var(b, ddof=1)) for m, b in samples]
        )
    ]


def test_two_runs_that_agree_combine_into_an_interval_narrower_than_either():
    """The bundled ngram K=4 point: two runs of 3 repeats each (1.658x and 1.516x), each over its own baseline.
    A t-interval over the two runs' figures (one degree of freedom) read 1.587x [0.679, 2.495], a tie with
    anything; combined by their own spreads it sits between them and is narrower than either run's own."""
    runs = [
        ([14.396059, 14.589284, 12.794178], [8.704953, 7.785578, 8.701404]),
        ([18.627750, 21.850542, 21.218261], [11.869038, 15.393583, 13.447192]),
    ]
    a, n_a, var_a, b, n_b, var_b = _runs(runs)
    speedup, low, high = combined_ratios(a, n_a, var_a, b, n_b, var_b)
    own = [ratio_interval(m, base) for m, base in runs]
    assert min(r.estimate for r in own) < speedup < max(r.estimate for r in own)
    assert all(high - low < r.high - r.low for r in own)
    assert 0 < low < speedup < high


def test_runs_that_disagree_beyond_their_noise_get_a_wide_interval():
    agreeing = [([10.0, 10.2, 9.8], [5.0, 5.1, 4.9]), ([10.1, 10.3, 9.9], [5.0, 5.2, 4.8])]
    apart = [([10.0, 10.2, 9.8], [5.0, 5.1, 4.9]), ([15.0, 15.2, 14.8], [5.0, 5.2, 4.8])]
    _, low, high = combined_ratios(*_runs(agreeing))
    _, apart_low, apart_high = combined_ratios(*_runs(apart))
    assert apart_high - apart_low > 5 * (high - low)
    assert apart_low < 2.0 < 3.0 < apart_high  # holds both runs' figures


def test_combined_runs_cover_the_true_speedup_about_as_often_as_claimed():
    rng = np.random.default_rng(7)
    hits = 0
    for _ in range(400):
        runs = [(rng.normal(15.0 * level, 1.0, 3), rng.normal(10.0 * level, 1.0, 3)) for level in (1.0, 0.7)]
        _, low, high = combined_ratios(*_runs(runs))
        hits += low <= 1.5 <= high
    assert 0.9 <= hits / 400 <= 0.995


def test_runs_without_repeats_give_no_combined_interval():
    speedup, low, high = combined_ratios([15.0, 16.0], [1, 1], [np.nan, np.nan], [10.0, 10.0], [1, 1], [np.nan, np.nan])
    assert np.isnan(speedup) and np.isnan(low) and np.isnan(high)  # the store falls back to the runs' spread


def test_combined_log_ratios_fold_many_points_as_one_at_a_time():
    """The store folds every figure point's runs at once (``combined_log_ratios`` on group numbers): the same
    figures as ``combined_ratios`` point by point."""
    rng = np.random.default_rng(3)
    groups = np.repeat(np.arange(40), rng.integers(2, 5, 40))
    n = len(groups)
    a, b = rng.uniform(10, 20, n), rng.uniform(8, 12, n)
    n_a, n_b = rng.integers(2, 6, n), rng.integers(2, 6, n)
    var_a, var_b = rng.uniform(0.1, 9, n), rng.uniform(0.1, 9, n)
    together = combined_log_ratios(
        groups, np.log(a / b), var_a / (n_a * a * a), n_a - 1, var_b / (n_b * b * b), n_b - 1
    )
    for g in range(40):
        at = groups == g
        alone = combined_ratios(a[at], n_a[at], var_a[at], b[at], n_b[at], var_b[at])
        assert [float(v[g]) for v in together] == pytest.approx(list(alone), rel=1e-9)
