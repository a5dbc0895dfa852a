"""Theory figures: pure functions from the frames of ``specscope.advice.advisor`` to Vega-Lite charts
(Altair), the engine of the Explorer's landing figure, so a viewer who opens both pages loads
one chart library.

Curves are lines with a dot per K; measured points sit on top (filled = used to fit, open =
held out), with their 95% interval as error bars when they have repeats. Vega draws every
name as text, never as HTML.
"""

from __future__ import annotations

from typing import cast

import altair as alt
import pandas as pd

from specscope.analysis import intervals
from ui.chart_style import VEGA_PAD, k_axis, no_gain

__all__ = ["tokens_per_step_figure", "speedup_vs_k_figure", "speedup_vs_concurrency_figure",
           "measured_cost_figure"]

CURVE_COLORS = ["#4C78A8", "#F58518", "#54A24B", "#B279A2"]
POINT_COLOR = "#E45756"
HEIGHT = 320
LEGEND = alt.Legend(orient="bottom", direction="vertical", title=None)


def _colours(names: list) -> alt.Scale:
    return alt.Scale(domain=names, range=[CURVE_COLORS[i % len(CURVE_COLORS)] for i in range(len(names))])


def _interval(row: dict) -> str:
    return intervals.text(row.get("speedup"), row.get("speedup_lo"), row.get("speedup_hi"), unit="×")


def _k_chart(curves: pd.DataFrame, y: str, y_title: str, points: pd.DataFrame | None, point_y: str,
             label: str, marker_k: int | None, title: str, with_no_gain: bool) -> alt.LayerChart:
    names = list(dict.fromkeys(curves["curve"]))
    y_axis = alt.Y(f"{y}:Q", title=y_title, scale=alt.Scale(zero=False))
    layers = [alt.Chart(curves[["k", "curve", y]]).mark_line(strokeWidth=2.5, point=alt.OverlayMarkDef(size=30)).encode(
        x=k_axis(), y=y_axis, color=alt.Color("curve:N", scale=_colours(names), legend=LEGEND),
        tooltip=[alt.Tooltip("curve:N"), alt.Tooltip("k:Q", title="K"), alt.Tooltip(f"{y}:Q", format=".3f")])]
    if with_no_gain:
        layers.insert(0, no_gain())
    if marker_k is not None:
        at = alt.Chart(pd.DataFrame({"k": [marker_k], "text": [f"K={marker_k}"]}))
        layers += [at.mark_rule(strokeDash=[2, 3], color="#888").encode(x="k:Q"),
                   at.mark_text(dy=-6, baseline="bottom", color="#555").encode(x="k:Q", text="text:N",
                                                                                y=alt.value(0))]
    if points is not None and not points.empty:
        part = points.assign(set=["fit on" if t else "held out" for t in points["train"]],
                             interval=[_interval(r) for r in points.to_dict("records")] if point_y == "speedup"
                             else "")
        keep = ["k", point_y, "set", "interval", *(c for c in ("speedup_lo", "speedup_hi") if c in part.columns)]
        part = part[keep]
        fill = alt.Fill("set:N", scale=alt.Scale(domain=["fit on", "held out"], range=[POINT_COLOR, "white"]),
                        legend=alt.Legend(orient="bottom", direction="vertical", title=label))
        if point_y == "speedup" and "speedup_lo" in part.columns and part["speedup_lo"].notna().any():
            layers.append(alt.Chart(part.dropna(subset=["speedup_lo", "speedup_hi"])).mark_errorbar(
                ticks=True, color=POINT_COLOR).encode(x="k:Q", y=alt.Y("speedup_lo:Q", title=y_title),
                                                      y2="speedup_hi:Q"))
        layers.append(alt.Chart(part).mark_point(size=90, filled=False, stroke=POINT_COLOR, strokeWidth=2,
                                                 opacity=1).encode(
            x="k:Q", y=alt.Y(f"{point_y}:Q", title=y_title), fill=fill,
            tooltip=[alt.Tooltip("set:N", title=label), alt.Tooltip("k:Q", title="K"),
                     alt.Tooltip(f"{point_y}:Q", format=".3f"), alt.Tooltip("interval:N", title="interval")]))
    return alt.layer(*layers).properties(title=title, height=HEIGHT).resolve_scale(color="independent")


def tokens_per_step_figure(curves: pd.DataFrame, points: pd.DataFrame | None = None,
                           marker_k: int | None = None, title: str = "Tokens per step vs K") -> alt.LayerChart:
    """Expected tokens per step against K; ``curves`` has k, curve, tokens_per_step; points k, al, train."""
    return _k_chart(curves, "tokens_per_step", "tokens per step", points, "al", "measured AL", marker_k, title,
                    with_no_gain=False)


def speedup_vs_k_figure(curves: pd.DataFrame, points: pd.DataFrame | None = None,
                        marker_k: int | None = None, title: str = "Speedup vs K") -> alt.LayerChart:
    """Speedup against K; ``curves`` has k, curve, speedup; points k, speedup, train."""
    return _k_chart(curves, "speedup", "speedup ×", points, "speedup", "measured speedup", marker_k, title,
                    with_no_gain=True)


def _concurrency_axis(values) -> alt.X:
    doublings = [2 ** i for i in range(0, 13) if 2 ** i <= max(values) * 1.01] or [1]
    return alt.X("concurrency:Q", title="concurrency",
                 scale=alt.Scale(type="log", base=2, padding=VEGA_PAD, nice=False),
                 axis=alt.Axis(values=doublings, format="d"))


def speedup_vs_concurrency_figure(curve: pd.DataFrame, measured: pd.DataFrame,
                                  crossover: float | None = None) -> alt.LayerChart:
    """Best-K speedup against concurrency: the fitted curve (a diamond at each concurrency) and the best
    measured point per concurrency (a ring, so a prediction on it still shows)."""
    series = ["predicted (best K)", "measured (best K)"]
    x = _concurrency_axis([*curve["concurrency"], *measured["concurrency"]])
    colour = alt.Color("series:N", scale=alt.Scale(domain=series, range=[CURVE_COLORS[0], POINT_COLOR]), legend=LEGEND)
    shape = alt.Shape("series:N", scale=alt.Scale(domain=series, range=["diamond", "circle"]), legend=LEGEND)
    tooltip = [alt.Tooltip("series:N"), alt.Tooltip("concurrency:Q", format="d"), alt.Tooltip("k:Q", title="K"),
               alt.Tooltip("speedup:Q", format=".3f")]
    y = alt.Y("speedup:Q", title="speedup ×", scale=alt.Scale(zero=False))
    # the prediction's line carries a diamond at each concurrency (a prediction at one concurrency is one point,
    # which a bare line would not draw), and each measured point is a ring over it: a fit on one point predicts
    # that point, and a filled dot hid the diamond under it (its legend entry stood over nothing)
    layers = [no_gain(),
              alt.Chart(curve[["concurrency", "speedup", "k"]].assign(series=series[0])).mark_line(
                  strokeWidth=2.5, point=alt.OverlayMarkDef(size=70, filled=True))
              .encode(x=x, y=y, color=colour, shape=shape, tooltip=tooltip),
              alt.Chart(measured[["concurrency", "speedup", "k"]].assign(series=series[1])).mark_point(
                  size=170, filled=False, strokeWidth=2.5, opacity=1).encode(x=x, y=y, color=colour, shape=shape,
                                                                             tooltip=tooltip)]
    if crossover is not None:
        at = alt.Chart(pd.DataFrame({"concurrency": [crossover], "text": [f"stops paying ~{crossover:.0f}"]}))
        layers += [at.mark_rule(strokeDash=[6, 4], color=POINT_COLOR).encode(x="concurrency:Q"),
                   at.mark_text(dx=4, align="left", baseline="top", color=POINT_COLOR).encode(
                       x="concurrency:Q", text="text:N", y=alt.value(4))]
    # alt.layer makes a FacetChart only of layers with facet encodings; these have none
    return cast(alt.LayerChart, alt.layer(*layers).properties(title="Best-K speedup vs concurrency", height=HEIGHT))


def measured_cost_figure(rows: pd.DataFrame, title: str) -> alt.LayerChart:
    """Predicted speedup vs K per concurrency on a measured step cost (``calibrate.what_if`` rows):
    a line per concurrency, dots where that K and concurrency were themselves calibrated."""
    data = rows[["k", "speedup", "cost", "concurrency", "measured_cost"]].assign(
        concurrency=[f"concurrency {c:g}" for c in rows["concurrency"]])
    names = [f"concurrency {c:g}" for c in sorted(rows["concurrency"].unique())]
    colour = alt.Color("concurrency:N", scale=_colours(names), legend=LEGEND)
    tooltip = [alt.Tooltip("concurrency:N"), alt.Tooltip("k:Q", title="K"),
               alt.Tooltip("speedup:Q", title="predicted ×", format=".3f"),
               alt.Tooltip("cost:Q", title="step cost", format=".3f")]
    x = k_axis("speculative tokens K")
    y = alt.Y("speedup:Q", title="predicted speedup (×)", scale=alt.Scale(zero=False))
    layers = [no_gain(), alt.Chart(data).mark_line(strokeWidth=2.5).encode(x=x, y=y, color=colour, tooltip=tooltip),
              alt.Chart(data[data["measured_cost"]]).mark_point(size=70, filled=True, opacity=1).encode(
                  x=x, y=y, color=colour, tooltip=tooltip)]
    # alt.layer makes a FacetChart only of layers with facet encodings; these have none
    return cast(alt.LayerChart, alt.layer(*layers).properties(title=title, height=HEIGHT))
