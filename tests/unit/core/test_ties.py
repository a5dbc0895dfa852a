"""The one rule for "within noise" (``specscope.ties``): against the baseline it is "the interval excludes
1.000x"; between two figures, the gap of their logs against its standard error; pooled over concurrencies,
consistent small gains add up; without an interval nothing is decided; the arrays give what the scalars give."""

from __future__ import annotations

import numpy as np
import pytest

from specscope import ties
from specscope.ties import Figure


@pytest.mark.parametrize(
    "lo, hi, expected",
    [(1.05, 1.35, ties.FASTER), (0.95, 1.35, ties.TIE), (0.70, 0.98, ties.SLOWER), (1.0, 1.3, ties.TIE)],
)
def test_against_the_baseline_a_figure_is_apart_exactly_when_its_interval_excludes_one(lo, hi, expected):
    value = (lo * hi) ** 0.5
    assert ties.outcome(Figure(value, lo, hi, 2)) == expected
    assert ties.outcome(Figure(value, lo, hi, None)) == expected  # whatever the degrees of freedom


def test_two_figures_whose_intervals_overlap_can_still_be_apart():
    a, b = Figure(1.60, 1.44, 1.76, 4), Figure(1.30, 1.15, 1.46, 4)
    assert a.lo < b.hi  # the intervals touch
    assert ties.outcome(a, b) == ties.FASTER and ties.outcome(b, a) == ties.SLOWER
    assert ties.outcome(Figure(1.4, 1.2, 1.6, 2), Figure(1.3, 1.1, 1.5, 2)) == ties.TIE


def test_a_single_run_on_either_side_decides_nothing():
    assert ties.outcome(Figure(2.0)) == ties.NO_INTERVAL
    assert ties.outcome(Figure(2.0, 1.9, 2.1, 2), Figure(1.0)) == ties.NO_INTERVAL
    assert ties.repeats_to_tell(Figure(2.0), None, 1) is None
    assert "a single run has no interval" in ties.words(ties.NO_INTERVAL)


def test_gains_that_tie_at_each_load_add_up_when_pooled():
    each = Figure(1.10, 0.98, 1.235, 2)
    assert ties.outcome(each) == ties.TIE
    assert ties.pooled([each] * 4) == ties.FASTER
    assert ties.pooled([each], [Figure(1.0, 0.9, 1.1, 2)]) == ties.outcome(each, Figure(1.0, 0.9, 1.1, 2))


def test_repeats_to_tell_grow_as_the_gap_shrinks_and_none_once_apart():
    wide = Figure(1.10, 0.95, 1.27, 2)
    needed = ties.repeats_to_tell(wide, None, 3)
    assert needed is not None and needed > 3
    assert ties.repeats_to_tell(Figure(1.03, 0.95, 1.12, 2), None, 3) > needed
    assert ties.repeats_to_tell(Figure(1.2, 1.1, 1.3, 2), None, 3) is None  # already apart
    assert ties.telling([needed, 5]) == f"about {max(needed, 5)} repeats would tell, if the measured spread holds"
    assert ties.telling([101]).startswith("even 100 repeats")


def test_the_arrays_decide_as_the_scalars_do():
    rng = np.random.default_rng(7)
    n = 2000
    va, vb = rng.uniform(0.5, 2, n), rng.uniform(0.5, 2, n)
    la, ha = va * rng.uniform(0.5, 1, n), va * rng.uniform(1, 1.6, n)
    lb, hb = vb * rng.uniform(0.5, 1, n), vb * rng.uniform(1, 1.6, n)
    da, db = rng.integers(1, 6, n).astype(float), rng.integers(1, 6, n).astype(float)
    la[::7], db[::11], lb[::13] = np.nan, np.nan, 0.0
    got = ties.outcomes((va, la, ha, da), (vb, lb, hb, db))

    def figure(v, lo, hi, dof):
        return Figure(v, None if np.isnan(lo) else lo, hi, None if np.isnan(dof) else dof)

    want = [ties.outcome(figure(va[i], la[i], ha[i], da[i]), figure(vb[i], lb[i], hb[i], db[i])) for i in range(n)]
    assert list(got) == want
    assert set(want) == {ties.FASTER, ties.SLOWER, ties.TIE, ties.NO_INTERVAL}
