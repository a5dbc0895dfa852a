"""The Explorer's headline sentence: the best speedup with its interval and where it was measured,
the counts, and names from result files shown literally."""

from __future__ import annotations

import pandas as pd

from ui import headline

COUNTS = {"setups": 43, "slower": 9, "baselines": 24}


def _top(**fields) -> pd.Series:
    return pd.Series({"speedup": 1.6824, "speedup_lo": 1.358, "speedup_hi": 2.109, "hardware": "cpu-2core",
                      "model": "HuggingFaceTB/SmolLM2-135M-Instruct", "setup": "SmolLM2 · ngram", "k": 4.0,
                      "concurrency": 1.0, **fields})


def test_the_sentence_leads_with_the_best_speedup_its_interval_and_where():
    assert headline.sentence(1234, COUNTS, _top()) == (
        "Best speedup **1.682×** [1.358, 2.109] 95% interval over repeats on cpu-2core · SmolLM2-135M-Instruct"
        " · **43** speculative setups with a baseline · **9 of 43** slower than their baseline at some "
        "concurrency · **1,234** result rows")


def test_a_single_run_says_it_has_no_interval_and_no_best_leaves_the_counts():
    one = headline.sentence(5, COUNTS, _top(speedup_lo=float("nan"), speedup_hi=float("nan")))
    assert "**1.682×** (1 run: no interval) on cpu-2core" in one
    assert headline.sentence(5, COUNTS, None).startswith("**43** speculative setups with a baseline")


def test_names_from_result_files_stay_literal():
    text = headline.sentence(5, COUNTS, _top(hardware="[gpu](http://x)", model="org/*bold*"))
    assert "\\[gpu\\]\\(http\\://x\\)" in text and "\\*bold\\*" in text
    caption = headline.caption(COUNTS, _top(setup="<b>s</b>"))
    assert caption.startswith("Best: \\<b\\>s\\</b\\>, K=4, concurrency 1 (a real drafter") and "24 baseline" in caption
