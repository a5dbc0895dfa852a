"""The Vega-Lite specs the dashboard keeps ready (``chart_style.vega_spec``) draw exactly what
``st.altair_chart`` would send for the same chart (a plain spec: what ``st.vega_lite_chart`` sends of it):
the same spec and the same data; the Theory page's plain specs are valid Vega-Lite."""

from __future__ import annotations

import json
import math

import pyarrow as pa
import pytest
from streamlit.testing.v1 import AppTest

pytestmark = pytest.mark.app


def _both(kind: str) -> None:
    import copy

    import altair as alt
    import pandas as pd
    import streamlit as st

    from specscope.advice import speedup_curves
    from ui import k_charts, theory_charts
    from ui.chart_style import vega_spec

    if kind == "speedup_vs_k":
        frame = pd.DataFrame(
            {
                "setup": ["m · ngram"] * 4,
                "k": [1, 2, 1, 2],
                "concurrency": [1, 1, 4, 4],
                "speedup": [1.2, 1.4, 0.9, None],
                "speedup_lo": [1.1, None, 0.8, None],
                "speedup_hi": [1.3, None, 1.0, None],
            }
        )
        chart = k_charts.speedup_vs_k(frame, ["m · ngram"])[0][1]
    elif kind == "theory":
        curves = speedup_curves.model_curves(0.8, 0.05, 8).assign(curve="α=0.80, c=0.050")
        points = pd.DataFrame(
            {
                "k": [1, 2, 3],
                "speedup": [1.2, 1.3, 1.1],
                "speedup_lo": [1.1, None, 1.0],
                "speedup_hi": [1.3, None, 1.2],
                "train": [True, True, False],
            }
        )
        chart = theory_charts.speedup_vs_k_figure(curves, points, marker_k=4, title="Model: speedup vs K")
    else:
        chart = alt.Chart(pd.DataFrame({"x": ["a", "b"], "y": [1.0, float("nan")]})).mark_bar().encode(x="x", y="y")
    if isinstance(chart, dict):
        st.vega_lite_chart(spec=copy.deepcopy(chart), width="stretch")
    else:
        st.altair_chart(chart, width="stretch")
    st.vega_lite_chart(spec=vega_spec(chart), width="stretch")


@pytest.mark.parametrize("kind", ["speedup_vs_k", "theory", "plain"])
def test_a_kept_spec_draws_what_altair_chart_sends(page_env, kind):
    at = AppTest.from_function(_both, args=(kind,), default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    altair, kept = (chart.proto for chart in at.get("vega_lite_chart"))
    assert len(kept.datasets) == len(altair.datasets) > 0
    # the datasets' names are hashes of their content (Altair's of the rows, Streamlit's of the Arrow bytes)
    spec = kept.spec
    for ours, theirs in zip(kept.datasets, altair.datasets):
        spec = spec.replace(f'"{ours.name}"', f'"{theirs.name}"')
        assert _rows(ours.data.data) == _rows(theirs.data.data)
    assert json.loads(spec) == json.loads(altair.spec)


def _rows(arrow: bytes) -> list[dict]:
    rows = pa.ipc.open_stream(arrow).read_all().to_pylist()
    return [{k: None if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()} for row in rows]


def test_the_theory_specs_are_valid_vega_lite():
    """The Theory page's specs are built as plain dicts: Altair, reading each back, checks it against the
    Vega-Lite schema (and raises on any key or value the schema does not allow)."""
    import altair as alt
    import numpy as np
    import pandas as pd

    from specscope.advice import speedup_curves
    from ui import theory_charts

    curves = speedup_curves.model_curves(0.8, 0.05, 8).assign(curve="α=0.80, c=0.050")
    points = pd.DataFrame(
        {
            "k": [1, 2],
            "al": [1.7, np.nan],
            "speedup": [1.2, 1.3],
            "speedup_lo": [1.1, np.nan],
            "speedup_hi": [1.3, np.nan],
            "train": [True, False],
        }
    )
    best = pd.DataFrame({"concurrency": [1.0, 2.0, 4.0], "k": [3, 2, 1], "speedup": [1.5, 1.2, 0.9]})
    what = pd.DataFrame(
        {
            "k": [1, 2],
            "speedup": [1.2, 1.1],
            "cost": [1.1, 1.3],
            "concurrency": [1.0, 1.0],
            "measured_cost": [True, False],
        }
    )
    specs = [
        theory_charts.tokens_per_step_figure(curves, points, marker_k=2, title="t"),
        theory_charts.speedup_vs_k_figure(curves, points, marker_k=2, title="s"),
        theory_charts.speedup_vs_concurrency_figure(best, best, 3.0),
        theory_charts.measured_cost_figure(what, "w"),
    ]
    for spec in specs:
        alt.LayerChart.from_dict(spec, validate=True)
        used = {layer["data"]["name"] for layer in spec["layer"]}
        assert used == set(spec["datasets"])  # every layer's rows are there, and no others
    rows = specs[1]["datasets"]["points"]
    assert rows[1]["speedup_lo"] is None and rows[1]["set"] == "held out"  # JSON: a missing value is null
    assert [r["interval"] for r in rows] == ["1.200× [1.100, 1.300]", "1.300× (1 run: no interval)"]


def test_a_prediction_at_one_concurrency_is_drawn_and_shows_through_the_measured_point():
    """A fit on one point predicts that point: the prediction is a diamond (a bare line drew nothing at one
    concurrency, so its legend entry stood over nothing) and the measured point a ring over it."""
    import pandas as pd

    from ui import theory_charts

    one = pd.DataFrame({"concurrency": [1], "speedup": [1.682], "k": [4]})
    layers = theory_charts.speedup_vs_concurrency_figure(one, one)["layer"]
    predicted, measured = layers[1], layers[2]
    assert predicted["mark"]["type"] == "line" and predicted["mark"]["point"]["filled"] is True
    assert measured["mark"]["type"] == "point" and measured["mark"]["filled"] is False
    shapes = predicted["encoding"]["shape"]["scale"]
    assert dict(zip(shapes["domain"], shapes["range"])) == {
        "predicted (best K)": "diamond",
        "measured (best K)": "circle",
    }
