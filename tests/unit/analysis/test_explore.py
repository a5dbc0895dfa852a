"""Explorer figure data and charts, on the published Ruiz results."""

from __future__ import annotations

import io

import pandas as pd
import pytest

from specscope import schema, settings
from specscope.analysis import explore, explore_text, intervals
from specscope.engine import provenance
from specscope.results import importers, writing
from specscope.results.store import Store
from specscope.schema import CALIBRATION_SOURCE
from ui import charts, k_charts


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
    best = pd.DataFrame(
        {"setup": ["s"] * 3, "method": ["ngram"] * 3, "concurrency": [1, 4, 16], "speedup": [2.0, 1.5, 0.5]}
    )
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
    drawn = k_charts.speedup_vs_k(vs_k, explore.k_sweep_setups(vs_k)[:2])
    assert [setup for setup, _ in drawn] == explore.k_sweep_setups(vs_k)[:2]
    figs = [
        charts.speedup_by_method(best),
        charts.speedup_vs_concurrency(best, explore.crossovers(best)),
        charts.acceptance_vs_k(explore.acceptance_vs_k(ruiz_store)),
        charts.throughput_vs_concurrency(best),
        charts.latency_vs_concurrency(best),
        charts.per_position(explore.per_position(ruiz_store)),
    ]
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


def _repeated_run(directory, run_id, ks, host="box"):
    """A run with four repeats per cell: baseline ~20 tok/s, K=2 and K=4 within noise, K=8 clearly lower."""
    values = {
        0: [20.0, 21.0, 19.0, 20.5],
        2: [30.0, 31.0, 29.5, 30.5],
        4: [30.0, 29.0, 31.0, 30.0],
        8: [22.0, 21.5, 22.5, 21.0],
    }
    rows = []
    for k in [0, *ks]:
        for i, v in enumerate(values[k]):
            rows.append(
                {
                    "source": "specscope",
                    "model": "m",
                    "dataset": "d",
                    "hardware": "cpu-2core",
                    "host": host,
                    "output_len": 64,
                    "temperature": 0.0,
                    "concurrency": 1,
                    "method": "none" if k == 0 else "ngram",
                    "k": k,
                    "repeat": i,
                    "output_throughput": v,
                    "acceptance_length": 1.5 if k else None,
                    "status": "ok",
                }
            )
    writing.write_results(rows, run_id=run_id, directory=directory)


def test_intervals_reach_the_figures_and_the_best_k_table(tmp_path):
    _repeated_run(tmp_path, "rep", [2, 4, 8])
    db = Store(result_dirs=[tmp_path], request_dirs=[])
    vs_k = explore.speedup_vs_k(db)
    assert vs_k["speedup_lo"].notna().all() and (vs_k["speedup_lo"] < vs_k["speedup"]).all()
    [(_, chart)] = k_charts.speedup_vs_k(vs_k, explore.k_sweep_setups(vs_k))
    spec = chart.to_dict()
    marks = [layer["mark"]["type"] for layer in spec["layer"]]
    assert marks == ["rule", "errorbar", "line"]
    bars = spec["datasets"][spec["layer"][1]["data"]["name"]]
    assert len(bars) == 3 and all(b["speedup_lo"] < b["speedup"] < b["speedup_hi"] for b in bars)
    hover = {t.get("title", t["field"]) for t in spec["layer"][2]["encoding"]["tooltip"]}
    assert {"speedup [95%]", "output tok/s", "repeats"} <= hover
    best = explore.by_concurrency(db)
    table = explore_text.best_k_table(best).set_index("K (draft tokens)")
    assert table.loc["2", "tied (within noise)"] == "tied with K 4 (within noise)"
    low, high = (float(x) for x in table.loc["2", "speedup (× baseline, 95%)"].split("[")[1].rstrip("]").split(", "))
    assert low < float(table.loc["2", "speedup (× baseline, 95%)"].split("×")[0]) < high and "0" not in table.index
    assert explore_text.interval_summary(best) == "All 1 speedups carry a 95% interval."


def test_two_runs_of_one_setup_combine_their_own_intervals(tmp_path):
    _repeated_run(tmp_path, "first", [2])
    _repeated_run(tmp_path, "second", [2])
    [point] = explore.speedup_vs_k(Store(result_dirs=[tmp_path], request_dirs=[])).to_dict("records")
    [one] = explore.speedup_vs_k(Store(result_dirs=[tmp_path], request_dirs=[]), {"run_id": ["first"]}).to_dict(
        "records"
    )
    assert point["runs"] == 2 and point["repeats"] == 8
    # identical runs: the same figure, and an interval narrower than one run's (twice the repeats)
    assert point["speedup"] == pytest.approx(one["speedup"])
    assert one["speedup_lo"] < point["speedup_lo"] < point["speedup"] < point["speedup_hi"] < one["speedup_hi"]


def test_speedup_vs_k_colours_a_concurrency_alike_in_every_chart_and_keeps_names_as_data(ruiz_store):
    vs_k = explore.speedup_vs_k(ruiz_store)
    hostile = vs_k.assign(
        setup=vs_k["setup"].where(vs_k["setup"] != vs_k["setup"].iloc[0], "<img src=x onerror=alert(1)>")
    )
    setups = explore.k_sweep_setups(hostile)[:3]
    drawn = k_charts.speedup_vs_k(hostile, setups)
    colours = {}
    for _, chart in drawn:
        scale = chart.to_dict()["layer"][-1]["encoding"]["color"]["scale"]
        for concurrency, colour in zip(scale["domain"], scale["range"]):
            colours.setdefault(concurrency, set()).add(colour)
    assert len(drawn) == 3 and all(len(c) == 1 for c in colours.values())  # one concurrency -> one colour
    # Vega draws titles and tooltips as text (never HTML), so a name is kept verbatim, not escaped
    titles = [chart.to_dict()["title"]["text"] for _, chart in drawn]
    assert "<img src=x onerror=alert(1)>" in titles
    assert all(" · ".join(t) in setups for t in titles if isinstance(t, list))  # long names on two lines
    assert k_charts.speedup_vs_k(hostile, ["no such setup"]) == []
    assert "<html" in k_charts.combined(drawn).to_html()


def test_single_runs_say_they_have_no_interval(ruiz_store):
    best = explore.by_concurrency(ruiz_store, {"draft_model": ["Qwen/Qwen3-1.7B"]})
    table = explore_text.best_k_table(best)
    assert len(table) > 0 and table["speedup (× baseline, 95%)"].str.endswith("(1 run: no interval)").all()
    assert (table["tied (within noise)"] == "").all()
    assert "single runs" in explore_text.interval_summary(best)
    fig = charts.speedup_vs_concurrency(best, explore.crossovers(best))
    assert fig.data[0].error_y.visible is False


def test_speedup_by_method_places_its_bars_on_named_points(ruiz_store):
    fig = charts.speedup_by_method(explore.by_concurrency(ruiz_store))
    assert fig.layout.xaxis.type == "category" and all(isinstance(x, str) for x in fig.data[0].x)


def test_a_low_end_clipped_at_zero_is_said():
    row = {"method": "suffix", "speedup": 0.797, "speedup_lo": 0.0, "speedup_hi": 3.972}
    assert intervals.value_text(row) == "0.797× [0.000, 3.972] (low end clipped at 0)"
    assert intervals.value_text({**row, "speedup_lo": 0.5}) == "0.797× [0.500, 3.972]"


def test_the_landing_setups_are_one_per_setup_whatever_its_vllm_version():
    """The same setup measured on two vLLM versions takes one of the landing figure's places, not two (the
    versions view compares them); the rest follow best first, and the other versions only fill a gap."""
    vs_k = _k_sweeps()
    assert explore.default_setups(vs_k, 3) == ["eagle3 · vLLM 0.24.0", "ngram · vLLM 0.24.0", "suffix · vLLM 0.24.0"]
    assert explore.default_setups(vs_k, 4)[-1] == "eagle3 · vLLM 0.26.0"
    assert explore.default_setups(vs_k) == ["eagle3 · vLLM 0.24.0"]  # one chart, under the headline
    # the best setup of each hardware comes before a second of any: a CPU run beside the GPU's best
    cpu = vs_k[vs_k["method"] == "suffix"].assign(hardware="cpu-2core", setup="suffix · cpu")
    assert explore.default_setups(pd.concat([vs_k[vs_k["method"] != "suffix"], cpu]), 2) == [
        "eagle3 · vLLM 0.24.0",
        "suffix · cpu",
    ]
    assert explore.default_setups(vs_k.iloc[0:0]) == []


def test_the_landing_setup_is_a_real_drafter_like_the_headline_best():
    """A setup that measured the engine only (synthetic acceptance, a step-cost calibration) comes after
    every real drafter, however fast: the headline leaves those out, and the chart under it does too."""
    vs_k = _k_sweeps()
    synthetic = vs_k.assign(acceptance=vs_k["acceptance"].mask(vs_k["method"] == "eagle3", provenance.SYNTHETIC))
    assert explore.default_setups(synthetic) == ["ngram · vLLM 0.24.0"]
    assert explore.default_setups(synthetic, 4) == [
        "ngram · vLLM 0.24.0",
        "suffix · vLLM 0.24.0",
        "eagle3 · vLLM 0.24.0",
        "eagle3 · vLLM 0.26.0",
    ]
    calibrated = vs_k.assign(source=vs_k["source"].mask(vs_k["method"] != "suffix", CALIBRATION_SOURCE))
    assert explore.default_setups(calibrated) == ["suffix · vLLM 0.24.0"]
    assert explore.default_setups(synthetic.assign(acceptance=provenance.SYNTHETIC)) == ["eagle3 · vLLM 0.24.0"]


def _k_sweeps() -> pd.DataFrame:
    """Four setups measured at K 2 and 4 (eagle3 on two vLLM versions), best first: eagle3, ngram, suffix."""

    def point(method: str, version: str, k: int, speedup: float) -> dict:
        keys = dict.fromkeys(schema.SETUP_KEYS, "x")
        return {
            **keys,
            "method": method,
            "vllm_version": version,
            "k": k,
            "speedup": speedup,
            "setup": f"{method} · vLLM {version}",
        }

    return pd.DataFrame(
        [
            point(m, v, k, s * k)
            for m, v, s in (
                ("eagle3", "0.24.0", 2.0),
                ("eagle3", "0.26.0", 1.9),
                ("ngram", "0.24.0", 1.5),
                ("suffix", "0.24.0", 1.2),
            )
            for k in (2, 4)
        ]
    )


def test_two_setups_side_by_side_list_only_their_own_concurrencies_in_shared_colours():
    frame = pd.DataFrame(
        [
            {"setup": s, "k": k, "speedup": 1.1, "speedup_lo": None, "speedup_hi": None, "concurrency": c}
            for s, cs in (("a", (1, 4)), ("b", (1, 16)))
            for c in cs
            for k in (2, 4)
        ]
    )
    scales = {}
    for setup, chart in k_charts.speedup_vs_k(frame, ["a", "b"]):
        encoding = next(layer for layer in chart.to_dict()["layer"] if layer["mark"]["type"] == "line")["encoding"]
        scale = encoding["color"]["scale"]
        scales[setup] = dict(zip(scale["domain"], scale["range"]))
    assert list(scales["a"]) == [1, 4] and list(scales["b"]) == [1, 16]  # no legend entry without data
    assert scales["a"][1] == scales["b"][1] and scales["a"][4] != scales["b"][16]  # one colour per concurrency


def test_the_best_k_tab_shows_short_headers_and_the_setup_whole():
    bundled = Store(result_dirs=[settings.bundled_data_dir() / "results"], request_dirs=[])
    filters = {"method": ["ngram"], "dataset": ["code-editing"]}
    shown = k_charts.best_k_shown(
        explore_text.best_k_table(explore.by_concurrency(bundled, filters), explore.speedup_vs_k(bundled, filters))
    )
    assert list(shown.columns[:8]) == [
        "setup",
        "concurrency",
        "K",
        "speedup [95%]",
        "tied with",
        "checks",
        "left out",
        "AL",
    ]
    assert set(shown["tied with"]) <= {"", "K 2", "K 4"} and "K 2" in set(shown["tied with"])
    assert "⚠ prefix cache" in set(shown["checks"]) and "✓" in set(shown["checks"])  # the checks travel
    assert set(shown["baseline"]) == {"its run"} and all(" · " in s for s in shown["setup"])
