"""The Explorer on the bundled results as a new user sees them: no figure draws a NaN coordinate,
no crossover that does not exist is printed, the header counts say what they count, the
best-K table lists speculative rows with blanks (never "None") and units, and the bundled
sources name their article, hardware and vLLM version."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from specscope.analysis import explore, explore_text
from specscope.results.store import Store
from ui import charts, k_charts


@pytest.fixture
def bundled(specscope_home) -> Store:
    return Store()  # the bundled data/results only: the home is empty


def _nan_coordinates(fig) -> list[str]:
    """Where a trace of ``fig`` holds a NaN among its x, y or error-bar values."""
    found = []
    for i, trace in enumerate(fig.data):
        arrays = {"x": getattr(trace, "x", None), "y": getattr(trace, "y", None)}
        bars = getattr(trace, "error_y", None)
        if bars is not None and bars.visible is not False:
            arrays.update(error_plus=bars.array, error_minus=bars.arrayminus)
        for name, values in arrays.items():
            if values is None:
                continue
            if any(isinstance(v, (float, np.floating)) and math.isnan(v) for v in values):
                found.append(f"trace {i} ({trace.name}) {name}")
    return found


def _figures(db: Store) -> dict:
    best = explore.by_concurrency(db)
    crossings = explore.crossovers(best)
    return {
        "speedup_by_method": charts.speedup_by_method(best),
        "speedup_vs_concurrency": charts.speedup_vs_concurrency(best, crossings),
        "acceptance_vs_k": charts.acceptance_vs_k(explore.acceptance_vs_k(db)),
        "throughput": charts.throughput_vs_concurrency(best),
        "latency": charts.latency_vs_concurrency(best),
        "per_position": charts.per_position(explore.per_position(db)),
    }


def test_no_bundled_figure_draws_a_nan_coordinate(bundled):
    figures = _figures(bundled)
    assert {name: _nan_coordinates(fig) for name, fig in figures.items()} == {name: [] for name in figures}
    vs_k = explore.speedup_vs_k(bundled)
    for _, chart in k_charts.speedup_vs_k(vs_k, explore.k_sweep_setups(vs_k)[:4]):
        drawn = [
            (r.get("k"), r.get("speedup"), r.get("speedup_lo"), r.get("speedup_hi"))
            for rows in chart.to_dict()["datasets"].values()
            for r in rows
            if "k" in r
        ]
        assert drawn and all(v is not None and math.isfinite(v) for point in drawn for v in point[:2])
        assert all((lo is None) == (hi is None) for _, _, lo, hi in drawn)
    by_method = figures["speedup_by_method"]
    assert by_method.data and all(len(t.x) == len(t.y) > 0 for t in by_method.data)


def test_a_crossover_that_does_not_exist_is_not_printed(bundled):
    best = explore.by_concurrency(bundled)
    caption = explore_text.crossover_caption(explore.crossovers(best))
    assert "nan" not in caption.lower()
    # unknown concurrency, or below 1 from the first point on: no crossover
    frame = pd.DataFrame(
        {
            "setup": ["a", "b", "b", "c", "c"],
            "method": ["ngram"] * 5,
            "concurrency": [np.nan, 1, 4, 1, 4],
            "speedup": [0.9, 0.8, 0.7, 1.5, 0.5],
        }
    )
    crossings = explore.crossovers(frame)
    assert crossings["setup"].tolist() == ["c"]
    assert explore_text.crossover_caption(crossings) == (
        "Where speculation stops paying: c at concurrency ≈ 2 (first measured below 1× at 4)."
    )
    assert explore_text.crossover_caption(explore.crossovers(frame[frame["setup"] != "c"])) == ""


def test_header_counts_speculative_setups_and_the_slower_ones(bundled):
    best = explore.by_concurrency(bundled)
    counts = explore.headline(best)
    spec = best[(best["method"] != "none") & best["speedup"].notna()]
    assert counts["setups"] == spec["setup"].nunique() > 0
    assert counts["slower"] == spec[spec["speedup"] < 1]["setup"].nunique()
    assert 0 < counts["slower"] < counts["setups"]
    assert counts["baselines"] == best[best["method"] == "none"]["setup"].nunique() > 0


def test_best_k_table_lists_speculative_rows_with_blanks_and_units(bundled):
    best = explore.by_concurrency(bundled)
    table = explore_text.best_k_table(best)
    assert len(table) == ((best["method"] != "none") & best["speedup"].notna()).sum() > 0
    assert not table["speedup (× baseline, 95%)"].str.contains("baseline\\)").any()
    cells = table.astype(str).to_numpy().ravel().tolist()
    assert not [c for c in cells if c in ("None", "nan", "NaN", "<NA>")]
    assert "" in set(table["concurrency (requests)"])  # rate-limited article rows state none
    for header in (
        "concurrency (requests)",
        "K (draft tokens)",
        "acceptance length (tokens/step)",
        "output (tok/s, 95%)",
        "p99 TPOT (ms)",
    ):
        assert header in table.columns


def test_bundled_sources_name_article_hardware_and_vllm_version(bundled):
    sources = explore.bundled_sources(bundled).set_index("source")
    guide = sources.loc["vllm-sd-guide"]
    assert guide["from"] == "article: Speculative Decoding in vLLM: Complete Guide to Faster LLM Inference"
    assert guide["vLLM"] == "0.12.0" and guide["hardware"] == "1xL40S, 2xH200" and guide["rows"] == 20
    assert sources.loc["pace-sd-lab", "vLLM"] == "0.19.0"
    own = sources.loc["specscope-cpu-code-editing"]
    assert own["from"] == "SpecScope's own measurements" and own["hardware"] == "cpu-2core"
    summary = explore_text.bundled_summary(sources.reset_index())
    assert "vLLM 0.12.0" in summary and "1xL40S" in summary and "SpecScope's own measurements" in summary
    own = int((sources["from"] == "SpecScope's own measurements").sum())
    assert explore_text.bundled_label(sources.reset_index()) == (
        f"Where the bundled results come from ({len(sources)} files: {own} of SpecScope's own measurements "
        f"and {len(sources) - own} from published articles)"
    )


def test_the_best_point_names_only_what_its_source_states():
    assert explore_text.point_label({"setup": "s", "k": np.nan, "concurrency": np.nan}) == "s"
    assert explore_text.point_label({"setup": "s", "k": 4, "concurrency": 8.0}) == "s, K=4, concurrency 8"
