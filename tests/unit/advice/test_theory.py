"""The speedup-model formulas against hand-computed values and their limits."""

from __future__ import annotations

import math

import pytest

from specscope.advice import theory


def test_tokens_per_step_alpha_08_k4():
    # (1 - 0.8^5) / (1 - 0.8) = (1 - 0.32768) / 0.2
    assert theory.tokens_per_step(0.8, 4) == pytest.approx(3.3616, abs=1e-12)


def test_acceptance_length_from_ruiz_rates():
    # 1 + 0.714 + 0.498 + 0.363 + 0.270
    assert theory.acceptance_length([0.714, 0.498, 0.363, 0.270]) == pytest.approx(2.845, abs=1e-12)


@pytest.mark.parametrize("k", [0, 1, 5, 12])
def test_tokens_per_step_limits(k):
    assert theory.tokens_per_step(1.0, k) == k + 1
    assert theory.tokens_per_step(0.0, k) == 1.0
    assert theory.tokens_per_step(0.999999, k) == pytest.approx(k + 1, rel=1e-4)


def test_tokens_per_step_k0_is_one():
    assert theory.tokens_per_step(0.6, 0) == 1.0


def test_iid_equals_geometric_rates_with_decay_alpha():
    assert theory.tokens_per_step_rates(0.7, 0.7, 6) == pytest.approx(theory.tokens_per_step(0.7, 6))
    assert theory.geometric_rates(0.9, 0.5, 3) == pytest.approx([0.9, 0.45, 0.225])


def test_leviathan_speedup_hand_values():
    # alpha=0.8, K=4, c=0.05: 3.3616 / 1.2
    assert theory.leviathan_speedup(0.8, 4, 0.05) == pytest.approx(3.3616 / 1.2)
    # free drafts: speedup = tokens per step; alpha=0: speedup = 1/(Kc+1) < 1
    assert theory.leviathan_speedup(0.8, 4, 0.0) == pytest.approx(3.3616)
    assert theory.leviathan_speedup(0.0, 3, 0.1) == pytest.approx(1 / 1.3)


def test_speedup_from_step_cost():
    assert theory.step_cost(4, 1.0, 0.05) == pytest.approx(1.2)
    assert theory.speedup(2.845, 4, 1.1, 0.1) == pytest.approx(2.845 / 1.5)


def test_optimal_k_prefers_smaller_on_tie():
    assert theory.optimal_k({1: 1.2, 2: 1.5, 3: 1.5, 4: 1.4}) == 2


@pytest.mark.parametrize("bad", [(-0.1, 2), (1.1, 2), (0.5, -1)])
def test_tokens_per_step_rejects_bad_input(bad):
    with pytest.raises(ValueError):
        theory.tokens_per_step(*bad)


def test_cost_curve_interpolates_in_log2_concurrency():
    curve = theory.CostCurve((1.0, 4.0, 16.0), (1.0, 1.2, 1.6), (0.1, 0.2, 0.4))
    assert curve.at(4) == pytest.approx((1.2, 0.2))
    assert curve.at(2) == pytest.approx((1.1, 0.15))  # halfway in log2 between 1 and 4
    assert curve.at(32) == pytest.approx((1.8, 0.5))  # end slope continues
    assert curve.inside(8) and not curve.inside(32)
    assert curve.at(0.25)[1] == 0.0  # d1 never negative
    with pytest.raises(ValueError):
        curve.at(0)


def test_cost_curve_inside_the_measured_range_is_numpy_interp_figure_for_figure():
    import numpy as np

    concs = (1.0, 2.0, 8.0, 12.0, 64.0, 256.0)
    curve = theory.CostCurve(concs, (1.31, 1.07, 2.9, 1.5, 0.8, 3.3), (0.013, 0.4, 0.07, 0.29, 0.0, 0.9))
    xs = np.log2(np.asarray(concs))
    for conc in [*concs, *np.exp2(np.linspace(0.0, 8.0, 997))]:
        assert curve.at(float(conc)) == (
            max(0.5, float(np.interp(math.log2(conc), xs, curve.d0))),
            max(0.0, float(np.interp(math.log2(conc), xs, curve.d1))),
        )


def test_cost_curve_single_point_is_flat():
    curve = theory.CostCurve((8.0,), (1.05,), (0.07,))
    assert curve.at(1) == curve.at(512) == (1.05, 0.07)
    assert math.isclose(curve.at(8)[1], 0.07)
