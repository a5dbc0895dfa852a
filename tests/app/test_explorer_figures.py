"""AppTest of the Explorer's figure tabs: every figure registered in ``ui.figures`` (from any ui module) has its
tab, after the two fixed ones, and draws its figure once that tab is chosen, with its title and nothing else."""

from __future__ import annotations

import importlib
import json
import pkgutil

import pytest
from streamlit.testing.v1 import AppTest

import ui
from helpers.apptest_run import run_clean
from helpers.paths import DASHBOARD
from ui import figures

pytestmark = pytest.mark.app
EXPLORER = str(DASHBOARD)

for _module in pkgutil.iter_modules(ui.__path__):
    importlib.import_module(f"ui.{_module.name}")


def _titles(at: AppTest) -> list[str]:
    return [json.dumps(json.loads(c.proto.spec).get("layout", {}).get("title", "")) for c in at.get("plotly_chart")]


def test_every_registered_figure_has_its_tab_and_draws_there(page_env):
    at = run_clean(AppTest.from_file(EXPLORER, default_timeout=120))
    registered = list(figures.FIGURES.values())
    assert [t.label for t in at.tabs][: 2 + len(registered)] == [
        "Speedup vs K",
        "Best K per setup",
        *(f.tab for f in registered),
    ]
    assert not at.get("plotly_chart")  # the landing tab draws no plotly figure
    for entry in registered:
        at.session_state["explorer_tabs"] = entry.tab
        titles = _titles(run_clean(at))
        assert len(titles) == 1 and entry.title in titles[0], (entry.tab, titles)
        assert at.get("plotly_chart")[0].proto.id and f"explorer_fig_{entry.key}" in at.get("plotly_chart")[0].proto.id
