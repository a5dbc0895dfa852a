"""The Theory page on the bundled results, as a new user first sees it: every group is its own,
the advice agrees with what was measured, and the reason reads in plain words."""

from __future__ import annotations

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from helpers.paths import DATA, VIEWS
from helpers.vega_charts import rows as vega_rows
from helpers.vega_charts import titled
from specscope.results.store import Store

pytestmark = pytest.mark.app

PAGE = VIEWS / "theory.py"


def _run() -> AppTest:
    at = AppTest.from_file(str(PAGE), default_timeout=120).run()
    assert not at.exception, at.exception
    return at


def _measured_markers(at: AppTest, title: str) -> list[float]:
    return sorted(round(r["speedup"], 4) for r in vega_rows(titled(at, title), "point"))


def test_every_group_choice_is_distinct_and_shows_its_own_group(page_env):
    frame = Store().speedup()
    at = _run()
    every = at.selectbox(key="theory_group").options
    options = [o for o in every if " · code-editing · cpu-" in o]
    assert len(every) == len(set(every)) and len(options) == 3  # ngram (vLLM 0.31.0 and 0.32.0) and suffix
    shown = set()
    for option in options:
        at.selectbox(key="theory_group").set_value(option).run()
        assert not at.exception
        model, method, dataset, _ = option.split(" · ", 3)
        version = option.rsplit(" · vLLM ", 1)[1].split(" ")[0] if " · vLLM " in option else "0.32.0"
        rows = frame[
            (frame["method"] == method)
            & (frame["dataset"] == dataset)
            & (frame["concurrency"] == 1)
            & (frame["vllm_version"] == version)
        ]
        expected = sorted(round(v, 4) for v in rows["speedup"])
        assert _measured_markers(at, "Fitted at concurrency 1: speedup vs K") == expected, option
        shown.add(at.success[0].value if at.success else at.warning[0].value)
    assert len(shown) == 3  # three groups, three different answers


def _pick(at: AppTest, method: str, dataset: str) -> AppTest:
    option = next(o for o in at.selectbox(key="theory_group").options if f" · {method} · {dataset} · " in o)
    at.selectbox(key="theory_group").set_value(option).run()
    assert not at.exception
    return at


def _at_concurrency(at: AppTest) -> str:
    """The advice at the chosen concurrency, its markdown escapes taken out."""
    return next(m.value for m in at.markdown if m.value.startswith("**At concurrency")).replace("\\", "")


def test_suffix_code_editing_advice_agrees_with_its_measurements(page_env):
    frame = Store().speedup({"method": ["suffix"], "dataset": ["code-editing"], "concurrency": [1]})
    by_k = frame.groupby("k")["speedup"].mean()
    at = _pick(_run(), "suffix", "code-editing")
    advice = _at_concurrency(at)
    # K=2 and K=4 intervals overlap on these runs: a tie, and a tie goes to the smaller K
    assert advice.startswith("**At concurrency 1:** Use K = 2 (K = 4 measured alike within noise")
    assert f"measured {by_k[2]:.3f}×" in advice
    assert (at.success or at.warning)[0].value.startswith("Deploy suffix with K = 2")
    assert any(
        "Leave-one-out, the fit misses each measured speedup it was not fitted to by a median" in c.value
        for c in at.caption
    )


def test_published_results_without_a_fit_say_what_is_missing(page_env):
    at = _run()
    assert not any(e.label.startswith("Not fitted:") and e.dataframe for e in at.expander)  # drawn once opened
    at.session_state["theory_unfitted_open"] = True
    at.run()
    unfit = next(e for e in at.expander if e.label.startswith("Not fitted:"))
    table = unfit.dataframe[0].value
    guide = table[table["group"].str.contains("Llama-3.3-70B-Instruct · eagle3")]
    assert len(guide) == 2 and guide["what is missing"].str.contains("no acceptance rate or length").all()


def test_why_reads_plainly_and_the_formulas_wait_in_an_expander(page_env):
    at = _pick(_run(), "ngram", "code-editing")
    why = next(m.value for m in at.markdown if m.value.startswith("**Why:**"))
    assert "Measured beats modelled" in why
    assert "d1" not in why and "AL" not in why and "^" not in why
    formulas = next(e for e in at.expander if e.label == "The formulas behind this advice")
    assert "ΔAL > d1·S" in " ".join(m.value for m in formulas.markdown)


def test_a_new_run_fits_again_only_the_families_it_changed(page_env, monkeypatch):
    """After a new run lands, Theory refits its family (and the held-out refits of the group it opens on), not the
    store's other families: neither the fitted ones nor those that cannot be fitted (their refusal is kept)."""
    from specscope.advice import fitting

    fitted: list[int] = []
    fit_family = fitting.fit_family
    monkeypatch.setattr(fitting, "fit_family", lambda rows, *a: fitted.append(len(rows)) or fit_family(rows, *a))
    _run()
    families = len(list(fitting.families(cache_frame())))
    fitted.clear()
    _land_a_run()
    at = _run()
    opened = at.selectbox(key="theory_group").value
    assert "code-editing" in opened and "vLLM 0.32.0" in opened  # the family the run doubled is measured most
    # the run's family, and the leave-one-out refits of the opened group (one per fitted point): not 43 families
    assert 0 < len(fitted) <= 12 < families, (fitted, families)


def test_a_new_run_takes_apart_only_its_own_setups_and_every_fit_equals_one_made_afresh(page_env, monkeypatch):
    """The step's parts (where a group measured at one K takes its cost per token from) are worked out per run's
    setups and kept: after a new run, only the setups it measured, in one pass; the fits put together from what
    was kept equal fitting the store's rows afresh, number for number."""
    from specscope.advice import fitting
    from specscope.analysis import anatomy
    from ui import cache

    taken: list[set] = []
    table = anatomy.table
    monkeypatch.setattr(anatomy, "table", lambda rows, *a: taken.append(set(rows["run_id"])) or table(rows, *a))
    _run()
    assert len(taken) > 1  # the first view: every run's setups
    taken.clear()
    _land_a_run()
    _run()
    assert len(taken) == 1 and "again" in taken[0], taken
    kept, afresh = cache.fits(None), fitting.fit_families(cache_frame())
    assert [f.keys for f in kept] == [f.keys for f in afresh]
    for mine, theirs in zip(kept, afresh):
        assert (mine.alpha, mine.decay, mine.cost) == (theirs.alpha, theirs.decay, theirs.cost)
        pd.testing.assert_frame_equal(mine.groups, theirs.groups)
        pd.testing.assert_frame_equal(mine.rows, theirs.rows)


def _land_a_run() -> None:
    """The bundled CPU code-editing run again, under the run id ``again``, as a sweep writes it."""
    import pyarrow.parquet as pq

    from specscope import settings
    from specscope.results import writing

    bundled = DATA / "results" / "specscope-cpu-code-editing.parquet"
    rows = pq.read_table(bundled).drop_columns(["run_id", "created_at"]).to_pylist()
    writing.write_results(rows, run_id="again", directory=settings.results_dir())


def cache_frame():
    from ui import cache

    return cache.speedup_rows()
