"""A shared dashboard under AppTest: a viewer session gets no start, stop, attach, sweep, upload or
import control; the token (as ?token= or in the sidebar) makes it an operator, never echoed back;
rotating the token makes it a viewer again."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from helpers.apptest_run import run_clean
from helpers.paths import VIEWS
from specscope import access, launch
from specscope.prompts import library
from ui import state
from ui.access import TOKEN_FIELD

pytestmark = pytest.mark.app

OPERATOR_ONLY = {"Start", "Attach", "Clean stale", "Prepare models", "Forget", "Stop", "Start sweep"}


@pytest.fixture
def shared(page_env, monkeypatch):
    monkeypatch.setenv("SPECSCOPE_SHARE", "1")
    with access.acting_as(access.local_user()):
        launch.registry.write_state(
            launch.ServerState(name="team-box", url="http://127.0.0.1:9", attached=True, started_by="CLI user alice")
        )
    return page_env


def _labels(at: AppTest) -> set[str]:
    return {b.label for b in at.button}


def _sign_in_page():
    import streamlit as st

    from ui import access as roles

    roles.sign_in()
    st.write("operator" if roles.is_operator() else "viewer")


def test_servers_page_draws_controls_for_operators_only(shared):
    at = run_clean(AppTest.from_file(str(VIEWS / "servers.py"), default_timeout=60))
    assert not _labels(at) & OPERATOR_ONLY and not at.text_input
    assert "You are a viewer" in at.info[0].value
    assert at.dataframe[0].value.loc[0, "started by"] == "CLI user alice"

    at.session_state[state.ACCESS_PROVEN] = access.digest(access.token())
    run_clean(at)
    assert {"Start", "Attach", "Clean stale", "Forget"} <= _labels(at)

    access.rotate()
    run_clean(at)
    assert not _labels(at) & OPERATOR_ONLY


def test_runs_page_offers_viewers_results_only(shared, no_bundled_results):
    library.save(b'{"prompt": "Count to three."}\n', "mine.jsonl")  # by the local user, an operator
    at = run_clean(AppTest.from_file(str(VIEWS / "runs.py"), default_timeout=60))
    assert not _labels(at) & OPERATOR_ONLY and not at.get("file_uploader")
    assert any("You are a viewer" in info.value for info in at.info)
    at.session_state[state.ACCESS_PROVEN] = access.digest(access.token())
    run_clean(at)
    assert "Start sweep" in _labels(at) and at.get("file_uploader")
    assert "10 MB and 10,000 prompts" in str(at.get("file_uploader")[0].proto.label)


def test_token_in_the_address_makes_an_operator_and_leaves_the_address(shared):
    at = AppTest.from_function(_sign_in_page, default_timeout=30)
    at.query_params["token"] = "not-the-token"
    run_clean(at)
    assert at.markdown[-1].value == "viewer" and "not the operator token" in at.error[0].value
    at.query_params["token"] = access.token()
    run_clean(at)
    assert at.markdown[-1].value == "operator" and "token" not in at.query_params
    assert access.token() not in repr(at.session_state)  # a digest is kept, never the token


def test_token_in_the_sidebar_makes_an_operator_and_is_not_kept(shared):
    at = run_clean(AppTest.from_function(_sign_in_page, default_timeout=30))
    assert at.markdown[-1].value == "viewer"
    at.sidebar.text_input(key=TOKEN_FIELD).input(access.token())
    at.sidebar.button[0].click()
    run_clean(at)
    assert at.markdown[-1].value == "operator"
    assert at.session_state[TOKEN_FIELD] == "" and access.token() not in repr(at.session_state)
    at.sidebar.button(key="access_leave").click()
    run_clean(at)
    assert at.markdown[-1].value == "viewer"
