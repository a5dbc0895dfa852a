"""The look every SpecScope figure shares: colours, the common layout, and the empty-figure message
(plotly); the K axis and the no-gain line (Vega-Lite: Altair objects, or plain spec dicts), and a chart as
the spec ``st.vega_lite_chart`` draws."""

from __future__ import annotations

import html
import math
import textwrap

import altair as alt
import pandas as pd
import plotly.graph_objects as go
from streamlit import dataframe_util

__all__ = [
    "PALETTE",
    "LOG2_STEP",
    "VEGA_PAD",
    "layout",
    "empty_figure",
    "k_axis",
    "k_axis_spec",
    "no_gain",
    "no_gain_layer",
    "vega_lite",
    "vega_spec",
]

PALETTE = ["#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#B279A2", "#FF9DA6", "#9D755D", "#EECA3B", "#BAB0AC"]
LOG2_STEP = math.log10(2)  # a log axis's dtick is in decades
EMPTY_LINE = 44  # characters a line of the empty-figure message holds in half of a 1280-pixel page
VEGA_PAD = 10  # pixels between a Vega plot's edge and its first and last points, which would be cut in half


def layout(fig: go.Figure, title: str, x: str, y: str, *, log_x: bool = False, height: int = 460) -> go.Figure:
    """Title, axis titles, white template and margins; ``log_x`` for concurrency axes."""
    fig.update_layout(
        title=title,
        template="plotly_white",
        hovermode="closest",
        legend=dict(orientation="v", font=dict(size=11)),
        margin=dict(l=60, r=20, t=60, b=50),
        height=height,
    )
    fig.update_xaxes(title_text=x, type="log" if log_x else "linear")
    if log_x:  # concurrency doubles: label 1, 2, 4, 8 ... (plotly's own log ticks add stray 2..9 digits)
        fig.update_xaxes(tick0=0, dtick=LOG2_STEP)
    fig.update_yaxes(title_text=y)
    return fig


def empty_figure(message: str, height: int = 300) -> go.Figure:
    """A blank figure that says why there is nothing to draw, on lines short enough for half a page."""
    fig = go.Figure()
    lines = textwrap.wrap(message, EMPTY_LINE) or [""]
    fig.add_annotation(
        text="<br>".join(html.escape(line) for line in lines),
        showarrow=False,
        font=dict(size=15),
        x=0.5,
        y=0.5,
        xref="paper",
        yref="paper",
    )
    fig.update_layout(template="plotly_white", height=height, xaxis_visible=False, yaxis_visible=False)
    return fig


def k_axis_spec(title: str = "K (speculative tokens)") -> dict:
    """A Vega-Lite x axis of whole K over the measured range (field ``k``), from the smallest K, not 0."""
    return {
        "axis": {"format": "d", "tickMinStep": 1},
        "field": "k",
        "scale": {"nice": False, "padding": VEGA_PAD, "zero": False},
        "title": title,
        "type": "quantitative",
    }


def k_axis(title: str = "K (speculative tokens)") -> alt.X:
    """``k_axis_spec`` as an Altair channel."""
    return alt.X.from_dict(k_axis_spec(title))


def no_gain_layer() -> dict:
    """The dotted Vega-Lite rule at speedup 1, to layer under a speedup chart, on the dataset ``no_gain``
    (``[{"no_gain": 1.0}]``)."""
    return {
        "data": {"name": "no_gain"},
        "mark": {"type": "rule", "color": "#888", "strokeDash": [3, 3]},
        "encoding": {"y": {"field": "no_gain", "type": "quantitative"}},
    }


def no_gain() -> alt.Chart:
    """``no_gain_layer`` as an Altair chart."""
    return alt.Chart(pd.DataFrame({"no_gain": [1.0]})).mark_rule(strokeDash=[3, 3], color="#888").encode(y="no_gain:Q")


def vega_lite(layers: list[dict], datasets: dict[str, list], **props) -> dict:
    """A layered Vega-Lite spec as a plain dict: ``layers`` reading the named ``datasets`` (JSON rows),
    and the top level's ``props`` (title, height, resolve)."""
    return {"layer": layers, **props, "$schema": alt.SCHEMA_URL, "datasets": datasets}


def vega_spec(chart: alt.TopLevelMixin | dict) -> dict:
    """``chart`` as the Vega-Lite spec ``st.altair_chart`` would send, each dataset already in Streamlit's
    Arrow bytes. An Altair chart is validated once here (Altair's ``to_dict`` is most of what drawing it
    costs), without the default theme's 300 px view (Streamlit draws Altair without it); a plain spec
    (``vega_lite``) is taken as it is. Draw it with ``st.vega_lite_chart``; keep it in a shared cache, so a
    viewer pays only for sending it."""
    if isinstance(chart, dict):
        return {
            **chart,
            "datasets": {
                name: dataframe_util.convert_anything_to_arrow_bytes(pd.DataFrame(values))
                for name, values in chart.get("datasets", {}).items()
            },
        }
    spec = chart.to_dict()
    if alt.theme.active == "default":
        view = spec.get("config", {}).get("view", {})
        theme = alt.theme.get()
        assert theme is not None  # the active theme, registered by Altair itself
        for size in theme()["config"]["view"]:
            view.pop(size, None)
        if not view:
            spec.get("config", {}).pop("view", None)
        if not spec.get("config", True):
            del spec["config"]
    spec["datasets"] = {
        name: dataframe_util.convert_anything_to_arrow_bytes(pd.DataFrame(values))
        for name, values in spec.get("datasets", {}).items()
    }
    return spec
