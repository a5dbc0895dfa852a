"""AppTest of the Explorer's import of a foreign CSV: the page offers the column map itself
(a column per canonical field, or one value for every row), previews, then imports."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from helpers.apptest_run import run_clean
from helpers.paths import CAPTURES, DASHBOARD
from specscope.results.store import Store

pytestmark = pytest.mark.app
MAIN = str(DASHBOARD)
FOREIGN = b"Method,Users,Tok/s,Spec tokens\nnosd,4,100,\nngram,4,130,3\n"


def _texts(at: AppTest) -> str:
    return "\n".join(e.value for kind in (at.info, at.caption, at.success, at.error, at.markdown) for e in kind)


def _select(at: AppTest, label_start: str):
    [box] = [s for s in at.selectbox if s.label.startswith(label_start)]
    return box


def test_foreign_csv_is_mapped_previewed_and_imported_on_the_page(page_env):
    at = run_clean(AppTest.from_file(MAIN, default_timeout=60))
    at.session_state["explorer_import_open"] = True  # the import form is drawn once opened
    run_clean(at)
    at.file_uploader(key="explorer_upload").set_value(("theirs.csv", FOREIGN, "text/csv"))
    run_clean(at)
    assert "--map" not in _texts(at)
    assert "Pick the column that holds each field" in _texts(at)
    assert _select(at, "method").value == "Method"  # guessed from the name
    _select(at, "concurrency").set_value("Users")
    _select(at, "output_throughput").set_value("Tok/s")
    _select(at, "k").set_value("Spec tokens")
    [model] = [t for t in at.text_input if t.label == "model for every row"]
    model.set_value("org/their-model")
    run_clean(at)
    [preview] = [d for d in at.dataframe if "method" in d.value.columns]
    assert preview.value["method"].tolist() == ["none", "ngram"]
    assert preview.value["model"].tolist() == ["org/their-model"] * 2
    assert "Took method 'nosd' as the baseline" in _texts(at)
    [button] = [b for b in at.button if b.label == "Import 2 rows"]
    button.click()
    run_clean(at)
    assert "Imported 2 rows (mapped)." in _texts(at)
    frame = Store().speedup({"model": ["org/their-model"], "method": ["ngram"]})
    assert frame["speedup"].round(3).tolist() == [1.3]


def test_a_missing_required_field_is_one_sentence_and_nothing_is_written(page_env):
    at = run_clean(AppTest.from_file(MAIN, default_timeout=60))
    at.session_state["explorer_import_open"] = True  # the import form is drawn once opened
    run_clean(at)
    at.file_uploader(key="explorer_upload").set_value(("theirs.csv", FOREIGN, "text/csv"))
    run_clean(at)
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "needs a column for" in errors[0] and "\n" not in errors[0]
    assert not [b for b in at.button if b.label.startswith("Import ")]
    assert not (page_env / "results").exists() or not list((page_env / "results").iterdir())


GUIDELLM = CAPTURES / "guidellm_0.8.1_ngram.json"


def test_a_guidellm_report_asks_for_its_method_and_k_then_imports(page_env):
    at = run_clean(AppTest.from_file(MAIN, default_timeout=60))
    at.session_state["explorer_import_open"] = True  # the import form is drawn once opened
    run_clean(at)
    at.file_uploader(key="explorer_upload").set_value((GUIDELLM.name, GUIDELLM.read_bytes(), "application/json"))
    run_clean(at)
    assert "is a guidellm export" in _texts(at)
    [button] = [b for b in at.button if b.label == "Import"]
    assert button.disabled  # no method yet: nothing is guessed
    [method] = [t for t in at.text_input if t.label == "method (required)"]
    method.set_value("ngram")
    [k] = [n for n in at.number_input if n.label.startswith("K ")]
    k.set_value(4)
    [hardware] = [t for t in at.text_input if t.label == "hardware for every row"]
    hardware.set_value("cpu")
    run_clean(at)
    [button] = [b for b in at.button if b.label == "Import"]
    button.click()
    run_clean(at)
    assert "(guidellm-json)." in _texts(at)
    rows = Store().query("SELECT method, k, hardware, source FROM results WHERE source = 'guidellm'")
    assert set(map(tuple, rows.values.tolist())) == {("ngram", 4, "cpu", "guidellm")}
