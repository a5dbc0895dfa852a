"""Theory figures: pure functions from the frames of ``specscope.advice.advisor`` to Vega-Lite specs, the
engine of the Explorer's landing figure, so a viewer who opens both pages loads one chart library.

Each spec is a plain dict, what Altair's ``to_dict`` would give for the same layers without building and
validating Altair objects (three of them cost ~0.3 s, most of the Theory page's work for a new run);
datasets are JSON rows (``None`` where a value is missing), named by role. Draw one with
``st.vega_lite_chart(spec=chart_style.vega_spec(spec))``.

Curves are lines with a dot per K; measured points sit on top (filled = used to fit, open =
held out), with their 95% interval as error bars when they have repeats. Vega draws every
name as text, never as HTML.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from specscope.analysis import intervals
from ui.chart_style import k_axis_spec, no_gain_layer, vega_lite

__all__ = ["tokens_per_step_figure", "speedup_vs_k_figure", "speedup_vs_concurrency_figure", "measured_cost_figure"]

CURVE_COLORS = ["#4C78A8", "#F58518", "#54A24B", "#B279A2"]
POINT_COLOR = "#E45756"
HEIGHT = 320
LEGEND = {"direction": "vertical", "orient": "bottom", "title": None}
Spec = dict[str, Any]


def _rows(frame: pd.DataFrame) -> list[dict]:
    """``frame``'s rows as JSON values: Python scalars, ``None`` for a missing value."""
    return [
        {k: None if v is None or (isinstance(v, float) and math.isnan(v)) else v for k, v in row.items()}
        for row in frame.to_dict("records")
    ]


def _colours(names: list) -> dict:
    return {"domain": names, "range": [CURVE_COLORS[i % len(CURVE_COLORS)] for i in range(len(names))]}


def _q(field: str, **more: Any) -> dict:
    return {"field": field, "type": "quantitative", **more}


def _n(field: str, **more: Any) -> dict:
    return {"field": field, "type": "nominal", **more}


def _interval(row: dict) -> str:
    return intervals.text(row.get("speedup"), row.get("speedup_lo"), row.get("speedup_hi"), unit="×")


def _k_chart(
    curves: pd.DataFrame,
    y: str,
    y_title: str,
    points: pd.DataFrame | None,
    point_y: str,
    label: str,
    marker_k: int | None,
    title: str,
    with_no_gain: bool,
) -> Spec:
    names = list(dict.fromkeys(curves["curve"]))
    datasets: dict[str, list] = {"curves": _rows(curves[["k", "curve", y]])}
    layers = [
        {
            "data": {"name": "curves"},
            "mark": {"type": "line", "point": {"size": 30}, "strokeWidth": 2.5},
            "encoding": {
                "color": _n("curve", legend=LEGEND, scale=_colours(names)),
                "tooltip": [_n("curve"), _q("k", title="K"), _q(y, format=".3f")],
                "x": k_axis_spec(),
                "y": _q(y, scale={"zero": False}, title=y_title),
            },
        }
    ]
    if with_no_gain:
        datasets["no_gain"] = [{"no_gain": 1.0}]
        layers.insert(0, no_gain_layer())
    if marker_k is not None:
        datasets["marker"] = [{"k": marker_k, "text": f"K={marker_k}"}]
        layers += [
            {
                "data": {"name": "marker"},
                "mark": {"type": "rule", "color": "#888", "strokeDash": [2, 3]},
                "encoding": {"x": _q("k")},
            },
            {
                "data": {"name": "marker"},
                "mark": {"type": "text", "baseline": "bottom", "color": "#555", "dy": -6},
                "encoding": {"text": _n("text"), "x": _q("k"), "y": {"value": 0}},
            },
        ]
    if points is not None and not points.empty:
        part = points.assign(
            set=["fit on" if t else "held out" for t in points["train"]],
            interval=[_interval(r) for r in points.to_dict("records")] if point_y == "speedup" else "",
        )
        keep = ["k", point_y, "set", "interval", *(c for c in ("speedup_lo", "speedup_hi") if c in part.columns)]
        part = part[keep]
        if point_y == "speedup" and "speedup_lo" in part.columns and part["speedup_lo"].notna().any():
            datasets["bounded"] = _rows(part.dropna(subset=["speedup_lo", "speedup_hi"]))
            layers.append(
                {
                    "data": {"name": "bounded"},
                    "mark": {"type": "errorbar", "color": POINT_COLOR, "ticks": True},
                    "encoding": {"x": _q("k"), "y": _q("speedup_lo", title=y_title), "y2": {"field": "speedup_hi"}},
                }
            )
        datasets["points"] = _rows(part)
        fill = _n(
            "set",
            legend={**LEGEND, "title": label},
            scale={"domain": ["fit on", "held out"], "range": [POINT_COLOR, "white"]},
        )
        layers.append(
            {
                "data": {"name": "points"},
                "mark": {
                    "type": "point",
                    "filled": False,
                    "opacity": 1,
                    "size": 90,
                    "stroke": POINT_COLOR,
                    "strokeWidth": 2,
                },
                "encoding": {
                    "fill": fill,
                    "tooltip": [
                        _n("set", title=label),
                        _q("k", title="K"),
                        _q(point_y, format=".3f"),
                        _n("interval", title="interval"),
                    ],
                    "x": _q("k"),
                    "y": _q(point_y, title=y_title),
                },
            }
        )
    return vega_lite(layers, datasets, height=HEIGHT, resolve={"scale": {"color": "independent"}}, title=title)


def tokens_per_step_figure(
    curves: pd.DataFrame,
    points: pd.DataFrame | None = None,
    marker_k: int | None = None,
    title: str = "Tokens per step vs K",
) -> Spec:
    """Expected tokens per step against K; ``curves`` has k, curve, tokens_per_step; points k, al, train."""
    return _k_chart(
        curves, "tokens_per_step", "tokens per step", points, "al", "measured AL", marker_k, title, with_no_gain=False
    )


def speedup_vs_k_figure(
    curves: pd.DataFrame, points: pd.DataFrame | None = None, marker_k: int | None = None, title: str = "Speedup vs K"
) -> Spec:
    """Speedup against K; ``curves`` has k, curve, speedup; points k, speedup, train."""
    return _k_chart(
        curves, "speedup", "speedup ×", points, "speedup", "measured speedup", marker_k, title, with_no_gain=True
    )


def _concurrency_axis(values) -> dict:
    doublings = [2**i for i in range(0, 13) if 2**i <= max(values) * 1.01] or [1]
    return _q(
        "concurrency",
        axis={"format": "d", "values": doublings},
        scale={"base": 2, "nice": False, "padding": 10, "type": "log"},
        title="concurrency",
    )


def speedup_vs_concurrency_figure(curve: pd.DataFrame, measured: pd.DataFrame, crossover: float | None = None) -> Spec:
    """Best-K speedup against concurrency: the fitted curve (a diamond at each concurrency) and the best
    measured point per concurrency (a ring, so a prediction on it still shows)."""
    series = ["predicted (best K)", "measured (best K)"]
    encoding = {
        "color": _n("series", legend=LEGEND, scale={"domain": series, "range": [CURVE_COLORS[0], POINT_COLOR]}),
        "shape": _n("series", legend=LEGEND, scale={"domain": series, "range": ["diamond", "circle"]}),
        "tooltip": [_n("series"), _q("concurrency", format="d"), _q("k", title="K"), _q("speedup", format=".3f")],
        "x": _concurrency_axis([*curve["concurrency"], *measured["concurrency"]]),
        "y": _q("speedup", scale={"zero": False}, title="speedup ×"),
    }
    datasets = {
        "no_gain": [{"no_gain": 1.0}],
        "predicted": _rows(curve[["concurrency", "speedup", "k"]].assign(series=series[0])),
        "measured": _rows(measured[["concurrency", "speedup", "k"]].assign(series=series[1])),
    }
    # the prediction's line carries a diamond at each concurrency (a prediction at one concurrency is one point,
    # which a bare line would not draw), and each measured point is a ring over it: a fit on one point predicts
    # that point, and a filled dot hid the diamond under it (its legend entry stood over nothing)
    layers = [
        no_gain_layer(),
        {
            "data": {"name": "predicted"},
            "mark": {"type": "line", "point": {"filled": True, "size": 70}, "strokeWidth": 2.5},
            "encoding": encoding,
        },
        {
            "data": {"name": "measured"},
            "mark": {"type": "point", "filled": False, "opacity": 1, "size": 170, "strokeWidth": 2.5},
            "encoding": encoding,
        },
    ]
    if crossover is not None:
        datasets["crossover"] = [{"concurrency": crossover, "text": f"stops paying ~{crossover:.0f}"}]
        layers += [
            {
                "data": {"name": "crossover"},
                "mark": {"type": "rule", "color": POINT_COLOR, "strokeDash": [6, 4]},
                "encoding": {"x": _q("concurrency")},
            },
            {
                "data": {"name": "crossover"},
                "mark": {"type": "text", "align": "left", "baseline": "top", "color": POINT_COLOR, "dx": 4},
                "encoding": {"text": _n("text"), "x": _q("concurrency"), "y": {"value": 4}},
            },
        ]
    return vega_lite(layers, datasets, height=HEIGHT, title="Best-K speedup vs concurrency")


def measured_cost_figure(rows: pd.DataFrame, title: str) -> Spec:
    """Predicted speedup vs K per concurrency on a measured step cost (``calibrate.what_if`` rows):
    a line per concurrency, dots where that K and concurrency were themselves calibrated."""
    data = rows[["k", "speedup", "cost", "concurrency", "measured_cost"]].assign(
        concurrency=[f"concurrency {c:g}" for c in rows["concurrency"]]
    )
    names = [f"concurrency {c:g}" for c in sorted(rows["concurrency"].unique())]
    encoding = {
        "color": _n("concurrency", legend=LEGEND, scale=_colours(names)),
        "tooltip": [
            _n("concurrency"),
            _q("k", title="K"),
            _q("speedup", format=".3f", title="predicted ×"),
            _q("cost", format=".3f", title="step cost"),
        ],
        "x": k_axis_spec("speculative tokens K"),
        "y": _q("speedup", scale={"zero": False}, title="predicted speedup (×)"),
    }
    datasets = {"no_gain": [{"no_gain": 1.0}], "lines": _rows(data), "calibrated": _rows(data[data["measured_cost"]])}
    layers = [
        no_gain_layer(),
        {"data": {"name": "lines"}, "mark": {"type": "line", "strokeWidth": 2.5}, "encoding": encoding},
        {
            "data": {"name": "calibrated"},
            "mark": {"type": "point", "filled": True, "opacity": 1, "size": 70},
            "encoding": encoding,
        },
    ]
    return vega_lite(layers, datasets, height=HEIGHT, title=title)
