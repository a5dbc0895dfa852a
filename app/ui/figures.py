"""The Explorer's figure tabs, one registered entry each (``FIGURES``): its tab, the words its drawn title holds,
the chart function that draws it and the frames it is drawn from, by name. A chart module (``ui/*charts.py``)
registers its function with ``@figure``; the Explorer draws a tab for every entry of ``registered()``, in the
order they were registered, after its two fixed tabs (Speedup vs K, Best K per setup).

    @figure("latency", "Tail latency vs concurrency", "Tail latency", needs=("ceilings",))
    def latency_vs_concurrency(best: pd.DataFrame) -> go.Figure: ...
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pandas as pd
import plotly.graph_objects as go

from specscope.analysis import explore
from specscope.engine import roofline

__all__ = ["Figure", "FIGURES", "figure", "registered", "chart_modules", "QUERIES", "DERIVED", "frames"]

F = TypeVar("F", bound=Callable[..., go.Figure])

# The frames a figure may be drawn from, by name: a query of the filtered store, ``query(store, filters)`` ...
QUERIES: dict[str, Callable[..., pd.DataFrame]] = {
    "best": explore.by_concurrency,  # the best K per setup and concurrency, with the baseline's rows
    "acceptance": explore.acceptance_vs_k,  # acceptance length per setup and K
    "positions": explore.per_position,  # acceptance rate per draft position
}
# ... or a frame made from another one: name -> (the frame it is made from, how)
DERIVED: dict[str, tuple[str, Callable[[pd.DataFrame], pd.DataFrame]]] = {
    "ceilings": ("best", roofline.with_ceilings),  # the best-K rows with their roofline and K+1 ceilings
    "crossings": ("best", explore.crossovers),  # where a setup's speedup crosses 1
}


@dataclass(frozen=True)
class Figure:
    """One Explorer figure: ``key`` names its chart and download widgets, ``tab`` is its tab's label (and its
    download's name), ``title`` words its drawn title holds; ``draw`` takes the frames ``needs`` names, in
    order, and so does ``caption`` (a line under the figure, or None)."""

    key: str
    tab: str
    title: str
    draw: Callable[..., go.Figure]
    needs: tuple[str, ...]
    caption: Callable[..., str | None] | None = None


FIGURES: dict[str, Figure] = {}  # by key, in the order registered


def figure(
    key: str, tab: str, title: str, needs: Sequence[str], caption: Callable[..., str | None] | None = None
) -> Callable[[F], F]:
    """Register the decorated chart function as an Explorer figure (``Figure``); it is returned unchanged."""
    unknown = [name for name in needs if name not in QUERIES and name not in DERIVED]
    if unknown:
        raise ValueError(
            f"figure {key!r} needs {unknown}, which ui.figures does not know; add it to QUERIES or DERIVED"
        )

    def register(draw: F) -> F:
        FIGURES[key] = Figure(key, tab, title, draw, tuple(needs), caption)
        return draw

    return register


def chart_modules() -> list[str]:
    """The ui modules that may register figures: those named ``*charts``."""
    return [
        f"{__package__}.{m.name}"
        for m in pkgutil.iter_modules([str(Path(__file__).parent)])
        if m.name.endswith("charts")
    ]


def registered() -> list[Figure]:
    """Every registered figure, each chart module imported first: a figure registered in one is drawn with no
    import anywhere else."""
    for module in chart_modules():
        importlib.import_module(module)
    return list(FIGURES.values())


def frames(
    needs: Sequence[str],
    query: Callable[[Callable[..., pd.DataFrame]], pd.DataFrame],
    derive: Callable[[str, Callable[[pd.DataFrame], pd.DataFrame], pd.DataFrame], pd.DataFrame],
) -> list[pd.DataFrame]:
    """The frames ``needs`` names, in order: ``query(fn)`` runs a ``QUERIES`` function on the filtered store,
    ``derive(name, make, base)`` returns ``make(base)`` for a ``DERIVED`` one (the page caches both)."""

    def one(name: str) -> pd.DataFrame:
        if name in QUERIES:
            return query(QUERIES[name])
        base, make = DERIVED[name]
        return derive(name, make, one(base))

    return [one(name) for name in needs]
