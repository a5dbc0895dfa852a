"""The Servers page under Streamlit's AppTest: presets and methods, start errors, attach errors, the
server list read from state files (status, log tail shown verbatim), stop, and start progress."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from helpers.apptest_run import run_clean
from helpers.paths import VIEWS
from specscope import launch, settings
from specscope.engine import vllms
from ui.common import plain

pytestmark = pytest.mark.app

PAGE = VIEWS / "servers.py"


def _run(at: AppTest | None = None) -> AppTest:
    return run_clean(at or AppTest.from_file(str(PAGE), default_timeout=60))


def _dead_server(name: str, log_text: str) -> launch.ServerState:
    """The state file of a server whose process has ended, as launch.start leaves it after a crash."""
    log = settings.servers_dir() / f"{name}.log"
    log.write_text(log_text)
    state = launch.ServerState(
        name=name,
        preset="cpu-smollm2",
        method="ngram",
        kind="ngram",
        k=4,
        url="http://127.0.0.1:9",
        port=9,
        pid=2**22 + 7,
        pgid=2**22 + 7,
        argv=["python", "-m", "vllm.entrypoints.openai.api_server"],
        log_path=str(log),
        started_at="2026-01-01T00:00:00+00:00",
    )
    (settings.servers_dir() / f"{name}.json").write_text(state.model_dump_json())
    return state


def _mark_model_prepared() -> None:
    """A prepared-model manifest, so plan() gets past model resolution without a real model."""
    model = Path(os.environ["SPECSCOPE_MODELS"]) / "SmolLM2-135M-Instruct"
    model.mkdir(parents=True)
    (model / "specscope-model.json").write_text("{}")


def test_page_lists_presets_methods_and_no_servers(page_env):
    at = _run()
    assert "cpu-smollm2" in at.selectbox(key="servers_preset").options[0]
    assert at.selectbox(key="servers_method").options == ["none", "ngram", "suffix", "draft_model"]
    assert any("No servers yet" in info.value for info in at.info)
    assert any("not prepared yet" in md.value for md in at.markdown)


def test_k_follows_the_method_range(page_env):
    at = _run()
    at.selectbox(key="servers_method").set_value("ngram")
    at = _run(at)
    k = at.number_input(key="servers_k_cpu-smollm2_ngram")
    assert (k.value, k.min, k.max) == (4, 1, 32)
    at.selectbox(key="servers_method").set_value("none")
    at = _run(at)
    assert not [w for w in at.number_input if w.key.startswith("servers_k_")]


def test_start_on_a_busy_port_shows_one_sentence(page_env):
    if vllms.installed_vllm() is None:
        pytest.skip("vLLM is not installed; run launchers/install.sh")
    _mark_model_prepared()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        at = _run()
        at.selectbox(key="servers_method").set_value("none")
        at.number_input(key="servers_port").set_value(port)
        at = _run(at.button(key="servers_start").click())
    assert [e.value for e in at.error] == [
        f"Port {port} is already in use; pick another with --port or leave it out to get a free one."
    ]


def test_attach_to_nothing_is_an_error(page_env):
    at = _run()
    at.text_input(key="servers_attach_url").input("http://127.0.0.1:9")
    at = _run(at.button(key="servers_attach").click())
    assert "No OpenAI-compatible server answers at http://127.0.0.1:9/v1/models" in at.error[0].value


def test_dead_server_shows_status_and_raw_log_then_stops(page_env):
    _dead_server("cpu-smollm2-ngram-k4", "INFO starting\n<script>alert('x')</script>\nValueError: boom\n")
    at = _run()
    table = at.dataframe[0].value
    assert table.loc[0, "name"] == "cpu-smollm2-ngram-k4" and table.loc[0, "status"] == "exited"
    logs = [c.value for c in at.code]
    assert any("<script>alert('x')</script>" in text and "ValueError: boom" in text for text in logs)
    assert not any("<script>" in md.value for md in at.markdown)
    state = launch.find("cpu-smollm2-ngram-k4")
    assert [e.value for e in at.error] == [plain(launch.death(state))]  # why it ended, shown literally
    assert "ValueError: boom" in launch.death(state)
    at = _run(at.button(key="servers_stop_cpu-smollm2-ngram-k4").click())
    assert not os.path.exists(settings.servers_dir() / "cpu-smollm2-ngram-k4.json")
    assert any("No servers yet" in info.value for info in at.info)


def test_clean_stale_forgets_dead_servers(page_env):
    _dead_server("old-one", "")
    at = _run()
    at = _run(at.button(key="servers_clean").click())
    assert any("Removed old-one." in info.value for info in at.info)


def test_start_reports_progress_and_success(page_env, monkeypatch):
    """launch.start is replaced here to check the page's wiring; tests/integration starts real servers."""
    if vllms.installed_vllm() is None:
        pytest.skip("vLLM is not installed; run launchers/install.sh")
    stages = []

    def start(plan, progress=None, **_):
        for stage, fraction in (("starting", 0.0), ("weights loaded (12 s)", 0.5), ("healthy", 1.0)):
            progress(stage, fraction)
            stages.append(stage)
        return plan.state

    monkeypatch.setattr(launch, "start", start)
    at = _run()
    at.selectbox(key="servers_method").set_value("none")
    _mark_model_prepared()
    at = _run(at.button(key="servers_start").click())
    assert stages == ["starting", "weights loaded (12 s)", "healthy"]
    assert at.success[0].value.startswith("cpu-smollm2-none is healthy at http://127.0.0.1:")
