"""Every registered Explorer figure (``ui.figures.FIGURES``) draws from the bundled results: its frames come
from the registry's queries, its chart has data and its title holds the registered words. Importing every ui
module first finds a figure registered anywhere."""

from __future__ import annotations

import importlib
import json
import pkgutil

import pytest

import ui
from specscope import settings
from specscope.results.store import Store
from ui import figures

for _module in pkgutil.iter_modules(ui.__path__):
    importlib.import_module(f"ui.{_module.name}")
FIGURES = list(figures.FIGURES.values())


@pytest.fixture(scope="module")
def bundled() -> Store:
    return Store(result_dirs=[settings.bundled_data_dir() / "results"], request_dirs=[])


def test_every_registered_figure_is_drawn_by_the_explorer():
    """The Explorer draws ``figures.registered()``: a figure registered outside a chart module (``*charts``) would
    only show where something else happened to import its module."""
    assert figures.registered() == FIGURES and [f.key for f in FIGURES][:2] == [
        "speedup_by_method",
        "speedup_vs_concurrency",
    ]
    for entry in FIGURES:
        assert entry.draw.__module__ in figures.chart_modules(), (
            f"{entry.key} is registered in {entry.draw.__module__}, which the Explorer does not import: move it "
            "to a chart module (ui/*charts.py)"
        )
    assert len({f.tab for f in FIGURES}) == len(FIGURES)  # one tab each


@pytest.mark.parametrize("entry", FIGURES, ids=[f.key for f in FIGURES])
def test_each_registered_figure_draws_from_the_bundled_results(entry, bundled):
    inputs = figures.frames(entry.needs, lambda query: query(bundled, None), lambda _, make, base: make(base))
    assert len(inputs) == len(entry.needs) and not inputs[0].empty
    fig = entry.draw(*inputs)
    assert fig.data, f"{entry.key}: drew no data from the bundled results"
    title = json.dumps(fig.layout.title.text)
    assert entry.title in title, f"{entry.key}: its title {title} lacks the registered {entry.title!r}"
    if entry.caption is not None:
        caption = entry.caption(*inputs)
        assert caption is None or isinstance(caption, str) and caption


def test_a_figure_needing_an_unknown_frame_is_refused():
    with pytest.raises(ValueError, match="needs \\['rows'\\], which ui.figures does not know"):
        figures.figure("nothing", "Nothing", "Nothing", needs=("rows",))
