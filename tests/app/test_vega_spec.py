"""The Vega-Lite specs the dashboard keeps ready (``chart_style.vega_spec``) draw exactly what
``st.altair_chart`` would send for the same chart: the same spec and the same data."""

from __future__ import annotations

import json
import math

import pyarrow as pa
import pytest
from streamlit.testing.v1 import AppTest

pytestmark = pytest.mark.app


def _both(kind: str) -> None:
    import altair as alt
    import pandas as pd
    import streamlit as st

    from specscope import advisor
    from ui import k_charts, theory_charts
    from ui.chart_style import vega_spec

    if kind == "speedup_vs_k":
        frame = pd.DataFrame({"setup": ["m · ngram"] * 4, "k": [1, 2, 1, 2], "concurrency": [1, 1, 4, 4],
                              "speedup": [1.2, 1.4, 0.9, None], "speedup_lo": [1.1, None, 0.8, None],
                              "speedup_hi": [1.3, None, 1.0, None]})
        chart = k_charts.speedup_vs_k(frame, ["m · ngram"])[0][1]
    elif kind == "theory":
        curves = advisor.model_curves(0.8, 0.05, 8).assign(curve="α=0.80, c=0.050")
        chart = theory_charts.speedup_vs_k_figure(curves, marker_k=4, title="Model: speedup vs K")
    else:
        chart = alt.Chart(pd.DataFrame({"x": ["a", "b"], "y": [1.0, float("nan")]})).mark_bar().encode(x="x", y="y")
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
