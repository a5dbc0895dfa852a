"""One way to write an interval: bounds in brackets after the estimate, never ``±``."""

from __future__ import annotations

import math

from specscope.analysis import intervals


def test_bounds_in_brackets_asymmetric_as_they_are():
    assert intervals.text(1.325, 1.054, 1.775, unit="×") == "1.325× [1.054, 1.775]"
    assert intervals.text(21.37, 19.8, 23.02, digits=1) == "21.4 [19.8, 23.0]"
    assert intervals.text(1.3, None, None, unit="×") == "1.300× (1 run: no interval)"
    assert intervals.text(1.3, math.nan, 1.5, unit="×", why_none="") == "1.300×"
    assert intervals.text(None) == "–"
    assert intervals.bounds(1.054, 1.775) == "[1.054, 1.775]" and intervals.bounds(None, 2.0) == ""


def test_a_rows_interval_says_why_it_has_none():
    row = {"method": "ngram", "speedup": 1.325, "speedup_lo": 1.054, "speedup_hi": 1.775}
    assert intervals.value_text(row) == "1.325× [1.054, 1.775]"
    assert (
        intervals.value_text({"method": "none", "speedup": 1.0, "speedup_lo": 1.0, "speedup_hi": 1.0})
        == "1.000× (baseline)"
    )
    assert (
        intervals.value_text({"method": "ngram", "speedup": 0.9, "speedup_interval": "unbounded"})
        == "0.900× (baseline too noisy for an interval)"
    )
    assert intervals.value_text({"method": "ngram", "speedup": float("nan")}) == "no matching baseline"
    assert (
        intervals.value_text(
            {"output_throughput": 40.0, "output_throughput_lo": 38.0, "output_throughput_hi": 42.5},
            "output_throughput",
            "",
        )
        == "40.0 [38.0, 42.5]"
    )
    assert intervals.value_text({"method": "ngram", "speedup": 1.2}, short=True) == "1.200× (1 run)"
