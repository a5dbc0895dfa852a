"""The Explorer's headline sentence: the best speedup with its interval and where it was measured,
the counts, and names from result files shown literally."""

from __future__ import annotations

import pandas as pd

from specscope import settings
from specscope.analysis import explore
from specscope.results.store import Store
from ui import headline

COUNTS = {"setups": 43, "slower": 9, "baselines": 24}


def _top(**fields) -> pd.Series:
    return pd.Series(
        {
            "speedup": 1.6824,
            "speedup_lo": 1.358,
            "speedup_hi": 2.109,
            "hardware": "cpu-2core",
            "model": "HuggingFaceTB/SmolLM2-135M-Instruct",
            "setup": "SmolLM2 · ngram",
            "k": 4.0,
            "concurrency": 1.0,
            **fields,
        }
    )


def test_the_sentence_leads_with_the_best_speedup_its_interval_and_where():
    assert headline.sentence(1234, COUNTS, _top()) == (
        "Best speedup **1.682×** [1.358, 2.109] 95% interval over repeats on cpu-2core · SmolLM2-135M-Instruct"
        " · **43** speculative setups with a baseline · **9 of 43** slower than their baseline at some "
        "concurrency · **1,234** result rows"
    )


def test_a_single_run_says_it_has_no_interval_and_no_best_leaves_the_counts():
    one = headline.sentence(5, COUNTS, _top(speedup_lo=float("nan"), speedup_hi=float("nan")))
    assert "**1.682×** (1 run: no interval) on cpu-2core" in one
    assert headline.sentence(5, COUNTS, None).startswith("**43** speculative setups with a baseline")


def test_names_from_result_files_stay_literal():
    text = headline.sentence(5, COUNTS, _top(hardware="[gpu](http://x)", model="org/*bold*"))
    assert "\\[gpu\\]\\(http\\://x\\)" in text and "\\*bold\\*" in text
    caption = headline.caption(COUNTS, _top(setup="<b>s</b>"))
    assert caption.startswith("Best: \\<b\\>s\\</b\\>, K=4, concurrency 1 (a real drafter") and "24 baseline" in caption


def test_a_flagged_best_says_so_beside_the_number():
    text = headline.sentence(5, COUNTS, _top(valid_share=0.5, hygiene=""))
    assert (
        "**1.682×** [1.358, 2.109] 95% interval over repeats **⚠ fails hygiene checks: Invalid constrained "
        "answers** on cpu-2core" in text
    )


def test_the_headline_passes_over_a_flagged_cell_and_the_caption_names_it():
    best = pd.DataFrame(
        [
            {
                "method": "ngram",
                "speedup": 1.21,
                "speedup_lo": 1.1,
                "speedup_hi": 1.3,
                "valid_share": 0.5,
                "hygiene": "",
                "setup": "s · constrained (json_schema)",
                "k": 2.0,
                "concurrency": 1.0,
                "acceptance": "real",
                "source": "specscope",
                "hardware": "cpu-2core",
                "model": "m",
            },
            {
                "method": "ngram",
                "speedup": 1.15,
                "speedup_lo": 1.05,
                "speedup_hi": 1.25,
                "valid_share": None,
                "hygiene": "",
                "setup": "s",
                "k": 2.0,
                "concurrency": 1.0,
                "acceptance": "real",
                "source": "specscope",
                "hardware": "cpu-2core",
                "model": "m",
            },
            {
                "method": "none",
                "speedup": 1.0,
                "setup": "s",
                "k": 0.0,
                "concurrency": 1.0,
                "acceptance": "real",
                "source": "specscope",
                "hygiene": "",
                "valid_share": None,
            },
        ]
    )
    top = explore.best_point(best)
    passed_over = explore.flagged_above(best, top)
    assert top["speedup"] == 1.15 and passed_over["speedup"] == 1.21
    caption = headline.caption(COUNTS, top, ("s", 3, False), passed_over)
    assert "The figure below draws it." in caption
    assert (
        "A higher figure, 1.210× [1.100, 1.300] (s · constrained \\(json\\_schema\\), K=2, concurrency 1), is left "
        "out: its cell fails hygiene checks (Invalid constrained answers)."
    ) in caption
    only_flagged = explore.best_point(best[best["valid_share"] == 0.5])
    assert only_flagged["speedup"] == 1.21 and "⚠ fails hygiene checks" in headline.sentence(5, COUNTS, only_flagged)


def test_a_best_measured_at_one_k_says_where_it_is_drawn(tmp_path):
    """The bundled versions run measured ngram K=4 on vLLM 0.31.0 only at K=4: its 1.682x is the headline's best
    point among the code-editing runs, and the landing figure (speedup vs K) draws the 0.32.0 setup; the
    caption says where 1.682x is."""
    for name in ("specscope-cpu-versions.parquet", "specscope-cpu-code-editing.parquet"):
        (tmp_path / name).write_bytes((settings.bundled_data_dir() / "results" / name).read_bytes())
    bundled = Store(result_dirs=[tmp_path], request_dirs=[])
    best, vs_k = explore.by_concurrency(bundled), explore.speedup_vs_k(bundled)
    top = explore.best_point(best)
    assert top["vllm_version"] == "0.31.0" and round(top["speedup"], 3) == 1.682
    label, ks, other_version = explore.headline_setup(vs_k, top)
    assert ks == 1 and other_version and label.endswith("vLLM 0.31.0")
    caption = headline.caption(explore.headline(best), top, (label, ks, other_version))
    assert "measured at K=4 only" in caption and "the vLLM versions section below draws it" in caption
    assert explore.landing_setups(vs_k, top) == explore.default_setups(vs_k)
    code = explore.best_point(best[best["vllm_version"] == "0.32.0"])  # a best with a K sweep: the figure draws it
    assert explore.landing_setups(vs_k, code) == [explore.headline_setup(vs_k, code)[0]]
