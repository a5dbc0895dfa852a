"""Explorer figure data and charts, on the published Ruiz results."""

from __future__ import annotations

import io

import pandas as pd
import pytest

from specscope import explore, importers
from specscope.store import Store
from ui import charts


@pytest.fixture
def ruiz_store(specscope_home, ruiz_parquet, monkeypatch) -> Store:
    monkeypatch.setenv("SPECSCOPE_DATA", str(specscope_home / "no-bundled"))
    importers.import_file(ruiz_parquet)
    return Store()


def test_speedup_vs_k_lines(ruiz_store):
    frame = explore.speedup_vs_k(ruiz_store, {"draft_model": ["meta-llama/Llama-3.2-1B"]})
    c1 = frame[frame["concurrency"] == 1].set_index("k")["speedup"].round(3)
    assert c1[8] == 3.555
    assert (frame["method"] != "none").all()
    setups = explore.k_sweep_setups(explore.speedup_vs_k(ruiz_store))
    assert setups[0].startswith("Llama-3.3-70B-Instruct · draft_model (Llama-3.2-1B)")


def test_crossovers_interpolate_between_measured_points():
    best = pd.DataFrame({"setup": ["s"] * 3, "method": ["ngram"] * 3, "concurrency": [1, 4, 16],
                         "speedup": [2.0, 1.5, 0.5]})
    [row] = explore.crossovers(best).to_dict("records")
    # 1.5 at log2=2, 0.5 at log2=4: crosses 1 at log2=3
    assert row["crossover_concurrency"] == pytest.approx(8.0)
    assert row["measured_below"] == 16


def test_ruiz_qwen_falls_below_one(ruiz_store):
    best = explore.by_concurrency(ruiz_store, {"draft_model": ["Qwen/Qwen3-1.7B"]})
    [row] = explore.crossovers(best).to_dict("records")
    assert 128 < row["crossover_concurrency"] <= 256 and row["measured_below"] == 256


def test_acceptance_band_spans_concurrency(ruiz_store):
    frame = explore.acceptance_vs_k(ruiz_store, {"method": ["eagle3"]})
    assert (frame["al_min"] <= frame["acceptance_length"]).all()
    assert (frame["acceptance_length"] <= frame["al_max"]).all()


def test_every_chart_builds_and_escapes_names(ruiz_store):
    vs_k = explore.speedup_vs_k(ruiz_store)
    best = explore.by_concurrency(ruiz_store)
    figs = [charts.speedup_vs_k(vs_k, explore.k_sweep_setups(vs_k)[:2]),
            charts.speedup_by_method(best),
            charts.speedup_vs_concurrency(best, explore.crossovers(best)),
            charts.acceptance_vs_k(explore.acceptance_vs_k(ruiz_store)),
            charts.throughput_vs_concurrency(best), charts.latency_vs_concurrency(best),
            charts.per_position(explore.per_position(ruiz_store))]
    assert all(len(f.data) > 0 for f in figs[:-1])
    hostile = best.assign(setup="<img src=x onerror=alert(1)>", model="<script>x</script>")
    fig = charts.throughput_vs_concurrency(hostile)
    text = fig.to_json()
    assert "<img" not in text and "<script>" not in text
    assert "&lt;img" in text


def test_downloads_round_trip(ruiz_store):
    rows = explore.filtered_rows(ruiz_store, {"method": ["eagle3"]})
    back = pd.read_parquet(io.BytesIO(explore.to_parquet_bytes(rows)))
    assert len(back) == len(rows) == 96
    assert explore.to_csv_bytes(rows).startswith(b"run_id,")
